//! sqm-scripts' `/etc/config/sqm` as a gateway setup. sqm shapes one interface: upload on its
//! egress, download on an IFB fed from its ingress; here those are the gateway's egress and
//! ingress disciplines. Per script, as sqm-scripts builds its `tc` commands:
//!
//! * `piece_of_cake.qos`: cake `besteffort` both ways. Egress gets no `nat`: the script appends
//!   `besteffort` to a misspelt variable (`EGRESSS_CAKE_OPTS`), dropping the default `diffserv3
//!   nat`; ingress keeps `diffserv3 nat` and then `besteffort` (the last diffserv word wins).
//! * `layer_cake.qos`: cake `diffserv3 nat` both ways; ingress adds `besteffort` when
//!   `squash_ingress` is 1 (its default), `wash` when `squash_dscp` is 1 (default).
//! * `simple.qos` (HTB with three fq_codel tiers by DSCP) and `simplest.qos` (one fq_codel
//!   under HTB): the same HTB tree as an `htb` spec, leaves and all (`sqm_htb.rs`); with `qdisc
//!   cake`, the scripts' own cake branches.
//! * `simplest_tbf.qos` (one fq_codel under TBF): cake `besteffort flows` at the same rate, with a
//!   warning.
//!
//! Link layer (sqm's `linklayer_adaptation_mechanism` "default" or "cake" with cake): `atm` and
//! `overhead N mpu M` for `linklayer atm`, `overhead N mpu M` for `ethernet`, nothing for
//! `none`. Rates are sqm's kbit/s; 0 leaves that direction unshaped (fq_codel). `iqdisc_opts`
//! / `eqdisc_opts` are appended as sqm appends them. The first enabled `queue` section is used.

use super::uci::{self, Section};
use super::{spec, ImportError, Setup};
use debloat_core::QdiscSpec;

/// Options read (and the ones only LuCI uses, which change nothing here).
const KNOWN: &[&str] = &[
    "enabled",
    "interface",
    "download",
    "upload",
    "qdisc",
    "script",
    "linklayer",
    "overhead",
    "tcMPU",
    "tcMTU",
    "tcTSIZE",
    "linklayer_adaptation_mechanism",
    "linklayer_advanced",
    "qdisc_advanced",
    "qdisc_really_really_advanced",
    "squash_dscp",
    "squash_ingress",
    "ingress_ecn",
    "egress_ecn",
    "ilimit",
    "elimit",
    "itarget",
    "etarget",
    "target",
    "iqdisc_opts",
    "eqdisc_opts",
    "shaper_burst",
    "htb_quantum_function",
    "debug_logging",
    "verbosity",
    "shaper",
];

struct Q<'a> {
    file: &'a str,
    s: &'a Section,
    warnings: Vec<String>,
}

impl<'a> Q<'a> {
    fn get(&self, k: &str) -> Option<&'a str> {
        self.s
            .get(k)
            .map(|o| o.value.as_str())
            .filter(|v| !v.is_empty())
    }
    fn line(&self, k: &str) -> usize {
        self.s.get(k).map_or(self.s.line, |o| o.line)
    }
    fn num(&self, k: &str, default: u64) -> Result<u64, ImportError> {
        match self.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                ImportError::new(
                    self.file,
                    self.line(k),
                    v,
                    &format!("{k}: expected a whole number"),
                )
            }),
        }
    }
    /// A rate in kbit/s (sqm's `upload`, `download`), 0 when absent; one whose bit/s do not fit
    /// 64 bits (over 18 Pbit/s) is an error, not an overflow further on.
    fn kbps(&self, k: &str) -> Result<u64, ImportError> {
        let v = self.num(k, 0)?;
        if v.checked_mul(1000).is_none() {
            let got = self.get(k).unwrap_or("");
            let why = format!("{k}: {v} kbit/s is beyond any link; give the rate in kbit/s");
            return Err(ImportError::new(self.file, self.line(k), got, &why));
        }
        Ok(v)
    }
    fn flag(&self, k: &str, default: bool) -> bool {
        self.get(k).map_or(default, |v| v == "1")
    }
    fn warn(&mut self, k: &str, why: &str) {
        let v = self.get(k).unwrap_or("");
        self.warnings
            .push(format!("{}:{}: {k} '{v}': {why}", self.file, self.line(k)));
    }
}

