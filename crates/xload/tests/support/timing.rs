//! For tests that assert timing figures on a shared machine: run them one at a
//! time, and measure again when the whole machine stopped running the test or
//! other processes took a share of its CPUs.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Held by every load test of a test binary: one run at a time on the machine.
pub(crate) fn serial() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A thread of this process that wakes every 10 ms: the longest gap between
/// its wake-ups says whether the machine stopped running us (a shared VM
/// whose CPUs are taken by other work for hundreds of milliseconds).
struct Watchdog {
    done: Arc<AtomicBool>,
    handle: thread::JoinHandle<Duration>,
}

impl Watchdog {
    fn start() -> Watchdog {
        let done = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&done);
        let handle = thread::spawn(move || {
            let mut last = Instant::now();
            let mut worst = Duration::ZERO;
            while !flag.load(Ordering::SeqCst) {
                thread::sleep(Duration::from_millis(10));
                let now = Instant::now();
                worst = worst.max(now - last);
                last = now;
            }
            worst
        });
        Watchdog { done, handle }
    }

    /// The longest time the watchdog went without running.
    fn stop(self) -> Duration {
        self.done.store(true, Ordering::SeqCst);
        self.handle.join().expect("watchdog thread")
    }
}

/// Longest stretch the machine may stop running the test before a timing
/// run is considered disturbed and made again.
pub(crate) const MACHINE_STALL_LIMIT: Duration = Duration::from_millis(120);

/// Share of the machine's CPU time the hypervisor may steal during a timing
/// run before it is considered disturbed (steal comes in bursts of a few
/// milliseconds that the watchdog cannot see, and delays sends all the same).
pub(crate) const STEAL_LIMIT_PCT: f64 = 5.0;

/// Share of all CPUs' time that processes other than this test and its
/// descendants may use during a timing run before it is considered
/// disturbed: a competing process on the generator's CPU delays its sends by
/// milliseconds without stalling it.
pub(crate) const OTHER_LOAD_LIMIT_PCT: f64 = 25.0;

fn tick_ns() -> u64 {
    // SAFETY: sysconf only reads a configuration value.
    1_000_000_000 / unsafe { libc::sysconf(libc::_SC_CLK_TCK) }.max(1) as u64
}

/// Every process's parent and CPU time (its own user + system and that of
/// the children it reaped, ns), by pid.
fn processes() -> HashMap<u32, (u32, u64)> {
    let mut all = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return all;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        // After the command name (which may hold spaces and parens): state,
        // ppid, ..., utime, stime, cutime, cstime (the 14th to 17th fields).
        let Some((_, rest)) = stat.rsplit_once(')') else {
            continue;
        };
        let f: Vec<&str> = rest.split_whitespace().collect();
        let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
        let cpu_ns = (num(11) + num(12) + num(13) + num(14)) * tick_ns();
        all.insert(pid, (num(1) as u32, cpu_ns));
    }
    all
}

/// Whether `pid` is this process or one of its descendants.
fn ours(pid: u32, all: &HashMap<u32, (u32, u64)>) -> bool {
    let me = std::process::id();
    let mut p = pid;
    for _ in 0..64 {
        if p == me {
            return true;
        }
        match all.get(&p) {
            Some(&(parent, _)) if parent == me => return true,
            Some(&(parent, _)) if parent > 1 => p = parent,
            _ => return false,
        }
    }
    false
}

/// CPU time of this process and of the children it reaped, ns.
fn own_rusage_ns() -> u64 {
    let mut total = 0;
    for who in [libc::RUSAGE_SELF, libc::RUSAGE_CHILDREN] {
        // SAFETY: rusage is plain integers, for which all-zero bytes are valid.
        let mut ru: libc::rusage = unsafe { std::mem::zeroed() };
        // SAFETY: getrusage fills the struct it is given and keeps no pointer to it.
        if unsafe { libc::getrusage(who, &mut ru) } == 0 {
            for tv in [ru.ru_utime, ru.ru_stime] {
                total += tv.tv_sec as u64 * 1_000_000_000 + tv.tv_usec as u64 * 1_000;
            }
        }
    }
    total
}

/// The fields of /proc/stat's first line (all CPUs), in clock ticks.
fn all_cpus_ticks() -> Option<Vec<u64>> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    Some(
        stat.lines()
            .next()?
            .split_whitespace()
            .skip(1)
            .filter_map(|f| f.parse().ok())
            .collect(),
    )
}

/// All CPUs' idle and iowait time (ns): the kernel measures these exactly,
/// where its busy columns are tick samples that, on a tickless kernel, miss
/// or add busy time on CPUs that sleep and wake often (here a 1000 req/s run
/// showed 3.9 s busy in 2 s on 2 CPUs).
fn idle_ns() -> Option<u64> {
    let f = all_cpus_ticks()?;
    Some((f.get(3)? + f.get(4)?) * tick_ns())
}

