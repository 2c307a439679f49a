//! Parsers for command-line values: durations ("2s", "500ms"), index lists
//! ("0-3,6") and rates ("1.5M", "200k").

use std::time::Duration;

/// Why a command-line value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ValueError {
    #[error("invalid duration {0:?}: use a number with a unit, e.g. 500ms, 2s, 1.5m, 100us")]
    Duration(String),
    #[error("invalid list {0:?}: use numbers and ranges, e.g. 0-3,6")]
    List(String),
    #[error("invalid rate {0:?}: use a positive number, optionally with k, M or G (e.g. 250k)")]
    Rate(String),
}

/// Parses "500ms", "2s", "1.5m", "100us", "1h", "250ns"; a bare number is seconds.
pub fn parse_duration(s: &str) -> Result<Duration, ValueError> {
    xload_sys::duration::parse_duration_or_seconds(s)
        .map_err(|_| ValueError::Duration(s.to_string()))
}

/// Parses "0-3,6" into [0, 1, 2, 3, 6] (the grammar of
/// [`xload_sys::cpu::parse_list`]; not empty, order kept, duplicates rejected:
/// queue i pairs with CPU i).
pub fn parse_list(s: &str) -> Result<Vec<u32>, ValueError> {
    let err = || ValueError::List(s.to_string());
    let out = xload_sys::cpu::parse_list(s).map_err(|_| err())?;
    let mut seen = std::collections::BTreeSet::new();
    if out.is_empty() || !out.iter().all(|&i| seen.insert(i)) {
        return Err(err());
    }
    Ok(out)
}

/// Parses a packet rate: "250000", "250k", "1.5M", "2G" (per second).
pub fn parse_rate(s: &str) -> Result<f64, ValueError> {
    let err = || ValueError::Rate(s.to_string());
    let t = s.trim();
    let (num, mult) = match t.chars().last() {
        Some('k') | Some('K') => (&t[..t.len() - 1], 1e3),
        Some('M') | Some('m') => (&t[..t.len() - 1], 1e6),
        Some('G') | Some('g') => (&t[..t.len() - 1], 1e9),
        _ => (t, 1.0),
    };
    let v: f64 = num.parse().map_err(|_| err())?;
    let r = v * mult;
    if !r.is_finite() || r <= 0.0 {
        return Err(err());
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_with_units_parse_and_garbage_is_rejected() {
        assert_eq!(parse_duration("2s").unwrap(), Duration::from_secs(2));
        assert_eq!(parse_duration("500ms").unwrap(), Duration::from_millis(500));
        assert_eq!(parse_duration("1.5m").unwrap(), Duration::from_secs(90));
        assert_eq!(parse_duration("100us").unwrap(), Duration::from_micros(100));
        assert_eq!(parse_duration("3").unwrap(), Duration::from_secs(3));
        assert_eq!(parse_duration("1h").unwrap(), Duration::from_secs(3600));
        for bad in ["", "s", "ms", "2x", "-1s", "1..2s", "nan", "1e3s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn lists_expand_ranges_and_reject_duplicates() {
        assert_eq!(parse_list("0").unwrap(), vec![0]);
        assert_eq!(parse_list("0-3,6").unwrap(), vec![0, 1, 2, 3, 6]);
        assert_eq!(parse_list("5,1").unwrap(), vec![5, 1]);
        for bad in ["", "a", "3-1", "1,,2", "1,1", "0-2,2", "-1"] {
            assert!(parse_list(bad).is_err(), "{bad:?} accepted");
        }
    }

    #[test]
    fn rates_accept_suffixes() {
        assert_eq!(parse_rate("250000").unwrap(), 250_000.0);
        assert_eq!(parse_rate("250k").unwrap(), 250_000.0);
        assert_eq!(parse_rate("1.5M").unwrap(), 1_500_000.0);
        for bad in ["", "0", "-5", "k", "1.5X"] {
            assert!(parse_rate(bad).is_err(), "{bad:?} accepted");
        }
    }
}
