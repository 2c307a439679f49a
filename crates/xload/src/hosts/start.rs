//! `--start-at`: waiting for a wall-clock instant, and the wall-clock time
//! of an engine instant (the engine keeps CLOCK_MONOTONIC).

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use xload_stats::walltime::UnixMicros;

/// Now on CLOCK_REALTIME, µs since the epoch.
pub(crate) fn unix_now_us() -> UnixMicros {
    xload_stats::walltime::now_us()
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, ns: the wall-clock read is
/// bracketed by two monotonic reads and the narrowest of a few brackets
/// kept, so a preemption between the reads cannot shift the offset.
fn wall_minus_monotonic_ns() -> i128 {
    let mut best: Option<(u64, i128)> = None;
    for _ in 0..8 {
        let before = xload_engine::clock::now_ns();
        let wall = unix_now_us() as i128 * 1000;
        let after = xload_engine::clock::now_ns();
        let width = after.saturating_sub(before);
        let mid = (before / 2 + after / 2) as i128;
        if best.is_none_or(|(w, _)| width < w) {
            best = Some((width, wall - mid));
        }
        if width < 20_000 {
            break;
        }
    }
    best.map_or(0, |(_, offset)| offset)
}

/// The wall-clock time of `mono_ns`, an instant on CLOCK_MONOTONIC.
pub(super) fn unix_us_of_monotonic(mono_ns: u64) -> UnixMicros {
    ((mono_ns as i128 + wall_minus_monotonic_ns()).div_euclid(1000)) as UnixMicros
}

/// Sleeps until CLOCK_REALTIME reads `at_us`, or until `stop` is set
/// (false then). The last stretch is one absolute sleep on CLOCK_REALTIME,
/// which also follows a clock that is stepped meanwhile.
pub(super) fn wait_until(at_us: UnixMicros, stop: &AtomicBool) -> bool {
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        let left = at_us - unix_now_us();
        if left <= 0 {
            return true;
        }
        if left > 100_000 {
            std::thread::sleep(Duration::from_millis(50));
            continue;
        }
        let ts = libc::timespec {
            tv_sec: at_us.div_euclid(1_000_000) as libc::time_t,
            tv_nsec: (at_us.rem_euclid(1_000_000) * 1000) as libc::c_long,
        };
        // SAFETY: `ts` is a valid timespec that lives for the call; the
        // remaining-time pointer may be null with TIMER_ABSTIME.
        let rc = unsafe {
            libc::clock_nanosleep(
                libc::CLOCK_REALTIME,
                libc::TIMER_ABSTIME,
                &ts,
                std::ptr::null_mut(),
            )
        };
        // EINTR (a signal): look at the stop flag and sleep again.
        if rc != 0 && rc != libc::EINTR {
            std::thread::sleep(Duration::from_micros(left as u64));
        }
    }
}

/// How long before its window the engine starts when the window opens at
/// a given instant (after the warm-up, if any): time to open connections.
pub(super) const LEAD: Duration = Duration::from_millis(250);

/// The CLOCK_MONOTONIC instant (ns) of the wall-clock time `at_us`.
pub(super) fn monotonic_of_unix(at_us: UnixMicros) -> u64 {
    (at_us as i128 * 1000 - wall_minus_monotonic_ns()).max(0) as u64
}

/// What `--start-at` asks of a run about to start: waits until the engine
/// must start (the warm-up and [`LEAD`] before `at_us`) and returns the
/// window's instant on CLOCK_MONOTONIC, or None when stopped while waiting.
/// An instant too close (or past) is said, and the run starts at once.
pub(crate) fn wait_for_start(
    at_us: UnixMicros,
    warmup: Duration,
    stop: &AtomicBool,
) -> Option<u64> {
    let now = unix_now_us();
    if now > at_us {
        eprintln!(
            "xload: warning: --start-at was {:.3}s ago: the window opens late (start_error_us in the report says by how much)",
            (now - at_us) as f64 / 1e6
        );
    } else if now + (warmup.as_micros() as i64) > at_us {
        eprintln!(
            "xload: warning: --start-at leaves {:?} before the window: the warm-up is shorter than {warmup:?}",
            Duration::from_micros((at_us - now) as u64)
        );
    }
    let begin = at_us - (warmup + LEAD).as_micros() as i64;
    if !wait_until(begin, stop) {
        return None;
    }
    Some(monotonic_of_unix(at_us))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_wall_clock_time_of_now_on_the_monotonic_clock_is_now() {
        let mono = xload_engine::clock::now_ns();
        let wall = unix_now_us();
        assert!((unix_us_of_monotonic(mono) - wall).abs() < 2_000);
        let earlier = unix_us_of_monotonic(mono - 1_000_000_000);
        assert!((wall - earlier - 1_000_000).abs() < 2_000);
    }

    #[test]
    fn a_wall_clock_instant_maps_to_the_monotonic_clock_and_back() {
        let at = unix_now_us() + 3_000_000;
        let mono = monotonic_of_unix(at);
        assert!((unix_us_of_monotonic(mono) - at).abs() < 2_000);
    }

    #[test]
    fn a_wait_ends_at_its_instant_not_before() {
        let stop = AtomicBool::new(false);
        let at = unix_now_us() + 30_000;
        assert!(wait_until(at, &stop));
        let late = unix_now_us() - at;
        // Never before; how long after is the scheduler's (a loaded CI VM).
        assert!((0..1_000_000).contains(&late), "woke {late} µs after");
        stop.store(true, Ordering::Relaxed);
        assert!(!wait_until(unix_now_us() + 10_000_000, &stop), "stopped");
    }
}
