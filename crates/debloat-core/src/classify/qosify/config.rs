//! qosify's configuration, read from its own files: the UCI file (`/etc/config/qosify`:
//! `config defaults`, `config class NAME`, `config alias NAME`) and its map files
//! (`/etc/qosify/*.conf`: one `MATCH VALUE` per line). No file is opened here: the caller reads
//! them and hands over the text (the UCI file's `list defaults` names the map files).
//!
//! Values are what qosify accepts: a DSCP number (decimal, `0x` hex or `0` octal), a codepoint
//! (`CS0`…`CS7`, `AF11`…`AF43`, `EF`, `VA`, `LE`) or a class name; a leading `+` applies it only
//! to packets whose DSCP is still 0. Matches: `tcp:PORT[-END]`, `udp:PORT[-END]`, an IPv4 or IPv6
//! address, with `/PREFIX` as debloat's addition, `dns:PATTERN` (the queried name or a CNAME
//! in the answer) and `dns_c:PATTERN` (CNAMEs only); a pattern is a glob (`*.youtube.com`) or,
//! after a `/`, a regular expression. Names are matched in lower case. Unlike qosify, which skips a line it cannot read, a bad line is
//! an error naming the line, the token and the choices.

use core::net::IpAddr;

/// A DSCP decision: a raw DSCP or a class, applied always or only to DSCP 0 (`+`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Value {
    /// What to set.
    pub target: Target,
    /// qosify's `+`: only where the packet's DSCP is still 0.
    pub fallback: bool,
}

/// A DSCP, or a class whose DSCP depends on the direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// This DSCP (0–63).
    Dscp(u8),
    /// The class of this index in [`Config::classes`].
    Class(u16),
}

/// Per-flow detection a class carries: bulk flows by packet rate, priority by small packets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlowConfig {
    /// DSCP (or class) for a flow of small average packets.
    pub dscp_prio: Option<Value>,
    /// DSCP (or class) for a flow above `bulk_trigger_pps`.
    pub dscp_bulk: Option<Value>,
    /// Average packet length (bytes, EWMA) at or under which a flow is priority (0: off).
    pub prio_max_avg_pkt_len: u32,
    /// Packets in a second above which a flow is bulk (0: off).
    pub bulk_trigger_pps: u32,
    /// Seconds under the trigger before a flow stops being bulk.
    pub bulk_trigger_timeout: u32,
}

/// A class: its DSCP each way and its flow detection.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Class {
    /// Its name, as map files and options refer to it.
    pub name: String,
    /// DSCP set on packets towards the LAN (replies, downloads).
    pub ingress: u8,
    /// DSCP set on packets towards the WAN.
    pub egress: u8,
    /// Its flow detection.
    pub flow: FlowConfig,
}

/// One rule of a map file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rule {
    /// The line as written (for counters and `stats`).
    pub text: String,
    /// What it matches.
    pub matches: Match,
    /// What it sets.
    pub value: Value,
}

/// What a rule matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Match {
    /// TCP destination (egress) or source (ingress) ports, inclusive.
    Tcp(u16, u16),
    /// UDP ports, as TCP's.
    Udp(u16, u16),
    /// Destination (egress) or source (ingress) address within this prefix.
    Addr(IpAddr, u8),
    /// A DNS name pattern: the queried name or a CNAME target of an answer (`dns:`).
    Dns(String),
    /// A DNS name pattern for CNAME targets only (`dns_c:`).
    DnsCname(String),
}

/// Everything the classifier needs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Config {
    /// The classes, in the order defined.
    pub classes: Vec<Class>,
    /// `dscp_default_tcp`: TCP packets no port rule matched.
    pub default_tcp: Option<Value>,
    /// `dscp_default_udp`: UDP (and other non-ICMP IP) packets no port rule matched.
    pub default_udp: Option<Value>,
    /// `dscp_icmp`.
    pub icmp: Option<Value>,
    /// The defaults' flow detection, for packets a default decided (qosify's two default
    /// class entries).
    pub flow: FlowConfig,
    /// The map files' rules, in order (a later rule for the same port wins).
    pub rules: Vec<Rule>,
    /// Map files the UCI file lists (`list defaults`), for the caller to read.
    pub map_files: Vec<String>,
    /// `timeout`: seconds an address learnt from a DNS answer with TTL 0 is kept (qosify: 3600).
    pub timeout: Option<u32>,
    /// `active_timeout`: seconds an expired learnt address is kept again when packets used it
    /// since (qosify: 300).
    pub active_timeout: Option<u32>,
}

