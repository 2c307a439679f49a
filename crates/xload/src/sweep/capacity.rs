//! `xload sweep -w FILE --sessions A..B --find-max`: the compliant capacity
//! of seed 004 (SPECweb) — the highest session count at which every check
//! passes, every class meets its limits and the curve holds steady over the
//! measured window. Coarse steps up through the levels given, bisection
//! between the last compliant and the first failing step, then a repeat at
//! the value found to confirm it.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Value};
use xload_stats::gate::Gate;
use xload_stats::knee::Mode;
use xload_stats::{IntervalRow, Report};

use super::{bisect, fmt_us, run_steps, Sink, Steps, SweepArgs, SweepResult};
use crate::Failure;

/// How the measured window moved: the first third of the per-second series
/// against the last third.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Drift {
    pub rps_first: f64,
    pub rps_last: f64,
    pub p99_first_us: u64,
    pub p99_last_us: u64,
    /// Rate fell by more than the allowed fraction, or p99 rose by more than
    /// the allowed factor (and by 1 ms at least: microseconds of noise on a
    /// fast answer are no trend).
    pub unstable: bool,
}

impl Drift {
    fn to_json(self) -> Value {
        json!({ "rps_first": self.rps_first, "rps_last": self.rps_last,
                "p99_first_us": self.p99_first_us, "p99_last_us": self.p99_last_us,
                "unstable": self.unstable })
    }
}

/// The drift of a step from its per-second rows; `None` below three rows
/// (no thirds to compare). Rate: the mean of each third's rows; p99: the
/// median of each third's per-second p99 (one bad second is not a trend).
pub(crate) fn drift(rows: &[IntervalRow], max_fall: f64, p99_factor: f64) -> Option<Drift> {
    let third = rows.len() / 3;
    if third == 0 {
        return None;
    }
    let (first, last) = (&rows[..third], &rows[rows.len() - third..]);
    let rps = |r: &[IntervalRow]| r.iter().map(|x| x.rps).sum::<f64>() / r.len() as f64;
    let p99 = |r: &[IntervalRow]| {
        let mut v: Vec<u64> = r
            .iter()
            .filter(|x| x.requests > 0)
            .map(|x| x.p99_us)
            .collect();
        v.sort_unstable();
        v.get(v.len() / 2).copied().unwrap_or(0)
    };
    let (rps_first, rps_last) = (rps(first), rps(last));
    let (p99_first_us, p99_last_us) = (p99(first), p99(last));
    let falling = rps_last < rps_first * (1.0 - max_fall);
    let rising =
        p99_last_us as f64 > p99_first_us as f64 * p99_factor && p99_last_us > p99_first_us + 1000;
    Some(Drift {
        rps_first,
        rps_last,
        p99_first_us,
        p99_last_us,
        unstable: falling || rising,
    })
}

/// Whether a step is compliant, why (every reason it is not), and its drift.
pub(crate) struct Verdict {
    pub pass: bool,
    pub why: String,
    pub drift: Option<Drift>,
}

/// Judges a step: answers came, no error of any kind (a failed check voids
/// the step, as does a timeout), every class limit and `--slo` gate holds,
/// and the window shows no drift.
pub(crate) fn judge(r: &Report, slo: &[Gate], drift_of: Option<Drift>) -> Verdict {
    let mut why = Vec::new();
    if r.requests == 0 {
        why.push("no response".to_string());
    }
    let consistency = r.errors.get("consistency").copied().unwrap_or(0);
    if consistency > 0 {
        let first = r
            .classes
            .iter()
            .find_map(|c| {
                c.offending
                    .first()
                    .map(|o| format!("{} {}", c.name, o.path))
            })
            .unwrap_or_default();
        why.push(format!("{consistency} consistency errors (first: {first})"));
    }
    let others = r.errors_total.saturating_sub(consistency);
    if others > 0 {
        let mut kinds: Vec<String> = r
            .errors
            .iter()
            .filter(|(k, _)| k.as_str() != "consistency")
            .map(|(k, n)| format!("{k} {n}"))
            .collect();
        kinds.sort();
        why.push(format!("{others} errors ({})", kinds.join(", ")));
    }
    for c in &r.classes {
        for l in c.limits.iter().filter(|l| !l.pass) {
            why.push(format!(
                "class {}: {} {} > {}",
                c.name,
                l.name,
                fmt_us(l.measured_us),
                fmt_us(l.limit_us)
            ));
        }
    }
    for g in slo.iter().filter(|g| !g.holds(r)) {
        why.push(format!("{} not met", g.text));
    }
    if let Some(d) = drift_of.filter(|d| d.unstable) {
        why.push(format!(
            "unstable: rate {:.0}→{:.0}/s, p99 {}→{} over the window",
            d.rps_first,
            d.rps_last,
            fmt_us(d.p99_first_us),
            fmt_us(d.p99_last_us)
        ));
    }
    Verdict {
        pass: why.is_empty(),
        why: if why.is_empty() {
            "compliant".into()
        } else {
            why.join("; ")
        },
        drift: drift_of,
    }
}

