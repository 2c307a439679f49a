//! File size distributions for `xload files generate --sizes DIST`:
//!
//! - `specweb`: SPECweb99's four classes (also the shape of SPECweb2009's
//!   static sets): k × 102 B, k × 1 KiB, k × 10 KiB, k × 100 KiB for k = 1..9,
//!   the classes drawn 35 %, 50 %, 14 %, 1 % (mean about 15 KB);
//! - `fixed:SIZE`;
//! - `uniform:MIN..MAX` (both included);
//! - `list:SIZE:WEIGHT,SIZE:WEIGHT,...` (e.g. `list:1k:40,10k:30,100k:20,1m:10`).
//!
//! SIZE is bytes with an optional `k`, `m` or `g` (× 1024, 1024², 1024³).

use crate::rng::Rng;
use crate::Error;

/// Largest file a set may hold: the largest body `xload serve` answers.
pub const MAX_FILE_SIZE: u64 = 64 << 20;

/// Sizes drawn from weighted ranges.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SizeDist {
    /// (min, max, weight): a range is picked by weight, then a size in it uniformly.
    ranges: Vec<(u64, u64, u64)>,
    total: u64,
}

impl SizeDist {
    /// Parses DIST (see the module's grammar).
    pub fn parse(s: &str) -> Result<SizeDist, Error> {
        let bad = |why: String| Error::Invalid(format!("--sizes {s:?}: {why}"));
        let (kind, arg) = s.split_once(':').unwrap_or((s, ""));
        let ranges = match kind {
            "specweb" if arg.is_empty() => [(102, 35), (1024, 50), (10240, 14), (102400, 1)]
                .iter()
                .flat_map(|&(base, w)| (1..=9).map(move |k| (k * base, k * base, w)))
                .collect(),
            "fixed" => {
                let n = parse_size(arg).map_err(bad)?;
                vec![(n, n, 1)]
            }
            "uniform" => {
                let (lo, hi) = arg
                    .split_once("..")
                    .ok_or_else(|| bad("expected uniform:MIN..MAX".into()))?;
                let (lo, hi) = (parse_size(lo).map_err(bad)?, parse_size(hi).map_err(bad)?);
                if lo > hi {
                    return Err(bad(format!("MIN {lo} is larger than MAX {hi}")));
                }
                vec![(lo, hi, 1)]
            }
            "list" => {
                let mut v = Vec::new();
                for item in arg.split(',') {
                    let (size, w) = item
                        .split_once(':')
                        .ok_or_else(|| bad(format!("expected SIZE:WEIGHT, not {item:?}")))?;
                    let n = parse_size(size).map_err(bad)?;
                    let w: u64 = w
                        .parse()
                        .map_err(|_| bad(format!("weight {w:?} is not a whole number")))?;
                    v.push((n, n, w));
                }
                v
            }
            _ => {
                return Err(bad(
                    "expected specweb, fixed:SIZE, uniform:MIN..MAX or list:SIZE:WEIGHT,...".into(),
                ))
            }
        };
        let total = ranges.iter().map(|r| r.2).sum();
        if total == 0 {
            return Err(bad("the weights add up to 0".into()));
        }
        Ok(SizeDist { ranges, total })
    }

    /// One size drawn with `rng`.
    pub(crate) fn sample(&self, rng: &mut Rng) -> u64 {
        let mut pick = rng.below(self.total);
        for &(lo, hi, w) in &self.ranges {
            if pick < w {
                return lo + rng.below(hi - lo + 1);
            }
            pick -= w;
        }
        unreachable!("pick < total, the sum of the weights")
    }
}

/// Bytes with an optional `k`, `m` or `g` (binary multiples), at most
/// [`MAX_FILE_SIZE`].
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (digits, mult) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1 << 10),
        Some('m') => (&t[..t.len() - 1], 1 << 20),
        Some('g') => (&t[..t.len() - 1], 1 << 30),
        _ => (t, 1),
    };
    let n: u64 = digits
        .parse()
        .map_err(|_| format!("{s:?} is not a size (bytes, or with k, m, g)"))?;
    match n.checked_mul(mult) {
        Some(b) if b <= MAX_FILE_SIZE => Ok(b),
        _ => Err(format!("{s:?} is larger than the 64 MiB a file may have")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_take_binary_suffixes() {
        assert_eq!(parse_size("0"), Ok(0));
        assert_eq!(parse_size("10k"), Ok(10240));
        assert_eq!(parse_size("1M"), Ok(1 << 20));
        assert_eq!(parse_size("64m"), Ok(MAX_FILE_SIZE));
        assert!(parse_size("65m").unwrap_err().contains("64 MiB"));
        assert!(parse_size("1g").is_err());
        assert!(parse_size("x").unwrap_err().contains("not a size"));
        assert!(parse_size("").is_err());
    }

    #[test]
    fn every_form_parses_and_samples_within_its_ranges() {
        let mut rng = Rng::new(7);
        let d = SizeDist::parse("fixed:2k").unwrap();
        assert_eq!(d.sample(&mut rng), 2048);
        let d = SizeDist::parse("uniform:10..20").unwrap();
        assert!((0..1000)
            .map(|_| d.sample(&mut rng))
            .all(|s| (10..=20).contains(&s)));
        let d = SizeDist::parse("list:1k:1,1m:0").unwrap();
        assert!((0..100).all(|_| d.sample(&mut rng) == 1024));
        let d = SizeDist::parse("specweb").unwrap();
        let sizes: Vec<u64> = (0..20_000).map(|_| d.sample(&mut rng)).collect();
        let small = sizes.iter().filter(|&&s| s < 1024).count() as f64 / 20_000.0;
        let large = sizes.iter().filter(|&&s| s >= 102_400).count() as f64 / 20_000.0;
        assert!((0.33..0.37).contains(&small), "{small}");
        assert!((0.005..0.015).contains(&large), "{large}");
        assert!(sizes.iter().all(|&s| (102..=921_600).contains(&s)));
    }

    #[test]
    fn bad_distributions_say_what_is_expected() {
        let err = |s: &str| SizeDist::parse(s).unwrap_err().to_string();
        assert!(err("zipf").contains("expected specweb, fixed:SIZE"));
        assert!(err("uniform:5").contains("uniform:MIN..MAX"));
        assert!(err("uniform:9..5").contains("larger than MAX"));
        assert!(err("list:1k").contains("SIZE:WEIGHT"));
        assert!(err("list:1k:x").contains("whole number"));
        assert!(err("list:1k:0").contains("add up to 0"));
        assert!(err("fixed:1t").contains("not a size"));
        assert!(SizeDist::parse("specweb:1").is_err());
        assert!(SizeDist::parse("zipf").unwrap_err().is_usage());
    }
}
