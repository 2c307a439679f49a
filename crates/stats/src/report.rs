//! The report model: what one run (or a merge of runs) measured, in the
//! JSON shape of schema `xload/1` (keys in docs/json.md).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::classes::ClassReport;
use crate::error::{add_to, ReportError};
use crate::error_kind::{errno_key, ErrorKind};
use crate::h2::H2Report;
use crate::hist::{decode_histogram, encode_histogram, new_latency_histogram, LatencySummary};
use crate::recorder::{Interval, Recorder, Unanswered};
use crate::tls::TlsReport;
use crate::walltime::{parse_rfc3339, UnixMicros};
use crate::SCHEMA;

/// What the engine knows about a run besides the recorder.
#[derive(Clone, Debug, Default)]
pub struct RunMeta {
    /// The URL as the user gave it.
    pub target: String,
    /// The engine that ran ("io_uring", "epoll").
    pub engine: String,
    /// Why that engine ran (e.g. why `auto` fell back to epoll).
    pub engine_reason: Option<String>,
    pub threads: usize,
    pub connections: usize,
    /// Length of the measured window (warm-up excluded), seconds.
    pub duration_s: f64,
    /// Open loop: the intended rate, requests per second in total.
    pub rate_target: Option<f64>,
    /// Requests in flight per connection.
    pub pipeline: usize,
}

/// How the engine's waits batched completions over a run (warm-up
/// included, unlike the rest of the report), summed over workers: the
/// completions (receives, mostly) one wait for completions brought, and the
/// range of the cap on what a wait asks for. An answer that arrives while its
/// wait is still filling is timed when the wait returns, so a large
/// `completions_per_wait` against a slow server is latency the client added.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Batching {
    /// Enters that waited for completions.
    pub waits: u64,
    /// Completions (receives, mostly) those waits brought.
    pub completions: u64,
    /// `completions / waits`.
    pub completions_per_wait: f64,
    /// Smallest and largest cap (the most one wait asked for).
    pub cap_min: usize,
    pub cap_max: usize,
}

impl Batching {
    pub fn new(waits: u64, completions: u64, cap_min: usize, cap_max: usize) -> Batching {
        Batching {
            waits,
            completions,
            completions_per_wait: if waits == 0 {
                0.0
            } else {
                completions as f64 / waits as f64
            },
            cap_min,
            cap_max,
        }
    }

    /// Both runs' waits together (None when neither batched).
    pub fn merge(a: Option<Batching>, b: Option<Batching>) -> Option<Batching> {
        match (a, b) {
            (Some(a), Some(b)) => Some(Batching::new(
                a.waits + b.waits,
                a.completions + b.completions,
                a.cap_min.min(b.cap_min),
                a.cap_max.max(b.cap_max),
            )),
            (a, b) => a.or(b),
        }
    }
}

/// One row of the per-second time series.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct IntervalRow {
    /// Seconds since the start of the measured window at the end of this
    /// interval (1 for the first second).
    pub second: u64,
    /// Responses completed in the interval.
    #[serde(default)]
    pub requests: u64,
    pub rps: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub errors: u64,
}

impl IntervalRow {
    /// The row for `interval` (all workers merged), which lasted
    /// `interval_s` seconds and ended `second` seconds into the run.
    pub fn from_interval(second: u64, interval: &Interval, interval_s: f64) -> IntervalRow {
        let empty = interval.latency.is_empty();
        IntervalRow {
            second,
            requests: interval.requests,
            rps: per_second(interval.requests, interval_s),
            p50_us: if empty {
                0
            } else {
                interval.latency.value_at_quantile(0.5)
            },
            p99_us: if empty {
                0
            } else {
                interval.latency.value_at_quantile(0.99)
            },
            errors: interval.errors,
        }
    }
}

/// Which run a report belongs to, where and when its window began. Every
/// key is optional: absent when unknown, as in reports written before them.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct RunInfo {
    /// Shared by the generators of one run (`--run-id`, or generated).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_id: Option<String>,
    /// This generator's share of the run, `INDEX/COUNT` (`--segment 2/4`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segment: Option<String>,
    /// The generator's host name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// When the measured window began: RFC 3339, µs, UTC, from CLOCK_REALTIME.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_at: Option<String>,
    /// `--start-at`: when the window was asked to begin (RFC 3339, UTC).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_at: Option<String>,
    /// `--start-at`: how late the window began, µs (`started_at - start_at`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_error_us: Option<i64>,
    /// The version of xload that wrote the report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub xload_version: Option<String>,
    /// The command line of the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub argv: Option<Vec<String>>,
    /// What generators of one run must share besides the target (the
    /// request's digest, pipeline, window and warm-up asked, timeouts...):
    /// `xload merge` refuses reports whose settings differ.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, serde_json::Value>,
}

