//! The half of a connection's life that does not depend on the I/O interface,
//! written once for both drivers: what to send and when (closed-loop batches,
//! open-loop dispatch to idle connections), what a parsed response or an end
//! of stream means, replacing a connection (and giving unanswered requests
//! back to the quota), and request timeouts.
//!
//! A driver keeps a [`Core`] (its worker's connections, ramp, requests) and
//! implements [`Transport`]: access to the core and the run's context,
//! putting requests on the wire, opening and closing a connection's socket.
//! Each connection is a [`Conn`]: the part every driver keeps (state,
//! back-off, exchange, TLS session) and the driver's own socket state.

use xload_stats::{ErrorKind, Recorder};

use crate::clock::now_ns;
use crate::conn::{record_errno, record_fed_error, Backoff, Exchange, Fed, Phase, Sent};
use crate::ctx::{Ctx, Late};
use crate::ramp::Ramp;
use crate::tls::{record_failure, Opened, Session};

/// A send that left later than this after its intended time counts as late.
pub(crate) const LATE_NS: u64 = 1_000_000;

/// Where a connection is in its life, the same for every driver.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum State {
    /// No socket; opened again by the driver's sweep from `until_ns`
    /// (`u64::MAX`: not before the ramp or a replace opens it).
    Closed {
        until_ns: u64,
    },
    Connecting {
        since_ns: u64,
    },
    /// https: connected, the TLS handshake is under way.
    Handshaking {
        since_ns: u64,
    },
    Open,
}

/// One connection of a worker: what every driver keeps, and `sock`, the
/// driver's own part (its socket and what it tracks about it).
pub(crate) struct Conn<S> {
    /// Changes when the connection is replaced: what still arrives for an
    /// older generation is ignored.
    pub gen: u32,
    pub state: State,
    pub backoff: Backoff,
    pub ex: Exchange,
    /// https: the TLS session (kept, with its buffers, across reconnects).
    pub tls: Option<Box<Session>>,
    pub sock: S,
}

impl<S> Conn<S> {
    /// A connection that waits for the ramp to open it.
    pub(crate) fn new(ex: Exchange, sock: S) -> Conn<S> {
        Conn {
            gen: 0,
            state: State::Closed { until_ns: u64::MAX },
            backoff: Backoff::default(),
            ex,
            tls: None,
            sock,
        }
    }
}

/// What every driver keeps for its worker (besides the run's context).
pub(crate) struct Core<S> {
    pub conns: Vec<Conn<S>>,
    /// Open loop: open connections with nothing in flight.
    pub idle: Vec<u32>,
    /// Which connections may open for the first time, and when.
    pub ramp: Ramp,
    /// Requests per closed-loop batch.
    pub pipeline: usize,
    /// Requests a connection carries at once: `pipeline`, or HTTP/2's
    /// `--streams` (for the round-trip estimate, which divides by it).
    pub depth: usize,
    /// `pipeline` copies of the run's request, back to back.
    pub batch: Box<[u8]>,
    /// The length of one request in `batch`.
    pub req_len: usize,
}

impl<S> Core<S> {
    /// Worker `index`'s share of the run: its connections (none open yet,
    /// each with the driver's part from `sock`), ramp and requests.
    pub(crate) fn new(ctx: &Ctx<'_>, index: usize, sock: impl Fn() -> S) -> Self {
        let plan = ctx.plan;
        let nconns = plan.connections_of(index);
        let pipeline = plan.pipeline.max(1);
        Core {
            conns: (0..nconns)
                .map(|_| Conn::new(Exchange::new(plan.head, pipeline), sock()))
                .collect(),
            idle: Vec::with_capacity(nconns),
            ramp: Ramp::new(nconns, plan.connect_rate_of(index), now_ns()),
            pipeline,
            depth: plan
                .h2
                .as_ref()
                .map_or(pipeline, |h| h.streams.max(1) as usize),
            batch: plan.request.repeat(pipeline).into_boxed_slice(),
            req_len: plan.request.len(),
        }
    }

    /// Connections that are open.
    pub(crate) fn open_count(&self) -> usize {
        self.conns.iter().filter(|c| c.state == State::Open).count()
    }
}

