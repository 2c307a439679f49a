//! CPU lists, the affinity mask and pinning.
//!
//! One grammar for every CPU or queue list, on the command line and from the
//! kernel (`/sys/devices/system/cpu/online`, `smp_affinity_list`): items
//! separated by commas, each a number `N` or a range `N-M` with `M >= N`,
//! decimal digits only, spaces allowed around items and numbers, no empty
//! item, no number above [`MAX_CPU`]. Empty or blank text is the empty list;
//! whether that, duplicates or order matter is for the caller to say
//! ([`parse_cpu_list`] is the rule for CPUs to run on).

use std::fmt;
use std::io;

/// Largest number accepted in a list: far above any real `nr_cpu_ids`, low
/// enough that a hostile range such as `0-4294967295` cannot exhaust memory.
pub const MAX_CPU: u32 = 65_535;

/// Why a list was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ListError {
    /// Two commas with nothing between them, or a leading or trailing comma.
    EmptyItem,
    /// An item that is neither a number nor a range of two numbers.
    NotANumber(String),
    /// A range whose end is below its start (`3-1`).
    Backwards(String),
    /// A number above [`MAX_CPU`].
    TooLarge(u64),
    /// Nothing listed where something must be.
    Empty,
}

impl fmt::Display for ListError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ListError::EmptyItem => f.write_str("empty item between commas"),
            ListError::NotANumber(item) => write!(f, "`{item}` is not a CPU number or range"),
            ListError::Backwards(item) => write!(f, "range `{item}` runs backwards"),
            ListError::TooLarge(n) => write!(f, "CPU {n} is above the limit {MAX_CPU}"),
            ListError::Empty => f.write_str("the list is empty"),
        }
    }
}

impl std::error::Error for ListError {}

/// The numbers of a list such as `0-3,6`, in the order written, duplicates
/// kept (a queue list pairs its items with CPUs by position).
pub fn parse_list(text: &str) -> Result<Vec<u32>, ListError> {
    let text = text.trim();
    let mut out = Vec::new();
    if text.is_empty() {
        return Ok(out);
    }
    for item in text.split(',').map(str::trim) {
        if item.is_empty() {
            return Err(ListError::EmptyItem);
        }
        let (lo, hi) = match item.split_once('-') {
            Some((a, b)) => (number(a.trim(), item)?, number(b.trim(), item)?),
            None => (number(item, item)?, number(item, item)?),
        };
        if hi < lo {
            return Err(ListError::Backwards(item.to_string()));
        }
        out.extend(lo..=hi);
    }
    Ok(out)
}

/// One number of a list: ASCII digits only (no sign), at most [`MAX_CPU`].
fn number(s: &str, item: &str) -> Result<u32, ListError> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return Err(ListError::NotANumber(item.to_string()));
    }
    // All digits: the only way to fail is overflow, which is "too large" too.
    let n: u64 = s.parse().unwrap_or(u64::MAX);
    if n > u64::from(MAX_CPU) {
        return Err(ListError::TooLarge(n));
    }
    Ok(n as u32)
}

/// CPUs to run on (`--cpus 0-3,6`): at least one, ascending, each once.
pub fn parse_cpu_list(text: &str) -> Result<Vec<usize>, ListError> {
    let mut cpus: Vec<usize> = parse_list(text)?.into_iter().map(|c| c as usize).collect();
    if cpus.is_empty() {
        return Err(ListError::Empty);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// Number of CPUs a `cpu_set_t` holds (`CPU_SETSIZE`).
const SET_CPUS: usize = 8 * std::mem::size_of::<libc::cpu_set_t>();

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
    Ok((0..SET_CPUS)
        // SAFETY: CPU_ISSET reads the set at an index below its capacity.
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect())
}

/// Pins the calling thread to `cpu`.
pub fn pin_current_thread(cpu: usize) -> io::Result<()> {
    if cpu >= SET_CPUS {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("cpu {cpu} out of range"),
        ));
    }
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: index checked against the set's capacity above.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_keep_order_and_duplicates() {
        assert_eq!(parse_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_list("5,1").unwrap(), vec![5, 1]);
        assert_eq!(parse_list("1,1").unwrap(), vec![1, 1]);
        assert_eq!(parse_list(" 0-1 , 4 \n").unwrap(), vec![0, 1, 4]);
        assert_eq!(parse_list("2 - 3").unwrap(), vec![2, 3]);
        assert_eq!(parse_list("").unwrap(), Vec::<u32>::new());
        assert_eq!(parse_list("\n").unwrap(), Vec::<u32>::new());
    }

    #[test]
    fn lists_reject_garbage_with_a_reason() {
        let table: &[(&str, ListError)] = &[
            ("1,,2", ListError::EmptyItem),
            ("1,", ListError::EmptyItem),
            (",1", ListError::EmptyItem),
            ("a", ListError::NotANumber("a".into())),
            ("-1", ListError::NotANumber("-1".into())),
            ("1-", ListError::NotANumber("1-".into())),
            ("+1", ListError::NotANumber("+1".into())),
            ("1-2-3", ListError::NotANumber("1-2-3".into())),
            ("3-1", ListError::Backwards("3-1".into())),
            ("0-70000", ListError::TooLarge(70_000)),
            ("99999999999999999999999", ListError::TooLarge(u64::MAX)),
        ];
        for (text, want) in table {
            assert_eq!(parse_list(text).as_ref(), Err(want), "{text:?}");
        }
        assert!(ListError::Backwards("3-1".into())
            .to_string()
            .contains("backwards"));
    }

    #[test]
    fn cpu_lists_are_sorted_unique_and_not_empty() {
        assert_eq!(
            parse_cpu_list("0-3,6,8-9").unwrap(),
            vec![0, 1, 2, 3, 6, 8, 9]
        );
        assert_eq!(parse_cpu_list("1").unwrap(), vec![1]);
        assert_eq!(parse_cpu_list("3,1,1").unwrap(), vec![1, 3]);
        for bad in ["", "a", "3-1", "99999"] {
            assert!(parse_cpu_list(bad).is_err(), "{bad:?}");
        }
        assert_eq!(parse_cpu_list(""), Err(ListError::Empty));
    }

    #[test]
    fn this_process_may_run_somewhere_and_pin_there() {
        let cpus = allowed_cpus().unwrap();
        assert!(!cpus.is_empty());
        // On a thread of its own, so the test harness's thread keeps its mask.
        let first = cpus[0];
        std::thread::spawn(move || {
            pin_current_thread(first).unwrap();
            assert_eq!(allowed_cpus().unwrap(), vec![first]);
            assert!(gettid() > 0);
        })
        .join()
        .unwrap();
        assert!(pin_current_thread(SET_CPUS).is_err());
    }
}
