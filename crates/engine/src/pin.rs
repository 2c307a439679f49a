//! CPU affinity: which CPUs this process may use, and pinning a thread to one.

use std::io;

/// The CPUs this process is allowed to run on (its affinity mask), ascending.
pub fn allowed_cpus() -> io::Result<Vec<usize>> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: pid 0 = this thread; the pointer and size describe `set`.
    let rc =
        unsafe { libc::sched_getaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &mut set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    let max = 8 * std::mem::size_of::<libc::cpu_set_t>();
    // SAFETY: CPU_ISSET reads the set for indices below its capacity.
    Ok((0..max)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    // SAFETY: as above; CPU_SET on an index below the set's capacity.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    if cpu >= 8 * std::mem::size_of::<libc::cpu_set_t>() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: index checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 = the calling thread; pointer and size describe `set`.
    let rc = unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The kernel thread id of the calling thread.
pub fn gettid() -> i32 {
    // SAFETY: gettid has no arguments and cannot fail.
    unsafe { libc::gettid() }
}

/// Parses a CPU list such as `0-3,6,8-9` (the kernel's cpulist format).
pub fn parse_cpu_list(s: &str) -> Result<Vec<usize>, String> {
    let mut cpus = Vec::new();
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (lo, hi) = match part.split_once('-') {
            Some((a, b)) => (a.trim(), b.trim()),
            None => (part, part),
        };
        let lo: usize = lo
            .parse()
            .map_err(|_| format!("bad CPU number {lo:?} in {s:?}"))?;
        let hi: usize = hi
            .parse()
            .map_err(|_| format!("bad CPU number {hi:?} in {s:?}"))?;
        if hi < lo {
            return Err(format!("bad CPU range {part:?} in {s:?}"));
        }
        if hi >= 4096 {
            return Err(format!("CPU {hi} out of range in {s:?}"));
        }
        cpus.extend(lo..=hi);
    }
    if cpus.is_empty() {
        return Err(format!("empty CPU list {s:?}"));
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_list_parses_ranges_and_singles() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9").unwrap(),
            vec![0, 1, 2, 3, 6, 8, 9]
        );
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), vec![1, 3]);
    }

    #[test]
    fn cpu_list_rejects_garbage() {
        assert!(parse_cpu_list("").is_err());
        assert!(parse_cpu_list("a").is_err());
        assert!(parse_cpu_list("3-1").is_err());
        assert!(parse_cpu_list("99999").is_err());
    }

    #[test]
    fn allowed_cpus_is_not_empty() {
        assert!(!allowed_cpus().unwrap().is_empty());
    }
}
