//! The plots people compare runs with (docs/measurement.md §2.9): throughput and latency over time
//! per run on shared axes (flent's `all_scaled`, one row per run), the latency CDF of every run
//! (`ping_cdf`), and each flow's mean throughput per run (`totals`).
//!
//! Each plot is drawn once by a function generic over plotters' backend and rendered twice: to
//! SVG (embedded in the HTML) and to PNG (for pasting elsewhere). Text is drawn with DejaVu Sans
//! compiled in, so rendering needs no system fonts.
//!
//! Latency axes are logarithmic: a deep FIFO's seconds and an AQM's milliseconds differ by three
//! orders of magnitude, and on a shared linear axis the good runs would be a flat line at zero.

use crate::flent::{Dataset, Direction, Kind};
use crate::summary::load_latencies;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;
use std::sync::Once;

mod legend;
mod panels;
mod spread;
mod starved;
use legend::{Legend, LEGEND_W};
pub use panels::{render_panels, Panel};
pub use spread::Group;
use starved::shade;
pub use starved::starved_spans;

/// A rendered plot.
pub struct Plot {
    /// File stem, e.g. "timeseries".
    pub name: &'static str,
    /// Alt text / caption.
    pub caption: String,
    /// The SVG document.
    pub svg: String,
}

type Res = Result<(), String>;

fn err<E: std::fmt::Debug>(e: E) -> String {
    format!("plot: {e:?}")
}

static FONT: Once = Once::new();

