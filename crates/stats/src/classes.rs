//! Per-class figures of a workload run: each worker counts its classes'
//! responses, latency and consistency errors; reports carry them per class
//! (histogram included), merge them exactly and judge each class's latency
//! limits from the merged histogram.

use std::fmt;

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::error::{add_to, ReportError};
use crate::hist::{
    add_into, decode_histogram, encode_histogram, new_latency_histogram, LatencySummary,
};

/// As the report's: an empty string when the histogram cannot be encoded.
fn histogram_string(h: &Histogram<u64>) -> String {
    encode_histogram(h).unwrap_or_default()
}

fn per_second(count: u64, seconds: f64) -> f64 {
    if seconds > 0.0 && seconds.is_finite() {
        count as f64 / seconds
    } else {
        0.0
    }
}

/// Offending paths kept per class (the first ones seen, each once).
pub const MAX_OFFENDERS: usize = 5;

/// What one worker recorded for one class.
#[derive(Clone, Debug)]
pub struct ClassStats {
    pub name: String,
    latency_us: Histogram<u64>,
    requests: u64,
    consistency: u64,
    capture_failures: u64,
    session_restarts: u64,
    offenders: Vec<Offender>,
}

/// A response that failed its class's checks: its path and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Offender {
    pub path: String,
    pub reason: String,
}

impl ClassStats {
    pub fn new(name: &str) -> ClassStats {
        ClassStats {
            name: name.to_string(),
            latency_us: new_latency_histogram(),
            requests: 0,
            consistency: 0,
            capture_failures: 0,
            session_restarts: 0,
            offenders: Vec::new(),
        }
    }

    #[inline]
    pub(crate) fn record(&mut self, latency_us: u64) {
        self.latency_us.saturating_record(latency_us);
        self.requests += 1;
    }

    /// Rare path: allocates only for the first few offending paths.
    pub(crate) fn record_consistency(&mut self, path: &str, reason: &dyn fmt::Display) {
        self.consistency += 1;
        add_offender(&mut self.offenders, path, || reason.to_string());
    }

    pub(crate) fn record_capture_failure(&mut self) {
        self.capture_failures += 1;
    }

    pub(crate) fn record_session_restart(&mut self) {
        self.session_restarts += 1;
    }

    pub(crate) fn reset(&mut self) {
        self.latency_us.reset();
        self.requests = 0;
        self.consistency = 0;
        self.capture_failures = 0;
        self.session_restarts = 0;
        self.offenders.clear();
    }

    pub(crate) fn merge(&mut self, o: &ClassStats) {
        add_into(&mut self.latency_us, &o.latency_us);
        self.requests += o.requests;
        self.consistency += o.consistency;
        self.capture_failures += o.capture_failures;
        self.session_restarts += o.session_restarts;
        for off in &o.offenders {
            add_offender(&mut self.offenders, &off.path, || off.reason.clone());
        }
    }

    /// Responses of this class.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Responses of this class that failed a check.
    pub fn consistency_errors(&self) -> u64 {
        self.consistency
    }

    /// Responses of this class in which a capture found nothing (each is
    /// also a consistency error).
    pub fn capture_failures(&self) -> u64 {
        self.capture_failures
    }

    /// Sessions that started over after a failed response of this class
    /// (or because this class needed a value no earlier response gave).
    pub fn session_restarts(&self) -> u64 {
        self.session_restarts
    }

    pub fn offenders(&self) -> &[Offender] {
        &self.offenders
    }

    pub fn latency_histogram(&self) -> &Histogram<u64> {
        &self.latency_us
    }
}

fn add_offender(list: &mut Vec<Offender>, path: &str, reason: impl FnOnce() -> String) {
    if list.len() < MAX_OFFENDERS && !list.iter().any(|o| o.path == path) {
        list.push(Offender {
            path: path.to_string(),
            reason: reason(),
        });
    }
}

/// Merges `from` into `into` by class name (classes new to `into` are appended).
pub(crate) fn merge_stats(into: &mut Vec<ClassStats>, from: &[ClassStats]) {
    for c in from {
        match into.iter_mut().find(|m| m.name == c.name) {
            Some(m) => m.merge(c),
            None => into.push(c.clone()),
        }
    }
}

