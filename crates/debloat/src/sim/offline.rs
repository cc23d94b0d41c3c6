//! The gateway's setup, run offline: `debloat sim --config gateway.toml` (or `--sqm`,
//! `--qosify`, `--egress/--ingress`, `--emulate-egress/--emulate-ingress`) reads the setup
//! exactly as `debloat gateway` reads it (the same flags, file and imports, in the same order
//! of precedence: [`crate::gateway_setup::resolve`]) and runs the test through it. The client
//! is on the LAN side, so up is egress.
//!
//! What the simulator takes from it: the two disciplines (the gateway's default, fq_codel, for
//! one the setup leaves unset), the emulated links (their rate or capacity trace and modem
//! replace `--link`'s for that direction, their other netem words replace `--impair`'s; their
//! delay adds to `--rtt`), the marking stage, and the shaper-rate controllers. What it leaves:
//! the interfaces, sockets, CPU and offload settings, which have no meaning offline (listed on
//! stderr once).

use crate::gateway::RunArgs;
use crate::gateway_setup::LinkWords;
use anyhow::{Context, Result};
use debloat_core::QdiscSpec;
use debloat_sim::scenario::Config;

/// Lay the gateway's setup over `cfg` (built from the other flags). `explicit_up/down`: the
/// disciplines `--qdisc-up/--qdisc-down` named, which win over the setup's.
pub(crate) fn apply(
    g: &LinkWords,
    a: &super::Args,
    cfg: &mut Config,
    explicit: [bool; 2],
) -> Result<()> {
    if !g.any() {
        return Ok(());
    }
    let (r, warnings) = crate::gateway_setup::resolve(&run_args(g, a))?;
    for w in &warnings {
        eprintln!("warning: {w}");
    }
    ignored(&r);
    let spec = |s: &Option<String>, what: &str| -> Result<QdiscSpec> {
        let s = s.as_deref().unwrap_or("fq_codel");
        s.parse().with_context(|| format!("{what} \"{s}\""))
    };
    if !explicit[0] {
        cfg.qdisc_up = spec(&r.link.egress, "egress")?;
    }
    if !explicit[1] {
        cfg.qdisc_down = spec(&r.link.ingress, "ingress")?;
    }
    if let Some(w) = &r.link.emulate_egress {
        let (bps, modem, wire) = emulated(w, "emulate_egress", cfg.wire)?;
        cfg.up_bps = bps.unwrap_or(cfg.up_bps);
        cfg.adaptive.modem_up = modem.or(cfg.adaptive.modem_up.take());
        // `wire` is both directions' until the down one is set apart: keep the down one's.
        cfg.wire_down = Some(cfg.wire_down.unwrap_or(cfg.wire));
        cfg.wire = wire;
    }
    if let Some(w) = &r.link.emulate_ingress {
        let base = cfg.wire_down.unwrap_or(cfg.wire);
        let (bps, modem, wire) = emulated(w, "emulate_ingress", base)?;
        cfg.down_bps = bps.unwrap_or(cfg.down_bps);
        cfg.adaptive.modem_down = modem.or(cfg.adaptive.modem_down.take());
        cfg.wire_down = Some(wire);
    }
    if cfg.classify.is_none() {
        cfg.classify = crate::classify::load(r.classify.as_deref())?;
    }
    let mode = r.autorate_mode.as_deref().unwrap_or(&a.autorate_mode);
    if let Some(w) = &r.autorate_egress {
        cfg.adaptive.autorate_up = Some(super::autorate_with(mode, w, "autorate_egress")?);
    }
    if let Some(w) = &r.autorate_ingress {
        cfg.adaptive.autorate_down = Some(super::autorate_with(mode, w, "autorate_ingress")?);
    }
    Ok(())
}

/// The gateway's arguments these words and the simulator's own flags amount to.
fn run_args(g: &LinkWords, a: &super::Args) -> RunArgs {
    RunArgs {
        link: g.clone(),
        autorate_egress: a.autorate_up.clone(),
        autorate_ingress: a.autorate_down.clone(),
        classify: a.classify.clone(),
        ..RunArgs::default()
    }
}

/// An emulated link's words: its rate (None: --link's), its trace's modem, and the wire with
/// its other netem words.
fn emulated(
    words: &str,
    what: &str,
    base: debloat_sim::wire::Wire,
) -> Result<(
    Option<u64>,
    Option<debloat_core::link::ModemSpec>,
    debloat_sim::wire::Wire,
)> {
    let ctx = || format!("{what} \"{words}\"");
    let (rest, modem) = crate::link_trace::emulation_words(words).with_context(ctx)?;
    let emu: debloat_core::link::Emulation = rest.parse().with_context(ctx)?;
    if emu.buffer.is_some() && modem.is_none() {
        eprintln!(
            "warning: {what}: `buffer` without a trace is not simulated (the bottleneck's queue \
             is the discipline's)"
        );
    }
    let bps = match &modem {
        Some(_) => Some(crate::link_trace::INTERFACE_BPS),
        None => emu.rate_bps,
    };
    let wire = debloat_sim::wire::Wire {
        impair: debloat_core::link::Emulation {
            rate_bps: None,
            buffer: None,
            ..emu
        },
        ..base
    };
    Ok((bps, modem, wire))
}

/// Say once what of the setup has no meaning offline.
fn ignored(r: &RunArgs) {
    let mut left = Vec::new();
    for (name, v) in [("lan", &r.lan), ("wan", &r.wan), ("metrics", &r.metrics)] {
        if let Some(v) = v {
            left.push(format!("{name} {v}"));
        }
    }
    if let Some(c) = &r.control {
        left.push(format!("control {}", c.display()));
    }
    if r.cpu.is_some() || r.realtime.is_some() || r.busy_poll {
        left.push("cpu/realtime/busy_poll".into());
    }
    if !left.is_empty() {
        eprintln!("offline: not used here: {}", left.join(", "));
    }
}
