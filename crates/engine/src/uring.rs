//! The io_uring driver.
//!
//! Per connection: `socket(2)` (synchronous, cheap), a Connect SQE linked to a
//! LinkTimeout, one multishot Recv into the worker's provided buffer ring
//! (armed once, re-armed only if the kernel ends it), and one Send SQE per
//! batch of requests flagged `CQE_SKIP_SUCCESS` with `MSG_WAITALL`, so a
//! successful send posts no completion at all. Per loop: one
//! `io_uring_enter` submits everything queued and waits for completions
//! (several at once in a closed loop with many connections, bounded by a
//! multishot ring timeout: see [`Batch`]) or the next timer, then all
//! completions are handled and the consumed receive buffers are published
//! back in one store.
//!
//! Sockets are registered in the ring's file table (slot = connection index,
//! updated by a FilesUpdate SQE queued ahead of the connect, so no extra
//! syscall): sends and receives then name the slot, and the kernel skips the
//! per-operation file lookup and reference count (`fget`/`fput`, atomics on
//! the file in a multi-threaded process). Without a table (the registration
//! failed) they name the descriptor.

use std::io;
use std::os::fd::RawFd;

use io_uring::{cqueue, opcode, squeue, types, IoUring};
use xload_stats::ErrorKind;

use crate::clock::now_ns;
use crate::conn::{record_errno, Backoff, Exchange, Phase};
use crate::drive::Transport;
use crate::lowat::{Lowat, RoundTrip};
use crate::ring::{build_ring, next_gen, on_socket, slot_update, BufRing, Token, NO_FD};
use crate::sock::{sockaddr, tcp_socket, Addr};
use crate::worker::{Ctx, DriverStats};

const OP_CONNECT: u8 = 1;
const OP_LINK_TIMEOUT: u8 = 2;
const OP_RECV: u8 = 3;
const OP_SEND: u8 = 4;
const OP_FILES: u8 = 5;
const OP_TICK: u8 = 6;
const OP_TICK_REMOVE: u8 = 7;

/// The batching tick (see [`Batch`]): its period follows the round trip
/// (1/N of it) within a floor and a ceiling; 1 ms until a round trip is known.
const TICK_RTT_DIV: u64 = 2;
const TICK_FLOOR_NS: u64 = 100_000;
const TICK_CEIL_NS: u64 = 5_000_000;
const TICK_INITIAL_NS: u64 = 1_000_000;

/// Receive buffer size: a pipelined batch of small responses fits one buffer.
const RECV_BUF: u32 = 16 * 1024;

/// Tries the features this driver needs, for real, and names the ring mode.
pub(crate) fn probe() -> Result<&'static str, String> {
    if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        if v.trim() == "2" {
            return Err("kernel.io_uring_disabled=2".into());
        }
    }
    let (ring, mode) = build_ring(8, 16).map_err(|e| format!("io_uring_setup: {e}"))?;
    let bufs = BufRing::new(4, 256, 0).map_err(|e| e.to_string())?;
    bufs.register(&ring)
        .map_err(|e| format!("provided buffer ring (needs Linux 5.19+): {e}"))?;
    let mut ring = ring;
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid out-array of two ints.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!("socketpair: {}", io::Error::last_os_error()));
    }
    let result = (|| {
        let e = opcode::RecvMulti::new(types::Fd(fds[0]), 0)
            .build()
            .user_data(1);
        // SAFETY: the SQE references only the socket and buffer group 0 (owned by `bufs`, alive below).
        unsafe { ring.submission().push(&e) }.map_err(|_| "submission queue full".to_string())?;
        // SAFETY: writing one byte from a static buffer to our own socket.
        unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) };
        let ts = types::Timespec::from(std::time::Duration::from_millis(500));
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                return Err("multishot recv did not complete".into())
            }
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        let cqe = ring
            .completion()
            .next()
            .ok_or("no completion from multishot recv")?;
        if cqe.result() != 1 {
            return Err(format!(
                "multishot recv (needs Linux 6.0+) returned {}",
                cqe.result()
            ));
        }
        if !cqueue::more(cqe.flags()) {
            return Err("multishot recv not supported (needs Linux 6.0+)".into());
        }
        Ok(mode)
    })();
    // SAFETY: closing our own socketpair; this ends the multishot recv.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    // Tear down the ring before the buffer memory.
    drop(ring);
    result
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// No socket; opened by the next sweep after `until_ns`.
    Closed {
        until_ns: u64,
    },
    Connecting,
    Open,
}

struct Conn {
    fd: RawFd,
    gen: u32,
    state: State,
    recv_armed: bool,
    /// The socket's SO_RCVLOWAT (1 = the kernel's default).
    rcvlowat: u32,
    backoff: Backoff,
    ex: Exchange,
}

