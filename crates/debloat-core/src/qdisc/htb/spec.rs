//! `htb`'s words: the qdisc's own, as tc-htb(8) takes them (`default ID`, `r2q N`,
//! `direct_qlen N`), then the classes tc would add one `tc class add … htb` at a time, each
//! after the word `class`:
//!
//! ```text
//! htb default 11
//!   class 1:1 rate 100Mbit
//!   class 1:10 parent 1:1 rate 30Mbit ceil 100Mbit prio 0 match dscp 46 qdisc fq_codel
//!   class 1:11 parent 1:1 rate 70Mbit ceil 100Mbit prio 1 qdisc fq_codel
//! ```
//!
//! A class takes tc's words `rate` (required), `ceil` (default the rate), `burst`/`cburst`
//! (default tc's: the rate over the kernel's timer frequency plus `mtu`, 1600 bytes — so about
//! 1600 bytes), `prio` 0–7, `quantum` (default rate / `r2q`, 1000–200000 bytes), `mtu`, `mpu`,
//! `overhead`, `linklayer ethernet|atm|adsl`. In place of tc filters a leaf takes `match dscp N`,
//! `match src PREFIX`, `match dst PREFIX` or `match mark N` (tried in the order the classes are
//! written, as filters of increasing priority), and its discipline as `qdisc SPEC…` up to the
//! next `class` (by default a `pfifo` of 1000 packets, as the kernel gives a new leaf). Class
//! ids are `1:N` or `N`, in hexadecimal as tc reads them (so `default 11` is class 1:11); a
//! parent comes before its children; eight levels at most, as in the kernel. A packet whose
//! `priority` (`skb->priority`) names a leaf goes there; one that no match takes goes to
//! the `default` class, or, without one, straight out unshaped (the direct queue).

use super::class::MAXDEPTH;
use crate::qdisc::ratecfg::LinkLayer;
use crate::qdisc::spec::QdiscSpec;
use crate::qdisc::words::{count_value, expect_value, size_value, time_value, SpecError, Tokens};
use crate::units::{fmt_rate_exact, parse_rate};
use ipnet::IpNet;
use std::fmt;

const HTB_WORDS: &[&str] = &[
    "default ID",
    "r2q N",
    "direct_qlen N",
    "release_idle TIME",
    "class ID …",
];
const CLASS_WORDS: &[&str] = &[
    "parent ID",
    "rate RATE",
    "ceil RATE",
    "burst SIZE",
    "cburst SIZE",
    "prio N",
    "quantum SIZE",
    "mtu SIZE",
    "mpu SIZE",
    "overhead N",
    "linklayer ethernet|atm|adsl",
    "match dscp|src|dst|mark VALUE",
    "qdisc SPEC…",
];
const MATCH_WORDS: &[&str] = &["dscp N", "src PREFIX", "dst PREFIX", "mark N"];

/// What picks a leaf for a packet, in place of a tc filter.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// The DiffServ codepoint, 0–63.
    Dscp(u8),
    /// The source address within a prefix.
    Src(IpNet),
    /// The destination address within a prefix.
    Dst(IpNet),
    /// The firewall mark (`skb->mark`).
    Mark(u32),
}

/// One `class`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClassSpec {
    /// The minor number (`1:N`).
    pub id: u16,
    /// The parent class's minor, `None` at the root.
    pub parent: Option<u16>,
    /// bit/s.
    pub rate_bps: u64,
    /// bit/s (default: the rate).
    pub ceil_bps: u64,
    /// Bytes the rate bucket holds, when given.
    pub burst: Option<u32>,
    /// Bytes the ceil bucket holds, when given.
    pub cburst: Option<u32>,
    /// 0 (first) to 7.
    pub prio: u8,
    /// Bytes per turn, when given.
    pub quantum: Option<u32>,
    /// tc's `mtu` for the default bursts (1600).
    pub mtu: u32,
    /// The smallest size a packet is charged.
    pub mpu: u32,
    /// Bytes added to every packet's size.
    pub overhead: i32,
    /// How the link frames bytes.
    pub linklayer: LinkLayer,
    /// What sends packets here.
    pub matches: Vec<Match>,
    /// The leaf's discipline, when given.
    pub qdisc: Option<Box<QdiscSpec>>,
    /// Its words as given (what tc is handed in the lab).
    pub qdisc_words: Option<String>,
}

