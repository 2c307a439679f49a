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
        let result = attempt();
        let stalled = watchdog.stop();
        if stalled <= MACHINE_STALL_LIMIT || tries == 3 {
            return result;
        }
        eprintln!("the machine stalled this test for {stalled:?}: measuring again");
    }
}
