//! The procedure of seed 004 over any way of running a step: up through the
//! levels until one fails, bisection between the last that passed and the
//! first that failed (as `xload sweep --find-max`), then repeats of the
//! highest passing level; a repeat that fails moves the maximum down to the
//! next passing level, which is confirmed in turn.

use std::sync::atomic::{AtomicBool, Ordering};

use xload_stats::knee::{find_knee_in, Mode, Point};

use super::plan::{Plan, Stepped};
use super::report::{CapacityReport, Maximum, Step};
use crate::Failure;

/// Runs a step at a level (the confirmation number: 0 for a step).
pub(crate) type RunStep<'a> = dyn FnMut(f64, usize) -> Result<Step, Failure> + 'a;

/// Runs the procedure, filling `report.steps`, `knee` and `maximum`.
pub(crate) fn run(
    plan: &Plan,
    stop: &AtomicBool,
    report: &mut CapacityReport,
    step: &mut RunStep,
) -> Result<(), Failure> {
    let stopped = || stop.load(Ordering::Relaxed);
    let mut record = |report: &mut CapacityReport, level: f64, k: usize| -> Result<bool, Failure> {
        if !report.steps.is_empty() {
            std::thread::sleep(plan.cooldown);
        }
        let st = step(level, k)?;
        let pass = st.pass;
        report.steps.push(st);
        Ok(pass)
    };
    for &level in &plan.levels {
        if stopped() {
            break;
        }
        if !record(report, level, 0)? {
            break;
        }
    }
    let best = |r: &CapacityReport| {
        r.steps
            .iter()
            .filter(|s| s.pass && s.confirmation == 0)
            .map(|s| s.level)
            .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.max(l))))
    };
    let lowest_failing = |r: &CapacityReport| {
        r.steps
            .iter()
            .filter(|s| !s.pass)
            .map(|s| s.level)
            .fold(None, |m: Option<f64>, l| Some(m.map_or(l, |m| m.min(l))))
    };
    if let (Some(lo), Some(hi)) = (best(report), lowest_failing(report)) {
        if plan.max_trials > 0 && !stopped() {
            let whole = plan.stepped != Stepped::Rate;
            crate::sweep::bisect((lo, hi), plan.tolerance, plan.max_trials, whole, |mid| {
                if stopped() {
                    return Ok(None);
                }
                record(report, mid, 0).map(Some)
            })?;
        }
    }
    report.knee = knee(plan, &report.steps);
    // The highest passing level, confirmed by repeats.
    let mut candidates: Vec<f64> = report
        .steps
        .iter()
        .filter(|s| s.pass)
        .map(|s| s.level)
        .collect();
    candidates.sort_by(f64::total_cmp);
    candidates.dedup();
    while let Some(level) = candidates.pop() {
        let mut confirmed = true;
        for k in 1..=plan.confirmations {
            if stopped() {
                confirmed = false;
                break;
            }
            if !record(report, level, k)? {
                confirmed = false;
                break;
            }
        }
        if !confirmed && !candidates.is_empty() && !stopped() {
            continue; // this level failed a repeat: the one below
        }
        report.maximum = Some(maximum(report, level, confirmed));
        break;
    }
    if stopped() {
        report
            .notes
            .push("interrupted by the user: the steps after it were not run".into());
    }
    Ok(())
}

/// The maximum at `level`: its runs' lowest throughput and highest p99, and
/// the server's verdict at the lowest level that failed (at the maximum
/// itself when every level passed).
fn maximum(report: &CapacityReport, level: f64, confirmed: bool) -> Maximum {
    let runs: Vec<&Step> = report.steps.iter().filter(|s| s.level == level).collect();
    let limit = report
        .steps
        .iter()
        .filter(|s| !s.pass && s.level >= level)
        .min_by(|a, b| a.level.total_cmp(&b.level))
        .or_else(|| runs.first().copied());
    Maximum {
        level,
        rps: runs.iter().map(|s| s.rps).fold(f64::INFINITY, f64::min),
        p99_us: runs.iter().map(|s| s.p99_us).max().unwrap_or(0),
        confirmed,
        runs: runs.len(),
        bottleneck: limit.map(|s| s.verdict.text.clone()).unwrap_or_default(),
    }
}

