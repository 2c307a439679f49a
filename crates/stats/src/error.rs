//! Why a report could not be read, decoded or merged.

use crate::SCHEMA;

/// Why a report could not be read, decoded or merged.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The text is not JSON, or lacks a required key, or a key has the
    /// wrong type.
    #[error("not an xload report: {0}")]
    Json(#[from] serde_json::Error),
    /// The `schema` key names another format.
    #[error("not an xload report: schema {found:?} (this build reads {SCHEMA:?})")]
    Schema { found: String },
    /// The histogram string is empty.
    #[error("the report has no histogram")]
    HistogramMissing,
    /// The histogram string is not base64.
    #[error("histogram is not valid base64: {0}")]
    HistogramBase64(String),
    /// The decoded bytes are not an HdrHistogram V2 serialization.
    #[error("histogram is not a valid HdrHistogram V2 serialization: {0}")]
    HistogramDecode(String),
    /// The histogram could not be serialized (a count above i64::MAX).
    #[error("histogram could not be serialized: {0}")]
    HistogramEncode(String),
    /// `Report::merge` was given no report.
    #[error("no reports to merge")]
    NothingToMerge,
    /// Closed-loop and open-loop reports given to `Report::merge` together:
    /// their latencies measure different things (from the send, from the
    /// intended time) and a rate target covers only some of the requests.
    #[error("report {open} ({open_target}) is open loop (--rate) and report {closed} ({closed_target}) closed loop: their latencies measure different things; merge each kind on its own")]
    MixedLoops {
        open: usize,
        open_target: String,
        closed: usize,
        closed_target: String,
    },
    /// A count summed over the reports given to `Report::merge` does not
    /// fit in 64 bits: no run counts that much, so an input is edited or
    /// corrupt. `field` is the JSON key (`status.200`, `tls.handshakes_full`).
    #[error("{field} is {value} here and {before} in the reports before it: their sum exceeds 2^64-1, which no run counts (is one of them edited or corrupt?)")]
    Overflow {
        field: String,
        value: u64,
        before: u64,
    },
    /// One of the reports given to `Report::merge` is unusable.
    #[error("report {index} ({target}): {source}")]
    InReport {
        index: usize,
        target: String,
        #[source]
        source: Box<ReportError>,
    },
}

/// `*acc += n`, or [`ReportError::Overflow`] naming `field` when the sum
/// does not fit: a merge never wraps a count around.
pub(crate) fn add_to(acc: &mut u64, n: u64, field: &str) -> Result<(), ReportError> {
    *acc = acc.checked_add(n).ok_or_else(|| ReportError::Overflow {
        field: field.to_string(),
        value: n,
        before: *acc,
    })?;
    Ok(())
}