/// A line that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}:{line}: `{token}`: {why}")]
pub struct ConfigError {
    /// The file (as the caller named it).
    pub source_name: String,
    /// 1-based line number.
    pub line: usize,
    /// The token at fault.
    pub token: String,
    /// What is wrong and what would be right.
    pub why: String,
}

const CODEPOINTS: [(&str, u8); 22] = [
    ("CS0", 0),
    ("CS1", 8),
    ("CS2", 16),
    ("CS3", 24),
    ("CS4", 32),
    ("CS5", 40),
    ("CS6", 48),
    ("CS7", 56),
    ("AF11", 10),
    ("AF12", 12),
    ("AF13", 14),
    ("AF21", 18),
    ("AF22", 20),
    ("AF23", 22),
    ("AF31", 26),
    ("AF32", 28),
    ("AF33", 30),
    ("AF41", 34),
    ("AF42", 36),
    ("AF43", 38),
    ("EF", 46),
    ("VA", 44),
];

/// A number as C's `strtoul(s, _, 0)` reads it: decimal, `0x` hex or `0` octal.
fn c_number(s: &str) -> Option<u64> {
    if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        u64::from_str_radix(h, 16).ok()
    } else if s.len() > 1 && s.starts_with('0') {
        u64::from_str_radix(&s[1..], 8).ok()
    } else {
        s.parse().ok()
    }
}

/// A bare DSCP (number or codepoint name), for a class's `ingress`/`egress`.
fn dscp(s: &str) -> Result<u8, String> {
    if s == "LE" {
        return Ok(1);
    }
    if let Some(&(_, v)) = CODEPOINTS.iter().find(|(n, _)| *n == s) {
        return Ok(v);
    }
    match c_number(s) {
        Some(v) if v < 64 => Ok(v as u8),
        _ => Err("expected a DSCP: 0–63 or CS0…CS7, AF11…AF43, EF, VA, LE".into()),
    }
}

impl Config {
    /// The index of a class by name.
    pub fn class(&self, name: &str) -> Option<u16> {
        self.classes
            .iter()
            .position(|c| c.name == name)
            .map(|i| i as u16)
    }

    /// A value as map files and options write it.
    pub fn value(&self, s: &str) -> Result<Value, String> {
        let (fallback, v) = match s.strip_prefix('+') {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        let target = match (dscp(v), self.class(v)) {
            (Ok(d), _) => Target::Dscp(d),
            (Err(_), Some(c)) => Target::Class(c),
            (Err(e), None) => {
                let names: Vec<&str> = self.classes.iter().map(|c| c.name.as_str()).collect();
                return Err(format!("{e}, or a class ({})", names.join(", ")));
            }
        };
        Ok(Value { target, fallback })
    }
}

fn unquote(s: &str) -> &str {
    let s = s.trim();
    for q in ['\'', '"'] {
        if let Some(inner) = s.strip_prefix(q).and_then(|r| r.strip_suffix(q)) {
            return inner;
        }
    }
    s
}

/// The section a UCI line belongs to.
enum Section {
    None,
    Defaults,
    Class(usize),
    Other,
}

struct Uci<'a> {
    name: &'a str,
    cfg: Config,
    /// Options whose values may name classes defined later: (line, section, key, value).
    deferred: Vec<(usize, Option<usize>, String, String)>,
}

