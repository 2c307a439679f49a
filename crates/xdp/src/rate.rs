//! Token bucket for per-thread packet pacing.
//!
//! Tokens accrue at `rate_per_s`. The sender waits for a burst of about
//! 500 µs of traffic (at least 1 frame, at most one TX batch), which keeps
//! trains short enough not to overflow a receiver at a rate it would
//! otherwise sustain. The bucket holds that burst plus 2 ms of tokens: a
//! sleep that wakes late (100 µs late is common on a VM) keeps the tokens it
//! overslept instead of losing them, so the achieved rate is the rate asked
//! for; after a longer gap the catch-up is at most that much.

/// Paces one sender thread.
#[derive(Debug, Clone)]
pub struct TokenBucket {
    rate_per_ns: f64,
    burst: f64,
    /// Most tokens held: the burst plus 2 ms of the rate.
    cap: f64,
    tokens: f64,
    last_ns: u64,
}

impl TokenBucket {
    /// A bucket that starts full at `now_ns`.
    pub fn new(rate_per_s: f64, max_batch: u32, now_ns: u64) -> Self {
        let burst = (rate_per_s * 500e-6).clamp(1.0, f64::from(max_batch.max(1)));
        TokenBucket {
            rate_per_ns: rate_per_s / 1e9,
            burst,
            cap: burst + rate_per_s * 2e-3,
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
            self.tokens = (self.tokens + add).min(self.cap);
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

    /// Returns `n` tokens taken but not used.
    #[inline]
    pub fn refund(&mut self, n: u32) {
        self.tokens = (self.tokens + f64::from(n)).min(self.cap);
    }

    /// Nanoseconds until `want` whole tokens (at most one burst) are
    /// available; 0 if they are. Waiting for a burst rather than a single
    /// token lets a slow sender sleep instead of spinning.
    pub fn wait_ns(&mut self, now_ns: u64, want: u32) -> u64 {
        self.refill(now_ns);
        let target = f64::from(want.max(1)).min(self.burst.floor()).max(1.0);
        if self.tokens >= target || self.rate_per_ns <= 0.0 {
            0
        } else {
            ((target - self.tokens) / self.rate_per_ns).ceil() as u64
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_releases_tokens_at_the_configured_rate() {
        let mut b = TokenBucket::new(1_000_000.0, 64, 0);
        // 1 Mpps → 500 µs burst = 500, capped to the batch.
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
        let mut b = TokenBucket::new(2_000.0, 64, 0);
        assert_eq!(b.burst(), 1.0);
        assert_eq!(b.take(0, 64), 1);
        assert_eq!(b.take(0, 64), 0);
        let near = |a: u64, b: u64| a.abs_diff(b) <= 1;
        assert!(near(b.wait_ns(0, 64), 500_000));
        assert!(near(b.wait_ns(300_000, 64), 200_000));
        // A burst of 10 at 20 kpps: wait for all 10 tokens, not just one.
        let mut c = TokenBucket::new(20_000.0, 64, 0);
        assert_eq!(c.take(0, 64), 10);
        assert!(near(c.wait_ns(0, 64), 500_000));
        assert!(near(c.wait_ns(0, 1), 50_000));
        // After a long idle gap at most the burst plus 2 ms of tokens
        // (1 + 4 at 2 kpps).
        assert_eq!(b.take(1_000_000_000, 64), 5);
    }

    #[test]
    fn a_late_wake_up_keeps_the_tokens_it_overslept() {
        // 10 kpps, burst 5: the sender sleeps for a burst and wakes 100 µs
        // late every time. Over 1 s it still sends 10k.
        let mut b = TokenBucket::new(10_000.0, 64, 0);
        let mut now = 0u64;
        let mut sent = u64::from(b.take(now, 64));
        while now < 1_000_000_000 {
            now += b.wait_ns(now, 64) + 100_000;
            sent += u64::from(b.take(now, 64));
        }
        assert!((9_900..=10_100).contains(&sent), "{sent}");
    }
}
