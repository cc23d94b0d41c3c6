//! Which way a packet goes: the one `Direction` the simulator, replay, the gateway, the probe
//! and the reports share.
//!
//! `Up` is away from the person the network serves: client → server in flent's words, LAN →
//! WAN (egress) at a gateway, a station's upload. `Down` is the other way (ingress).

/// Which way a packet goes (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    /// Client → server; LAN → WAN (a gateway's egress).
    Up,
    /// Server → client; WAN → LAN (a gateway's ingress).
    Down,
}

impl Direction {
    /// Both, up first.
    pub const BOTH: [Direction; 2] = [Direction::Up, Direction::Down];

    /// The other way.
    pub fn reverse(self) -> Direction {
        match self {
            Direction::Up => Direction::Down,
            Direction::Down => Direction::Up,
        }
    }

    /// 0 for up, 1 for down (to index a pair).
    pub fn idx(self) -> usize {
        match self {
            Direction::Up => 0,
            Direction::Down => 1,
        }
    }

    /// "up" or "down".
    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Up => "up",
            Direction::Down => "down",
        }
    }
}

impl core::fmt::Display for Direction {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::Direction;

    #[test]
    fn reverse_and_index_pair_up() {
        for d in Direction::BOTH {
            assert_ne!(d.reverse(), d);
            assert_eq!(d.reverse().reverse(), d);
            assert_eq!(Direction::BOTH[d.idx()], d);
        }
        assert_eq!(
            serde_json::to_string(&Direction::Up).ok().as_deref(),
            Some("\"up\"")
        );
    }
}
