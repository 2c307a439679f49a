//! HdrHistogram interval logs (`--hlog`): one histogram per interval in the
//! text format of HdrHistogram's `HistogramLogWriter` (log format 1.3), which
//! `HistogramLogProcessor`, HdrHistogram's plotter, HistogramLogAnalyzer and
//! Python's `hdrh` read.
//!
//! ```text
//! #[Histogram log format version 1.3]
//! #[StartTime: 1764931200.000 (seconds since epoch), 2025-12-05T10:40:00Z]
//! #[BaseTime: 1764931200.000 (seconds since epoch)]
//! "StartTimestamp","Interval_Length","Interval_Max","Interval_Compressed_Histogram"
//! 0.000,1.000,1.234,HISTFAAA...
//! ```
//!
//! Timestamps are seconds from `BaseTime` (the start of the measured
//! window); values are µs, so `Interval_Max` is in ms (the max divided by
//! 1000, as the Java writer's `maxValueUnitRatio` does for its ns values).

use hdrhistogram::Histogram;

use crate::error::ReportError;
use crate::hist::encode_histogram;
use crate::walltime::{format_rfc3339_us, UnixMicros};

/// The log format version the Java writer of HdrHistogram 2.1 writes.
pub const HLOG_FORMAT_VERSION: &str = "1.3";

/// One interval of a log: when it began (seconds from the log's start),
/// how long it lasted (seconds) and its latency histogram (µs).
pub struct LogInterval<'a> {
    pub start_s: f64,
    pub len_s: f64,
    pub histogram: &'a Histogram<u64>,
}

/// The interval log of `intervals`, whose times count from `start_us`
/// (wall clock, µs since the epoch); `comment` lines come first, each
/// behind `#`.
pub fn interval_log(
    start_us: UnixMicros,
    comments: &[String],
    intervals: &[LogInterval<'_>],
) -> Result<String, ReportError> {
    let mut s = String::new();
    for c in comments {
        // One comment per line: a newline inside would start a line the
        // readers take for an interval.
        for line in c.lines() {
            s.push_str(&format!("#{line}\n"));
        }
    }
    let start_s = start_us as f64 / 1e6;
    s.push_str(&format!(
        "#[Histogram log format version {HLOG_FORMAT_VERSION}]\n"
    ));
    s.push_str(&format!(
        "#[StartTime: {start_s:.3} (seconds since epoch), {}]\n",
        format_rfc3339_us(start_us)
    ));
    s.push_str(&format!(
        "#[BaseTime: {start_s:.3} (seconds since epoch)]\n"
    ));
    s.push_str(
        "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\"\n",
    );
    for iv in intervals {
        let max_ms = if iv.histogram.is_empty() {
            0.0
        } else {
            iv.histogram.max() as f64 / 1000.0
        };
        s.push_str(&format!(
            "{:.3},{:.3},{max_ms:.3},{}\n",
            iv.start_s,
            iv.len_s,
            encode_histogram(iv.histogram)?
        ));
    }
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hist::{decode_histogram, new_latency_histogram};

    #[test]
    fn a_log_has_the_header_the_readers_expect_and_one_line_per_interval() {
        let mut a = new_latency_histogram();
        a.record(1500).unwrap();
        a.record(250).unwrap();
        let b = new_latency_histogram();
        let log = interval_log(
            1_700_000_000_250_000,
            &["xload run, multi\nline".to_string()],
            &[
                LogInterval {
                    start_s: 0.0,
                    len_s: 1.0,
                    histogram: &a,
                },
                LogInterval {
                    start_s: 1.0,
                    len_s: 0.5,
                    histogram: &b,
                },
            ],
        )
        .unwrap();
        let lines: Vec<&str> = log.lines().collect();
        assert_eq!(lines[0], "#xload run, multi");
        assert_eq!(lines[1], "#line");
        assert_eq!(lines[2], "#[Histogram log format version 1.3]");
        assert!(
            lines[3].starts_with("#[StartTime: 1700000000.250 (seconds since epoch), 2023-11-14T"),
            "{}",
            lines[3]
        );
        assert_eq!(
            lines[4],
            "#[BaseTime: 1700000000.250 (seconds since epoch)]"
        );
        assert_eq!(
            lines[5],
            "\"StartTimestamp\",\"Interval_Length\",\"Interval_Max\",\"Interval_Compressed_Histogram\""
        );
        let fields: Vec<&str> = lines[6].splitn(4, ',').collect();
        assert_eq!(&fields[..3], &["0.000", "1.000", "1.500"]);
        assert!(
            fields[3].starts_with("HISTFAAA"),
            "V2 compressed: {}",
            fields[3]
        );
        assert_eq!(decode_histogram(fields[3]).unwrap(), a);
        assert!(lines[7].starts_with("1.000,0.500,0.000,HISTFAAA"));
        assert_eq!(lines.len(), 8);
    }
}
