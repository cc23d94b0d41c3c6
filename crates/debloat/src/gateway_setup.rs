//! Where `debloat gateway` gets its setup: flags, a TOML file (`--config`, the same names as
//! the flags) and the files an OpenWrt user already has (`--sqm`, `--qosify`). A flag wins over
//! the TOML file, which wins over an imported file, which wins over the defaults. `--dry-run`
//! prints the result (as flags and as TOML) with every warning, and forwards nothing.

use crate::gateway::RunArgs;
use anyhow::{Context, Result};
use debloat_gateway::import::{self, Setup};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The words that describe a shaped link: its disciplines, its emulated links, and the files
/// that hold them (a TOML setup, sqm-scripts', qosify's). `debloat gateway` forwards through
/// them; `debloat sim` runs them offline (up is egress).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct LinkWords {
    /// Read the setup from a TOML file with the same names as these flags (`lan`, `wan`,
    /// `egress`, `emulate_egress`, `classify`, `sqm` …); a flag given as well wins.
    #[arg(long, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Import sqm-scripts' /etc/config/sqm: its first enabled queue's interface (--wan),
    /// rates, script (piece_of_cake, layer_cake; simple and simplest as cake), link layer and
    /// options become --egress/--ingress; what has no equivalent is a warning.
    #[arg(long, value_name = "FILE")]
    pub sqm: Option<PathBuf>,
    /// Import qosify's /etc/config/qosify: its interface section becomes cake both ways, the
    /// file itself the marking stage (as --classify).
    #[arg(long, value_name = "FILE", conflicts_with = "classify")]
    pub qosify: Option<PathBuf>,
    /// Discipline for LAN → WAN traffic (tc syntax; default fq_codel).
    #[arg(long)]
    pub egress: Option<String>,
    /// Discipline for WAN → LAN traffic (tc syntax; default fq_codel).
    #[arg(long)]
    pub ingress: Option<String>,
    /// Emulated link LAN → WAN, in netem's words: "rate 10Mbit delay 10ms 1ms loss 0.1%"
    /// (all the words are listed below). "rate trace FILE buffer 200": capacity from a trace
    /// (mahimahi's format, or `seconds,rate` lines) with a modem's FIFO of 200 packets (or a
    /// size such as 150kb; default 1000 packets).
    #[arg(long)]
    pub emulate_egress: Option<String>,
    /// Emulated link WAN → LAN, in netem's words.
    #[arg(long)]
    pub emulate_ingress: Option<String>,
}

impl LinkWords {
    /// Whether any was given.
    pub fn any(&self) -> bool {
        self.config.is_some()
            || self.sqm.is_some()
            || self.qosify.is_some()
            || self.egress.is_some()
            || self.ingress.is_some()
            || self.emulate_egress.is_some()
            || self.emulate_ingress.is_some()
    }
}

/// `gateway.toml`: every forwarding flag, by its name with `_` for `-`.
#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct FileConfig {
    lan: Option<String>,
    wan: Option<String>,
    egress: Option<String>,
    ingress: Option<String>,
    emulate_egress: Option<String>,
    emulate_ingress: Option<String>,
    autorate_egress: Option<String>,
    autorate_ingress: Option<String>,
    autorate_mode: Option<String>,
    reflectors: Option<String>,
    reflector_interval: Option<String>,
    ping_netns: Option<String>,
    ping_device: Option<String>,
    control: Option<PathBuf>,
    metrics: Option<String>,
    http: Option<String>,
    seed: Option<u64>,
    cpu: Option<usize>,
    realtime: Option<u8>,
    busy_poll: Option<bool>,
    io: Option<String>,
    workers: Option<u16>,
    cores: Option<Vec<usize>>,
    classify: Option<PathBuf>,
    keep_offloads: Option<bool>,
    sqm: Option<PathBuf>,
    qosify: Option<PathBuf>,
}

/// Read `--config FILE`; its relative paths are relative to the file.
pub fn read_file(path: &Path) -> Result<FileConfig> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("--config {}", path.display()))?;
    let mut f: FileConfig =
        toml::from_str(&text).map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    for p in [&mut f.control, &mut f.classify, &mut f.sqm, &mut f.qosify]
        .into_iter()
        .flatten()
    {
        if p.is_relative() {
            *p = base.join(&*p);
        }
    }
    Ok(f)
}

/// Fill what the flags left unset from the TOML file.
fn merge_file(a: &mut RunArgs, f: FileConfig) {
    macro_rules! fill {
        ($($k:ident),*) => { $( if a.$k.is_none() { a.$k = f.$k; } )* };
    }
    macro_rules! fill_link {
        ($($k:ident),*) => { $( if a.link.$k.is_none() { a.link.$k = f.$k; } )* };
    }
    fill_link!(
        egress,
        ingress,
        emulate_egress,
        emulate_ingress,
        sqm,
        qosify
    );
    fill!(lan, wan, autorate_egress);
    fill!(
        autorate_mode,
        reflectors,
        reflector_interval,
        ping_netns,
        ping_device
    );
    fill!(
        autorate_ingress,
        control,
        metrics,
        http,
        seed,
        cpu,
        realtime,
        io,
        workers,
        cores,
        classify
    );
    a.busy_poll |= f.busy_poll.unwrap_or(false);
    a.keep_offloads |= f.keep_offloads.unwrap_or(false);
}