fn register_font() {
    FONT.call_once(|| {
        // The font is compiled in; a failure here would be a broken build, and text would then
        // only be missing from the PNGs (the SVGs name the family and the browser draws it).
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// Run colours, distinguishable and colour-blind friendly (Okabe–Ito).
const RUN_COLOURS: [RGBColor; 10] = [
    RGBColor(0, 114, 178),
    RGBColor(213, 94, 0),
    RGBColor(0, 158, 115),
    RGBColor(204, 121, 167),
    RGBColor(86, 180, 233),
    RGBColor(230, 159, 0),
    RGBColor(0, 0, 0),
    RGBColor(120, 94, 240),
    RGBColor(153, 153, 153),
    RGBColor(140, 86, 75),
];

fn colour(i: usize) -> RGBColor {
    RUN_COLOURS[i % RUN_COLOURS.len()]
}

const DOWN: RGBColor = RGBColor(0, 114, 178);
const UP: RGBColor = RGBColor(213, 94, 0);

/// Render every plot for these runs; PNGs go to `dir`, SVGs are returned (and written too).
pub fn render_all(runs: &[Dataset], dir: &Path) -> Result<Vec<Plot>, String> {
    register_font();
    let n = runs.len().max(1) as u32;
    let timeseries = if stacked(runs) {
        (
            "Capacity (grey), shaper rate (green) and throughput over time, latency (log scale) below, two rows per run on one time axis; shaded: seconds the link's capacity fell under 10 % of its median".into(),
            (1400, 70 + 2 * 220 * n),
        )
    } else {
        (
            "Throughput (left) and latency (right, log scale) over time, one row per run, shared axes"
                .into(),
            (1400, 70 + 240 * n),
        )
    };
    let plots: [(&'static str, String, (u32, u32), Chart); 3] = [
        ("timeseries", timeseries.0, timeseries.1, Chart::Timeseries),
        (
            "latency_cdf",
            "Latency under load: cumulative distribution per run (log scale)".into(),
            (900, 480),
            Chart::Cdf,
        ),
        (
            "totals",
            "Mean throughput of each flow under load, per run".into(),
            (900, totals_height(runs)),
            Chart::Totals,
        ),
    ];
    let mut out = Vec::new();
    for (name, caption, size, chart) in plots {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
            draw(chart, &root, runs)?;
            root.present().map_err(err)?;
        }
        let png = dir.join(format!("{name}.png"));
        {
            let root = BitMapBackend::new(&png, size).into_drawing_area();
            draw(chart, &root, runs)?;
            root.present().map_err(err)?;
        }
        std::fs::write(dir.join(format!("{name}.svg")), &svg).map_err(err)?;
        out.push(Plot { name, caption, svg });
    }
    Ok(out)
}

/// The spread of repeated runs (one row per group, mean and min–max band), as `spread.svg`
/// and `spread.png`.
pub fn render_spread(groups: &[Group], dir: &Path) -> Result<Plot, String> {
    register_font();
    let size = (1400, 70 + 240 * groups.len().max(1) as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        spread::draw_spread(&root, groups)?;
        root.present().map_err(err)?;
    }
    let png = dir.join("spread.png");
    {
        let root = BitMapBackend::new(&png, size).into_drawing_area();
        spread::draw_spread(&root, groups)?;
        root.present().map_err(err)?;
    }
    std::fs::write(dir.join("spread.svg"), &svg).map_err(err)?;
    Ok(Plot {
        name: "spread",
        caption: "Throughput (left) and latency (right, log scale) over time: the mean over the \
                  seeds as a line, the lowest to the highest seed as a shaded band, one row per \
                  configuration"
            .into(),
        svg,
    })
}

/// The plots, drawn by one generic body per backend (SVG and PNG differ in type).
#[derive(Clone, Copy)]
enum Chart {
    Timeseries,
    Cdf,
    Totals,
}

fn draw<DB: DrawingBackend>(c: Chart, root: &DrawingArea<DB, Shift>, runs: &[Dataset]) -> Res {
    match c {
        Chart::Timeseries => draw_timeseries(root, runs),
        Chart::Cdf => draw_cdf(root, runs),
        Chart::Totals => draw_totals(root, runs),
    }
}

fn draw_timeseries<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Dataset]) -> Res {
    root.fill(&WHITE).map_err(err)?;
    let x_max = time_span(runs);
    let y_max = throughput_scale(runs);
    let lat = latency_range(runs);
    // Runs over a capacity trace put latency below throughput, on the same time axis.
    let rows = if stacked(runs) {
        root.split_evenly((2 * runs.len().max(1), 1))
    } else {
        root.split_evenly((runs.len().max(1), 2))
    };
    for (i, d) in runs.iter().enumerate() {
        throughput_panel(&rows[2 * i], d, x_max, y_max)?;
        latency_panel(&rows[2 * i + 1], d, x_max, lat)?;
    }
    Ok(())
}

/// Whether any run carries a link's capacity (a trace-driven link).
fn stacked(runs: &[Dataset]) -> bool {
    runs.iter()
        .any(|d| d.of_kind(|k| k == Kind::Capacity).next().is_some())
}

type Lin = plotters::coord::types::RangedCoordf64;
type Log = plotters::coord::combinators::LogCoord<f64>;

/// The longest run's length, s: the shared time axis.
fn time_span(runs: &[Dataset]) -> f64 {
    runs.iter()
        .map(|d| d.total_length.max(d.x.last().copied().unwrap_or(0.0)))
        .fold(1.0, f64::max)
}

/// The axes of a throughput-over-time panel (Mbit/s against s).
fn throughput_axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: String,
    x_max: f64,
    y_max: f64,
) -> Result<ChartContext<'a, DB, Cartesian2d<Lin, Lin>>, String> {
    let mut c = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .margin_right(LEGEND_W)
        .x_label_area_size(34)
        .y_label_area_size(58)
        .build_cartesian_2d(0.0..x_max, 0.0..y_max)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc("throughput (Mbit/s)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| format!("{v:.0}"))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(err)?;
    Ok(c)
}

