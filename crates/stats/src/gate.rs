//! Gates on a report: `p99>50ms`, `errors>0`, `error_rate>0.01`, `rps<1e5`.
//! The same condition fails a run (`--fail-if`: the run fails when it
//! holds) or states a service level (`--slo`: met when it holds). A gate
//! that cannot read its value fails either way.

use std::fmt;

use crate::knee::KEPT_UP;
use crate::report::Report;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    P50,
    P90,
    P99,
    P999,
    /// Any other percentile (`p95`, `p99.99`), in thousandths of a percent,
    /// read from the histogram.
    Pct(u32),
    Max,
    Mean,
    Errors,
    ErrorRate,
    Rps,
    /// Responses with a status outside 2xx/3xx.
    Non2xx,
    /// Those as a fraction of responses.
    Non2xxRate,
    /// Workload runs: responses that failed a check.
    Consistency,
    /// Workload runs: class latency limits that failed.
    LimitsFailed,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Op {
    Gt,
    Ge,
    Lt,
    Le,
}

/// One threshold. Latency values are in microseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct Gate {
    /// The expression as given, for messages.
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    pub value: f64,
}

impl Metric {
    /// Whether the value is a latency (given with a unit, in µs here).
    pub fn is_latency(self) -> bool {
        matches!(
            self,
            Metric::P50
                | Metric::P90
                | Metric::P99
                | Metric::P999
                | Metric::Pct(_)
                | Metric::Max
                | Metric::Mean
        )
    }

    /// The metric a name denotes (case-insensitive).
    pub fn from_name(name: &str) -> Result<Metric, String> {
        Ok(match name.to_ascii_lowercase().as_str() {
            "p50" => Metric::P50,
            "p90" => Metric::P90,
            "p99" => Metric::P99,
            "p999" | "p99.9" => Metric::P999,
            "max" => Metric::Max,
            "mean" | "avg" => Metric::Mean,
            "errors" => Metric::Errors,
            "error_rate" => Metric::ErrorRate,
            "rps" => Metric::Rps,
            "non2xx" => Metric::Non2xx,
            "non2xx_rate" => Metric::Non2xxRate,
            "consistency" => Metric::Consistency,
            "limits_failed" => Metric::LimitsFailed,
            other => match percentile(other) {
                Some(milli) => Metric::Pct(milli),
                None => return Err(format!(
                    "unknown metric {other:?} (use p50, p90, p99, p999 or any pNN such as p95 or p99.99, max, mean, errors, error_rate, non2xx, non2xx_rate, rps, consistency, limits_failed)"
                )),
            },
        })
    }
}

/// `p95` → 95000, `p99.99` → 99990: a percentile strictly between 0 and
/// 100, in thousandths of a percent.
fn percentile(name: &str) -> Option<u32> {
    let n = name.strip_prefix('p')?;
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    let v: f64 = n.parse().ok()?;
    let milli = (v * 1000.0).round();
    (v > 0.0 && v < 100.0 && (milli - v * 1000.0).abs() < 1e-6).then_some(milli as u32)
}

/// A gate expression taken apart: `p99 > 50ms` → (P99, Gt, "50ms"),
/// whitespace ignored. The value is left to the caller, which reads
/// durations and counts the way the rest of its command line does.
pub fn split_gate(expr: &str) -> Result<(Metric, Op, String), String> {
    let t: String = expr.chars().filter(|c| !c.is_whitespace()).collect();
    let (pos, op, len) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
        .iter()
        .find_map(|(sym, op)| t.find(sym).map(|p| (p, *op, sym.len())))
        .ok_or("expected METRIC>VALUE or METRIC<VALUE, e.g. 'p99>50ms'")?;
    let metric = Metric::from_name(&t[..pos])?;
    Ok((metric, op, t[pos + len..].to_string()))
}

impl Gate {
    /// The measured value this gate looks at.
    pub fn measure(&self, r: &Report) -> f64 {
        let l = &r.latency_us;
        match self.metric {
            Metric::P50 => l.p50 as f64,
            Metric::P90 => l.p90 as f64,
            Metric::P99 => l.p99 as f64,
            Metric::P999 => l.p999 as f64,
            Metric::Pct(m) => r.latency_histogram().ok().map_or(f64::NAN, |h| {
                if h.is_empty() {
                    0.0
                } else {
                    h.value_at_quantile(f64::from(m) / 100_000.0) as f64
                }
            }),
            Metric::Max => l.max as f64,
            Metric::Mean => l.mean,
            Metric::Errors => r.errors_total as f64,
            Metric::ErrorRate => {
                let total = r.requests.saturating_add(r.errors_total);
                if total == 0 {
                    0.0
                } else {
                    r.errors_total as f64 / total as f64
                }
            }
            Metric::Rps => r.rps,
            Metric::Non2xx => r.non_2xx_3xx() as f64,
            Metric::Non2xxRate => {
                if r.requests == 0 {
                    0.0
                } else {
                    r.non_2xx_3xx() as f64 / r.requests as f64
                }
            }
            Metric::Consistency => r.errors.get("consistency").copied().unwrap_or(0) as f64,
            Metric::LimitsFailed => r
                .classes
                .iter()
                .flat_map(|c| &c.limits)
                .filter(|l| !l.pass)
                .count() as f64,
        }
    }

    /// Whether the condition holds; None when the value cannot be read
    /// (a report without a readable histogram).
    fn compare(&self, r: &Report) -> Option<bool> {
        let v = self.measure(r);
        if v.is_nan() {
            return None;
        }
        Some(match self.op {
            Op::Gt => v > self.value,
            Op::Ge => v >= self.value,
            Op::Lt => v < self.value,
            Op::Le => v <= self.value,
        })
    }

