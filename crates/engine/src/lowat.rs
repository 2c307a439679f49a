//! Pipelined closed loop: each socket's SO_RCVLOWAT asks for the bytes of the
//! answers it still waits for, so the kernel wakes the receive once per batch.
//!
//! Why: a server that writes each pipelined answer as its own pushed segment
//! (nginx does) makes a client wake and read once or twice per answer, and
//! every read that drains the socket sends a pure ACK (the kernel's
//! `tcp_cleanup_rbuf`). With the mark at the batch's bytes the client wakes,
//! reads and ACKs once per batch, which spares CPU on both sides (figures in
//! docs/engine.md, "Pipelining"). The price is that an answer is timed when
//! its batch is in.
//!
//! The bytes are counted at the smallest answer seen (an answer in progress
//! not counted), so the mark never asks for more than is coming as long as
//! answers do not shrink. When they do, a connection could wait forever: a
//! connection whose oldest request has waited over twice the round trip with
//! a raised mark gets the default back (Linux then wakes it at once if
//! anything is queued), and its next batch is counted at the new minimum.

use std::os::fd::RawFd;

use crate::conn::Exchange;
use crate::drive::{Conn, State};
use crate::sock::set_int_opt;

/// The mark never asks for more than this (the io_uring receive buffer is
/// 16 KiB; a bigger batch is read in pieces, each re-marked).
const MAX_BYTES: u64 = 8 * 1024;
/// How often the round trip is measured and stalled marks are released.
pub(crate) const TICK_NS: u64 = 10_000_000;
/// A raised mark is released after max(2 × round trip, this).
const MIN_STALL_NS: u64 = 2_000_000;

/// A connection's round trip, measured every `TICK_NS` from the answers
/// counted in that interval (requests in flight / answer rate). One per
/// worker: the io_uring batched wait and the low-water marks both follow it.
pub(crate) struct RoundTrip {
    /// The last tick: time and answers counted then.
    last: (u64, u64),
    /// The last measured round trip (kept while nothing is answered).
    rtt_ns: Option<u64>,
    /// The last tick measured it (answers came in its interval).
    fresh: bool,
}

impl RoundTrip {
    pub(crate) fn new(now: u64) -> RoundTrip {
        RoundTrip {
            last: (now, 0),
            rtt_ns: None,
            fresh: false,
        }
    }

    /// A tick has passed since the last one.
    pub(crate) fn due(&self, now: u64) -> bool {
        now >= self.last.0 + TICK_NS
    }

    /// Measures again if a tick has passed since the last one (`answers` =
    /// the worker's count so far, `in_flight` = requests on open
    /// connections): true when it did.
    pub(crate) fn tick(&mut self, now: u64, answers: u64, in_flight: u64) -> bool {
        let (t0, n0) = self.last;
        if !self.due(now) {
            return false;
        }
        let rtt = round_trip_ns(in_flight, now - t0, answers.saturating_sub(n0));
        self.fresh = rtt.is_some();
        if rtt.is_some() {
            self.rtt_ns = rtt;
        }
        self.last = (now, answers);
        true
    }

    /// The round trip if the last tick measured it (answers came since the
    /// one before; after a reset of the count, none did).
    pub(crate) fn fresh_ns(&self) -> Option<u64> {
        self.rtt_ns.filter(|_| self.fresh)
    }

    /// The last measured round trip; None until an answer was counted.
    pub(crate) fn ns(&self) -> Option<u64> {
        self.rtt_ns
    }
}

/// One worker's low-water marks.
pub(crate) struct Lowat {
    on: bool,
    /// The smallest answer seen by this worker, bytes on the wire.
    min_wire: u64,
}

impl Lowat {
    /// On for a closed loop with more than one request in flight per connection.
    pub(crate) fn new(pipeline: usize, open_loop: bool) -> Lowat {
        Lowat {
            on: pipeline > 1 && !open_loop,
            min_wire: u64::MAX,
        }
    }

    /// Marks are set at all (they need a descriptor per socket).
    pub(crate) fn on(&self) -> bool {
        self.on
    }

    /// Sets `fd`'s mark (now `*mark`) to the bytes of the answers `ex` still
    /// waits for. Nothing due or nothing learned yet: left as it is (the next
    /// batch's send sets it).
    pub(crate) fn apply(&mut self, fd: RawFd, ex: &Exchange, mark: &mut u32) {
        let due = ex.pending.len() as u64;
        if !self.on || due == 0 {
            return;
        }
        self.min_wire = self.min_wire.min(ex.min_wire);
        if let Some(want) = target(due, ex.mid_response(), self.min_wire) {
            if want != *mark {
                set_rcvlowat(fd, want);
                *mark = want;
            }
        }
    }

    /// How long a raised mark may hold a request back before it is released:
    /// twice the round trip, at least `MIN_STALL_NS`; None when marks are off.
    pub(crate) fn stall_ns(&self, round_trip: Option<u64>) -> Option<u64> {
        self.on
            .then(|| (round_trip.unwrap_or(0) * 2).max(MIN_STALL_NS))
    }