/// A run's timeouts in ns: connect, TLS handshake, request.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Timeouts {
    pub connect_ns: u64,
    pub handshake_ns: u64,
    pub request_ns: u64,
}

impl Timeouts {
    pub(crate) fn of(plan: &crate::plan::Plan) -> Timeouts {
        Timeouts {
            connect_ns: plan.connect_timeout.as_nanos() as u64,
            handshake_ns: plan.handshake_timeout.as_nanos() as u64,
            request_ns: plan.timeout.as_nanos() as u64,
        }
    }

    /// The shortest: a sweep every tenth of it sees each in time.
    pub(crate) fn shortest_ns(&self) -> u64 {
        self.connect_ns.min(self.handshake_ns).min(self.request_ns)
    }
}

/// Requests sent on `conns` and not answered yet, of those whose answers
/// count ([`Sent::counted`]).
pub(crate) fn in_flight<S>(conns: &[Conn<S>]) -> u64 {
    conns
        .iter()
        .flat_map(|c| c.ex.sent_iter())
        .filter(|s| s.counted)
        .count() as u64
}

/// When a driver's main loop sweeps for timeouts: every tenth of the
/// timeout it watches, between 1 and 100 ms.
pub(crate) struct Sweeper {
    every_ns: u64,
    /// The next sweep's time (the loop wakes for it).
    pub(crate) next_ns: u64,
}

impl Sweeper {
    pub(crate) fn new(now: u64, timeout_ns: u64) -> Sweeper {
        let every_ns = (timeout_ns / 10).clamp(1_000_000, 100_000_000);
        Sweeper {
            every_ns,
            next_ns: now + every_ns,
        }
    }
}