    /// Whether the condition holds (the run fails). A value that cannot be
    /// read fails the gate: a gate that cannot look must not pass.
    pub fn violated(&self, r: &Report) -> bool {
        self.compare(r).unwrap_or(true)
    }

    /// Whether the condition holds: for `--fail-if` that is a failure, for an
    /// SLO (`p99<10ms`) that is the requirement being met.
    pub fn holds(&self, r: &Report) -> bool {
        self.compare(r).unwrap_or(false)
    }

    /// `threshold failed: p99>50ms (measured 61.2ms)`.
    pub fn explain(&self, r: &Report) -> String {
        let v = self.measure(r);
        let shown = if v.is_nan() {
            "nothing: the report's histogram cannot be read".to_string()
        } else if self.metric.is_latency() {
            fmt_us(v)
        } else if matches!(self.metric, Metric::ErrorRate | Metric::Non2xxRate) {
            format!("{v:.4}")
        } else {
            format!("{v:.0}")
        };
        format!("threshold failed: {} (measured {shown})", self.text)
    }
}

fn fmt_us(us: f64) -> String {
    xload_sys::fmt::fmt_us(us, xload_sys::fmt::UsStyle::TwoDecimals)
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// Whether a run at `rate` (open loop) meets the service level `slo`: no
/// errors, at least [`KEPT_UP`] of the rate achieved, every gate holding;
/// with the reason, either way.
pub fn meets_slo(r: &Report, rate: f64, slo: &[Gate]) -> (bool, String) {
    if r.errors_total > 0 {
        return (false, format!("{} errors", r.errors_total));
    }
    if r.rps < KEPT_UP * rate {
        return (
            false,
            format!("achieved {:.0} req/s < 97% of target", r.rps),
        );
    }
    match slo.iter().find(|g| !g.holds(r)) {
        Some(g) => (false, format!("{} not met", g.text)),
        None => (true, "meets the SLO".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gate `expr`, whose value (after the operator) is `value`.
    fn gate(expr: &str, value: f64) -> Gate {
        let (metric, op, _) = split_gate(expr).expect("a gate");
        Gate {
            text: expr.to_string(),
            metric,
            op,
            value,
        }
    }

    #[test]
    fn expressions_split_into_metric_operator_and_value() {
        assert_eq!(
            split_gate(" p99 >= 50 ms").unwrap(),
            (Metric::P99, Op::Ge, "50ms".to_string())
        );
        assert_eq!(split_gate("P99.99<1s").unwrap().0, Metric::Pct(99_990));
        assert_eq!(split_gate("avg<=1ms").unwrap().0, Metric::Mean);
        assert!(split_gate("p99").unwrap_err().contains("expected"));
        assert!(split_gate("q42>1ms")
            .unwrap_err()
            .contains("unknown metric"));
    }

    #[test]
    fn non2xx_gates_count_answers_outside_2xx_and_3xx() {
        let mut r = Report::default();
        for (code, n) in [("200", 70), ("304", 10), ("404", 15), ("503", 5)] {
            r.status.insert(code.into(), n);
        }
        r.requests = 100;
        let g = gate("non2xx>19", 19.0);
        assert_eq!(g.measure(&r), 20.0);
        assert!(g.violated(&r));
        let g = gate("non2xx_rate>0.2", 0.2);
        assert!((g.measure(&r) - 0.2).abs() < 1e-12);
        assert!(!g.violated(&r), "0.2 is not above 0.2");
        assert_eq!(
            gate("errors>0", 0.0).measure(&r),
            0.0,
            "answers are not errors"
        );
    }

    #[test]
    fn workload_gates_count_consistency_errors_and_failed_limits() {
        let mut r = Report::default();
        r.errors.insert("consistency".into(), 3);
        let mut class = crate::ClassReport::default();
        let mut bad = crate::ClassLimit::new("p99", 10);
        bad.pass = false;
        let mut good = crate::ClassLimit::new("mean", 10);
        good.pass = true;
        class.limits = vec![bad, good];
        r.classes.push(class);
        assert_eq!(gate("consistency>0", 0.0).measure(&r), 3.0);
        assert_eq!(gate("limits_failed>0", 0.0).measure(&r), 1.0);
        assert!(gate("limits_failed>0", 0.0).violated(&r));
        assert_eq!(gate("consistency>0", 0.0).measure(&Report::default()), 0.0);
    }

    #[test]
    fn a_percentile_that_cannot_be_read_fails_the_gate_and_the_slo() {
        let r = Report {
            histogram: "not a histogram".into(),
            ..Default::default()
        };
        let g = gate("p95>1s", 1e6);
        assert!(g.violated(&r), "a gate that cannot look must not pass");
        let slo = gate("p95<1s", 1e6);
        assert!(!slo.holds(&r), "nor an SLO be met");
        assert!(
            g.explain(&r).contains("cannot be read"),
            "{}",
            g.explain(&r)
        );
    }

    #[test]
    fn a_trial_meets_the_slo_only_without_errors_and_at_its_rate() {
        let r = Report {
            rps: 980.0,
            ..Default::default()
        };
        let slo = [gate("rps>900", 900.0)];
        assert_eq!(meets_slo(&r, 1000.0, &slo), (true, "meets the SLO".into()));
        let (ok, why) = meets_slo(&r, 1020.0, &slo);
        assert!(!ok && why.contains("< 97% of target"), "{why}");
        let (ok, why) = meets_slo(&r, 1000.0, &[gate("rps>990", 990.0)]);
        assert!(!ok && why == "rps>990 not met", "{why}");
        let errors = Report {
            errors_total: 2,
            ..r
        };
        assert_eq!(meets_slo(&errors, 1000.0, &slo), (false, "2 errors".into()));
    }
}
