//! The io_uring driver.
//!
//! Per connection: a socket, a Connect SQE linked to a LinkTimeout, one
//! multishot Recv into the worker's provided buffer ring (armed once,
//! re-armed only if the kernel ends it), and one Send SQE per batch of
//! requests flagged `CQE_SKIP_SUCCESS` with `MSG_WAITALL`, so a successful
//! send posts no completion at all. Per loop: one `io_uring_enter` submits
//! everything queued and waits for completions (several at once in a closed
//! loop with many connections, bounded by a multishot ring timeout: see
//! [`Batch`]) or the next timer, then all completions are handled and the
//! consumed receive buffers are published back in one store.
//!
//! Sockets are registered in the ring's file table (slot = connection
//! index): sends and receives name the slot, and the kernel skips the
//! per-operation file lookup and reference count (`fget`/`fput`, atomics on
//! the file in a multi-threaded process). Without a table (the registration
//! failed) they name the descriptor.
//!
//! Direct sockets (Linux 6.7+, tried once per worker): the socket is created
//! into its slot and TCP_NODELAY set on it by SQEs linked ahead of the
//! connect (timed by the sweep, no LinkTimeout), and closing closes the slot
//! (and cancels the receive if it has not ended), all in the ring: no
//! descriptor, no syscall per connection. Otherwise (and with `--source` or
//! receive low-water marks, which need a descriptor): `socket(2)`, and a
//! FilesUpdate SQE queued ahead of the connect puts the descriptor in the
//! slot; `shutdown(2)` and `close(2)` end it.
//!
//! When every request closes its connection (plain HTTP/1.1), the receive
//! is single-shot, re-armed only while the answer is incomplete: the
//! server's FIN after it is never read.

use std::os::fd::RawFd;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use xload_stats::{ErrorKind, Recorder};

use crate::clock::now_ns;
use crate::conn::{record_errno, Phase};
use crate::ctx::Ctx;
use crate::drive::{Core, DriverStats, State, Sweeper, Timeouts, Transport};
use crate::lowat::{Lowat, RoundTrip};
use crate::ring::{
    build_ring, next_gen, on_socket, setup_hint, slot_update, BufRing, Token, NO_FD,
};
use crate::sock::{target_addr, Addr, Sources};

mod batch;
mod probe;

use batch::{tick_period_ns, Batch, Climb, Tick};
pub(crate) use probe::probe;

const OP_CONNECT: u8 = 1;
const OP_LINK_TIMEOUT: u8 = 2;
const OP_RECV: u8 = 3;
const OP_SEND: u8 = 4;
const OP_FILES: u8 = 5;
const OP_TICK: u8 = 6;
const OP_TICK_REMOVE: u8 = 7;
/// https: a send of sealed records (posts its completion: the records'
/// buffer is reused only after it).
const OP_TLS_SEND: u8 = 8;
/// HTTP/2 over plain TCP: a send of a connection's output buffer (posts
/// its completion: the buffer is reused only after it).
const OP_H2_SEND: u8 = 9;
/// Direct sockets: a socket created into its slot, TCP_NODELAY set on it,
/// the slot closed, a receive cancelled. Each posts only when it fails.
const OP_SOCKET: u8 = 10;
const OP_SOCKOPT: u8 = 11;
const OP_CLOSE: u8 = 12;
const OP_CANCEL: u8 = 13;
/// Direct sockets with `--source`: the socket bound to its source address
/// (posts only when it fails).
const OP_BIND: u8 = 14;

/// Receive buffer size: a pipelined batch of small responses fits one buffer.
const RECV_BUF: u32 = 16 * 1024;
/// TCP's smallest default MSS (`TCP_MSS_DEFAULT`): a request this long or
/// shorter always leaves in one segment.
const ONE_SEGMENT: usize = 536;
/// `IORING_RECVSEND_POLL_FIRST` (Linux 5.19): wait for data before trying.
const RECVSEND_POLL_FIRST: u16 = 1;

/// The io_uring driver's part of a connection.
struct Sock {
    /// The socket's descriptor (-1: none, or it lives in the ring only).
    fd: RawFd,
    /// Direct sockets: its slot holds a socket the ring created.
    direct: bool,
    /// Its multishot receive is armed.
    recv_armed: bool,
    /// The socket's SO_RCVLOWAT (1 = the kernel's default).
    rcvlowat: u32,
}

struct Driver<'c, 'p> {
    // Field order matters: the ring is dropped before the memory it uses.
    ring: IoUring,
    bufs: BufRing,
    /// Its `batch` is stable while the ring lives; so are the `conns`
    /// (never reallocated) whose descriptors slot updates point to.
    ctx: &'c mut Ctx<'p>,
    core: Core<Sock>,
    addr: Box<Addr>,
    sources: Sources,
    connect_timeout: Box<types::Timespec>,
    timeouts: Timeouts,
    /// Connections whose multishot receive ended (ENOBUFS) and must be re-armed.
    rearm: Vec<u32>,
    /// Direct sockets: receives of closed connections (tokens) to cancel
    /// before the next enter, unless their end is reaped first (a server
    /// that closes sends its FIN right after the answer: the end is then
    /// usually in the same reap, and the cancel would find nothing).
    cancels: Vec<u64>,
    /// A receive found no buffer in this reap: the ring grows before the next.
    short_of_bufs: bool,
    cqes: Vec<cqueue::Entry>,
    /// Receives armed and not yet finished (stale ones included).
    recvs_live: usize,
    connects_live: usize,
    /// https: sends of sealed records not completed yet.
    tls_sends_live: usize,
    /// HTTP/2: sends of output buffers not completed yet.
    h2_sends_live: usize,
    /// The most completions one wait can ask for.
    cq_entries: usize,
    /// Pipelined closed loop: receive low-water marks (see `lowat`).
    lowat: Lowat,
    /// The connections' round trip: the batching tick and the marks follow it.
    rtt: RoundTrip,
    /// Sockets are named by their slot in the ring's registered file table.
    fixed: bool,
    /// Sockets are created into their slot and closed there by the ring
    /// (no descriptor, no socket/setsockopt/shutdown/close syscalls).
    direct: bool,
    /// Every request closes its connection (plain HTTP/1.1, `Connection:
    /// close`): receives are single-shot, re-armed only while an answer is
    /// incomplete, so the server's FIN is not read after the answer that
    /// ends the connection (a multishot receive would read it: one more
    /// wake-up and completion per connection).
    one_answer: bool,
    /// Direct sockets get TCP_NODELAY. Not when each carries one request
    /// that fits one segment of the smallest MSS: Nagle's algorithm only
    /// holds a segment back while earlier data is unacknowledged, so it
    /// could never delay anything there (one SQE less per connection).
    nodelay: bool,
    /// Closed loop with many connections: how many answers a wait is for.
    waits: Batch,
    /// The multishot ring timeout that bounds those waits.
    tick: Tick,
    /// Where the cap of those waits sits.
    climb: Climb,
}