struct Driver<'c, 'p> {
    // Field order matters: the ring is dropped before the memory it uses.
    ring: IoUring,
    bufs: BufRing,
    ctx: &'c mut Ctx<'p>,
    conns: Vec<Conn>,
    /// `pipeline` copies of the request, back to back (stable while the ring lives).
    batch: Box<[u8]>,
    req_len: usize,
    addr: Box<Addr>,
    connect_timeout: Box<types::Timespec>,
    timeout_ns: u64,
    pipeline: usize,
    /// Connections whose multishot receive ended (ENOBUFS) and must be re-armed.
    rearm: Vec<u32>,
    /// Open loop: open connections with nothing in flight.
    idle: Vec<u32>,
    cqes: Vec<cqueue::Entry>,
    /// Receives armed and not yet finished (stale ones included).
    recvs_live: usize,
    connects_live: usize,
    /// Pipelined closed loop: receive low-water marks (see `lowat`).
    lowat: Lowat,
    /// The connections' round trip: the batching tick and the marks follow it.
    rtt: RoundTrip,
    /// Sockets are named by their slot in the ring's registered file table.
    fixed: bool,
    /// Closed loop with many connections: how many answers a wait is for.
    waits: Batch,
    /// The multishot ring timeout that bounds those waits.
    tick: Tick,
    /// Where the cap of those waits sits.
    climb: Climb,
}

/// How many completions a closed loop's enter waits for.
///
/// Waiting for several answers at once spares wake-ups when the server, not
/// this loop, sets the pace. What bounds such a wait matters on a VM: a timer
/// armed and cancelled around every sleep (the 6.12 min-wait, or any timeout
/// nearer than the scheduler tick) reprograms the CPU's timer twice per
/// sleep, each a VM exit: ~9% of the CPU per request at `-c 100` against
/// nginx on a 2-vCPU VM (paired runs, this tick against the min-wait). So
/// the bound is one multishot ring timeout (the [`Tick`]), armed once,
/// whose every expiry ends the wait in progress: an answer that
/// has arrived waits at most one period to be reaped. `want` follows what the
/// waits bring: two waits in a row that the tick ended short lower it to what
/// came (a few live connections among stuck ones are then reaped as they
/// answer; one short wait is the tick landing mid-batch), a reap
/// that brought more than it waited for raises it by a quarter, up to `cap`
/// (where the [`Climb`] puts it).
#[derive(Debug)]
struct Batch {
    want: usize,
    cap: usize,
    /// The tick's own completions in the current reap (expiries, removes).
    tick_cqes: usize,
    /// The tick expired since the last reap.
    ticked: bool,
    /// The enter before this reap was a batched wait that returned normally.
    waited: bool,
    /// The last reap was a wait the tick ended short.
    short: bool,
    /// The enter before this reap waited for completions (batched or not).
    slept: bool,
    /// What the run's waits brought, for the report.
    seen: Batching,
}

/// A worker's waits over the whole run (warm-up included): how many enters
/// waited for completions (batched or not; including those that returned at
/// once because enough were queued, or at their timeout with none), how many
/// completions (receives, mostly; a connect or a failed send counts too, the
/// batching tick's own do not) they brought, and the range of the batch cap
/// (the most a wait asks for; a wait asks for less while its count adapts).
/// The report's [`xload_stats::Batching`] is made from it at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Batching {
    waits: u64,
    completions: u64,
    cap_min: usize,
    cap_max: usize,
}

impl Batching {
    fn report(&self) -> xload_stats::Batching {
        xload_stats::Batching::new(self.waits, self.completions, self.cap_min, self.cap_max)
    }
}

impl Batch {
    fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
        self.want = self.want.min(self.cap);
        self.seen.cap_min = self.seen.cap_min.min(self.cap);
        self.seen.cap_max = self.seen.cap_max.max(self.cap);
    }

    fn new(cap: usize) -> Batch {
        Batch {
            want: 1,
            cap: cap.max(1),
            tick_cqes: 0,
            ticked: false,
            waited: false,
            short: false,
            slept: false,
            seen: Batching {
                waits: 0,
                completions: 0,
                cap_min: cap.max(1),
                cap_max: cap.max(1),
            },
        }
    }

    /// Adjusts `want` after a reap of `completions` and starts counting the
    /// next one.
    fn after_reap(&mut self, completions: usize) {
        // What the wait got, counted as the kernel counts toward its count:
        // every completion but the tick's own.
        let got = completions - self.tick_cqes;
        if self.slept {
            self.seen.waits += 1;
            self.seen.completions += got as u64;
        }
        // The tick came and fewer completions than asked for. Usually the tick
        // ended the wait; a tick that expired while this loop was busy posts
        // at the next enter and that wait ends by count, one short. Only two
        // in a row count, and with waits shorter than a period (the point of
        // batching) two ticks never land on consecutive waits.
        let short = self.waited && self.ticked && got < self.want;
        if short && self.short {
            self.want = got.max(1);
        } else if got > self.want {
            self.want = (self.want + self.want / 4 + 1).min(self.cap);
        }
        self.short = short;
        self.tick_cqes = 0;
        self.ticked = false;
        self.waited = false;
        self.slept = false;
    }
}

