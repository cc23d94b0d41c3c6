//! The TCP receiver: in-order delivery with out-of-order segments held, delayed ACKs (every
//! second segment, or after the delayed-ACK timer), SACK blocks for the holes, and ECN echo.

use super::*;

/// The receiving side of a bulk connection.
#[derive(Debug, Default)]
pub struct Receiver {
    rcv_nxt: u64,
    ooo: BTreeSet<u64>,
    unacked: u32,
    ece: bool,
    last_seq: u64,
    last_echo: Nanos,
    delack_deadline: Option<Nanos>,
    /// Segments delivered in order to the application.
    pub delivered: u64,
    /// Segments that arrived CE-marked.
    pub ce_marked: u64,
}

impl Receiver {
    /// A receiver expecting segment 0.
    pub fn new() -> Receiver {
        Receiver::default()
    }

    /// When the delayed-ACK timer fires, if armed.
    pub fn poll_timeout(&self) -> Option<Nanos> {
        self.delack_deadline
    }

    /// A segment arrived at `now`; returns an ACK to send now, if one is due.
    pub fn on_data(
        &mut self,
        seq: u64,
        ce: bool,
        cwr: bool,
        sent_at: Nanos,
        now: Nanos,
    ) -> Option<AckInfo> {
        if cwr {
            self.ece = false;
        }
        if ce {
            self.ece = true;
            self.ce_marked += 1;
        }
        self.last_seq = seq;
        self.last_echo = sent_at;
        let immediate = if seq == self.rcv_nxt {
            let had_holes = !self.ooo.is_empty();
            self.rcv_nxt += 1;
            self.delivered += 1;
            while self.ooo.remove(&self.rcv_nxt) {
                self.rcv_nxt += 1;
                self.delivered += 1;
            }
            self.unacked += 1;
            had_holes || self.unacked >= 2 || ce
        } else {
            if seq > self.rcv_nxt {
                self.ooo.insert(seq);
            }
            true
        };
        if immediate {
            return Some(self.ack());
        }
        if self.delack_deadline.is_none() {
            self.delack_deadline = Some(now + DELACK);
        }
        None
    }

    /// The delayed-ACK timer fired at `now`.
    pub fn on_timeout(&mut self, now: Nanos) -> Option<AckInfo> {
        match self.delack_deadline {
            Some(d) if d <= now => Some(self.ack()),
            _ => None,
        }
    }

    fn ack(&mut self) -> AckInfo {
        self.unacked = 0;
        self.delack_deadline = None;
        let (sack, sack_len) = self.sack_blocks();
        AckInfo {
            ack: self.rcv_nxt,
            sack,
            sack_len,
            ece: self.ece,
            echo: self.last_echo,
            ce: self.ce_marked,
        }
    }

    /// Up to three SACK blocks: the one holding the latest segment first, then the highest.
    fn sack_blocks(&self) -> ([(u64, u64); 3], u8) {
        let mut blocks: Vec<(u64, u64)> = Vec::new();
        for &s in self.ooo.iter().rev() {
            match blocks.last_mut() {
                Some(b) if b.0 == s + 1 => b.0 = s,
                _ => {
                    if blocks.len() == 8 {
                        break;
                    }
                    blocks.push((s, s + 1));
                }
            }
        }
        if let Some(i) = blocks
            .iter()
            .position(|b| b.0 <= self.last_seq && self.last_seq < b.1)
        {
            let b = blocks.remove(i);
            blocks.insert(0, b);
        }
        let mut out = [(0, 0); 3];
        let n = blocks.len().min(3);
        out[..n].copy_from_slice(&blocks[..n]);
        (out, n as u8)
    }
}
