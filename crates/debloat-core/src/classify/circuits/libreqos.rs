//! LibreQoS's two inputs, read as LibreQoS reads them, and linted before anything is used:
//!
//! * `network.json`: nested nodes (sites, access points …), each `{"downloadBandwidthMbps": N,
//!   "uploadBandwidthMbps": N, "children": {…}}`, optionally `"virtual": true` (grouping only:
//!   its children are shaped under its nearest real ancestor, as LibreQoS 2.0 does); `{}` for a
//!   flat network. Node names are unique across the whole tree.
//! * `ShapedDevices.csv`: a header, then one device per row — `Circuit ID, Circuit Name, Device
//!   ID, Device Name, Parent Node, MAC, IPv4, IPv6, Download Min Mbps, Upload Min Mbps, Download
//!   Max Mbps, Upload Max Mbps, Comment` and an optional 14th `sqm` (`cake`, `fq_codel`, `none`,
//!   or `down/up` of those). Rows starting with `#` are comments. Several rows with one Circuit
//!   ID are one circuit's devices (the first row's rates count; another parent is an error, as
//!   in LibreQoS). IPv4/IPv6 cells list addresses or prefixes separated by commas.
//!
//! Lint ([`Finding`]): an error refuses both files whole (the running tree is kept); a warning
//! says what was done about it. Errors: a row with the wrong number of cells, an empty Circuit
//! ID, an address that does not parse, a device with no address and no MAC, one address in two
//! circuits, a rate that is empty, not a number, a minimum under 1 Mbit/s or a maximum under 2
//! (LibreQoS's limits), a minimum above the maximum, a parent that is not a node, a circuit whose
//! devices name different parents, a node name given twice, a node without rates, JSON that
//! does not parse. Warnings: a cell with spaces around it (trimmed), overlapping prefixes in
//! different circuits (the longest match wins), a node or circuit faster than its parent (held to
//! the parent's, as LibreQoS does), a circuit without a parent node (under the root), minimums
//! that add up past their parent's rate (set to 1 Mbit/s, LibreQoS's fail-safe), devices of one
//! circuit with other rates than its first (the first's kept).

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt;

/// One lint result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file, as named by the caller.
    pub file: String,
    /// 1-based line.
    pub line: usize,
    /// An error refuses the files; a warning does not.
    pub error: bool,
    /// What and why, and what was done.
    pub text: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = if self.error { "error" } else { "warning" };
        write!(f, "{}:{}: {kind}: {}", self.file, self.line, self.text)
    }
}

/// A node of `network.json`.
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Its name (the key).
    pub name: String,
    /// Its parent's index in [`Plan::nodes`].
    pub parent: Option<usize>,
    /// Mbit/s, after being held to the parent's.
    pub down_mbps: f64,
    /// Mbit/s.
    pub up_mbps: f64,
    /// Grouping only: not shaped.
    pub is_virtual: bool,
    /// Where its key first appears.
    pub line: usize,
}

/// One device of a circuit.
#[derive(Clone, Debug, PartialEq)]
pub struct Device {
    /// Device ID.
    pub id: String,
    /// Device Name.
    pub name: String,
    /// Its MAC, when given.
    pub mac: Option<[u8; 6]>,
    /// Its addresses and prefixes.
    pub nets: Vec<IpNet>,
    /// Its row.
    pub line: usize,
}

/// A subscriber's service: one or more devices.
#[derive(Clone, Debug, PartialEq)]
pub struct Circuit {
    /// Circuit ID.
    pub id: String,
    /// Circuit Name.
    pub name: String,
    /// Its parent node's index, None for the root.
    pub parent: Option<usize>,
    /// Mbit/s: download min and max, upload min and max.
    pub down_min: f64,
    /// Download max, Mbit/s.
    pub down_max: f64,
    /// Upload min, Mbit/s.
    pub up_min: f64,
    /// Upload max, Mbit/s.
    pub up_max: f64,
    /// The `sqm` cell: the download and upload leaves (`cake`, `fq_codel`, `none`), None for
    /// the default.
    pub sqm: (Option<String>, Option<String>),
    /// Its devices.
    pub devices: Vec<Device>,
    /// Comment.
    pub comment: String,
    /// Its first row.
    pub line: usize,
}