impl Uci<'_> {
    fn err(&self, line: usize, token: &str, why: impl Into<String>) -> ConfigError {
        ConfigError {
            source_name: self.name.to_string(),
            line,
            token: token.to_string(),
            why: why.into(),
        }
    }

    fn number(&self, line: usize, v: &str) -> Result<u32, ConfigError> {
        c_number(v)
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| self.err(line, v, "expected a whole number"))
    }

    fn option(
        &mut self,
        line: usize,
        sec: &Section,
        key: &str,
        v: &str,
    ) -> Result<(), ConfigError> {
        let class = match sec {
            Section::Class(i) => Some(*i),
            Section::Defaults => None,
            Section::Other => return Ok(()),
            Section::None => {
                return Err(self.err(line, key, "an option before any `config` section"))
            }
        };
        match key {
            "ingress" | "egress" | "value" if class.is_some() => {
                let d = dscp(v).map_err(|e| self.err(line, v, e))?;
                let c = &mut self.cfg.classes[class.unwrap_or(0)];
                match key {
                    "ingress" => c.ingress = d,
                    "egress" => c.egress = d,
                    _ => (c.ingress, c.egress) = (d, d),
                }
            }
            "prio_max_avg_pkt_len" | "bulk_trigger_pps" | "bulk_trigger_timeout" => {
                let n = self.number(line, v)?;
                let f = match class {
                    Some(i) => &mut self.cfg.classes[i].flow,
                    None => &mut self.cfg.flow,
                };
                match key {
                    "prio_max_avg_pkt_len" => f.prio_max_avg_pkt_len = n,
                    "bulk_trigger_pps" => f.bulk_trigger_pps = n,
                    _ => f.bulk_trigger_timeout = n,
                }
            }
            "dscp_prio" | "dscp_bulk" => self.deferred.push((line, class, key.into(), v.into())),
            "dscp_default_tcp" | "dscp_default_udp" | "dscp_icmp" if class.is_none() => {
                self.deferred.push((line, None, key.into(), v.into()))
            }
            "timeout" | "active_timeout" if class.is_none() => {
                let n = Some(self.number(line, v)?);
                match key {
                    "timeout" => self.cfg.timeout = n,
                    _ => self.cfg.active_timeout = n,
                }
            }
            "timeout" | "active_timeout" | "dscp_default_tcp" | "dscp_default_udp" | "dscp_icmp" => {}
            _ => {
                return Err(self.err(line, key, "unknown option; expected one of ingress, egress, value, dscp_prio, dscp_bulk, dscp_default_tcp, dscp_default_udp, dscp_icmp, prio_max_avg_pkt_len, bulk_trigger_pps, bulk_trigger_timeout, timeout, active_timeout"))
            }
        }
        Ok(())
    }

    /// Values that may name classes, once every class is known.
    fn resolve(&mut self) -> Result<(), ConfigError> {
        for (line, class, key, v) in std::mem::take(&mut self.deferred) {
            let val = Some(self.cfg.value(&v).map_err(|e| self.err(line, &v, e))?);
            let flow = match class {
                Some(i) => &mut self.cfg.classes[i].flow,
                None => &mut self.cfg.flow,
            };
            match key.as_str() {
                "dscp_prio" => flow.dscp_prio = val,
                "dscp_bulk" => flow.dscp_bulk = val,
                "dscp_default_tcp" => self.cfg.default_tcp = val,
                "dscp_default_udp" => self.cfg.default_udp = val,
                _ => self.cfg.icmp = val,
            }
        }
        Ok(())
    }
}

/// Read qosify's UCI file (`name` is for errors). `config interface` and `config device`
/// sections belong to the shaper and are skipped; the map files it lists are in
/// [`Config::map_files`] for the caller to read and pass to [`Config::add_map`].
pub fn parse_uci(name: &str, text: &str) -> Result<Config, ConfigError> {
    let mut u = Uci {
        name,
        cfg: Config::default(),
        deferred: Vec::new(),
    };
    let mut sec = Section::None;
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let l = raw.split('#').next().unwrap_or("").trim();
        let Some((word, rest)) = l
            .split_once(char::is_whitespace)
            .or((!l.is_empty()).then_some((l, "")))
        else {
            continue;
        };
        let rest = rest.trim();
        match word {
            "config" => {
                let (kind, cname) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                sec = match unquote(kind) {
                    "defaults" => Section::Defaults,
                    "class" | "alias" => {
                        let cname = unquote(cname).to_string();
                        if cname.is_empty() {
                            return Err(u.err(
                                line,
                                kind,
                                "a class needs a name: config class NAME",
                            ));
                        }
                        u.cfg.classes.push(Class {
                            name: cname,
                            ingress: 0,
                            egress: 0,
                            flow: FlowConfig::default(),
                        });
                        Section::Class(u.cfg.classes.len() - 1)
                    }
                    _ => Section::Other,
                };
            }
            "option" | "list" => {
                let (key, v) = rest.split_once(char::is_whitespace).unwrap_or((rest, ""));
                let (key, v) = (unquote(key), unquote(v));
                if word == "list" && key == "defaults" && matches!(sec, Section::Defaults) {
                    u.cfg.map_files.push(v.to_string());
                } else {
                    u.option(line, &sec, key, v)?;
                }
            }
            w => return Err(u.err(line, w, "expected `config`, `option` or `list`")),
        }
    }
    u.resolve()?;
    Ok(u.cfg)
}

