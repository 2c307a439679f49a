//! Clock readers in nanoseconds. `CLOCK_MONOTONIC` is shared by every process
//! on the host, so timestamps taken by a sender and a receiver compare directly.

fn clock_ns(id: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec; clock_gettime only writes
    // it, and the clocks read here always exist on Linux.
    unsafe { libc::clock_gettime(id, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Nanoseconds on `CLOCK_MONOTONIC` (a vDSO call, no syscall).
#[inline]
pub fn monotonic_ns() -> u64 {
    clock_ns(libc::CLOCK_MONOTONIC)
}

/// CPU time consumed by the calling thread, in nanoseconds.
#[inline]
pub fn thread_cpu_ns() -> u64 {
    clock_ns(libc::CLOCK_THREAD_CPUTIME_ID)
}

/// Rounds a nanosecond interval to whole microseconds (half up).
#[inline]
pub fn ns_to_us(ns: u64) -> u64 {
    (ns + 500) / 1000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn monotonic_clock_advances_by_the_time_slept() {
        let a = monotonic_ns();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = monotonic_ns();
        assert!(b >= a + 2_000_000, "{a} -> {b}");
    }

    #[test]
    fn thread_cpu_time_grows_with_work_not_with_sleep() {
        let a = thread_cpu_ns();
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
        }
        let b = thread_cpu_ns();
        assert!(b > a, "{a} -> {b} ({x})");
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(thread_cpu_ns() - b < 10_000_000, "sleeping is not CPU time");
    }

    #[test]
    fn nanoseconds_round_half_up_to_microseconds() {
        assert_eq!(ns_to_us(0), 0);
        assert_eq!(ns_to_us(499), 0);
        assert_eq!(ns_to_us(500), 1);
        assert_eq!(ns_to_us(1_499), 1);
        assert_eq!(ns_to_us(1_500), 2);
    }
}
