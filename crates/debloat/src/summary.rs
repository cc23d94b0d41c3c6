//! Small statistics helpers shared by the commands' printed summaries.

/// The p-th percentile (0..=100) of already sorted values, nearest-rank.
pub fn percentile(sorted: &[u64], p: f64) -> Option<u64> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
}

/// Nanoseconds as milliseconds with sensible precision.
pub fn ms(ns: u64) -> String {
    let v = ns as f64 / 1e6;
    if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Bytes over a duration as Mbit/s.
pub fn mbps(bytes: u64, ns: u64) -> f64 {
    if ns == 0 {
        return 0.0;
    }
    bytes as f64 * 8.0 * 1e3 / ns as f64
}

/// Overwrite the terminal's current line with `what` and a percentage (stderr).
pub fn progress_line(what: &str, fraction: f64) {
    eprint!("\r\x1b[2K  {what}: {:3.0}%", fraction * 100.0);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let v: Vec<u64> = (1..=100).collect();
        assert_eq!(percentile(&v, 50.0), Some(50));
        assert_eq!(percentile(&v, 99.0), Some(99));
        assert_eq!(percentile(&v, 100.0), Some(100));
        assert_eq!(percentile(&[7], 1.0), Some(7));
        assert_eq!(percentile(&[], 50.0), None);
    }
}
