//! Clocks and CPU accounting: `CLOCK_MONOTONIC` (shared by every process
//! on the host, so sender and receiver timestamps compare directly) and
//! thread CPU time from xload-sys, timer slack, per-CPU times from `/proc/stat`.

pub use xload_sys::clock::{monotonic_ns, thread_cpu_ns};

/// Lets short sleeps end on time (default slack is 50 µs); affects only
/// the calling thread.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// Use of one CPU between two samples, in percent of that CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CpuUsage {
    pub cpu: usize,
    /// Not idle and not stolen: user, system, irq and softirq.
    pub busy_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub softirq_pct: f64,
}

/// `/proc/stat`'s CPU lines and when they were read.
#[derive(Debug, Clone)]
pub struct CpuSample {
    pub at: std::time::Instant,
    pub cpus: Vec<xload_probe::CpuTimes>,
}

impl Default for CpuSample {
    fn default() -> Self {
        CpuSample {
            at: std::time::Instant::now(),
            cpus: Vec::new(),
        }
    }
}

/// Reads `/proc/stat` (no CPUs if it cannot be read).
pub fn sample_cpus() -> CpuSample {
    let at = std::time::Instant::now();
    let cpus = std::fs::read_to_string("/proc/stat")
        .ok()
        .and_then(|t| xload_probe::parse::parse_stat(&t).ok())
        .unwrap_or_default();
    CpuSample { at, cpus }
}

/// Usage of the listed CPUs between two samples, over the time between them
/// (busy = the window less idle, iowait and steal, as the probe counts it:
/// scheduler ticks alone miss busy time on a CPU that sleeps and wakes often).
pub fn cpu_usage(before: &CpuSample, after: &CpuSample, cpus: &[usize]) -> Vec<CpuUsage> {
    let wall_s = after.at.saturating_duration_since(before.at).as_secs_f64();
    let wall_ticks = wall_s * xload_probe::ticks_per_s() as f64;
    xload_probe::cpu_usage_over(&before.cpus, &after.cpus, Some(wall_ticks))
        .into_iter()
        .filter(|u| cpus.contains(&u.cpu))
        .map(|u| CpuUsage {
            cpu: u.cpu,
            busy_pct: u.busy,
            user_pct: u.usr + u.nice,
            system_pct: u.sys + u.irq,
            softirq_pct: u.softirq,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_usage_is_over_the_window_between_samples() {
        let times = |cpu, user, system, idle, softirq| xload_probe::CpuTimes {
            cpu,
            user,
            system,
            idle,
            softirq,
            ..Default::default()
        };
        let t0 = std::time::Instant::now();
        let before = CpuSample {
            at: t0,
            cpus: vec![times(0, 5, 5, 40, 0), times(1, 5, 5, 40, 0)],
        };
        // Half a second: 50 ticks per CPU.
        let after = CpuSample {
            at: t0 + std::time::Duration::from_millis(500),
            cpus: vec![times(0, 30, 10, 50, 5), times(1, 5, 5, 90, 0)],
        };
        let u = cpu_usage(&before, &after, &[0, 1, 7]);
        assert_eq!(u.len(), 2);
        // cpu0: 10 idle ticks of 50: 80% busy, split 25:5:5 by its ticks.
        assert!((u[0].busy_pct - 80.0).abs() < 1e-9, "{u:?}");
        assert!((u[0].user_pct - 57.1).abs() < 1e-9, "{u:?}");
        assert!((u[0].softirq_pct - 11.4).abs() < 1e-9, "{u:?}");
        assert!((u[1].busy_pct - 0.0).abs() < 1e-9);
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000);
    }
}