/// A worker's ring and receive buffers. They grow with the connections up
/// to what is in flight at once, not beyond: SQEs are submitted whenever the
/// queue fills, a full CQ overflows into the kernel's list (counted, not
/// lost), and a receive buffer is lent only from its completion to the end
/// of that reap (a receive that finds none ends with ENOBUFS and is re-armed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RingSize {
    sq: u32,
    cq: u32,
    bufs: u16,
}

/// The most SQ entries and receive buffers a worker uses.
const MAX_SQ: usize = 4096;
const MAX_BUFS: usize = 2048;
/// Receive buffers in the ring at the start; it doubles whenever a receive
/// found none, so its pages are only those a busy reap needed.
const FIRST_BUFS: u16 = 128;

impl RingSize {
    fn for_connections(n: usize) -> RingSize {
        let pow2 = |v: usize| v.checked_next_power_of_two().unwrap_or(usize::MAX);
        let sq = pow2(n.saturating_mul(3).saturating_add(64)).clamp(256, MAX_SQ);
        let cq = pow2(n.saturating_mul(2)).clamp(sq * 4, crate::ring::MAX_CQ_ENTRIES as usize);
        let bufs = pow2(n.saturating_mul(2)).clamp(256, MAX_BUFS);
        RingSize {
            sq: sq as u32,
            cq: cq as u32,
            bufs: bufs as u16,
        }
    }
}

/// Tests only: `XLOAD_TEST_RING_SQ=N` sets the SQ size a worker asks for
/// (0 makes `io_uring_setup` fail with EINVAL after the probe succeeded),
/// so that the ring-setup failure path can be exercised.
fn test_sq_entries() -> Option<u32> {
    std::env::var("XLOAD_TEST_RING_SQ").ok()?.parse().ok()
}

/// Tests only: `XLOAD_TEST_NO_DIRECT_SOCKETS=1` makes a worker set up its
/// connections with descriptors, as on a kernel without the opcodes.
fn test_no_direct() -> bool {
    std::env::var_os("XLOAD_TEST_NO_DIRECT_SOCKETS").is_some_and(|v| v == "1")
}

pub(crate) fn run_worker(ctx: &mut Ctx<'_>, _index: usize) -> Result<DriverStats, String> {
    let plan = ctx.plan;
    let nconns = plan.connections_of(_index);
    let mut size = RingSize::for_connections(nconns);
    if let Some(sq) = test_sq_entries() {
        size.sq = sq;
    }
    let (ring, mode) = build_ring(size.sq, size.cq).map_err(|e| {
        format!(
            "io_uring_setup (SQ {}, CQ {} entries): {e}: {}",
            size.sq,
            size.cq,
            setup_hint(&e)
        )
    })?;
    let cq_entries = ring.params().cq_entries() as usize;
    let bufs = BufRing::growing(size.bufs, RECV_BUF, 0, FIRST_BUFS)
        .map_err(|e| format!("buffer ring: {e}"))?;
    bufs.register(&ring)
        .map_err(|e| format!("register buffer ring: {e}"))?;
    // A sparse table (Linux 5.19+) of one slot per connection; without it the
    // driver names descriptors, which works everywhere.
    let fixed = ring
        .submitter()
        .register_files_sparse(nconns as u32)
        .is_ok();
    // Closed loop with 16 connections or more (or HTTP/2 streams on a few):
    // waits ask for several answers (as many as the climb allows). Open loop
    // wakes for every completion and send time.
    let climb = match plan.open_loop {
        Some(_) => Climb::new(0, 1),
        None => Climb::new(nconns, plan.h2.as_ref().map_or(1, |h| h.streams as usize)),
    };
    let lowat = Lowat::new(plan.pipeline.max(1), plan.open_loop.is_some());
    let addr = target_addr(plan);
    let mut ring = ring;
    // Direct sockets need the table, a ring that binds if there are source
    // addresses (Linux 6.11+) and no receive low-water marks (setsockopt on
    // a descriptor).
    let direct = fixed
        && (plan.sources.is_empty() || probe::supports(&ring, opcode::Bind::CODE))
        && !lowat.on()
        && !test_no_direct()
        && probe::direct_sockets(&mut ring, addr.family).is_ok();
    let sock = || Sock {
        fd: -1,
        direct: false,
        recv_armed: false,
        rcvlowat: 1,
    };
    let core = Core::new(ctx, _index, sock);
    let mut d = Driver {
        ring,
        bufs,
        addr,
        sources: Sources::new(plan, _index),
        connect_timeout: Box::new(types::Timespec::from(plan.connect_timeout)),
        timeouts: Timeouts::of(plan),
        rearm: Vec::with_capacity(nconns),
        cancels: Vec::with_capacity(nconns),
        short_of_bufs: false,
        cqes: Vec::with_capacity(size.cq as usize),
        recvs_live: 0,
        connects_live: 0,
        tls_sends_live: 0,
        h2_sends_live: 0,
        cq_entries,
        lowat,
        rtt: RoundTrip::new(now_ns()),
        fixed,
        direct,
        one_answer: plan.tls.is_none()
            && plan.h2.is_none()
            && plan.workload.is_none()
            && request_closes(&plan.request),
        nodelay: true,
        waits: Batch::new(climb.cap),
        // Batching at all (closed loop, 16 connections or more, or HTTP/2
        // streams on several).
        tick: Tick::new(climb.batches()),
        climb,
        core,
        ctx,
    };
    d.nodelay = !(d.one_answer && plan.request.len() <= ONE_SEGMENT);
    d.main_loop();
    // Answers that arrived before the loop ended but were not reaped yet
    // are not requests left unanswered: one last look, no wait, nothing
    // sent. What it reads is not counted either (the window has closed:
    // the run's counts stay those of the window).
    let in_flight = crate::drive::in_flight(&d.core.conns);
    d.ctx.close(now_ns(), in_flight);
    d.wait(0);
    d.reap(now_ns());
    d.ctx
        .left_unanswered(d.core.conns.iter().flat_map(|c| c.ex.sent_iter()));
    let cq_overflow = d.ring.completion().overflow() as u64;
    // Before the shutdown, which turns the tick off.
    let batching = d.tick.on.then(|| d.waits.report());
    d.shutdown();
    Ok(DriverStats {
        mode,
        cq_overflow,
        fixed_files: d.fixed,
        direct_sockets: d.direct,
        batching,
    })
}