/// Both files, read and linted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// Nodes, parents before children.
    pub nodes: Vec<Node>,
    /// Circuits in the order of their first row.
    pub circuits: Vec<Circuit>,
    /// What the lint found.
    pub findings: Vec<Finding>,
}

impl Plan {
    /// True when some finding is an error: the files must be refused.
    pub fn has_errors(&self) -> bool {
        self.findings.iter().any(|f| f.error)
    }
}

struct Lint<'a> {
    file: &'a str,
    out: &'a mut Vec<Finding>,
}

impl Lint<'_> {
    fn error(&mut self, line: usize, text: String) {
        self.out.push(Finding {
            file: self.file.into(),
            line,
            error: true,
            text,
        });
    }
    fn warn(&mut self, line: usize, text: String) {
        self.out.push(Finding {
            file: self.file.into(),
            line,
            error: false,
            text,
        });
    }
}

/// Read `network.json` (named `file` in findings) into `plan.nodes`.
pub fn read_network(plan: &mut Plan, file: &str, text: &str) {
    let mut lint = Lint {
        file,
        out: &mut plan.findings,
    };
    let v: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            lint.error(e.line(), format!("not valid JSON: {e}"));
            return;
        }
    };
    let Some(top) = v.as_object() else {
        lint.error(
            1,
            "expected an object of nodes ({} for a flat network)".into(),
        );
        return;
    };
    let mut names: BTreeMap<String, usize> = BTreeMap::new();
    walk(
        top,
        None,
        text,
        &mut lint,
        &mut plan.nodes,
        &mut names,
        (f64::INFINITY, f64::INFINITY),
    );
}

/// The line where `"key"` first appears.
fn line_of(text: &str, key: &str) -> usize {
    let needle = format!("\"{key}\"");
    text.find(&needle)
        .map_or(1, |at| text[..at].lines().count().max(1))
}

fn walk(
    obj: &serde_json::Map<String, Value>,
    parent: Option<usize>,
    text: &str,
    lint: &mut Lint<'_>,
    nodes: &mut Vec<Node>,
    names: &mut BTreeMap<String, usize>,
    cap: (f64, f64),
) {
    for (name, body) in obj {
        let line = line_of(text, name);
        if name.trim() != name {
            lint.warn(
                line,
                format!("node name \"{name}\" has spaces around it; trimmed"),
            );
        }
        let name = name.trim().to_string();
        if names.contains_key(&name) {
            lint.error(
                line,
                format!("node name \"{name}\" is given twice: names are unique across the tree"),
            );
            continue;
        }
        let rate = |k: &str| body.get(k).and_then(Value::as_f64);
        let (Some(down), Some(up)) = (rate("downloadBandwidthMbps"), rate("uploadBandwidthMbps"))
        else {
            lint.error(line, format!("node \"{name}\" needs downloadBandwidthMbps and uploadBandwidthMbps as numbers"));
            continue;
        };
        if down > cap.0 || up > cap.1 {
            lint.warn(line, format!("node \"{name}\" ({down}/{up} Mbit/s) is faster than its parent ({}/{}): held to the parent's", cap.0, cap.1));
        }
        let (down, up) = (down.min(cap.0), up.min(cap.1));
        let is_virtual = body
            .get("virtual")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let me = nodes.len();
        names.insert(name.clone(), me);
        nodes.push(Node {
            name,
            parent,
            down_mbps: down,
            up_mbps: up,
            is_virtual,
            line,
        });
        if let Some(kids) = body.get("children").and_then(Value::as_object) {
            walk(kids, Some(me), text, lint, nodes, names, (down, up));
        }
    }
}

/// The 13 columns (and the optional 14th) LibreQoS's header names.
const COLUMNS: usize = 13;

