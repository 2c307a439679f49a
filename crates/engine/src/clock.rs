//! A monotonic clock in nanoseconds, read once per batch of completions.

/// Nanoseconds on CLOCK_MONOTONIC (a vDSO call, no syscall).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; CLOCK_MONOTONIC always exists.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Rounds a nanosecond interval to whole microseconds (the histogram's unit).
#[inline]
pub fn ns_to_us(ns: u64) -> u64 {
    (ns + 500) / 1000
}
