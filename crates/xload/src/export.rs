//! Outputs other tools read: the HdrHistogram interval log of `--hlog`.

use xload_stats::hlog::{interval_log, LogInterval};
use xload_stats::{decode_histogram, Histogram, Report, SecondHistogram};

use crate::args::ExportArgs;
use crate::output::writable;
use crate::progress::Span;
use crate::Failure;

/// Checks the paths of `a` before the run (a typo found after a long run
/// would lose it).
pub(crate) fn check(a: &ExportArgs) -> Result<(), Failure> {
    if let Some(p) = &a.hlog {
        let path = p.to_string_lossy();
        writable(&path).map_err(|e| Failure::Usage(format!("--hlog {path}: {e}")))?;
    }
    Ok(())
}

/// Writes the interval log of a run to `path`: one line per row of the
/// report's time series, from its histograms (`seconds`) and spans. The
/// requests the window closed on that the report counts at their age
/// (`unanswered_at_end.recorded`) are in no second's histogram: they go
/// in the last interval, so that the log adds up to the report's
/// histogram exactly.
pub(crate) fn write_hlog(
    path: &std::path::Path,
    report: &Report,
    seconds: &[SecondHistogram],
    spans: &[Span],
) -> Result<(), Failure> {
    let bad = |e: xload_stats::ReportError| Failure::Run(format!("--hlog: {e}"));
    let mut hists: Vec<Histogram<u64>> = seconds
        .iter()
        .map(|s| decode_histogram(&s.histogram))
        .collect::<Result<_, _>>()
        .map_err(bad)?;
    let mut rest = decode_histogram(&report.histogram).map_err(bad)?;
    for h in &hists {
        rest.subtract(h).map_err(|e| {
            Failure::Run(format!(
                "--hlog: the per-second histograms exceed the report's ({e:?})"
            ))
        })?;
    }
    if !rest.is_empty() {
        match hists.last_mut() {
            Some(last) => last
                .add(&rest)
                .map_err(|e| Failure::Run(format!("--hlog: {e:?}")))?,
            None => return Err(Failure::Run("--hlog: the run has no interval".into())),
        }
    }
    let intervals: Vec<LogInterval<'_>> = hists
        .iter()
        .zip(spans)
        .map(|(h, s)| LogInterval {
            start_s: s.start_s,
            len_s: s.len_s,
            histogram: h,
        })
        .collect();
    let start_us = report
        .run
        .started_at_us()
        .unwrap_or_else(xload_stats::walltime::now_us);
    let comments = [
        format!(
            "xload {} {}: latency in µs (Interval_Max in ms), one interval per second of the measured window",
            env!("CARGO_PKG_VERSION"),
            report.target
        ),
        format!(
            "{} responses, {} requests unanswered at the window's end recorded at their age (in the last interval)",
            report.requests, report.unanswered_at_end.recorded
        ),
    ];
    let log = interval_log(start_us, &comments, &intervals).map_err(bad)?;
    std::fs::write(path, log)
        .map_err(|e| Failure::Run(format!("cannot write {}: {e}", path.display())))
}