/// Read `ShapedDevices.csv` (named `file` in findings) into `plan.circuits`, against the
/// nodes already read.
pub fn read_devices(plan: &mut Plan, file: &str, text: &str) {
    let names: BTreeMap<&str, usize> = plan
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.name.as_str(), i))
        .collect();
    let mut lint = Lint {
        file,
        out: &mut plan.findings,
    };
    let mut rdr = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .comment(Some(b'#'))
        .from_reader(text.as_bytes());
    let mut by_id: BTreeMap<String, usize> = BTreeMap::new();
    let mut seen_nets: BTreeMap<IpNet, usize> = BTreeMap::new();
    let mut header = true;
    for rec in rdr.records() {
        let rec = match rec {
            Ok(r) => r,
            Err(e) => {
                let line = e.position().map_or(1, |p| p.line() as usize);
                lint.error(line, format!("not a CSV row: {e}"));
                continue;
            }
        };
        let line = rec.position().map_or(1, |p| p.line() as usize);
        if header {
            header = false;
            if rec.get(0).is_some_and(|c| c.trim() == "Circuit ID") {
                continue;
            }
        }
        if rec.len() != COLUMNS && rec.len() != COLUMNS + 1 {
            lint.error(
                line,
                format!(
                    "{} cells; a row has 13 (Circuit ID … Comment) or 14 (with sqm)",
                    rec.len()
                ),
            );
            continue;
        }
        let cells: Vec<&str> = rec.iter().collect();
        if let Some(c) = row(&cells, line, &names, &mut lint, &mut seen_nets) {
            add(c, &mut by_id, &mut plan.circuits, &mut lint);
        }
    }
}

/// One cell, trimmed, with a warning when it had spaces around it.
fn cell<'a>(cells: &[&'a str], i: usize, what: &str, line: usize, lint: &mut Lint<'_>) -> &'a str {
    let raw = cells.get(i).copied().unwrap_or("");
    let t = raw.trim();
    if t != raw && !t.is_empty() {
        lint.warn(
            line,
            format!("{what} \"{raw}\" has spaces around it; trimmed"),
        );
    }
    t
}

fn rate(
    cells: &[&str],
    i: usize,
    what: &str,
    min: f64,
    line: usize,
    lint: &mut Lint<'_>,
) -> Option<f64> {
    let v = cell(cells, i, what, line, lint);
    match v.parse::<f64>() {
        Ok(r) if r.is_finite() && r >= min => Some(r),
        Ok(_) => {
            lint.error(
                line,
                format!("{what} \"{v}\": at least {min} Mbit/s (LibreQoS's limit)"),
            );
            None
        }
        Err(_) if v.is_empty() => {
            lint.error(line, format!("{what} is empty: give it in Mbit/s"));
            None
        }
        Err(_) => {
            lint.error(line, format!("{what} \"{v}\" is not a number of Mbit/s"));
            None
        }
    }
}

fn nets(
    cells: &[&str],
    i: usize,
    what: &str,
    v6: bool,
    line: usize,
    lint: &mut Lint<'_>,
) -> Vec<IpNet> {
    let v = cell(cells, i, what, line, lint);
    let mut out = Vec::new();
    for item in v.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let parsed = if v6 {
            item.parse::<Ipv6Net>()
                .or_else(|_| item.parse::<std::net::Ipv6Addr>().map(Ipv6Net::from))
                .map(IpNet::V6)
                .ok()
        } else {
            item.parse::<Ipv4Net>()
                .or_else(|_| item.parse::<std::net::Ipv4Addr>().map(Ipv4Net::from))
                .map(IpNet::V4)
                .ok()
        };
        match parsed {
            Some(n) => out.push(n.trunc()),
            None => lint.error(
                line,
                format!(
                    "{what} \"{item}\" is not an {} address or prefix",
                    if v6 { "IPv6" } else { "IPv4" }
                ),
            ),
        }
    }
    out
}

fn mac(s: &str) -> Option<[u8; 6]> {
    let parts: Vec<&str> = s.split([':', '-']).collect();
    if parts.len() != 6 {
        return None;
    }
    let mut m = [0u8; 6];
    for (b, p) in m.iter_mut().zip(parts) {
        *b = u8::from_str_radix(p, 16).ok()?;
    }
    Some(m)
}

