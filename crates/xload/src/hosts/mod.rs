//! Several generator hosts: what a run's report says about its place in a
//! run made from several hosts (run id, segment, host, when its window
//! began), `--start-at`, which opens every host's window at one instant,
//! and `xload --on`, which drives the generators and merges their reports.
//! Their options are `crate::args::HostArgs`.

mod meta;
pub(crate) mod on;
mod rows;
mod start;

pub(crate) use meta::stamp;
pub(crate) use start::{unix_now_us, wait_for_start};

/// A new run id: the time, this host and process, as 16 hex digits.
pub(crate) fn new_run_id() -> String {
    static CALLS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let call = CALLS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    // FNV-1a over what differs between runs and hosts.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let host = meta::host_name().unwrap_or_default();
    let bytes = [
        &unix_now_us().to_le_bytes()[..],
        &std::process::id().to_le_bytes()[..],
        &call.to_le_bytes()[..],
        host.as_bytes(),
    ];
    for b in bytes.into_iter().flatten() {
        h = (h ^ u64::from(*b)).wrapping_mul(0x0100_0000_01b3);
    }
    format!("{h:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_are_new_each_time_and_valid() {
        let (a, b) = (new_run_id(), new_run_id());
        assert_eq!(a.len(), 16);
        assert!(a.bytes().all(|b| b.is_ascii_hexdigit()), "{a}");
        assert_ne!(a, b, "two ids in a row differ");
    }
}