/// Where a closed loop's batch cap sits, moved by the round trips it brings.
///
/// A bigger batch spares this loop wake-ups, and can spare the server some:
/// nginx answers more requests per `epoll_wait` when they come together
/// (against nginx at `-c 100` on a 2-vCPU VM, a cap of 1/4 of the
/// connections against 1/8: ~4-6% less client CPU per request and more RPS).
/// But an answer waits in the ring until its batch fills, about `cap /
/// connections` of a round trip: against a server that gains nothing from
/// batches (`xload serve --delay 1ms`, `-c 100`) the same change added 6% to
/// the p50 and took 6% off the RPS. No one cap fits both, so the cap climbs.
///
/// The round trip is measured every 10 ms by Little's law (requests in
/// flight on open connections × time ÷ answers: in a closed loop, the mean
/// latency as measured, reap waits included). After an epoch of
/// [`CLIMB_TICKS`] measurements the cap takes a step, up by a quarter plus
/// one or down by a fifth plus one, compared with the previous epoch's mean:
/// going up, it goes on up unless the round trip got longer by more than
/// 1/[`CLIMB_TOLERANCE`]; going down, it goes on down only if the round trip
/// got shorter by more than that. So batches grow while they cost no
/// latency this loop can measure (the server gains at least what the
/// answers lose by waiting) and shrink when they do; a change smaller than
/// the noise of the measure counts for bigger batches. A measurement with no
/// answers (a stalled server, the reset that ends the warm-up) or a change
/// in the number of open connections starts a new epoch compared with
/// nothing. Bounds: 1/16 of the connections (at least 2) to 1/4 (at most 64:
/// an answer then waits on average at most 1/8 of a round trip to be
/// reaped), starting at 1/8; from 1,024 connections on, 64. Fewer than 16
/// connections (or an open loop): 1, no batching.
#[derive(Debug)]
struct Climb {
    lo: usize,
    hi: usize,
    cap: usize,
    up: bool,
    /// The previous epoch's mean round trip.
    last_ns: Option<u64>,
    /// This epoch's round trips so far, and the open connections they saw.
    sum_ns: u64,
    ticks: u32,
    open: usize,
}

/// Round-trip measurements (10 ms apart) per step of the [`Climb`].
const CLIMB_TICKS: u32 = 2;
/// A change of the round trip of at most this fraction (1/100) of it counts
/// for bigger batches.
const CLIMB_TOLERANCE: u64 = 100;

impl Climb {
    /// For `conns` connections in a closed loop (0 for an open loop).
    fn new(conns: usize) -> Climb {
        let (lo, hi) = if conns < 16 {
            (1, 1)
        } else {
            ((conns / 16).clamp(2, 64), (conns / 4).min(64))
        };
        Climb {
            lo,
            hi,
            cap: (conns / 8).clamp(lo, hi),
            up: true,
            last_ns: None,
            sum_ns: 0,
            ticks: 0,
            open: 0,
        }
    }

    /// One measurement: the round trip if answers came since the last one,
    /// and the open connections; returns the cap.
    fn observe(&mut self, rtt_ns: Option<u64>, open: usize) -> usize {
        let Some(rtt_ns) = rtt_ns.filter(|_| open == self.open) else {
            self.open = open;
            self.last_ns = None;
            self.sum_ns = 0;
            self.ticks = 0;
            return self.cap;
        };
        self.sum_ns = self.sum_ns.saturating_add(rtt_ns);
        self.ticks += 1;
        if self.ticks < CLIMB_TICKS {
            return self.cap;
        }
        let rtt = self.sum_ns / u64::from(self.ticks);
        self.sum_ns = 0;
        self.ticks = 0;
        if let Some(last) = self.last_ns {
            let tol = last / CLIMB_TOLERANCE;
            let turn = if self.up {
                rtt > last.saturating_add(tol)
            } else {
                rtt.saturating_add(tol) >= last
            };
            if turn {
                self.up = !self.up;
            }
        }
        self.last_ns = Some(rtt);
        self.cap = if self.up {
            (self.cap + self.cap / 4 + 1).min(self.hi)
        } else {
            self.cap.saturating_sub(self.cap / 5 + 1).max(self.lo)
        };
        self.cap
    }
}

/// The batching tick: a multishot ring timeout (Linux 6.4+).
struct Tick {
    /// In use; off for an open loop, fewer than 16 connections, or a kernel
    /// without multishot timeouts (waits then return on the first completion).
    on: bool,
    /// The current tick (generation `gen`) is armed.
    armed: bool,
    /// Each arm has its own generation in its user data, so the remove of
    /// an old tick never hits its replacement, and an old one that escaped
    /// its remove (it was expiring) is known by its next completion.
    gen: u32,
    period_ns: u64,
    /// Read by the kernel when the arm SQE is submitted.
    ts: Box<types::Timespec>,
}

/// The tick period for a round trip of `rtt_ns` (None: not known yet).
fn tick_period_ns(rtt_ns: Option<u64>) -> u64 {
    rtt_ns.map_or(TICK_INITIAL_NS, |rtt| {
        (rtt / TICK_RTT_DIV).clamp(TICK_FLOOR_NS, TICK_CEIL_NS)
    })
}

