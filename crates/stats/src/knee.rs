//! The knee of a sweep and the operating range below it: where throughput
//! stops rising while p99 takes off, read off the measured steps alone.

use serde::Serialize;

/// Whether steps vary concurrency, rate or workload sessions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Concurrency,
    Rate,
    /// Workload sessions (each a connection with think time): a closed
    /// loop, analysed as concurrency is.
    Sessions,
}

impl Mode {
    /// The JSON key of a step's load: "concurrency" or "rate".
    pub fn key(self) -> &'static str {
        match self {
            Mode::Concurrency => "concurrency",
            Mode::Rate => "rate",
            Mode::Sessions => "sessions",
        }
    }
}

/// One measured step, reduced to what the analysis needs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Point {
    /// Connections, or the target rate in requests per second.
    pub load: f64,
    /// Achieved requests per second.
    pub rps: f64,
    pub p99_us: f64,
}

/// A rate step kept up when it achieved this share of its target (as
/// `--find-max` judges a trial).
pub const KEPT_UP: f64 = 0.97;

/// The knee of a sweep in `mode`. Concurrency: [`find_knee`]. Rate: the
/// first step that could not keep up with its target (achieved under 97%
/// of it: the server's capacity, where throughput stops following the
/// load), when no later step keeps up with its own (one that does shows
/// the first was disturbed, not saturated). In a rate sweep
/// throughput follows the targets, so the gain rule would read any sweep of
/// fine steps as flat, and a p99 that moves by noise as a knee.
pub fn find_knee_in(points: &[Point], mode: Mode, min_gain: f64, p99_factor: f64) -> Option<usize> {
    match mode {
        Mode::Concurrency | Mode::Sessions => find_knee(points, min_gain, p99_factor),
        Mode::Rate => {
            let kept = |p: &Point| p.rps >= KEPT_UP * p.load;
            (0..points.len()).find(|&k| !kept(&points[k]) && !points[k + 1..].iter().any(kept))
        }
    }
}

/// The knee: index of the first step after which RPS grows by less than
/// `min_gain` while p99 grows by more than `p99_factor`, and no later step
/// beats its RPS by `min_gain` or more (a dip from a disturbed step — a VM
/// whose CPU was stolen for a moment — is not a knee when the load that
/// follows still raises throughput).
pub fn find_knee(points: &[Point], min_gain: f64, p99_factor: f64) -> Option<usize> {
    (1..points.len()).find_map(|k| {
        let (a, b) = (points[k - 1], points[k]);
        let gain = b.rps / a.rps.max(1e-9) - 1.0;
        let growth = b.p99_us / a.p99_us.max(1.0);
        // Measured against the better of the two steps, not the one before
        // the flattening alone: a step that gained 9% and later ones 1% more
        // is a plateau.
        let later_best = points[k + 1..].iter().map(|p| p.rps).fold(0.0, f64::max);
        let still_rising = later_best >= a.rps.max(b.rps) * (1.0 + min_gain);
        (gain < min_gain && growth > p99_factor && !still_rising).then_some(k - 1)
    })
}

/// The steps up to the knee, by load.
fn curve_to(points: &[Point], knee: usize) -> Vec<Point> {
    let mut curve: Vec<Point> = points[..=knee].to_vec();
    curve.sort_by(|a, b| a.load.total_cmp(&b.load));
    curve
}

/// The throughput the curve up to the knee gives at `load` (linear between
/// steps, from zero below the first one; the knee's beyond it). A whole
/// connection count rounded into the recommended range can fall outside it
/// (one connection already giving 80% of the knee): this says what it gives.
pub fn curve_rps_at(points: &[Point], knee: usize, load: f64) -> f64 {
    let mut prev = (0.0, 0.0);
    for p in curve_to(points, knee) {
        if load <= p.load {
            let span = p.load - prev.0;
            let f = if span > 0.0 {
                (load - prev.0) / span
            } else {
                1.0
            };
            return prev.1 + f.clamp(0.0, 1.0) * (p.rps - prev.1);
        }
        prev = (p.load, p.rps);
    }
    points[knee].rps
}

/// When no whole connection count lands in the recommended range (one
/// connection already gives more than 70% of the knee), a note that says
/// what the count named gives.
pub fn range_note(points: &[Point], knee: usize, key: &str) -> Option<String> {
    let [(low, _), (_, rps_high)] = recommended(points, knee, Mode::Concurrency);
    let gives = curve_rps_at(points, knee, low);
    (gives > rps_high * (1.0 + 1e-9)).then(|| {
        format!(
            "note: no whole {key} count lands in that range: {key} {low:.0}, the least in it, already gives \
             {gives:.0} req/s ({:.0}% of the knee) on the measured curve",
            100.0 * gives / points[knee].rps.max(1e-9)
        )
    })
}