/// `htb [default ID] [r2q N] [direct_qlen N] class …`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HtbSpec {
    /// The default class's minor (0: none, unclassified packets go out unshaped).
    pub default: u16,
    /// Rate to quantum divisor (default 10).
    pub r2q: u32,
    /// Packets the direct queue holds (default 1000, the txqueuelen).
    pub direct_qlen: u32,
    /// The classes, parents before children.
    pub classes: Vec<ClassSpec>,
    /// debloat's `release_idle TIME`: a leaf's discipline is released after this long empty
    /// (and built again on its class's next packet), so idle circuits cost no queue memory.
    /// None (the default): leaves live as long as the tree, as in the kernel.
    pub release_idle: Option<u64>,
}

/// tc's `get_tc_classid` for this qdisc: `1:N` or `N`, hexadecimal.
pub(crate) fn classid(v: &str) -> Result<u16, SpecError> {
    let minor =
        match v.split_once(':') {
            Some(("1", m)) => m,
            Some(_) => return Err(SpecError::value(
                v,
                "the htb's handle is 1:, so its classes are 1:N (N hexadecimal, as tc reads it)",
            )),
            None => v,
        };
    u16::from_str_radix(minor, 16)
        .ok()
        .filter(|&m| m > 0)
        .ok_or_else(|| {
            SpecError::value(v, "a class id is 1:N with N from 1 to ffff in hexadecimal")
        })
}

fn rate_value(t: &mut Tokens<'_>, w: &str) -> Result<u64, SpecError> {
    let v = expect_value(t, w, "a rate such as 10Mbit")?;
    let r = parse_rate(v).map_err(|e| SpecError::value(v, &e.to_string()))?;
    if r < 8 {
        return Err(SpecError::value(
            v,
            "a rate is at least one byte per second",
        ));
    }
    Ok(r)
}

impl HtbSpec {
    pub(crate) fn parse(t: &mut Tokens<'_>) -> Result<Self, SpecError> {
        let rest: Vec<&str> = t.collect();
        let mut parts = rest.split(|w| *w == "class");
        let mut s = HtbSpec {
            default: 0,
            r2q: 10,
            direct_qlen: 1000,
            classes: Vec::new(),
            release_idle: None,
        };
        let own = parts.next().unwrap_or(&[]).join(" ");
        let mut t: Tokens<'_> = own.split_whitespace().peekable();
        while let Some(w) = t.next() {
            match w {
                "default" => {
                    let v = expect_value(&mut t, w, "a class's minor in hexadecimal, such as 11")?;
                    s.default =
                        u16::from_str_radix(v.trim_start_matches("0x"), 16).map_err(|_| {
                            SpecError::value(
                                v,
                                "default is a class's minor in hexadecimal (11 = class 1:11)",
                            )
                        })?;
                }
                "r2q" => s.r2q = count_value(&mut t, w, 1, u32::MAX)?,
                "direct_qlen" => s.direct_qlen = count_value(&mut t, w, 0, u32::MAX)?,
                "release_idle" => s.release_idle = Some(time_value(&mut t, w)?),
                _ => return Err(SpecError::unknown(w, "htb", HTB_WORDS)),
            }
        }
        for words in parts {
            s.classes.push(ClassSpec::parse(words)?);
        }
        if s.classes.is_empty() {
            return Err(SpecError::value(
                "htb",
                "an htb needs classes: htb default 10 class 1:10 rate 10Mbit",
            ));
        }
        s.check()?;
        Ok(s)
    }

    /// The tree's rules, as the kernel holds them at `tc class add`: ids given once, each
    /// parent before its children, eight levels at most; `match` and `qdisc` only on leaves.
    /// Linear in the classes, for trees of many thousand circuits built without words.
    pub fn check(&self) -> Result<(), SpecError> {
        let mut depth: std::collections::BTreeMap<u16, usize> = std::collections::BTreeMap::new();
        for c in &self.classes {
            let id = format!("1:{:x}", c.id);
            if depth.contains_key(&c.id) {
                return Err(SpecError::value(&id, "this class is given twice"));
            }
            let d = match c.parent {
                None => 1,
                Some(p) => {
                    1 + depth.get(&p).copied().ok_or_else(|| {
                        SpecError::value(
                            &format!("1:{p:x}"),
                            &format!("the parent of class {id} must be given before it"),
                        )
                    })?
                }
            };
            if d > MAXDEPTH {
                return Err(SpecError::value(
                    &id,
                    "the tree is too deep: eight levels of classes at most, as in the kernel",
                ));
            }
            depth.insert(c.id, d);
        }
        let parents: std::collections::BTreeSet<u16> =
            self.classes.iter().filter_map(|k| k.parent).collect();
        for c in self.classes.iter().filter(|c| parents.contains(&c.id)) {
            let id = format!("1:{:x}", c.id);
            if !c.matches.is_empty() {
                return Err(SpecError::value(
                    &id,
                    "`match` belongs to a leaf class, and this class has children",
                ));
            }
            if c.qdisc.is_some() {
                return Err(SpecError::value(
                    &id,
                    "`qdisc` belongs to a leaf class, and this class has children",
                ));
            }
        }
        Ok(())
    }

