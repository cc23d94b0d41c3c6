//! The sender's loss detection and retransmission: which holes in the SACK scoreboard count
//! as lost (RFC 6675's DUPTHRESH, and Linux's `tcp_mark_lost_retrans` for retransmissions
//! that later data overtook), and which lost segment goes next.

use super::{Nanos, Segment, Sender, DUPTHRESH};

impl Sender {
    /// Mark holes with at least DUPTHRESH SACKed segments above them as lost; true if any new.
    /// Also mark lost any retransmission that data sent after it has overtaken in the SACKs.
    pub(super) fn mark_lost(&mut self) -> bool {
        let mut above = 0u32;
        let mut any = false;
        // Retransmissions in the order they were sent; their bounds never decrease, so only the
        // front can have been overtaken.
        let hs = self.highest_sacked;
        while let Some(&(seq, bound)) = self.retrans_q.front() {
            if bound >= hs {
                break;
            }
            self.retrans_q.pop_front();
            if let Some(s) = self.seg(seq) {
                if s.lost && s.retransmitted && !s.sacked && s.retrans_bound == bound {
                    s.retransmitted = false;
                    self.lost_pending += 1;
                    any = true;
                    self.retrans_hint = self.retrans_hint.min(seq);
                }
            }
        }
        for s in self.board.iter_mut().rev() {
            if s.sacked {
                above += 1;
            } else if above >= DUPTHRESH {
                if s.lost {
                    break;
                }
                s.lost = true;
                self.lost_pending += 1;
                any = true;
            }
        }
        any
    }

    /// The first segment marked lost at or after the retransmission hint, retransmitted now
    /// (its delivery-rate stamp refreshed); None if the hint has passed them all.
    pub(super) fn retransmit_next(
        &mut self,
        now: Nanos,
        stamp: (Nanos, u64, Nanos, Nanos),
    ) -> Option<Segment> {
        let nxt = self.snd_nxt;
        let mut q = self.retrans_hint.max(self.snd_una);
        while q < self.snd_nxt {
            if let Some(s) = self.seg(q) {
                if s.pending() {
                    s.retransmitted = true;
                    s.retrans_bound = nxt;
                    (
                        s.sent_time,
                        s.delivered,
                        s.delivered_time,
                        s.first_sent_time,
                    ) = stamp;
                    self.retrans_q.push_back((q, nxt));
                    self.lost_pending -= 1;
                    self.retrans_hint = q + 1;
                    self.retransmits += 1;
                    if self.rto_deadline.is_none() {
                        self.arm_rto(now);
                    }
                    return Some(Segment {
                        seq: q,
                        retransmit: true,
                        cwr: false,
                    });
                }
            }
            q += 1;
        }
        None
    }
}