/// One class in a report (JSON `classes[]`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassReport {
    pub name: String,
    pub requests: u64,
    pub rps: f64,
    /// Responses that failed a check.
    pub consistency_errors: u64,
    /// Of those, responses in which a capture found nothing.
    #[serde(default)]
    pub capture_failures: u64,
    /// Sessions that started over after a failed response of this class.
    #[serde(default)]
    pub session_restarts: u64,
    /// The first offending paths, with the reason.
    #[serde(default)]
    pub offending: Vec<Offender>,
    pub latency_us: LatencySummary,
    /// This class's latency histogram (HdrHistogram V2, base64).
    pub histogram: String,
    /// The class's latency limits and how it did.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<ClassLimit>,
}

/// A latency limit of a class: `mean` or `pNN` (NN % of the class's
/// requests within `limit_us`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClassLimit {
    pub name: String,
    pub limit_us: u64,
    pub measured_us: u64,
    pub pass: bool,
}

impl ClassLimit {
    /// A limit named `mean` or `pNN`, not yet judged.
    pub fn new(name: &str, limit_us: u64) -> ClassLimit {
        ClassLimit {
            name: name.to_string(),
            limit_us,
            measured_us: 0,
            pass: false,
        }
    }

    /// Judges the limit against a histogram; a class with no response fails.
    pub fn judge(&mut self, h: &Histogram<u64>) {
        self.measured_us = if h.is_empty() {
            0
        } else if self.name == "mean" {
            h.mean().round() as u64
        } else {
            let share = self
                .name
                .strip_prefix('p')
                .and_then(|p| p.parse::<f64>().ok());
            h.value_at_quantile(share.unwrap_or(100.0) / 100.0)
        };
        self.pass = !h.is_empty() && self.measured_us <= self.limit_us;
    }
}

impl ClassReport {
    pub(crate) fn build(c: &ClassStats, duration_s: f64) -> ClassReport {
        ClassReport {
            name: c.name.clone(),
            requests: c.requests,
            rps: per_second(c.requests, duration_s),
            consistency_errors: c.consistency,
            capture_failures: c.capture_failures,
            session_restarts: c.session_restarts,
            offending: c.offenders.clone(),
            latency_us: LatencySummary::from_histogram(&c.latency_us),
            histogram: histogram_string(&c.latency_us),
            limits: Vec::new(),
        }
    }

    /// Sets the class's limits and judges them from its histogram.
    pub fn set_limits(&mut self, limits: Vec<ClassLimit>) -> Result<(), ReportError> {
        self.limits = limits;
        self.judge()
    }

    fn judge(&mut self) -> Result<(), ReportError> {
        if self.limits.is_empty() {
            return Ok(());
        }
        let h = decode_histogram(&self.histogram)?;
        for l in &mut self.limits {
            l.judge(&h);
        }
        Ok(())
    }

    /// Whether every limit holds and no response failed a check.
    pub fn compliant(&self) -> bool {
        self.consistency_errors == 0 && self.limits.iter().all(|l| l.pass)
    }
}

/// Merges the classes of several reports exactly, by name: counts add,
/// histograms add, offenders are the first few of all, limits are judged
/// again from the merged histogram (the first report's limits per class).
pub(crate) fn merge_reports<'a>(
    classes: impl Iterator<Item = &'a [ClassReport]>,
    duration_s: f64,
) -> Result<Vec<ClassReport>, ReportError> {
    let mut out: Vec<(ClassReport, Histogram<u64>)> = Vec::new();
    for list in classes {
        for c in list {
            let h = decode_histogram(&c.histogram)?;
            match out.iter_mut().find(|(m, _)| m.name == c.name) {
                Some((m, acc)) => {
                    let field = |key: &str| format!("classes.{}.{key}", c.name);
                    add_to(&mut m.requests, c.requests, &field("requests"))?;
                    add_to(
                        &mut m.consistency_errors,
                        c.consistency_errors,
                        &field("consistency_errors"),
                    )?;
                    add_to(
                        &mut m.capture_failures,
                        c.capture_failures,
                        &field("capture_failures"),
                    )?;
                    add_to(
                        &mut m.session_restarts,
                        c.session_restarts,
                        &field("session_restarts"),
                    )?;
                    for o in &c.offending {
                        add_offender(&mut m.offending, &o.path, || o.reason.clone());
                    }
                    add_into(acc, &h);
                }
                None => out.push((c.clone(), h)),
            }
        }
    }
    Ok(out
        .into_iter()
        .map(|(mut c, h)| {
            c.rps = per_second(c.requests, duration_s);
            c.latency_us = LatencySummary::from_histogram(&h);
            c.histogram = histogram_string(&h);
            for l in &mut c.limits {
                l.judge(&h);
            }
            c
        })
        .collect())
}