impl<'p> Transport<'p> for Driver<'_, 'p> {
    type Sock = Sock;
    fn ctx(&mut self) -> &mut Ctx<'p> {
        self.ctx
    }
    fn core(&self) -> &Core<Sock> {
        &self.core
    }
    fn split(&mut self) -> (&mut Core<Sock>, &mut Recorder) {
        (&mut self.core, &mut self.ctx.rec)
    }
    /// One Send SQE for the `n` requests: posts no completion when it succeeds.
    #[inline]
    fn transmit(&mut self, i: usize, n: usize, now: u64) {
        let c = &mut self.core.conns[i];
        if let Some(t) = c.tls.as_mut() {
            t.seal(c.ex.outgoing(&self.core.batch[..n * self.core.req_len]));
            return self.send_records(i, now);
        }
        // The run's request (repeated for the pipeline), or the workload's request in flight.
        let bytes = self.core.conns[i]
            .ex
            .outgoing(&self.core.batch[..n * self.core.req_len]);
        let (buf, len) = (bytes.as_ptr(), bytes.len() as u32);
        // Counted when queued (a failed send is counted as an error).
        self.ctx.rec.add_bytes_sent(u64::from(len));
        let tok = Token {
            kind: OP_SEND,
            gen: self.core.conns[i].gen,
            index: i as u32,
        }
        .encode();
        let e = on_socket!(self.slot(i), self.core.conns[i].sock.fd, |s| {
            opcode::Send::new(s, buf, len)
                .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                .build()
        })
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(tok);
        // SAFETY: `batch` is owned by the driver and a workload's requests by
        // the plan; both outlive the ring's use of them.
        unsafe { self.push(&e) };
    }
    fn open(&mut self, i: usize, now: u64) {
        self.open_socket(i, now);
    }
    fn close(&mut self, i: usize) {
        self.close_socket(i);
    }
    /// One Send SQE for what the session queued, unless one is in flight
    /// (its completion sends the rest).
    fn send_records(&mut self, i: usize, _now: u64) {
        let Some((buf, len)) = self.core.conns[i]
            .tls
            .as_mut()
            .and_then(|t| t.take_flight())
        else {
            return;
        };
        self.ctx.rec.add_bytes_sent(len as u64);
        let tok = Token {
            kind: OP_TLS_SEND,
            gen: self.core.conns[i].gen,
            index: i as u32,
        }
        .encode();
        let e = on_socket!(self.slot(i), self.core.conns[i].sock.fd, |s| {
            opcode::Send::new(s, buf, len as u32)
                .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                .build()
        })
        .user_data(tok);
        self.tls_sends_live += 1;
        // SAFETY: the in-flight buffer is boxed in the session and left
        // untouched until this send's completion (`Session::send_done`).
        unsafe { self.push(&e) };
    }

    /// One Send SQE for the connection's HTTP/2 output, unless one is in
    /// flight (its completion sends the rest).
    fn send_output(&mut self, i: usize, _now: u64) {
        let Some((buf, len)) = self.core.conns[i].ex.h2_any().and_then(|h| h.take_flight()) else {
            return;
        };
        self.ctx.rec.add_bytes_sent(len as u64);
        let tok = Token {
            kind: OP_H2_SEND,
            gen: self.core.conns[i].gen,
            index: i as u32,
        }
        .encode();
        let e = on_socket!(self.slot(i), self.core.conns[i].sock.fd, |s| {
            opcode::Send::new(s, buf, len as u32)
                .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
                .build()
        })
        .user_data(tok);
        self.h2_sends_live += 1;
        // SAFETY: the in-flight buffer is boxed in the exchange's HTTP/2
        // state and left untouched until this send's completion
        // (`H2Conn::send_done`); leaked at teardown if it never comes.
        unsafe { self.push(&e) };
    }

    /// Request timeouts and reconnects after backoff.
    fn sweep(&mut self, now: u64) {
        for i in 0..self.core.conns.len() {
            match self.core.conns[i].state {
                State::Closed { until_ns } if now >= until_ns => self.open(i, now),
                State::Open => self.expire(i, now, self.timeouts.request_ns),
                // Direct sockets: their connects have no linked timeout.
                State::Connecting { since_ns }
                    if self.core.conns[i].sock.direct
                        && now.saturating_sub(since_ns) >= self.timeouts.connect_ns =>
                {
                    self.connect_failed(i, libc::ETIMEDOUT, now);
                }
                State::Handshaking { since_ns }
                    if now.saturating_sub(since_ns) >= self.timeouts.handshake_ns =>
                {
                    self.handshake_failed(i, ErrorKind::TlsHandshakeTimeout, now);
                }
                _ => {}
            }
        }
    }
}

