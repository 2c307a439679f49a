//! A small seeded generator and weighted draws: plans and sessions must be
//! reproducible from a seed, and no draw allocates.

/// xorshift64* seeded through splitmix64 (the engine's arrival jitter uses the same).
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        Rng((z ^ (z >> 31)).max(1))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Cumulative weights for drawing an index in O(log n).
#[derive(Clone, Debug, PartialEq)]
pub struct Cdf(Vec<f64>);

impl Cdf {
    /// From weights (>= 0, not all zero).
    pub fn new(weights: impl IntoIterator<Item = f64>) -> Self {
        let mut total = 0.0;
        let mut cum: Vec<f64> = weights
            .into_iter()
            .map(|w| {
                total += w;
                total
            })
            .collect();
        for c in &mut cum {
            *c /= total;
        }
        Cdf(cum)
    }

    /// Zipf over `n` ranks: rank k (1-based) has weight 1/k^s.
    pub fn zipf(n: usize, s: f64) -> Self {
        Cdf::new((1..=n).map(|k| (k as f64).powf(-s)))
    }

    pub fn uniform(n: usize) -> Self {
        Cdf::new((0..n).map(|_| 1.0))
    }

    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The index whose cumulative share first exceeds a uniform draw.
    pub fn draw(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.0.partition_point(|&c| c <= u).min(self.0.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_draws_favour_low_ranks_in_proportion() {
        let cdf = Cdf::zipf(4, 1.0);
        let mut rng = Rng::new(7);
        let mut counts = [0u32; 4];
        for _ in 0..100_000 {
            counts[cdf.draw(&mut rng)] += 1;
        }
        // Weights 1, 1/2, 1/3, 1/4 of 25/12.
        let expect = [0.48, 0.24, 0.16, 0.12];
        for (c, e) in counts.iter().zip(expect) {
            assert!((*c as f64 / 100_000.0 - e).abs() < 0.01, "{counts:?}");
        }
    }

    #[test]
    fn zero_weights_are_never_drawn() {
        let cdf = Cdf::new([0.0, 1.0, 0.0]);
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| cdf.draw(&mut rng) == 1));
    }
}
