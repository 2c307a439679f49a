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
    /// Where the schedule's clock starts (monotonic ns).
    base_ns: u64,
    /// Next intended send time, ns after `base_ns`, as a float to keep
    /// fractional gaps exact (relative, so a 1 ns gap stays representable
    /// however long the host has been up).
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
    /// Intended sends dropped because the queue was full (and, after
    /// [`Schedule::finish`], those of the window still queued at its end).
    pub dropped: u64,
}

/// Spreads a seed over the generator's state (Vigna's splitmix64): seeds
/// that differ in one bit (2 and 3) give unrelated sequences, and no seed
/// gives the all-zero state xorshift cannot leave.
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

impl Schedule {
    pub(crate) fn new(
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
            base_ns: start_ns,
            next_ns: 0.0,
            mean_gap_ns,
            arrival,
            rng: splitmix64(seed).max(1),
            queue: VecDeque::with_capacity(cap.max(1)),
            cap: cap.max(1),
            tokens: burst,
            tokens_per_ns,
            burst,
            refilled_ns: start_ns,
            dropped: 0,
        };
        // A uniform schedule sends at its start, then every gap: a window
        // of D seconds intends rate × D sends. A Poisson one starts a gap
        // in (memoryless: the same mean count).
        if arrival == Arrival::Poisson {
            s.next_ns += s.gap();
        }
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

    /// Starts the schedule again at `now_ns`, as if made then: the loop
    /// could not send before (no connection was open yet), so what came due
    /// before is not intended, and not late.
    pub(crate) fn rebase(&mut self, now_ns: u64) {
        self.base_ns = now_ns;
        self.next_ns = 0.0;
        if self.arrival == Arrival::Poisson {
            self.next_ns += self.gap();
        }
        self.queue.clear();
        self.tokens = self.burst;
        self.refilled_ns = now_ns;
        self.dropped = 0;
    }

    /// Moves every intended time that is due at `now_ns` into the queue and
    /// refills the burst tokens.
    ///
    /// Bounded work whatever the rate or the time since the last call: once
    /// the queue is full, everything else due is dropped in one step.
    pub(crate) fn advance(&mut self, now_ns: u64) {
        let now = now_ns.saturating_sub(self.base_ns) as f64;
        while self.next_ns <= now {
            if self.queue.len() < self.cap {
                self.queue.push_back(self.base_ns + self.next_ns as u64);
                self.next_ns += self.gap();
            } else {
                // The mean gap stands in for Poisson gaps here: these sends
                // are counted, not timed.
                let due = ((now - self.next_ns) / self.mean_gap_ns).floor() + 1.0;
                self.dropped += due as u64;
                self.next_ns += due * self.mean_gap_ns;
            }
        }
        if now_ns > self.refilled_ns {
            self.tokens = (self.tokens + (now_ns - self.refilled_ns) as f64 * self.tokens_per_ns)
                .min(self.burst);
            self.refilled_ns = now_ns;
        }
    }

    /// The intended time of the next send allowed to leave now, if any.
    #[inline]
    pub(crate) fn take(&mut self) -> Option<u64> {
        if self.tokens < 1.0 || self.queue.is_empty() {
            return None;
        }
        self.tokens -= 1.0;
        self.queue.pop_front()
    }

    /// Sends are due and wait (for a connection or a token).
    #[inline]
    pub(crate) fn has_queued(&self) -> bool {
        !self.queue.is_empty()
    }