/// The knee over the steps (not the repeats), in level order; an index in `steps`.
fn knee(plan: &Plan, steps: &[Step]) -> Option<usize> {
    let mut order: Vec<usize> = (0..steps.len())
        .filter(|&i| steps[i].confirmation == 0)
        .collect();
    order.sort_by(|&a, &b| steps[a].level.total_cmp(&steps[b].level));
    let points: Vec<Point> = order
        .iter()
        .map(|&i| Point {
            load: steps[i].level,
            rps: steps[i].rps,
            p99_us: steps[i].p99_us as f64,
        })
        .collect();
    let mode = match plan.stepped {
        Stepped::Connections => Mode::Concurrency,
        Stepped::Rate => Mode::Rate,
        Stepped::Sessions => Mode::Sessions,
    };
    find_knee_in(&points, mode, 0.10, 1.5).map(|k| order[k])
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::super::evidence::{Evidence, Limit, ServerVerdict};
    use super::super::report::SCHEMA;
    use super::*;

    fn plan(levels: &str, more: &str) -> Plan {
        let src = format!(
            "target = \"http://127.0.0.1:1/\"\n[server]\nhost = \"s\"\n[procedure]\nlevels = {levels}\ncooldown = \"0s\"\n{more}"
        );
        super::super::plan::parse(&src, "p.toml", Path::new(".")).unwrap()
    }

    fn empty() -> CapacityReport {
        CapacityReport {
            schema: SCHEMA.into(),
            plan: String::new(),
            target: String::new(),
            stepped: "connections".into(),
            started_at: String::new(),
            command: Vec::new(),
            drift: Vec::new(),
            tuning: Vec::new(),
            steps: Vec::new(),
            knee: None,
            maximum: None,
            notes: Vec::new(),
        }
    }

    /// A server that holds up to `cap` and fails above; `flaky` levels fail
    /// their repeats.
    fn server<'a>(
        cap: f64,
        flaky: &'static [f64],
        log: &'a mut Vec<(f64, usize)>,
    ) -> impl FnMut(f64, usize) -> Result<Step, Failure> + 'a {
        move |level, k| {
            log.push((level, k));
            let pass = level <= cap && !(k > 0 && flaky.contains(&level));
            Ok(Step {
                level,
                confirmation: k,
                rps: level.min(cap) * 10.0,
                p50_us: 100,
                p99_us: if pass { 1000 } else { 90_000 },
                requests: 1,
                errors: u64::from(!pass),
                pass,
                why: String::new(),
                window_start_us: 0,
                window_s: 1.0,
                clients: Vec::new(),
                server: Evidence::default(),
                verdict: ServerVerdict {
                    limit: if pass {
                        Limit::None
                    } else {
                        Limit::ListenQueue
                    },
                    text: format!("at {level}"),
                    change: String::new(),
                    cpu: None,
                },
                command: String::new(),
            })
        }
    }

    #[test]
    fn bisection_narrows_to_the_capacity_then_repeats_confirm_it() {
        let p = plan(
            "[10, 100, 1000]",
            "tolerance = 0.05\nmax_trials = 8\nconfirmations = 2\n",
        );
        let (mut r, mut log) = (empty(), Vec::new());
        run(
            &p,
            &AtomicBool::new(false),
            &mut r,
            &mut server(300.0, &[], &mut log),
        )
        .unwrap();
        let m = r.maximum.as_ref().unwrap();
        assert!(
            m.level <= 300.0 && m.level >= 300.0 * 0.95,
            "{m:?} after {log:?}"
        );
        assert!(m.confirmed);
        assert_eq!(m.runs, 3);
        // The coarse steps, then bisection, then the two repeats at the maximum.
        assert_eq!(&log[..3], &[(10.0, 0), (100.0, 0), (1000.0, 0)]);
        assert_eq!(&log[log.len() - 2..], &[(m.level, 1), (m.level, 2)]);
        assert!(log.len() - 5 <= 8, "at most max_trials bisections: {log:?}");
        // The bottleneck is the verdict just above the maximum.
        let above = r
            .steps
            .iter()
            .filter(|s| !s.pass)
            .map(|s| s.level)
            .fold(f64::INFINITY, f64::min);
        assert_eq!(m.bottleneck, format!("at {above}"));
        assert!(above - m.level <= 0.05 * above + 1.0);
    }

    #[test]
    fn a_failed_repeat_moves_the_maximum_down() {
        let p = plan("[10, 20, 40]", "max_trials = 0\nconfirmations = 2\n");
        let (mut r, mut log) = (empty(), Vec::new());
        run(
            &p,
            &AtomicBool::new(false),
            &mut r,
            &mut server(30.0, &[20.0], &mut log),
        )
        .unwrap();
        assert_eq!(
            log,
            vec![
                (10.0, 0),
                (20.0, 0),
                (40.0, 0),
                (20.0, 1),
                (10.0, 1),
                (10.0, 2)
            ]
        );
        let m = r.maximum.unwrap();
        assert_eq!((m.level, m.confirmed, m.runs), (10.0, true, 3));
        assert_eq!(
            m.bottleneck, "at 20",
            "the repeat that failed is the nearest failure"
        );
    }

    #[test]
    fn every_level_passing_confirms_the_top_and_nothing_passing_has_no_maximum() {
        let p = plan("[10, 20]", "confirmations = 1\n");
        let (mut r, mut log) = (empty(), Vec::new());
        run(
            &p,
            &AtomicBool::new(false),
            &mut r,
            &mut server(1e9, &[], &mut log),
        )
        .unwrap();
        assert_eq!(log, vec![(10.0, 0), (20.0, 0), (20.0, 1)]);
        assert_eq!(r.maximum.unwrap().bottleneck, "at 20");
        let (mut r, mut log) = (empty(), Vec::new());
        run(
            &p,
            &AtomicBool::new(false),
            &mut r,
            &mut server(1.0, &[], &mut log),
        )
        .unwrap();
        assert_eq!(log, vec![(10.0, 0)]);
        assert!(r.maximum.is_none());
    }

    #[test]
    fn a_stop_ends_the_procedure_and_says_so() {
        let p = plan("[10, 20, 40]", "");
        let stop = AtomicBool::new(true);
        let (mut r, mut log) = (empty(), Vec::new());
        run(&p, &stop, &mut r, &mut server(30.0, &[], &mut log)).unwrap();
        assert!(log.is_empty() && r.maximum.is_none());
        assert!(r.notes[0].contains("interrupted"));
    }
}
