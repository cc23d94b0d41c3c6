//! Hitless reconfiguration (`debloat gateway reload`, SIGHUP): the configuration is read again
//! and every change takes effect without dropping a queued frame. A cake's new `bandwidth` and
//! an htb's new class rates are taken in place (`tc qdisc change`, `tc class change`); an htb
//! of another shape (LibreQoS's circuits added, removed, moved) too, its classes matched by
//! minor, a removed leaf's frames draining through its parent (`htb/reshape.rs`). Any
//! other discipline that changes (a tin layout, fq_codel → cake) is replaced by a new one and
//! every frame the old one held moves into it, each flow's in order ([`crate::path::Path::replace_qdisc`]); the
//! moved frames are counted and the path's accounting stays exact. An emulated link changes
//! in place (queued frames kept), a new classifier replaces the old (its flow and DNS state
//! start afresh), a shaper-rate controller is rebuilt on its discipline.
//!
//! A configuration that cannot be applied is refused whole, with the reason, and the running
//! one kept: other interfaces, a `buffer` or trace that changes, a controller on a discipline
//! that is not cake. Settings read only at start (control socket, metrics address, seed,
//! busy polling) are reported as needing a restart.
//!
//! Linux's `tc qdisc replace` frees what the old qdisc held; keeping it is debloat's choice. A
//! moved frame's sojourn restarts at the move in disciplines that stamp arrival on enqueue.

use crate::control::socket::Request;
use crate::control::ChangeError;
use crate::forward::{Config, Gateway, Side};

/// The thread that re-reads the configuration, and the requests waiting for it.
pub(crate) struct ReloadReader {
    ask: std::sync::mpsc::Sender<()>,
    done: std::sync::mpsc::Receiver<(Result<Config, String>, f64)>,
    reading: bool,
    waiting: Vec<Request>,
}
use debloat_core::QdiscSpec;

pub use crate::forward::Reloader;

/// Why `new` cannot replace `old` while running, if it cannot.
fn refuse(old: &Config, new: &Config, sides: [&Side; 2]) -> Result<(), ChangeError> {
    if (old.lan.as_str(), old.wan.as_str()) != (new.lan.as_str(), new.wan.as_str()) {
        return Err(ChangeError::NeedsRestart {
            what: "the interfaces".into(),
            detail: format!(" ({} ⇄ {} → {} ⇄ {})", old.lan, old.wan, new.lan, new.wan),
        });
    }
    let dirs = [
        (
            "egress",
            &new.egress,
            &new.emulate_egress,
            &old.modem_egress,
            &new.modem_egress,
            new.autorate_egress,
        ),
        (
            "ingress",
            &new.ingress,
            &new.emulate_ingress,
            &old.modem_ingress,
            &new.modem_ingress,
            new.autorate_ingress,
        ),
    ];
    if new.reflectors != old.reflectors {
        return Err(ChangeError::restart(
            "the reflectors (their interval, namespace and interface)",
        ));
    }
    for ((name, spec, emu, old_modem, new_modem, autorate), side) in dirs.into_iter().zip(sides) {
        if emu.buffer != side.path.emulation().buffer {
            return Err(ChangeError::restart(format!(
                "{name}: the emulated link's `buffer`"
            )));
        }
        if old_modem.is_some() || new_modem.is_some() {
            let same = match (old_modem, new_modem) {
                (Some(a), Some(b)) => a.limit == b.limit && *a.trace == *b.trace,
                _ => false,
            };
            if !same {
                return Err(ChangeError::restart(format!(
                    "{name}: a capacity trace (added, removed or changed)"
                )));
            }
        }
        if autorate.is_some() && !matches!(spec, QdiscSpec::Cake(_)) {
            return Err(ChangeError::AutorateNeedsCake {
                side: name,
                spec: spec.to_string(),
            });
        }
    }
    Ok(())
}

/// Settings only read at start that differ.
fn restart_only(old: &Config, new: &Config) -> Vec<&'static str> {
    let mut v = Vec::new();
    if old.control != new.control {
        v.push("control");
    }
    if old.metrics != new.metrics {
        v.push("metrics");
    }
    if old.http != new.http {
        v.push("http");
    }
    if old.seed != new.seed {
        v.push("seed");
    }
    if old.busy_poll != new.busy_poll {
        v.push("busy-poll");
    }
    if old.io != new.io {
        v.push("io");
    }
    if old.workers != new.workers || old.cores != new.cores {
        v.push("workers");
    }
    v
}

impl Gateway {
    /// Ask the loop to reload at its next turn (for a SIGHUP handler).
    pub fn reload_flag(&self) -> std::sync::Arc<std::sync::atomic::AtomicBool> {
        std::sync::Arc::clone(&self.reload_asked)
    }

