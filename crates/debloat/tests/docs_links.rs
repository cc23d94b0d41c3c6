//! The README and the book (docs/, built by mdBook) link to each other by relative paths. Every
//! such link must name a file that exists and, where it names a heading (`page.md#heading`), a
//! heading of that page, as GitHub and mdBook make anchors. Web addresses are not followed (no
//! network here). Also: the README stays within the brief's ~200 lines, and every page of docs/ is
//! in the book's table of contents, so nothing written there is unreachable.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The links of one markdown text, outside code fences and inline code: (line, target).
fn links(text: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut fence = false;
    for (n, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
            continue;
        }
        if fence {
            continue;
        }
        let mut code = false;
        let b = line.as_bytes();
        let mut i = 0;
        while i < b.len() {
            match b[i] {
                b'`' => code = !code,
                b']' if !code && b.get(i + 1) == Some(&b'(') => {
                    if let Some(end) = line[i + 2..].find(')') {
                        let target = line[i + 2..i + 2 + end].trim();
                        let target = target.split_whitespace().next().unwrap_or("");
                        out.push((n + 1, target.to_string()));
                        i += 2 + end;
                    }
                }
                _ => {}
            }
            i += 1;
        }
    }
    out
}

/// GitHub's anchor for a heading: lower case, spaces to '-', punctuation but '-' and '_' gone.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    let mut fence = false;
    let mut out = BTreeSet::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        } else if !fence && line.starts_with('#') {
            out.insert(slug(line.trim_start_matches('#')));
        }
    }
    out
}

fn pages() -> Vec<PathBuf> {
    let r = root();
    let mut v = vec![
        r.join("README.md"),
        r.join("BENCHMARKS.md"),
        r.join("ARCHITECTURE.md"),
    ];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(r.join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    v.extend(docs);
    v
}

#[test]
fn every_relative_link_in_the_readme_and_the_book_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read page");
        for (line, target) in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") || target.is_empty() {
                continue;
            }
            checked += 1;
            let (file, anchor) = match target.split_once('#') {
                Some((f, a)) => (f, Some(a)),
                None => (target.as_str(), None),
            };
            let dest = if file.is_empty() {
                page.clone()
            } else {
                page.parent().expect("parent").join(file)
            };
            let name = page
                .strip_prefix(root())
                .unwrap_or(&page)
                .display()
                .to_string();
            if !dest.exists() {
                broken.push(format!("{name}:{line}: `{target}`: no such file"));
                continue;
            }
            if let Some(a) = anchor {
                let dtext = std::fs::read_to_string(&dest).unwrap_or_default();
                if !anchors(&dtext).contains(a) {
                    broken.push(format!("{name}:{line}: `{target}`: no heading #{a} there"));
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} links found: is the parser broken?"
    );
    assert!(
        broken.is_empty(),
        "{} broken links:\n{}",
        broken.len(),
        broken.join("\n")
    );
}

#[test]
fn every_page_of_the_book_is_in_its_contents_and_the_readme_is_short() {
    let r = root();
    let summary = std::fs::read_to_string(r.join("docs/SUMMARY.md")).expect("docs/SUMMARY.md");
    let listed: BTreeSet<String> = links(&summary).into_iter().map(|(_, t)| t).collect();
    for page in pages()
        .into_iter()
        .filter(|p| p.starts_with(r.join("docs")))
    {
        let name = page
            .file_name()
            .expect("name")
            .to_string_lossy()
            .to_string();
        if name != "SUMMARY.md" {
            assert!(
                listed.contains(&name),
                "docs/{name} is not in docs/SUMMARY.md"
            );
        }
    }
    let readme = std::fs::read_to_string(r.join("README.md")).expect("README.md");
    let n = readme.lines().count();
    assert!(
        n <= 200,
        "README.md has {n} lines; the brief allows ~200: move depth into docs/"
    );
    assert!(
        readme.starts_with("# debloat\n\n```sh\ncargo run --release -- demo\ncargo test --workspace --release\n```"),
        "README.md must open with the two commands"
    );
}

#[test]
fn the_link_parser_finds_links_and_skips_code() {
    let t = "a [x](a.md) `[y](b.md)` [z](c.md#h-1)\n```\n[w](d.md)\n```\n";
    let l: Vec<String> = links(t).into_iter().map(|(_, s)| s).collect();
    assert_eq!(l, ["a.md", "c.md#h-1"]);
    assert_eq!(
        slug(" `debloat sim`: flent's tests, in time"),
        "debloat-sim-flents-tests-in-time"
    );
}
