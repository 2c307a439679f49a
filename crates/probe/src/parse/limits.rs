//! `/proc/<pid>/limits`: the file-descriptor limit.

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/<pid>/limits";

/// RLIMIT_NOFILE, soft and hard (`u64::MAX` for "unlimited").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FdLimits {
    /// Soft limit: what open() and socket() are held to now (`ulimit -n`).
    pub soft: u64,
    /// Hard limit: how far an unprivileged process may raise the soft limit.
    pub hard: u64,
}

/// Finds `Max open files  <soft>  <hard>  files` in /proc/<pid>/limits.
pub fn parse_limits_nofile(text: &str) -> Result<FdLimits, ProbeError> {
    for (idx, line) in text.lines().enumerate() {
        let Some(rest) = line.strip_prefix("Max open files") else {
            continue;
        };
        let mut tokens = rest.split_whitespace();
        let mut value = |name: &'static str| -> Result<u64, ProbeError> {
            match tokens.next() {
                None => Err(ProbeError::parse(
                    WHAT,
                    idx + 1,
                    ParseErrorKind::MissingField(name),
                )),
                Some("unlimited") => Ok(u64::MAX),
                Some(t) => parse_u64(WHAT, idx + 1, t),
            }
        };
        let soft = value("soft limit")?;
        let hard = value("hard limit")?;
        return Ok(FdLimits { soft, hard });
    }
    Err(ProbeError::parse(
        WHAT,
        0,
        ParseErrorKind::MissingField("Max open files"),
    ))
}
