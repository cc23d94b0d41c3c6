//! The spread of repeated runs (`debloat sim --seeds N`): one row per configuration, each
//! direction's throughput and each latency probe drawn as the mean over the seeds with a shaded
//! band from the lowest to the highest seed at every sample, instead of one line per run.

use super::{colour, direction_sum, err, latency_axes, latency_range, throughput_axes, Legend};
use super::{throughput_scale, time_span, Res, DOWN, UP};
use crate::flent::{Dataset, Direction, Kind};
use plotters::coord::Shift;
use plotters::prelude::*;

/// A configuration's runs, one per seed, on the same time grid.
pub struct Group<'a> {
    /// The configuration's label.
    pub label: String,
    /// Its runs.
    pub runs: &'a [Dataset],
}

/// Per grid point over the runs: (x, mean, min, max) where at least one run has a value.
fn band(x: &[f64], series: &[Vec<Option<f64>>]) -> Vec<(f64, f64, f64, f64)> {
    x.iter()
        .enumerate()
        .filter_map(|(i, &x)| {
            let v: Vec<f64> = series
                .iter()
                .filter_map(|s| s.get(i).copied().flatten())
                .collect();
            if v.is_empty() {
                return None;
            }
            let mean = v.iter().sum::<f64>() / v.len() as f64;
            let lo = v.iter().copied().fold(f64::INFINITY, f64::min);
            let hi = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
            Some((x, mean, lo, hi))
        })
        .collect()
}

/// Draw one band (shaded min–max) and its mean line, labelled.
fn draw_band<DB: DrawingBackend, Y: Ranged<ValueType = f64>>(
    c: &mut ChartContext<'_, DB, Cartesian2d<plotters::coord::types::RangedCoordf64, Y>>,
    b: &[(f64, f64, f64, f64)],
    col: RGBColor,
    label: String,
    key: &mut Legend,
) -> Res {
    if b.is_empty() {
        return Ok(());
    }
    let mut outline: Vec<(f64, f64)> = b.iter().map(|p| (p.0, p.3)).collect();
    outline.extend(b.iter().rev().map(|p| (p.0, p.2)));
    c.draw_series(std::iter::once(Polygon::new(
        outline,
        col.mix(0.25).filled(),
    )))
    .map_err(err)?;
    c.draw_series(LineSeries::new(
        b.iter().map(|p| (p.0, p.1)),
        col.stroke_width(2),
    ))
    .map_err(err)?;
    key.line(&label, col.stroke_width(2));
    Ok(())
}

/// The chart: one row per group, throughput left and latency right.
pub fn draw_spread<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, groups: &[Group]) -> Res {
    root.fill(&WHITE).map_err(err)?;
    let all: Vec<Dataset> = groups.iter().flat_map(|g| g.runs.iter().cloned()).collect();
    let x_max = time_span(&all);
    let (y_max, lat) = (throughput_scale(&all), latency_range(&all));
    let rows = root.split_evenly((groups.len().max(1), 2));
    for (i, g) in groups.iter().enumerate() {
        let Some(first) = g.runs.first() else {
            continue;
        };
        let n = g.runs.len();
        let caption = format!("{} — throughput, {n} seeds", g.label);
        let mut c = throughput_axes(&rows[2 * i], caption, x_max, y_max)?;
        let mut key = Legend::default();
        for (dir, col, name) in [
            (Direction::Down, DOWN, "download"),
            (Direction::Up, UP, "upload"),
        ] {
            let sums: Vec<_> = g.runs.iter().map(|d| direction_sum(d, Some(dir))).collect();
            let b = band(&first.x, &sums);
            draw_band(
                &mut c,
                &b,
                col,
                format!("{name} sum: mean, min–max"),
                &mut key,
            )?;
        }
        key.draw(&rows[2 * i], 12, 30)?;
        latency_spread(&rows[2 * i + 1], g, x_max, lat)?;
    }
    Ok(())
}

fn latency_spread<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    g: &Group,
    x_max: f64,
    (lo, hi): (f64, f64),
) -> Res {
    let Some(first) = g.runs.first() else {
        return Ok(());
    };
    let caption = format!("{} — latency, {} seeds", g.label, g.runs.len());
    let mut c = latency_axes(area, caption, x_max, (lo, hi))?;
    let mut key = Legend::default();
    for (k, s) in first
        .of_kind(|k| matches!(k, Kind::Latency | Kind::OneWayLatency))
        .enumerate()
    {
        let per_run: Vec<Vec<Option<f64>>> = g
            .runs
            .iter()
            .filter_map(|d| {
                d.of_kind(|k| matches!(k, Kind::Latency | Kind::OneWayLatency))
                    .find(|t| t.name == s.name)
            })
            .map(|t| {
                t.values
                    .iter()
                    .map(|v| v.map(|v| v.clamp(lo, hi)))
                    .collect()
            })
            .collect();
        let b = band(&first.x, &per_run);
        draw_band(&mut c, &b, colour(k + 1), s.name.clone(), &mut key)?;
    }
    key.draw(area, 11, 30)
}
