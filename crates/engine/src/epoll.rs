//! The epoll driver: the fallback when io_uring is unavailable (old kernel,
//! `kernel.io_uring_disabled`, a seccomp profile that denies it).
//!
//! Sockets are non-blocking and registered once, edge-triggered for input and
//! output, when they are created: no `epoll_ctl` per request. Reads drain the
//! socket into one worker buffer and feed the same codec as the io_uring
//! driver; writes go straight out and only wait for EPOLLOUT when the socket
//! buffer is full.

use std::io;
use std::os::fd::RawFd;

use xload_stats::{ErrorKind, Recorder};

use crate::clock::now_ns;
use crate::conn::{record_errno, Phase};
use crate::ctx::Ctx;
use crate::drive::{Core, DriverStats, State, Sweeper, Timeouts, Transport};
use crate::lowat::{Lowat, RoundTrip};
use crate::ring::next_gen;
use crate::sock::{target_addr, Addr, Sources};

/// The epoll driver's part of a connection.
struct Sock {
    fd: RawFd,
    /// Bytes of `batch[..unsent_end]` from `unsent_off` not yet written
    /// (https: the session counts its own).
    unsent_off: usize,
    unsent_end: usize,
    /// The socket's SO_RCVLOWAT (1 = the kernel's default).
    rcvlowat: u32,
}

struct Driver<'c, 'p> {
    ep: RawFd,
    ctx: &'c mut Ctx<'p>,
    core: Core<Sock>,
    addr: Box<Addr>,
    sources: Sources,
    timeouts: Timeouts,
    buf: Box<[u8]>,
    /// Pipelined closed loop: receive low-water marks (see `lowat`).
    lowat: Lowat,
    /// The connections' round trip: stalled marks are released after twice it.
    rtt: RoundTrip,
}

fn errno() -> i32 {
    io::Error::last_os_error()
        .raw_os_error()
        .unwrap_or(libc::EIO)
}

fn token(i: usize, gen: u32) -> u64 {
    (gen as u64) << 32 | i as u64
}

