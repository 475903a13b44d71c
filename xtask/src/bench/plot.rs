//! `--plot FILE.png`: objects converged over time, one line per scenario — the picture a person
//! would rather look at than the table. Drawn as SVG by plotters and rasterised by resvg (pure
//! Rust, system fonts: no C libraries).

use std::path::Path;

use anyhow::Context as _;
use plotters::prelude::*;
use serde::Serialize;

/// One scenario's convergence: `(seconds since the burst, converged objects)`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Curve {
    /// Legend, e.g. `nodes: 1000 initialized`.
    pub label: String,
    /// How many objects converge in the end (100 %).
    pub total: usize,
    pub points: Vec<(f64, usize)>,
}

impl Curve {
    pub fn new(label: impl Into<String>, total: usize) -> Self {
        Self {
            label: label.into(),
            total,
            points: vec![(0.0, 0)],
        }
    }

    /// Records `converged` objects at `seconds`.
    pub fn record(&mut self, seconds: f64, converged: usize) {
        self.points.push((seconds, converged));
    }

    fn percent(&self) -> impl Iterator<Item = (f64, f64)> + '_ {
        let total = self.total.max(1) as f64;
        self.points
            .iter()
            .map(move |(t, n)| (*t, *n as f64 * 100.0 / total))
    }
}

const COLORS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
];

/// Writes the curves as a PNG line chart (x: seconds, y: % converged).
pub fn write_png(curves: &[Curve], path: &Path) -> anyhow::Result<()> {
    let svg = svg(curves)?;
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    options.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = resvg::usvg::Tree::from_str(&svg, &options).context("parsing the plot's SVG")?;
    let size = tree.size().to_int_size();
    let mut pixmap = resvg::tiny_skia::Pixmap::new(size.width(), size.height())
        .context("allocating the plot")?;
    resvg::render(
        &tree,
        resvg::tiny_skia::Transform::default(),
        &mut pixmap.as_mut(),
    );
    pixmap
        .save_png(path)
        .with_context(|| format!("writing {}", path.display()))
}

fn svg(curves: &[Curve]) -> anyhow::Result<String> {
    let x_max = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|(t, _)| *t))
        .fold(1.0_f64, f64::max)
        * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 540)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(
                "cloud-controllers: objects converged over time",
                ("sans-serif", 24),
            )
            .margin(20)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..x_max, 0f64..105f64)?;
        chart
            .configure_mesh()
            .x_desc("seconds after the burst")
            .y_desc("% converged")
            .draw()?;
        for (curve, color) in curves.iter().zip(COLORS.iter().cycle()) {
            chart
                .draw_series(LineSeries::new(curve.percent(), color.stroke_width(2)))?
                .label(&curve.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::LowerRight)
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}
