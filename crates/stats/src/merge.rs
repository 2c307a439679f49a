//! Exact merge of reports: runs made at the same time from several
//! workers, processes or hosts become one report, histograms included.

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::error::{add_to, ReportError};
use crate::h2::H2Report;
use crate::hist::{add_into, decode_histogram, new_latency_histogram, LatencySummary};
use crate::report::{
    histogram_string, per_second, Batching, IntervalRow, OpenLoop, Report, RunInfo, SecondHistogram,
};
use crate::tls::TlsReport;
use crate::walltime::{format_rfc3339_us, UnixMicros};
use crate::SCHEMA;

impl Report {
    /// Merges reports of runs made at the same time from several workers,
    /// processes or hosts, exactly: counters, status codes, errors and
    /// breakdowns are summed; histograms are merged and every percentile
    /// recomputed from the merged histogram. `threads` and `connections`
    /// are summed, `duration_s` is the longest window and `rps` is
    /// `requests / duration_s`; `rate_target` is the sum of the targets.
    /// When every report says when its window began (`started_at`),
    /// `duration_s` is instead the span from the first window's start to
    /// the last one's end, and the merged run keys say what all agree on.
    /// `target`, `engine`, `engine_reason` and `pipeline` are kept when all
    /// agree; otherwise `target` becomes "multiple", `engine` and
    /// `engine_reason` the distinct values joined with "+" and "; ", and
    /// `pipeline` the largest. Time-series rows are matched by absolute
    /// time (each report's rows shifted by its start's offset from the
    /// first start, to the nearest second; by `second` alone without
    /// `started_at`): counts and rates add up, and p50/p99 of a row come
    /// from the merged per-second histograms (`timeseries_histograms`),
    /// exactly; when a report lacks them, they are the largest of the
    /// inputs' (an upper bound), and `timeseries_percentiles` says so. A single
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
        let starts: Option<Vec<UnixMicros>> =
            reports.iter().map(|r| r.run.started_at_us()).collect();
        let first_start = starts.as_ref().and_then(|s| s.iter().min().copied());
        for (index, r) in reports.iter().enumerate() {
            // Whole seconds between this window's start and the first one's.
            let shift = match (&starts, first_start) {
                (Some(s), Some(t0)) => (s[index].saturating_sub(t0) as f64 / 1e6).round() as u64,
                _ => 0,
            };
            sum.add(r, shift).map_err(|e| ReportError::InReport {
                index,
                target: r.target.clone(),
                source: Box::new(e),
            })?;
        }
        let exact_rows = sum.rows_exact;
        let mut out = sum.finish();
        if let Some(starts) = &starts {
            let span = span_of(reports, starts);
            out.duration_s = span.1.saturating_sub(span.0) as f64 / 1e6;
            out.rps = per_second(out.requests, out.duration_s);
        }
        out.classes = crate::classes::merge_reports(
            reports.iter().map(|r| r.classes.as_slice()),
            out.duration_s,
        )?;
        out.run = merged_run(reports);
        if reports.len() > 1 && !out.timeseries.is_empty() && !exact_rows {
            // A report without per-second histograms: rows cannot be merged.
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
    /// Per-second rows by aligned second, with their merged histograms.
    rows: BTreeMap<u64, (IntervalRow, Option<Histogram<u64>>)>,
    /// Every row added so far came with its histogram.
    rows_exact: bool,
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
                protocol: first.protocol.clone(),
                ..Report::default()
            },
            latency: None,
            uncorrected: None,
            lag: None,
            engines: Vec::new(),
            reasons: Vec::new(),
            rows: BTreeMap::new(),
            rows_exact: true,
        }
    }

    /// Adds one report whose rows are `shift` seconds after the first
    /// window's; an error names what in it cannot be read.
    fn add(&mut self, r: &'a Report, shift: u64) -> Result<(), ReportError> {
        if r.schema != SCHEMA {
            return Err(ReportError::Schema {
                found: r.schema.clone(),
            });
        }
        accumulate(&mut self.latency, r.latency_histogram()?, "histogram")?;
        if let Some(h) = r.latency_uncorrected_histogram()? {
            accumulate(&mut self.uncorrected, h, "histogram_uncorrected")?;
        }
        if let Some(h) = r.schedule_lag_histogram()? {
            accumulate(&mut self.lag, h, "histogram_schedule_lag")?;
        }
        self.add_setup(r)?;
        self.add_rows(r, shift)?;
        let out = &mut self.out;
        add_to(&mut out.requests, r.requests, "requests")?;
        add_to(&mut out.bytes, r.bytes, "bytes")?;
        add_to(&mut out.bytes_sent, r.bytes_sent, "bytes_sent")?;
        add_to(&mut out.connects, r.connects, "connects")?;
        add_counts(&mut out.status, &r.status, "status")?;
        add_counts(&mut out.errors, &r.errors, "errors")?;
        add_counts(&mut out.parse_errors, &r.parse_errors, "parse_errors")?;
        add_counts(&mut out.errors_other, &r.errors_other, "errors_other")?;
        add_to(&mut out.errors_total, r.errors_total, "errors_total")?;
        if let Some(o) = &r.open_loop {
            out.open_loop = Some(OpenLoop::add_counts(out.open_loop.take(), o)?);
        }
        out.unanswered_at_end.checked_add(&r.unanswered_at_end)?;
        out.batching = match (out.batching, r.batching) {
            (Some(a), Some(b)) => {
                let (mut waits, mut completions) = (a.waits, a.completions);
                add_to(&mut waits, b.waits, "batching.waits")?;
                add_to(&mut completions, b.completions, "batching.completions")?;
                Some(Batching::new(
                    waits,
                    completions,
                    a.cap_min.min(b.cap_min),
                    a.cap_max.max(b.cap_max),
                ))
            }
            (a, b) => a.or(b),
        };
        out.tls = TlsReport::merge(out.tls.take(), r.tls.as_ref(), 0.0)?;
        out.h2 = H2Report::merge(out.h2.take(), r.h2.as_ref())?;
        if out.protocol != r.protocol {
            out.protocol = "mixed".to_string();
        }
        out.interrupted |= r.interrupted;
        for (k, v) in &r.extra {
            out.extra.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Ok(())
    }

    /// Adds `r`'s per-second rows, `shift` seconds later, with their
    /// histograms when `r` has one for every row.
    fn add_rows(&mut self, r: &Report, shift: u64) -> Result<(), ReportError> {
        let mut hists: BTreeMap<u64, Histogram<u64>> = BTreeMap::new();
        for h in &r.timeseries_histograms {
            hists.insert(h.second, decode_histogram(&h.histogram)?);
        }
        for row in &r.timeseries {
            let second = row.second.checked_add(shift).ok_or(ReportError::Overflow {
                field: "timeseries.second".into(),
                value: row.second,
                before: shift,
            })?;
            let h = hists.remove(&row.second);
            self.rows_exact &= h.is_some();
            match self.rows.get_mut(&second) {
                Some((m, acc)) => {
                    let field = |key: &str| format!("timeseries.{second}.{key}");
                    add_to(&mut m.requests, row.requests, &field("requests"))?;
                    add_to(&mut m.errors, row.errors, &field("errors"))?;
                    m.rps += row.rps;
                    m.p50_us = m.p50_us.max(row.p50_us);
                    m.p99_us = m.p99_us.max(row.p99_us);
                    if let Some(h) = h {
                        accumulate(acc, h, &format!("timeseries_histograms.{second}"))?;
                    }
                }
                None => {
                    let row = IntervalRow {
                        second,
                        ..row.clone()
                    };
                    self.rows.insert(second, (row, h));
                }
            }
        }
        Ok(())
    }

    /// What ran, and how: target, engines, pipeline, workers, window.
    fn add_setup(&mut self, r: &'a Report) -> Result<(), ReportError> {
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
        let add = |acc: usize, n: usize, field: &str| {
            acc.checked_add(n).ok_or_else(|| ReportError::Overflow {
                field: field.into(),
                value: n as u64,
                before: acc as u64,
            })
        };
        out.threads = add(out.threads, r.threads, "threads")?;
        out.connections = add(out.connections, r.connections, "connections")?;
        if r.duration_s > out.duration_s {
            out.duration_s = r.duration_s;
        }
        Ok(())
    }

    /// The merged report: rates and percentiles from the sums.
    fn finish(self) -> Report {
        let mut out = self.out;
        out.errors.retain(|_, n| *n > 0);
        out.engine = self.engines.join("+");
        out.engine_reason = (!self.reasons.is_empty()).then(|| self.reasons.join("; "));
        out.rps = per_second(out.requests, out.duration_s);
        if let Some(t) = &mut out.tls {
            t.handshakes_per_s =
                per_second(t.handshakes_full + t.handshakes_resumed, out.duration_s);
        }
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
        for (second, (row, h)) in self.rows {
            match h.filter(|_| self.rows_exact) {
                Some(h) => {
                    let exact = if h.is_empty() {
                        (0, 0)
                    } else {
                        (h.value_at_quantile(0.5), h.value_at_quantile(0.99))
                    };
                    out.timeseries.push(IntervalRow {
                        p50_us: exact.0,
                        p99_us: exact.1,
                        ..row
                    });
                    out.timeseries_histograms
                        .push(SecondHistogram::new(second, &h));
                }
                None => out.timeseries.push(row),
            }
        }
        out
    }
}

