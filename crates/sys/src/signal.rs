//! The one stop signal of every command: the first SIGINT or SIGTERM sets a
//! flag the running command polls (it stops and still reports what it
//! measured); a second one exits at once with 130, as a shell's Ctrl-C does.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

extern "C" fn on_signal(_sig: libc::c_int) {
    if let Some(flag) = STOP.get() {
        if flag.swap(true, Ordering::SeqCst) {
            // SAFETY: _exit is async-signal-safe and has no preconditions.
            unsafe { libc::_exit(130) };
        }
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
            // SAFETY: the handler only touches an atomic (and may call
            // _exit), both async-signal-safe; sigaction is plain data,
            // zeroed then filled in.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_first_signal_sets_the_flag_and_the_process_goes_on() {
        let flag = stop_flag();
        assert!(Arc::ptr_eq(&flag, &stop_flag()), "one flag per process");
        assert!(!flag.load(Ordering::SeqCst));
        // SAFETY: raise(2) delivers SIGTERM to this thread; the handler above
        // is installed, so it only sets the flag.
        unsafe { libc::raise(libc::SIGTERM) };
        assert!(flag.load(Ordering::SeqCst));
    }
}
