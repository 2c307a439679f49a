//! Token bucket for per-thread packet pacing.
//!
//! Tokens accrue at `rate_per_s`; the bucket holds at most `burst` of them,
//! so after an idle gap the sender catches up by at most one burst. The
//! burst is sized to about 100 µs of traffic (at least 1 frame, at most one
//! TX batch), which keeps trains short enough not to overflow a receiver at
//! a rate it would otherwise sustain.

/// Paces one sender thread.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_ns: f64,
    burst: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// A bucket that starts full at `now_ns`.
    pub fn new(rate_per_s: f64, max_batch: u32, now_ns: u64) -> Self {
        let burst = (rate_per_s * 100e-6).clamp(1.0, f64::from(max_batch.max(1)));
        TokenBucket {
            rate_per_ns: rate_per_s / 1e9,
            burst,
            tokens: burst,
            last_ns: now_ns,
        }
    }

    /// Burst size in frames.
    pub fn burst(&self) -> f64 {
        self.burst
    }

    fn refill(&mut self, now_ns: u64) {
        if now_ns > self.last_ns {
            let add = (now_ns - self.last_ns) as f64 * self.rate_per_ns;
            self.tokens = (self.tokens + add).min(self.burst);
            self.last_ns = now_ns;
        }
    }

    /// Takes up to `want` whole tokens; returns how many were taken.
    #[inline]
    pub fn take(&mut self, now_ns: u64, want: u32) -> u32 {
        self.refill(now_ns);
        let n = (self.tokens.floor() as u32).min(want);
        self.tokens -= f64::from(n);
        n
    }

    /// Nanoseconds until one whole token is available (0 if one is).
    pub fn wait_ns(&mut self, now_ns: u64) -> u64 {
        self.refill(now_ns);
        if self.tokens >= 1.0 || self.rate_per_ns <= 0.0 {
            0
        } else {
            ((1.0 - self.tokens) / self.rate_per_ns).ceil() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_releases_tokens_at_the_configured_rate() {
        let mut b = TokenBucket::new(1_000_000.0, 64, 0);
        // 1 Mpps → 100 µs burst = 64 capped to the batch.
        assert_eq!(b.burst(), 64.0);
        let mut taken = b.take(0, 64) as u64;
        let mut now = 0;
        // Simulate 10 ms in 1 µs steps.
        while now < 10_000_000 {
            now += 1000;
            taken += u64::from(b.take(now, 64));
        }
        // 10 000 tokens accrued plus the initial burst.
        assert!((10_000..=10_064).contains(&taken), "{taken}");
    }

    #[test]
    fn bucket_caps_catch_up_after_idle_and_reports_wait() {
        let mut b = TokenBucket::new(10_000.0, 64, 0);
        assert_eq!(b.burst(), 1.0);
        assert_eq!(b.take(0, 64), 1);
        assert_eq!(b.take(0, 64), 0);
        assert_eq!(b.wait_ns(0), 100_000);
        assert_eq!(b.wait_ns(60_000), 40_000);
        // After a long idle gap only one burst is available.
        assert_eq!(b.take(1_000_000_000, 64), 1);
    }
}