/// From the first window's start to the last one's end, µs since the epoch.
pub(crate) fn span_of(reports: &[Report], starts: &[UnixMicros]) -> (UnixMicros, UnixMicros) {
    let end =
        |(r, s): (&Report, &UnixMicros)| s.saturating_add((r.duration_s * 1e6).round() as i64);
    let from = starts.iter().copied().min().unwrap_or_default();
    let to = reports.iter().zip(starts).map(end).max().unwrap_or(from);
    (from, to)
}

/// The run keys of a merge: each kept when every report agrees on it; the
/// first start; the largest start error. Host, segment and argv belong to
/// one generator and are left out.
fn merged_run(reports: &[Report]) -> RunInfo {
    fn agreed<T: Clone + PartialEq>(reports: &[Report], key: impl Fn(&RunInfo) -> &T) -> Option<T> {
        let first = key(&reports.first()?.run);
        reports
            .iter()
            .all(|r| key(&r.run) == first)
            .then(|| first.clone())
    }
    let starts: Option<Vec<UnixMicros>> = reports.iter().map(|r| r.run.started_at_us()).collect();
    let errors: Option<Vec<i64>> = reports.iter().map(|r| r.run.start_error_us).collect();
    RunInfo {
        run_id: agreed(reports, |r| &r.run_id).flatten(),
        segment: None,
        host: None,
        started_at: starts
            .and_then(|s| s.into_iter().min())
            .map(format_rfc3339_us),
        start_at: agreed(reports, |r| &r.start_at).flatten(),
        start_error_us: errors.and_then(|e| e.into_iter().max()),
        xload_version: agreed(reports, |r| &r.xload_version).flatten(),
        argv: None,
        settings: agreed(reports, |r| &r.settings).unwrap_or_default(),
    }
}

