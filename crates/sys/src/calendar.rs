//! UTC calendar fields of a Unix time, for the few places that print a date
//! (xtune's snapshot names, xload serve's `Date` header) without a date crate.

/// A second since the Unix epoch, in the proleptic Gregorian calendar, UTC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Utc {
    pub year: u64,
    /// 1-12.
    pub month: u32,
    /// 1-31.
    pub day: u32,
    pub hour: u32,
    pub minute: u32,
    pub second: u32,
    /// 0 = Sunday … 6 = Saturday.
    pub weekday: u32,
}

/// The calendar fields of `secs` seconds after 1970-01-01 00:00:00 UTC.
pub fn utc(secs: u64) -> Utc {
    let days = secs / 86_400;
    let rem = secs % 86_400;
    let (year, month, day) = civil_from_days(days as i64);
    Utc {
        year: year as u64,
        month: month as u32,
        day: day as u32,
        hour: (rem / 3600) as u32,
        minute: (rem / 60 % 60) as u32,
        second: (rem % 60) as u32,
        // 1970-01-01 was a Thursday.
        weekday: ((days + 4) % 7) as u32,
    }
}

/// The (year, month, day) of a day since 1970-01-01, negative before
/// (H. Hinnant's `civil_from_days`).
pub fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's
/// `days_from_civil`).
pub fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Days in `month` (1-12) of `year`.
pub fn days_in_month(year: i64, month: i64) -> i64 {
    let leap = (year % 4 == 0 && year % 100 != 0) || year % 400 == 0;
    match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_day_of_four_centuries_is_the_next_one() {
        // Against a plain day-by-day count from 1970: every date well formed,
        // each day one more than the last.
        let (mut y, mut m, mut d) = (1970u64, 1u32, 1u32);
        for days in 0..146_097u64 {
            let u = utc(days * 86_400);
            assert_eq!((u.year, u.month, u.day), (y, m, d), "day {days}");
            let leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
            let len = [
                31,
                if leap { 29 } else { 28 },
                31,
                30,
                31,
                30,
                31,
                31,
                30,
                31,
                30,
                31,
            ];
            d += 1;
            if d > len[(m - 1) as usize] {
                d = 1;
                m += 1;
                if m > 12 {
                    m = 1;
                    y += 1;
                }
            }
        }
    }

    #[test]
    fn time_of_day_and_weekday() {
        // RFC 9110's example date: Sun, 06 Nov 1994 08:49:37 GMT.
        let u = utc(784_111_777);
        assert_eq!(
            (u.year, u.month, u.day, u.hour, u.minute, u.second, u.weekday),
            (1994, 11, 6, 8, 49, 37, 0)
        );
        assert_eq!(utc(0).weekday, 4, "a Thursday");
    }
}