/// The text report's per-class table, its limit verdicts and offenders.
pub(crate) fn render_text(classes: &[ClassReport], out: &mut String) {
    use std::fmt::Write as _;
    use xload_sys::fmt::{fmt_count, fmt_duration_us, fmt_rate};
    if classes.is_empty() {
        return;
    }
    let w = classes
        .iter()
        .map(|c| c.name.len())
        .max()
        .unwrap_or(0)
        .max(5);
    let _ = writeln!(
        out,
        "  Classes     {:<w$}  {:>10}  {:>10}  {:>9}  {:>9}  {:>9}  {:>11}",
        "class", "responses", "req/s", "mean", "p50", "p99", "consistency"
    );
    for c in classes {
        let l = &c.latency_us;
        let _ = writeln!(
            out,
            "              {:<w$}  {:>10}  {:>10}  {:>9}  {:>9}  {:>9}  {:>11}",
            c.name,
            fmt_count(c.requests),
            fmt_rate(c.rps),
            fmt_duration_us(l.mean),
            fmt_duration_us(l.p50 as f64),
            fmt_duration_us(l.p99 as f64),
            fmt_count(c.consistency_errors),
        );
    }
    for c in classes.iter().filter(|c| !c.limits.is_empty()) {
        let verdicts: Vec<String> = c
            .limits
            .iter()
            .map(|l| {
                let (measured, limit) = (
                    fmt_duration_us(l.measured_us as f64),
                    fmt_duration_us(l.limit_us as f64),
                );
                let (op, mark) = if l.pass { ("<=", "ok") } else { (">", "FAIL") };
                format!("{} {measured} {op} {limit} {mark}", l.name)
            })
            .collect();
        let _ = writeln!(out, "  Limits      {}: {}", c.name, verdicts.join(", "));
    }
    for c in classes
        .iter()
        .filter(|c| c.capture_failures > 0 || c.session_restarts > 0)
    {
        let _ = writeln!(
            out,
            "  Sessions    {}: {} capture failures, {} session restarts",
            c.name,
            fmt_count(c.capture_failures),
            fmt_count(c.session_restarts),
        );
    }
    for c in classes.iter().filter(|c| c.consistency_errors > 0) {
        let paths: Vec<String> = c
            .offending
            .iter()
            .map(|o| format!("{} ({})", o.path, o.reason))
            .collect();
        let _ = writeln!(
            out,
            "  Consistency {}: {} failed checks, first: {}",
            c.name,
            fmt_count(c.consistency_errors),
            paths.join(", ")
        );
    }
}

/// The per-class summary as CSV: header
/// `class,requests,rps,mean_us,p50_us,p99_us,consistency_errors,limits_pass`.
pub fn classes_csv(classes: &[ClassReport]) -> String {
    let mut s =
        String::from("class,requests,rps,mean_us,p50_us,p99_us,consistency_errors,limits_pass\n");
    for c in classes {
        let l = &c.latency_us;
        s.push_str(&format!(
            "{},{},{:.1},{:.0},{},{},{},{}\n",
            c.name,
            c.requests,
            c.rps,
            l.mean,
            l.p50,
            l.p99,
            c.consistency_errors,
            c.limits.iter().all(|l| l.pass)
        ));
    }
    s
}