impl RunInfo {
    /// `started_at` in µs since the epoch (None when absent or unreadable).
    pub fn started_at_us(&self) -> Option<UnixMicros> {
        self.started_at
            .as_deref()
            .and_then(|s| parse_rfc3339(s).ok())
    }
}

/// The latency histogram of one per-second row (HdrHistogram V2
/// compressed, base64, as `histogram`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SecondHistogram {
    /// The row's `second`.
    pub second: u64,
    pub histogram: String,
}

impl SecondHistogram {
    /// The entry for the row of `second`, holding `h`.
    pub fn new(second: u64, h: &Histogram<u64>) -> SecondHistogram {
        SecondHistogram {
            second,
            histogram: histogram_string(h),
        }
    }
}

/// What only an open-loop (`--rate`) run reports. A report has all of it
/// or none of it. Reading JSON, `rate_target` marks an open-loop report and
/// any other key absent reads as 0 or empty (the first open-loop reports
/// had no `sends`, `late_waiting_for_connection` or `late_catch_up`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct OpenLoop {
    /// Intended requests per second in total.
    pub rate_target: f64,
    /// Latency measured from the actual send, µs.
    #[serde(default)]
    pub latency_uncorrected_us: LatencySummary,
    /// Its histogram, as `histogram` (empty when a report lacks it).
    #[serde(default)]
    pub histogram_uncorrected: String,
    /// How late sends left versus their intended times, µs.
    #[serde(default)]
    pub schedule_lag_us: LatencySummary,
    #[serde(default)]
    pub histogram_schedule_lag: String,
    #[serde(default)]
    pub late_sends: u64,
    /// Of the late sends, those that waited for a free connection (every
    /// connection had a request in flight): the server's latency × the
    /// connections held the rate back, not this client.
    #[serde(default)]
    pub late_waiting_for_connection: u64,
    /// Of the late sends, those intended once connections were free again
    /// that waited behind a stall's backlog, which drains at most at twice
    /// the rate (the generator never bursts above that).
    #[serde(default)]
    pub late_catch_up: u64,
    /// Sends that left in the window (intended = sends + dropped).
    #[serde(default)]
    pub sends: u64,
    #[serde(default)]
    pub dropped: u64,
}

impl OpenLoop {
    /// The open-loop part of a report built from `rec`, for a run whose
    /// target was `rate_target` (0 when only the recorder says open loop).
    fn build(rate_target: Option<f64>, rec: &Recorder) -> Option<OpenLoop> {
        let state = rec.open_loop();
        if state.is_none() && rate_target.is_none() {
            return None;
        }
        let empty = new_latency_histogram();
        let uncorrected = state.map_or(&empty, |o| &o.latency_uncorrected_us);
        let lag = state.map_or(&empty, |o| &o.schedule_lag_us);
        Some(OpenLoop {
            rate_target: rate_target.unwrap_or(0.0),
            latency_uncorrected_us: LatencySummary::from_histogram(uncorrected),
            histogram_uncorrected: histogram_string(uncorrected),
            schedule_lag_us: LatencySummary::from_histogram(lag),
            histogram_schedule_lag: histogram_string(lag),
            late_sends: rec.late_sends(),
            late_waiting_for_connection: rec.late_waiting(),
            late_catch_up: rec.late_catch_up(),
            sends: rec.sends(),
            dropped: rec.dropped(),
        })
    }

    /// Both runs' counters and targets summed (histograms are merged by
    /// the caller, which decodes them); a count that would not fit in 64
    /// bits is an error naming it.
    pub(crate) fn add_counts(a: Option<OpenLoop>, b: &OpenLoop) -> Result<OpenLoop, ReportError> {
        let Some(mut a) = a else {
            return Ok(b.clone());
        };
        a.rate_target += b.rate_target;
        add_to(&mut a.late_sends, b.late_sends, "late_sends")?;
        add_to(
            &mut a.late_waiting_for_connection,
            b.late_waiting_for_connection,
            "late_waiting_for_connection",
        )?;
        add_to(&mut a.late_catch_up, b.late_catch_up, "late_catch_up")?;
        add_to(&mut a.sends, b.sends, "sends")?;
        add_to(&mut a.dropped, b.dropped, "dropped")?;
        Ok(a)
    }
}

