//! `--plot`: throughput and p99 against load, the knee marked, as SVG or PNG
//! (plotters). Text needs a TrueType font: the first of the usual system
//! fonts found is registered once.

use std::path::Path;
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;

use xload_stats::knee::{Mode, Point};

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    "/usr/share/fonts/liberation/LiberationSans-Regular.ttf",
];

/// Registers the first font of [`FONT_PATHS`] that loads, once per process.
fn ensure_font() -> Result<(), String> {
    static FONT: OnceLock<Result<(), String>> = OnceLock::new();
    FONT.get_or_init(|| register_first(FONT_PATHS)).clone()
}

/// Registers the first of `paths` that reads and parses as a font; else an
/// error that names the package to install.
fn register_first(paths: &[&str]) -> Result<(), String> {
    for p in paths {
        if let Ok(bytes) = std::fs::read(p) {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return Ok(());
            }
        }
    }
    Err("no TrueType font found (looked for DejaVuSans / LiberationSans under /usr/share/fonts): \
         install fonts-dejavu-core (Debian/Ubuntu), dejavu-sans-fonts (Fedora) or ttf-dejavu (Arch)"
        .into())
}

/// Checks, before any traffic, that a plot can be written to `path`.
pub(crate) fn check_path(path: &Path) -> Result<(), String> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    if ext != "svg" && ext != "png" {
        return Err(format!(
            "--plot {}: the path must end in .svg or .png",
            path.display()
        ));
    }
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        if !dir.is_dir() {
            return Err(format!(
                "--plot {}: no directory {}",
                path.display(),
                dir.display()
            ));
        }
    }
    // The font too: a missing one would otherwise fail after the whole sweep.
    ensure_font().map_err(|e| format!("--plot {}: {e}", path.display()))
}

/// What a plot shows: the steps of a sweep in `mode` and one step marked
/// with a vertical line and its label (the knee, or the compliant maximum),
/// an index into `points`.
pub(crate) struct Curve<'a> {
    pub mode: Mode,
    pub points: &'a [Point],
    pub mark: Option<(usize, String)>,
}

/// Writes the plot; the format follows the extension (.svg or .png).
pub(crate) fn plot(path: &Path, r: &Curve<'_>, target: &str) -> Result<(), String> {
    ensure_font()?;
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "svg" => {
            let root = SVGBackend::new(path, (900, 540)).into_drawing_area();
            draw(&root, r, target).map_err(|e| e.to_string())?;
            root.present().map_err(|e| e.to_string())
        }
        "png" => {
            let root = BitMapBackend::new(path, (900, 540)).into_drawing_area();
            draw(&root, r, target).map_err(|e| e.to_string())?;
            root.present().map_err(|e| e.to_string())
        }
        _ => Err("the plot path must end in .svg or .png".into()),
    }
}

fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    r: &Curve<'_>,
    target: &str,
) -> Result<(), Box<dyn std::error::Error>>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE)?;
    let pts = r.points;
    if pts.is_empty() {
        return Err("no steps to plot".into());
    }
    let (xmin, xmax) = pts.iter().fold((f64::INFINITY, 0.0f64), |(a, b), p| {
        (a.min(p.load), b.max(p.load))
    });
    let xmax = if xmax <= xmin { xmin * 2.0 } else { xmax };
    let rps_max = pts.iter().map(|p| p.rps).fold(0.0, f64::max).max(1.0) * 1.1;
    let p99_max = pts
        .iter()
        .map(|p| p.p99_us / 1000.0)
        .fold(0.0, f64::max)
        .max(0.001)
        * 1.1;
    let xlabel = match r.mode {
        Mode::Concurrency => "connections",
        Mode::Rate => "target rate (req/s)",
        Mode::Sessions => "sessions",
    };
    let caption = format!("xload sweep — {target}");
    let whole_x = matches!(r.mode, Mode::Concurrency | Mode::Sessions);
    let log_x = whole_x && xmax / xmin >= 8.0;
    let blue = RGBColor(31, 119, 180);
    let red = RGBColor(214, 39, 40);

    macro_rules! body {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(xlabel)
                .y_desc("throughput (req/s)")
                .y_label_formatter(&|v| tick_label(*v, rps_max, false))
                .x_label_formatter(&|v| tick_label(*v, xmax - xmin, whole_x))
                .draw()?;
            chart
                .configure_secondary_axes()
                .y_desc("p99 latency (ms)")
                .draw()?;
            chart
                .draw_series(LineSeries::new(
                    pts.iter().map(|p| (p.load, p.rps)),
                    blue.stroke_width(2),
                ))?
                .label("throughput")
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], blue.stroke_width(2))
                });
            chart.draw_series(
                pts.iter()
                    .map(|p| Circle::new((p.load, p.rps), 4, blue.filled())),
            )?;
            chart
                .draw_secondary_series(LineSeries::new(
                    pts.iter().map(|p| (p.load, p.p99_us / 1000.0)),
                    red.stroke_width(2),
                ))?
                .label("p99 latency")
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], red.stroke_width(2))
                });
            chart.draw_secondary_series(
                pts.iter()
                    .map(|p| TriangleMarker::new((p.load, p.p99_us / 1000.0), 5, red.filled())),
            )?;
            if let Some((k, label)) = &r.mark {
                let kp = pts[*k];
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(kp.load, 0.0), (kp.load, rps_max)],
                    BLACK.stroke_width(1),
                )))?;
                chart.draw_series(std::iter::once(Text::new(
                    label.clone(),
                    (kp.load, rps_max * 0.97),
                    ("sans-serif", 15).into_font(),
                )))?;
            }
            chart
                .configure_series_labels()
                .position(SeriesLabelPosition::LowerRight)
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()?;
        }};
    }

    let mut builder = ChartBuilder::on(root);
    builder
        .caption(caption, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .right_y_label_area_size(60);
    if log_x {
        body!(builder
            .build_cartesian_2d((xmin..xmax).log_scale(), 0.0..rps_max)?
            .set_secondary_coord((xmin..xmax).log_scale(), 0.0..p99_max));
    } else {
        body!(builder
            .build_cartesian_2d(xmin..xmax, 0.0..rps_max)?
            .set_secondary_coord(xmin..xmax, 0.0..p99_max));
    }
    Ok(())
}

/// An axis label for a tick at `v` on an axis spanning `span`: as many
/// decimals as the spacing of plotters' ticks (about ten to an axis) needs,
/// so that a short range (a rate sweep of 1–2 req/s) does not read "1 1 1 …
/// 2"; on an axis of connections, whole numbers only (a tick between two
/// counts is left bare: 1.5 connections means nothing).
fn tick_label(v: f64, span: f64, whole: bool) -> String {
    if whole {
        return if (v - v.round()).abs() < 1e-6 {
            format!("{:.0}", v.round())
        } else {
            String::new()
        };
    }
    let step = span / 10.0;
    let decimals = if step >= 1.0 || step <= 0.0 || !step.is_finite() {
        0
    } else {
        ((-step.log10()).ceil() as usize).min(6)
    };
    format!("{v:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::{register_first, tick_label};

    #[test]
    fn a_missing_font_names_the_package_to_install() {
        let e = register_first(&["/nonexistent/DejaVuSans.ttf", "/proc/self/status"]).unwrap_err();
        assert!(e.contains("no TrueType font found"), "{e}");
        assert!(e.contains("fonts-dejavu-core"), "{e}");
    }

    #[test]
    fn short_ranges_get_distinct_tick_labels() {
        // Connections 1..2: the ticks between are bare, not "1" again.
        let conns: Vec<String> = (0..=10)
            .map(|i| tick_label(1.0 + f64::from(i) / 10.0, 1.0, true))
            .collect();
        assert_eq!(conns[0], "1");
        assert_eq!(conns[10], "2");
        assert!(conns[1..10].iter().all(String::is_empty), "{conns:?}");
        // A rate axis of 1..2 req/s: one decimal, every label distinct.
        let rates: Vec<String> = (0..=10)
            .map(|i| tick_label(1.0 + f64::from(i) / 10.0, 1.0, false))
            .collect();
        assert_eq!(rates[1], "1.1");
        let mut uniq = rates.clone();
        uniq.dedup();
        assert_eq!(uniq.len(), rates.len(), "{rates:?}");
        // Wide axes keep whole numbers.
        assert_eq!(tick_label(25_000.0, 120_000.0, false), "25000");
        assert_eq!(tick_label(64.0, 63.0, true), "64");
    }
}