fn ports(s: &str) -> Result<(u16, u16), String> {
    let (a, b) = s.split_once('-').unwrap_or((s, s));
    let p = |x: &str| {
        c_number(x)
            .filter(|&n| (1..65535).contains(&n))
            .map(|n| n as u16)
    };
    match (p(a), p(b)) {
        (Some(a), Some(b)) if a <= b => Ok((a, b)),
        _ => Err("expected a port 1–65534 or a range START-END".into()),
    }
}

fn addr(s: &str) -> Result<(IpAddr, u8), String> {
    let (a, len) = s.split_once('/').map_or((s, None), |(a, l)| (a, Some(l)));
    let ip: IpAddr = a
        .parse()
        .map_err(|_| "expected an IPv4 or IPv6 address, with /PREFIX or not".to_string())?;
    let max = if ip.is_ipv4() { 32 } else { 128 };
    let len = match len {
        None => max,
        Some(l) => l
            .parse::<u8>()
            .ok()
            .filter(|&n| n <= max)
            .ok_or_else(|| format!("prefix length 0–{max}"))?,
    };
    Ok((ip, len))
}

/// Compile a `dns:/…` pattern (case-insensitive).
pub fn compile_regex(re: &str) -> Result<regex::Regex, regex::Error> {
    regex::RegexBuilder::new(re).case_insensitive(true).build()
}

/// A `dns:` pattern, checked: a glob, or after `/` a regular expression that must compile.
fn dns_pattern(p: &str) -> Result<String, String> {
    if p.is_empty() {
        return Err("an empty name pattern".into());
    }
    if let Some(re) = p.strip_prefix('/') {
        compile_regex(re).map_err(|e| format!("not a regular expression: {e}"))?;
        return Ok(p.to_string());
    }
    Ok(p.to_ascii_lowercase())
}

