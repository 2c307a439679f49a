//! `--fail-if` (and `--slo`) expressions read from the command line:
//! `p99>50ms`, `errors>0`, `error_rate>0.01`, `rps<1e5`. Parsed before the
//! run (a bad expression is a usage error, exit 2); what a gate means and
//! how it judges a report is [`xload_stats::gate`].

use xload_stats::gate::{split_gate, Gate, Op};

use crate::args::{parse_count_f64, parse_duration, CommonArgs};
use crate::Failure;

/// Every gate of a run or sweep: its `--fail-if` conditions and its
/// `--threshold` pass conditions, turned into the failing condition.
pub(crate) fn parse_gates(a: &CommonArgs) -> Result<Vec<Gate>, Failure> {
    let fail_if = a.fail_if.iter().map(|g| parse_gate(g));
    let thresholds = a.threshold.iter().map(|t| parse_threshold(t));
    fail_if
        .chain(thresholds)
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)
}

/// Parses one `--threshold` (k6 style: the condition a passing run meets)
/// into the gate that fails the run when it does not hold: `p99<50ms`
/// becomes `p99>=50ms`. A value that cannot be read fails it either way.
pub(crate) fn parse_threshold(s: &str) -> Result<Gate, String> {
    let mut g = parse_gate(s).map_err(|e| e.replacen("--fail-if", "--threshold", 1))?;
    g.op = match g.op {
        Op::Lt => Op::Ge,
        Op::Le => Op::Gt,
        Op::Gt => Op::Le,
        Op::Ge => Op::Lt,
    };
    g.text = format!("{} not met", g.text);
    Ok(g)
}

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
    use xload_stats::gate::Metric;

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

    #[test]
    fn a_threshold_fails_when_its_condition_does_not_hold() {
        let t = parse_threshold("p99<50ms").unwrap();
        assert_eq!((t.metric, t.op, t.value), (Metric::P99, Op::Ge, 50_000.0));
        assert_eq!(t.text, "p99<50ms not met");
        for (expr, op) in [
            ("rps>=1e5", Op::Lt),
            ("errors<=0", Op::Gt),
            ("error_rate>0.5", Op::Le),
        ] {
            assert_eq!(parse_threshold(expr).unwrap().op, op, "{expr}");
        }
        let e = parse_threshold("p99<50").unwrap_err();
        assert!(e.starts_with("--threshold") && e.contains("unit"), "{e}");
    }
}
