//! io_uring waits are not iowait: an idle `xload serve` pinned to a CPU
//! leaves that CPU idle in /proc/stat, not in iowait (IORING_ENTER_NO_IOWAIT,
//! Linux 6.15+; older kernels count the wait as iowait, docs/engine.md).

mod support;

use std::time::Duration;

use support::serve::Serve;

/// (idle, iowait) ticks of `cpu` in /proc/stat.
fn idle_iowait(cpu: usize) -> (u64, u64) {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let name = format!("cpu{cpu}");
    let line = stat
        .lines()
        .find(|l| l.split_whitespace().next() == Some(&name))
        .unwrap_or_else(|| panic!("no {name} in /proc/stat"));
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|v| v.parse().expect("a counter"))
        .collect();
    (f[3], f[4])
}

/// The running kernel's (major, minor).
fn kernel_version() -> (u32, u32) {
    let release = std::fs::read_to_string("/proc/sys/kernel/osrelease").expect("osrelease");
    let mut parts = release
        .trim()
        .split(|c: char| !c.is_ascii_digit())
        .map(|p| p.parse().unwrap_or(0));
    (parts.next().unwrap_or(0), parts.next().unwrap_or(0))
}

#[test]
fn an_idle_serve_leaves_its_cpu_idle_not_in_iowait() {
    if kernel_version() < (6, 15) {
        eprintln!(
            "skipped: kernel {:?} has no IORING_FEAT_NO_IOWAIT (6.15+): its io_uring waits count as iowait",
            kernel_version()
        );
        return;
    }
    let online = std::thread::available_parallelism().map_or(1, |n| n.get());
    if online < 2 {
        eprintln!("skipped: one CPU only; the test pins the responder to cpu1");
        return;
    }
    let _srv = Serve::start(&["--cpus", "1"]);
    // Its worker is asleep in io_uring_enter with no connection. Before
    // the fix cpu1's whole idle time read as iowait (100%). Other load on
    // the machine can only add busy time (no idle, no iowait) or, with disk
    // I/O of its own, some iowait: the best of a few windows is judged,
    // over windows where cpu1 was idle enough to tell.
    let mut seen = Vec::new();
    for _ in 0..5 {
        let (i0, w0) = idle_iowait(1);
        std::thread::sleep(Duration::from_millis(600));
        let (i1, w1) = idle_iowait(1);
        let (idle, iowait) = (i1.saturating_sub(i0), w1.saturating_sub(w0));
        seen.push((idle, iowait));
        // At least 10 ticks (of 60 at 100 Hz) not busy, of which at most a tenth iowait.
        if idle + iowait >= 10 && iowait * 10 <= idle + iowait {
            return;
        }
    }
    // cpu1 busy with other load in every window leaves nothing to judge.
    if seen.iter().all(|(i, w)| i + w < 10) {
        eprintln!("skipped: cpu1 was never idle enough to judge (other load on it): {seen:?}");
        return;
    }
    panic!(
        "cpu1 (idle, iowait) ticks per 600 ms window with an idle `xload serve --cpus 1` on it: \
         {seen:?}: its io_uring wait is counted as iowait"
    );
}