    /// Gives each open connection's socket (`mark` names its descriptor and
    /// mark) the default mark back if it is raised and its oldest request
    /// has waited more than twice the `round_trip` (pipelined closed loop).
    pub(crate) fn release_stalled<S>(
        &self,
        round_trip: Option<u64>,
        now: u64,
        conns: &mut [Conn<S>],
        mark: impl Fn(&mut S) -> (RawFd, &mut u32),
    ) {
        let Some(stall_ns) = self.stall_ns(round_trip) else {
            return;
        };
        for c in conns.iter_mut().filter(|c| c.state == State::Open) {
            let oldest = c.ex.pending.oldest_sent_ns();
            let (fd, mark) = mark(&mut c.sock);
            if *mark > 1 && oldest.is_some_and(|t| now.saturating_sub(t) > stall_ns) {
                set_rcvlowat(fd, 1);
                *mark = 1;
            }
        }
    }
}

/// A connection's round trip when `done` of `in_flight` requests completed in
/// `dt_ns` (in flight / rate); None when nothing completed.
pub(crate) fn round_trip_ns(in_flight: u64, dt_ns: u64, done: u64) -> Option<u64> {
    if in_flight == 0 {
        return None;
    }
    in_flight.saturating_mul(dt_ns).checked_div(done)
}

/// The mark for `due` answers of at least `min_wire` bytes, one of them
/// already in progress if `partial`; None before any answer was seen.
fn target(due: u64, partial: bool, min_wire: u64) -> Option<u32> {
    if min_wire == u64::MAX {
        return None;
    }
    let whole = due - u64::from(partial);
    Some(whole.saturating_mul(min_wire).clamp(1, MAX_BYTES) as u32)
}

/// Sets SO_RCVLOWAT (Linux wakes a waiting receive at once if the queued
/// bytes already reach the new mark). A failure leaves the default: harmless.
fn set_rcvlowat(fd: RawFd, bytes: u32) {
    let _ = set_int_opt(
        fd,
        libc::SOL_SOCKET,
        libc::SO_RCVLOWAT,
        bytes as libc::c_int,
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_counts_whole_answers_at_the_smallest_size() {
        assert_eq!(target(16, false, u64::MAX), None, "nothing learned yet");
        assert_eq!(target(16, false, 147), Some(16 * 147));
        assert_eq!(
            target(16, true, 147),
            Some(15 * 147),
            "the partial answer is not counted"
        );
        assert_eq!(
            target(1, true, 147),
            Some(1),
            "only a partial answer due: any byte"
        );
        assert_eq!(target(16, false, 100_000), Some(MAX_BYTES as u32), "capped");
    }

    #[test]
    fn tick_measures_the_round_trip_and_the_stall_age() {
        let mut rt = RoundTrip::new(0);
        let l = Lowat::new(16, false);
        assert!(!rt.tick(TICK_NS - 1, 10, 1600), "not yet");
        assert_eq!(rt.ns(), None);
        assert_eq!(l.stall_ns(rt.ns()), Some(MIN_STALL_NS), "nothing known yet");
        // 1600 in flight, 16,000 answers in 10 ms: 1 ms round trip, 2 ms stall age.
        assert!(rt.tick(TICK_NS, 16_000, 1600));
        assert_eq!(rt.ns(), Some(1_000_000));
        assert_eq!(l.stall_ns(rt.ns()), Some(2_000_000));
        // 1600 answers in the next 10 ms: 10 ms round trip.
        assert!(rt.tick(2 * TICK_NS, 17_600, 1600));
        assert_eq!(l.stall_ns(rt.ns()), Some(20_000_000));
        assert_eq!(rt.fresh_ns(), Some(10_000_000));
        // Nothing answered: the last round trip is kept, but is not fresh.
        assert!(!rt.due(3 * TICK_NS - 1));
        assert!(rt.tick(3 * TICK_NS, 17_600, 1600));
        assert_eq!(rt.ns(), Some(10_000_000));
        assert_eq!(rt.fresh_ns(), None);
        // Answers but no open connection (all closed at the tick): no measure.
        assert!(rt.tick(4 * TICK_NS, 18_000, 0));
        assert_eq!((rt.ns(), rt.fresh_ns()), (Some(10_000_000), None));
        // The count reset (end of the warm-up): no measure either.
        assert!(rt.tick(5 * TICK_NS, 10, 1600));
        assert_eq!(rt.fresh_ns(), None);
        assert!(rt.tick(6 * TICK_NS, 1610, 1600));
        assert_eq!(rt.fresh_ns(), Some(10_000_000));
        assert_eq!(
            Lowat::new(1, false).stall_ns(rt.ns()),
            None,
            "no pipelining: off"
        );
        assert_eq!(
            Lowat::new(16, true).stall_ns(rt.ns()),
            None,
            "open loop: off"
        );
    }
}
