//! Latency histograms: the one configuration every recorder uses, the
//! summary a report prints, and the HdrHistogram V2 codec of the JSON report.

use base64::Engine as _;
use hdrhistogram::serialization::{Deserializer, Serializer, V2DeflateSerializer};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error::ReportError;

/// Lowest latency a recorder tells apart from zero: 1 µs.
pub const LATENCY_LOWEST_US: u64 = 1;
/// Highest latency a recorder tracks: one hour in µs. Longer values are
/// clamped to it (a request timeout is always far below).
pub const LATENCY_HIGHEST_US: u64 = 3_600_000_000;
/// Significant decimal digits kept per value (relative error ≤ 0.1 %).
pub const LATENCY_SIGFIG: u8 = 3;

/// A fresh latency histogram in the recorder configuration (1 µs .. 1 h,
/// 3 significant digits, auto-resize off so recording never allocates).
pub fn new_latency_histogram() -> Histogram<u64> {
    // The bounds are constants that satisfy every precondition of
    // `new_with_bounds` (low >= 1, high >= 2 * low, sigfig <= 5); a failure
    // here would be a bug in those constants, caught by every test.
    Histogram::new_with_bounds(LATENCY_LOWEST_US, LATENCY_HIGHEST_US, LATENCY_SIGFIG)
        .expect("latency histogram bounds are valid constants")
}

/// Adds `src` into `dst`. Histograms of the recorder configuration add
/// exactly and without allocation; anything else (a histogram decoded from a
/// foreign report with a wider range) makes `dst` grow to fit.
pub(crate) fn add_into(dst: &mut Histogram<u64>, src: &Histogram<u64>) {
    if dst.add(src).is_ok() {
        return;
    }
    // `add` failed because `src` holds values above `dst`'s range and
    // auto-resize is off: allow growth for this merge only. Growth can fail
    // only on a usize overflow of the counts array, which the decoded range
    // (bounded by u64 values) cannot reach on a 64-bit target; should it
    // happen anyway, record each value clamped so that counts stay exact.
    let auto = dst.is_auto_resize();
    dst.auto(true);
    if dst.add(src).is_err() {
        for v in src.iter_recorded() {
            dst.saturating_record_n(v.value_iterated_to(), v.count_at_value());
        }
    }
    dst.auto(auto);
}

/// The V2 compressed ("HISTFAAA…") serialization of `h`, base64 encoded
/// with padding: the form HdrHistogram's Java, Go, C and Python
/// implementations and HistogramLogAnalyzer read.
pub fn encode_histogram(h: &Histogram<u64>) -> Result<String, ReportError> {
    let mut bytes = Vec::new();
    V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| ReportError::HistogramEncode(e.to_string()))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(bytes))
}

/// Decodes a base64 V2 histogram, compressed or not. Surrounding whitespace
/// is ignored; anything else malformed is an error naming the cause.
pub fn decode_histogram(encoded: &str) -> Result<Histogram<u64>, ReportError> {
    let trimmed = encoded.trim();
    if trimmed.is_empty() {
        return Err(ReportError::HistogramMissing);
    }
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(trimmed)
        .map_err(|e| ReportError::HistogramBase64(e.to_string()))?;
    Deserializer::new()
        .deserialize(&mut bytes.as_slice())
        .map_err(|e| ReportError::HistogramDecode(e.to_string()))
}

/// Distribution summary of one histogram, in µs. Percentiles are
/// `value_at_quantile` of the histogram (HdrHistogram's definition: the
/// highest value equivalent to the one at that rank), so they are identical
/// whether computed by a worker, after a merge, or by another HdrHistogram
/// tool from the serialized form.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct LatencySummary {
    pub min: u64,
    pub mean: f64,
    pub stdev: f64,
    pub p50: u64,
    pub p75: u64,
    pub p90: u64,
    pub p95: u64,
    pub p99: u64,
    pub p999: u64,
    pub p9999: u64,
    pub max: u64,
}

impl LatencySummary {
    /// Summary of `h`; all zeros (never NaN) when `h` is empty.
    pub fn from_histogram(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        let finite = |x: f64| if x.is_finite() { x } else { 0.0 };
        LatencySummary {
            min: h.min(),
            mean: finite(h.mean()),
            stdev: finite(h.stdev()),
            p50: h.value_at_quantile(0.5),
            p75: h.value_at_quantile(0.75),
            p90: h.value_at_quantile(0.9),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            p9999: h.value_at_quantile(0.9999),
            max: h.max(),
        }
    }
}
