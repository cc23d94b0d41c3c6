//! Legends drawn in a strip right of the plot area, so they never cover the data: each chart
//! is built with `margin_right(LEGEND_W)` and its series' entries are collected here as they
//! are drawn, then drawn in that strip of the panel's area. (plotters' own series labels are
//! drawn inside the plot area, clamped to it.)

use super::{err, Res};
use plotters::coord::Shift;
use plotters::prelude::*;

/// Width of the strip right of every plot area that holds its legend, px.
pub(crate) const LEGEND_W: u32 = 200;

/// A legend entry's text at `size` px, cut with an ellipsis to what the strip holds (about
/// 280 / size characters: 21 at 13 px, 25 at 11 px).
pub(crate) fn short(label: &str, size: u32) -> String {
    let most = (280 / size.max(1)) as usize;
    if label.chars().count() <= most {
        return label.to_string();
    }
    let cut: String = label.chars().take(most.saturating_sub(1)).collect();
    format!("{cut}…")
}

/// The entries of one panel's legend.
#[derive(Default)]
pub(crate) struct Legend {
    /// (text, style, drawn as a filled box rather than a line).
    entries: Vec<(String, ShapeStyle, bool)>,
}

impl Legend {
    /// A line series.
    pub(crate) fn line(&mut self, label: &str, style: ShapeStyle) {
        self.entries.push((label.to_string(), style, false));
    }

    /// A series of bars or a band.
    pub(crate) fn boxed(&mut self, label: &str, style: ShapeStyle) {
        self.entries.push((label.to_string(), style, true));
    }

    /// Draw it in the strip at the right of `area` (the area the chart was built on), from
    /// `top` px down, text `size` px.
    pub(crate) fn draw<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        size: u32,
        top: i32,
    ) -> Res {
        if self.entries.is_empty() {
            return Ok(());
        }
        let (w, _) = area.dim_in_pixel();
        let (x0, x1) = (w as i32 - LEGEND_W as i32 + 8, w as i32 - 4);
        let step = size as i32 + 7;
        let y1 = top + step * self.entries.len() as i32 + 6;
        area.draw(&Rectangle::new([(x0, top), (x1, y1)], WHITE.filled()))
            .map_err(err)?;
        area.draw(&Rectangle::new([(x0, top), (x1, y1)], BLACK.mix(0.3)))
            .map_err(err)?;
        for (i, (label, style, boxed)) in self.entries.iter().enumerate() {
            let y = top + 3 + step * i as i32 + step / 2;
            if *boxed {
                let fill = ShapeStyle {
                    filled: true,
                    ..*style
                };
                area.draw(&Rectangle::new([(x0 + 6, y - 5), (x0 + 22, y + 5)], fill))
                    .map_err(err)?;
            } else {
                area.draw(&PathElement::new(vec![(x0 + 5, y), (x0 + 23, y)], *style))
                    .map_err(err)?;
            }
            let font = ("sans-serif", size).into_font();
            let text = Text::new(short(label, size), (x0 + 30, y - size as i32 / 2), font);
            area.draw(&text).map_err(err)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Long labels are cut to the strip; short ones are left alone.
    #[test]
    fn labels_fit_the_strip() {
        assert_eq!(short("download sum", 12), "download sum");
        let long = "rrul-2026-01-01T000000.000000.flent";
        assert_eq!(short(long, 13).chars().count(), 21);
        assert!(short(long, 13).ends_with('…'));
        assert_eq!(short(long, 11).chars().count(), 25);
    }

    /// Every element of the legend lies in the strip right of the plot area: none of it covers
    /// the data, the chart's plot area ending `LEGEND_W` px before the panel's right edge.
    #[test]
    fn the_legend_is_drawn_beside_the_plot() {
        let mut svg = String::new();
        {
            let root = SVGBackend::with_string(&mut svg, (600, 300)).into_drawing_area();
            let mut key = Legend::default();
            key.line("download sum", RED.stroke_width(3));
            key.boxed("a run with a long name, cut to fit", BLUE.filled());
            key.draw(&root, 12, 30).expect("drawn");
            root.present().expect("written");
        }
        let xs: Vec<f64> = svg
            .split([' ', '<'])
            .filter_map(|a| a.strip_prefix("x=\"").or_else(|| a.strip_prefix("x1=\"")))
            .filter_map(|v| v.split('"').next()?.parse().ok())
            .collect();
        assert!(!xs.is_empty(), "{svg}");
        let strip = f64::from(600 - LEGEND_W);
        assert!(xs.iter().all(|&x| x >= strip), "{xs:?} in {svg}");
        assert!(svg.contains("download sum") && svg.contains('…'), "{svg}");
    }
}
