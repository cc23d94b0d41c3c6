//! `ShapedDevices.csv`, row by row: its cells, rates, addresses and MACs, linted as the module
//! above says, and gathered into circuits (one per Circuit ID).

use super::*;

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
