//! Single-value files under /proc/sys.

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

/// Parses a file holding one unsigned integer (e.g. net.core.somaxconn).
pub fn parse_sysctl_u64(what: &'static str, text: &str) -> Result<u64, ProbeError> {
    let mut tokens = text.split_whitespace();
    let first = tokens
        .next()
        .ok_or_else(|| ProbeError::parse(what, 0, ParseErrorKind::Empty))?;
    if let Some(extra) = tokens.next() {
        return Err(ProbeError::parse(
            what,
            1,
            ParseErrorKind::BadLine(format!("{first} {extra}")),
        ));
    }
    parse_u64(what, 1, first)
}

/// Parses net.ipv4.ip_local_port_range (`low<TAB>high`, both inclusive).
pub fn parse_port_range(text: &str) -> Result<(u16, u16), ProbeError> {
    const WHAT: &str = "net.ipv4.ip_local_port_range";
    let tokens: Vec<&str> = text.split_whitespace().collect();
    let [low, high] = tokens.as_slice() else {
        return Err(ProbeError::parse(
            WHAT,
            1,
            ParseErrorKind::TooFewColumns {
                expected: 2,
                found: tokens.len(),
            },
        ));
    };
    let port = |t: &str| -> Result<u16, ProbeError> {
        t.parse::<u16>()
            .map_err(|_| ProbeError::parse(WHAT, 1, ParseErrorKind::BadNumber(t.into())))
    };
    let (low, high) = (port(low)?, port(high)?);
    if low > high {
        return Err(ProbeError::parse(
            WHAT,
            1,
            ParseErrorKind::OutOfRange(format!("{low} > {high}")),
        ));
    }
    Ok((low, high))
}

/// Parses net.ipv4.ip_local_reserved_ports (`8080,9000-9010` or empty) and returns how
/// many of those ports fall inside `range` (they are never picked for connect()).
pub fn parse_reserved_ports(text: &str, range: (u16, u16)) -> Result<u32, ProbeError> {
    const WHAT: &str = "net.ipv4.ip_local_reserved_ports";
    let mut reserved = 0u32;
    let mut ranges: Vec<(u16, u16)> = Vec::new();
    for part in text
        .trim()
        .split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
    {
        let port = |t: &str| -> Result<u16, ProbeError> {
            t.trim()
                .parse::<u16>()
                .map_err(|_| ProbeError::parse(WHAT, 1, ParseErrorKind::BadNumber(t.into())))
        };
        let (a, b) = match part.split_once('-') {
            Some((a, b)) => (port(a)?, port(b)?),
            None => {
                let p = port(part)?;
                (p, p)
            }
        };
        if a > b {
            return Err(ProbeError::parse(
                WHAT,
                1,
                ParseErrorKind::OutOfRange(part.into()),
            ));
        }
        ranges.push((a.max(range.0), b.min(range.1)));
    }
    // The kernel prints a normalised, non-overlapping list; sort and merge anyway.
    ranges.retain(|(a, b)| a <= b);
    ranges.sort_unstable();
    let mut covered_to: Option<u16> = None;
    for (a, b) in ranges {
        let start = match covered_to {
            Some(c) if c >= b => continue,
            Some(c) if c >= a => c + 1,
            _ => a,
        };
        reserved += u32::from(b - start) + 1;
        covered_to = Some(b);
    }
    Ok(reserved)
}