/// The search's state: the steps run (in run order), one JSON row per
/// step, and the counts that passed and were not refuted by a repeat.
struct Search<'a> {
    url: &'a str,
    s: &'a SweepArgs,
    slo: &'a [Gate],
    out: Sink,
    stop: &'a Arc<AtomicBool>,
    steps: Vec<(f64, Report)>,
    trials: Vec<Value>,
    passed: Vec<f64>,
}

impl Search<'_> {
    /// Runs one step of `n` sessions, prints its classes and verdict under
    /// the table's row, records it; `None` when interrupted.
    fn trial(&mut self, n: f64, repeat: bool) -> Result<Option<bool>, Failure> {
        let steps_of = Steps {
            mode: Mode::Sessions,
            levels: &[n],
            fixed_conns: 0,
            cooldown: self.s.cooldown,
            header: self.steps.is_empty(),
        };
        let (mut st, intr) = run_steps(self.url, &self.s.common, steps_of, self.out, self.stop)?;
        let Some((_, r)) = st.pop() else {
            return Ok(None);
        };
        let d = drift(&r.timeseries, self.s.drift_rps, self.s.drift_p99);
        let v = judge(&r, self.slo, d);
        self.print(&r, &v, repeat);
        let warmup = self.s.common.warmup.unwrap_or(Duration::from_secs(1));
        let classes: Vec<Value> = r
            .classes
            .iter()
            .map(|c| {
                json!({ "name": c.name, "rps": c.rps, "mean_us": c.latency_us.mean,
                        "p99_us": c.latency_us.p99, "consistency_errors": c.consistency_errors,
                        "limits_pass": c.limits.iter().all(|l| l.pass) })
            })
            .collect();
        self.trials.push(json!({
            "sessions": n as u64, "repeat": repeat, "pass": v.pass, "why": v.why,
            "rps": r.rps, "p99_us": r.latency_us.p99, "errors": r.errors_total,
            "consistency_errors": r.errors.get("consistency").copied().unwrap_or(0),
            "classes": classes, "drift": v.drift.map(Drift::to_json),
            "warmup_s": warmup.as_secs_f64(), "duration_s": r.duration_s,
        }));
        self.steps.push((n, r));
        if v.pass {
            self.passed.push(n);
        }
        Ok(if intr { None } else { Some(v.pass) })
    }

    /// The lines under a step's row: each class, then drift and verdict.
    fn print(&self, r: &Report, v: &Verdict, repeat: bool) {
        for c in &r.classes {
            let limits = if c.limits.is_empty() {
                "no limits"
            } else if c.limits.iter().all(|l| l.pass) {
                "limits ok"
            } else {
                "limits FAIL"
            };
            self.out.line(&format!(
                "{:>10} class {}: mean {} p99 {} {limits}, consistency errors {}",
                "",
                c.name,
                fmt_us(c.latency_us.mean.round() as u64),
                fmt_us(c.latency_us.p99),
                c.consistency_errors
            ));
        }
        let drift = match v.drift {
            Some(d) => format!(
                "drift rate {:.0}→{:.0}/s p99 {}→{} ({})",
                d.rps_first,
                d.rps_last,
                fmt_us(d.p99_first_us),
                fmt_us(d.p99_last_us),
                if d.unstable { "unstable" } else { "stable" }
            ),
            None => "drift not judged (under 3 s measured)".into(),
        };
        let verdict = if v.pass { "PASS" } else { "FAIL" };
        let repeat = if repeat { " (repeat)" } else { "" };
        self.out
            .line(&format!("{:>10} {drift}; {verdict}{repeat}: {}", "", v.why));
    }

    /// The highest count that passed and was not refuted, below `below`.
    fn best_below(&self, below: f64) -> Option<f64> {
        self.passed
            .iter()
            .copied()
            .filter(|&x| x < below)
            .fold(None, |m, x| Some(m.map_or(x, |m: f64| m.max(x))))
    }
}