/// The recommended operating range: 50–70% of the knee's throughput, and the
/// loads that measured it on this sweep's own curve (linear between steps,
/// from zero below the first one). The loads are not 50–70% of the knee's
/// load: in a closed loop throughput stops growing with concurrency well
/// before the knee's concurrency, so half the concurrency gives far more
/// than half the throughput.
pub fn recommended(points: &[Point], knee: usize, mode: Mode) -> [(f64, f64); 2] {
    let curve = curve_to(points, knee);
    let k = points[knee];
    let load_for = |target: f64| {
        let mut prev = Point {
            load: 0.0,
            rps: 0.0,
            p99_us: 0.0,
        };
        for p in &curve {
            if p.rps >= target {
                let span = p.rps - prev.rps;
                let f = if span > 0.0 {
                    (target - prev.rps) / span
                } else {
                    1.0
                };
                return prev.load + f.clamp(0.0, 1.0) * (p.load - prev.load);
            }
            prev = *p;
        }
        k.load
    };
    let (lo, hi) = (load_for(k.rps * 0.5), load_for(k.rps * 0.7));
    let (lo, hi) = match mode {
        // Whole connections inside the range: the low end up, the high end
        // down (never past 70%), at least one, and never crossed.
        Mode::Concurrency | Mode::Sessions => {
            let lo = lo.ceil().max(1.0);
            (lo, hi.floor().max(lo))
        }
        Mode::Rate => (lo.max(1.0), hi.max(1.0)),
    };
    [(lo, k.rps * 0.5), (hi, k.rps * 0.7)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pts(v: &[(f64, f64, f64)]) -> Vec<Point> {
        v.iter()
            .map(|&(load, rps, p99_us)| Point { load, rps, p99_us })
            .collect()
    }

    #[test]
    fn knee_is_where_throughput_flattens_and_p99_takes_off() {
        // A pool of 8 slots, 10 ms each: 800 req/s at most.
        let p = pts(&[
            (1.0, 100.0, 10_000.0),
            (2.0, 200.0, 10_000.0),
            (4.0, 400.0, 10_000.0),
            (8.0, 800.0, 10_500.0),
            (16.0, 800.0, 20_000.0),
            (32.0, 800.0, 40_000.0),
        ]);
        assert_eq!(find_knee(&p, 0.10, 1.5), Some(3));
    }

    #[test]
    fn the_recommended_range_is_read_off_the_measured_curve() {
        // Throughput saturates long before the knee's concurrency (64): 50–70%
        // of its 200k is reached at 4–7 connections, not at 32–45.
        let p = pts(&[
            (1.0, 30_000.0, 40.0),
            (2.0, 60_000.0, 40.0),
            (4.0, 110_000.0, 45.0),
            (8.0, 160_000.0, 60.0),
            (16.0, 180_000.0, 100.0),
            (32.0, 190_000.0, 190.0),
            (64.0, 200_000.0, 350.0),
        ]);
        let [(lo, lo_rps), (hi, hi_rps)] = recommended(&p, 6, Mode::Concurrency);
        assert_eq!((lo_rps, hi_rps), (100_000.0, 140_000.0));
        // 100k between 2 (60k) and 4 (110k): 3.6, up to 4; 140k between 4
        // and 8: 6.4, down to 6 (7 would be past 70%).
        assert_eq!((lo, hi), (4.0, 6.0));
        // What those loads give on the curve: inside the range.
        assert_eq!(curve_rps_at(&p, 6, 4.0), 110_000.0);
        assert_eq!(curve_rps_at(&p, 6, 6.0), 135_000.0);
        // One connection already gives 80% of the knee: the range's whole
        // count is 1 and the curve says it gives more than 70%.
        let one = pts(&[
            (1.0, 80_000.0, 40.0),
            (2.0, 95_000.0, 60.0),
            (4.0, 100_000.0, 200.0),
        ]);
        let [(lo, _), (hi, _)] = recommended(&one, 2, Mode::Concurrency);
        assert_eq!((lo, hi), (1.0, 1.0));
        assert_eq!(curve_rps_at(&one, 2, 1.0), 80_000.0);
        assert_eq!(curve_rps_at(&one, 2, 0.5), 40_000.0);
        let note = range_note(&one, 2, "concurrency").expect("a note");
        assert!(
            note.contains(
                "concurrency 1, the least in it, already gives 80000 req/s (80% of the knee)"
            ),
            "{note}"
        );
        assert_eq!(range_note(&p, 6, "concurrency"), None);
        // Below the first step: from zero. Rates are not rounded.
        let r = pts(&[
            (1000.0, 1000.0, 100.0),
            (2000.0, 1990.0, 120.0),
            (4000.0, 2100.0, 900.0),
        ]);
        let [(lo, _), (hi, _)] = recommended(&r, 1, Mode::Rate);
        assert!((lo - 995.0).abs() < 1e-6, "{lo}");
        // 0.7 × 1990 = 1393, between 1000 (1000) and 2000 (1990).
        assert!(
            (hi - (1000.0 + 393.0 / 990.0 * 1000.0)).abs() < 1e-6,
            "{hi}"
        );
    }

    #[test]
    fn a_dip_followed_by_higher_throughput_is_not_the_knee() {
        // A step disturbed by a stolen CPU (2 → 3.6k) while the load that
        // follows still raises throughput up to 93k: the knee is at the plateau.
        let p = pts(&[
            (1.0, 18_434.0, 178.0),
            (2.0, 3_653.0, 3_600.0),
            (4.0, 3_741.0, 7_690.0),
            (8.0, 20_333.0, 6_640.0),
            (16.0, 57_645.0, 6_260.0),
            (32.0, 93_577.0, 3_430.0),
            (64.0, 91_712.0, 6_310.0),
        ]);
        assert_eq!(find_knee(&p, 0.10, 1.5), Some(5));
    }

    #[test]
    fn a_rate_sweep_has_its_knee_at_the_first_step_that_falls_behind() {
        // Fine steps, each kept up, p99 moving by noise: no knee.
        let fine = pts(&[
            (1900.0, 1_900.0, 100.0),
            (1995.0, 1_995.0, 160.0),
            (2095.0, 2_094.0, 170.0),
        ]);
        assert_eq!(find_knee_in(&fine, Mode::Rate, 0.10, 1.5), None);
        // 9500/s got 7660: the knee, at the server's capacity.
        let p = pts(&[
            (2000.0, 2_000.0, 900.0),
            (7000.0, 7_000.0, 1_300.0),
            (9500.0, 7_660.0, 118_600.0),
            (12000.0, 7_720.0, 160_000.0),
        ]);
        assert_eq!(find_knee_in(&p, Mode::Rate, 0.10, 1.5), Some(2));
        // A step that fell behind once, then the next kept up: disturbed.
        let d = pts(&[
            (1000.0, 1_000.0, 100.0),
            (2000.0, 1_500.0, 9_000.0),
            (3000.0, 3_000.0, 120.0),
        ]);
        assert_eq!(find_knee_in(&d, Mode::Rate, 0.10, 1.5), None);
        // The lowest step already behind: it is the knee.
        let first = pts(&[(5000.0, 3_000.0, 9_000.0), (6000.0, 3_010.0, 9_500.0)]);
        assert_eq!(find_knee_in(&first, Mode::Rate, 0.10, 1.5), Some(0));
    }

    #[test]
    fn a_plateau_that_creeps_up_keeps_its_knee() {
        // 7000 → 7660 (+9%, p99 ×90) → 7720: the later 1% is no rise; the
        // knee is 7000 (it was put at 7660, an overloaded step, because
        // 7720 beat 7000 by 10%).
        let p = pts(&[
            (2000.0, 2_000.0, 900.0),
            (4500.0, 4_500.0, 1_000.0),
            (7000.0, 7_000.0, 1_300.0),
            (9500.0, 7_660.0, 118_600.0),
            (12000.0, 7_720.0, 160_000.0),
        ]);
        assert_eq!(find_knee(&p, 0.10, 1.5), Some(2));
        // Throughput that collapses past the knee and recovers part of it.
        let p = pts(&[
            (1.0, 50_000.0, 100.0),
            (2.0, 100_000.0, 110.0),
            (4.0, 80_000.0, 900.0),
            (8.0, 90_000.0, 1_800.0),
        ]);
        assert_eq!(find_knee(&p, 0.10, 1.5), Some(1));
    }

    #[test]
    fn no_knee_while_throughput_rises() {
        let p = pts(&[
            (1.0, 100.0, 100.0),
            (2.0, 200.0, 300.0),
            (4.0, 390.0, 900.0),
        ]);
        assert_eq!(find_knee(&p, 0.10, 1.5), None);
    }
}