pub(crate) fn run_worker(ctx: &mut Ctx<'_>, _index: usize) -> Result<DriverStats, String> {
    let plan = ctx.plan;
    let nconns = plan.connections_of(_index);
    let sq = ((nconns * 3 + 64).next_power_of_two()).clamp(256, 32768) as u32;
    let (ring, mode) = build_ring(sq, sq * 4).map_err(|e| format!("io_uring_setup: {e}"))?;
    let nbufs = ((nconns * 2).max(256).next_power_of_two()).min(32768) as u16;
    let bufs = BufRing::new(nbufs, RECV_BUF, 0).map_err(|e| format!("buffer ring: {e}"))?;
    bufs.register(&ring)
        .map_err(|e| format!("register buffer ring: {e}"))?;
    // A sparse table (Linux 5.19+) of one slot per connection; without it the
    // driver names descriptors, which works everywhere.
    let fixed = ring
        .submitter()
        .register_files_sparse(nconns as u32)
        .is_ok();
    let pipeline = plan.pipeline.max(1);
    // Closed loop with 16 connections or more: waits ask for several answers
    // (as many as the climb allows). Open loop wakes for every completion and
    // send time.
    let climb = Climb::new(if plan.open_loop.is_some() { 0 } else { nconns });
    let mut batch = Vec::with_capacity(plan.request.len() * pipeline);
    for _ in 0..pipeline {
        batch.extend_from_slice(&plan.request);
    }
    let mut d = Driver {
        ring,
        bufs,
        conns: (0..nconns)
            .map(|_| Conn {
                fd: -1,
                gen: 0,
                state: State::Closed { until_ns: 0 },
                recv_armed: false,
                rcvlowat: 1,
                backoff: Backoff::default(),
                ex: Exchange::new(plan.head, pipeline),
            })
            .collect(),
        batch: batch.into_boxed_slice(),
        req_len: plan.request.len(),
        addr: sockaddr(plan.addr),
        connect_timeout: Box::new(types::Timespec::from(plan.connect_timeout)),
        timeout_ns: plan.timeout.as_nanos() as u64,
        pipeline,
        rearm: Vec::with_capacity(nconns),
        idle: Vec::with_capacity(nconns),
        cqes: Vec::with_capacity(sq as usize * 4),
        recvs_live: 0,
        connects_live: 0,
        lowat: Lowat::new(pipeline, plan.open_loop.is_some()),
        rtt: RoundTrip::new(now_ns()),
        fixed,
        waits: Batch::new(climb.cap),
        tick: Tick {
            // Batching at all (16 connections or more, closed loop).
            on: climb.cap > 1,
            armed: false,
            gen: 0,
            period_ns: TICK_INITIAL_NS,
            ts: Box::new(types::Timespec::from(std::time::Duration::from_nanos(
                TICK_INITIAL_NS,
            ))),
        },
        climb,
        ctx,
    };
    d.main_loop();
    // Answers that arrived before the loop ended but were not reaped yet
    // are not requests left unanswered: one last look, no wait, nothing
    // sent. What it reads is not counted either (the window has closed:
    // the run's counts stay those of the window).
    d.ctx.close(now_ns());
    d.wait(0);
    d.reap(now_ns());
    d.ctx
        .left_unanswered(d.conns.iter().flat_map(|c| c.ex.pending.iter()));
    let cq_overflow = d.ring.completion().overflow() as u64;
    // Before the shutdown, which turns the tick off.
    let batching = d.tick.on.then(|| d.waits.seen.report());
    d.shutdown();
    Ok(DriverStats {
        mode,
        cq_overflow,
        fixed_files: d.fixed,
        batching,
    })
}

impl<'p> Transport<'p> for Driver<'_, 'p> {
    fn ctx(&mut self) -> &mut Ctx<'p> {
        self.ctx
    }
    fn exchange(&mut self, i: usize) -> &mut Exchange {
        &mut self.conns[i].ex
    }
    fn is_open(&self, i: usize) -> bool {
        self.conns[i].state == State::Open
    }
    fn conns(&self) -> usize {
        self.conns.len()
    }
    fn idle(&mut self) -> &mut Vec<u32> {
        &mut self.idle
    }
    fn pipeline(&self) -> usize {
        self.pipeline
    }
    /// One Send SQE for the `n` requests: posts no completion when it succeeds.
    #[inline]
    fn transmit(&mut self, i: usize, n: usize, _now: u64) {
        // Counted when queued (a failed send is counted as an error).
        self.ctx.rec.add_bytes_sent((n * self.req_len) as u64);
        let tok = Token {
            kind: OP_SEND,
            gen: self.conns[i].gen,
            index: i as u32,
        }
        .encode();
        let (buf, len) = (self.batch.as_ptr(), (n * self.req_len) as u32);
        let e = on_socket!(self.slot(i), self.conns[i].fd, |s| opcode::Send::new(
            s, buf, len
        )
        .flags(libc::MSG_WAITALL | libc::MSG_NOSIGNAL)
        .build())
        .flags(squeue::Flags::SKIP_SUCCESS)
        .user_data(tok);
        // SAFETY: `batch` is owned by the driver and outlives the ring's use of it.
        unsafe { self.push(&e) };
    }
    fn open(&mut self, i: usize, now: u64) {
        self.open_socket(i, now);
    }
    fn close(&mut self, i: usize) {
        self.close_socket(i);
    }
    fn eof_exchange(&mut self, i: usize, now: u64) -> Option<ErrorKind> {
        let timing = self.ctx.timing();
        self.conns[i].ex.eof(now, &mut self.ctx.rec, timing).1
    }
}