/// What the search concluded: the count found (if any), the failing count
/// above it (if any), whether a repeat confirmed it, whether interrupted.
struct Found {
    lo: Option<f64>,
    hi: Option<f64>,
    confirmed: bool,
    interrupted: bool,
}

/// Coarse steps up until one fails, bisection below it, and a repeat at the
/// value found; a repeat that fails refutes the value (it becomes the new
/// top) and the search goes on below it, three confirmations at most.
fn search(x: &mut Search<'_>, levels: &[f64]) -> Result<Found, Failure> {
    let mut f = Found {
        lo: None,
        hi: None,
        confirmed: false,
        interrupted: false,
    };
    for &n in levels {
        match x.trial(n, false)? {
            None => {
                f.interrupted = true;
                return Ok(f);
            }
            Some(true) => f.lo = Some(n),
            Some(false) => {
                f.hi = Some(n);
                break;
            }
        }
    }
    for _ in 0..3 {
        let Some(lo) = f.lo else { break };
        if let Some(hi) = f.hi {
            let s = x.s;
            let ((l, h), intr) = bisect((lo, hi), s.tolerance, s.max_trials, true, |mid| {
                x.trial(mid, false)
            })?;
            (f.lo, f.hi, f.interrupted) = (Some(l), Some(h), intr);
            if intr {
                return Ok(f);
            }
        }
        let lo = f.lo.unwrap_or(lo);
        match x.trial(lo, true)? {
            None => {
                f.interrupted = true;
                return Ok(f);
            }
            Some(true) => {
                f.confirmed = true;
                return Ok(f);
            }
            Some(false) => {
                x.passed.retain(|&p| p < lo);
                f.hi = Some(lo);
                f.lo = x.best_below(lo);
            }
        }
    }
    Ok(f)
}