/// sqm's `linklayer`: none (the default), ethernet or atm.
fn linklayer<'a>(q: &Q<'a>) -> Result<&'a str, ImportError> {
    let layer = q.get("linklayer").unwrap_or("none");
    if !matches!(layer, "none" | "ethernet" | "atm") {
        let line = q.line("linklayer");
        return Err(ImportError::new(
            q.file,
            line,
            layer,
            "linklayer: expected none, ethernet or atm",
        ));
    }
    Ok(layer)
}

/// The link-layer words for cake.
fn lla(q: &mut Q<'_>) -> Result<String, ImportError> {
    let llam = q.get("linklayer_adaptation_mechanism").unwrap_or("default");
    let layer = linklayer(q)?;
    if layer == "none" {
        return Ok(String::new());
    }
    if !matches!(llam, "default" | "cake") {
        q.warn("linklayer_adaptation_mechanism", "debloat has no tc stab or HTB link-layer tables; cake's own overhead compensation is used instead");
    }
    for k in ["tcMTU", "tcTSIZE"] {
        if q.get(k).is_some() {
            q.warn(k, "only tc's size tables use it; cake needs no table");
        }
    }
    let (overhead, mpu) = (q.num("overhead", 0)?, q.num("tcMPU", 0)?);
    let atm = if layer == "atm" { "atm " } else { "" };
    Ok(format!("{atm}overhead {overhead} mpu {mpu}"))
}

/// The egress and ingress cake words for the section's script.
fn words(q: &mut Q<'_>, lla: &str) -> Result<(String, String), ImportError> {
    let script = q.get("script").unwrap_or("simple.qos").to_string();
    let (wash, squash) = (q.flag("squash_dscp", true), q.flag("squash_ingress", true));
    let (e, mut i) = match script.as_str() {
        "piece_of_cake.qos" => (
            format!("{lla} besteffort"),
            format!("{lla} diffserv3 nat besteffort"),
        ),
        "layer_cake.qos" => {
            let i = format!(
                "{lla} diffserv3 nat{}",
                if squash { " besteffort" } else { "" }
            );
            (format!("{lla} diffserv3 nat"), i)
        }
        "simplest_tbf.qos" => {
            q.warn("script", "TBF with fq_codel is not imported as such: cake besteffort flows at the same rate instead (per-flow queues as fq_codel's, one shaper)");
            (
                format!("{lla} besteffort flows"),
                format!("{lla} besteffort flows"),
            )
        }
        // With cake as the qdisc, simple.qos and simplest.qos run cake alone.
        "simplest.qos" => (format!("{lla} besteffort"), format!("{lla} besteffort")),
        "simple.qos" => {
            let i = if squash || wash { " besteffort" } else { "" };
            (lla.to_string(), format!("{lla}{i}"))
        }
        other => {
            let line = q.line("script");
            return Err(ImportError::new(q.file, line, other, "script: debloat imports piece_of_cake.qos, layer_cake.qos, simple.qos, simplest.qos and simplest_tbf.qos"));
        }
    };
    // `squash_dscp` zeroes DSCP on ingress (cake's `wash`; simple.qos does it with a filter).
    if wash {
        i.push_str(" wash");
    }
    Ok((e, i))
}