/// The axes of a latency-over-time panel (ms on a log scale against s).
fn latency_axes<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: String,
    x_max: f64,
    (lo, hi): (f64, f64),
) -> Result<ChartContext<'a, DB, Cartesian2d<Lin, Log>>, String> {
    let mut c = ChartBuilder::on(area)
        .caption(caption, ("sans-serif", 16))
        .margin(8)
        .margin_right(LEGEND_W)
        .x_label_area_size(34)
        .y_label_area_size(58)
        .build_cartesian_2d(0.0..x_max, (lo..hi).log_scale())
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("time (s)")
        .y_desc("latency (ms, log scale)")
        .x_label_formatter(&|v| format!("{v:.0}"))
        .y_label_formatter(&|v| ms_label(*v))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(err)?;
    Ok(c)
}

/// One run's throughput over time: each flow faint, each direction's sum bold.
fn throughput_panel<DB: DrawingBackend>(
    left: &DrawingArea<DB, Shift>,
    d: &Dataset,
    x_max: f64,
    y_max: f64,
) -> Res {
    let mut c = throughput_axes(left, format!("{} — throughput", d.label), x_max, y_max)?;
    let mut key = Legend::default();
    for s in d.of_kind(|k| matches!(k, Kind::Throughput(_))) {
        let col = match s.kind {
            Kind::Throughput(Some(Direction::Down)) => DOWN,
            Kind::Throughput(Some(Direction::Up)) => UP,
            _ => colour(2),
        };
        let v = clamp_all(&s.values, y_max);
        c.draw_series(LineSeries::new(points(&d.x, &v), col.mix(0.45)))
            .map_err(err)?;
    }
    for (dir, col, label) in [
        (Direction::Down, DOWN, "download sum"),
        (Direction::Up, UP, "upload sum"),
    ] {
        let sum = clamp_all(&direction_sum(d, Some(dir)), y_max);
        if sum.iter().any(Option::is_some) {
            c.draw_series(LineSeries::new(points(&d.x, &sum), col.stroke_width(3)))
                .map_err(err)?;
            key.line(label, col.stroke_width(3));
        }
    }
    link_lines(&mut c, d, y_max, &mut key)?;
    shade(&mut c, d, (0.0, y_max))?;
    key.draw(left, 12, 30)
}

/// A trace-driven link's capacity (grey, thick) and a controller's shaper rate (green) on the
/// throughput axes, so what the link could carry, what the shaper allowed and what the flows
/// got share one time axis.
fn link_lines<DB: DrawingBackend>(
    c: &mut ChartContext<'_, DB, Cartesian2d<Lin, Lin>>,
    d: &Dataset,
    y_max: f64,
    key: &mut Legend,
) -> Res {
    const CAPACITY: RGBColor = RGBColor(120, 120, 120);
    const SHAPER: RGBColor = RGBColor(0, 158, 115);
    for s in d.of_kind(|k| matches!(k, Kind::Capacity | Kind::ShaperRate)) {
        let (col, width) = if s.kind == Kind::Capacity {
            (CAPACITY, 2)
        } else {
            (SHAPER, 2)
        };
        let v = clamp_all(&s.values, y_max);
        c.draw_series(LineSeries::new(points(&d.x, &v), col.stroke_width(width)))
            .map_err(err)?;
        key.line(&s.name, col.stroke_width(2));
    }
    Ok(())
}

/// One run's latency series over time, on a log scale shared by every run.
fn latency_panel<DB: DrawingBackend>(
    right: &DrawingArea<DB, Shift>,
    d: &Dataset,
    x_max: f64,
    (lat_lo, lat_hi): (f64, f64),
) -> Res {
    let mut c = latency_axes(
        right,
        format!("{} — latency", d.label),
        x_max,
        (lat_lo, lat_hi),
    )?;
    shade(&mut c, d, (lat_lo, lat_hi))?;
    let mut key = Legend::default();
    for (k, s) in d
        .of_kind(|k| matches!(k, Kind::Latency | Kind::OneWayLatency))
        .enumerate()
    {
        let col = colour(k + 1);
        let clamped: Vec<Option<f64>> = s
            .values
            .iter()
            .map(|v| v.map(|v| v.clamp(lat_lo, lat_hi)))
            .collect();
        c.draw_series(LineSeries::new(points(&d.x, &clamped), col.stroke_width(1)))
            .map_err(err)?;
        key.line(&s.name, col.stroke_width(2));
    }
    key.draw(right, 11, 30)
}

