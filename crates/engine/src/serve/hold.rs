//! `--delay` and `--pool`: answers held on a timer, at most `pool` at once,
//! the rest queued in arrival order for a slot. An answer is named by its
//! connection and the connection's generation, so that one whose connection
//! closed is known as such.

use std::collections::VecDeque;

/// A worker's held and queued answers.
#[derive(Debug, Default)]
pub(super) struct Holds {
    /// How long an answer is held (0: not at all, and nothing is held).
    delay_ns: u64,
    /// At most this many held at once (None: no limit).
    pool: Option<usize>,
    /// Held answers: (conn, gen, release time), in release order.
    held: VecDeque<(u32, u32, u64)>,
    /// Answers waiting for a pool slot: (conn, gen).
    queued: VecDeque<(u32, u32)>,
}

impl Holds {
    pub(super) fn new(delay_ns: Option<u64>, pool: Option<usize>) -> Holds {
        Holds {
            delay_ns: delay_ns.unwrap_or(0),
            pool,
            held: VecDeque::new(),
            queued: VecDeque::new(),
        }
    }

    /// A pool slot is free.
    #[inline]
    fn has_room(&self) -> bool {
        self.pool.is_none_or(|p| self.held.len() < p)
    }

    /// An answer of connection `i` (generation `gen`) starts its hold at
    /// `now` if a pool slot is free, else queues.
    pub(super) fn hold(&mut self, i: u32, gen: u32, now: u64) {
        if self.has_room() {
            self.held.push_back((i, gen, now + self.delay_ns));
        } else {
            self.queued.push_back((i, gen));
        }
    }

    /// Answers held or queued.
    #[inline]
    pub(super) fn len(&self) -> usize {
        self.held.len() + self.queued.len()
    }

    /// When the next held answer is due, if any.
    #[inline]
    pub(super) fn next_release_ns(&self) -> Option<u64> {
        self.held.front().map(|&(_, _, t)| t)
    }

    /// Connection `i` (generation `gen`) closed: its held and queued
    /// answers will never be sent; their pool slots go to queued answers of
    /// other connections, whose hold starts at `now`.
    pub(super) fn forget(&mut self, i: u32, gen: u32, now: u64) {
        self.held.retain(|&(ci, cg, _)| (ci, cg) != (i, gen));
        self.queued.retain(|&(ci, cg)| (ci, cg) != (i, gen));
        while self.has_room() {
            let Some((qi, qgen)) = self.queued.pop_front() else {
                break;
            };
            self.held.push_back((qi, qgen, now + self.delay_ns));
        }
    }

    /// The oldest held answer if its time has come at `now`: it leaves the
    /// hold (its slot is then given by [`Holds::admit_next`]).
    #[inline]
    pub(super) fn pop_due(&mut self, now: u64) -> Option<(u32, u32)> {
        match self.held.front() {
            Some(&(i, gen, t)) if t <= now => {
                self.held.pop_front();
                Some((i, gen))
            }
            _ => None,
        }
    }

    /// The first queued answer takes a slot freed at `now`.
    pub(super) fn admit_next(&mut self, now: u64) {
        if let Some((qi, qgen)) = self.queued.pop_front() {
            self.held.push_back((qi, qgen, now + self.delay_ns));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Releases everything due at `now`, as the responder does.
    fn release(h: &mut Holds, now: u64) -> Vec<(u32, u32)> {
        let mut out = Vec::new();
        while let Some(a) = h.pop_due(now) {
            out.push(a);
            h.admit_next(now);
        }
        out
    }

    #[test]
    fn without_a_pool_every_answer_is_held_for_the_delay() {
        let mut h = Holds::new(Some(100), None);
        for k in 0..5 {
            h.hold(k, 0, 10 * u64::from(k));
        }
        assert_eq!(h.len(), 5);
        assert_eq!(h.next_release_ns(), Some(100));
        assert_eq!(release(&mut h, 99), []);
        assert_eq!(release(&mut h, 120), [(0, 0), (1, 0), (2, 0)]);
        assert_eq!(h.next_release_ns(), Some(130));
        assert_eq!(release(&mut h, 1_000), [(3, 0), (4, 0)]);
        assert_eq!((h.len(), h.next_release_ns()), (0, None));
    }

    #[test]
    fn the_pool_queues_beyond_its_slots_in_arrival_order() {
        let mut h = Holds::new(Some(100), Some(2));
        for k in 0..5 {
            h.hold(k, 0, 0);
        }
        assert_eq!((h.held.len(), h.queued.len()), (2, 3));
        // Each release gives its slot to the next queued answer, whose hold
        // starts then.
        assert_eq!(release(&mut h, 100), [(0, 0), (1, 0)]);
        assert_eq!(h.next_release_ns(), Some(200));
        assert_eq!(release(&mut h, 200), [(2, 0), (3, 0)]);
        assert_eq!(release(&mut h, 300), [(4, 0)]);
        assert_eq!(h.len(), 0);
    }

    #[test]
    fn a_closed_connections_answers_give_their_slots_back() {
        let mut h = Holds::new(Some(100), Some(1));
        h.hold(1, 7, 0);
        h.hold(1, 7, 0);
        h.hold(2, 0, 0);
        // An older generation of connection 2: another connection.
        h.hold(2, 9, 0);
        h.forget(1, 7, 50);
        assert_eq!(h.len(), 2);
        assert_eq!(h.next_release_ns(), Some(150));
        assert_eq!(release(&mut h, 150), [(2, 0)]);
        assert_eq!(release(&mut h, 250), [(2, 9)]);
    }

    #[test]
    fn no_delay_releases_at_once() {
        let mut h = Holds::new(None, None);
        h.hold(3, 1, 42);
        assert_eq!(release(&mut h, 42), [(3, 1)]);
    }
}