impl Config {
    /// Add a map file's rules (`name` is for errors).
    pub fn add_map(&mut self, name: &str, text: &str) -> Result<(), ConfigError> {
        for (i, raw) in text.lines().enumerate() {
            let l = raw.split('#').next().unwrap_or("").trim();
            let mut words = l.split_whitespace();
            let (Some(m), v) = (words.next(), words.next()) else {
                continue;
            };
            let err = |token: &str, why: String| ConfigError {
                source_name: name.to_string(),
                line: i + 1,
                token: token.to_string(),
                why,
            };
            let v = v.ok_or_else(|| err(m, "a rule is MATCH VALUE, e.g. `tcp:22 voice`".into()))?;
            let value = self.value(v).map_err(|e| err(v, e))?;
            let matches = if let Some(p) = m.strip_prefix("tcp:") {
                ports(p).map(|(a, b)| Match::Tcp(a, b))
            } else if let Some(p) = m.strip_prefix("udp:") {
                ports(p).map(|(a, b)| Match::Udp(a, b))
            } else if let Some(d) = m.strip_prefix("dns:") {
                dns_pattern(d).map(Match::Dns)
            } else if let Some(d) = m.strip_prefix("dns_c:") {
                dns_pattern(d).map(Match::DnsCname)
            } else {
                addr(m).map(|(a, n)| Match::Addr(a, n))
            }
            .map_err(|e| err(m, format!("{e} (matches are tcp:PORT[-END], udp:PORT[-END], ADDRESS[/PREFIX], dns:PATTERN, dns_c:PATTERN)")))?;
            self.rules.push(Rule {
                text: l.to_string(),
                matches,
                value,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
pub(crate) mod tests {
    use super::*;

    /// qosify's shipped defaults (its UCI file and 00-defaults.conf), in its own syntax.
    pub(crate) const UCI: &str = "config defaults
\tlist defaults /etc/qosify/*.conf
\toption dscp_prio video
\toption dscp_icmp +besteffort
\toption dscp_default_udp besteffort
\toption prio_max_avg_pkt_len 500

config class besteffort
\toption ingress CS0
\toption egress CS0

config class bulk
\toption ingress LE
\toption egress LE

config class video
\toption ingress AF41
\toption egress AF41

config class voice
\toption ingress CS6
\toption egress CS6
\toption bulk_trigger_pps 100
\toption bulk_trigger_timeout 5
\toption dscp_bulk CS0

config interface wan
\toption name wan
\toption bandwidth_up 100mbit
";

    pub(crate) const MAP: &str = "# DNS
tcp:53\t\tvoice
udp:53\t\tvoice
udp:123\t\tvoice
tcp:22\t\t+video
tcp:80\t\t+besteffort
tcp:443\t\t+besteffort
udp:443\t\t+besteffort
";

    #[test]
    fn qosifys_shipped_configuration_reads() {
        let mut c = parse_uci("qosify", UCI).unwrap();
        c.add_map("00-defaults.conf", MAP).unwrap();
        assert_eq!(c.map_files, vec!["/etc/qosify/*.conf"]);
        assert_eq!(c.classes.len(), 4);
        let voice = &c.classes[c.class("voice").unwrap() as usize];
        assert_eq!((voice.ingress, voice.egress), (48, 48));
        assert_eq!(voice.flow.bulk_trigger_pps, 100);
        assert_eq!(
            voice.flow.dscp_bulk,
            Some(Value {
                target: Target::Dscp(0),
                fallback: false
            })
        );
        // The defaults' prio detection is the defaults' own.
        let video = c.class("video").unwrap();
        let prio = Value {
            target: Target::Class(video),
            fallback: false,
        };
        assert_eq!(c.flow.dscp_prio, Some(prio));
        assert_eq!(c.flow.prio_max_avg_pkt_len, 500);
        assert_eq!(voice.flow.dscp_prio, None);
        assert!(c.icmp.unwrap().fallback);
        assert_eq!(c.rules.len(), 7);
        assert_eq!(c.rules[3].matches, Match::Tcp(22, 22));
        assert!(c.rules[3].value.fallback);
    }

    #[test]
    fn bad_lines_name_the_line_the_token_and_the_choices() {
        let mut c = parse_uci("qosify", UCI).unwrap();
        let e = c
            .add_map("m.conf", "tcp:22 voice\ntcp:0 voice\n")
            .unwrap_err();
        assert_eq!((e.line, e.token.as_str()), (2, "tcp:0"));
        assert!(e.why.contains("1–65534"), "{e}");
        let e = c.add_map("m.conf", "udp:53 vioce\n").unwrap_err();
        assert_eq!(e.token, "vioce");
        assert!(e.why.contains("besteffort, bulk, video, voice"), "{e}");
        let e = c.add_map("m.conf", "198.18.0.0/33 bulk\n").unwrap_err();
        assert!(e.why.contains("0–32"), "{e}");
        let e = parse_uci("q", "config class x\n\toption egress AF99\n").unwrap_err();
        assert_eq!((e.line, e.token.as_str()), (2, "AF99"));
        let e = parse_uci("q", "config defaults\n\toption dscp_bluk CS1\n").unwrap_err();
        assert!(e.why.contains("dscp_bulk"), "{e}");
    }

    #[test]
    fn values_are_read_as_qosify_reads_them() {
        let c = parse_uci("q", UCI).unwrap();
        let v = |s| c.value(s).unwrap().target;
        assert_eq!(v("0x2e"), Target::Dscp(46));
        assert_eq!(v("010"), Target::Dscp(8));
        assert_eq!(v("LE"), Target::Dscp(1));
        assert_eq!(v("bulk"), Target::Class(1));
        assert!(c.value("64").is_err());
        let mut m = Config::default();
        m.add_map(
            "m",
            "2001:2::/48 CS1\n198.18.1.2 EF\ntcp:1000-2000 AF21\ndns:*.example.com CS1\n",
        )
        .unwrap();
        assert_eq!(
            m.rules[0].matches,
            Match::Addr("2001:2::".parse().unwrap(), 48)
        );
        assert_eq!(
            m.rules[1].matches,
            Match::Addr("198.18.1.2".parse().unwrap(), 32)
        );
        assert_eq!(m.rules[2].matches, Match::Tcp(1000, 2000));
        assert_eq!(m.rules[3].matches, Match::Dns("*.example.com".into()));
    }
}
