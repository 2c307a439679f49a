//! `--fail-if` (and `--slo`) expressions read from the command line:
//! `p99>50ms`, `errors>0`, `error_rate>0.01`, `rps<1e5`. Parsed before the
//! run (a bad expression is a usage error, exit 2); what a gate means and
//! how it judges a report is [`xload_stats::gate`].

use xload_stats::gate::{split_gate, Gate};

use crate::args::{parse_count_f64, parse_duration};

/// Parses one `--fail-if` expression.
pub(crate) fn parse_gate(s: &str) -> Result<Gate, String> {
    let (metric, op, value) = split_gate(s).map_err(|e| format!("--fail-if {s:?}: {e}"))?;
    let value = if metric.is_latency() {
        if value.chars().all(|c| c.is_ascii_digit() || c == '.') {
            return Err(format!(
                "--fail-if {s:?}: a latency needs a unit, e.g. 50ms"
            ));
        }
        parse_duration(&value)
            .map_err(|e| format!("--fail-if {s:?}: {e}"))?
            .as_secs_f64()
            * 1e6
    } else {
        parse_count_f64(&value).map_err(|e| format!("--fail-if {s:?}: {e}"))?
    };
    Ok(Gate {
        text: s.trim().to_string(),
        metric,
        op,
        value,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use xload_stats::gate::{Metric, Op};

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
    fn rejects_bad_gates_with_reasons() {
        assert!(parse_gate("p99").unwrap_err().contains("expected"));
        assert!(parse_gate("q42>1ms")
            .unwrap_err()
            .contains("unknown metric"));
        assert!(parse_gate("p99>50").unwrap_err().contains("unit"));
        assert!(parse_gate("rps<lots").is_err());
    }
}