    /// The intended times of the sends still waiting, oldest first.
    pub(crate) fn queued_intended(&self) -> impl Iterator<Item = u64> + '_ {
        self.queue.iter().copied()
    }

    /// Sends waiting for a connection or a token.
    #[cfg(test)]
    pub(crate) fn queued(&self) -> usize {
        self.queue.len()
    }

    /// When the loop must look again: the next intended time, or sooner when
    /// queued sends wait only for a token.
    pub(crate) fn wake_ns(&self) -> u64 {
        let next = self.base_ns + self.next_ns.max(0.0) as u64;
        if !self.queue.is_empty() && self.tokens < 1.0 {
            let wait = ((1.0 - self.tokens) / self.tokens_per_ns).ceil() as u64;
            next.min(self.refilled_ns + wait)
        } else {
            next
        }
    }

    /// The measured window starts: drops count from here, and the sends
    /// still waiting were the warm-up's. They are let go, not sent: sent in
    /// the window (up to a second of them, at twice the rate) they made it
    /// carry more than rate × duration (a 150,250/s step measured 161,319
    /// req/s) and counted as its late sends.
    pub(crate) fn start_window(&mut self) {
        self.dropped = 0;
        self.queue.clear();
    }

    /// Ends the schedule: sends still waiting for a connection or a token
    /// were never sent and count as dropped (all were intended in the
    /// window, [`Schedule::start_window`]), so that the window's intended
    /// sends are the sent plus the dropped.
    pub(crate) fn finish(&mut self) {
        self.dropped += self.queue.len() as u64;
        self.queue.clear();
    }

    /// Ends the schedule without counting what waits: the run stopped
    /// intending sends (its request quota was met), none was refused.
    pub(crate) fn abandon(&mut self) {
        self.queue.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn poisson_gaps_follow_the_seed() {
        let gaps = |seed| {
            let mut s = Schedule::new(1000.0, Arrival::Poisson, 10_000, 0, seed);
            (0..5).map(|_| s.gap() as u64).collect::<Vec<_>>()
        };
        assert_eq!(gaps(7), gaps(7), "a seed repeats its arrivals");
        assert_ne!(gaps(7), gaps(8), "another seed, other arrivals");
        assert_ne!(gaps(2), gaps(3), "seeds a bit apart too");
        assert_ne!(gaps(0), gaps(1));
    }

    #[test]
    fn uniform_schedule_emits_rate_times_seconds() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 10_000, 0, 1);
        let mut sent = 0;
        // The window [0, 1 s): sends at 0, 1, ..., 999 ms.
        for ms in 0..1000u64 {
            s.advance(ms * 1_000_000);
            while s.take().is_some() {
                sent += 1;
            }
        }
        assert_eq!(sent, 1000);
        assert_eq!(s.dropped, 0);
    }

    #[test]
    fn rebase_starts_over_without_late_or_dropped_sends() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 5, 0, 1);
        s.advance(100_000_000); // 100 ms without a connection
        assert_eq!(s.dropped, 96);
        s.rebase(100_000_000);
        assert_eq!((s.queued(), s.dropped), (0, 0));
        s.advance(100_000_000);
        assert_eq!(
            s.take(),
            Some(100_000_000),
            "the first send is due at the new start"
        );
        s.advance(100_500_000);
        assert_eq!(s.take(), None);
        s.advance(101_000_000);
        assert_eq!(s.take(), Some(101_000_000));
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
        s.advance(100_000_000); // 101 due (0 to 100 ms), nobody takes them
        assert_eq!(s.queued(), 5);
        assert_eq!(s.dropped, 96);
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
    fn any_rate_and_any_gap_advance_in_bounded_steps() {
        // One send per ns on a host up for 200 days (2^54 ns: beyond f64's
        // integer precision), and the loop away for a whole second.
        let start = 1u64 << 54;
        let mut s = Schedule::new(1e9, Arrival::Uniform, 1000, start, 1);
        let t = std::time::Instant::now();
        s.advance(start + 1_000_000_000);
        assert!(t.elapsed() < std::time::Duration::from_millis(100));
        assert_eq!(s.queued(), 1000);
        // 1e9 due over the second (the first one at +1 ns): all but the queue dropped.
        assert!(
            (s.dropped as i64 - (1_000_000_000 - 1000)).abs() <= 1,
            "{}",
            s.dropped
        );
        assert!(s.wake_ns() > start + 1_000_000_000);
        // Poisson too, and what is left in the queue at the end is dropped.
        let mut p = Schedule::new(1e9, Arrival::Poisson, 10, start, 7);
        p.advance(start + 10_000_000);
        assert_eq!(p.queued(), 10);
        p.finish();
        assert_eq!(p.queued(), 0);
        assert!((p.dropped as f64 - 1e7).abs() < 1e5, "{}", p.dropped);
    }

    #[test]
    fn sends_still_queued_at_the_end_count_as_dropped_if_the_window_intended_them() {
        // 1000/s, 2 queued before the window (0 and 1 ms), 5 more intended
        // in it ([2 ms, 7 ms): its end is not), none sent.
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 100, 0, 1);
        s.advance(2_000_000 - 1);
        s.start_window();
        s.advance(7_000_000 - 1);
        assert_eq!(s.queued(), 5, "the warm-up's 2 were let go");
        s.finish();
        assert_eq!(s.dropped, 5, "the window's 5, not the warm-up's 2");
        // A queue that drained below its start: nothing to add.
        let mut d = Schedule::new(1000.0, Arrival::Uniform, 100, 0, 1);
        d.advance(3_000_000);
        d.start_window();
        while d.take().is_some() {}
        d.finish();
        assert_eq!(d.dropped, 0);
    }

    #[test]
    fn a_warm_up_backlog_is_not_sent_in_the_window() {
        // 1000/s; nothing left during a 500 ms warm-up (no free connection):
        // its 500 sends wait (cap 1000). The window [500 ms, 1500 ms) then
        // sends all it can: exactly its own 1000, not 1500 at up to 2×.
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 1000, 0, 1);
        s.advance(500_000_000 - 1);
        assert_eq!(s.queued(), 500);
        s.start_window();
        let mut sent = 0;
        let mut t = 500_000_000;
        while t < 1_500_000_000 {
            s.advance(t);
            while let Some(intended) = s.take() {
                assert!(intended >= 500_000_000, "a warm-up send: {intended}");
                sent += 1;
            }
            t += 100_000;
        }
        s.finish();
        assert_eq!(sent + s.dropped, 1000, "sent {sent}, dropped {}", s.dropped);
        assert_eq!(sent, 1000);
    }

    #[test]
    fn wake_time_points_at_the_next_due_send() {
        let mut s = Schedule::new(1000.0, Arrival::Uniform, 10, 5_000_000, 1);
        assert_eq!(s.wake_ns(), 5_000_000, "the first send is due at the start");
        s.advance(5_000_000);
        assert_eq!(s.wake_ns(), 6_000_000);
    }
}
