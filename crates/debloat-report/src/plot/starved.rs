//! Where a trace-driven link was starved: the seconds its capacity fell under 10 % of its
//! median, when no shaper can hold the delay. The time-series plot shades them on both of a
//! run's panels, and `debloat autorate compare` names them.

use super::{err, Lin, Res};
use crate::flent::{Dataset, Kind};
use plotters::prelude::*;

/// The spans (s) where a run's link capacity (all its `Capacity` series summed per step) fell
/// under 10 % of its median: where no shaper can hold the delay.
pub fn starved_spans(d: &Dataset) -> Vec<(f64, f64)> {
    let caps: Vec<&crate::flent::Series> = d.of_kind(|k| k == Kind::Capacity).collect();
    if caps.is_empty() || d.x.len() < 2 {
        return Vec::new();
    }
    let per_step: Vec<Option<f64>> = (0..d.x.len())
        .map(|i| {
            let v: Vec<f64> = caps
                .iter()
                .filter_map(|s| s.values.get(i).copied().flatten())
                .collect();
            (!v.is_empty()).then(|| v.iter().sum())
        })
        .collect();
    let mut known: Vec<f64> = per_step.iter().flatten().copied().collect();
    known.sort_by(f64::total_cmp);
    let Some(&median) = known.get(known.len() / 2) else {
        return Vec::new();
    };
    let step = d.x[1] - d.x[0];
    let mut spans: Vec<(f64, f64)> = Vec::new();
    for (i, c) in per_step.iter().enumerate() {
        if c.is_some_and(|c| c < 0.1 * median) {
            let (a, b) = (d.x[i], d.x[i] + step);
            match spans.last_mut() {
                Some(last) if (last.1 - a).abs() < step / 2.0 => last.1 = b,
                _ => spans.push((a, b)),
            }
        }
    }
    spans
}

/// Shade the seconds a link was starved ([`starved_spans`]) across a panel's height.
pub(super) fn shade<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    c: &mut ChartContext<'_, DB, Cartesian2d<Lin, Y>>,
    d: &Dataset,
    (lo, hi): (f64, f64),
) -> Res {
    let band = RGBColor(200, 120, 120).mix(0.18).filled();
    let spans = starved_spans(d);
    c.draw_series(
        spans
            .iter()
            .map(|&(a, b)| Rectangle::new([(a, lo), (b, hi)], band)),
    )
    .map_err(err)?;
    Ok(())
}
