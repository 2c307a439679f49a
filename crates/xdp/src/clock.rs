//! Clocks and CPU accounting: `CLOCK_MONOTONIC` (shared by every process
//! on the host, so sender and receiver timestamps compare directly), thread
//! CPU time, per-CPU times from `/proc/stat`, and pinning.

use std::io;

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid timespec; clock_gettime only writes it.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// `CLOCK_MONOTONIC` in nanoseconds (the timestamp carried in frames).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Pins the calling thread to `cpu`.
pub fn pin_to_cpu(cpu: usize) -> io::Result<()> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "CPU index too large",
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: cpu < CPU_SETSIZE, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: set is a valid cpu_set_t of the size passed; 0 = this thread.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if r < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(())
    }
}

/// CPUs the process may run on, in ascending order.
pub fn allowed_cpus() -> Vec<usize> {
    // SAFETY: as in pin_to_cpu.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: set is valid for writes of its size.
    let r = unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if r < 0 {
        return vec![0];
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: index below CPU_SETSIZE.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Lets short sleeps end on time (default slack is 50 µs); affects only
/// the calling thread.
pub fn tighten_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes a plain integer argument.
    unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong) };
}

/// Jiffies of one CPU from `/proc/stat`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CpuTimes {
    pub user: u64,
    pub system: u64,
    pub idle: u64,
    pub irq: u64,
    pub softirq: u64,
    pub other: u64,
}

impl CpuTimes {
    fn total(&self) -> u64 {
        self.user + self.system + self.idle + self.irq + self.softirq + self.other
    }
}

/// Use of one CPU between two samples, in percent of that CPU.
#[derive(Debug, Clone, Copy, Default, PartialEq, serde::Serialize)]
pub struct CpuUsage {
    pub cpu: usize,
    pub busy_pct: f64,
    pub user_pct: f64,
    pub system_pct: f64,
    pub softirq_pct: f64,
}

/// Parses the `cpuN` lines of `/proc/stat`; malformed lines are skipped.
pub fn parse_proc_stat(text: &str) -> Vec<(usize, CpuTimes)> {
    let mut out = Vec::new();
    for line in text.lines() {
        let mut it = line.split_ascii_whitespace();
        let Some(name) = it.next() else { continue };
        let Some(idx) = name
            .strip_prefix("cpu")
            .and_then(|n| n.parse::<usize>().ok())
        else {
            continue;
        };
        let v: Vec<u64> = it.map_while(|x| x.parse().ok()).collect();
        if v.len() < 7 {
            continue;
        }
        // user nice system idle iowait irq softirq steal ...
        out.push((
            idx,
            CpuTimes {
                user: v[0] + v[1],
                system: v[2],
                idle: v[3] + v[4],
                irq: v[5],
                softirq: v[6],
                other: v.get(7).copied().unwrap_or(0),
            },
        ));
    }
    out
}

/// Reads `/proc/stat`.
pub fn sample_cpus() -> Vec<(usize, CpuTimes)> {
    std::fs::read_to_string("/proc/stat")
        .map(|t| parse_proc_stat(&t))
        .unwrap_or_default()
}

/// Usage of the listed CPUs between two samples.
pub fn cpu_usage(
    before: &[(usize, CpuTimes)],
    after: &[(usize, CpuTimes)],
    cpus: &[usize],
) -> Vec<CpuUsage> {
    let mut out = Vec::new();
    for &c in cpus {
        let (Some(b), Some(a)) = (
            before.iter().find(|(i, _)| *i == c).map(|x| x.1),
            after.iter().find(|(i, _)| *i == c).map(|x| x.1),
        ) else {
            continue;
        };
        let total = a.total().saturating_sub(b.total());
        if total == 0 {
            continue;
        }
        let pct = |x: u64, y: u64| x.saturating_sub(y) as f64 * 100.0 / total as f64;
        out.push(CpuUsage {
            cpu: c,
            busy_pct: 100.0 - pct(a.idle, b.idle),
            user_pct: pct(a.user, b.user),
            system_pct: pct(a.system, b.system),
            softirq_pct: pct(a.softirq, b.softirq),
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn proc_stat_parses_cpu_lines_and_computes_usage() {
        let before = "cpu  10 0 10 80 0 0 0 0 0 0\ncpu0 5 0 5 40 0 0 0 0 0 0\ncpu1 5 0 5 40 0 0 0 0\nintr 1 2\n";
        let after = "cpu0 30 0 15 50 0 0 5 0 0 0\ncpu1 5 0 5 140 0 0 0 0\nbogus\ncpu2 x\n";
        let b = parse_proc_stat(before);
        let a = parse_proc_stat(after);
        assert_eq!(b.len(), 2, "aggregate line skipped");
        let u = cpu_usage(&b, &a, &[0, 1, 7]);
        assert_eq!(u.len(), 2);
        // cpu0: +25 user, +10 system, +10 idle, +5 softirq = 50 total
        assert!((u[0].busy_pct - 80.0).abs() < 1e-9);
        assert!((u[0].user_pct - 50.0).abs() < 1e-9);
        assert!((u[0].softirq_pct - 10.0).abs() < 1e-9);
        assert!((u[1].busy_pct - 0.0).abs() < 1e-9);
    }

    #[test]
    fn monotonic_clock_advances() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000);
        assert!(!allowed_cpus().is_empty());
    }
}