/// A row's MAC and addresses, each checked, and each address new to the file.
fn addresses(
    cells: &[&str],
    line: usize,
    lint: &mut Lint<'_>,
    seen: &mut BTreeMap<IpNet, usize>,
) -> (Option<[u8; 6]>, Vec<IpNet>) {
    let mac_cell = cell(cells, 5, "MAC", line, lint);
    let mac = match mac_cell {
        "" => None,
        m => match mac(m) {
            Some(x) => Some(x),
            None => {
                lint.error(line, format!("MAC \"{m}\" is not six hexadecimal bytes"));
                None
            }
        },
    };
    let mut all = nets(cells, 6, "IPv4", false, line, lint);
    all.extend(nets(cells, 7, "IPv6", true, line, lint));
    if all.is_empty() && mac.is_none() {
        lint.error(
            line,
            "no IPv4, IPv6 or MAC: nothing would reach this circuit".into(),
        );
    }
    for n in &all {
        if let Some(first) = seen.insert(*n, line) {
            lint.error(
                line,
                format!("{n} is also on line {first}: an address belongs to one circuit"),
            );
        }
    }
    (mac, all)
}

/// One row as a one-device circuit.
fn row(
    cells: &[&str],
    line: usize,
    names: &BTreeMap<&str, usize>,
    lint: &mut Lint<'_>,
    seen: &mut BTreeMap<IpNet, usize>,
) -> Option<Circuit> {
    // Every mistake of the row is named before it is given up.
    let errors = |lint: &Lint<'_>| lint.out.iter().filter(|f| f.error).count();
    let before = errors(lint);
    let id = cell(cells, 0, "Circuit ID", line, lint).to_string();
    if id.is_empty() {
        lint.error(line, "Circuit ID is empty: every circuit needs one".into());
    }
    let parent = match cell(cells, 4, "Parent Node", line, lint) {
        "" => None,
        p => {
            let found = names.get(p).copied();
            if found.is_none() {
                lint.error(
                    line,
                    format!("Parent Node \"{p}\" is not a node of network.json"),
                );
            }
            found
        }
    };
    let (mac, all) = addresses(cells, line, lint, seen);
    let r = |i, what, min, lint: &mut Lint<'_>| rate(cells, i, what, min, line, lint);
    let (dmin, umin) = (
        r(8, "Download Min Mbps", 1.0, lint),
        r(9, "Upload Min Mbps", 1.0, lint),
    );
    let (dmax, umax) = (
        r(10, "Download Max Mbps", 2.0, lint),
        r(11, "Upload Max Mbps", 2.0, lint),
    );
    let sqm = sqm(cells.get(13).map(|s| s.trim()).unwrap_or(""), line, lint);
    let (dmin, umin, dmax, umax) = (dmin?, umin?, dmax?, umax?);
    if dmin > dmax || umin > umax {
        lint.error(
            line,
            format!("a minimum above its maximum ({dmin}/{umin} against {dmax}/{umax} Mbit/s)"),
        );
    }
    if errors(lint) > before {
        return None;
    }
    Some(Circuit {
        id,
        name: cell(cells, 1, "Circuit Name", line, lint).to_string(),
        parent,
        down_min: dmin,
        down_max: dmax,
        up_min: umin,
        up_max: umax,
        sqm,
        devices: vec![Device {
            id: cell(cells, 2, "Device ID", line, lint).to_string(),
            name: cell(cells, 3, "Device Name", line, lint).to_string(),
            mac,
            nets: all,
            line,
        }],
        comment: cell(cells, 12, "Comment", line, lint).to_string(),
        line,
    })
}

/// The `sqm` cell: one token for both directions or `down/up`, each `cake`, `fq_codel`, `none`
/// or empty (the default).
fn sqm(v: &str, line: usize, lint: &mut Lint<'_>) -> (Option<String>, Option<String>) {
    let one = |t: &str, lint: &mut Lint<'_>| match t.trim() {
        "" => None,
        x @ ("cake" | "fq_codel" | "none") => Some(x.to_string()),
        x => {
            lint.error(
                line,
                format!("sqm \"{x}\": cake, fq_codel or none (or down/up of those)"),
            );
            None
        }
    };
    match v.split_once('/') {
        Some((d, u)) => (one(d, lint), one(u, lint)),
        None => {
            let b = one(v, lint);
            (b.clone(), b)
        }
    }
}

