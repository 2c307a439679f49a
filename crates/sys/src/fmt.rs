//! Figures for people, one formatter per kind: latencies in microseconds
//! printed with the unit that suits their size (`850µs`, `4.10ms`, `1.25s`),
//! counts with thousands separators, rates, byte sizes in binary units.

/// How many decimals a latency keeps once it is in ms or s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsStyle {
    /// Always two: `4.10ms`, `41.20ms` (one-line messages and progress).
    TwoDecimals,
    /// Two below 10 of the unit, one from 10 up: `4.10ms`, `41.2ms`, so that
    /// table columns stay narrow.
    Narrow,
    /// About three significant digits from ns to hours, for reports:
    /// `850ns`, `41.2µs`, `4.10ms`, `2m05s`; `-` for non-finite or negative
    /// input ([`fmt_duration_us`]).
    ThreeDigits,
}

/// A latency given in µs: whole µs below 1 ms, then ms, then s, with the
/// decimals of `style` ([`UsStyle::ThreeDigits`] has its own units).
pub fn fmt_us(us: f64, style: UsStyle) -> String {
    if style == UsStyle::ThreeDigits {
        return fmt_duration_us(us);
    }
    let (value, unit) = if us >= 1e6 {
        (us / 1e6, "s")
    } else if us >= 1e3 {
        (us / 1e3, "ms")
    } else {
        return format!("{us:.0}µs");
    };
    if style == UsStyle::Narrow && value >= 10.0 {
        format!("{value:.1}{unit}")
    } else {
        format!("{value:.2}{unit}")
    }
}

/// A duration given in µs, with ns/µs/ms/s/min chosen so that about three
/// significant digits show: `850ns`, `5µs`, `41.2µs`, `412µs`, `4.10ms`,
/// `1.20s`, `2m05s`. Non-finite or negative input prints as `-`.
pub fn fmt_duration_us(us: f64) -> String {
    if !us.is_finite() || us < 0.0 {
        return "-".to_string();
    }
    if us == 0.0 {
        return "0µs".to_string();
    }
    if us < 1.0 {
        return format!("{}ns", (us * 1000.0).round() as u64);
    }
    // Thresholds at x.5 below the next unit so that rounding never prints
    // "1000µs" instead of "1.00ms".
    if us < 999.5 {
        return if us.fract() == 0.0 {
            format!("{}µs", us as u64)
        } else {
            format!("{}µs", sig3(us))
        };
    }
    if us < 999_500.0 {
        return format!("{}ms", sig3(us / 1_000.0));
    }
    if us < 59_995_000.0 {
        return format!("{}s", sig3(us / 1_000_000.0));
    }
    let total_s = (us / 1_000_000.0).round() as u64;
    if total_s < 3600 {
        format!("{}m{:02}s", total_s / 60, total_s % 60)
    } else {
        format!("{}h{:02}m", total_s / 3600, (total_s % 3600) / 60)
    }
}

/// `x` with three significant digits (x in [1, 1000)): 4.10, 41.2, 412.
/// Values that round up to the next decade keep three digits (999.7 -> 1000).
fn sig3(x: f64) -> String {
    if x < 9.995 {
        format!("{x:.2}")
    } else if x < 99.95 {
        format!("{x:.1}")
    } else {
        format!("{x:.0}")
    }
}

/// `n` with thousands separators: `2,131,004`.
pub fn fmt_count(n: u64) -> String {
    let digits = n.to_string();
    let groups: Vec<&str> = digits
        .as_bytes()
        .rchunks(3)
        .rev()
        // Decimal digits are ASCII, so every 3-byte chunk is valid UTF-8.
        .map(|g| std::str::from_utf8(g).unwrap_or("?"))
        .collect();
    groups.join(",")
}

/// A rate per second: whole numbers with separators from 100 up
/// (`213,100`), two decimals below (`12.50`). Non-finite prints as `-`.
pub fn fmt_rate(per_s: f64) -> String {
    if !per_s.is_finite() || per_s < 0.0 {
        return "-".to_string();
    }
    if per_s >= 100.0 {
        fmt_count(per_s.round() as u64)
    } else {
        format!("{per_s:.2}")
    }
}