/// A driver: the few methods below it must write; the rest of a
/// connection's life is provided on top of them.
pub(crate) trait Transport<'p> {
    /// The driver's own per-connection state (`Conn::sock`).
    type Sock: 'static;

    /// The run's context (the worker's share of it).
    fn ctx(&mut self) -> &mut Ctx<'p>;
    /// What the driver keeps for its worker.
    fn core(&self) -> &Core<Self::Sock>;
    /// The same and the worker's recorder, borrowed together.
    fn split(&mut self) -> (&mut Core<Self::Sock>, &mut Recorder);
    /// Puts the last `n` requests queued in connection `i`'s pending list
    /// on the wire (https: seals them into its session and sends the records).
    fn transmit(&mut self, i: usize, n: usize, now: u64);
    /// Opens a new socket for connection `i` and starts connecting it
    /// (state `Connecting`), or leaves it `Closed` until a later try.
    fn open(&mut self, i: usize, now: u64);
    /// Closes connection `i`'s socket and moves it to a new generation
    /// with its exchange reset: everything in flight on it is forgotten.
    fn close(&mut self, i: usize);
    /// https: sends the records queued in connection `i`'s session.
    fn send_records(&mut self, i: usize, now: u64);
    /// HTTP/2 over plain TCP: sends what connection `i`'s exchange has in
    /// its output buffer (the driver decides when the buffer may be reused).
    fn send_output(&mut self, i: usize, now: u64);
    /// Connects and requests that timed out, and reconnects after a back-off.
    fn sweep(&mut self, now: u64);

    /// A connect failed with `errno` (counted): the connection is retried
    /// after a back-off.
    fn connect_failed(&mut self, i: usize, errno: i32, now: u64) {
        record_errno(&mut self.ctx().rec, Phase::Connect, errno);
        self.back_off(i, now);
    }

    /// The sweep of a driver that times its own connects (and handshakes):
    /// reconnects after a back-off, connects older than `t.connect_ns` and
    /// handshakes older than `t.handshake_ns` fail, requests older than
    /// `t.request_ns` expire.
    fn sweep_states(&mut self, now: u64, t: Timeouts) {
        for i in 0..self.core().conns.len() {
            match self.core().conns[i].state {
                State::Closed { until_ns } if now >= until_ns => self.open(i, now),
                State::Connecting { since_ns } if now.saturating_sub(since_ns) >= t.connect_ns => {
                    self.connect_failed(i, libc::ETIMEDOUT, now);
                }
                State::Handshaking { since_ns }
                    if now.saturating_sub(since_ns) >= t.handshake_ns =>
                {
                    self.handshake_failed(i, ErrorKind::TlsHandshakeTimeout, now);
                }
                State::Open => self.expire(i, now, t.request_ns),
                _ => {}
            }
        }
    }

    /// The start of each turn of a driver's main loop: the clock's effect on
    /// the run ([`Ctx::on_time`]), the `-n` quota once the window opens, and
    /// the timeout sweep when `sweeper` says it is due. False: the loop ends.
    #[inline]
    fn tick_common(&mut self, now: u64, sweeper: &mut Sweeper) -> bool {
        if self.ctx().tick_due(now) {
            let n = in_flight(&self.core().conns);
            self.ctx().note_in_flight(n);
        }
        if !self.ctx().on_time(now) {
            return false;
        }
        self.open_window_quota();
        if now >= sweeper.next_ns {
            self.sweep(now);
            sweeper.next_ns = now + sweeper.every_ns;
        }
        true
    }

    #[inline]
    fn core_mut(&mut self) -> &mut Core<Self::Sock> {
        self.split().0
    }

    #[inline]
    fn conn(&mut self, i: usize) -> &mut Conn<Self::Sock> {
        &mut self.core_mut().conns[i]
    }

    /// The worker's connections and its recorder, borrowed together.
    #[inline]
    fn conns_mut(&mut self) -> (&mut [Conn<Self::Sock>], &mut Recorder) {
        let (core, rec) = self.split();
        (&mut core.conns, rec)
    }

    #[inline]
    fn exchange(&mut self, i: usize) -> &mut Exchange {
        &mut self.conn(i).ex
    }

    /// Connection `i` is connected (https: its handshake is done).
    #[inline]
    fn is_open(&self, i: usize) -> bool {
        self.core().conns[i].state == State::Open
    }

    /// The generation of connection `i` (changes when it is replaced).
    #[inline]
    fn gen(&self, i: usize) -> u32 {
        self.core().conns[i].gen
    }

    /// https: connection `i` is connected and its handshake under way.
    fn handshaking(&self, i: usize) -> bool {
        matches!(self.core().conns[i].state, State::Handshaking { .. })
    }

    /// Connection `i` tries again after its back-off (no socket is open).
    fn retry_later(&mut self, i: usize, now: u64) {
        let c = self.conn(i);
        c.state = State::Closed {
            until_ns: c.backoff.fail(now),
        };
    }

    /// Closes connection `i` and reopens it after a back-off.
    fn back_off(&mut self, i: usize, now: u64) {
        self.close(i);
        self.retry_later(i, now);
    }

    /// Connection `i` connected (https: completed its handshake): it is
    /// open, its back-off starts over, the handshake is recorded.
    fn established(&mut self, i: usize, now: u64) {
        let (conns, rec) = self.conns_mut();
        let c = &mut conns[i];
        c.state = State::Open;
        c.backoff.reset();
        if let Some(t) = c.tls.as_deref() {
            t.record_established(rec, now);
        }
        self.begin_protocol(i, now);
    }

    /// https: connection `i`'s handshake failed (`kind` counted): it is
    /// closed and retried after a back-off, as after a failed connect.
    fn handshake_failed(&mut self, i: usize, kind: ErrorKind, now: u64) {
        record_failure(&mut self.ctx().rec, kind);
        self.back_off(i, now);
    }

    /// https: connection `i` (`Connecting`) connected: its session starts
    /// the handshake. True when the ClientHello is queued for the driver
    /// to send; false when the session failed (counted, backed off).
    fn start_handshake(&mut self, i: usize, now: u64) -> bool {
        let plan = self.ctx().plan;
        let c = self.conn(i);
        let (Some(tc), State::Connecting { since_ns }) = (plan.tls.as_ref(), c.state) else {
            return false;
        };
        let started = match c.tls.as_mut() {
            Some(t) => t.restart(tc, since_ns, now),
            None => Session::new(tc, since_ns, now).map(|t| c.tls = Some(t)),
        };
        if let Err(kind) = started {
            self.handshake_failed(i, kind, now);
            return false;
        }
        c.state = State::Handshaking { since_ns: now };
        true
    }

    /// A send or receive on connection `i` failed with `errno`. During the
    /// handshake a reset is the peer closing it, and the replacement waits
    /// a back-off (nothing was ever served on it); later it is replaced at once.
    fn socket_failed(&mut self, i: usize, errno: i32, now: u64) {
        if self.handshaking(i) {
            if matches!(errno, libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) {
                return self.handshake_failed(i, ErrorKind::TlsClosedInHandshake, now);
            }
            record_errno(&mut self.ctx().rec, Phase::Exchange, errno);
            return self.back_off(i, now);
        }
        record_errno(&mut self.ctx().rec, Phase::Exchange, errno);
        self.replace(i, now, true);
    }

    /// https: feeds the plaintext connection `i`'s session opened to the
    /// codec (None: there was none).
    fn feed_plain(&mut self, i: usize, now: u64) -> Option<Fed> {
        let timing = self.ctx().timing();
        let (conns, rec) = self.conns_mut();
        let c = &mut conns[i];
        let t = c.tls.as_deref().filter(|t| !t.plain.is_empty())?;
        Some(c.ex.feed(&t.plain, now, rec, timing).1)
    }

    /// The quota is met and nothing is in flight: the loop may end.
    fn finished(&mut self) -> bool {
        self.ctx().exhausted() && self.core().conns.iter().all(|c| c.ex.is_idle())
    }

    /// When the loop must wake next: a send or think time, a connection's
    /// first turn or the driver's own `sweep_ns`.
    fn wake_ns(&mut self, sweep_ns: u64) -> u64 {
        let wake = self.ctx().wake_ns().min(sweep_ns);
        self.core().ramp.next_ns().map_or(wake, |t| wake.min(t))
    }

    /// Opens the connections whose first turn has come (`--connect-rate`).
    #[inline]
    fn ramp_up(&mut self, now: u64) {
        while let Some(i) = self.core_mut().ramp.take(now) {
            self.open(i, now);
        }
    }

    /// Sets the quota of `-n` once the measured window has opened, and
    /// gives connections that waited for it their first requests.
    #[inline]
    fn open_window_quota(&mut self) {
        if self.ctx().window_opening() {
            // Of the warm-up's requests in flight, those whose answers
            // will count in the window (none in open loop).
            let mut in_flight = 0u64;
            for i in 0..self.core().conns.len() {
                in_flight += self.exchange(i).sent_iter().filter(|s| s.counted).count() as u64;
            }
            self.ctx().open_window_quota(in_flight);
            if self.ctx().held_until_now() {
                let now = now_ns();
                for i in 0..self.core().conns.len() {
                    if self.is_open(i) && self.exchange(i).is_idle() {
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
            // A workload: each request its own pick (HTTP/1.1: one in
            // flight, pipeline 1; HTTP/2: one per stream).
            for k in 0..n {
                let Some(pick) = self.workload_pick(i) else {
                    // The session ended: the next one starts on a new connection.
                    self.ctx().refund(n - k);
                    self.replace(i, now, false);
                    return;
                };
                let ex = self.exchange(i);
                ex.start(pick, now);
                ex.push(sent);
            }
        } else {
            let ex = self.exchange(i);
            for _ in 0..n {
                ex.push(sent);
            }
        }
        let ex = self.exchange(i);
        if ex.is_h2() {
            self.push_output(i, now);
        } else {
            self.transmit(i, n, now);
        }
    }

    /// HTTP/2: puts what connection `i`'s exchange has queued on the wire
    /// (https: sealed into its session).
    fn push_output(&mut self, i: usize, now: u64) {
        let c = self.conn(i);
        let Some(h) = c.ex.h2() else {
            return;
        };
        if h.out.is_empty() {
            return;
        }
        if let Some(t) = c.tls.as_mut() {
            t.seal(&h.out);
            h.out.clear();
            return self.send_records(i, now);
        }
        self.send_output(i, now);
    }

    /// The connection `i` is open (connected; https: handshaken): the
    /// protocol starts (HTTP/2: the preface and SETTINGS leave).
    fn begin_protocol(&mut self, i: usize, now: u64) {
        let plan = self.ctx().plan;
        let h2 = plan.h2.as_ref().filter(|p| {
            !p.alpn_optional
                || self.core().conns[i]
                    .tls
                    .as_ref()
                    .is_some_and(|t| t.alpn_h2())
        });
        let (conns, rec) = self.conns_mut();
        conns[i].ex.begin(h2, rec, now);
        self.push_output(i, now);
    }

    /// Workload runs: the request connection `i` sends next, from its
    /// session or the worker's schedule; None when its session ended.
    fn workload_pick(&mut self, i: usize) -> Option<xload_workload::Pick> {
        self.attach_mix(i);
        if self.ctx().sessions() {
            let (conns, rec) = self.conns_mut();
            conns[i].ex.mix_mut().and_then(|m| m.session_pick(rec))
        } else {
            self.ctx().next_pick()
        }
    }

    /// Workload runs: gives connection `i` its mix, once per connection (no
    /// shared reference count per request).
    fn attach_mix(&mut self, i: usize) {
        if !self.exchange(i).has_mix() {
            let requests = self.ctx().mix_requests().cloned();
            let session = self.ctx().session_of(i);
            let session = session.as_ref().map(|(s, seed)| (s, *seed));
            let cookies = self.ctx().cookies();
            let slots = self.core().depth;
            self.exchange(i)
                .attach_mix(requests, session, cookies, slots);
        }
    }

    /// Sessions: the first time connection `i` may send, it waits its
    /// offset instead ([`Ctx::first_offset_ns`]), as a think time. True when
    /// it does; a connection that already had a session sends at once.
    fn stagger_first(&mut self, i: usize, now: u64) -> bool {
        if !self.ctx().sessions() || self.exchange(i).has_mix() || self.ctx().holding() {
            return false;
        }
        self.attach_mix(i);
        let offset = self.ctx().first_offset_ns(i);
        if offset == 0 {
            return false;
        }
        let due = now + offset;
        if let Some(m) = self.exchange(i).mix_mut() {
            m.think_due_ns = due;
        }
        self.ctx().think(i, due);
        true
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
            if current && self.is_open(i) && self.exchange(i).is_idle() {
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
        if self.stagger_first(i, now) {
            return;
        }
        let pipeline = self.core().pipeline;
        let want = self.exchange(i).room(pipeline);
        if want == 0 {
            return;
        }
        let n = self.ctx().allow(want);
        if n > 0 {
            self.send(
                i,
                n,
                Sent {
                    intended_ns: now,
                    sent_ns: now,
                    counted: true,
                },
                now,
            );
        }
    }

    /// Connection `i` just connected (or finished its exchange): give it work.
    #[inline]
    fn ready(&mut self, i: usize, now: u64) {
        if self.ctx().open_loop {
            if let Some(h) = self.exchange(i).h2() {
                // Listed once, however many streams it may still open.
                if h.room() == 0 || h.listed {
                    return;
                }
                h.listed = true;
            }
            self.ctx().connection_ready(now);
            self.core_mut().idle.push(i as u32);
        } else {
            self.send_batch(i, now);
        }
    }

    /// Open loop: hands sends that are due to idle connections.
    fn dispatch(&mut self, now: u64) {
        loop {
            let Some(&i) = self.core_mut().idle.last() else {
                // Every connection is busy: what is due waits for one.
                self.ctx().no_free_connection(now);
                break;
            };
            let i = i as usize;
            let room = self.exchange(i).room(1);
            if !self.is_open(i) || room == 0 {
                self.core_mut().idle.pop();
                if let Some(h) = self.exchange(i).h2_any() {
                    h.listed = false;
                }
                continue;
            }
            let ctx = self.ctx();
            let Some(intended) = ctx.take_scheduled() else {
                // A connection is free and nothing may leave yet.
                ctx.free_connection(now);
                break;
            };
            let lag_ns = now.saturating_sub(intended);
            // Counted in this recorder: the window's once it has opened.
            let measuring = ctx.measuring;
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
            if room == 1 {
                // Its last free stream (HTTP/1.1: its one request): off the list.
                self.core_mut().idle.pop();
                if let Some(h) = self.exchange(i).h2_any() {
                    h.listed = false;
                }
            }
            self.send(
                i,
                1,
                Sent {
                    intended_ns: intended,
                    sent_ns: now.max(intended),
                    counted: measuring,
                },
                now,
            );
        }
    }

    /// What connection `i` does after the codec consumed received bytes.
    #[inline]
    fn after_feed(&mut self, i: usize, fed: Fed, now: u64) {
        if let Some(h) = self.exchange(i).h2() {
            // Streams the server never processed go back to the quota.
            let retries = h.take_retries();
            let ended = h.take_ended();
            self.ctx().refund(retries);
            if fed == Fed::More {
                // New streams where there is room, sent with the ACKs and
                // WINDOW_UPDATEs due (one send), or those alone.
                if self.ctx().sessions() {
                    self.h2_session_turn(i, ended, now);
                } else {
                    self.ready(i, now);
                }
                self.push_output(i, now);
                return;
            }
        }
        match fed {
            Fed::More => {
                if self.exchange(i).is_idle() {
                    self.after_response(i, now);
                }
            }
            Fed::Close => self.replace(i, now, false),
            Fed::Failed => self.replace(i, now, true),
            Fed::Invalid(_) | Fed::Unsolicited => {
                record_fed_error(&mut self.ctx().rec, &fed);
                self.replace(i, now, true);
            }
        }
    }

    /// HTTP/2 sessions (one stream per connection): after a stream ended
    /// the session thinks, as after an HTTP/1.1 response; a session neither
    /// waiting for an answer nor thinking (its connection's SETTINGS just
    /// came) sends. Other frames (PING, WINDOW_UPDATE) send nothing.
    fn h2_session_turn(&mut self, i: usize, ended: usize, now: u64) {
        let ex = self.exchange(i);
        if !ex.is_idle() {
            return;
        }
        if ended > 0 {
            return self.after_response(i, now);
        }
        let thinking = ex.mix_mut().is_some_and(|m| m.think_due_ns != 0);
        if !thinking {
            self.ready(i, now);
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
        let timing = self.ctx().timing();
        let (conns, rec) = self.conns_mut();
        let err = conns[i].ex.eof(now, rec, timing).1;
        if let Some(k) = err {
            self.ctx().rec.record_error(k);
        }
        self.replace(i, now, err.is_some());
    }

    /// Closes connection `i` and opens a new one in its place. Requests still in
    /// flight go back to the quota to be sent again, except the one a counted
    /// failure (`failed`) stands for.
    fn replace(&mut self, i: usize, now: u64, failed: bool) {
        let in_flight = self.exchange(i).in_flight();
        self.ctx()
            .refund(in_flight.saturating_sub(usize::from(failed)));
        self.close(i);
        self.open(i, now);
    }

    /// Replaces connection `i` if its oldest request is older than `timeout_ns`.
    fn expire(&mut self, i: usize, now: u64, timeout_ns: u64) {
        if let Some(t) = self.exchange(i).oldest_sent_ns() {
            if now.saturating_sub(t) >= timeout_ns {
                self.ctx().rec.record_error(ErrorKind::RequestTimeout);
                return self.replace(i, now, true);
            }
        }
        // HTTP/2: SETTINGS never acknowledged (RFC 9113 §6.5.3), or no
        // stream allowed (MAX_CONCURRENT_STREAMS 0) and not raised in time.
        let (unacked, shut) = match self.exchange(i).h2() {
            Some(h) => (
                h.settings_overdue(now, timeout_ns),
                h.shut_overdue(now, timeout_ns),
            ),
            None => return,
        };
        if unacked {
            self.ctx()
                .rec
                .record_h2_connection_error("settings_timeout");
            self.replace(i, now, true);
        } else if shut {
            self.ctx()
                .rec
                .record_h2_connection_error("no_streams_allowed");
            // That failure stands for a request never sent: it spends quota.
            let _ = self.ctx().allow(1);
            self.replace(i, now, false);
        }
    }
}

/// What a driver reports when it ends.
pub(crate) struct DriverStats {
    pub mode: &'static str,
    pub cq_overflow: u64,
    /// io_uring: sockets were named by their slot in a registered file table.
    pub fixed_files: bool,
    /// io_uring: connections were set up and closed in the ring, their
    /// sockets never in the process's descriptor table.
    pub direct_sockets: bool,
    pub batching: Option<xload_stats::Batching>,
}
