//! OpenWrt's UCI files as `uci` reads them: `config TYPE ['NAME']` opens a section, `option KEY
//! 'VALUE'` and `list KEY 'VALUE'` fill it; values may be quoted with `'` or `"`; `#` starts a
//! comment outside quotes. Anything else is an error naming the line and the token.

use super::ImportError;

/// One option or list item, with the line it is on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Opt {
    /// 1-based line.
    pub line: usize,
    /// The key.
    pub key: String,
    /// The value, unquoted.
    pub value: String,
    /// `list` rather than `option`.
    pub list: bool,
}

/// A `config` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// 1-based line of its `config`.
    pub line: usize,
    /// Its type (`queue`, `interface` …).
    pub kind: String,
    /// Its name, if given.
    pub name: Option<String>,
    /// Its options, in order.
    pub options: Vec<Opt>,
}

impl Section {
    /// The last value of option `key`.
    pub fn get(&self, key: &str) -> Option<&Opt> {
        self.options.iter().rev().find(|o| o.key == key && !o.list)
    }
}

/// A line's words, quotes removed; `None` for an unclosed quote.
fn words(line: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let (mut quote, mut any) = (None::<char>, false);
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                any = true;
            }
            (None, '#') => break,
            (None, c) if c.is_whitespace() => {
                if any || !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
                any = false;
            }
            (None, c) => {
                cur.push(c);
                any = true;
            }
        }
    }
    if quote.is_some() {
        return None;
    }
    if any || !cur.is_empty() {
        out.push(cur);
    }
    Some(out)
}

/// Read a UCI file (`file` names it in errors).
pub fn parse(file: &str, text: &str) -> Result<Vec<Section>, ImportError> {
    let mut sections: Vec<Section> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let err = |token: &str, why: &str| ImportError::new(file, line, token, why);
        let w = words(raw).ok_or_else(|| err(raw.trim(), "a quote is not closed"))?;
        let Some(first) = w.first() else { continue };
        match (first.as_str(), w.len()) {
            ("config", 2 | 3) => sections.push(Section {
                line,
                kind: w[1].clone(),
                name: w.get(2).cloned(),
                options: Vec::new(),
            }),
            ("option" | "list", 3) => {
                let s = sections
                    .last_mut()
                    .ok_or_else(|| err(first, "an option before any `config` section"))?;
                s.options.push(Opt {
                    line,
                    key: w[1].clone(),
                    value: w[2].clone(),
                    list: first == "list",
                });
            }
            ("config" | "option" | "list", _) => {
                return Err(err(
                    raw.trim(),
                    "expected `config TYPE ['NAME']`, `option KEY 'VALUE'` or `list KEY 'VALUE'` (quote a value with spaces)",
                ))
            }
            _ => return Err(err(first, "expected config, option or list")),
        }
    }
    Ok(sections)
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn sections_options_lists_quotes_and_comments() {
        let s = parse(
            "f",
            "# sqm\nconfig queue 'eth1'\n\toption interface 'eth1'  # wan\n\toption eqdisc_opts \"nat dual-srchost\"\n\tlist x a\n\tlist x ''\nconfig defaults\n",
        )
        .unwrap();
        assert_eq!(s.len(), 2);
        assert_eq!(
            (s[0].kind.as_str(), s[0].name.as_deref()),
            ("queue", Some("eth1"))
        );
        assert_eq!(s[0].get("interface").unwrap().value, "eth1");
        assert_eq!(s[0].get("eqdisc_opts").unwrap().value, "nat dual-srchost");
        assert_eq!(s[0].options[3].value, "");
        assert!(s[0].options[2].list && s[0].get("x").is_none());
        assert_eq!(s[1].name, None);
    }

    #[test]
    fn bad_lines_name_their_line_and_token() {
        let e = parse("f", "config queue\n\toptoin upload 10\n").unwrap_err();
        assert_eq!((e.line, e.token.as_str()), (2, "optoin"));
        assert!(
            e.to_string().contains("expected config, option or list"),
            "{e}"
        );
        let e = parse("f", "option upload 1\n").unwrap_err();
        assert!(e.to_string().contains("before any `config`"), "{e}");
        let e = parse("f", "config q\n option a 'b\n").unwrap_err();
        assert_eq!(e.line, 2);
        let e = parse("f", "config q\n option a b c\n").unwrap_err();
        assert!(e.why.contains("quote a value"), "{e}");
    }
}
