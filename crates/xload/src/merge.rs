//! `xload merge`: exact merge of JSON reports from several runs or hosts.

use std::path::PathBuf;

use clap::Args;
use xload_stats::{Report, ReportError, TextOptions};

use crate::run::write_out;
use crate::Failure;

#[derive(Debug, Clone, Args)]
pub struct MergeArgs {
    /// JSON reports written by `xload --json`.
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,

    /// Write the merged report as JSON ('-' = stdout).
    #[arg(long = "json")]
    pub json: Option<String>,

    /// Print the full latency percentile table.
    #[arg(long = "latency")]
    pub latency: bool,
}

pub fn main_merge(a: &MergeArgs) -> Result<i32, Failure> {
    if let Some(path) = a.json.as_deref().filter(|p| *p != "-") {
        crate::run::writable(path).map_err(|e| Failure::Usage(format!("--json {path}: {e}")))?;
    }
    // Every input is an argument: one that cannot be read, is not a report,
    // or is given twice (its requests would count twice) is a bad argument,
    // as for --body-file.
    let mut seen: Vec<(PathBuf, &PathBuf)> = Vec::new();
    for p in &a.reports {
        let canon = std::fs::canonicalize(p)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        if let Some((_, first)) = seen.iter().find(|(c, _)| *c == canon) {
            return Err(Failure::Usage(format!(
                "{} is {} again: a report merged twice counts its requests twice",
                p.display(),
                first.display()
            )));
        }
        seen.push((canon, p));
    }
    let mut reports = Vec::new();
    for p in &a.reports {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        let r = Report::from_json(&text)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        // Its histogram holds one latency per response, and one per request
        // left unanswered that was recorded at its age.
        if let Ok(h) = r.latency_histogram() {
            let expected = r.requests + r.unanswered_at_end.recorded;
            if h.len() != expected {
                eprintln!(
                    "xload: note: {}: its histogram holds {} latencies for {} responses (edited, or written by another tool?); the merged latency follows the histogram",
                    p.display(),
                    h.len(),
                    expected
                );
            }
        }
        reports.push(r);
    }
    let (shortest, longest) = reports.iter().fold((f64::INFINITY, 0.0f64), |(lo, hi), r| {
        (lo.min(r.duration_s), hi.max(r.duration_s))
    });
    if longest > 0.0 && shortest < 0.9 * longest {
        eprintln!(
            "xload: note: the reports measured {shortest:.2}s to {longest:.2}s: the merged rate is every response over the longest window, as for generators that ran at the same time; runs of different lengths give a rate below the sum of theirs"
        );
    }
    let name = |i: usize| {
        a.reports
            .get(i)
            .map_or_else(|| format!("report {i}"), |p| p.display().to_string())
    };
    let merged = Report::merge(&reports).map_err(|e| {
        Failure::Usage(match e {
            ReportError::InReport { index, source, .. } => format!("{}: {source}", name(index)),
            ReportError::MixedLoops { open, closed, .. } => format!(
                "{} is open loop (--rate) and {} closed loop: their latencies measure different things; merge each kind on its own",
                name(open),
                name(closed)
            ),
            other => format!("merge: {other}"),
        })
    })?;
    let text = merged.render_text(&TextOptions {
        latency_table: a.latency,
    });
    if a.json.as_deref() == Some("-") {
        eprint!("{text}");
    } else {
        crate::out(&text);
    }
    if let Some(path) = &a.json {
        write_out(path, &merged.to_json())?;
    }
    Ok(0)
}
