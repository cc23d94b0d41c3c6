//! The report page: one self-contained HTML file (styles and SVG plots inline, PNG copies beside
//! it) that opens with no network.

use crate::flent::Dataset;
use crate::plot::Plot;
use crate::summary::RunSummary;
use crate::table::{cells, HEADINGS};
use std::fmt::Write;

/// Escape text for HTML.
pub fn escape(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

const STYLE: &str = "body{font-family:system-ui,'DejaVu Sans',sans-serif;margin:2em auto;max-width:1150px;color:#222}\
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:1.6em}\
table{border-collapse:collapse;margin:.5em 0}td,th{padding:.3em .7em;border-bottom:1px solid #ddd;text-align:right}\
th:first-child,td:first-child{text-align:left}th small{color:#777;font-weight:normal}\
figure{margin:1em 0}figcaption{color:#555;font-size:.9em}svg{max-width:100%;height:auto}\
.meta{color:#666;font-size:.9em}h3{font-size:1em;margin-bottom:.2em}\
.scroll{overflow-x:auto;max-width:100%}";

/// The whole page.
pub fn page(title: &str, runs: &[Dataset], sums: &[RunSummary], plots: &[Plot]) -> String {
    let mut h = String::new();
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>{t}</title><style>{STYLE}</style></head><body>\n<h1>{t}</h1>\n",
        t = escape(title)
    );
    h.push_str(
        "<h2>Summary</h2>\n<div class=\"scroll\"><table id=\"summary\"><thead><tr><th>run</th>",
    );
    for (name, unit) in HEADINGS {
        let _ = write!(h, "<th>{name}<br><small>{unit}</small></th>");
    }
    h.push_str("</tr></thead><tbody>\n");
    for s in sums {
        let _ = write!(h, "<tr><td>{}</td>", escape(&s.label));
        for c in cells(s) {
            let _ = write!(h, "<td>{}</td>", escape(&c));
        }
        h.push_str("</tr>\n");
    }
    h.push_str(
        "</tbody></table></div>\n<p class=\"meta\">Throughput: mean of each flow over the load window \
         (flent's default cut: 5 s after the start to 5 s before the end), summed per direction. \
         Latency: every latency probe's samples in that window; idle: before the load; induced: \
         median under load minus idle median.</p>\n",
    );
    let verdicts: Vec<(&str, &crate::verdict::Verdict)> = runs
        .iter()
        .filter_map(|d| d.verdict.as_ref().map(|v| (d.label.as_str(), v)))
        .collect();
    if !verdicts.is_empty() {
        h.push_str("<h2 id=\"grade\">Bufferbloat grade and responsiveness</h2>\n");
        h.push_str(&crate::verdict::html(&verdicts));
    }
    for p in plots {
        let _ = write!(
            h,
            "<h2 id=\"{n}\">{c}</h2>\n<figure>{svg}<figcaption>{c} \
             (<a href=\"{n}.png\">PNG</a>, <a href=\"{n}.svg\">SVG</a>)</figcaption></figure>\n",
            n = p.name,
            c = escape(&p.caption),
            svg = strip_xml_decl(&p.svg)
        );
    }
    if runs.iter().any(|d| d.wifi.is_some()) {
        h.push_str("<h2 id=\"stations\">Wi-Fi stations</h2>\n");
        for d in runs {
            if let Some(w) = &d.wifi {
                h.push_str(&crate::wifi::html(&d.label, w));
            }
        }
    }
    h.push_str("<h2>Runs</h2>\n<div class=\"scroll\"><table><thead><tr><th>run</th><th>test</th><th>file version</th><th>length<br><small>s</small></th><th>step<br><small>s</small></th></tr></thead><tbody>\n");
    for d in runs {
        let _ = writeln!(
            h,
            "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            escape(&d.label),
            escape(&d.test),
            d.version,
            d.length,
            d.step
        );
    }
    h.push_str("</tbody></table></div>\n<p class=\"meta\">Made by debloat from flent data files.</p>\n</body></html>\n");
    h
}

/// An SVG document inlined in HTML must not carry an XML declaration.
fn strip_xml_decl(svg: &str) -> &str {
    match svg.find("<svg") {
        Some(i) => &svg[i..],
        None => svg,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn escapes_markup() {
        assert_eq!(
            super::escape("<a & \"b\">"),
            "&lt;a &amp; &quot;b&quot;&gt;"
        );
        assert_eq!(super::strip_xml_decl("<?xml?><svg/>"), "<svg/>");
    }
}