fn draw_cdf<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Dataset]) -> Res {
    root.fill(&WHITE).map_err(err)?;
    let (lo, hi) = latency_range(runs);
    let mut c = ChartBuilder::on(root)
        .caption("Latency under load (CDF)", ("sans-serif", 18))
        .margin(12)
        .margin_right(LEGEND_W)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0.0..1.0)
        .map_err(err)?;
    c.configure_mesh()
        .x_desc("latency (ms, log scale)")
        .y_desc("cumulative probability")
        .x_label_formatter(&|v| ms_label(*v))
        .light_line_style(TRANSPARENT)
        .draw()
        .map_err(err)?;
    let mut key = Legend::default();
    for (i, d) in runs.iter().enumerate() {
        let v = load_latencies(d);
        if v.is_empty() {
            continue;
        }
        let n = v.len() as f64;
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .map(|(k, &x)| (x.clamp(lo, hi), (k + 1) as f64 / n))
            .collect();
        let col = colour(i);
        c.draw_series(LineSeries::new(pts, col.stroke_width(2)))
            .map_err(err)?;
        key.line(&d.label, col.stroke_width(2));
    }
    key.draw(root, 13, 40)
}

/// Flow names in first-seen order across runs.
fn flow_names(runs: &[Dataset]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for d in runs {
        for s in d.of_kind(|k| matches!(k, Kind::Throughput(_))) {
            if !names.contains(&s.name) {
                names.push(s.name.clone());
            }
        }
    }
    names
}

fn totals_height(runs: &[Dataset]) -> u32 {
    let rows = flow_names(runs).len().max(1) as u32;
    (120 + rows * (14 * runs.len().max(1) as u32 + 12)).clamp(240, 2400)
}

fn draw_totals<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, runs: &[Dataset]) -> Res {
    root.fill(&WHITE).map_err(err)?;
    let names = flow_names(runs);
    let sums: Vec<crate::summary::RunSummary> =
        runs.iter().map(crate::summary::RunSummary::of).collect();
    let x_max = sums
        .iter()
        .flat_map(|s| s.flows.iter().map(|f| f.1))
        .fold(1.0, f64::max)
        * 1.15;
    let n = names.len().max(1);
    let mut c = ChartBuilder::on(root)
        .caption("Mean throughput per flow under load", ("sans-serif", 18))
        .margin(12)
        .margin_right(LEGEND_W)
        .x_label_area_size(40)
        .y_label_area_size(170)
        .build_cartesian_2d(0.0..x_max, 0.0..n as f64)
        .map_err(err)?;
    let labels = names.clone();
    c.configure_mesh()
        .x_desc("throughput (Mbit/s)")
        .light_line_style(TRANSPARENT)
        .y_labels(n * 2 + 1)
        .y_label_formatter(&move |v| {
            // Label each band's middle with its flow name.
            let k = v.floor() as usize;
            if (v - v.floor() - 0.5).abs() < 1e-6 {
                labels
                    .get(n.saturating_sub(1 + k))
                    .cloned()
                    .unwrap_or_default()
            } else {
                String::new()
            }
        })
        .disable_y_mesh()
        .draw()
        .map_err(err)?;
    let r = runs.len().max(1) as f64;
    let mut key = Legend::default();
    for (ri, s) in sums.iter().enumerate() {
        let col = colour(ri);
        let bars: Vec<Rectangle<(f64, f64)>> = s
            .flows
            .iter()
            .filter_map(|(name, v)| {
                let k = names.iter().position(|x| x == name)?;
                let band = (n - 1 - k) as f64;
                let top = band + 0.9 - ri as f64 * 0.8 / r;
                Some(Rectangle::new(
                    [(0.0, top - 0.8 / r + 0.02), (*v, top)],
                    col.filled(),
                ))
            })
            .collect();
        c.draw_series(bars).map_err(err)?;
        key.boxed(&s.label, col.filled());
    }
    key.draw(root, 13, 40)
}