impl Driver<'_, '_> {
    fn main_loop(&mut self) {
        let now = now_ns();
        self.ramp_up(now);
        self.arm_tick();
        // A tenth of the request timeout: connects end by a linked timeout
        // (direct sockets: a tenth of the connect timeout too, if shorter).
        let watched = if self.direct {
            self.timeouts.shortest_ns()
        } else {
            self.timeouts.request_ns.min(self.timeouts.handshake_ns)
        };
        let mut sweeper = Sweeper::new(now, watched);
        loop {
            let now = now_ns();
            if !self.tick_common(now, &mut sweeper) {
                break;
            }
            if self.rtt.due(now) {
                let open = self.core.open_count();
                let in_flight = (open * self.core.depth) as u64;
                self.rtt.tick(now, self.ctx.rec.requests(), in_flight);
                self.retune_tick();
                if self.tick.on {
                    self.waits
                        .set_cap(self.climb.observe(self.rtt.fresh_ns(), open));
                }
                let conns = &mut self.core.conns;
                self.lowat
                    .release_stalled(self.rtt.ns(), now, conns, |s| (s.fd, &mut s.rcvlowat));
            }
            self.ramp_up(now);
            self.tend(now);
            if self.finished() {
                break;
            }
            let wake = self.wake_ns(sweeper.next_ns);
            self.wait(wake.saturating_sub(now_ns()));
            let now = now_ns();
            self.reap(now);
        }
    }

    /// Sets connection `i`'s receive low-water mark for what it waits for.
    fn set_lowat(&mut self, i: usize) {
        let c = &mut self.core.conns[i];
        // https: records are opened whole, a low-water mark has no use.
        if c.state == State::Open && c.tls.is_none() {
            self.lowat.apply(c.sock.fd, &c.ex, &mut c.sock.rcvlowat);
        }
    }

