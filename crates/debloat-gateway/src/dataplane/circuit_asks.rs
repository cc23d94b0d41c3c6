//! `gateway stats --circuit ID` under several workers (`--workers N` with LibreQoS's circuits).
//!
//! Every worker runs the whole circuit tree over its own hosts' frames (a circuit whose
//! devices hash to different workers has a part of its class on each, `crate::htb_split`), so
//! a circuit's numbers are the sum of every worker's copy of its class. The first worker serves
//! the control socket: it notes its own copy, asks the others through [`ClassAsks`], and
//! answers the client once each has answered. A worker looks for asks at every split (every
//! half millisecond), off the packet path, so the answer comes within a millisecond or two;
//! a worker that has not answered within [`ANSWER_WITHIN_NS`] is named in the reply, which
//! sums the others. Counters are summed (`ClassStats::add_counts`); the tokens and the leaf's
//! own statistics shown are the first worker's, and each worker's part is listed.

use super::forward::Gateway;
use crate::control::Request;
use debloat_core::qdisc::class_stats::ClassStats;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Mutex;

/// A circuit's class in both trees on one worker: upload (egress), download (ingress).
pub type ClassPair = [Option<ClassStats>; 2];

/// How long the first worker waits for the others' answers, ns.
pub const ANSWER_WITHIN_NS: u64 = 1_000_000_000;

/// What the workers pass each other for `--circuit`.
#[derive(Debug)]
pub struct ClassAsks {
    next: AtomicU64,
    /// Per worker: the asks passed on (the ask's number, the class's minor).
    asks: Vec<Mutex<Vec<(u64, u16)>>>,
    /// Per worker: an ask is waiting (read at every split without a lock).
    waiting: Vec<AtomicBool>,
    /// The answers, for the first worker: the ask's number, the worker, its copy of the class.
    answers: Mutex<Vec<(u64, usize, ClassPair)>>,
}

impl ClassAsks {
    /// Room for `n` workers.
    pub fn new(n: usize) -> ClassAsks {
        ClassAsks {
            next: AtomicU64::new(1),
            asks: (0..n).map(|_| Mutex::new(Vec::new())).collect(),
            waiting: (0..n).map(|_| AtomicBool::new(false)).collect(),
            answers: Mutex::new(Vec::new()),
        }
    }

    /// Ask every worker but the first for class `minor`; the ask's number.
    pub fn ask(&self, minor: u16) -> u64 {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        for (q, flag) in self.asks.iter().zip(&self.waiting).skip(1) {
            q.lock().unwrap_or_else(|e| e.into_inner()).push((n, minor));
            flag.store(true, Ordering::Release);
        }
        n
    }

    /// The asks waiting for worker `w` (none without a lock when nothing waits).
    pub fn take_asks(&self, w: usize) -> Vec<(u64, u16)> {
        if !self.waiting[w].swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        std::mem::take(&mut *self.asks[w].lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Worker `w` answers ask `n` with its copy of the class.
    pub fn answer(&self, n: u64, w: usize, pair: ClassPair) {
        self.answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((n, w, pair));
    }

    /// The answers to ask `n` given so far, taken.
    pub fn take_answers(&self, n: u64) -> Vec<(usize, ClassPair)> {
        let mut all = self.answers.lock().unwrap_or_else(|e| e.into_inner());
        let (mine, rest): (Vec<_>, Vec<_>) = all.drain(..).partition(|a| a.0 == n);
        *all = rest;
        mine.into_iter().map(|(_, w, p)| (w, p)).collect()
    }
}

/// A `--circuit` request the first worker holds until the others answer.
pub(crate) struct Waiting {
    ask: u64,
    req: Request,
    circuit: Circuit,
    /// Each worker's copy answered so far (the first worker's first).
    parts: Vec<(usize, ClassPair)>,
    since: u64,
}

impl std::fmt::Debug for Waiting {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ask {} for circuit {}", self.ask, self.circuit.id)
    }
}

/// Which circuit, and how the answer is written.
pub(crate) struct Circuit {
    pub id: String,
    pub name: String,
    pub minor: u16,
    pub json: bool,
}

impl Gateway {
    /// This worker's copy of class `minor` in both trees.
    pub(crate) fn class_pair(&self, minor: u16) -> ClassPair {
        [
            self.egress.path.qdisc().class(minor),
            self.ingress.path.qdisc().class(minor),
        ]
    }

    /// `gateway stats --circuit ID`: answered at once on one worker; under several, the others
    /// are asked and the request waits for them ([`Gateway::circuit_asks_tick`]).
    pub(crate) fn ask_circuit(&mut self, req: Request, id: &str, json: bool) {
        let circuit = match self.find_circuit(id) {
            Ok((minor, name)) => Circuit {
                id: id.to_string(),
                name,
                minor,
                json,
            },
            Err(e) => return req.answer(e),
        };
        let mine = self.class_pair(circuit.minor);
        let now = self.now();
        match self.shard.as_mut().filter(|r| r.shards.len() > 1) {
            Some(role) => {
                let ask = role.shards.class_asks.ask(circuit.minor);
                role.circuits_waiting.push(Waiting {
                    ask,
                    req,
                    circuit,
                    parts: vec![(0, mine)],
                    since: now,
                });
            }
            None => req.answer(super::circuits::render(&circuit, &[(0, mine)], 1)),
        }
    }

    /// At every split: answer what the first worker asked (the other workers), or answer the
    /// requests every worker has answered, or that waited [`ANSWER_WITHIN_NS`] (the first).
    pub(crate) fn circuit_asks_tick(&mut self, now: u64) {
        let Some(role) = self.shard.as_ref() else {
            return;
        };
        let (index, shards) = (role.index, std::sync::Arc::clone(&role.shards));
        if index > 0 {
            for (n, minor) in shards.class_asks.take_asks(index) {
                shards.class_asks.answer(n, index, self.class_pair(minor));
            }
            return;
        }
        let Some(role) = self.shard.as_mut() else {
            return;
        };
        if role.circuits_waiting.is_empty() {
            return;
        }
        let workers = shards.len();
        for mut w in std::mem::take(&mut role.circuits_waiting) {
            w.parts.extend(shards.class_asks.take_answers(w.ask));
            if w.parts.len() < workers && now.saturating_sub(w.since) < ANSWER_WITHIN_NS {
                role.circuits_waiting.push(w);
                continue;
            }
            w.parts.sort_by_key(|p| p.0);
            w.req
                .answer(super::circuits::render(&w.circuit, &w.parts, workers));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::ClassAsks;

    /// An ask reaches every worker but the first, once; answers are taken by their ask's
    /// number and no other.
    #[test]
    fn asks_reach_the_other_workers_and_answers_find_their_ask() {
        let a = ClassAsks::new(3);
        let n = a.ask(0x11);
        let m = a.ask(0x12);
        assert!(a.take_asks(0).is_empty());
        assert_eq!(a.take_asks(1), vec![(n, 0x11), (m, 0x12)]);
        assert!(a.take_asks(1).is_empty(), "taken once");
        assert_eq!(a.take_asks(2).len(), 2);
        a.answer(n, 1, [None, None]);
        a.answer(m, 2, [None, None]);
        a.answer(n, 2, [None, None]);
        let got: Vec<usize> = a.take_answers(n).into_iter().map(|p| p.0).collect();
        assert_eq!(got, vec![1, 2]);
        assert_eq!(a.take_answers(m).len(), 1);
        assert!(a.take_answers(n).is_empty());
    }
}
