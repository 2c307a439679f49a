//! The report model: what one run (or a merge of runs) measured, in the
//! JSON shape of schema `xload/1` (keys in DESIGN.md).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error_kind::{errno_key, ErrorKind};
use crate::hist::{
    add_into, decode_histogram, encode_histogram, new_latency_histogram, LatencySummary,
};
use crate::recorder::{Interval, Recorder, Unanswered};

/// The value of the `schema` key.
pub const SCHEMA: &str = "xload/1";

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
    /// One of the reports given to `Report::merge` is unusable.
    #[error("report {index} ({target}): {source}")]
    InReport {
        index: usize,
        target: String,
        #[source]
        source: Box<ReportError>,
    },
}

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

/// The result of a run, or of merging runs. Serializes to the `xload/1`
/// JSON report; unknown keys are kept in `extra` and written back.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// Always [`SCHEMA`].
    pub schema: String,
    pub target: String,
    pub engine: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine_reason: Option<String>,
    pub threads: usize,
    pub connections: usize,
    #[serde(default = "default_pipeline")]
    pub pipeline: usize,
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
    /// Open loop: intended requests per second in total.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate_target: Option<f64>,
    /// Open loop: latency measured from the actual send, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub latency_uncorrected_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_uncorrected: Option<String>,
    /// Open loop: how late sends left versus their intended times, µs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub schedule_lag_us: Option<LatencySummary>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histogram_schedule_lag: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_sends: Option<u64>,
    /// Open loop: of the late sends, those that waited for a free
    /// connection (every connection had a request in flight): the server's
    /// latency × the connections held the rate back, not this client.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_waiting_for_connection: Option<u64>,
    /// Open loop: of the late sends, those intended once connections were
    /// free again that waited behind a stall's backlog, which drains at
    /// most at twice the rate (the generator never bursts above that).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late_catch_up: Option<u64>,
    /// Open loop: sends that left in the window (intended = sends + dropped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sends: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dropped: Option<u64>,
    /// Requests left without an answer when the window closed; those older
    /// than the answered p99 are in the latency figures at their age.
    #[serde(default)]
    pub unanswered_at_end: Unanswered,
    /// io_uring closed loop: what the batched waits brought (filled by the
    /// caller from the engine's workers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batching: Option<Batching>,
    /// The run was stopped early (Ctrl-C, SIGTERM): the measured window is
    /// shorter than the one asked for. Filled by the caller.
    #[serde(default)]
    pub interrupted: bool,
    /// Client-side observation and verdict (filled by the probe crate). A
    /// string field `verdict` is printed as the last line of the text report.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<serde_json::Value>,
    /// Per-second rows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub timeseries: Vec<IntervalRow>,
    /// Keys this version does not model, kept so they round-trip.
    #[serde(flatten)]
    pub extra: BTreeMap<String, serde_json::Value>,
}

fn default_pipeline() -> usize {
    1
}

fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// The histogram string for a report; an empty string in the one case
/// serialization can fail (a count above i64::MAX, i.e. never in practice),
/// which decoding then reports as [`ReportError::HistogramMissing`].
fn histogram_string(h: &Histogram<u64>) -> String {
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
        let open = rec.open_loop();
        let open_loop = open.is_some() || meta.rate_target.is_some();
        Report {
            schema: SCHEMA.to_string(),
            target: meta.target.clone(),
            engine: meta.engine.clone(),
            engine_reason: meta.engine_reason.clone(),
            threads: meta.threads,
            connections: meta.connections,
            pipeline: meta.pipeline,
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
            rate_target: meta.rate_target,
            latency_uncorrected_us: open
                .map(|o| LatencySummary::from_histogram(&o.latency_uncorrected_us)),
            histogram_uncorrected: open.map(|o| histogram_string(&o.latency_uncorrected_us)),
            schedule_lag_us: open.map(|o| LatencySummary::from_histogram(&o.schedule_lag_us)),
            histogram_schedule_lag: open.map(|o| histogram_string(&o.schedule_lag_us)),
            late_sends: open_loop.then(|| rec.late_sends()),
            late_waiting_for_connection: open_loop.then(|| rec.late_waiting()),
            late_catch_up: open_loop.then(|| rec.late_catch_up()),
            sends: open_loop.then(|| rec.sends()),
            dropped: open_loop.then(|| rec.dropped()),
            unanswered_at_end: rec.unanswered(),
            batching: None,
            interrupted: false,
            client: None,
            timeseries: Vec::new(),
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
        self.rate_target.is_some() || self.histogram_uncorrected.is_some()
    }

    /// Responses whose status is not 2xx or 3xx (what wrk calls "Non-2xx
    /// or 3xx responses"): answered, so not errors of the transport, but
    /// not successes either.
    pub fn non_2xx_3xx(&self) -> u64 {
        self.status
            .iter()
            .filter(|(code, _)| !matches!(code.parse::<u16>(), Ok(200..=399)))
            .map(|(_, n)| n)
            .sum()
    }

    /// Errors as a fraction of attempts (responses + errors); 0 when
    /// nothing was attempted.
    pub fn error_rate(&self) -> f64 {
        let attempts = self.requests + self.errors_total;
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
        self.histogram_uncorrected
            .as_deref()
            .map(decode_histogram)
            .transpose()
    }

    /// Open loop: the decoded schedule-lag histogram.
    pub fn schedule_lag_histogram(&self) -> Result<Option<Histogram<u64>>, ReportError> {
        self.histogram_schedule_lag
            .as_deref()
            .map(decode_histogram)
            .transpose()
    }

    /// Merges reports of runs made at the same time from several workers,
    /// processes or hosts, exactly: counters, status codes, errors and
    /// breakdowns are summed; histograms are merged and every percentile
    /// recomputed from the merged histogram. `threads` and `connections`
    /// are summed, `duration_s` is the longest window and `rps` is
    /// `requests / duration_s`; `rate_target` is the sum of the targets.
    /// `target`, `engine`, `engine_reason` and `pipeline` are kept when all
    /// agree; otherwise `target` becomes "multiple", `engine` and
    /// `engine_reason` the distinct values joined with "+" and "; ", and
    /// `pipeline` the largest. Time-series rows are matched by second:
    /// counts and rates add up, and p50/p99 of a row are the largest of the
    /// inputs (an upper bound: rows carry no histogram). A single
    /// report's `client` is kept as is; with several reports, the client
    /// keys cover all of them (`saturated` if any input was, `judged` if
    /// all were, `cpu_s` summed, `reasons` and `notes` prefixed with the
    /// input's number, a `verdict` line) and `per_report` keeps each
    /// input's section (or null), in order. `batching` sums the waits and completions of the
    /// reports that have it and widens the cap range (reports without it,
    /// e.g. from the epoll engine, add nothing). Unknown keys: the first
    /// report's value wins.
    pub fn merge(reports: &[Report]) -> Result<Report, ReportError> {
        let Some(first) = reports.first() else {
            return Err(ReportError::NothingToMerge);
        };
        let open = reports.iter().position(Report::is_open_loop);
        let closed = reports.iter().position(|r| !r.is_open_loop());
        if let (Some(open), Some(closed)) = (open, closed) {
            return Err(ReportError::MixedLoops {
                open,
                open_target: reports[open].target.clone(),
                closed,
                closed_target: reports[closed].target.clone(),
            });
        }
        let in_report = |index: usize, e: ReportError| ReportError::InReport {
            index,
            target: reports[index].target.clone(),
            source: Box::new(e),
        };

        // Accumulators start as a copy of the first histogram so that inputs
        // of one configuration (every xload report) add exactly, whatever
        // that configuration is; a foreign configuration is re-bucketed the
        // way HdrHistogram's `add` does.
        let mut latency: Option<Histogram<u64>> = None;
        let mut uncorrected: Option<Histogram<u64>> = None;
        let mut lag: Option<Histogram<u64>> = None;
        let mut out = Report {
            schema: SCHEMA.to_string(),
            target: first.target.clone(),
            engine: first.engine.clone(),
            engine_reason: first.engine_reason.clone(),
            threads: 0,
            connections: 0,
            pipeline: first.pipeline,
            duration_s: 0.0,
            requests: 0,
            bytes: 0,
            bytes_sent: 0,
            connects: 0,
            rps: 0.0,
            status: BTreeMap::new(),
            errors: BTreeMap::new(),
            errors_total: 0,
            parse_errors: BTreeMap::new(),
            errors_other: BTreeMap::new(),
            latency_us: LatencySummary::default(),
            histogram: String::new(),
            rate_target: None,
            latency_uncorrected_us: None,
            histogram_uncorrected: None,
            schedule_lag_us: None,
            histogram_schedule_lag: None,
            late_sends: None,
            late_waiting_for_connection: None,
            late_catch_up: None,
            sends: None,
            dropped: None,
            unanswered_at_end: Unanswered::default(),
            batching: None,
            interrupted: false,
            client: None,
            timeseries: Vec::new(),
            extra: BTreeMap::new(),
        };
        let mut engines: Vec<&str> = Vec::new();
        let mut reasons: Vec<&str> = Vec::new();
        let mut rows: BTreeMap<u64, IntervalRow> = BTreeMap::new();

        for (index, r) in reports.iter().enumerate() {
            if r.schema != SCHEMA {
                return Err(in_report(
                    index,
                    ReportError::Schema {
                        found: r.schema.clone(),
                    },
                ));
            }
            let h = r.latency_histogram().map_err(|e| in_report(index, e))?;
            accumulate(&mut latency, h);
            if let Some(h) = r
                .latency_uncorrected_histogram()
                .map_err(|e| in_report(index, e))?
            {
                accumulate(&mut uncorrected, h);
            }
            if let Some(h) = r
                .schedule_lag_histogram()
                .map_err(|e| in_report(index, e))?
            {
                accumulate(&mut lag, h);
            }

            if r.target != out.target {
                out.target = "multiple".to_string();
            }
            if !engines.contains(&r.engine.as_str()) {
                engines.push(&r.engine);
            }
            if let Some(reason) = r.engine_reason.as_deref() {
                if !reasons.contains(&reason) {
                    reasons.push(reason);
                }
            }
            out.pipeline = out.pipeline.max(r.pipeline);
            out.threads += r.threads;
            out.connections += r.connections;
            if r.duration_s > out.duration_s {
                out.duration_s = r.duration_s;
            }
            out.requests += r.requests;
            out.bytes += r.bytes;
            out.bytes_sent += r.bytes_sent;
            out.connects += r.connects;
            add_counts(&mut out.status, &r.status);
            add_counts(&mut out.errors, &r.errors);
            add_counts(&mut out.parse_errors, &r.parse_errors);
            add_counts(&mut out.errors_other, &r.errors_other);
            out.errors_total += r.errors_total;
            out.rate_target = add_opt(out.rate_target, r.rate_target);
            out.late_sends = add_opt(out.late_sends, r.late_sends);
            out.late_waiting_for_connection = add_opt(
                out.late_waiting_for_connection,
                r.late_waiting_for_connection,
            );
            out.late_catch_up = add_opt(out.late_catch_up, r.late_catch_up);
            out.sends = add_opt(out.sends, r.sends);
            out.dropped = add_opt(out.dropped, r.dropped);
            out.unanswered_at_end.add(&r.unanswered_at_end);
            out.batching = Batching::merge(out.batching, r.batching);
            out.interrupted |= r.interrupted;
            for row in &r.timeseries {
                rows.entry(row.second)
                    .and_modify(|m| {
                        m.requests += row.requests;
                        m.rps += row.rps;
                        m.errors += row.errors;
                        m.p50_us = m.p50_us.max(row.p50_us);
                        m.p99_us = m.p99_us.max(row.p99_us);
                    })
                    .or_insert_with(|| row.clone());
            }
            for (k, v) in &r.extra {
                out.extra.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }

        out.errors.retain(|_, n| *n > 0);
        out.engine = engines.join("+");
        out.engine_reason = (!reasons.is_empty()).then(|| reasons.join("; "));
        out.rps = per_second(out.requests, out.duration_s);
        let latency = latency.unwrap_or_else(new_latency_histogram);
        out.latency_us = LatencySummary::from_histogram(&latency);
        out.histogram = histogram_string(&latency);
        out.latency_uncorrected_us = uncorrected.as_ref().map(LatencySummary::from_histogram);
        out.histogram_uncorrected = uncorrected.as_ref().map(histogram_string);
        out.schedule_lag_us = lag.as_ref().map(LatencySummary::from_histogram);
        out.histogram_schedule_lag = lag.as_ref().map(histogram_string);
        out.timeseries = rows.into_values().collect();
        if reports.len() > 1 && !out.timeseries.is_empty() {
            // Rows keep no histogram: their percentiles cannot be merged.
            out.extra.insert(
                "timeseries_percentiles".into(),
                serde_json::Value::String(
                    "worst of the merged reports: each second's p50_us and p99_us are the highest of the inputs', not a merge".into(),
                ),
            );
        }
        out.client = merge_clients(reports);
        Ok(out)
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

fn accumulate(acc: &mut Option<Histogram<u64>>, h: Histogram<u64>) {
    match acc {
        Some(sum) => add_into(sum, &h),
        None => *acc = Some(h),
    }
}

fn add_counts(into: &mut BTreeMap<String, u64>, from: &BTreeMap<String, u64>) {
    for (k, n) in from {
        *into.entry(k.clone()).or_insert(0) += *n;
    }
}

fn add_opt<T: std::ops::Add<Output = T>>(a: Option<T>, b: Option<T>) -> Option<T> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a + b),
        (a, None) => a,
        (None, b) => b,
    }
}

