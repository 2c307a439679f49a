//! Options of `xload URL` for runs made from several hosts (`--on`,
//! `--run-id`, `--segment`, `--start-at`) and their value parsers; what
//! they do lives in `crate::hosts`.

use clap::Args;
use xload_stats::walltime::{parse_rfc3339, UnixMicros};

/// Options of `xload URL` for runs made from several hosts.
#[derive(Debug, Clone, Args)]
pub(crate) struct HostArgs {
    /// Id shared by the generators of one run (default: a new one), written in the report;
    /// `xload merge` refuses reports of different runs.
    #[arg(long = "run-id", value_parser = parse_run_id)]
    pub run_id: Option<String>,

    /// This generator's share of a run made from several hosts, INDEX/COUNT (e.g. 2/4),
    /// written in the report.
    #[arg(long = "segment", value_parser = parse_segment)]
    pub segment: Option<Segment>,

    /// Open the measured window at TIME (RFC 3339, e.g. 2026-12-03T10:00:00Z, or +5s from
    /// now): wait, then warm up, so that generators on several hosts measure the same
    /// interval. The report says how late the window began.
    #[arg(long = "start-at", value_parser = parse_start_at)]
    pub start_at: Option<UnixMicros>,

    /// Run on these hosts at once (HOST[,HOST...]), each with its share of -c, --rate and -n
    /// (--segment), one --run-id and one --start-at (default: 3s from now), through --rsh; the
    /// reports are merged exactly, with a row per host. xload must be installed there.
    #[arg(long = "on", value_delimiter = ',', value_parser = parse_host)]
    pub on: Vec<String>,

    /// With --on: how to reach a host, {host} replaced by its name. ssh-like programs get the
    /// command as one shell line; others (ip netns exec {host}, kubectl exec {host} --) as
    /// separate words.
    #[arg(long = "rsh", default_value = xload_sys::remote::DEFAULT_TEMPLATE, value_parser = parse_rsh)]
    pub rsh: xload_sys::remote::Transport,

    /// With --on: the xload command on the hosts (e.g. /opt/bin/xload, or 'sudo xload').
    #[arg(long = "remote-xload", default_value = "xload")]
    pub remote_xload: String,

    /// With --on: also write each host's own report to DIR/HOST.json (to merge again later).
    #[arg(long = "keep-reports")]
    pub keep_reports: Option<std::path::PathBuf>,

    /// With --on: a host that fails or cannot be reached leaves a partial merge; exit 0
    /// instead of 1.
    #[arg(long = "allow-partial")]
    pub allow_partial: bool,

    /// One plain progress line per second on stderr ("xload progress: ..."), even when not
    /// on a terminal: what --on relays from each host.
    #[arg(long = "progress-lines")]
    pub progress_lines: bool,
}

/// A host name for --on: no spaces, no leading '-' (it would read as an option).
pub(crate) fn parse_host(s: &str) -> Result<String, String> {
    let s = s.trim();
    if s.is_empty() || s.starts_with('-') || s.contains(char::is_whitespace) || s.contains('/') {
        return Err(format!("{s:?} is not a host name"));
    }
    Ok(s.to_string())
}

fn parse_rsh(s: &str) -> Result<xload_sys::remote::Transport, String> {
    xload_sys::remote::Transport::parse(s)
}

/// `INDEX/COUNT`, 1 ≤ INDEX ≤ COUNT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Segment {
    pub index: usize,
    pub count: usize,
}

impl std::fmt::Display for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

pub(crate) fn parse_segment(s: &str) -> Result<Segment, String> {
    let bad = || format!("{s:?} is not a segment INDEX/COUNT such as 2/4");
    let (i, n) = s.split_once('/').ok_or_else(bad)?;
    let (index, count) = (
        i.trim().parse::<usize>().map_err(|_| bad())?,
        n.trim().parse::<usize>().map_err(|_| bad())?,
    );
    if index == 0 || index > count {
        return Err(format!(
            "segment {s:?}: INDEX counts from 1 to COUNT (e.g. 1/4 … 4/4)"
        ));
    }
    Ok(Segment { index, count })
}

/// A run id: 1 to 64 of `A-Z a-z 0-9 . _ -` (it travels on command lines and in file names).
pub(crate) fn parse_run_id(s: &str) -> Result<String, String> {
    let ok = !s.is_empty()
        && s.len() <= 64
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"._-".contains(&b));
    if ok {
        Ok(s.to_string())
    } else {
        Err(format!(
            "run id {s:?}: 1 to 64 letters, digits, '.', '_' or '-'"
        ))
    }
}

/// `--start-at`: RFC 3339, or `+DURATION` from now.
pub(crate) fn parse_start_at(s: &str) -> Result<UnixMicros, String> {
    if let Some(rel) = s.strip_prefix('+') {
        let d = xload_sys::duration::parse_duration_or_seconds(rel)
            .map_err(|e| format!("invalid duration: {e} (e.g. 500ms, 10s, 2m)"))?;
        return Ok(xload_stats::walltime::now_us() + d.as_micros() as i64);
    }
    parse_rfc3339(s).map_err(|e| format!("{e}, or +DURATION such as +5s"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_count_from_one_to_their_count() {
        assert_eq!(parse_segment("2/4"), Ok(Segment { index: 2, count: 4 }));
        assert_eq!(parse_segment("1/1").unwrap().to_string(), "1/1");
        for bad in ["0/4", "5/4", "2", "a/b", "2/0", "-1/3"] {
            assert!(parse_segment(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn run_ids_are_short_plain_words() {
        assert!(parse_run_id("capacity-2026.12_03").is_ok());
        for bad in ["", "a b", "x/y", "$(id)", &"x".repeat(65)] {
            assert!(parse_run_id(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn start_at_reads_rfc_3339_or_a_delay_from_now() {
        let now = xload_stats::walltime::now_us();
        let t = parse_start_at("+5s").unwrap();
        assert!((t - now - 5_000_000).abs() < 1_000_000, "{t} vs {now}");
        assert_eq!(
            parse_start_at("2026-12-03T10:00:00Z"),
            Ok(1_796_292_000_000_000)
        );
        assert!(parse_start_at("tomorrow").is_err());
        assert!(parse_start_at("+soon").is_err());
    }
}