/// A row joins its circuit (the first row's rates and parent count).
fn add(
    c: Circuit,
    by_id: &mut BTreeMap<String, usize>,
    circuits: &mut Vec<Circuit>,
    lint: &mut Lint<'_>,
) {
    let Some(&i) = by_id.get(&c.id) else {
        by_id.insert(c.id.clone(), circuits.len());
        circuits.push(c);
        return;
    };
    let first = &mut circuits[i];
    if first.parent != c.parent {
        lint.error(
            c.line,
            format!(
                "circuit {} is under another parent on line {}: a circuit's devices share one",
                c.id, first.line
            ),
        );
        return;
    }
    if (first.down_min, first.down_max, first.up_min, first.up_max)
        != (c.down_min, c.down_max, c.up_min, c.up_max)
    {
        lint.warn(c.line, format!("circuit {}'s rates differ from its first device's (line {}): the first's are used, as in LibreQoS", c.id, first.line));
    }
    first.devices.extend(c.devices);
}

/// The checks across both files: circuits faster than their parent (held to it), circuits
/// without a parent, overlapping prefixes, minimums past their parent's rate.
pub fn cross_check(plan: &mut Plan, devices_file: &str) {
    let mut lint = Lint {
        file: devices_file,
        out: &mut plan.findings,
    };
    let mut mins: BTreeMap<Option<usize>, (f64, f64)> = BTreeMap::new();
    for c in &mut plan.circuits {
        let Some(p) = c.parent else {
            lint.warn(
                c.line,
                format!(
                    "circuit {} has no Parent Node: it is shaped under the root",
                    c.id
                ),
            );
            continue;
        };
        let n = &plan.nodes[p];
        if c.down_max > n.down_mbps || c.up_max > n.up_mbps {
            lint.warn(c.line, format!("circuit {} ({}/{} Mbit/s) is faster than its node {} ({}/{}): held to the node's", c.id, c.down_max, c.up_max, n.name, n.down_mbps, n.up_mbps));
            c.down_max = c.down_max.min(n.down_mbps);
            c.up_max = c.up_max.min(n.up_mbps);
            c.down_min = c.down_min.min(c.down_max);
            c.up_min = c.up_min.min(c.up_max);
        }
        let e = mins.entry(Some(p)).or_default();
        e.0 += c.down_min;
        e.1 += c.up_min;
    }
    for (p, (d, u)) in mins {
        let Some(p) = p else { continue };
        let n = &plan.nodes[p];
        if d > n.down_mbps || u > n.up_mbps {
            lint.warn(n.line, format!("the minimums of node {}'s circuits add up to {d}/{u} Mbit/s, past its {}/{}: set to 1 Mbit/s, LibreQoS's fail-safe", n.name, n.down_mbps, n.up_mbps));
            for c in plan.circuits.iter_mut().filter(|c| c.parent == Some(p)) {
                c.down_min = 1.0;
                c.up_min = 1.0;
            }
        }
    }
    overlaps(plan, devices_file);
}

/// Prefixes of different circuits inside one another: a warning each (the longest wins).
fn overlaps(plan: &mut Plan, file: &str) {
    let mut all: Vec<(IpNet, usize, usize)> = Vec::new();
    for (ci, c) in plan.circuits.iter().enumerate() {
        for d in &c.devices {
            all.extend(d.nets.iter().map(|n| (*n, ci, d.line)));
        }
    }
    all.sort_by_key(|e| (e.0.network(), e.0.prefix_len()));
    let mut lint = Lint {
        file,
        out: &mut plan.findings,
    };
    let mut open: Vec<(IpNet, usize, usize)> = Vec::new();
    for e in all {
        open.retain(|o| o.0.contains(&e.0.network()));
        if let Some(o) = open.iter().find(|o| o.1 != e.1) {
            lint.warn(
                e.2,
                format!(
                    "{} lies inside {} (line {}) of another circuit: the longer prefix wins",
                    e.0, o.0, o.2
                ),
            );
        }
        open.push(e);
    }
}
