//! For tests that assert timing figures on a shared machine: run them one at a
//! time, and measure again when the whole machine stopped running the test.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread;
use std::time::{Duration, Instant};

/// Held by every load test of a test binary: one run at a time on the machine.
pub fn serial() -> MutexGuard<'static, ()> {
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
pub const MACHINE_STALL_LIMIT: Duration = Duration::from_millis(120);

/// Share of the machine's CPU time the hypervisor may steal during a timing
/// run before it is considered disturbed (steal comes in bursts of a few
/// milliseconds that the watchdog cannot see, and delays sends all the same).
pub const STEAL_LIMIT_PCT: f64 = 5.0;

/// (steal ticks, all ticks) over all CPUs, from /proc/stat's first line.
fn steal_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    Some((*fields.get(7)?, fields.iter().take(8).sum()))
}

thread_local! {
    static LAST_DISTURBED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the run the last [`undisturbed`] call returned was disturbed
/// anyway (all its tries were): timing figures that only a quiet machine can
/// promise (a share of late sends) are then reported, not asserted.
pub fn last_run_disturbed() -> bool {
    LAST_DISTURBED.with(|d| d.get())
}

/// Runs `attempt` up to three times until one runs without the machine
/// stalling this process for more than [`MACHINE_STALL_LIMIT`]; returns that
/// run's result (or the last one's). A timing figure taken while the whole
/// machine stood still says nothing about xload, so it is measured again;
/// a run that was not disturbed is always asserted on.
pub fn undisturbed<T>(mut attempt: impl FnMut() -> T) -> T {
    let mut tries = 0;
    loop {
        tries += 1;
        let watchdog = Watchdog::start();
        let steal_before = steal_ticks();
        let result = attempt();
        let stalled = watchdog.stop();
        let steal_pct = match (steal_before, steal_ticks()) {
            (Some((s0, t0)), Some((s1, t1))) if t1 > t0 => {
                100.0 * s1.saturating_sub(s0) as f64 / (t1 - t0) as f64
            }
            _ => 0.0,
        };
        let disturbed = stalled > MACHINE_STALL_LIMIT || steal_pct > STEAL_LIMIT_PCT;
        if !disturbed || tries == 3 {
            LAST_DISTURBED.with(|d| d.set(disturbed));
            return result;
        }
        eprintln!(
            "the machine stalled this test for {stalled:?} and stole {steal_pct:.0}% of its CPU time: measuring again"
        );
    }
}