/// The result of a run, or of merging runs. Serializes to the `xload/1`
/// JSON report; unknown keys are kept in `extra` and written back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    /// Which run, where and when: keys right after `schema`, each absent
    /// when unknown (reports written before they existed have none).
    #[serde(flatten)]
    pub run: RunInfo,
    pub target: String,
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_reason: Option<String>,
    pub threads: usize,
    pub connections: usize,
    #[serde(default = "default_pipeline")]
    pub pipeline: usize,
    /// The HTTP version spoken: `http/1.1` or `h2`.
    #[serde(default = "default_protocol")]
    pub protocol: String,
    /// Measured window, seconds.
    pub duration_s: f64,
    /// Completed responses in the measured window.
    pub requests: u64,
    /// Response bytes received on the wire.
    pub bytes: u64,
    /// Request bytes sent on the wire.
    #[serde(default)]
    pub bytes_sent: u64,
    /// Connections opened.
    #[serde(default)]
    pub connects: u64,
    /// `requests / duration_s` (0 when the window is empty).
    pub rps: f64,
    /// Status code ("200") -> responses.
    pub status: BTreeMap<String, u64>,
    /// Error category ([`ErrorKind::name`]) -> count, non-zero only.
    pub errors: BTreeMap<String, u64>,
    /// Sum of `errors`.
    pub errors_total: u64,
    /// Parse errors per cause (the parser's error name) -> count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub parse_errors: BTreeMap<String, u64>,
    /// `other` errors per errno ("errno_ENOBUFS") -> count.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub errors_other: BTreeMap<String, u64>,
    /// Latency summary, µs (corrected latency in open loop).
    pub latency_us: LatencySummary,
    /// The latency histogram, HdrHistogram V2 compressed, base64.
    pub histogram: String,
    /// Open loop (`--rate`) figures; their keys sit at the top level of
    /// the JSON, between `histogram` and `unanswered_at_end`.
    #[serde(flatten)]
    pub open_loop: Option<OpenLoop>,
    /// Requests left without an answer when the window closed; those older
    /// than the answered p99 are in the latency figures at their age.
    #[serde(default)]
    pub unanswered_at_end: Unanswered,
    /// io_uring closed loop: what the batched waits brought (filled by the
    /// caller from the engine's workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batching: Option<Batching>,
    /// https: handshakes, their timing and the TLS mode (mode, library and
    /// kTLS reason filled by the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsReport>,
    /// HTTP/2: streams, GOAWAYs, resets, stalls and the server's SETTINGS
    /// (`streams_asked` filled by the caller).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub h2: Option<H2Report>,
    /// The run was stopped early (Ctrl-C, SIGTERM): the measured window is
    /// shorter than the one asked for. Filled by the caller.
    #[serde(default)]
    pub interrupted: bool,
    /// Client-side observation and verdict (filled by the probe crate). A
    /// string field `verdict` is the last unindented line of the text report
    /// (its notes follow it, indented).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<serde_json::Value>,
    /// Per-second rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeseries: Vec<IntervalRow>,
    /// The latency histogram of each per-second row, so that the rows of
    /// several reports merge exactly (absent in older reports).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeseries_histograms: Vec<SecondHistogram>,
    /// Workload runs: per-class figures, in the workload's order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassReport>,
    /// Keys this version does not model, kept so they round-trip.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn default_pipeline() -> usize {
    1
}

fn default_protocol() -> String {
    "http/1.1".to_string()
}

pub(crate) fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// The histogram string for a report; an empty string in the one case
/// serialization can fail (a count above i64::MAX, i.e. never in practice),
/// which decoding then reports as [`ReportError::HistogramMissing`].
pub(crate) fn histogram_string(h: &Histogram<u64>) -> String {
    encode_histogram(h).unwrap_or_default()
}