/// Warnings for what the imported setup takes no notice of (`htb`: sqm's HTB tree was built,
/// whose leaves take the qdisc, limits, targets and ECN words).
fn unmapped(q: &mut Q<'_>, htb: bool) {
    if htb {
        unknown(q);
        return;
    }
    if let Some(d) = q.get("qdisc").filter(|d| *d != "cake").map(str::to_string) {
        q.warn(
            "qdisc",
            &format!("{d} under sqm's shaper has no equivalent; cake shapes and queues instead"),
        );
    }
    for k in ["ingress_ecn", "egress_ecn"] {
        if q.get(k) == Some("NOECN") {
            q.warn(
                k,
                "cake always marks ECN-capable packets instead of dropping them",
            );
        }
    }
    for (k, why) in [
        (
            "ilimit",
            "fq_codel's packet limit; cake sizes its queue by memory",
        ),
        (
            "elimit",
            "fq_codel's packet limit; cake sizes its queue by memory",
        ),
        (
            "itarget",
            "fq_codel's target; cake derives its target from `rtt`",
        ),
        (
            "etarget",
            "fq_codel's target; cake derives its target from `rtt`",
        ),
        (
            "target",
            "fq_codel's target; cake derives its target from `rtt`",
        ),
        ("shaper_burst", "HTB's burst; cake's shaper has none"),
        (
            "shaper",
            "sqm-scripts does not read it (the script decides the shaper)",
        ),
        (
            "htb_quantum_function",
            "HTB's quantum; cake's shaper has none",
        ),
    ] {
        if q.get(k).is_some_and(|v| v != "auto") {
            q.warn(k, &format!("not used: {why}"));
        }
    }
    unknown(q);
}

/// Options sqm-scripts does not know.
fn unknown(q: &mut Q<'_>) {
    let unknown: Vec<String> =
        q.s.options
            .iter()
            .filter(|o| !KNOWN.contains(&o.key.as_str()))
            .map(|o| {
                format!(
                    "{}:{}: {} '{}': unknown to sqm-scripts; ignored",
                    q.file, o.line, o.key, o.value
                )
            })
            .collect();
    q.warnings.extend(unknown);
}

/// Import sqm-scripts' UCI file (`file` names it in messages).
pub fn import(file: &str, text: &str) -> Result<Setup, ImportError> {
    let sections = uci::parse(file, text)?;
    let queues: Vec<&Section> = sections.iter().filter(|s| s.kind == "queue").collect();
    let Some(&s) = queues
        .iter()
        .find(|s| s.get("enabled").is_some_and(|o| o.value == "1"))
        .or(queues.first())
    else {
        return Err(ImportError::new(
            file,
            1,
            "",
            "no `config queue` section: is this /etc/config/sqm?",
        ));
    };
    let mut q = Q {
        file,
        s,
        warnings: Vec::new(),
    };
    if !q.flag("enabled", false) {
        q.warnings.push(format!(
            "{file}:{}: this queue is not enabled in the file; imported anyway",
            s.line
        ));
    }
    for other in queues.iter().filter(|o| o.line != s.line) {
        q.warnings.push(format!(
            "{file}:{}: another queue section ({}); debloat runs one: give it its own file",
            other.line,
            other.name.as_deref().unwrap_or("unnamed")
        ));
    }
    let (up, down) = (q.kbps("upload")?, q.kbps("download")?);
    let script = q.get("script").unwrap_or("simple.qos");
    let htb = matches!(script, "simple.qos" | "simplest.qos")
        && !q.get("qdisc").unwrap_or("fq_codel").starts_with("cake");
    let (egress, ingress) = if htb {
        htb_sides(&mut q, up, down)?
    } else {
        cake_sides(&mut q, up, down)?
    };
    unmapped(&mut q, htb);
    Ok(Setup {
        wan: q.get("interface").map(str::to_string),
        egress: Some(egress),
        ingress: Some(ingress),
        classify: None,
        warnings: q.warnings,
    })
}

/// The two directions as cake: `cake bandwidth R` with the script's words (fq_codel where a
/// rate is 0).
fn cake_sides(q: &mut Q<'_>, up: u64, down: u64) -> Result<(QdiscSpec, QdiscSpec), ImportError> {
    let lla = lla(q)?;
    let (e, i) = words(q, &lla)?;
    let egress = cake_side(q, up, &e, "eqdisc_opts", "egress")?;
    let ingress = cake_side(q, down, &i, "iqdisc_opts", "ingress")?;
    Ok((egress, ingress))
}

