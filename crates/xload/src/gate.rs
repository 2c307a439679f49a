//! `--fail-if` thresholds: `p99>50ms`, `errors>0`, `error_rate>0.01`,
//! `rps<1e5`. Parsed before the run (a bad expression is a usage error, exit 2),
//! evaluated on the report after it (any violation: exit 3).

use std::fmt;

use xload_stats::Report;

use crate::args::{parse_count_f64, parse_duration};

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
    pub text: String,
    pub metric: Metric,
    pub op: Op,
    pub value: f64,
}

impl Metric {
    fn is_latency(self) -> bool {
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

/// Parses one `--fail-if` expression.
pub fn parse_gate(s: &str) -> Result<Gate, String> {
    let t: String = s.chars().filter(|c| !c.is_whitespace()).collect();
    let (pos, op, len) = [(">=", Op::Ge), ("<=", Op::Le), (">", Op::Gt), ("<", Op::Lt)]
        .iter()
        .find_map(|(sym, op)| t.find(sym).map(|p| (p, *op, sym.len())))
        .ok_or_else(|| {
            format!("--fail-if {s:?}: expected METRIC>VALUE or METRIC<VALUE, e.g. 'p99>50ms'")
        })?;
    let (name, value) = (&t[..pos], &t[pos + len..]);
    let metric = match name.to_ascii_lowercase().as_str() {
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
        other if percentile(other).is_some() => Metric::Pct(percentile(other).unwrap_or(0)),
        other => {
            return Err(format!(
                "--fail-if {s:?}: unknown metric {other:?} (use p50, p90, p99, p999 or any pNN such as p95 or p99.99, max, mean, errors, error_rate, non2xx, non2xx_rate, rps)"
            ))
        }
    };
    let value = if metric.is_latency() {
        if value.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!(
                "--fail-if {s:?}: a latency needs a unit, e.g. 50ms"
            ));
        }
        parse_duration(value)
            .map_err(|e| format!("--fail-if {s:?}: {e}"))?
            .as_secs_f64()
            * 1e6
    } else {
        parse_count_f64(value).map_err(|e| format!("--fail-if {s:?}: {e}"))?
    };
    Ok(Gate {
        text: s.trim().to_string(),
        metric,
        op,
        value,
    })
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
                let total = r.requests + r.errors_total;
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
    if us >= 1e6 {
        format!("{:.2}s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.2}ms", us / 1e3)
    } else {
        format!("{us:.0}µs")
    }
}

impl fmt::Display for Gate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Gate {
    /// Whether the condition holds: for `--fail-if` that is a failure, for an
    /// SLO (`p99<10ms`) that is the requirement being met.
    pub fn holds(&self, r: &Report) -> bool {
        self.compare(r).unwrap_or(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_latency_count_and_rate_gates() {
        let g = parse_gate("p95>2ms").unwrap();
        assert_eq!((g.metric, g.value), (Metric::Pct(95_000), 2_000.0));
        assert_eq!(parse_gate("p99.99>1s").unwrap().metric, Metric::Pct(99_990));
        for bad in ["p100>1ms", "p0>1ms", "p>1ms", "p9x>1ms", "p99.99999>1ms"] {
            assert!(
                parse_gate(bad).unwrap_err().contains("unknown metric"),
                "{bad}"
            );
        }
        let g = parse_gate("p99 > 50ms").unwrap();
        assert_eq!((g.metric, g.op, g.value), (Metric::P99, Op::Gt, 50_000.0));
        let g = parse_gate("errors>0").unwrap();
        assert_eq!((g.metric, g.op, g.value), (Metric::Errors, Op::Gt, 0.0));
        let g = parse_gate("rps<1e5").unwrap();
        assert_eq!((g.metric, g.op, g.value), (Metric::Rps, Op::Lt, 100_000.0));
        let g = parse_gate("error_rate>=0.01").unwrap();
        assert_eq!((g.metric, g.op, g.value), (Metric::ErrorRate, Op::Ge, 0.01));
        let g = parse_gate("non2xx>0").unwrap();
        assert_eq!((g.metric, g.op, g.value), (Metric::Non2xx, Op::Gt, 0.0));
        let g = parse_gate("non2xx_rate>0.001").unwrap();
        assert_eq!(
            (g.metric, g.op, g.value),
            (Metric::Non2xxRate, Op::Gt, 0.001)
        );
    }

    #[test]
    fn non2xx_gates_count_answers_outside_2xx_and_3xx() {
        let mut r = Report::default();
        for (code, n) in [("200", 70), ("304", 10), ("404", 15), ("503", 5)] {
            r.status.insert(code.into(), n);
        }
        r.requests = 100;
        let g = parse_gate("non2xx>19").unwrap();
        assert_eq!(g.measure(&r), 20.0);
        assert!(g.violated(&r));
        let g = parse_gate("non2xx_rate>0.2").unwrap();
        assert!((g.measure(&r) - 0.2).abs() < 1e-12);
        assert!(!g.violated(&r), "0.2 is not above 0.2");
        assert_eq!(
            parse_gate("errors>0").unwrap().measure(&r),
            0.0,
            "answers are not errors"
        );
    }

    #[test]
    fn a_percentile_that_cannot_be_read_fails_the_gate_and_the_slo() {
        let r = Report {
            histogram: "not a histogram".into(),
            ..Default::default()
        };
        let g = parse_gate("p95>1s").unwrap();
        assert!(g.violated(&r), "a gate that cannot look must not pass");
        let slo = parse_gate("p95<1s").unwrap();
        assert!(!slo.holds(&r), "nor an SLO be met");
        assert!(
            g.explain(&r).contains("cannot be read"),
            "{}",
            g.explain(&r)
        );
    }

    #[test]
    fn rejects_bad_gates_with_reasons() {
        assert!(parse_gate("p99").unwrap_err().contains("expected"));
        assert!(parse_gate("q42>1ms")
            .unwrap_err()
            .contains("unknown metric"));
        assert!(parse_gate("p99>50").unwrap_err().contains("unit"));
        assert!(parse_gate("rps<lots").is_err());
    }
}