impl Report {
    /// The report of a run from its metadata and its merged recorder.
    /// `client` and `timeseries` are left empty for the caller to fill.
    pub fn build(meta: &RunMeta, rec: &Recorder) -> Report {
        let latency = rec.latency_histogram();
        let status = rec
            .status_counts()
            .map(|(code, n)| {
                let key = if code == 0 {
                    "other".to_string()
                } else {
                    code.to_string()
                };
                (key, n)
            })
            .collect();
        let errors = ErrorKind::ALL
            .into_iter()
            .filter(|k| rec.error_count(*k) > 0)
            .map(|k| (k.name().to_string(), rec.error_count(k)))
            .collect();
        let parse_errors = rec
            .parse_causes()
            .iter()
            .map(|(cause, n)| (cause.to_string(), *n))
            .collect();
        let errors_other = rec
            .errno_counts()
            .iter()
            .map(|(errno, n)| (errno_key(*errno), *n))
            .collect();
        Report {
            schema: SCHEMA.to_string(),
            run: RunInfo::default(),
            target: meta.target.clone(),
            engine: meta.engine.clone(),
            engine_reason: meta.engine_reason.clone(),
            threads: meta.threads,
            connections: meta.connections,
            pipeline: meta.pipeline,
            protocol: if rec.h2().is_some() { "h2" } else { "http/1.1" }.to_string(),
            duration_s: meta.duration_s,
            requests: rec.requests(),
            bytes: rec.bytes_received(),
            bytes_sent: rec.bytes_sent(),
            connects: rec.connects(),
            rps: per_second(rec.requests(), meta.duration_s),
            status,
            errors,
            errors_total: rec.errors_total(),
            parse_errors,
            errors_other,
            latency_us: LatencySummary::from_histogram(&latency),
            histogram: histogram_string(&latency),
            open_loop: OpenLoop::build(meta.rate_target, rec),
            unanswered_at_end: rec.unanswered(),
            batching: None,
            tls: rec.tls().map(|t| TlsReport::build(t, meta.duration_s)),
            h2: rec.h2().map(H2Report::build),
            interrupted: false,
            client: None,
            timeseries: Vec::new(),
            timeseries_histograms: Vec::new(),
            classes: rec
                .classes()
                .iter()
                .map(|c| ClassReport::build(c, meta.duration_s))
                .collect(),
            extra: BTreeMap::new(),
        }
    }

    /// The JSON report, pretty-printed.
    pub fn to_json(&self) -> String {
        // Serializing this struct cannot fail: every map has string keys and
        // `serde_json::Value` in `extra`/`client` is always serializable.
        // Non-finite floats (impossible from `build`, possible after a user
        // edits the struct) are written as null by serde_json.
        serde_json::to_string_pretty(self).unwrap_or_else(|e| {
            format!("{{\"schema\":\"{SCHEMA}\",\"error\":{:?}}}", e.to_string())
        })
    }

    /// Parses a JSON report; rejects other schemas.
    pub fn from_json(s: &str) -> Result<Report, ReportError> {
        // Name the schema first: a sweep or pps document is not "missing a field".
        let doc: serde_json::Value = serde_json::from_str(s)?;
        match doc.get("schema").and_then(|v| v.as_str()) {
            Some(SCHEMA) => {}
            found => {
                return Err(ReportError::Schema {
                    found: found.unwrap_or("(none)").to_string(),
                })
            }
        }
        Ok(serde_json::from_value(doc)?)
    }

    /// Whether this is an open-loop (`--rate`) report.
    pub fn is_open_loop(&self) -> bool {
        self.open_loop.is_some()
    }

    /// Responses whose status is not 2xx or 3xx (what wrk calls "Non-2xx
    /// or 3xx responses"): answered, so not errors of the transport, but
    /// not successes either.
    pub fn non_2xx_3xx(&self) -> u64 {
        self.status
            .iter()
            .filter(|(code, _)| !matches!(code.parse::<u16>(), Ok(200..=399)))
            .fold(0u64, |sum, (_, n)| sum.saturating_add(*n))
    }

    /// Errors as a fraction of attempts (responses + errors); 0 when
    /// nothing was attempted.
    pub fn error_rate(&self) -> f64 {
        let attempts = self.requests.saturating_add(self.errors_total);
        if attempts == 0 {
            0.0
        } else {
            self.errors_total as f64 / attempts as f64
        }
    }

    /// The decoded latency histogram (µs).
    pub fn latency_histogram(&self) -> Result<Histogram<u64>, ReportError> {
        decode_histogram(&self.histogram)
    }

    /// Open loop: the decoded uncorrected latency histogram.
    pub fn latency_uncorrected_histogram(&self) -> Result<Option<Histogram<u64>>, ReportError> {
        self.open_loop
            .as_ref()
            .map(|o| o.histogram_uncorrected.as_str())
            .filter(|h| !h.is_empty())
            .map(decode_histogram)
            .transpose()
    }

    /// Open loop: the decoded schedule-lag histogram.
    pub fn schedule_lag_histogram(&self) -> Result<Option<Histogram<u64>>, ReportError> {
        self.open_loop
            .as_ref()
            .map(|o| o.histogram_schedule_lag.as_str())
            .filter(|h| !h.is_empty())
            .map(decode_histogram)
            .transpose()
    }

    /// The time series as CSV: header `second,requests,rps,p50_us,p99_us,errors`.
    pub fn timeseries_csv(&self) -> String {
        let mut s = String::from("second,requests,rps,p50_us,p99_us,errors\n");
        for r in &self.timeseries {
            s.push_str(&format!(
                "{},{},{:.1},{},{},{}\n",
                r.second, r.requests, r.rps, r.p50_us, r.p99_us, r.errors
            ));
        }
        s
    }
}