fn merge_clients(reports: &[Report]) -> Option<serde_json::Value> {
    let with_client = reports.iter().filter(|r| r.client.is_some()).count();
    match with_client {
        0 => None,
        1 if reports.len() == 1 => reports[0].client.clone(),
        _ => {
            // The documented keys, over every generator: saturated if any
            // was (its reasons say which, by target), judged if all were,
            // CPU seconds summed; each report's own section in per_report.
            let clients: Vec<&serde_json::Value> =
                reports.iter().filter_map(|r| r.client.as_ref()).collect();
            let flag =
                |c: &serde_json::Value, k: &str| c.get(k).and_then(serde_json::Value::as_bool);
            let saturated = clients.iter().any(|c| flag(c, "saturated") == Some(true));
            let judged = with_client == reports.len()
                && clients.iter().all(|c| flag(c, "judged").unwrap_or(true));
            let cpu_s: f64 = clients
                .iter()
                .filter_map(|c| c.get("cpu_s").and_then(serde_json::Value::as_f64))
                .sum();
            let prefixed = |key: &str| -> Vec<serde_json::Value> {
                reports
                    .iter()
                    .enumerate()
                    .flat_map(|(i, r)| {
                        let list = r
                            .client
                            .as_ref()
                            .and_then(|c| c.get(key))
                            .and_then(serde_json::Value::as_array)
                            .cloned()
                            .unwrap_or_default();
                        list.into_iter().filter_map(move |v| {
                            v.as_str().map(|s| {
                                serde_json::Value::String(format!("report {}: {s}", i + 1))
                            })
                        })
                    })
                    .collect()
            };
            let verdict = if !judged && !saturated {
                "client: not judged in every merged report".to_string()
            } else if saturated {
                let n = clients
                    .iter()
                    .filter(|c| flag(c, "saturated") == Some(true))
                    .count();
                format!(
                    "client: SATURATED in {n} of {} merged reports: results understate the server",
                    reports.len()
                )
            } else {
                format!(
                    "client: not saturated in any of the {} merged reports",
                    reports.len()
                )
            };
            Some(serde_json::json!({
                "saturated": saturated,
                "judged": judged,
                "cpu_s": cpu_s,
                "reasons": prefixed("reasons"),
                "notes": prefixed("notes"),
                "verdict": verdict,
                "per_report": reports
                    .iter()
                    .map(|r| r.client.clone().unwrap_or(serde_json::Value::Null))
                    .collect::<Vec<_>>()
            }))
        }
    }
}
