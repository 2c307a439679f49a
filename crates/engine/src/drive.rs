//! The half of a connection's life that does not depend on the I/O interface,
//! written once for both drivers: what to send and when (closed-loop batches,
//! open-loop dispatch to idle connections), what a parsed response or an end
//! of stream means, replacing a connection (and giving unanswered requests
//! back to the quota), and request timeouts.
//!
//! A driver implements [`Transport`]: access to its state, putting requests on
//! the wire, opening and closing a connection's socket.

use xload_stats::ErrorKind;

use crate::conn::{record_fed_error, Exchange, Fed, Sent};
use crate::ctx::{Ctx, Late};
use crate::mix::ConnMix;
use crate::ramp::Ramp;
use crate::tls::{record_failure, Opened};

/// A send that left later than this after its intended time counts as late.
pub(crate) const LATE_NS: u64 = 1_000_000;

pub(crate) trait Transport<'p> {
    fn ctx(&mut self) -> &mut Ctx<'p>;
    fn exchange(&mut self, i: usize) -> &mut Exchange;
    /// Connection `i` is connected.
    fn is_open(&self, i: usize) -> bool;
    /// Open loop: open connections with nothing in flight.
    fn idle(&mut self) -> &mut Vec<u32>;
    /// Requests per closed-loop batch.
    fn pipeline(&self) -> usize;
    /// Puts the last `n` requests queued in connection `i`'s pending list on the wire.
    fn transmit(&mut self, i: usize, n: usize, now: u64);
    /// Opens a new socket for connection `i` and starts connecting it.
    fn open(&mut self, i: usize, now: u64);
    /// Closes connection `i`'s socket; everything in flight on it is forgotten.
    fn close(&mut self, i: usize);
    /// Tells connection `i`'s codec that the peer closed; returns the error to count.
    fn eof_exchange(&mut self, i: usize, now: u64) -> Option<ErrorKind>;

    /// The generation of connection `i` (changes when it is replaced).
    fn gen(&self, i: usize) -> u32;
    /// https: sends the records queued in connection `i`'s session.
    fn send_records(&mut self, i: usize, now: u64);
    /// https: connection `i`'s handshake completed: it is open, and the
    /// handshake is recorded.
    fn established(&mut self, i: usize, now: u64);
    /// https: connection `i`'s handshake failed (`kind` counted): it is
    /// closed and retried after a back-off, as after a failed connect.
    fn handshake_failed(&mut self, i: usize, kind: ErrorKind, now: u64);
    /// https: feeds the plaintext connection `i`'s session opened to the
    /// codec (None: there was none).
    fn feed_plain(&mut self, i: usize, now: u64) -> Option<Fed>;

    /// Connections of this worker.
    fn conns(&self) -> usize;
    /// Which connections may open for the first time, and when.
    fn ramp(&mut self) -> &mut Ramp;

    /// Opens the connections whose first turn has come (`--connect-rate`).
    #[inline]
    fn ramp_up(&mut self, now: u64) {
        while let Some(i) = self.ramp().take(now) {
            self.open(i, now);
        }
    }

    /// Sets the quota of `-n` once the measured window has opened, and
    /// gives connections that waited for it their first requests.
    #[inline]
    fn open_window_quota(&mut self) {
        if self.ctx().window_opening() {
            let mut in_flight = 0u64;
            for i in 0..self.conns() {
                in_flight += self.exchange(i).pending.len() as u64;
            }
            self.ctx().open_window_quota(in_flight);
            if self.ctx().held_until_now() {
                let now = crate::clock::now_ns();
                for i in 0..self.conns() {
                    if self.is_open(i) && self.exchange(i).pending.is_empty() {
                        self.send_batch(i, now);
                    }
                }
            }
        }
    }

    /// Queues `n` requests, sent at `sent`, on connection `i`.
    #[inline]
    fn send(&mut self, i: usize, n: usize, sent: Sent, now: u64) {
        if self.ctx().mix_requests().is_some() {
            // A workload: one request in flight per connection (pipeline 1).
            debug_assert_eq!(n, 1);
            let Some(pick) = self.workload_pick(i) else {
                // The session ended: the next one starts on a new connection.
                self.ctx().refund(n);
                self.replace(i, now, false);
                return;
            };
            self.exchange(i).start(pick);
        }
        let ex = self.exchange(i);
        for _ in 0..n {
            ex.pending.push(sent);
        }
        self.transmit(i, n, now);
    }

    /// Workload runs: the request connection `i` sends next, from its
    /// session or the worker's schedule; None when its session ended.
    fn workload_pick(&mut self, i: usize) -> Option<xload_workload::Pick> {
        if !self.exchange(i).has_mix() {
            // Once per connection: no shared reference count per request.
            let requests = self.ctx().mix_requests().cloned();
            let session = self.ctx().session_of(i);
            let session = session.as_ref().map(|(s, seed)| (s, *seed));
            self.exchange(i).attach_mix(requests, session);
        }
        if self.ctx().sessions() {
            self.exchange(i).mix_mut().and_then(ConnMix::session_pick)
        } else {
            self.ctx().next_pick()
        }
    }

    /// A response completed and nothing is in flight: sessions think first,
    /// the rest is ready at once.
    fn after_response(&mut self, i: usize, now: u64) {
        if self.ctx().sessions() {
            let think_ns = self
                .exchange(i)
                .mix_mut()
                .map_or(0, |m| m.think().as_nanos() as u64);
            if think_ns > 0 {
                let due = now + think_ns;
                if let Some(m) = self.exchange(i).mix_mut() {
                    m.think_due_ns = due;
                }
                self.ctx().think(i, due);
                return;
            }
        }
        self.ready(i, now);
    }

    /// Between waits: open-loop sends that are due, sessions whose think
    /// time is over.
    #[inline]
    fn tend(&mut self, now: u64) {
        if self.ctx().open_loop {
            self.dispatch(now);
        }
        while let Some((i, due)) = self.ctx().due_thinker(now) {
            // Only the connection's current think (not one of a replaced connection).
            let current = self
                .exchange(i)
                .mix_mut()
                .is_some_and(|m| m.think_due_ns == due);
            if current && self.is_open(i) && self.exchange(i).pending.is_empty() {
                if let Some(m) = self.exchange(i).mix_mut() {
                    m.think_due_ns = 0;
                }
                self.send_batch(i, now);
            }
        }
    }

    /// Closed loop: as many requests as the pipeline and the quota allow.
    #[inline]
    fn send_batch(&mut self, i: usize, now: u64) {
        let want = self.pipeline();
        let n = self.ctx().allow(want);
        if n > 0 {
            self.send(
                i,
                n,
                Sent {
                    intended_ns: now,
                    sent_ns: now,
                },
                now,
            );
        }
    }

    /// Connection `i` just connected (or finished its exchange): give it work.
    #[inline]
    fn ready(&mut self, i: usize, now: u64) {
        if self.ctx().open_loop {
            self.ctx().connection_ready(now);
            self.idle().push(i as u32);
        } else {
            self.send_batch(i, now);
        }
    }

    /// Open loop: hands sends that are due to idle connections.
    fn dispatch(&mut self, now: u64) {
        loop {
            let Some(&i) = self.idle().last() else {
                // Every connection is busy: what is due waits for one.
                self.ctx().no_free_connection(now);
                break;
            };
            let i = i as usize;
            if !self.is_open(i) || !self.exchange(i).pending.is_empty() {
                self.idle().pop();
                continue;
            }
            let ctx = self.ctx();
            let Some(intended) = ctx.take_scheduled() else {
                // A connection is free and nothing may leave yet.
                ctx.free_connection(now);
                break;
            };
            let lag_ns = now.saturating_sub(intended);
            // Why it is late, only for a send that is.
            let late = (lag_ns > LATE_NS).then(|| ctx.late_cause(intended, LATE_NS));
            let rec = &mut ctx.rec;
            rec.record_send(lag_ns / 1_000);
            match late {
                Some(Late::Waiting) => rec.record_late_send_waiting(),
                Some(Late::CatchUp) => rec.record_late_send_catch_up(),
                Some(Late::Own) => rec.record_late_send(),
                None => {}
            }
            self.idle().pop();
            self.send(
                i,
                1,
                Sent {
                    intended_ns: intended,
                    sent_ns: now.max(intended),
                },
                now,
            );
        }
    }

    /// What connection `i` does after the codec consumed received bytes.
    #[inline]
    fn after_feed(&mut self, i: usize, fed: Fed, now: u64) {
        match fed {
            Fed::More => {
                if self.exchange(i).pending.is_empty() {
                    self.after_response(i, now);
                }
            }
            Fed::Close => self.replace(i, now, false),
            Fed::Invalid(_) | Fed::Unsolicited => {
                record_fed_error(&mut self.ctx().rec, &fed);
                self.replace(i, now, true);
            }
        }
    }

    /// https: what connection `i` does once received records were opened
    /// (`handshaking`: they arrived during its handshake): send what the
    /// handshake needs, open the connection when it completes, feed the
    /// plaintext, end at close_notify.
    fn after_open(
        &mut self,
        i: usize,
        opened: Result<Opened, ErrorKind>,
        handshaking: bool,
        now: u64,
    ) {
        let gen = self.gen(i);
        let opened = match opened {
            Ok(o) => o,
            Err(kind) if handshaking => return self.handshake_failed(i, kind, now),
            Err(kind) => {
                record_failure(&mut self.ctx().rec, kind);
                return self.replace(i, now, true);
            }
        };
        self.send_records(i, now);
        if self.gen(i) != gen {
            return;
        }
        if opened.established {
            self.established(i, now);
            self.ready(i, now);
            if self.gen(i) != gen {
                return;
            }
        }
        if let Some(fed) = self.feed_plain(i, now) {
            self.after_feed(i, fed, now);
            if self.gen(i) != gen {
                return;
            }
        }
        if opened.closed {
            self.on_eof(i, now);
        }
    }

    /// The peer closed connection `i`.
    fn on_eof(&mut self, i: usize, now: u64) {
        let err = self.eof_exchange(i, now);
        if let Some(k) = err {
            self.ctx().rec.record_error(k);
        }
        self.replace(i, now, err.is_some());
    }

    /// Closes connection `i` and opens a new one in its place. Requests still in
    /// flight go back to the quota to be sent again, except the one a counted
    /// failure (`failed`) stands for.
    fn replace(&mut self, i: usize, now: u64, failed: bool) {
        let in_flight = self.exchange(i).pending.len();
        self.ctx()
            .refund(in_flight.saturating_sub(usize::from(failed)));
        self.close(i);
        self.open(i, now);
    }

    /// Replaces connection `i` if its oldest request is older than `timeout_ns`.
    fn expire(&mut self, i: usize, now: u64, timeout_ns: u64) {
        if let Some(t) = self.exchange(i).pending.oldest_sent_ns() {
            if now.saturating_sub(t) >= timeout_ns {
                self.ctx().rec.record_error(ErrorKind::RequestTimeout);
                self.replace(i, now, true);
            }
        }
    }
}

/// What a driver reports when it ends.
pub(crate) struct DriverStats {
    pub mode: &'static str,
    pub cq_overflow: u64,
    /// io_uring: sockets were named by their slot in a registered file table.
    pub fixed_files: bool,
    pub batching: Option<xload_stats::Batching>,
}
