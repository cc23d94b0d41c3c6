//! The one percentile every number debloat prints is computed with: nearest rank. The p-th
//! percentile of n sorted values is the value at rank ⌈p/100 · n⌉ (at least the first), so it
//! is always one of the samples — the definition flent's own summaries use, and the one the
//! simulator, the probe, replay and the reports share.

/// The p-th percentile (0..=100) of values sorted in ascending order; `None` for no values.
pub fn percentile<T: Copy>(sorted: &[T], p: f64) -> Option<T> {
    if sorted.is_empty() {
        return None;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil().max(1.0) as usize;
    Some(sorted[rank.min(sorted.len()) - 1])
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
        assert_eq!(percentile(&v, 0.0), Some(1));
        assert_eq!(percentile(&[7], 1.0), Some(7));
        assert_eq!(percentile::<u64>(&[], 50.0), None);
        // Ten samples: the 95th is the 10th (rank ⌈9.5⌉), the median the 5th.
        let f: Vec<f64> = (1..=10).map(f64::from).collect();
        assert_eq!(percentile(&f, 95.0), Some(10.0));
        assert_eq!(percentile(&f, 50.0), Some(5.0));
    }
}
