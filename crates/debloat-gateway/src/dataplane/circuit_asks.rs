//! `gateway stats --circuit ID`'s answer, on one worker or several (`--workers N` with
//! LibreQoS's circuits).
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
            None => req.answer(render(&circuit, &[(0, mine)], 1)),
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
            w.req.answer(render(&w.circuit, &w.parts, workers));
        }
    }
}

/// `gateway stats --circuit ID`'s answer: the circuit's class in both trees as tc's text (class
/// and leaf) or JSON, every worker's copy summed; under several workers, each one's part too.
/// `parts` are the copies answered (worker, class pair), the first worker's first.
pub(crate) fn render(c: &Circuit, parts: &[(usize, ClassPair)], workers: usize) -> String {
    let mut sum: ClassPair = [None, None];
    for (_, pair) in parts {
        for (total, one) in sum.iter_mut().zip(pair) {
            match (total.as_mut(), one) {
                (Some(t), Some(o)) => t.add_counts(o),
                (None, Some(o)) => *total = Some(o.clone()),
                _ => {}
            }
        }
    }
    let missing: Vec<usize> = (0..workers)
        .filter(|w| !parts.iter().any(|p| p.0 == *w))
        .collect();
    let [up, down] = sum;
    if c.json {
        let mut v = serde_json::json!({
            "circuit": c.id, "name": c.name, "class": format!("1:{:x}", c.minor),
            "upload": up, "download": down,
        });
        if workers > 1 {
            v["workers"] = workers.into();
            v["workers_not_answering"] = serde_json::json!(missing);
            v["per_worker"] = parts
                .iter()
                .map(|(w, [u, d])| serde_json::json!({"worker": w, "upload": u, "download": d}))
                .collect();
        }
        return serde_json::to_string_pretty(&v).unwrap_or_default() + "\n";
    }
    let mut t = format!("circuit {} ({}), class 1:{:x}\n", c.id, c.name, c.minor);
    if workers > 1 {
        t.push_str(&format!(
            "summed over {} of {workers} workers (tokens and the leaf's own statistics: the first worker's){}\n",
            parts.len(),
            if missing.is_empty() { String::new() } else { format!("; no answer within 1 s from worker {}", missing.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")) }
        ));
    }
    for (dir, c) in [("upload", &up), ("download", &down)] {
        let Some(c) = c else { continue };
        t.push_str(&format!("{dir}:\n{}", c.to_tc_string()));
        match (&c.leaf_qdisc, &c.leaf) {
            (Some(q), Some(h)) => {
                t.push_str(&q.to_tc_string_at(&format!("{h} parent {}", c.classid)))
            }
            _ => t.push_str(" (its queues are released while idle)\n"),
        }
    }
    if workers > 1 {
        for (w, pair) in parts {
            let part = |c: &Option<ClassStats>| {
                c.as_ref().map_or("-".to_string(), |c| {
                    format!(
                        "{} bytes {} pkt (dropped {}, backlog {}b {}p)",
                        c.bytes, c.packets, c.drops, c.backlog, c.qlen
                    )
                })
            };
            t.push_str(&format!(
                "worker {w}: upload {}; download {}\n",
                part(&pair[0]),
                part(&pair[1])
            ));
        }
    }
    t
}

#[cfg(test)]
mod tests {
    use super::{render, Circuit, ClassAsks};
    use debloat_core::qdisc::class_stats::ClassStats;

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

    fn class(bytes: u64) -> ClassStats {
        ClassStats {
            kind: "htb".into(),
            id: 0x1_0011,
            classid: "1:11".into(),
            parent: Some("1:1".into()),
            leaf: None,
            options: "rate 12Mbit ceil 12Mbit".into(),
            bytes,
            packets: bytes / 1000,
            drops: 0,
            overlimits: 0,
            backlog: 0,
            qlen: 0,
            lended: 0,
            borrowed: 0,
            giants: 0,
            tokens: 0,
            ctokens: 0,
            leaf_qdisc: None,
        }
    }

    /// Under three workers, two answering: the reply sums their copies, lists each one's part
    /// and names the worker that did not answer; under one, no worker is mentioned.
    #[test]
    fn a_circuits_answer_sums_the_workers_that_answered_and_names_the_others() {
        let c = Circuit {
            id: "7".into(),
            name: "seven".into(),
            minor: 0x11,
            json: true,
        };
        let parts = [
            (0, [Some(class(5_000)), Some(class(1_000))]),
            (2, [Some(class(3_000)), None]),
        ];
        let v: serde_json::Value = serde_json::from_str(&render(&c, &parts, 3)).expect("JSON");
        assert_eq!(v["upload"]["bytes"], 8_000);
        assert_eq!(v["download"]["bytes"], 1_000);
        assert_eq!(v["workers_not_answering"], serde_json::json!([1]));
        assert_eq!(v["per_worker"][1]["worker"], 2);
        assert_eq!(v["per_worker"][1]["upload"]["bytes"], 3_000);
        let text = render(&Circuit { json: false, ..c }, &parts, 3);
        assert!(text.contains("summed over 2 of 3 workers"), "{text}");
        assert!(
            text.contains("no answer within 1 s from worker 1\n"),
            "{text}"
        );
        assert!(text.contains("worker 2: upload 3000 bytes 3 pkt"), "{text}");
        let c1 = Circuit {
            id: "7".into(),
            name: "seven".into(),
            minor: 0x11,
            json: false,
        };
        let one = render(&c1, &parts[..1], 1);
        assert!(
            one.contains("Sent 5000 bytes") && !one.contains("worker"),
            "{one}"
        );
    }
}
