//! The keys that place a run's report in a run made from several hosts:
//! run id, segment, host, version, command line, when the window began,
//! and the settings generators of one run must share.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use xload_stats::walltime::format_rfc3339_us;
use xload_stats::{Report, RunInfo};

use super::start::unix_us_of_monotonic;
use crate::args::{ArrivalArg, CommonArgs, HostArgs};
use crate::prepared::Prepared;

/// This machine's host name (None if it cannot be read).
pub(super) fn host_name() -> Option<String> {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into `buf`,
    // which lives for the call.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return None;
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    let name = String::from_utf8_lossy(&buf[..end]).into_owned();
    (!name.is_empty()).then_some(name)
}

/// Fills `report.run` for a run of `p` whose measured window began at
/// `window_start_ns` (CLOCK_MONOTONIC).
pub(crate) fn stamp(
    report: &mut Report,
    h: &HostArgs,
    a: &CommonArgs,
    p: &Prepared,
    run_id: &str,
    window_start_ns: u64,
) {
    let started = unix_us_of_monotonic(window_start_ns);
    report.run = RunInfo {
        run_id: Some(run_id.to_string()),
        segment: h.segment.map(|s| s.to_string()),
        host: host_name(),
        started_at: Some(format_rfc3339_us(started)),
        start_at: h.start_at.map(format_rfc3339_us),
        start_error_us: h.start_at.map(|at| started - at),
        xload_version: Some(env!("CARGO_PKG_VERSION").to_string()),
        argv: Some(std::env::args().collect()),
        settings: settings(a, p),
    };
}

/// What generators of one run must share besides the target: the request
/// (a digest of its bytes: method, path, headers, body), how it is sent,
/// and the window, warm-up and timeouts asked for.
fn settings(a: &CommonArgs, p: &Prepared) -> BTreeMap<String, Value> {
    let secs = |d: Option<std::time::Duration>| d.map_or(Value::Null, |d| json!(d.as_secs_f64()));
    let mut s = BTreeMap::new();
    s.insert(
        "request_fnv1a".into(),
        json!(format!("{:016x}", fnv1a(&p.plan.request))),
    );
    s.insert("pipeline".into(), json!(p.plan.pipeline));
    if let Some(h) = &p.plan.h2 {
        // HTTP/2: the streams each connection carries, and whether the
        // server chooses the protocol (--alpn).
        s.insert("h2_streams".into(), json!(h.streams));
        s.insert("h2_alpn".into(), json!(h.alpn_optional));
    }
    s.insert("keepalive".into(), json!(!p.closes));
    s.insert("duration_s".into(), secs(a.duration));
    s.insert("warmup_s".into(), secs(Some(a.warmup.unwrap_or_default())));
    s.insert("timeout_s".into(), secs(Some(a.timeout)));
    s.insert("connect_timeout_s".into(), secs(Some(a.connect_timeout)));
    s.insert(
        "handshake_timeout_s".into(),
        secs(Some(a.handshake_timeout)),
    );
    if p.plan.open_loop.is_some() {
        let arrival = match a.arrival {
            ArrivalArg::Uniform => "uniform",
            ArrivalArg::Poisson => "poisson",
        };
        s.insert("arrival".into(), json!(arrival));
    }
    s
}

/// FNV-1a, 64 bits: a digest to compare requests by, not a secret.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a_matches_its_reference_values() {
        assert_eq!(fnv1a(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a(b"a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[test]
    fn this_host_has_a_name() {
        assert!(host_name().is_some_and(|n| !n.contains('\0')));
    }
}