    /// How to read the configuration again; without one, `reload` says so. It runs on a thread
    /// of its own, so reading and checking files (LibreQoS's can take tens of milliseconds)
    /// does not hold up forwarding: the loop only applies what was read.
    pub fn set_reloader(&mut self, mut r: Reloader) {
        let (ask, asked) = std::sync::mpsc::channel::<()>();
        let (tell, done) = std::sync::mpsc::channel();
        let spawned = std::thread::Builder::new()
            .name("reload-reader".into())
            .spawn(move || {
                while asked.recv().is_ok() {
                    let t0 = std::time::Instant::now();
                    let read = r();
                    if tell.send((read, t0.elapsed().as_secs_f64() * 1e3)).is_err() {
                        return;
                    }
                }
            });
        self.reloader = spawned.ok().map(|_| ReloadReader {
            ask,
            done,
            reading: false,
            waiting: Vec::new(),
        });
    }

    /// Start reading the configuration again; `req`, if any, is answered when it is applied.
    /// An immediate refusal is returned (and `req` answered with it).
    pub(crate) fn ask_reload(&mut self, req: Option<Request>) -> Option<String> {
        let refusal = if self.shard.as_ref().is_some_and(|r| r.index > 0) {
            Some("error: only the first worker reloads (it passes the configuration on)")
        } else if self.reloader.is_none() {
            Some("error: this gateway was started without a way to re-read its configuration")
        } else {
            None
        };
        if let Some(e) = refusal {
            if let Some(q) = req {
                q.answer(format!("{e}\n"));
            }
            return Some(e.to_string());
        }
        let r = self.reloader.as_mut()?;
        r.waiting.extend(req);
        if !r.reading {
            r.reading = r.ask.send(()).is_ok();
        }
        None
    }

    /// Apply what the reader has read, if it has: one line saying what changed, or why nothing
    /// did (`error: …`), also sent to every request waiting for it.
    pub(crate) fn poll_reload(&mut self) -> Option<String> {
        let r = self.reloader.as_mut()?;
        let (read, read_ms) = r.done.try_recv().ok()?;
        r.reading = false;
        let waiting = std::mem::take(&mut r.waiting);
        let t1 = std::time::Instant::now();
        let applied = read.map_err(ChangeError::Reread).and_then(|c| {
            let passed = self.shard.as_ref().map(|r| (c.clone(), r.shards.len()));
            let said = self.apply(c)?;
            Ok(match passed {
                Some((c, n)) if n > 1 => {
                    if let Some(r) = &self.shard {
                        r.shards.broadcast_reload(&c);
                    }
                    let others = match n - 1 {
                        1 => "the other worker".to_string(),
                        k => format!("the {k} other workers"),
                    };
                    format!("{said}; passed to {others}")
                }
                _ => said,
            })
        });
        let apply_ms = t1.elapsed().as_secs_f64() * 1e3;
        let line = match applied {
            Ok(s) => {
                let sets = self.runtime_sets_after_reload();
                format!("reloaded: {s}{sets} (read in {read_ms:.2} ms off the forwarding loop, applied in {apply_ms:.2} ms)")
            }
            Err(e) => format!("error: {e} (the running configuration is kept)"),
        };
        for q in waiting {
            q.answer(format!("{line}\n"));
        }
        Some(line)
    }

    /// What became of the `gateway set` changes made since the last read: each one the file
    /// now gives too is kept, the others are replaced by the file's values; said so that a
    /// reload never undoes an operator's change without a word. Then forgotten.
    fn runtime_sets_after_reload(&mut self) -> String {
        let sets = std::mem::take(&mut self.runtime_sets);
        if sets.is_empty() {
            return String::new();
        }
        let (mut kept, mut undone) = (Vec::new(), Vec::new());
        for cmd in sets {
            let holds = match cmd.split_once(' ') {
                Some(("egress", w)) => spec_after_set(&self.egress.spec, w) == self.egress.spec,
                Some(("ingress", w)) => spec_after_set(&self.ingress.spec, w) == self.ingress.spec,
                Some(("emulate-egress", w)) => {
                    w.parse::<crate::Emulation>().ok() == Some(self.egress.path.emulation())
                }
                Some(("emulate-ingress", w)) => {
                    w.parse::<crate::Emulation>().ok() == Some(self.ingress.path.emulation())
                }
                _ => false,
            };
            if holds {
                kept.push(cmd)
            } else {
                undone.push(cmd)
            }
        }
        let mut out = String::new();
        if !undone.is_empty() {
            out += &format!(
                "; runtime changes replaced by the file (write them into it to keep them): `{}`",
                undone.join("`, `")
            );
        }
        if !kept.is_empty() {
            out += &format!(
                "; runtime changes the file also gives, kept: `{}`",
                kept.join("`, `")
            );
        }
        out
    }