/// Bytes in binary units: `850 B`, `12.0 KiB`, `31.2 MiB`, `1.20 GiB`.
pub fn fmt_bytes(bytes: f64) -> String {
    if !bytes.is_finite() || bytes < 0.0 {
        return "-".to_string();
    }
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024.0 {
        return format!("{} B", bytes.round() as u64);
    }
    let mut v = bytes / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{} {}", sig3(v.max(1.0)), UNITS[unit])
}

/// Seconds with two decimals and a unit: `10.00s`.
pub fn fmt_seconds(s: f64) -> String {
    if !s.is_finite() || s < 0.0 {
        return "-".to_string();
    }
    format!("{s:.2}s")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_style_picks_the_unit_by_size() {
        let table: &[(f64, &str, &str)] = &[
            (0.0, "0µs", "0µs"),
            (850.0, "850µs", "850µs"),
            (999.0, "999µs", "999µs"),
            (1_000.0, "1.00ms", "1.00ms"),
            (4_100.0, "4.10ms", "4.10ms"),
            (41_234.0, "41.23ms", "41.2ms"),
            (999_999.0, "1000.00ms", "1000.0ms"),
            (1_250_000.0, "1.25s", "1.25s"),
            (12_340_000.0, "12.34s", "12.3s"),
        ];
        for &(us, two, narrow) in table {
            assert_eq!(fmt_us(us, UsStyle::TwoDecimals), two, "{us}");
            assert_eq!(fmt_us(us, UsStyle::Narrow), narrow, "{us}");
        }
    }

    #[test]
    fn durations_pick_a_unit_with_three_significant_digits() {
        let cases = [
            (0.0, "0µs"),
            (0.85, "850ns"),
            (1.0, "1µs"),
            (5.0, "5µs"),
            (4.123, "4.12µs"),
            (41.25, "41.2µs"),
            (412.0, "412µs"),
            (412.3, "412µs"),
            (999.0, "999µs"),
            (999.7, "1.00ms"),
            (4_100.0, "4.10ms"),
            (41_000.0, "41.0ms"),
            (410_000.0, "410ms"),
            (999_600.0, "1.00s"),
            (1_200_000.0, "1.20s"),
            (59_000_000.0, "59.0s"),
            (125_000_000.0, "2m05s"),
            (3_600_000_000.0, "1h00m"),
            (f64::NAN, "-"),
            (f64::INFINITY, "-"),
            (-1.0, "-"),
        ];
        for (us, want) in cases {
            assert_eq!(fmt_duration_us(us), want, "{us} µs");
        }
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(fmt_count(0), "0");
        assert_eq!(fmt_count(999), "999");
        assert_eq!(fmt_count(1_000), "1,000");
        assert_eq!(fmt_count(2_131_004), "2,131,004");
        assert_eq!(fmt_count(u64::MAX), "18,446,744,073,709,551,615");
    }

    #[test]
    fn rates_and_bytes_carry_units_and_never_print_nan() {
        assert_eq!(fmt_rate(213_100.4), "213,100");
        assert_eq!(fmt_rate(12.5), "12.50");
        assert_eq!(fmt_rate(f64::NAN), "-");
        assert_eq!(fmt_bytes(850.0), "850 B");
        assert_eq!(fmt_bytes(12.0 * 1024.0), "12.0 KiB");
        assert_eq!(fmt_bytes(31.2 * 1024.0 * 1024.0), "31.2 MiB");
        assert_eq!(fmt_bytes(1.2 * 1024.0 * 1024.0 * 1024.0), "1.20 GiB");
        assert_eq!(fmt_bytes(f64::NAN), "-");
        assert_eq!(fmt_seconds(10.0), "10.00s");
    }

    #[test]
    fn the_three_digit_style_is_the_report_duration() {
        for us in [0.85, 41.25, 999.7, 4_100.0, 125_000_000.0, f64::NAN] {
            assert_eq!(
                fmt_us(us, UsStyle::ThreeDigits),
                fmt_duration_us(us),
                "{us}"
            );
        }
    }
}
