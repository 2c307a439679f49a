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
    let mut reports = Vec::new();
    for p in &a.reports {
        // An input that cannot be read is a bad argument, as for --body-file.
        let text = std::fs::read_to_string(p)
            .map_err(|e| Failure::Usage(format!("{}: {e}", p.display())))?;
        let r =
            Report::from_json(&text).map_err(|e| Failure::Run(format!("{}: {e}", p.display())))?;
        reports.push(r);
    }
    let name = |i: usize| {
        a.reports
            .get(i)
            .map_or_else(|| format!("report {i}"), |p| p.display().to_string())
    };
    let merged = Report::merge(&reports).map_err(|e| {
        Failure::Run(match e {
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
