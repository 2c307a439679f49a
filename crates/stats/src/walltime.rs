//! Wall-clock instants in reports: RFC 3339 text with microseconds, UTC
//! (`2026-12-03T10:00:00.123456Z`), and microseconds since the Unix epoch
//! for arithmetic. Reports of several hosts are compared by these instants
//! (windows, starts), so parsing accepts any RFC 3339 offset.

/// Microseconds since 1970-01-01T00:00:00Z (negative before).
pub type UnixMicros = i64;

use xload_sys::calendar::{civil_from_days, days_from_civil, days_in_month};

const US_PER_DAY: i64 = 86_400_000_000;

/// Now on CLOCK_REALTIME.
pub fn now_us() -> UnixMicros {
    match std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        Ok(d) => d.as_micros() as i64,
        Err(e) => -(e.duration().as_micros() as i64),
    }
}

/// `us` as RFC 3339 UTC with six fractional digits.
pub fn format_rfc3339_us(us: UnixMicros) -> String {
    let days = us.div_euclid(US_PER_DAY);
    let in_day = us.rem_euclid(US_PER_DAY);
    let (y, m, d) = civil_from_days(days);
    let secs = in_day / 1_000_000;
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:06}Z",
        secs / 3600,
        secs / 60 % 60,
        secs % 60,
        in_day % 1_000_000
    )
}

/// Parses RFC 3339 (`2026-12-03T10:00:00Z`, `…:00.5+01:00`; `t`, `z` and a
/// space for `T` accepted as the RFC allows); fractions beyond microseconds
/// are truncated.
pub fn parse_rfc3339(s: &str) -> Result<UnixMicros, String> {
    let bad =
        |why: &str| format!("{s:?} is not an RFC 3339 time ({why}; e.g. 2026-12-03T10:00:00Z)");
    let b = s.as_bytes();
    if b.len() < 20 {
        return Err(bad("too short"));
    }
    let num = |r: std::ops::Range<usize>| -> Result<i64, String> {
        let t = &s[r];
        if t.bytes().all(|c| c.is_ascii_digit()) {
            t.parse::<i64>().map_err(|_| bad("a field is not a number"))
        } else {
            Err(bad("a field is not a number"))
        }
    };
    let sep_ok = b[4] == b'-' && b[7] == b'-' && b[13] == b':' && b[16] == b':';
    if !sep_ok || !matches!(b[10], b'T' | b't' | b' ') {
        return Err(bad("expected YYYY-MM-DDTHH:MM:SS"));
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month) || day < 1 || day > days_in_month(year, month) {
        return Err(bad("no such date"));
    }
    // A leap second (:60) reads as the next second's start.
    if hour > 23 || minute > 59 || second > 60 {
        return Err(bad("no such time of day"));
    }
    let mut i = 19;
    let mut frac_us = 0i64;
    if b.get(i) == Some(&b'.') {
        i += 1;
        let start = i;
        while i < b.len() && b[i].is_ascii_digit() {
            i += 1;
        }
        if i == start {
            return Err(bad("no digits after the decimal point"));
        }
        let digits = &s[start..i.min(start + 6)];
        frac_us = digits.parse::<i64>().map_err(|_| bad("bad fraction"))?
            * 10i64.pow(6 - digits.len() as u32);
    }
    let offset_s = match &s[i..] {
        "Z" | "z" => 0,
        o if o.len() == 6 && matches!(o.as_bytes()[0], b'+' | b'-') && o.as_bytes()[3] == b':' => {
            let (h, m) = (num(i + 1..i + 3)?, num(i + 4..i + 6)?);
            if h > 23 || m > 59 {
                return Err(bad("bad offset"));
            }
            let sign = if o.starts_with('-') { -1 } else { 1 };
            sign * (h * 3600 + m * 60)
        }
        _ => return Err(bad("expected Z or an offset such as +01:00 at the end")),
    };
    let secs =
        days_from_civil(year, month, day) * 86_400 + hour * 3600 + minute * 60 + second - offset_s;
    Ok(secs * 1_000_000 + frac_us)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_with_microseconds_in_utc() {
        assert_eq!(format_rfc3339_us(0), "1970-01-01T00:00:00.000000Z");
        assert_eq!(
            format_rfc3339_us(1_796_292_000_123_456),
            "2026-12-03T10:00:00.123456Z"
        );
        assert_eq!(format_rfc3339_us(-1), "1969-12-31T23:59:59.999999Z");
    }

    #[test]
    fn parses_what_it_formats_and_any_offset() {
        for us in [
            0,
            1_796_292_000_123_456,
            951_782_400_000_001,
            -86_400_000_000,
        ] {
            assert_eq!(parse_rfc3339(&format_rfc3339_us(us)), Ok(us), "{us}");
        }
        let z = parse_rfc3339("2026-12-03T10:00:00Z").unwrap();
        assert_eq!(parse_rfc3339("2026-12-03T11:30:00+01:30"), Ok(z));
        assert_eq!(parse_rfc3339("2026-12-03 09:00:00-01:00"), Ok(z));
        assert_eq!(parse_rfc3339("2026-12-03t10:00:00.5z"), Ok(z + 500_000));
        assert_eq!(
            parse_rfc3339("2026-12-03T10:00:00.123456789Z"),
            Ok(z + 123_456)
        );
    }

    #[test]
    fn every_day_of_four_centuries_round_trips() {
        for days in -146_097..146_097 {
            let (y, m, d) = civil_from_days(days);
            assert_eq!(days_from_civil(y, m, d), days);
        }
    }

    #[test]
    fn rejects_what_is_not_rfc_3339() {
        for s in [
            "",
            "2026-12-03",
            "2026-12-03T10:00:00",
            "2026-02-30T10:00:00Z",
            "2026-12-03T25:00:00Z",
            "2026-12-03T10:00:00.Z",
            "2026-12-03T10:00:00+0100",
            "2026/12/03T10:00:00Z",
            "+5s",
        ] {
            assert!(parse_rfc3339(s).is_err(), "{s:?}");
        }
    }
}