    /// The class with minor `id`.
    pub fn class(&self, id: u16) -> Option<&ClassSpec> {
        self.classes.iter().find(|c| c.id == id)
    }

    /// True when some class has `id` as its parent.
    pub fn has_children(&self, id: u16) -> bool {
        self.classes.iter().any(|c| c.parent == Some(id))
    }
}

impl ClassSpec {
    /// A class with tc's defaults: at the root, prio 0, tc's mtu (1600), Ethernet, no leaf.
    pub fn new(id: u16, rate_bps: u64, ceil_bps: u64) -> ClassSpec {
        ClassSpec {
            id,
            parent: None,
            rate_bps,
            ceil_bps,
            burst: None,
            cburst: None,
            prio: 0,
            quantum: None,
            mtu: 1600,
            mpu: 0,
            overhead: 0,
            linklayer: LinkLayer::Ethernet,
            matches: Vec::new(),
            qdisc: None,
            qdisc_words: None,
        }
    }

    /// One word of a class (and its value).
    fn word(&mut self, w: &str, t: &mut Tokens<'_>) -> Result<(), SpecError> {
        let c = self;
        match w {
            "parent" => {
                let v = expect_value(t, w, "a class id such as 1:1, or 1: for the root")?;
                c.parent = if v == "1:" || v == "root" {
                    None
                } else {
                    Some(classid(v)?)
                };
            }
            "rate" => c.rate_bps = rate_value(t, w)?,
            "ceil" => c.ceil_bps = rate_value(t, w)?,
            "burst" | "buffer" | "maxburst" => {
                c.burst = Some(size_value(t, w, 1, u64::from(u32::MAX))?)
            }
            "cburst" | "cbuffer" | "cmaxburst" => {
                c.cburst = Some(size_value(t, w, 1, u64::from(u32::MAX))?)
            }
            "prio" => c.prio = count_value(t, w, 0, 7)? as u8,
            "quantum" => c.quantum = Some(size_value(t, w, 1, u64::from(u32::MAX))?),
            "mtu" => c.mtu = size_value(t, w, 1, u64::from(u32::MAX))?,
            "mpu" => c.mpu = size_value(t, w, 0, u64::from(u32::MAX))?,
            "overhead" => {
                let v = expect_value(t, w, "a whole number of bytes, -64 to 256")?;
                c.overhead = v
                    .parse()
                    .ok()
                    .filter(|o| (-64..=256).contains(o))
                    .ok_or_else(|| SpecError::value(v, "overhead is -64 to 256 bytes"))?;
            }
            "linklayer" => {
                let v = expect_value(t, w, "ethernet, atm or adsl")?;
                c.linklayer = match v {
                    "ethernet" => LinkLayer::Ethernet,
                    "atm" | "adsl" => LinkLayer::Atm,
                    _ => {
                        return Err(SpecError::unknown(
                            v,
                            "htb linklayer",
                            &["ethernet", "atm", "adsl"],
                        ))
                    }
                };
            }
            "match" => c.matches.push(parse_match(t)?),
            _ => return Err(SpecError::unknown(w, "htb class", CLASS_WORDS)),
        }
        Ok(())
    }