    /// Submits what is queued and waits up to `wait_ns` for a completion.
    fn wait(&mut self, wait_ns: u64) {
        self.queue_cancels();
        let res = if wait_ns < 2_000 {
            // No time to sleep, but completions must still come in: with
            // DEFER_TASKRUN they are only posted by an enter that asks for
            // events (a plain submit starved them: at 2 µs gaps an open loop
            // never saw a connect complete). GETEVENTS with nothing wanted
            // runs the deferred work and returns, no timer, no sleep (as
            // liburing's io_uring_get_events).
            let pending = self.ring.submission().len() as u32;
            // SAFETY: no argument is passed; the SQEs it submits were pushed
            // under `push`'s contract.
            unsafe {
                self.ring.submitter().enter::<libc::sigset_t>(
                    pending,
                    0,
                    io_uring::EnterFlags::GETEVENTS.bits(),
                    None,
                )
            }
        } else {
            let ts = types::Timespec::from(std::time::Duration::from_nanos(wait_ns));
            let args = types::SubmitArgs::new().timespec(&ts);
            // Several answers only when the tick bounds the wait (see `Batch`).
            let batched = self.tick.armed && self.waits.want > 1;
            // Every TLS send not reaped yet posts a completion (most while this
            // enter submits them): a batch waits for them on top, or they would
            // end it with half the answers it is for. An unbatched wait takes the
            // first completion: a send held by a server that answered early must
            // not hold its answer until the wait's timeout.
            let want = if batched {
                (self.waits.want + self.tls_sends_live + self.h2_sends_live).min(self.cq_entries)
            } else {
                1
            };
            let res = crate::ring::wait_with_args(&self.ring, want, &args);
            self.waits.waited = batched && res.is_ok();
            // It waited (and may have slept) unless the enter failed outright.
            self.waits.slept = match &res {
                Ok(_) => true,
                Err(e) => matches!(e.raw_os_error(), Some(libc::ETIME | libc::EINTR)),
            };
            res
        };
        if let Err(e) = res {
            match e.raw_os_error() {
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN) => {}
                _ => {
                    // An unexpected enter failure: back off briefly rather than spin.
                    std::thread::sleep(std::time::Duration::from_millis(1));
                }
            }
        }
    }

    /// Pushes one SQE, submitting first if the queue is full.
    ///
    /// # Safety
    /// Every buffer or address the entry points to must stay valid until its
    /// completion is reaped (or the ring is torn down after a drain).
    #[inline]
    unsafe fn push(&mut self, e: &squeue::Entry) {
        // SAFETY: passed on from the caller.
        while unsafe { self.ring.submission().push(e) }.is_err() {
            let _ = self.ring.submit();
        }
    }

    fn reap(&mut self, now: u64) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion());
        for cqe in &cqes {
            self.complete(cqe, now);
        }
        self.waits.after_reap(cqes.len());
        self.cqes = cqes;
        if self.tick.on && !self.tick.armed {
            self.arm_tick();
        }
        if std::mem::take(&mut self.short_of_bufs) {
            self.bufs.grow();
        }
        self.bufs.publish();
        while let Some(i) = self.rearm.pop() {
            self.arm_recv(i as usize, false);
        }
        self.tend(now);
    }

    /// Dispatches one completion by the kind in its token.
    fn complete(&mut self, cqe: &cqueue::Entry, now: u64) {
        let tok = Token::decode(cqe.user_data());
        let res = cqe.result();
        match tok.kind {
            OP_RECV => self.on_recv(tok, res, cqe.flags(), now),
            OP_CONNECT => self.on_connect(tok, res, now),
            OP_SEND => {
                // Successful sends post nothing: this is a failure or a short send.
                let i = tok.index as usize;
                if self.core.conns[i].gen != tok.gen {
                    return;
                }
                if res < 0 {
                    record_errno(&mut self.ctx.rec, Phase::Exchange, -res);
                } else {
                    self.ctx.rec.record_error(ErrorKind::Reset);
                }
                self.replace(i, now, true);
            }
            // A table update failed (it posts nothing when it succeeds): name
            // descriptors from now on; operations already queued on the slot
            // fail and their connections are replaced.
            OP_FILES => self.fixed = false,
            OP_TLS_SEND => self.on_tls_send(tok, res, now),
            OP_H2_SEND => self.on_h2_send(tok, res, now),
            OP_TICK => self.on_tick(tok, res, cqe.flags()),
            OP_SOCKET => self.on_setup_failed(tok, res, false, now),
            OP_BIND => self.on_setup_failed(tok, res, true, now),
            // A failed TCP_NODELAY (ignored, as with a descriptor), close or
            // cancel (the receive had ended): nothing to do.
            OP_SOCKOPT | OP_CLOSE | OP_CANCEL => self.waits.aside_cqes += 1,
            // Only a failed remove posts (SKIP_SUCCESS): that tick was
            // expiring; its next completion is seen as old and removed then.
            OP_TICK_REMOVE => self.waits.aside_cqes += 1,
            _ => {} // OP_LINK_TIMEOUT: the connect completion says what happened.
        }
    }

    /// A multishot receive posted: data, the peer's close, the end of the
    /// multishot (re-armed after the reap) or an error.
    #[inline]
    fn on_recv(&mut self, tok: Token, res: i32, flags: u32, now: u64) {
        let more = cqueue::more(flags);
        if !more {
            self.recvs_live -= 1;
        }
        let bid = cqueue::buffer_select(flags);
        let i = tok.index as usize;
        let current = self.core.conns[i].gen == tok.gen;
        if current && !more {
            self.core.conns[i].sock.recv_armed = false;
        }
        if !current {
            if let Some(b) = bid {
                self.bufs.recycle(b);
            }
            if !more {
                // A closed connection's receive ended: no cancel needed.
                let tok = tok.encode();
                if let Some(k) = self.cancels.iter().rposition(|&t| t == tok) {
                    self.cancels.swap_remove(k);
                }
            }
            return;
        }
        if res > 0 {
            let Some(b) = bid else { return };
            self.on_data(i, b, res as usize, now);
            if self.receiving(i) && !self.core.conns[i].sock.recv_armed {
                self.rearm.push(i as u32);
            }
        } else if res == 0 {
            if self.handshaking(i) {
                return self.handshake_failed(i, ErrorKind::TlsClosedInHandshake, now);
            }
            self.on_eof(i, now);
        } else if res == -libc::ENOBUFS {
            self.short_of_bufs = true;
            if self.receiving(i) {
                self.rearm.push(i as u32);
            }
        } else {
            self.socket_failed(i, -res, now);
        }
    }

    /// A connect completed (or failed, or its link timeout ended it).
    fn on_connect(&mut self, tok: Token, res: i32, now: u64) {
        self.connects_live -= 1;
        let i = tok.index as usize;
        if self.core.conns[i].gen != tok.gen {
            return;
        }
        if res == 0 {
            self.ctx.rec.record_connect();
            if self.ctx.plan.tls.is_some() {
                if self.start_handshake(i, now) {
                    // The receive first, then the ClientHello.
                    self.arm_recv(i, true);
                    self.send_records(i, now);
                }
                return;
            }
            self.established(i, now);
            self.arm_recv(i, true);
            self.ready(i, now);
            self.set_lowat(i);
        } else {
            record_errno(&mut self.ctx.rec, Phase::Connect, -res);
            self.back_off(i, now);
        }
    }

    /// The batching tick expired (or was removed, or is not supported).
    fn on_tick(&mut self, tok: Token, res: i32, flags: u32) {
        self.waits.aside_cqes += 1;
        let more = cqueue::more(flags);
        if res == -libc::ETIME {
            // Any tick's expiry ends the wait in progress.
            self.waits.ticked = true;
        }
        if tok.gen != self.tick.gen {
            // An old tick that escaped its remove: remove it again.
            if more {
                self.remove_tick(tok.gen);
            }
            return;
        }
        if res != -libc::ETIME && res != -libc::ECANCELED {
            // No multishot timeouts (before Linux 6.4): no batching.
            self.tick.on = false;
        }
        if !more {
            // Ended by the kernel: the reap re-arms it.
            self.tick.armed = false;
        }
    }

    /// Connection `i` is up: its receive stays armed.
    fn receiving(&self, i: usize) -> bool {
        matches!(
            self.core.conns[i].state,
            State::Open | State::Handshaking { .. }
        )
    }

    /// https: a send of sealed records completed. Its buffer is free again
    /// (whatever connection it was for); what was queued meanwhile goes.
    fn on_tls_send(&mut self, tok: Token, res: i32, now: u64) {
        self.tls_sends_live -= 1;
        self.waits.aside_cqes += 1;
        let i = tok.index as usize;
        let len = self.core.conns[i]
            .tls
            .as_ref()
            .map_or(0, |t| t.flight_len());
        if let Some(t) = self.core.conns[i].tls.as_mut() {
            t.send_done();
        }
        if self.core.conns[i].gen != tok.gen {
            // A replaced connection's: the current one may have records waiting.
            if self.receiving(i) {
                self.send_records(i, now);
            }
            return;
        }
        if res < 0 {
            return self.socket_failed(i, -res, now);
        }
        if (res as usize) < len {
            // MSG_WAITALL: short only when the connection broke.
            return self.socket_failed(i, libc::ECONNRESET, now);
        }
        self.send_records(i, now);
    }

    /// HTTP/2: a send of a connection's output completed. Its buffer is
    /// free again (whatever connection it was for); what was queued
    /// meanwhile goes.
    fn on_h2_send(&mut self, tok: Token, res: i32, now: u64) {
        self.h2_sends_live -= 1;
        self.waits.aside_cqes += 1;
        let i = tok.index as usize;
        let len = self.core.conns[i].ex.h2_any().map_or(0, |h| h.send_done());
        if self.core.conns[i].gen != tok.gen {
            if self.receiving(i) {
                self.send_output(i, now);
            }
            return;
        }
        if res < 0 {
            return self.socket_failed(i, -res, now);
        }
        if (res as usize) < len {
            // MSG_WAITALL: short only when the connection broke.
            return self.socket_failed(i, libc::ECONNRESET, now);
        }
        self.send_output(i, now);
    }

    #[inline]
    fn on_data(&mut self, i: usize, bid: u16, len: usize, now: u64) {
        let handshaking = self.handshaking(i);
        if let Some(t) = self.core.conns[i].tls.as_mut() {
            let opened = t.open(self.bufs.buffer_mut(bid, len));
            self.bufs.recycle(bid);
            return self.after_open(i, opened, handshaking, now);
        }
        let timing = self.ctx.timing();
        let data = self.bufs.buffer(bid, len);
        let (_, fed) = self.core.conns[i]
            .ex
            .feed(data, now, &mut self.ctx.rec, timing);
        self.bufs.recycle(bid);
        self.after_feed(i, fed, now);
        self.set_lowat(i);
    }

    /// Arms connection `i`'s receive (`first`: it has just connected).
    fn arm_recv(&mut self, i: usize, first: bool) {
        if self.core.conns[i].sock.recv_armed || !self.receiving(i) {
            return;
        }
        let c = &mut self.core.conns[i];
        c.sock.recv_armed = true;
        let tok = Token {
            kind: OP_RECV,
            gen: c.gen,
            index: i as u32,
        }
        .encode();
        let bgid = self.bufs.bgid();
        let e = if self.one_answer {
            // Nothing has arrived on a new connection (its request has not
            // even left): poll first rather than try a receive.
            let ioprio = if first { RECVSEND_POLL_FIRST } else { 0 };
            let len = self.bufs.buf_size();
            on_socket!(self.slot(i), self.core.conns[i].sock.fd, |s| {
                opcode::Recv::new(s, std::ptr::null_mut(), len)
                    .buf_group(bgid)
                    .ioprio(ioprio)
                    .build()
                    .flags(squeue::Flags::BUFFER_SELECT)
            })
        } else {
            on_socket!(self.slot(i), self.core.conns[i].sock.fd, |s| {
                opcode::RecvMulti::new(s, bgid).build()
            })
        }
        .user_data(tok);
        self.recvs_live += 1;
        // SAFETY: the buffers come from the registered ring, owned by the driver.
        unsafe { self.push(&e) };
    }

    fn open_socket(&mut self, i: usize, now: u64) {
        // Nothing more is sent once the quota is met or the loop has ended.
        if self.ctx.exhausted() || self.ctx.closing() {
            self.core.conns[i].state = State::Closed { until_ns: u64::MAX };
            return;
        }
        if self.direct {
            return self.open_direct(i, now);
        }
        let fd = match self.sources.socket(self.addr.family, false, i) {
            Ok(fd) => fd,
            Err(errno) => {
                record_errno(&mut self.ctx.rec, Phase::Socket, errno);
                return self.retry_later(i, now);
            }
        };
        let c = &mut self.core.conns[i];
        c.sock.fd = fd;
        c.sock.rcvlowat = 1;
        c.state = State::Connecting { since_ns: now };
        let tok = Token {
            kind: OP_CONNECT,
            gen: c.gen,
            index: i as u32,
        };
        let connect = opcode::Connect::new(
            types::Fd(fd),
            &self.addr.storage as *const _ as *const libc::sockaddr,
            self.addr.len,
        )
        .build()
        .flags(squeue::Flags::IO_LINK)
        .user_data(tok.encode());
        let timeout = opcode::LinkTimeout::new(&*self.connect_timeout)
            .build()
            .user_data(
                Token {
                    kind: OP_LINK_TIMEOUT,
                    ..tok
                }
                .encode(),
            );
        if self.fixed {
            self.set_slot(i, &self.core.conns[i].sock.fd);
        }
        self.connects_live += 1;
        // The two must be adjacent in the queue: make room for both first.
        self.make_room(2);
        // SAFETY: `addr` and `connect_timeout` are boxed and owned by the driver.
        unsafe {
            self.push(&connect);
            self.push(&timeout);
        }
    }

    /// Submits what is queued when fewer than `n` entries are free, so the
    /// next `n` pushes (a linked chain) land together.
    fn make_room(&mut self, n: usize) {
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if room < n {
            let _ = self.ring.submit();
        }
    }

    /// Direct sockets: one submission creates connection `i`'s socket in
    /// its slot, sets TCP_NODELAY and connects it (timed by the sweep), with
    /// no descriptor and no syscall of its own. A failed
    /// socket cancels the rest of the chain (see `on_setup_failed`).
    fn open_direct(&mut self, i: usize, now: u64) {
        let Ok(dest) = types::DestinationSlot::try_from_slot_target(i as u32) else {
            self.direct = false;
            return self.open_socket(i, now);
        };
        let c = &mut self.core.conns[i];
        c.sock.direct = true;
        c.sock.rcvlowat = 1;
        c.state = State::Connecting { since_ns: now };
        let tok = Token {
            kind: OP_CONNECT,
            gen: c.gen,
            index: i as u32,
        };
        let with = |kind| Token { kind, ..tok }.encode();
        let family = self.addr.family;
        let socket = opcode::Socket::new(family, libc::SOCK_STREAM, 0)
            .file_index(Some(dest))
            .build()
            .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
            .user_data(with(OP_SOCKET));
        // Hard-linked: the connect goes ahead even if the option fails (as
        // with a descriptor, where its failure is ignored).
        let nodelay = (family != libc::AF_UNIX && self.nodelay).then(|| {
            probe::turn_on(i as u32, libc::IPPROTO_TCP, libc::TCP_NODELAY)
                .flags(squeue::Flags::IO_HARDLINK | squeue::Flags::SKIP_SUCCESS)
                .user_data(with(OP_SOCKOPT))
        });
        // `--source`: bound to the connection's address with
        // IP_BIND_ADDRESS_NO_PORT (the port is picked at connect, for the
        // whole 4-tuple), as a descriptor is (`Sources::socket`). A failed
        // bind cancels the connect (see `on_setup_failed`).
        let bind = self.sources.of(i).map(|a| {
            let src = (&a.storage as *const libc::sockaddr_storage).cast();
            [
                probe::turn_on(i as u32, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT)
                    .flags(squeue::Flags::IO_HARDLINK | squeue::Flags::SKIP_SUCCESS)
                    .user_data(with(OP_SOCKOPT)),
                opcode::Bind::new(types::Fixed(i as u32), src, a.len)
                    .build()
                    .flags(squeue::Flags::IO_LINK | squeue::Flags::SKIP_SUCCESS)
                    .user_data(with(OP_BIND)),
            ]
        });
        // Timed by the sweep, not a linked timeout (one SQE, one completion
        // and a kernel timer less per connection).
        let connect = opcode::Connect::new(
            types::Fixed(i as u32),
            &self.addr.storage as *const _ as *const libc::sockaddr,
            self.addr.len,
        )
        .build()
        .user_data(tok.encode());
        self.connects_live += 1;
        // A chain must go in one submission: make room for all of it first.
        self.make_room(5);
        // SAFETY: `addr` is boxed in the driver, the source addresses are
        // owned by `sources` (never changed during the run) and `ONE` static.
        unsafe {
            self.push(&socket);
            for e in bind.iter().flatten() {
                self.push(e);
            }
            if let Some(e) = &nodelay {
                self.push(e);
            }
            self.push(&connect);
        }
    }

    /// Direct sockets: connection `i`'s socket could not be created, or
    /// bound to its source address (as `Sources::socket` reports a
    /// descriptor's failed bind). The rest of its chain is cancelled and
    /// posts for the old generation; `created`: a socket is in the slot, to
    /// be closed.
    fn on_setup_failed(&mut self, tok: Token, res: i32, created: bool, now: u64) {
        self.waits.aside_cqes += 1;
        let i = tok.index as usize;
        if self.core.conns[i].gen != tok.gen {
            return;
        }
        record_errno(&mut self.ctx.rec, Phase::Socket, -res);
        if !created {
            self.core.conns[i].sock.direct = false;
        }
        self.back_off(i, now);
    }

    /// Closes connection `i` (its in-flight requests are abandoned).
    fn close_socket(&mut self, i: usize) {
        let c = &mut self.core.conns[i];
        if c.sock.direct {
            // In the ring: the connect or the armed receive (which hold the
            // socket open) is cancelled and the slot closed; the socket is
            // released, and its FIN sent, once nothing in flight uses it.
            let armed = c.sock.recv_armed;
            let tok = Token {
                kind: OP_RECV,
                gen: c.gen,
                index: i as u32,
            };
            c.sock.direct = false;
            if matches!(c.state, State::Connecting { .. }) {
                // A connect in flight holds the socket too: end it.
                let connect = Token {
                    kind: OP_CONNECT,
                    ..tok
                };
                let cancel = opcode::AsyncCancel::new(connect.encode())
                    .build()
                    .flags(squeue::Flags::SKIP_SUCCESS)
                    .user_data(
                        Token {
                            kind: OP_CANCEL,
                            ..tok
                        }
                        .encode(),
                    );
                // SAFETY: the entry points to no memory.
                unsafe { self.push(&cancel) };
            }
            if armed {
                // Cancelled before the next enter unless it ends first.
                self.cancels.push(tok.encode());
            }
            let close = opcode::Close::new(types::Fixed(i as u32))
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(
                    Token {
                        kind: OP_CLOSE,
                        ..tok
                    }
                    .encode(),
                );
            // SAFETY: the entry points to no memory.
            unsafe { self.push(&close) };
        } else if c.sock.fd >= 0 {
            if c.sock.recv_armed {
                // A pending multishot receive holds the socket open: end it.
                // SAFETY: fd is ours.
                unsafe { libc::shutdown(c.sock.fd, libc::SHUT_RDWR) };
            }
            // SAFETY: fd is ours and closed once.
            unsafe { libc::close(c.sock.fd) };
            if self.fixed {
                // The table holds the socket open until its slot is cleared.
                self.set_slot(i, &NO_FD[0]);
            }
        }
        let c = &mut self.core.conns[i];
        c.sock.fd = -1;
        c.gen = next_gen(c.gen);
        c.sock.recv_armed = false;
        c.ex.reset();
    }

    /// Queues the cancels of closed connections' receives that have not
    /// ended yet (see `cancels`).
    fn queue_cancels(&mut self) {
        while let Some(tok) = self.cancels.pop() {
            let cancel = opcode::AsyncCancel::new(tok)
                .build()
                .flags(squeue::Flags::SKIP_SUCCESS)
                .user_data(
                    Token {
                        kind: OP_CANCEL,
                        ..Token::decode(tok)
                    }
                    .encode(),
                );
            // SAFETY: the entry points to no memory.
            unsafe { self.push(&cancel) };
        }
    }

    /// Connection `i`'s slot in the registered file table, if sockets are registered.
    #[inline]
    fn slot(&self, i: usize) -> Option<u32> {
        self.fixed.then_some(i as u32)
    }

    /// Arms the batching tick (a multishot timeout every `tick.period_ns`)
    /// as a new generation.
    fn arm_tick(&mut self) {
        if !self.tick.on {
            return;
        }
        self.tick.gen = next_gen(self.tick.gen);
        let tok = Token {
            kind: OP_TICK,
            gen: self.tick.gen,
            index: 0,
        }
        .encode();
        let e = opcode::Timeout::new(&*self.tick.ts)
            .count(0)
            .flags(types::TimeoutFlags::MULTISHOT)
            .build()
            .user_data(tok);
        // SAFETY: the timespec is boxed in the driver and read at submission.
        unsafe { self.push(&e) };
        self.tick.armed = true;
    }

    /// Moves the tick's period to follow the round trip (when off by a
    /// quarter): removes it and arms a new one in the same submission.
    /// (IORING_TIMEOUT_UPDATE would be one SQE, but before the January 2025
    /// fix it changed only the next expiry of a multishot timeout.)
    fn retune_tick(&mut self) {
        let want = tick_period_ns(self.rtt.ns());
        let period = self.tick.period_ns;
        if !self.tick.armed || want.abs_diff(period) <= period / 4 {
            return;
        }
        self.remove_tick(self.tick.gen);
        self.tick.period_ns = want;
        *self.tick.ts = types::Timespec::from(std::time::Duration::from_nanos(want));
        self.arm_tick();
    }

    /// Queues the remove of the tick of generation `gen`.
    fn remove_tick(&mut self, gen: u32) {
        let target = Token {
            kind: OP_TICK,
            gen,
            index: 0,
        }
        .encode();
        let tok = Token {
            kind: OP_TICK_REMOVE,
            gen,
            index: 0,
        }
        .encode();
        let e = opcode::TimeoutRemove::new(target)
            .build()
            .flags(squeue::Flags::SKIP_SUCCESS)
            .user_data(tok);
        // SAFETY: the entry points to no memory.
        unsafe { self.push(&e) };
    }

    /// Queues an update of slot `i` of the file table to the descriptor at
    /// `fd` (read by the kernel when the SQE is submitted; -1 clears it).
    fn set_slot(&mut self, i: usize, fd: *const RawFd) {
        // SAFETY: `fd` points into `conns` (never reallocated while the ring
        // lives) or to a static; the entry itself points to nothing else.
        unsafe { self.push(&slot_update(fd, i as u32, OP_FILES)) };
    }

    /// Ends everything in flight, drains the completions and closes sockets.
    /// The sockets are shut down first: that ends their receives, connects
    /// and sends one by one, whereas a cancel of everything scans all armed
    /// requests once per request it ends (quadratic in the connections).
    fn shutdown(&mut self) {
        // Drain waits return on the first completion (the tick, still armed
        // in the kernel, is cancelled below).
        self.tick.on = false;
        self.tick.armed = false;
        self.queue_cancels();
        let _ = self.ring.submit();
        for i in 0..self.core.conns.len() {
            let c = &self.core.conns[i];
            if c.sock.direct {
                // As shutdown(2) below: the receive reads what has arrived
                // and ends, a connect is aborted, the FIN leaves (a cancel
                // would leave answers unread, and the close then resets).
                // The slot is closed after the drain.
                let tok = Token {
                    kind: OP_CANCEL,
                    gen: c.gen,
                    index: i as u32,
                }
                .encode();
                let e = opcode::Shutdown::new(types::Fixed(i as u32), libc::SHUT_RDWR)
                    .build()
                    .user_data(tok);
                // SAFETY: the entry points to no memory.
                unsafe { self.push(&e) };
            } else if c.sock.fd >= 0 {
                // SAFETY: fd is ours; shutting it down ends any receive still armed.
                unsafe { libc::shutdown(c.sock.fd, libc::SHUT_RDWR) };
            }
        }
        let deadline = now_ns() + 200_000_000;
        while (self.recvs_live > 0
            || self.connects_live > 0
            || self.tls_sends_live > 0
            || self.h2_sends_live > 0)
            && now_ns() < deadline
        {
            self.wait(10_000_000);
            let cqes: Vec<_> = self.ring.completion().collect();
            for cqe in cqes {
                let tok = Token::decode(cqe.user_data());
                match tok.kind {
                    OP_RECV => {
                        if !cqueue::more(cqe.flags()) {
                            self.recvs_live -= 1;
                        }
                        if let Some(b) = cqueue::buffer_select(cqe.flags()) {
                            self.bufs.recycle(b);
                        }
                    }
                    OP_CONNECT => self.connects_live -= 1,
                    OP_TLS_SEND => self.tls_sends_live -= 1,
                    OP_H2_SEND => self.h2_sends_live -= 1,
                    _ => {}
                }
            }
        }
        // What is left (the tick, strays): few requests, a cheap cancel.
        let cancelled = self.ring.submitter().register_sync_cancel(
            Some(types::Timespec::from(std::time::Duration::from_millis(200))),
            types::CancelBuilder::any().all(),
        );
        if self.recvs_live > 0 || self.connects_live > 0 || cancelled.is_err() {
            // The kernel may still write into a receive buffer: keep the memory.
            self.bufs.leak();
        }
        if self.tls_sends_live > 0 || cancelled.is_err() {
            // ... or read a send's records.
            for c in &mut self.core.conns {
                if let Some(t) = c.tls.take() {
                    std::mem::forget(t);
                }
            }
        }
        if self.h2_sends_live > 0 || cancelled.is_err() {
            // ... or read an HTTP/2 output buffer.
            for c in &mut self.core.conns {
                c.ex.leak_h2();
            }
        }
        for i in 0..self.core.conns.len() {
            let c = &mut self.core.conns[i];
            if c.sock.direct {
                c.sock.direct = false;
                let e = opcode::Close::new(types::Fixed(i as u32))
                    .build()
                    .flags(squeue::Flags::SKIP_SUCCESS)
                    .user_data(0);
                // SAFETY: the entry points to no memory.
                unsafe { self.push(&e) };
            } else if c.sock.fd >= 0 {
                // SAFETY: fd is ours and closed once.
                unsafe { libc::close(c.sock.fd) };
                c.sock.fd = -1;
            }
        }
        let _ = self.ring.submit();
    }
}