/// The search's one-line conclusion.
fn summary(f: &Found, levels: &[f64], trials: &[Value]) -> String {
    let last_why = |n: f64| {
        trials
            .iter()
            .rev()
            .find(|t| t["sessions"].as_f64() == Some(n))
            .and_then(|t| t["why"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let first = levels.first().copied().unwrap_or(0.0);
    match (f.lo, f.hi, f.confirmed) {
        (_, _, _) if f.interrupted => "max compliant sessions: search interrupted".into(),
        (Some(lo), None, true) => format!(
            "max compliant sessions: at least {lo:.0} (the top of the range, confirmed by a repeat): raise the upper bound"
        ),
        (Some(lo), Some(hi), true) => format!(
            "max compliant sessions: {lo:.0} (confirmed by a repeat; {hi:.0} fails: {})",
            last_why(hi)
        ),
        (None, Some(hi), _) if hi <= first => format!(
            "max compliant sessions: none — even {hi:.0} sessions fail: {}",
            last_why(hi)
        ),
        _ => format!(
            "max compliant sessions: not confirmed — every repeat failed (last: {})",
            f.hi.map(last_why).unwrap_or_default()
        ),
    }
}

/// `xload sweep -w FILE --sessions LEVELS --find-max`; true when a
/// compliant count was found and confirmed.
pub(crate) fn find_max_sessions(
    url: &str,
    s: &SweepArgs,
    slo: &[Gate],
    levels: &[f64],
    out: Sink,
    stop: &Arc<AtomicBool>,
) -> Result<(SweepResult, bool), Failure> {
    let mut x = Search {
        url,
        s,
        slo,
        out,
        stop,
        steps: Vec::new(),
        trials: Vec::new(),
        passed: Vec::new(),
    };
    let f = search(&mut x, levels)?;
    let summary = summary(&f, levels, &x.trials);
    let ok = f.confirmed && !f.interrupted;
    let found = json!({
        "sessions": f.lo.filter(|_| ok).map(|n| n as u64),
        "confirmed": ok,
        "bracket": [f.lo.map(|n| n as u64), f.hi.map(|n| n as u64)],
        "trials": x.trials,
        "summary": summary,
    });
    let mut steps = x.steps;
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let found_step =
        f.lo.filter(|_| ok)
            .and_then(|n| steps.iter().position(|(l, _)| *l == n));
    Ok((
        SweepResult {
            mode: Mode::Sessions,
            steps,
            knee: None,
            found: Some(found),
            found_step,
            interrupted: f.interrupted,
        },
        ok,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(v: &[(f64, u64)]) -> Vec<IntervalRow> {
        v.iter()
            .enumerate()
            .map(|(i, &(rps, p99_us))| IntervalRow {
                second: i as u64 + 1,
                requests: rps as u64,
                rps,
                p50_us: p99_us / 2,
                p99_us,
                errors: 0,
            })
            .collect()
    }

    #[test]
    fn drift_compares_the_first_and_last_thirds() {
        let steady = rows(&[(1000.0, 5000), (990.0, 5200), (1010.0, 4900)]);
        let d = drift(&steady, 0.10, 2.0).unwrap();
        assert!(!d.unstable, "{d:?}");
        assert_eq!((d.rps_first, d.rps_last), (1000.0, 1010.0));
        // Rate falling by 20% over the window.
        let falling = rows(&[(1000.0, 5000), (900.0, 5000), (800.0, 5000)]);
        assert!(drift(&falling, 0.10, 2.0).unwrap().unstable);
        // p99 rising 4×.
        let rising = rows(&[
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 9000),
            (1000.0, 20_000),
            (1000.0, 20_000),
            (1000.0, 21_000),
        ]);
        let d = drift(&rising, 0.10, 2.0).unwrap();
        assert!(d.unstable && d.p99_last_us == 21_000, "{d:?}");
        // One bad second in a third of three is not the third's median.
        let spike = rows(&[
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 5000),
            (1000.0, 90_000),
            (1000.0, 5000),
        ]);
        assert!(!drift(&spike, 0.10, 2.0).unwrap().unstable);
        // Microseconds doubling are noise, not drift.
        let fast = rows(&[(1000.0, 100), (1000.0, 150), (1000.0, 300)]);
        assert!(!drift(&fast, 0.10, 2.0).unwrap().unstable);
        assert_eq!(drift(&steady[..2], 0.10, 2.0), None);
    }

    #[test]
    fn a_step_fails_on_errors_limits_and_drift_and_says_why() {
        let mut r = Report {
            requests: 100,
            ..Default::default()
        };
        let v = judge(&r, &[], None);
        assert!(v.pass && v.why == "compliant", "{}", v.why);
        r.errors.insert("consistency".into(), 2);
        r.errors.insert("timeout".into(), 1);
        r.errors_total = 3;
        let mut class = xload_stats::ClassReport {
            name: "file".into(),
            offending: vec![xload_stats::Offender {
                path: "/f1".into(),
                reason: "body SHA-256 differs".into(),
            }],
            ..Default::default()
        };
        let mut l = xload_stats::ClassLimit::new("mean", 10_000);
        l.measured_us = 12_000;
        class.limits = vec![l];
        r.classes.push(class);
        let unstable = Drift {
            rps_first: 1000.0,
            rps_last: 700.0,
            p99_first_us: 5000,
            p99_last_us: 5000,
            unstable: true,
        };
        let v = judge(&r, &[], Some(unstable));
        assert!(!v.pass);
        for part in [
            "2 consistency errors (first: file /f1)",
            "1 errors (timeout 1)",
            "class file: mean 12.0ms > 10.0ms",
            "unstable: rate 1000→700/s",
        ] {
            assert!(v.why.contains(part), "{part:?} in {}", v.why);
        }
    }
}