pub(crate) fn run_worker(ctx: &mut Ctx<'_>, index: usize) -> Result<DriverStats, String> {
    let plan = ctx.plan;
    // SAFETY: plain epoll_create1 call.
    let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if ep < 0 {
        return Err(format!("epoll_create1: {}", io::Error::last_os_error()));
    }
    let sock = || Sock {
        fd: -1,
        unsent_off: 0,
        unsent_end: 0,
        rcvlowat: 1,
    };
    let core = Core::new(ctx, index, sock);
    let mut d = Driver {
        ep,
        addr: target_addr(plan),
        sources: Sources::new(plan, index),
        timeouts: Timeouts::of(plan),
        buf: vec![0u8; 64 * 1024].into_boxed_slice(),
        lowat: Lowat::new(core.pipeline, plan.open_loop.is_some()),
        rtt: RoundTrip::new(now_ns()),
        core,
        ctx,
    };
    d.main_loop();
    // Answers that arrived before the loop ended but were not read yet are
    // not requests left unanswered: one last look, no wait, nothing sent.
    let in_flight = crate::drive::in_flight(&d.core.conns);
    d.ctx.close(now_ns(), in_flight);
    d.drain();
    d.ctx
        .left_unanswered(d.core.conns.iter().flat_map(|c| c.ex.sent_iter()));
    for i in 0..d.core.conns.len() {
        d.close(i);
    }
    // SAFETY: our epoll fd, closed once.
    unsafe { libc::close(ep) };
    Ok(DriverStats {
        mode: "epoll",
        cq_overflow: 0,
        fixed_files: false,
        direct_sockets: false,
        batching: None,
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
    /// Writes straight away; what the socket does not take waits for EPOLLOUT.
    fn transmit(&mut self, i: usize, n: usize, now: u64) {
        let c = &mut self.core.conns[i];
        if let Some(t) = c.tls.as_mut() {
            t.seal(c.ex.outgoing(&self.core.batch[..n * self.core.req_len]));
            return self.flush(i, now);
        }
        c.sock.unsent_off = 0;
        c.sock.unsent_end =
            c.ex.outgoing(&self.core.batch[..n * self.core.req_len])
                .len();
        self.flush(i, now);
    }
    fn open(&mut self, i: usize, now: u64) {
        self.open_socket(i, now);
    }
    fn close(&mut self, i: usize) {
        self.close_socket(i);
    }
    fn send_records(&mut self, i: usize, now: u64) {
        if self.has_unsent(i) {
            self.flush(i, now);
        }
    }
    fn send_output(&mut self, i: usize, now: u64) {
        self.flush(i, now);
    }

    fn sweep(&mut self, now: u64) {
        self.sweep_states(now, self.timeouts);
    }
}

impl Driver<'_, '_> {
    fn main_loop(&mut self) {
        let now = now_ns();
        self.ramp_up(now);
        let mut sweeper = Sweeper::new(now, self.timeouts.shortest_ns());
        let mut events: Vec<libc::epoll_event> =
            vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        loop {
            let now = now_ns();
            if !self.tick_common(now, &mut sweeper) {
                break;
            }
            if self.rtt.due(now) {
                let open = self.core.open_count();
                self.rtt.tick(
                    now,
                    self.ctx.rec.requests(),
                    (open * self.core.depth) as u64,
                );
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
            let wait_ns = wake.saturating_sub(now_ns());
            let timeout_ms = if wait_ns < 1_000_000 {
                0
            } else {
                (wait_ns / 1_000_000) as i32
            };
            // SAFETY: `events` is a valid buffer of its length.
            let n = unsafe {
                libc::epoll_wait(
                    self.ep,
                    events.as_mut_ptr(),
                    events.len() as i32,
                    timeout_ms,
                )
            };
            if n < 0 {
                if errno() == libc::EINTR {
                    continue;
                }
                std::thread::sleep(std::time::Duration::from_millis(1));
                continue;
            }
            let now = now_ns();
            for ev in &events[..n as usize] {
                let (i, gen) = ((ev.u64 & 0xffff_ffff) as usize, (ev.u64 >> 32) as u32);
                if i >= self.core.conns.len() || self.core.conns[i].gen != gen {
                    continue;
                }
                self.on_event(i, ev.events, now);
            }
            self.tend(now);
        }
    }

    /// Handles what is ready now, without waiting.
    fn drain(&mut self) {
        let mut events = vec![libc::epoll_event { events: 0, u64: 0 }; 1024];
        // As many passes as there are ready connections (edge-triggered: each
        // is reported once), at most one per connection and a few more.
        for _ in 0..=self.core.conns.len() / events.len() + 1 {
            // SAFETY: `events` is a valid buffer of its length.
            let n =
                unsafe { libc::epoll_wait(self.ep, events.as_mut_ptr(), events.len() as i32, 0) };
            let now = now_ns();
            for ev in &events[..n.max(0) as usize] {
                let (i, gen) = ((ev.u64 & 0xffff_ffff) as usize, (ev.u64 >> 32) as u32);
                if i < self.core.conns.len() && self.core.conns[i].gen == gen {
                    self.on_event(i, ev.events, now);
                }
            }
            if (n.max(0) as usize) < events.len() {
                break;
            }
        }
    }

    fn on_event(&mut self, i: usize, events: u32, now: u64) {
        match self.core.conns[i].state {
            State::Connecting { .. } => {
                if events & (libc::EPOLLOUT | libc::EPOLLERR | libc::EPOLLHUP) as u32 == 0 {
                    return;
                }
                let mut err: libc::c_int = 0;
                let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
                // SAFETY: fd is ours; err/len are valid out-parameters.
                unsafe {
                    libc::getsockopt(
                        self.core.conns[i].sock.fd,
                        libc::SOL_SOCKET,
                        libc::SO_ERROR,
                        (&mut err as *mut libc::c_int).cast(),
                        &mut len,
                    )
                };
                if err != 0 {
                    self.connect_failed(i, err, now);
                    return;
                }
                self.ctx.rec.record_connect();
                if self.ctx.plan.tls.is_some() {
                    if self.start_handshake(i, now) {
                        self.flush(i, now); // the ClientHello
                    }
                    return;
                }
                self.established(i, now);
                self.ready(i, now);
                self.set_lowat(i);
            }
            State::Open | State::Handshaking { .. } => {
                let gen = self.core.conns[i].gen;
                if events & libc::EPOLLOUT as u32 != 0 && self.has_unsent(i) {
                    self.flush(i, now);
                }
                if self.core.conns[i].gen == gen
                    && events
                        & (libc::EPOLLIN | libc::EPOLLRDHUP | libc::EPOLLHUP | libc::EPOLLERR)
                            as u32
                        != 0
                {
                    self.read(i, now);
                }
            }
            State::Closed { .. } => {}
        }
    }

    fn read(&mut self, i: usize, mut now: u64) {
        let timing = self.ctx.timing();
        loop {
            let (fd, gen) = (self.core.conns[i].sock.fd, self.core.conns[i].gen);
            // SAFETY: `buf` is ours and valid for its length.
            let n = unsafe { libc::read(fd, self.buf.as_mut_ptr().cast(), self.buf.len()) };
            if n > 0 {
                if self.core.conns[i].tls.is_some() {
                    self.on_records(i, n as usize, now);
                } else {
                    let (_, fed) = self.core.conns[i].ex.feed(
                        &self.buf[..n as usize],
                        now,
                        &mut self.ctx.rec,
                        timing,
                    );
                    self.after_feed(i, fed, now);
                }
                if self.core.conns[i].gen != gen
                    || matches!(self.core.conns[i].state, State::Closed { .. })
                {
                    return; // replaced: the new socket has its own events
                }
                // A request sent just now (stamped `now`) can be answered
                // before the next pass reads: its answer needs a later stamp
                // (a thread preempted in between read the same `now`: 0 µs).
                now = now_ns();
            } else if n == 0 {
                if self.handshaking(i) {
                    return self.handshake_failed(i, ErrorKind::TlsClosedInHandshake, now);
                }
                return self.on_eof(i, now);
            } else {
                match errno() {
                    libc::EAGAIN => return self.set_lowat(i),
                    libc::EINTR => continue,
                    e => return self.socket_failed(i, e, now),
                }
            }
        }
    }

    /// Bytes queued for connection `i` that the socket has not taken yet.
    fn has_unsent(&self, i: usize) -> bool {
        let c = &self.core.conns[i];
        match (c.tls.as_deref(), c.ex.h2_ref()) {
            (Some(t), _) => t.sent < t.out.len(),
            (None, Some(h)) => !h.unwritten().is_empty(),
            (None, None) => c.sock.unsent_off < c.sock.unsent_end,
        }
    }

    /// https: opens `n` received bytes of connection `i` and acts on them.
    fn on_records(&mut self, i: usize, n: usize, now: u64) {
        let handshaking = self.handshaking(i);
        let Some(t) = self.core.conns[i].tls.as_mut() else {
            return;
        };
        let opened = t.open(&mut self.buf[..n]);
        self.after_open(i, opened, handshaking, now);
    }

    /// Sets connection `i`'s receive low-water mark for what it waits for.
    fn set_lowat(&mut self, i: usize) {
        let c = &mut self.core.conns[i];
        // https: records are opened whole, a low-water mark has no use.
        if c.state == State::Open && c.tls.is_none() {
            self.lowat.apply(c.sock.fd, &c.ex, &mut c.sock.rcvlowat);
        }
    }

    /// Writes what connection `i` has queued: requests from `batch`, or
    /// (https) sealed records from its session.
    fn flush(&mut self, i: usize, now: u64) {
        loop {
            let c = &mut self.core.conns[i];
            let chunk = match (c.tls.as_deref(), c.ex.h2_ref()) {
                (Some(t), _) => &t.out[t.sent..],
                (None, Some(h)) => h.unwritten(),
                (None, None) => {
                    &c.ex.outgoing(&self.core.batch)[c.sock.unsent_off..c.sock.unsent_end]
                }
            };
            if chunk.is_empty() {
                return;
            }
            // SAFETY: chunk is a valid slice of our buffer (batch, the workload's request or records).
            let n = unsafe {
                libc::send(
                    c.sock.fd,
                    chunk.as_ptr().cast(),
                    chunk.len(),
                    libc::MSG_NOSIGNAL,
                )
            };
            if n >= 0 {
                match (c.tls.as_deref_mut(), c.ex.h2()) {
                    (Some(t), _) => t.sent += n as usize,
                    (None, Some(h)) => h.wrote(n as usize),
                    (None, None) => c.sock.unsent_off += n as usize,
                }
                self.ctx.rec.add_bytes_sent(n as u64);
            } else {
                match errno() {
                    libc::EAGAIN => return, // EPOLLOUT (edge) will call us again
                    libc::EINTR => continue,
                    e => return self.socket_failed(i, e, now),
                }
            }
        }
    }

    fn open_socket(&mut self, i: usize, now: u64) {
        // Nothing more is sent once the quota is met or the loop has ended.
        if self.ctx.exhausted() || self.ctx.closing() {
            self.core.conns[i].state = State::Closed { until_ns: u64::MAX };
            return;
        }
        let fd = match self.sources.socket(self.addr.family, true, i) {
            Ok(fd) => fd,
            Err(e) => {
                record_errno(&mut self.ctx.rec, Phase::Socket, e);
                return self.retry_later(i, now);
            }
        };
        let c = &mut self.core.conns[i];
        c.sock.fd = fd;
        c.sock.rcvlowat = 1;
        let mut ev = libc::epoll_event {
            events: (libc::EPOLLIN | libc::EPOLLOUT | libc::EPOLLRDHUP | libc::EPOLLET) as u32,
            u64: token(i, c.gen),
        };
        // SAFETY: both fds are ours; `ev` is valid.
        if unsafe { libc::epoll_ctl(self.ep, libc::EPOLL_CTL_ADD, fd, &mut ev) } != 0 {
            let e = errno();
            record_errno(&mut self.ctx.rec, Phase::Socket, e);
            return self.back_off(i, now);
        }
        // SAFETY: the address is valid for `len` bytes.
        let rc = unsafe {
            libc::connect(
                fd,
                &self.addr.storage as *const _ as *const libc::sockaddr,
                self.addr.len,
            )
        };
        if rc == 0 || errno() == libc::EINPROGRESS {
            self.core.conns[i].state = State::Connecting { since_ns: now };
            if rc == 0 {
                self.on_event(i, libc::EPOLLOUT as u32, now);
            }
        } else {
            let e = errno();
            self.connect_failed(i, e, now);
        }
    }

    fn close_socket(&mut self, i: usize) {
        let c = &mut self.core.conns[i];
        if c.sock.fd >= 0 {
            // SAFETY: fd is ours, closed once (this also removes it from epoll).
            unsafe { libc::close(c.sock.fd) };
        }
        c.sock.fd = -1;
        c.gen = next_gen(c.gen);
        c.sock.unsent_off = 0;
        c.sock.unsent_end = 0;
        c.state = State::Closed { until_ns: 0 };
        c.ex.reset();
    }
}