fn cake_side(
    q: &Q<'_>,
    rate: u64,
    w: &str,
    opts: &str,
    what: &str,
) -> Result<QdiscSpec, ImportError> {
    let rate_key = if what == "egress" {
        "upload"
    } else {
        "download"
    };
    if rate == 0 {
        return spec("fq_codel", q.file, q.line(rate_key), what);
    }
    let (extra, line) = match q.get(opts) {
        Some(x) => (x, q.line(opts)),
        None => ("", q.line(rate_key)),
    };
    spec(
        &format!("cake bandwidth {rate}kbit {w} {extra}"),
        q.file,
        line,
        what,
    )
}

/// HTB's link-layer words on every class: sqm's `htb_private` (`mpu`, `linklayer`,
/// `overhead`, `mtu`), or its default for HTB, tc's size table (stab), which charges HTB the
/// same sizes; with `cake` as the mechanism HTB gets none.
fn htb_lla(q: &mut Q<'_>) -> Result<String, ImportError> {
    let layer = linklayer(q)?;
    let llam = q.get("linklayer_adaptation_mechanism").unwrap_or("default");
    if layer == "none" || llam == "cake" {
        return Ok(String::new());
    }
    let (overhead, mpu) = (q.num("overhead", 0)?, q.num("tcMPU", 0)?);
    let words = format!("overhead {overhead} mpu {mpu} linklayer {layer}");
    if llam == "htb_private" {
        return Ok(format!("{words} mtu {}", q.num("tcMTU", 2047)?));
    }
    q.warn("linklayer_adaptation_mechanism", "sqm sizes packets with tc's size table (stab); debloat gives HTB's classes the same overhead, mpu and link layer, so the shaper charges the same, while the leaves see packets as they are");
    Ok(words)
}

/// The two directions as simple.qos or simplest.qos build them with HTB.
fn htb_sides(q: &mut Q<'_>, up: u64, down: u64) -> Result<(QdiscSpec, QdiscSpec), ImportError> {
    let lla = htb_lla(q)?;
    let simplest = q.get("script") == Some("simplest.qos");
    let qdisc = q.get("qdisc").unwrap_or("fq_codel");
    let leaf = |dir: char| super::sqm_htb::Leaf {
        qdisc,
        limit: q.get(&format!("{dir}limit")),
        target: q.get(&format!("{dir}target")),
        ecn: q
            .get(if dir == 'e' {
                "egress_ecn"
            } else {
                "ingress_ecn"
            })
            .unwrap_or("ECN"),
        opts: q.get(&format!("{dir}qdisc_opts")).unwrap_or(""),
    };
    let (el, il) = (leaf('e'), leaf('i'));
    let one_tier = simplest || q.flag("squash_ingress", true);
    let e = match (up, simplest) {
        (0, _) => "fq_codel".to_string(),
        (r, true) => super::sqm_htb::simplest(r, &el, &lla),
        (r, false) => super::sqm_htb::simple(r, &el, &lla, false),
    };
    let i = match (down, one_tier) {
        (0, _) => "fq_codel".to_string(),
        (r, true) => super::sqm_htb::simplest(r, &il, &lla),
        (r, false) => super::sqm_htb::simple(r, &il, &lla, true),
    };
    // A leaf word sqm passed on is the likelier culprit of a refusal: name its line.
    let at = |opts: &str, rate: &str| q.line(if q.get(opts).is_some() { opts } else { rate });
    let (eline, iline) = (at("eqdisc_opts", "upload"), at("iqdisc_opts", "download"));
    let egress = spec(&e, q.file, eline, "egress")?;
    let ingress = spec(&i, q.file, iline, "ingress")?;
    if down != 0 && !simplest && q.flag("squash_dscp", true) {
        q.warn("squash_dscp", "simple.qos zeroes the DSCP of what arrives with iptables after the shaper; an htb spec cannot, so the LAN sees the DSCP as sent");
    }
    Ok((egress, ingress))
}
