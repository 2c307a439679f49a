//! Latencies for people: a value in microseconds printed with the unit that
//! suits its size (`850µs`, `4.10ms`, `1.25s`).

/// How many decimals a latency keeps once it is in ms or s.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsStyle {
    /// Always two: `4.10ms`, `41.20ms` (one-line messages and progress).
    TwoDecimals,
    /// Two below 10 of the unit, one from 10 up: `4.10ms`, `41.2ms`, so that
    /// table columns stay narrow.
    Narrow,
}

/// A latency given in µs: whole µs below 1 ms, then ms, then s, with the
/// decimals of `style`.
pub fn fmt_us(us: f64, style: UsStyle) -> String {
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
}