/// Fill what is still unset from an imported file.
fn merge_import(a: &mut RunArgs, s: &Setup) {
    if a.wan.is_none() {
        a.wan.clone_from(&s.wan);
    }
    if a.link.egress.is_none() {
        a.link.egress = s.egress.as_ref().map(ToString::to_string);
    }
    if a.link.ingress.is_none() {
        a.link.ingress = s.ingress.as_ref().map(ToString::to_string);
    }
    if a.classify.is_none() {
        a.classify.clone_from(&s.classify);
    }
}

/// The whole setup, and the warnings the imports gave.
pub fn resolve(cli: &RunArgs) -> Result<(RunArgs, Vec<String>)> {
    let mut a = cli.clone();
    if let Some(p) = &cli.link.config {
        merge_file(&mut a, read_file(p)?);
    }
    let mut warnings = Vec::new();
    if let Some(p) = a.link.sqm.clone() {
        let text = std::fs::read_to_string(&p).with_context(|| format!("--sqm {}", p.display()))?;
        let s = import::sqm::import(&p.display().to_string(), &text).context("--sqm")?;
        merge_import(&mut a, &s);
        warnings.extend(s.warnings);
    }
    if let Some(p) = a.link.qosify.clone() {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("--qosify {}", p.display()))?;
        let s = import::qosify::import(&p, &text).context("--qosify")?;
        merge_import(&mut a, &s);
        warnings.extend(s.warnings);
    }
    Ok((a, warnings))
}

fn quote(s: &str) -> String {
    if s.chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-:".contains(c))
    {
        s.to_string()
    } else {
        format!("\"{s}\"")
    }
}

/// `--dry-run`: the setup as flags and as `gateway.toml`, and the warnings.
/// The order `--dry-run` prints the flags in.
const FLAG_ORDER: [&str; 24] = [
    "lan",
    "wan",
    "egress",
    "ingress",
    "emulate_egress",
    "emulate_ingress",
    "autorate_egress",
    "autorate_ingress",
    "autorate_mode",
    "reflectors",
    "reflector_interval",
    "ping_netns",
    "ping_device",
    "classify",
    "control",
    "metrics",
    "seed",
    "cpu",
    "realtime",
    "busy_poll",
    "io",
    "workers",
    "cores",
    "keep_offloads",
];

pub fn print(a: &RunArgs, egress: &str, ingress: &str, warnings: &[String]) -> Result<()> {
    let file = FileConfig {
        lan: a.lan.clone(),
        wan: a.wan.clone(),
        egress: Some(egress.to_string()),
        ingress: Some(ingress.to_string()),
        emulate_egress: a.link.emulate_egress.clone().filter(|s| !s.is_empty()),
        emulate_ingress: a.link.emulate_ingress.clone().filter(|s| !s.is_empty()),
        autorate_egress: a.autorate_egress.clone(),
        autorate_ingress: a.autorate_ingress.clone(),
        autorate_mode: a.autorate_mode.clone(),
        reflectors: a.reflectors.clone(),
        reflector_interval: a.reflector_interval.clone(),
        ping_netns: a.ping_netns.clone(),
        ping_device: a.ping_device.clone(),
        control: a.control.clone(),
        metrics: a.metrics.clone(),
        http: a.http.clone(),
        seed: a.seed,
        cpu: a.cpu,
        realtime: a.realtime,
        busy_poll: a.busy_poll.then_some(true),
        io: a.io.clone(),
        workers: a.workers,
        cores: a.cores.clone(),
        classify: a.classify.clone(),
        keep_offloads: a.keep_offloads.then_some(true),
        sqm: None,
        qosify: None,
    };
    let mut flags = vec!["debloat gateway".to_string()];
    let v = serde_json::to_value(&file)?;
    for k in FLAG_ORDER {
        let Some(val) = v.get(k) else { continue };
        let flag = format!("--{}", k.replace('_', "-"));
        match val {
            serde_json::Value::Null => {}
            serde_json::Value::Bool(true) => flags.push(flag),
            serde_json::Value::String(s) => flags.push(format!("{flag} {}", quote(s))),
            other => flags.push(format!("{flag} {other}")),
        }
    }
    println!("the setup, as flags:\n  {}\n", flags.join(" \\\n    "));
    println!("as gateway.toml (--config):\n{}", toml::to_string(&file)?);
    if a.lan.is_none() {
        println!("missing: --lan IF (the clients' side; sqm and qosify name only the WAN side)");
    }
    if warnings.is_empty() {
        println!("no warnings: everything in the imported files has an equivalent");
    } else {
        println!("warnings ({}):", warnings.len());
        for w in warnings {
            println!("  {w}");
        }
    }
    Ok(())
}