impl Driver<'_, '_> {
    fn main_loop(&mut self) {
        let now = now_ns();
        for i in 0..self.conns.len() {
            self.open(i, now);
        }
        self.arm_tick();
        // Sweep for timeouts at a tenth of the request timeout, between 1 and 100 ms.
        let sweep_ns = (self.timeout_ns / 10).clamp(1_000_000, 100_000_000);
        let mut next_sweep = now + sweep_ns;
        loop {
            let now = now_ns();
            if !self.ctx.on_time(now) {
                break;
            }
            self.open_window_quota();
            if now >= next_sweep {
                self.sweep(now);
                next_sweep = now + sweep_ns;
            }
            if self.rtt.due(now) {
                let open = self.conns.iter().filter(|c| c.state == State::Open).count();
                let in_flight = (open * self.pipeline) as u64;
                self.rtt.tick(now, self.ctx.rec.requests(), in_flight);
                self.retune_tick();
                if self.tick.on {
                    self.waits
                        .set_cap(self.climb.observe(self.rtt.fresh_ns(), open));
                }
                if let Some(stall_ns) = self.lowat.stall_ns(self.rtt.ns()) {
                    for c in self.conns.iter_mut().filter(|c| c.state == State::Open) {
                        Lowat::release_if_stalled(c.fd, &c.ex, &mut c.rcvlowat, now, stall_ns);
                    }
                }
            }
            if self.ctx.open_loop {
                self.dispatch(now);
            }
            if self.ctx.exhausted() && self.conns.iter().all(|c| c.ex.pending.is_empty()) {
                break;
            }
            let wake = self.ctx.wake_ns().min(next_sweep);
            self.wait(wake.saturating_sub(now_ns()));
            let now = now_ns();
            self.reap(now);
        }
    }

    /// Sets connection `i`'s receive low-water mark for what it waits for.
    fn set_lowat(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.state == State::Open {
            self.lowat.apply(c.fd, &c.ex, &mut c.rcvlowat);
        }
    }

    /// Submits what is queued and waits up to `wait_ns` for a completion.
    fn wait(&mut self, wait_ns: u64) {
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
            let want = if batched { self.waits.want } else { 1 };
            let res = self.ring.submitter().submit_with_args(want, &args);
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
        self.bufs.publish();
        while let Some(i) = self.rearm.pop() {
            self.arm_recv(i as usize);
        }
        if self.ctx.open_loop {
            self.dispatch(now);
        }
    }

