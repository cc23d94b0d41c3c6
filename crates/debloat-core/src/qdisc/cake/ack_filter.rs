//! CAKE's ACK filter (`cake_ack_filter`): when a pure TCP ACK joins a flow that already holds
//! older ACKs of the same connection, an older one that the new ACK makes redundant is removed,
//! so a slow upstream wastes less capacity on ACKs. At most one ACK goes per enqueue.
//!
//! A queued ACK is redundant only if it carries nothing the newer one lacks: flags exactly ACK
//! (ECE/CWR allowed), only MD5/SACK/timestamp options, no payload, a cumulative ACK not after the
//! trigger's, SACK blocks all covered by the trigger's, and timestamps not after the trigger's.
//! Normal mode drops the oldest eligible ACK once a second eligible one is found; aggressive
//! mode also drops a lone eligible ACK sitting right before the trigger with the same ECE/CWR.

use crate::flow::FlowKey;
use crate::packet::{Packet, TcpInfo};
use crate::qdisc::pktq::{Fifo, Pool};

/// ACK filter setting.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AckFilter {
    /// Off.
    #[default]
    None,
    /// Conservative filtering.
    Filter,
    /// Aggressive filtering.
    Aggressive,
}

#[inline]
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[inline]
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

const ECE_CWR: u16 = TcpInfo::ECE | TcpInfo::CWR;

/// Whether `c` (queued) may be dropped given the trigger's timestamps (`cake_tcph_may_drop`).
fn may_drop(c: &TcpInfo, trigger_ts: (u32, u32)) -> bool {
    // Reserved bits and URG/PSH/RST/SYN/FIN clear, ACK set; ECE/CWR handled separately.
    if c.flags & 0x0F3F != TcpInfo::ACK || !c.options_droppable {
        return false;
    }
    match c.timestamp {
        Some((ts, ecr)) => !(after(ts, trigger_ts.0) || after(ecr, trigger_ts.1)),
        None => true,
    }
}

/// `cake_tcph_sack_compare(a, b)`: -1 if `a` SACKs something `b` does not (or has a DSACK),
/// 0 if they SACK the same, 1 if `b` SACKs more.
fn sack_compare(a: &TcpInfo, b: &TcpInfo) -> i32 {
    let (na, nb) = (a.sack_len as usize, b.sack_len as usize);
    match (na > 0, nb > 0) {
        (true, false) => return -1,
        (false, true) => return 1,
        (false, false) => return 0,
        _ => {}
    }
    let (mut bytes_a, mut bytes_b) = (0u32, 0u32);
    for (i, &(start_a, end_a)) in a.sack[..na].iter().enumerate() {
        if before(start_a, a.ack_seq) {
            return -1;
        }
        bytes_a = bytes_a.wrapping_add(end_a.wrapping_sub(start_a));
        let mut found = false;
        for &(start_b, end_b) in &b.sack[..nb] {
            if i == 0 {
                bytes_b = bytes_b.wrapping_add(end_b.wrapping_sub(start_b));
            }
            if !after(start_b, start_a) && !before(end_b, end_a) {
                found = true;
                if i > 0 {
                    break;
                }
            }
        }
        if !found {
            return -1;
        }
    }
    if bytes_b > bytes_a {
        1
    } else {
        0
    }
}

fn same_connection(a: &FlowKey, b: &FlowKey) -> bool {
    match (a, b) {
        (
            FlowKey::Ip {
                src,
                dst,
                sport,
                dport,
                proto,
                ..
            },
            FlowKey::Ip {
                src: s2,
                dst: d2,
                sport: sp2,
                dport: dp2,
                proto: p2,
                ..
            },
        ) => src == s2 && dst == d2 && sport == sp2 && dport == dp2 && *proto == 6 && *p2 == 6,
        _ => false,
    }
}