/// CPU time used by anything other than this test and its descendants: the
/// machine's busy time (all CPUs' time less idle and iowait) less our own.
/// Steal while a CPU runs counts as others too (the host's load); steal
/// while it sleeps is inside idle.
struct LoadMeter {
    idle: Option<u64>,
    own: u64,
    tree: HashMap<u32, (u32, u64)>,
    at: Instant,
}

impl LoadMeter {
    fn start() -> LoadMeter {
        let all = processes();
        let tree = all
            .iter()
            .filter(|&(&pid, _)| pid != std::process::id() && ours(pid, &all))
            .map(|(&pid, &v)| (pid, v))
            .collect();
        LoadMeter {
            idle: idle_ns(),
            own: own_rusage_ns(),
            tree,
            at: Instant::now(),
        }
    }

    /// Percent of all CPUs' time that others used since `start`.
    fn others_pct(&self) -> f64 {
        let wall = self.at.elapsed().as_nanos() as u64;
        let (Some(i0), Some(i1)) = (self.idle, idle_ns()) else {
            return 0.0;
        };
        // SAFETY: sysconf only reads a configuration value.
        let cpus = unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }.max(1) as u64;
        let busy = (wall * cpus).saturating_sub(i1.saturating_sub(i0));
        // Ours: this process and the children it reaped, plus descendants
        // alive at the end; a descendant alive at the start and reaped since
        // is in the reaped children's time whole, so its time before the
        // start comes off.
        let all = processes();
        let mut own = own_rusage_ns().saturating_sub(self.own) as i128;
        for (&pid, &(_, ns)) in all.iter() {
            if pid != std::process::id() && ours(pid, &all) {
                own += i128::from(ns.saturating_sub(self.tree.get(&pid).map_or(0, |s| s.1)));
            }
        }
        for (pid, &(_, ns)) in &self.tree {
            if !all.contains_key(pid) {
                own -= i128::from(ns);
            }
        }
        let others = (i128::from(busy) - own.max(0)).max(0) as f64;
        100.0 * others / (wall * cpus).max(1) as f64
    }
}

/// (steal ticks, all ticks) over all CPUs, from /proc/stat's first line.
fn steal_ticks() -> Option<(u64, u64)> {
    let f = all_cpus_ticks()?;
    Some((*f.get(7)?, f.iter().take(8).sum()))
}

thread_local! {
    static LAST_DISTURBED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the run the last [`undisturbed`] call returned was disturbed
/// anyway (all its tries were): timing figures that only a quiet machine can
/// promise (a share of late sends) are then reported, not asserted.
pub(crate) fn last_run_disturbed() -> bool {
    LAST_DISTURBED.with(|d| d.get())
}

/// Runs `attempt` up to three times until one runs without the machine
/// stalling this process for more than [`MACHINE_STALL_LIMIT`], the
/// hypervisor stealing over [`STEAL_LIMIT_PCT`] of its CPU time, or other
/// processes using over [`OTHER_LOAD_LIMIT_PCT`] of all CPUs; returns that
/// run's result (or the last one's). A timing figure taken while the machine
/// was busy with something else says nothing about xload, so it is measured
/// again; a run that was not disturbed is always asserted on.
/// `XLOAD_TEST_TIMING=1` prints the three figures of every try.
pub(crate) fn undisturbed<T>(mut attempt: impl FnMut() -> T) -> T {
    let mut tries = 0;
    loop {
        tries += 1;
        let watchdog = Watchdog::start();
        let steal_before = steal_ticks();
        let load = LoadMeter::start();
        let result = attempt();
        let others_pct = load.others_pct();
        let stalled = watchdog.stop();
        let steal_pct = match (steal_before, steal_ticks()) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64
            }
            _ => 0.0,
        };
        let disturbed = stalled > MACHINE_STALL_LIMIT
            || steal_pct > STEAL_LIMIT_PCT
            || others_pct > OTHER_LOAD_LIMIT_PCT;
        if std::env::var_os("XLOAD_TEST_TIMING").is_some() {
            eprintln!(
                "timing of {}: stall {stalled:?}, steal {steal_pct:.1}%, others {others_pct:.1}%",
                thread::current().name().unwrap_or("?")
            );
        }
        if !disturbed || tries == 3 {
            LAST_DISTURBED.with(|d| d.set(disturbed));
            return result;
        }
        eprintln!(
            "the machine stalled this test for {stalled:?}, stole {steal_pct:.0}% of its CPU time and other processes used {others_pct:.0}% of all CPUs: measuring again"
        );
    }
}
