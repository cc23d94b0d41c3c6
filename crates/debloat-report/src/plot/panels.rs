//! Quantities over a long run, one panel each on a shared time axis (minutes): what `debloat
//! soak` draws of the gateway — memory, forwarding rate, ping, open files — so a slope or a
//! spike is seen at a glance.

use super::{colour, err, register_font, Legend, Res, LEGEND_W};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One panel: a title, the unit of its y axis, and named series (one value per time).
pub struct Panel {
    title: String,
    unit: String,
    series: Vec<(String, Vec<f64>)>,
}

impl Panel {
    /// A panel of `series` (label, values), drawn against the shared time axis.
    pub fn new(title: &str, unit: &str, series: Vec<(&str, Vec<f64>)>) -> Panel {
        Panel {
            title: title.into(),
            unit: unit.into(),
            series: series.into_iter().map(|(l, v)| (l.into(), v)).collect(),
        }
    }

    /// The y axis: from 0 (or the lowest value, if negative) to a little above the highest.
    fn y_range(&self) -> (f64, f64) {
        let finite = self
            .series
            .iter()
            .flat_map(|(_, v)| v.iter().copied())
            .filter(|v| v.is_finite());
        let (lo, hi) = finite.fold((0.0f64, 0.0f64), |(a, b), v| (a.min(v), b.max(v)));
        (lo, if hi > lo { hi * 1.1 } else { lo + 1.0 })
    }
}

/// Render the panels against `t_min` (minutes) to `dir/STEM.svg` and `dir/STEM.png`.
pub fn render_panels(
    dir: &Path,
    stem: &str,
    caption: &str,
    t_min: &[f64],
    panels: &[Panel],
) -> Res {
    register_font();
    let size = (1000, 40 + 220 * panels.len().max(1) as u32);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        draw(&root, caption, t_min, panels)?;
        root.present().map_err(err)?;
    }
    std::fs::write(dir.join(format!("{stem}.svg")), &svg).map_err(err)?;
    let png = dir.join(format!("{stem}.png"));
    let root = BitMapBackend::new(&png, size).into_drawing_area();
    draw(&root, caption, t_min, panels)?;
    root.present().map_err(err)
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    caption: &str,
    t: &[f64],
    panels: &[Panel],
) -> Res {
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(caption, ("sans-serif", 18)).map_err(err)?;
    let x_max = t.iter().copied().fold(0.0f64, f64::max).max(0.1);
    for (area, p) in root
        .split_evenly((panels.len().max(1), 1))
        .iter()
        .zip(panels)
    {
        let (lo, hi) = p.y_range();
        let mut c = ChartBuilder::on(area)
            .caption(&p.title, ("sans-serif", 15))
            .margin(8)
            .margin_right(LEGEND_W)
            .x_label_area_size(30)
            .y_label_area_size(58)
            .build_cartesian_2d(0.0..x_max, lo..hi)
            .map_err(err)?;
        c.configure_mesh()
            .x_desc("time (min)")
            .y_desc(p.unit.as_str())
            .light_line_style(TRANSPARENT)
            .draw()
            .map_err(err)?;
        let mut key = Legend::default();
        for (i, (label, v)) in p.series.iter().enumerate() {
            let col = colour(i);
            let pts = t
                .iter()
                .zip(v)
                .filter(|(_, y)| y.is_finite())
                .map(|(x, y)| (*x, *y));
            c.draw_series(LineSeries::new(pts, col.stroke_width(2)))
                .map_err(err)?;
            key.line(label, col.stroke_width(2));
        }
        key.draw(area, 11, 28)?;
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn panels_render_to_svg_and_png_with_their_titles_and_gaps_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let t = [0.0, 1.0, 2.0];
        let p = [
            Panel::new(
                "resident memory",
                "MiB",
                vec![("RSS", vec![10.0, 10.5, 10.4])],
            ),
            Panel::new("ping", "ms", vec![("median", vec![20.0, f64::NAN, 21.0])]),
        ];
        render_panels(dir.path(), "soak", "over the run", &t, &p).unwrap();
        let svg = std::fs::read_to_string(dir.path().join("soak.svg")).unwrap();
        assert!(svg.contains("resident memory") && svg.contains("time (min)"));
        assert!(
            std::fs::metadata(dir.path().join("soak.png"))
                .unwrap()
                .len()
                > 1000
        );
        assert_eq!(p[1].y_range(), (0.0, 21.0 * 1.1));
    }
}