/// (x, y) points, breaking nothing: nulls are skipped (flent's plots do the same).
fn points(x: &[f64], v: &[Option<f64>]) -> Vec<(f64, f64)> {
    x.iter()
        .zip(v)
        .filter_map(|(&x, v)| v.map(|v| (x, v)))
        .collect()
}

/// Per grid point, the sum of the flows going one way (`None`: the flows whose names do not
/// say; None where none has a value).
fn direction_sum(d: &Dataset, dir: Option<Direction>) -> Vec<Option<f64>> {
    let mut out = vec![None; d.x.len()];
    for s in d.of_kind(|k| k == Kind::Throughput(dir)) {
        for (o, v) in out.iter_mut().zip(&s.values) {
            if let Some(v) = v {
                *o = Some(o.unwrap_or(0.0) + v);
            }
        }
    }
    out
}

/// The shared throughput axis: 1.2 × the 99th percentile of every run's per-direction sums
/// (flent's "scaled" plots cut at a percentile too), so a burst of goodput released when a hole
/// is repaired does not flatten everything else. Points above are drawn at the top edge.
fn throughput_scale(runs: &[Dataset]) -> f64 {
    let mut v: Vec<f64> = runs
        .iter()
        .flat_map(|d| {
            [Some(Direction::Down), Some(Direction::Up), None]
                .into_iter()
                .flat_map(|dir| direction_sum(d, dir))
                .flatten()
        })
        .collect();
    // A trace's capacity and a controller's rate share the axis (their tail is clamped).
    for d in runs {
        for s in d.of_kind(|k| matches!(k, Kind::Capacity | Kind::ShaperRate)) {
            v.extend(s.values.iter().flatten());
        }
    }
    match crate::summary::percentiles(&mut v) {
        Some(p) if p.p99 > 0.0 => p.p99 * 1.2,
        _ => 1.0,
    }
}

fn clamp_all(v: &[Option<f64>], hi: f64) -> Vec<Option<f64>> {
    v.iter().map(|x| x.map(|x| x.min(hi))).collect()
}

/// A shared log-scale latency range over all runs, ms.
fn latency_range(runs: &[Dataset]) -> (f64, f64) {
    let all = runs
        .iter()
        .flat_map(|d| d.of_kind(|k| matches!(k, Kind::Latency | Kind::OneWayLatency)))
        .flat_map(|s| s.values.iter().flatten().copied())
        .filter(|v| *v > 0.0 && v.is_finite());
    let (lo, hi) = all.fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        return (1.0, 1000.0);
    }
    // Whole decades look tidy and keep runs comparable.
    let lo = 10f64.powf(lo.log10().floor()).max(0.01);
    let hi = 10f64.powf(hi.log10().ceil()).max(lo * 10.0);
    (lo, hi)
}

fn ms_label(v: f64) -> String {
    if v >= 1000.0 {
        format!("{} s", v / 1000.0)
    } else if v >= 1.0 {
        format!("{v:.0} ms")
    } else {
        format!("{v} ms")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latency_range_spans_whole_decades() {
        let v = serde_json::json!({
            "version": 4, "metadata": {"NAME": "ping", "STEP_SIZE": 1.0},
            "x_values": [0.0, 1.0], "results": {"Ping (ms) ICMP": [3.2, 480.0]}, "raw_values": {}
        });
        let d = Dataset::from_json(&v, "p").expect("valid");
        assert_eq!(latency_range(&[d]), (1.0, 1000.0));
        assert_eq!(ms_label(2000.0), "2 s");
        assert_eq!(ms_label(20.0), "20 ms");
    }
}
