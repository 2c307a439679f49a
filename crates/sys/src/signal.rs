//! The one stop signal of every command: the first SIGINT or SIGTERM sets a
//! flag the running command polls (it stops and still reports what it
//! measured, then exits 128 + the signal's number). Signals that follow soon
//! after, as `timeout` plus a process-group kill send them, never cost the
//! report; one that comes [`FORCE_AFTER_NS`] or more after the first exits at
//! once, for a stop that is stuck.

use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();
/// The first stop signal's number (0: none yet).
static FIRST_SIGNAL: AtomicI32 = AtomicI32::new(0);
/// When the first stop signal came, CLOCK_MONOTONIC ns.
static FIRST_AT_NS: AtomicU64 = AtomicU64::new(0);

/// A repeated signal this long after the first exits at once: the report had
/// time to be written, and the user insists.
pub const FORCE_AFTER_NS: u64 = 2_000_000_000;

extern "C" fn on_signal(sig: libc::c_int) {
    // clock_gettime is async-signal-safe (POSIX.1-2008).
    let now = crate::clock::monotonic_ns();
    if FIRST_SIGNAL
        .compare_exchange(0, sig, Ordering::SeqCst, Ordering::SeqCst)
        .is_ok()
    {
        FIRST_AT_NS.store(now, Ordering::SeqCst);
        if let Some(flag) = STOP.get() {
            flag.store(true, Ordering::SeqCst);
        }
        return;
    }
    if now.saturating_sub(FIRST_AT_NS.load(Ordering::SeqCst)) >= FORCE_AFTER_NS {
        let first = FIRST_SIGNAL.load(Ordering::SeqCst);
        // SAFETY: _exit is async-signal-safe and has no preconditions.
        unsafe { libc::_exit(128 + first) };
    }
}

/// The process-wide stop flag, with the SIGINT/SIGTERM handler installed
/// (once; later calls return the same flag). Also ignores SIGPIPE, so that a
/// closed stdout is a write error ([`crate::stdout`]) and not a silent death.
pub fn stop_flag() -> Arc<AtomicBool> {
    let mut first = false;
    let flag = STOP
        .get_or_init(|| {
            first = true;
            Arc::new(AtomicBool::new(false))
        })
        .clone();
    if first {
        for sig in [libc::SIGINT, libc::SIGTERM] {
            // SAFETY: the handler only touches atomics, reads the clock (and
            // may call _exit), all async-signal-safe; sigaction is plain
            // data, zeroed then filled in.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as *const () as usize;
                sa.sa_flags = libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
        // SAFETY: SIG_IGN for SIGPIPE has no preconditions.
        unsafe { libc::signal(libc::SIGPIPE, libc::SIG_IGN) };
    }
    flag
}

/// The signal that stopped the command, if one did (SIGINT or SIGTERM).
pub fn stopped_by() -> Option<i32> {
    match FIRST_SIGNAL.load(Ordering::SeqCst) {
        0 => None,
        sig => Some(sig),
    }
}

/// The exit status of a command stopped by a signal: 128 + its number (130
/// for SIGINT, 143 for SIGTERM), as a shell reports it; `code` otherwise.
pub fn exit_code(code: i32) -> i32 {
    stopped_by().map_or(code, |sig| 128 + sig)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signals_set_the_flag_name_the_first_and_never_exit_soon_after() {
        let flag = stop_flag();
        assert!(Arc::ptr_eq(&flag, &stop_flag()), "one flag per process");
        assert!(!flag.load(Ordering::SeqCst));
        assert_eq!(stopped_by(), None);
        assert_eq!(exit_code(0), 0);
        // SAFETY: raise(2) delivers the signal to this thread; the handler
        // above is installed, so it only sets the flag.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(flag.load(Ordering::SeqCst));
        assert_eq!(stopped_by(), Some(libc::SIGTERM));
        // A second and third signal right after (timeout + a group kill):
        // the process goes on to write its report.
        // SAFETY: as above; within FORCE_AFTER_NS the handler returns.
        unsafe {
            libc::raise(libc::SIGINT);
            libc::raise(libc::SIGTERM);
        }
        assert_eq!(stopped_by(), Some(libc::SIGTERM), "the first one counts");
        assert_eq!(exit_code(0), 143);
        assert_eq!(exit_code(3), 143);
    }
}
