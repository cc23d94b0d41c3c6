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

mod devices;
pub use devices::read_devices;

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
