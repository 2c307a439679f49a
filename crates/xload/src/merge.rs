//! `xload merge`: exact merge of JSON reports from several runs or hosts.

use std::path::PathBuf;

use clap::Args;
use xload_stats::{MergeCheck, Refusal, Report, ReportError, TextOptions};
use xload_sys::input;

use crate::output::write_out;
use crate::Failure;

#[derive(Debug, Clone, Args)]
pub(crate) struct MergeArgs {
    /// JSON reports written by `xload --json`.
    #[arg(required = true, num_args = 1..)]
    pub reports: Vec<PathBuf>,

    /// Write the merged report as JSON ('-' = stdout).
    #[arg(long = "json")]
    pub json: Option<String>,

    /// Print the full latency percentile table.
    #[arg(long = "latency")]
    pub latency: bool,

    #[command(flatten)]
    pub allow: MergeAllow,
}

/// The refusals of a merge that can be waived.
#[derive(Debug, Clone, Copy, Default, Args)]
pub(crate) struct MergeAllow {
    /// Merge reports whose windows overlap by less than 90% of their span: the merged rate is
    /// then every response over the whole span, which is said.
    #[arg(long = "allow-partial-overlap")]
    pub partial_overlap: bool,

    /// Merge reports of different runs (run_id), e.g. runs made one after another.
    #[arg(long = "allow-different-runs")]
    pub different_runs: bool,
}

pub(crate) fn main_merge(a: &MergeArgs) -> Result<i32, Failure> {
    if let Some(path) = a.json.as_deref().filter(|p| *p != "-") {
        crate::output::writable(path).map_err(|e| Failure::Usage(format!("--json {path}: {e}")))?;
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
        let text = input::read_to_string(p, "a report", input::DATA_LIMIT)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        let r = Report::from_json(&text)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        // Its histogram holds one latency per response, and one per request
        // left unanswered that was recorded at its age.
        if let Ok(h) = r.latency_histogram() {
            let expected = r.requests.saturating_add(r.unanswered_at_end.recorded);
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
    let name = |i: usize| {
        a.reports
            .get(i)
            .map_or_else(|| format!("report {i}"), |p| p.display().to_string())
    };
    let merged = checked_merge(&reports, &name, a.allow)?;
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

/// Merges `reports` (named by `name` in messages) after [`MergeCheck`]:
/// refusals not waived by `allow` are a bad argument (exit 2), notes go to
/// stderr, and a waived partial overlap says over which interval the rate is.
pub(crate) fn checked_merge(
    reports: &[Report],
    name: &dyn Fn(usize) -> String,
    allow: MergeAllow,
) -> Result<Report, Failure> {
    // Open and closed loop together is refused first: no check can help.
    let mut merged = Report::merge(reports).map_err(|e| {
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
    let check = MergeCheck::of(reports);
    let refused: Vec<String> = check
        .refusals
        .iter()
        .filter(|r| match r {
            Refusal::PartialOverlap { .. } => !allow.partial_overlap,
            Refusal::DifferentRuns { .. } => !allow.different_runs,
            Refusal::Duplicate { .. } => true,
        })
        .map(|r| r.describe(name))
        .collect();
    if !refused.is_empty() {
        return Err(Failure::Usage(format!(
            "merge refused: {}",
            refused.join("; and ")
        )));
    }
    for note in &check.notes {
        eprintln!("xload: note: {}", note.describe(name));
    }
    if let Some(w) = check.windows {
        if w.overlap() < xload_stats::check::MIN_OVERLAP {
            eprintln!(
                "xload: note: --allow-partial-overlap: {}; the merged rate is every response over the whole span",
                w.describe()
            );
        }
        merged.extra.insert(
            "merged_windows".into(),
            serde_json::json!({
                "reports": reports.len(),
                "span": [fmt_us(w.span.0), fmt_us(w.span.1)],
                "common": w.common.map(|(a, b)| [fmt_us(a), fmt_us(b)]),
                "overlap": w.overlap(),
            }),
        );
    }
    Ok(merged)
}

fn fmt_us(us: i64) -> String {
    xload_stats::walltime::format_rfc3339_us(us)
}