/// Index in `flow` of the queued ACK to drop, given that the last packet is the new arrival.
pub fn find<P: Packet>(pool: &Pool<P>, flow: &Fifo, mode: AckFilter) -> Option<usize> {
    if mode == AckFilter::None || flow.len() < 2 {
        return None;
    }
    let trig_pkt = pool.back(flow)?;
    let trig = trig_pkt.tcp()?;
    if trig.flags & (TcpInfo::ACK | TcpInfo::SYN) != TcpInfo::ACK {
        return None;
    }
    let trig_ts = trig.timestamp.unwrap_or((0, 0));
    let ts_for_check = if trig.timestamp.is_some() {
        trig_ts
    } else {
        (0, 0)
    };
    let mut elig: Option<(usize, u16)> = None;
    let mut num_found = 0;
    for (i, p) in pool.iter(flow).take(flow.len() - 1).enumerate() {
        let Some(c) = p.tcp() else { continue };
        if !same_connection(&p.meta().flow, &trig_pkt.meta().flow) {
            continue;
        }
        if let Some((_, flags)) = elig {
            if c.flags & ECE_CWR != flags {
                elig = None;
                num_found -= 1;
            }
        }
        if !may_drop(&c, ts_for_check) || c.payload_len != 0 || after(c.ack_seq, trig.ack_seq) {
            continue;
        }
        let sack = sack_compare(&c, &trig);
        if sack < 0 || (c.ack_seq == trig.ack_seq && sack == 0) {
            continue;
        }
        if elig.is_none() {
            elig = Some((i, c.flags & ECE_CWR));
        }
        num_found += 1;
        if num_found > 1 {
            return elig.map(|e| e.0);
        }
    }
    match elig {
        Some((i, flags))
            if mode == AckFilter::Aggressive
                && i + 2 == flow.len()
                && flags == trig.flags & ECE_CWR =>
        {
            Some(i)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{ack, pkt};

    fn check(v: Vec<crate::packet::Record>, mode: AckFilter) -> Option<usize> {
        let mut pool = Pool::with_capacity(8);
        let mut q = Fifo::default();
        for p in v {
            pool.push_back(&mut q, p);
        }
        find(&pool, &q, mode)
    }

    #[test]
    fn normal_mode_drops_oldest_of_two_redundant_acks() {
        let flow = vec![ack(1, 1000), ack(2, 2000), ack(3, 3000)];
        assert_eq!(check(flow.clone(), AckFilter::Filter), Some(0));
    }

    #[test]
    fn normal_mode_keeps_a_single_older_ack() {
        let flow = vec![ack(1, 1000), ack(2, 2000)];
        assert_eq!(check(flow.clone(), AckFilter::Filter), None);
        assert_eq!(
            check(flow.clone(), AckFilter::Aggressive),
            Some(0),
            "aggressive drops a lone neighbour"
        );
    }

    #[test]
    fn data_segments_and_later_acks_are_never_dropped() {
        let mut data = ack(1, 1000);
        if let Some(t) = data.tcp.as_mut() {
            t.payload_len = 1448;
        }
        let flow = vec![data, ack(2, 5000), ack(3, 3000)];
        // Packet 0 has payload; packet 1 acknowledges more than the trigger.
        assert_eq!(check(flow.clone(), AckFilter::Aggressive), None);
        let flow = vec![pkt(9, 100), ack(2, 2000), ack(3, 3000)];
        assert_eq!(
            check(flow.clone(), AckFilter::Filter),
            None,
            "non-TCP neighbours are skipped"
        );
    }

    #[test]
    fn sack_information_is_preserved() {
        let mut older = ack(1, 1000);
        if let Some(t) = older.tcp.as_mut() {
            t.sack_len = 1;
            t.sack[0] = (5000, 6000);
        }
        let flow = vec![older, ack(2, 1500), ack(3, 2000)];
        // Packet 0 SACKs 5000-6000, which the trigger does not: keep it; only packet 1 eligible.
        assert_eq!(check(flow.clone(), AckFilter::Filter), None);
    }
}
