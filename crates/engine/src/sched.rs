//! Open-loop pacing: intended send times, the bounded queue of sends waiting
//! for a free connection, and the cap on catch-up bursts.
//!
//! Intended times advance on a fixed schedule whatever the server does. When
//! the worker falls behind (no free connection, or the loop was late), due
//! sends wait in a queue of bounded length — beyond it they are dropped and
//! counted — and leave through a token bucket refilled at twice the target
//! rate, so catching up never bursts above 2× the rate for longer than a
//! few milliseconds' worth of requests.

use std::collections::VecDeque;

use crate::plan::Arrival;

pub(crate) struct Schedule {
    /// Next intended send time, ns, as a float to keep fractional gaps exact.
    next_ns: f64,
    mean_gap_ns: f64,
    arrival: Arrival,
    rng: u64,
    queue: VecDeque<u64>,
    cap: usize,
    tokens: f64,
    tokens_per_ns: f64,
    burst: f64,
    refilled_ns: u64,
    /// Intended sends dropped because the queue was full.
    pub dropped: u64,
}

impl Schedule {
    pub fn new(
        rate_per_s: f64,
        arrival: Arrival,
        cap: usize,
        start_ns: u64,
        seed: u64,
    ) -> Schedule {
        let rate = rate_per_s.max(1e-9);
        let mean_gap_ns = 1e9 / rate;
        let tokens_per_ns = 2.0 * rate / 1e9;
        // At least two sends may leave back to back; otherwise 5 ms of 2× rate.
        let burst = (2.0 * rate * 0.005).max(2.0);
        let mut s = Schedule {
            next_ns: start_ns as f64,
            mean_gap_ns,
            arrival,
            rng: seed | 1,
            queue: VecDeque::with_capacity(cap.max(1)),
            cap: cap.max(1),
            tokens: burst,
            tokens_per_ns,
            burst,
            refilled_ns: start_ns,
            dropped: 0,
        };
        s.next_ns += s.gap();
        s
    }

    fn gap(&mut self) -> f64 {
        match self.arrival {
            Arrival::Uniform => self.mean_gap_ns,
            Arrival::Poisson => {
                // xorshift64*: fast, no allocation, good enough for arrival jitter.
                self.rng ^= self.rng >> 12;
                self.rng ^= self.rng << 25;
                self.rng ^= self.rng >> 27;
                let r = self.rng.wrapping_mul(0x2545_f491_4f6c_dd1d);
                let u = ((r >> 11) as f64 + 0.5) / (1u64 << 53) as f64;
                -u.ln() * self.mean_gap_ns
            }
        }
    }

    /// Moves every intended time that is due at `now_ns` into the queue and
    /// refills the burst tokens.
    pub fn advance(&mut self, now_ns: u64) {
        let now = now_ns as f64;
        while self.next_ns <= now {
            if self.queue.len() < self.cap {
                self.queue.push_back(self.next_ns as u64);
            } else {
                self.dropped += 1;
            }
            self.next_ns += self.gap();
        }
        if now_ns > self.refilled_ns {
            self.tokens = (self.tokens + (now_ns - self.refilled_ns) as f64 * self.tokens_per_ns)
                .min(self.burst);
            self.refilled_ns = now_ns;
        }
    }

    /// The intended time of the next send allowed to leave now, if any.
    #[inline]
    pub fn take(&mut self) -> Option<u64> {
        if self.tokens < 1.0 || self.queue.is_empty() {
            return None;
        }
        self.tokens -= 1.0;
        self.queue.pop_front()
    }

    /// Sends waiting for a connection or a token.
    #[cfg(test)]
    pub fn queued(&self) -> usize {
        self.queue.len()
    }

    /// When the loop must look again: the next intended time, or sooner when
    /// queued sends wait only for a token.
    pub fn wake_ns(&self) -> u64 {
        let next = self.next_ns.max(0.0) as u64;
        if !self.queue.is_empty() && self.tokens < 1.0 {
            let wait = ((1.0 - self.tokens) / self.tokens_per_ns).ceil() as u64;
            next.min(self.refilled_ns + wait)
        } else {
            next
        }
    }

    /// Forget queued sends (e.g. at the end of the run).
    pub fn clear(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uniform_schedule_emits_rate_times_seconds() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 10_000, 0, 1);
        let mut sent = 0;
        for ms in 1..=1000u64 {
            s.advance(ms * 1_000_000);
            while s.take().is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 1000);
        assert_eq!(s.dropped, 0);
    }

    #[test]
    fn poisson_mean_rate_is_close() {
        let mut s = Schedule::new(10_000.0, Arrival::Poisson, 1_000_000, 0, 42);
        s.advance(10_000_000_000);
        let q = s.queued() as f64;
        assert!((q - 100_000.0).abs() < 2_000.0, "{q}");
    }

    #[test]
    fn queue_is_capped_and_drops_are_counted() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 5, 0, 1);
        s.advance(100_000_000); // 100 due, nobody takes them
        assert_eq!(s.queued(), 5);
        assert_eq!(s.dropped, 95);
    }

    #[test]
    fn catch_up_never_exceeds_twice_the_rate() {
        // The loop stalls for 100 ms, then takes as fast as it can.
        let rate = 10_000.0;
        let mut s = Schedule::new(rate, Arrival::Uniform, 100_000, 0, 1);
        s.advance(100_000_000);
        let mut taken = 0u64;
        let mut now = 100_000_000u64;
        // For the next 20 ms, count what leaves in each 1 ms window.
        for _ in 0..20 {
            now += 1_000_000;
            s.advance(now);
            let mut in_window = 0;
            while s.take().is_some() {
                in_window += 1;
            }
            taken += in_window;
            // 2× rate over 1 ms is 20; the initial burst allowance is 100.
            assert!(in_window <= 20 + 100, "{in_window}");
        }
        // Over 20 ms at most 2×rate×20ms + burst.
        assert!(taken <= 400 + 100, "{taken}");
        assert!(taken >= 300, "it does catch up: {taken}");
    }

    #[test]
    fn wake_time_points_at_the_next_due_send() {
        let s = Schedule::new(1000.0, Arrival::Uniform, 10, 5_000_000, 1);
        assert_eq!(s.wake_ns(), 6_000_000);
    }
}
