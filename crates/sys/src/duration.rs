//! Human durations on the command line: `500ms`, `2s`, `1.5s`, `1m`, `250us`.

use std::fmt;
use std::time::Duration;

/// The longest duration accepted: about 31 years, beyond any run; longer
/// input is a typo (and near 2^64 ns it would not fit).
pub const MAX_DURATION: Duration = Duration::from_secs(1_000_000_000);

/// Why a duration string was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// Nothing given.
    Empty,
    /// A number without a unit (is `5` seconds or milliseconds?).
    MissingUnit(String),
    /// A unit other than ns, us, µs, ms, s, m, h.
    UnknownUnit(String),
    /// The number part is not a non-negative decimal.
    BadNumber(String),
    /// Above [`MAX_DURATION`].
    Overflow(String),
    /// A minus sign: durations are never negative.
    Negative(String),
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::Empty => f.write_str("empty duration"),
            DurationError::MissingUnit(t) => {
                write!(f, "{t:?} has no unit: write e.g. 500ms, 10s, 2m")
            }
            DurationError::UnknownUnit(t) => {
                write!(f, "{t:?}: unknown unit (use ns, us, ms, s, m or h)")
            }
            DurationError::BadNumber(t) => write!(f, "{t:?}: not a number"),
            DurationError::Overflow(t) => write!(f, "{t:?}: too large"),
            DurationError::Negative(t) => write!(f, "{t:?}: a duration cannot be negative"),
        }
    }
}

impl std::error::Error for DurationError {}

/// As [`parse_duration`], but a bare number means seconds (`10` = `10s`, as
/// wrk and most load tools read it): for command lines where that is expected.
pub fn parse_duration_or_seconds(text: &str) -> Result<Duration, DurationError> {
    let t = text.trim();
    if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit() || c == '.') {
        return parse_duration(&format!("{t}s"));
    }
    parse_duration(t)
}

/// Parses `<number><unit>` with unit one of `ns`, `us`/`µs`, `ms`, `s`, `m`, `h`; the
/// number may have a fraction (`1.5s`). A bare number is rejected as ambiguous.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text.is_empty() {
        return Err(DurationError::Empty);
    }
    if text.starts_with('-') {
        return Err(DurationError::Negative(text.to_owned()));
    }
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| DurationError::MissingUnit(text.to_owned()))?;
    let (number, unit) = text.split_at(split);
    let ns_per_unit: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" => 60e9,
        "h" => 3600e9,
        _ => return Err(DurationError::UnknownUnit(text.to_owned())),
    };
    if number.is_empty()
        || number.starts_with('.') && number.len() == 1
        || number.matches('.').count() > 1
    {
        return Err(DurationError::BadNumber(text.to_owned()));
    }
    let value: f64 = number
        .parse()
        .map_err(|_| DurationError::BadNumber(text.to_owned()))?;
    let ns = (value * ns_per_unit).round();
    if !ns.is_finite() || ns > MAX_DURATION.as_nanos() as f64 {
        return Err(DurationError::Overflow(text.to_owned()));
    }
    Ok(Duration::from_nanos(ns as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bare_numbers_are_seconds_only_where_asked() {
        assert_eq!(
            parse_duration_or_seconds("3").unwrap(),
            Duration::from_secs(3)
        );
        assert_eq!(
            parse_duration_or_seconds(" 1.5 ").unwrap(),
            Duration::from_millis(1500)
        );
        assert_eq!(
            parse_duration_or_seconds("250ms").unwrap(),
            Duration::from_millis(250)
        );
        assert!(parse_duration("3").is_err());
        assert!(parse_duration_or_seconds("").is_err());
        assert!(parse_duration_or_seconds("1..2").is_err());
    }

    #[test]
    fn parses_every_unit_and_fractions() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("2s"), Ok(Duration::from_secs(2)));
        assert_eq!(parse_duration("1m"), Ok(Duration::from_secs(60)));
        assert_eq!(parse_duration("1h"), Ok(Duration::from_secs(3600)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("7ns"), Ok(Duration::from_nanos(7)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration(" 10s "), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
    }

    #[test]
    fn rejects_bare_numbers_unknown_units_and_garbage() {
        assert_eq!(parse_duration(""), Err(DurationError::Empty));
        assert!(matches!(
            parse_duration("5"),
            Err(DurationError::MissingUnit(_))
        ));
        assert!(matches!(
            parse_duration("5d"),
            Err(DurationError::UnknownUnit(_))
        ));
        assert!(matches!(
            parse_duration("-5s"),
            Err(DurationError::Negative(_))
        ));
        assert!(matches!(
            parse_duration("ms"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration(".s"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("1.2.3s"),
            Err(DurationError::BadNumber(_))
        ));
        assert!(matches!(
            parse_duration("99999999999999h"),
            Err(DurationError::Overflow(_))
        ));
        assert!(matches!(
            parse_duration("1e3s"),
            Err(DurationError::UnknownUnit(_))
        ));
    }

    #[test]
    fn the_longest_duration_is_a_billion_seconds() {
        assert_eq!(parse_duration("1000000000s"), Ok(MAX_DURATION));
        assert!(matches!(
            parse_duration_or_seconds("1000000001"),
            Err(DurationError::Overflow(_))
        ));
        assert!(parse_duration_or_seconds("nan").is_err());
    }
}
