//! Exact merge of reports: runs made at the same time from several
//! workers, processes or hosts become one report, histograms included.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::error::ReportError;
use crate::hist::{add_into, new_latency_histogram, LatencySummary};
use crate::report::{histogram_string, per_second, Batching, IntervalRow, OpenLoop, Report};
use crate::SCHEMA;

impl Report {
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
        let mut sum = Sum::new(first);
        for (index, r) in reports.iter().enumerate() {
            sum.add(r).map_err(|e| ReportError::InReport {
                index,
                target: r.target.clone(),
                source: Box::new(e),
            })?;
        }
        let mut out = sum.finish();
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
}

/// The merge so far: the summed report and what is summed apart from it
/// (decoded histograms, the distinct engines, time-series rows by second).
struct Sum<'a> {
    out: Report,
    // Accumulators start as a copy of the first histogram so that inputs
    // of one configuration (every xload report) add exactly, whatever
    // that configuration is; a foreign configuration is re-bucketed the
    // way HdrHistogram's `add` does.
    latency: Option<Histogram<u64>>,
    uncorrected: Option<Histogram<u64>>,
    lag: Option<Histogram<u64>>,
    engines: Vec<&'a str>,
    reasons: Vec<&'a str>,
    rows: BTreeMap<u64, IntervalRow>,
}

impl<'a> Sum<'a> {
    fn new(first: &Report) -> Sum<'a> {
        Sum {
            out: Report {
                schema: SCHEMA.to_string(),
                target: first.target.clone(),
                engine: first.engine.clone(),
                engine_reason: first.engine_reason.clone(),
                pipeline: first.pipeline,
                ..Report::default()
            },
            latency: None,
            uncorrected: None,
            lag: None,
            engines: Vec::new(),
            reasons: Vec::new(),
            rows: BTreeMap::new(),
        }
    }

    /// Adds one report; an error names what in it cannot be read.
    fn add(&mut self, r: &'a Report) -> Result<(), ReportError> {
        if r.schema != SCHEMA {
            return Err(ReportError::Schema {
                found: r.schema.clone(),
            });
        }
        accumulate(&mut self.latency, r.latency_histogram()?);
        if let Some(h) = r.latency_uncorrected_histogram()? {
            accumulate(&mut self.uncorrected, h);
        }
        if let Some(h) = r.schedule_lag_histogram()? {
            accumulate(&mut self.lag, h);
        }
        self.add_setup(r);
        let out = &mut self.out;
        out.requests += r.requests;
        out.bytes += r.bytes;
        out.bytes_sent += r.bytes_sent;
        out.connects += r.connects;
        add_counts(&mut out.status, &r.status);
        add_counts(&mut out.errors, &r.errors);
        add_counts(&mut out.parse_errors, &r.parse_errors);
        add_counts(&mut out.errors_other, &r.errors_other);
        out.errors_total += r.errors_total;
        if let Some(o) = &r.open_loop {
            out.open_loop = Some(OpenLoop::add_counts(out.open_loop.take(), o));
        }
        out.unanswered_at_end.add(&r.unanswered_at_end);
        out.batching = Batching::merge(out.batching, r.batching);
        out.interrupted |= r.interrupted;
        for row in &r.timeseries {
            self.rows
                .entry(row.second)
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
        Ok(())
    }

    /// What ran, and how: target, engines, pipeline, workers, window.
    fn add_setup(&mut self, r: &'a Report) {
        let out = &mut self.out;
        if r.target != out.target {
            out.target = "multiple".to_string();
        }
        if !self.engines.contains(&r.engine.as_str()) {
            self.engines.push(&r.engine);
        }
        if let Some(reason) = r.engine_reason.as_deref() {
            if !self.reasons.contains(&reason) {
                self.reasons.push(reason);
            }
        }
        out.pipeline = out.pipeline.max(r.pipeline);
        out.threads += r.threads;
        out.connections += r.connections;
        if r.duration_s > out.duration_s {
            out.duration_s = r.duration_s;
        }
    }

    /// The merged report: rates and percentiles from the sums.
    fn finish(self) -> Report {
        let mut out = self.out;
        out.errors.retain(|_, n| *n > 0);
        out.engine = self.engines.join("+");
        out.engine_reason = (!self.reasons.is_empty()).then(|| self.reasons.join("; "));
        out.rps = per_second(out.requests, out.duration_s);
        let latency = self.latency.unwrap_or_else(new_latency_histogram);
        out.latency_us = LatencySummary::from_histogram(&latency);
        out.histogram = histogram_string(&latency);
        if let Some(o) = &mut out.open_loop {
            let empty = new_latency_histogram();
            let uncorrected = self.uncorrected.as_ref().unwrap_or(&empty);
            let lag = self.lag.as_ref().unwrap_or(&empty);
            o.latency_uncorrected_us = LatencySummary::from_histogram(uncorrected);
            o.histogram_uncorrected = histogram_string(uncorrected);
            o.schedule_lag_us = LatencySummary::from_histogram(lag);
            o.histogram_schedule_lag = histogram_string(lag);
        }
        out.timeseries = self.rows.into_values().collect();
        out
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
