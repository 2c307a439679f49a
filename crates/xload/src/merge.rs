//! `xload merge`: exact merge of JSON reports from several runs or hosts.

use std::path::PathBuf;

use clap::Args;
use xload_stats::{Report, TextOptions};

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
    let mut reports = Vec::new();
    for p in &a.reports {
        let text = std::fs::read_to_string(p)
            .map_err(|e| Failure::Run(format!("{}: {e}", p.display())))?;
        let r =
            Report::from_json(&text).map_err(|e| Failure::Run(format!("{}: {e}", p.display())))?;
        reports.push(r);
    }
    let merged = Report::merge(&reports).map_err(|e| Failure::Run(format!("merge: {e}")))?;
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