    fn complete(&mut self, cqe: &cqueue::Entry, now: u64) {
        let tok = Token::decode(cqe.user_data());
        let res = cqe.result();
        match tok.kind {
            OP_RECV => {
                let flags = cqe.flags();
                let more = cqueue::more(flags);
                if !more {
                    self.recvs_live -= 1;
                }
                let bid = cqueue::buffer_select(flags);
                let i = tok.index as usize;
                let current = self.conns[i].gen == tok.gen;
                if current && !more {
                    self.conns[i].recv_armed = false;
                }
                if !current {
                    if let Some(b) = bid {
                        self.bufs.recycle(b);
                    }
                    return;
                }
                if res > 0 {
                    let Some(b) = bid else { return };
                    self.on_data(i, b, res as usize, now);
                    if self.conns[i].state == State::Open && !self.conns[i].recv_armed {
                        self.rearm.push(i as u32);
                    }
                } else if res == 0 {
                    self.on_eof(i, now);
                } else if res == -libc::ENOBUFS {
                    if self.conns[i].state == State::Open {
                        self.rearm.push(i as u32);
                    }
                } else {
                    record_errno(&mut self.ctx.rec, Phase::Exchange, -res);
                    self.replace(i, now, true);
                }
            }
            OP_CONNECT => {
                self.connects_live -= 1;
                let i = tok.index as usize;
                if self.conns[i].gen != tok.gen {
                    return;
                }
                if res == 0 {
                    let c = &mut self.conns[i];
                    c.state = State::Open;
                    c.backoff.reset();
                    self.ctx.rec.record_connect();
                    self.arm_recv(i);
                    self.ready(i, now);
                    self.set_lowat(i);
                } else {
                    record_errno(&mut self.ctx.rec, Phase::Connect, -res);
                    self.close(i);
                    let c = &mut self.conns[i];
                    c.state = State::Closed {
                        until_ns: c.backoff.fail(now),
                    };
                }
            }
            OP_SEND => {
                // Successful sends post nothing: this is a failure or a short send.
                let i = tok.index as usize;
                if self.conns[i].gen != tok.gen {
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
            OP_TICK => {
                self.waits.tick_cqes += 1;
                let more = cqueue::more(cqe.flags());
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
            // Only a failed remove posts (SKIP_SUCCESS): that tick was
            // expiring; its next completion is seen as old and removed then.
            OP_TICK_REMOVE => self.waits.tick_cqes += 1,
            _ => {} // OP_LINK_TIMEOUT: the connect completion says what happened.
        }
    }

    #[inline]
    fn on_data(&mut self, i: usize, bid: u16, len: usize, now: u64) {
        let timing = self.ctx.timing();
        let data = self.bufs.buffer(bid, len);
        let (_, fed) = self.conns[i].ex.feed(data, now, &mut self.ctx.rec, timing);
        self.bufs.recycle(bid);
        self.after_feed(i, fed, now);
        self.set_lowat(i);
    }

    fn arm_recv(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.recv_armed || c.state != State::Open {
            return;
        }
        c.recv_armed = true;
        let tok = Token {
            kind: OP_RECV,
            gen: c.gen,
            index: i as u32,
        }
        .encode();
        let bgid = self.bufs.bgid();
        let e = on_socket!(self.slot(i), self.conns[i].fd, |s| opcode::RecvMulti::new(
            s, bgid
        )
        .build())
        .user_data(tok);
        self.recvs_live += 1;
        // SAFETY: the buffers come from the registered ring, owned by the driver.
        unsafe { self.push(&e) };
    }

    fn open_socket(&mut self, i: usize, now: u64) {
        // Nothing more is sent once the quota is met or the loop has ended.
        if self.ctx.exhausted() || self.ctx.closing() {
            self.conns[i].state = State::Closed { until_ns: u64::MAX };
            return;
        }
        let fd = match tcp_socket(self.addr.family, false) {
            Ok(fd) => fd,
            Err(errno) => {
                record_errno(&mut self.ctx.rec, Phase::Socket, errno);
                let c = &mut self.conns[i];
                c.state = State::Closed {
                    until_ns: c.backoff.fail(now),
                };
                return;
            }
        };
        let c = &mut self.conns[i];
        c.fd = fd;
        c.rcvlowat = 1;
        c.state = State::Connecting;
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
            self.set_slot(i, &self.conns[i].fd);
        }
        self.connects_live += 1;
        // The two must be adjacent in the queue: make room for both first.
        let room = {
            let sq = self.ring.submission();
            sq.capacity() - sq.len()
        };
        if room < 2 {
            let _ = self.ring.submit();
        }
        // SAFETY: `addr` and `connect_timeout` are boxed and owned by the driver.
        unsafe {
            self.push(&connect);
            self.push(&timeout);
        }
    }

    /// Closes connection `i` (its in-flight requests are abandoned).
    fn close_socket(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if c.fd >= 0 {
            if c.recv_armed {
                // A pending multishot receive holds the socket open: end it.
                // SAFETY: fd is ours.
                unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
            }
            // SAFETY: fd is ours and closed once.
            unsafe { libc::close(c.fd) };
            if self.fixed {
                // The table holds the socket open until its slot is cleared.
                self.set_slot(i, &NO_FD[0]);
            }
        }
        let c = &mut self.conns[i];
        c.fd = -1;
        c.gen = next_gen(c.gen);
        c.recv_armed = false;
        c.ex.reset();
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

    /// Request timeouts and reconnects after backoff.
    fn sweep(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            match self.conns[i].state {
                State::Closed { until_ns } if now >= until_ns => self.open(i, now),
                State::Open => self.expire(i, now, self.timeout_ns),
                _ => {}
            }
        }
    }

    /// Cancels everything in flight, drains the completions and closes sockets.
    fn shutdown(&mut self) {
        // The cancel below ends the tick: drain waits return on the first completion.
        self.tick.on = false;
        self.tick.armed = false;
        let _ = self.ring.submit();
        let _ = self.ring.submitter().register_sync_cancel(
            Some(types::Timespec::from(std::time::Duration::from_millis(200))),
            types::CancelBuilder::any().all(),
        );
        for c in &self.conns {
            if c.fd >= 0 {
                // SAFETY: fd is ours; shutting it down ends any receive still armed.
                unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
            }
        }
        let deadline = now_ns() + 200_000_000;
        while (self.recvs_live > 0 || self.connects_live > 0) && now_ns() < deadline {
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
                    _ => {}
                }
            }
        }
        if self.recvs_live > 0 || self.connects_live > 0 {
            // The kernel may still write into a receive buffer: keep the memory.
            self.bufs.leak();
        }
        for c in &mut self.conns {
            if c.fd >= 0 {
                // SAFETY: fd is ours and closed once.
                unsafe { libc::close(c.fd) };
                c.fd = -1;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reap after a batched wait: `answers` completions, plus the tick's
    /// when `tick`; returns the count the next wait asks for.
    fn reap(b: &mut Batch, answers: usize, tick: bool) -> usize {
        b.waited = true;
        b.ticked = tick;
        b.tick_cqes = usize::from(tick);
        b.after_reap(answers + usize::from(tick));
        b.want
    }

    #[test]
    fn batch_grows_with_surplus_and_shrinks_after_two_short_ticks() {
        let mut b = Batch::new(12);
        assert_eq!(b.want, 1);
        // Answers come faster than wanted: grows by a quarter (+1) up to the cap.
        let seen: Vec<usize> = (0..10)
            .map(|_| {
                let more = b.want + 3;
                reap(&mut b, more, false)
            })
            .collect();
        assert_eq!(seen, [2, 3, 4, 6, 8, 11, 12, 12, 12, 12]);
        // Exactly what was wanted: stays.
        assert_eq!(reap(&mut b, 12, false), 12);
        // One wait the tick cut short (it landed mid-batch): stays.
        assert_eq!(reap(&mut b, 5, true), 12);
        // A full wait in between resets that.
        assert_eq!(reap(&mut b, 12, false), 12);
        assert_eq!(reap(&mut b, 4, true), 12);
        assert_eq!(reap(&mut b, 12, false), 12);
        // A tick that expired while the loop was busy, then one that ended a
        // wait, with a full wait between them: no shrink.
        assert_eq!(reap(&mut b, 11, true), 12);
        assert_eq!(reap(&mut b, 12, false), 12);
        assert_eq!(reap(&mut b, 4, true), 12);
        // Two short in a row: down to what came, never below one.
        assert_eq!(reap(&mut b, 3, true), 3);
        assert_eq!(reap(&mut b, 0, true), 1);
        // Reaps after an enter that was not a batched wait change nothing.
        b.ticked = true;
        b.after_reap(0);
        b.ticked = true;
        b.after_reap(0);
        assert_eq!(b.want, 1);
        // A live connection among stuck ones: one answer per tick, want stays 1.
        assert_eq!(reap(&mut b, 1, true), 1);
        assert_eq!(reap(&mut b, 1, false), 1);
    }

    const OPEN: usize = 100;

    /// A climb for `OPEN` connections past its first measurement (which
    /// only notes the open connections).
    fn climber() -> Climb {
        let mut c = Climb::new(OPEN);
        assert_eq!(c.observe(Some(1_000_000), OPEN), 12);
        c
    }

    /// One epoch at round trip `rtt`: the cap after it.
    fn epoch(c: &mut Climb, rtt: u64) -> usize {
        (0..CLIMB_TICKS)
            .map(|_| c.observe(Some(rtt), OPEN))
            .last()
            .unwrap()
    }

    /// Epochs of a climb over a landscape `rtt(cap)`: the caps it used.
    fn climb(c: &mut Climb, epochs: usize, rtt: impl Fn(usize) -> u64) -> Vec<usize> {
        let mut caps = vec![c.cap];
        for _ in 0..epochs {
            let r = rtt(c.cap);
            caps.push(epoch(c, r));
        }
        caps
    }

    #[test]
    fn climb_bounds_follow_the_connections() {
        let bounds = |n| {
            let c = Climb::new(n);
            (c.lo, c.cap, c.hi)
        };
        // Open loop, or too few connections to batch: one (the tick is off).
        assert_eq!(bounds(0), (1, 1, 1));
        assert_eq!(bounds(15), (1, 1, 1));
        // Batching: never down to one.
        assert_eq!(bounds(16), (2, 2, 4));
        assert_eq!(bounds(100), (6, 12, 25));
        assert_eq!(bounds(800), (50, 64, 64));
        assert_eq!(bounds(1024), (64, 64, 64));
        assert_eq!(bounds(10_000), (64, 64, 64));
        let mut c = Climb::new(16);
        let caps = climb(&mut c, 6, |cap| 1_000_000 + 100_000 * cap as u64);
        assert!(caps.iter().all(|&cap| (2..=4).contains(&cap)), "{caps:?}");
    }

    #[test]
    fn climb_steps_once_per_epoch() {
        let mut c = climber();
        for _ in 1..CLIMB_TICKS {
            assert_eq!(c.observe(Some(1_000_000), OPEN), 12);
        }
        assert_eq!(c.observe(Some(1_000_000), OPEN), 16, "first step is up");
    }

    #[test]
    fn climb_goes_down_when_batches_only_add_waiting() {
        // A server that gains nothing: each answer in a batch waits. Each
        // step costs more than the tolerance: down to the floor, where a
        // step up that costs is taken back at once.
        let mut c = climber();
        let caps = climb(&mut c, 16, |cap| 1_000_000 + 10_000 * cap as u64);
        assert_eq!(caps[..6], [12, 16, 12, 9, 7, 6]);
        assert!(caps[5..].iter().all(|&cap| cap <= 8), "{caps:?}");
        assert!(
            caps[5..].iter().filter(|&&cap| cap == 6).count() >= 5,
            "{caps:?}"
        );
    }

    #[test]
    fn climb_goes_up_while_batches_shorten_the_round_trip() {
        let mut c = climber();
        let caps = climb(&mut c, 8, |cap| 1_000_000 - 5_000 * cap as u64);
        assert_eq!(caps, [12, 16, 21, 25, 25, 25, 25, 25, 25]);
    }

    #[test]
    fn climb_goes_up_while_batches_cost_no_measurable_latency() {
        // A flat landscape (the difference is under the tolerance): up to the top.
        let mut c = climber();
        let caps = climb(&mut c, 8, |cap| 1_000_000 + 500 * cap as u64);
        assert_eq!(caps, [12, 16, 21, 25, 25, 25, 25, 25, 25]);
    }

    #[test]
    fn climb_going_down_turns_back_up_unless_it_gains() {
        // Above 12 the round trip is 10% longer; at 12 and below, flat.
        // Down from 16 gains (goes on down); down from 12 gains nothing
        // (back up); up from 9 costs nothing (goes on up, to 16 again).
        let mut c = climber();
        let caps = climb(
            &mut c,
            8,
            |cap| if cap > 12 { 1_100_000 } else { 1_000_000 },
        );
        assert_eq!(caps, [12, 16, 12, 9, 12, 16, 12, 9, 12]);
    }

    #[test]
    fn climb_tolerance_is_one_percent_either_way() {
        let from = |up: bool, rtt: u64| {
            let mut c = climber();
            c.up = up;
            c.last_ns = Some(1_000_000);
            epoch(&mut c, rtt);
            c.up
        };
        // Going up: 1% longer is within the tolerance, more is not.
        assert!(from(true, 1_010_000));
        assert!(!from(true, 1_010_001));
        // Going down: only more than 1% shorter keeps it going down.
        assert!(from(false, 990_000));
        assert!(!from(false, 989_999));
    }

    #[test]
    fn climb_compares_nothing_across_a_gap() {
        // Up to 16 on a round trip of 1 ms.
        let mut c = climber();
        assert_eq!(epoch(&mut c, 1_000_000), 16);
        // Answers stopped for a tick: the next epoch, twice as slow, is
        // compared with nothing and the climb goes on up.
        assert_eq!(c.observe(None, OPEN), 16);
        assert_eq!(epoch(&mut c, 2_000_000), 21);
        // The same with a connection gone: the tick that sees it is dropped.
        assert_eq!(c.observe(Some(8_000_000), OPEN - 1), 21);
        let caps: Vec<usize> = (0..CLIMB_TICKS)
            .map(|_| c.observe(Some(4_000_000), OPEN - 1))
            .collect();
        assert_eq!(caps.last(), Some(&25));
        assert_eq!(c.last_ns, Some(4_000_000));
        // And a half-done epoch is dropped, not mixed with the next.
        assert_eq!(c.observe(Some(1), OPEN - 1), 25);
        assert_eq!(c.observe(None, OPEN - 1), 25);
        assert_eq!((c.ticks, c.sum_ns, c.last_ns), (0, 0, None));
    }

    #[test]
    fn batch_counts_what_its_waits_brought() {
        let mut b = Batch::new(12);
        // A wait that brought 5 answers and the tick's expiry: 1 wait, 5.
        b.slept = true;
        b.tick_cqes = 1;
        b.after_reap(6);
        // A reap after an enter that did not wait: not counted.
        b.after_reap(3);
        // A wait that brought nothing (it timed out).
        b.slept = true;
        b.after_reap(0);
        // The cap moved down, then up.
        b.set_cap(6);
        b.set_cap(25);
        assert_eq!(
            b.seen,
            Batching {
                waits: 2,
                completions: 5,
                cap_min: 6,
                cap_max: 25,
            }
        );
    }

    #[test]
    fn batch_cap_lowers_what_is_waited_for() {
        let mut b = Batch::new(25);
        b.want = 20;
        b.set_cap(12);
        assert_eq!((b.cap, b.want), (12, 12));
        b.set_cap(30);
        assert_eq!((b.cap, b.want), (30, 12));
        b.set_cap(0);
        assert_eq!((b.cap, b.want), (1, 1));
    }

    #[test]
    fn climb_stays_near_the_best_cap() {
        // Round trip shortest at a cap of 16.
        let mut c = Climb::new(200);
        c.observe(None, OPEN);
        let caps = climb(&mut c, 40, |cap| {
            1_000_000 + 2_000 * (cap as u64).abs_diff(16).pow(2)
        });
        assert!(
            caps[10..].iter().all(|&cap| (12..=21).contains(&cap)),
            "{caps:?}"
        );
    }

    #[test]
    fn tick_period_follows_the_round_trip() {
        assert_eq!(tick_period_ns(None), TICK_INITIAL_NS);
        assert_eq!(tick_period_ns(Some(800_000)), 400_000);
        assert_eq!(tick_period_ns(Some(10_000)), TICK_FLOOR_NS);
        assert_eq!(tick_period_ns(Some(1_000_000_000)), TICK_CEIL_NS);
    }
}