    fn parse(words: &[&str]) -> Result<ClassSpec, SpecError> {
        let (body, leaf) = match words.iter().position(|w| *w == "qdisc") {
            Some(i) => (&words[..i], Some(&words[i + 1..])),
            None => (words, None),
        };
        let joined = body.join(" ");
        let mut t: Tokens<'_> = joined.split_whitespace().peekable();
        let id = classid(t.next().ok_or_else(|| SpecError::MissingValue {
            keyword: "class".into(),
            expected: "a class id such as 1:10",
        })?)?;
        let mut c = ClassSpec::new(id, 0, 0);
        while let Some(w) = t.next() {
            c.word(w, &mut t)?;
        }
        if c.rate_bps == 0 {
            return Err(SpecError::value(
                &format!("1:{id:x}"),
                "a class needs a rate: class 1:10 rate 10Mbit",
            ));
        }
        if c.ceil_bps == 0 {
            c.ceil_bps = c.rate_bps;
        }
        if let Some(leaf) = leaf {
            let spec = QdiscSpec::parse(&leaf.join(" "))?;
            if spec.kind() == "htb" {
                return Err(SpecError::value("htb", "a leaf of an htb cannot be another htb in one spec: give its classes to this one"));
            }
            c.qdisc = Some(Box::new(spec));
            c.qdisc_words = Some(leaf.join(" "));
        }
        Ok(c)
    }
}

fn parse_match(t: &mut Tokens<'_>) -> Result<Match, SpecError> {
    let what = expect_value(t, "match", "dscp N, src PREFIX, dst PREFIX or mark N")?;
    let prefix = |v: &str| -> Result<IpNet, SpecError> {
        v.parse::<IpNet>()
            .or_else(|_| v.parse::<std::net::IpAddr>().map(IpNet::from))
            .map(|n| n.trunc())
            .map_err(|_| {
                SpecError::value(
                    v,
                    "an address or prefix such as 198.18.0.0/24 or 2001:2::/48",
                )
            })
    };
    Ok(match what {
        "dscp" => Match::Dscp(count_value(t, "dscp", 0, 63)? as u8),
        "src" => Match::Src(prefix(expect_value(
            t,
            "src",
            "a prefix such as 198.18.0.0/24",
        )?)?),
        "dst" => Match::Dst(prefix(expect_value(
            t,
            "dst",
            "a prefix such as 198.18.0.0/24",
        )?)?),
        "mark" => Match::Mark(count_value(t, "mark", 0, u32::MAX)?),
        _ => return Err(SpecError::unknown(what, "htb match", MATCH_WORDS)),
    })
}

impl fmt::Display for Match {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Match::Dscp(d) => write!(f, "match dscp {d}"),
            Match::Src(n) => write!(f, "match src {n}"),
            Match::Dst(n) => write!(f, "match dst {n}"),
            Match::Mark(m) => write!(f, "match mark {m}"),
        }
    }
}

impl fmt::Display for ClassSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "class 1:{:x}", self.id)?;
        if let Some(p) = self.parent {
            write!(f, " parent 1:{p:x}")?;
        }
        write!(
            f,
            " rate {} ceil {}",
            fmt_rate_exact(self.rate_bps),
            fmt_rate_exact(self.ceil_bps)
        )?;
        if let Some(b) = self.burst {
            write!(f, " burst {b}b")?;
        }
        if let Some(b) = self.cburst {
            write!(f, " cburst {b}b")?;
        }
        if self.prio != 0 {
            write!(f, " prio {}", self.prio)?;
        }
        if let Some(q) = self.quantum {
            write!(f, " quantum {q}b")?;
        }
        if self.mtu != 1600 {
            write!(f, " mtu {}b", self.mtu)?;
        }
        if self.mpu != 0 {
            write!(f, " mpu {}b", self.mpu)?;
        }
        if self.overhead != 0 {
            write!(f, " overhead {}", self.overhead)?;
        }
        if self.linklayer == LinkLayer::Atm {
            write!(f, " linklayer atm")?;
        }
        for m in &self.matches {
            write!(f, " {m}")?;
        }
        if let Some(q) = &self.qdisc_words {
            write!(f, " qdisc {q}")?;
        }
        Ok(())
    }
}

impl fmt::Display for HtbSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sep = "";
        if self.default != 0 {
            write!(f, "default {:x}", self.default)?;
            sep = " ";
        }
        if self.r2q != 10 {
            write!(f, "{sep}r2q {}", self.r2q)?;
            sep = " ";
        }
        if self.direct_qlen != 1000 {
            write!(f, "{sep}direct_qlen {}", self.direct_qlen)?;
            sep = " ";
        }
        if let Some(t) = self.release_idle {
            write!(f, "{sep}release_idle {}", crate::units::fmt_time_exact(t))?;
            sep = " ";
        }
        for c in &self.classes {
            write!(f, "{sep}{c}")?;
            sep = " ";
        }
        Ok(())
    }
}
