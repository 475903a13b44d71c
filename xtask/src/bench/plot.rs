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

/// A quantity over time: `(seconds, value)`.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

impl Series {
    pub fn new(label: impl Into<String>) -> Self {
        Series {
            label: label.into(),
            points: Vec::new(),
        }
    }

    /// The pointwise sum of `series` (sampled at the same moments).
    pub fn sum(label: impl Into<String>, series: &[Series]) -> Self {
        let mut sum = Series::new(label);
        if let Some(first) = series.first() {
            sum.points = (0..first.points.len())
                .map(|i| {
                    let total = series.iter().filter_map(|s| s.points.get(i)).map(|p| p.1);
                    (first.points[i].0, total.sum())
                })
                .collect();
        }
        sum
    }
}

const COLORS: [RGBColor; 5] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(0, 0, 0),
];

/// Writes the curves as a PNG line chart (x: seconds, y: % converged).
pub fn write_png(curves: &[Curve], path: &Path) -> anyhow::Result<()> {
    let series: Vec<Series> = curves
        .iter()
        .map(|c| Series {
            label: c.label.clone(),
            points: c.percent().collect(),
        })
        .collect();
    let chart = Chart {
        title: "cloud-controllers: objects converged over time",
        x: "seconds after the burst",
        y: "% converged",
        y_max: 105.0,
        legend: SeriesLabelPosition::LowerRight,
    };
    rasterise(&svg(&chart, &series)?, path)
}

/// Writes `series` as a PNG line chart.
pub fn write_series_png(
    title: &str,
    x: &str,
    y: &str,
    series: &[Series],
    path: &Path,
) -> anyhow::Result<()> {
    let y_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .fold(1.0_f64, f64::max)
        * 1.1;
    let chart = Chart {
        title,
        x,
        y,
        y_max,
        legend: SeriesLabelPosition::UpperRight,
    };
    rasterise(&svg(&chart, series)?, path)
}

/// Titles and the y range of a chart.
struct Chart<'a> {
    title: &'a str,
    x: &'a str,
    y: &'a str,
    y_max: f64,
    legend: SeriesLabelPosition,
}

fn rasterise(svg: &str, path: &Path) -> anyhow::Result<()> {
    let mut options = resvg::usvg::Options::default();
    options.fontdb_mut().load_system_fonts();
    options.fontdb_mut().set_sans_serif_family("DejaVu Sans");
    let tree = resvg::usvg::Tree::from_str(svg, &options).context("parsing the plot's SVG")?;
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

fn svg(c: &Chart, series: &[Series]) -> anyhow::Result<String> {
    let x_max = series
        .iter()
        .flat_map(|s| s.points.iter().map(|(t, _)| *t))
        .fold(1.0_f64, f64::max)
        * 1.05;
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (960, 540)).into_drawing_area();
        root.fill(&WHITE)?;
        let mut chart = ChartBuilder::on(&root)
            .caption(c.title, ("sans-serif", 24))
            .margin(20)
            .x_label_area_size(45)
            .y_label_area_size(55)
            .build_cartesian_2d(0f64..x_max, 0f64..c.y_max)?;
        chart.configure_mesh().x_desc(c.x).y_desc(c.y).draw()?;
        for (s, color) in series.iter().zip(COLORS.iter().cycle()) {
            chart
                .draw_series(LineSeries::new(
                    s.points.iter().copied(),
                    color.stroke_width(2),
                ))?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(c.legend.clone())
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()?;
        root.present()?;
    }
    Ok(svg)
}
