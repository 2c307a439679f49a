//! Latency limits judged against what a class measured.

use std::time::Duration;

use crate::model::Limits;

/// One limit and how the class did against it.
#[derive(Clone, Debug, PartialEq)]
pub struct LimitVerdict {
    /// `mean` or `p99`, `p99.9`...
    pub name: String,
    pub limit: Duration,
    pub measured: Duration,
    pub pass: bool,
}

impl Limits {
    /// Judges every limit. `quantile(q)` gives the latency at quantile q in
    /// [0, 1] (e.g. from the class's histogram). A class with no responses
    /// fails every limit: nothing shows it met them.
    pub fn judge(
        &self,
        count: u64,
        mean: Duration,
        quantile: impl Fn(f64) -> Duration,
    ) -> Vec<LimitVerdict> {
        let mut out = Vec::new();
        if let Some(limit) = self.mean {
            out.push(LimitVerdict {
                name: "mean".into(),
                limit,
                measured: mean,
                pass: count > 0 && mean <= limit,
            });
        }
        for &(share, limit) in &self.percentiles {
            let measured = quantile(share / 100.0);
            out.push(LimitVerdict {
                name: format!("p{share}"),
                limit,
                measured,
                pass: count > 0 && measured <= limit,
            });
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn judges_mean_and_tail() {
        let ms = Duration::from_millis;
        let l = Limits {
            mean: Some(ms(10)),
            percentiles: vec![(99.0, ms(50)), (99.9, ms(80))],
        };
        let v = l.judge(100, ms(8), |q| if q >= 0.999 { ms(90) } else { ms(40) });
        let names: Vec<_> = v.iter().map(|v| (v.name.as_str(), v.pass)).collect();
        assert_eq!(names, [("mean", true), ("p99", true), ("p99.9", false)]);
        assert!(l.judge(0, ms(0), |_| ms(0)).iter().all(|v| !v.pass));
    }
}
