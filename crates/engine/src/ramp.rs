//! Pacing of a worker's first connects (`--connect-rate`), so that opening
//! many connections does not overflow the server's SYN and accept queues by
//! itself: the first `burst` open at once (50 ms of the rate, at most
//! [`MAX_BURST`]), then one every `1/rate`. Replacements of closed
//! connections are not paced (they stand for one already counted).

/// Connections a worker opens at once before pacing starts, at most.
pub(crate) const MAX_BURST: usize = 1024;

/// Which of a worker's connections may open by when.
#[derive(Debug)]
pub(crate) struct Ramp {
    /// The next connection index to open.
    next: usize,
    total: usize,
    start_ns: u64,
    burst: usize,
    /// Between two paced connects; 0: no pacing (all open at the start).
    gap_ns: u64,
}

impl Ramp {
    /// `total` connections from `start_ns` at `rate_per_s` (None: all at once).
    pub(crate) fn new(total: usize, rate_per_s: Option<f64>, start_ns: u64) -> Ramp {
        let (burst, gap_ns) = match rate_per_s.filter(|r| *r > 0.0) {
            Some(r) => (
                ((r / 20.0) as usize).clamp(1, MAX_BURST),
                ((1e9 / r) as u64).max(1),
            ),
            None => (total, 0),
        };
        Ramp {
            next: 0,
            total,
            start_ns,
            burst,
            gap_ns,
        }
    }

    /// The next connection allowed to open at `now`, if any (each once).
    #[inline]
    pub(crate) fn take(&mut self, now: u64) -> Option<usize> {
        if self.next >= self.total {
            return None;
        }
        // No gap: every connection may open at once.
        let allowed = match now.saturating_sub(self.start_ns).checked_div(self.gap_ns) {
            None => self.total,
            Some(paced) => self.burst.saturating_add(paced as usize),
        };
        (self.next < allowed).then(|| {
            self.next += 1;
            self.next - 1
        })
    }

    /// When the next connection may open (None: all have).
    #[inline]
    pub(crate) fn next_ns(&self) -> Option<u64> {
        (self.next < self.total).then(|| {
            let paced = (self.next + 1).saturating_sub(self.burst) as u64;
            self.start_ns
                .saturating_add(paced.saturating_mul(self.gap_ns))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened(r: &mut Ramp, now: u64) -> Vec<usize> {
        std::iter::from_fn(|| r.take(now)).collect()
    }

    #[test]
    fn unpaced_opens_everything_at_once() {
        let mut r = Ramp::new(5, None, 100);
        assert_eq!(opened(&mut r, 100), [0, 1, 2, 3, 4]);
        assert_eq!(r.next_ns(), None);
        assert_eq!(r.take(u64::MAX), None);
    }

    #[test]
    fn paced_opens_a_burst_then_one_per_gap() {
        // 100/s: a burst of 5 (50 ms), then one every 10 ms.
        let mut r = Ramp::new(8, Some(100.0), 1_000);
        assert_eq!(opened(&mut r, 1_000), [0, 1, 2, 3, 4]);
        assert_eq!(r.next_ns(), Some(1_000 + 10_000_000));
        assert_eq!(opened(&mut r, 1_000 + 9_999_999), Vec::<usize>::new());
        assert_eq!(opened(&mut r, 1_000 + 10_000_000), [5]);
        assert_eq!(opened(&mut r, 1_000 + 29_999_999), [6]);
        assert_eq!(r.next_ns(), Some(1_000 + 30_000_000));
        assert_eq!(opened(&mut r, u64::MAX), [7]);
        assert_eq!(r.next_ns(), None);
    }

    #[test]
    fn burst_is_bounded() {
        let mut r = Ramp::new(100_000, Some(1e9), 0);
        assert_eq!(opened(&mut r, 0).len(), MAX_BURST);
        let mut r = Ramp::new(10, Some(1.0), 0);
        assert_eq!(opened(&mut r, 0), [0]);
        assert_eq!(r.next_ns(), Some(1_000_000_000));
    }
}