    /// One direction's discipline, emulated link and rate controller; what changed.
    fn apply_side(
        &mut self,
        egress: bool,
        spec: QdiscSpec,
        emu: crate::Emulation,
        autorate: Option<crate::autorate::AutorateConfig>,
        now: u64,
    ) -> Result<Vec<String>, ChangeError> {
        let (name, side, was) = if egress {
            ("egress", &mut self.egress, self.cfg.autorate_egress)
        } else {
            ("ingress", &mut self.ingress, self.cfg.autorate_ingress)
        };
        let mut said = Vec::new();
        let mut replaced = spec != side.spec;
        if replaced {
            if let Some(n) = side.path.change_in_place(&spec) {
                // `tc class change` / `tc qdisc change`: nothing moves, so the rate controller
                // stays too.
                let what = match (&spec, n) {
                    (QdiscSpec::Htb(_), 1) => "1 class".to_string(),
                    (QdiscSpec::Htb(_), n) => format!("{n} classes"),
                    _ => "its rate".to_string(),
                };
                said.push(format!(
                    "{name} {}: {what} changed in place, no frame moved",
                    brief(&spec)
                ));
                side.spec = spec;
                replaced = false;
            } else if let Some(r) = side.path.reshape_qdisc(&spec, now) {
                said.push(format!("{name} {}: reshaped in place: {r}", brief(&spec)));
                side.spec = spec;
            } else {
                let (moved, refused) = side.path.replace_qdisc(&spec, now);
                said.push(format!("{name} `{}` → `{}`: {moved} queued frames moved, {refused} refused by the new discipline", brief(&side.spec), brief(&spec)));
                side.spec = spec;
            }
        }
        if emu != side.path.emulation() {
            side.path.change_emulation(emu)?;
            said.push(format!("{name} link → `{emu}`"));
        }
        if replaced || was != autorate {
            let sharded = self.shard.as_ref().map(|r| crate::autorate::Sharded {
                shards: std::sync::Arc::clone(&r.shards),
                dir: usize::from(!egress),
            });
            side.autorate =
                autorate.map(|a| crate::autorate::Control::new(a, &mut side.path, now, sharded));
            if was != autorate {
                let what = if autorate.is_some() { "set" } else { "removed" };
                said.push(format!("{name} rate controller {what}"));
            }
        }
        Ok(said)
    }

    /// Apply `new` without dropping a queued frame; what changed.
    pub fn apply(&mut self, new: Config) -> Result<String, ChangeError> {
        refuse(&self.cfg, &new, [&self.egress, &self.ingress])?;
        let now = self.now();
        let mut said = Vec::new();
        let plan = [
            (
                true,
                new.egress.clone(),
                new.emulate_egress,
                new.autorate_egress,
            ),
            (
                false,
                new.ingress.clone(),
                new.emulate_ingress,
                new.autorate_ingress,
            ),
        ];
        for (egress, spec, emu, autorate) in plan {
            said.extend(self.apply_side(egress, spec, emu, autorate, now)?);
        }
        // A worker's shaper now runs at the file's rate: its share is set again at its next
        // split, whatever share it had.
        if let Some(r) = self.shard.as_mut() {
            r.forget_shares();
        }
        if let Some(c) = &new.circuits {
            self.circuits = Some((**c).clone());
            said.push("circuit stage replaced (the files' addresses and MACs)".into());
        }
        if new.classify != self.cfg.classify {
            let hasher = self.egress.path.hasher();
            self.marker = new.classify.clone().map(|c| {
                debloat_core::classify::qosify::Classifier::new(
                    c,
                    debloat_core::classify::qosify::FLOW_SLOTS,
                    hasher,
                )
                .sharing_hash()
            });
            said.push(match &self.marker {
                Some(m) => format!("marking stage replaced ({} rules)", m.config().rules.len()),
                None => "marking stage removed".into(),
            });
        }
        let restart = restart_only(&self.cfg, &new);
        if !restart.is_empty() {
            said.push(format!(
                "not applied until a restart: {}",
                restart.join(", ")
            ));
        }
        let keep = (
            self.cfg.control.clone(),
            self.cfg.metrics,
            self.cfg.seed,
            self.cfg.busy_poll,
            self.cfg.io,
            self.cfg.passthrough,
            self.cfg.http,
        );
        self.cfg = Config {
            control: keep.0,
            metrics: keep.1,
            seed: keep.2,
            busy_poll: keep.3,
            io: keep.4,
            passthrough: keep.5,
            http: keep.6,
            ..new
        };
        if said.is_empty() {
            said.push("nothing changed".into());
        }
        Ok(said.join("; "))
    }
}

/// `spec` after `gateway set … WORDS` (`bandwidth 8Mbit`, `unlimited`): cake's rate.
pub(crate) fn spec_after_set(spec: &QdiscSpec, words: &str) -> QdiscSpec {
    let mut out = spec.clone();
    if let QdiscSpec::Cake(c) = &mut out {
        c.bandwidth_bytes_per_s = match words.split_whitespace().nth(1) {
            Some(r) => debloat_core::units::parse_rate(r)
                .ok()
                .map(|b| b / 8)
                .filter(|&b| b > 0),
            None => None,
        };
    }
    out
}

/// A discipline as a reload's message names it: its words, or for a tree of many classes its
/// kind and size (a LibreQoS tree's words run to megabytes).
fn brief(spec: &QdiscSpec) -> String {
    match spec {
        QdiscSpec::Htb(h) if h.classes.len() > 8 => format!("htb ({} classes)", h.classes.len()),
        other => other.to_string(),
    }
}