/// Adds `h` into `acc`; `field` names the histogram when their counts
/// together exceed 64 bits (HdrHistogram would saturate them silently).
fn accumulate(
    acc: &mut Option<Histogram<u64>>,
    h: Histogram<u64>,
    field: &str,
) -> Result<(), ReportError> {
    match acc {
        Some(sum) => {
            let mut total = sum.len();
            add_to(&mut total, h.len(), field)?;
            add_into(sum, &h);
        }
        None => *acc = Some(h),
    }
    Ok(())
}

/// Adds each count of `from` to `into`'s; `map` is the JSON key (`status`).
fn add_counts(
    into: &mut BTreeMap<String, u64>,
    from: &BTreeMap<String, u64>,
    map: &str,
) -> Result<(), ReportError> {
    for (k, n) in from {
        add_to(
            into.entry(k.clone()).or_insert(0),
            *n,
            &format!("{map}.{k}"),
        )?;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    const T0: UnixMicros = 1_796_292_000_000_000;

    /// A report begun at `start` whose second `i + 1` holds `latencies[i]`.
    fn report(start: UnixMicros, latencies: &[&[u64]]) -> Report {
        let mut all = new_latency_histogram();
        let mut r = Report {
            schema: SCHEMA.into(),
            duration_s: latencies.len() as f64,
            ..Report::default()
        };
        r.run.started_at = Some(format_rfc3339_us(start));
        for (i, values) in latencies.iter().enumerate() {
            let mut h = new_latency_histogram();
            for v in *values {
                h.record(*v).expect("in range");
                all.record(*v).expect("in range");
            }
            let second = i as u64 + 1;
            r.timeseries.push(IntervalRow {
                second,
                requests: h.len(),
                rps: h.len() as f64,
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
                errors: 0,
            });
            r.timeseries_histograms
                .push(SecondHistogram::new(second, &h));
        }
        r.requests = all.len();
        r.histogram = histogram_string(&all);
        r
    }

    #[test]
    fn rows_align_by_wall_clock_and_their_percentiles_are_exact() {
        // b began 1.02 s after a: its first second is a's second.
        let a = report(T0, &[&[100; 99], &[100, 200, 300]]);
        let b = report(T0 + 1_020_000, &[&[5_000; 3], &[10]]);
        let m = Report::merge(&[a, b]).expect("merges");
        let seconds: Vec<u64> = m.timeseries.iter().map(|r| r.second).collect();
        assert_eq!(seconds, [1, 2, 3]);
        let mut raw = new_latency_histogram();
        for v in [100, 200, 300, 5_000, 5_000, 5_000] {
            raw.record(v).expect("in range");
        }
        let row = &m.timeseries[1];
        assert_eq!(row.requests, 6);
        assert_eq!(row.p50_us, raw.value_at_quantile(0.5));
        assert_eq!(row.p99_us, raw.value_at_quantile(0.99));
        let h = decode_histogram(&m.timeseries_histograms[1].histogram).expect("decodes");
        assert_eq!(h, raw);
        assert!(!m.extra.contains_key("timeseries_percentiles"));
        // The window is the span: 0 to 3.02 s.
        assert!((m.duration_s - 3.02).abs() < 1e-9, "{}", m.duration_s);
        assert_eq!(
            m.run.started_at.as_deref(),
            Some("2026-12-03T10:00:00.000000Z")
        );
    }

    #[test]
    fn rows_without_histograms_fall_back_to_the_worst_of() {
        let a = report(T0, &[&[100; 10]]);
        let mut b = report(T0, &[&[900; 10]]);
        b.timeseries_histograms.clear();
        let m = Report::merge(&[a, b]).expect("merges");
        assert_eq!(m.timeseries[0].p50_us, 900);
        assert!(m.timeseries_histograms.is_empty());
        assert!(m.extra.contains_key("timeseries_percentiles"));
    }
}