/// The request asks the server to close the connection after its answer
/// (a `Connection` header with the `close` option).
fn request_closes(request: &[u8]) -> bool {
    let head_end = request
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or(request.len());
    request[..head_end]
        .split(|&b| b == b'\n')
        .skip(1)
        .filter_map(|line| {
            let colon = line.iter().position(|&b| b == b':')?;
            line[..colon]
                .eq_ignore_ascii_case(b"connection")
                .then(|| &line[colon + 1..])
        })
        .any(|value| {
            value
                .split(|&b| b == b',')
                .any(|o| o.trim_ascii().eq_ignore_ascii_case(b"close"))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_that_close_their_connection_are_recognized() {
        let closes = |r: &str| request_closes(r.as_bytes());
        assert!(closes(
            "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        ));
        assert!(closes("GET / HTTP/1.1\r\nconnection:CLOSE\r\n\r\n"));
        assert!(closes("GET / HTTP/1.1\r\nConnection: TE, close\r\n\r\n"));
        assert!(!closes("GET / HTTP/1.1\r\nHost: a\r\n\r\n"));
        assert!(!closes("GET / HTTP/1.1\r\nConnection: keep-alive\r\n\r\n"));
        assert!(!closes("GET / HTTP/1.1\r\nX-Connection: close\r\n\r\n"));
        // Only the head counts, not a body that looks like a header.
        assert!(!closes(
            "POST / HTTP/1.1\r\nContent-Length: 19\r\n\r\nConnection: close\r\n"
        ));
    }

    #[test]
    fn ring_sizes_stop_growing_within_kernel_limits() {
        let size = |n| {
            let s = RingSize::for_connections(n);
            (s.sq, s.cq, s.bufs)
        };
        // Up to 1,000 connections, what they always were.
        assert_eq!(size(1), (256, 1024, 256));
        assert_eq!(size(1000), (4096, 16384, 2048));
        // Beyond: capped, for any count a descriptor limit allows.
        assert_eq!(size(20_000), (4096, 65536, 2048));
        assert_eq!(size(10_000_000), (4096, 65536, 2048));
        assert_eq!(size(usize::MAX), (4096, 65536, 2048));
    }
}
