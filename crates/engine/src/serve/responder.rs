//! One responder worker: its ring, its listener's multishot accept, its
//! connections' multishot receives and sends, and the loop that drives them.

use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use super::answers::{self, Answers};
use super::config::{Timeouts, WorkerConfig};
use super::conn::{bytes_acked, Expired, Owed, SConn, SendLook, Vectored, NOT_FOUND};
use super::counters::{add, ServeStats, WorkerCounters};
use super::date;
use super::h2::{self, H2State};
use super::hold::Holds;
use super::tls::Tls;
use crate::clock::now_ns;
use crate::ring::{build_ring, next_gen, on_socket, slot_update, BufRing, Token, NO_FD};
use crate::sock::set_int_opt;

const OP_ACCEPT: u8 = 1;
const OP_RECV: u8 = 2;
const OP_SEND: u8 = 3;
const OP_FILES: u8 = 4;

/// Slots of a worker's registered file table (bounded by RLIMIT_NOFILE):
/// connections beyond them are named by descriptor.
const MAX_SLOTS: u32 = 4096;

/// The soft RLIMIT_NOFILE (0 if unknown): a registered file table may not be larger.
fn nofile_soft_limit() -> u64 {
    let mut r = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `r` is a valid out-pointer.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut r) } == 0 {
        r.rlim_cur
    } else {
        0
    }
}

pub(super) struct Responder {
    // The ring drops before the memory it uses.
    ring: IoUring,
    bufs: BufRing,
    pub mode: &'static str,
    listener: OwnedFd,
    accept_armed: bool,
    /// Out of descriptors: no accept before this time (the other
    /// connections go on being served meanwhile).
    accept_paused_until: u64,
    worker: usize,
    stats: Arc<ServeStats>,
    conns: Vec<SConn>,
    free: Vec<u32>,
    answers: Answers,
    /// The loop's clock, read once per pass.
    now: u64,
    timeouts: Timeouts,
    /// When connections are next looked over for the timeouts.
    next_idle_sweep: u64,
    /// Answers are held (`--delay`).
    delayed: bool,
    holds: Holds,
    rearm: Vec<u32>,
    /// A receive found no buffer in this reap: the ring grows before the next.
    short_of_bufs: bool,
    cqes: Vec<cqueue::Entry>,
    /// Descriptors for the registered file table, one per slot (stable: the
    /// kernel reads a slot's entry when its update is submitted). Empty when
    /// the table could not be registered.
    pub slots: Box<[RawFd]>,
    /// `--tls`: every connection gets a session of this configuration.
    tls: Option<Arc<rustls::ServerConfig>>,
    /// Plaintext opened from a TLS connection's records, before the scanner.
    plain: Vec<u8>,
    /// `--files`: the set answered from (shared by the workers, read only).
    files: Option<Arc<xload_files::FileSet>>,
    /// `--h2`: connections speak HTTP/2 (over TLS: when ALPN chose it).
    h2: bool,
    /// The prebuilt HTTP/2 answers (empty without `--h2`).
    h2_table: Vec<xload_http::h2::H2Response>,
}

/// The 404 of `--files`, after the status line: its fields and body.
const NOT_FOUND_START: &[u8] = b"HTTP/1.1 404 Not Found\r\nServer: xload\r\n";
const NOT_FOUND_FIELDS: &[u8] = b"Content-Type: text/plain\r\nContent-Length: 10\r\n";
const NOT_FOUND_BODY: &[u8] = b"not found\n";

impl Responder {
    pub(super) fn new(
        listener: OwnedFd,
        worker: usize,
        stats: Arc<ServeStats>,
        cfg: WorkerConfig,
        tls: Option<Arc<rustls::ServerConfig>>,
        files: Option<Arc<xload_files::FileSet>>,
    ) -> Result<Responder, String> {
        let (ring, mode) = build_ring(4096, 16384).map_err(|e| format!("io_uring_setup: {e}"))?;
        // 128 buffers at first, doubled whenever a receive found none.
        let bufs = BufRing::growing(4096, 4096, 0, 128).map_err(|e| format!("buffer ring: {e}"))?;
        bufs.register(&ring)
            .map_err(|e| format!("register buffer ring: {e}"))?;
        // Connection i's socket goes in slot i: sends and receives then skip
        // the kernel's file lookup and reference count.
        let nofile = nofile_soft_limit().min(MAX_SLOTS as u64) as u32;
        let slots = if nofile > 0 && ring.submitter().register_files_sparse(nofile).is_ok() {
            vec![-1; nofile as usize].into_boxed_slice()
        } else {
            Box::default()
        };
        Ok(Responder {
            ring,
            bufs,
            mode,
            listener,
            accept_armed: false,
            accept_paused_until: 0,
            worker,
            stats,
            conns: Vec::new(),
            free: Vec::new(),
            answers: Answers::new(cfg.body_size, date::unix_secs()),
            now: now_ns(),
            timeouts: cfg.timeouts,
            next_idle_sweep: 0,
            delayed: cfg.delay_ns.is_some(),
            holds: Holds::new(cfg.delay_ns, cfg.pool),
            rearm: Vec::new(),
            short_of_bufs: false,
            cqes: Vec::with_capacity(16384),
            slots,
            tls,
            plain: Vec::new(),
            files,
            h2: cfg.h2,
            h2_table: if cfg.h2 {
                h2::answers(cfg.body_size)
            } else {
                Vec::new()
            },
        })
    }

    fn counters(&self) -> &WorkerCounters {
        &self.stats.workers[self.worker]
    }

    /// # Safety
    /// Buffers the entry points to must stay valid until its completion.
    unsafe fn push(&mut self, e: &squeue::Entry) {
        // SAFETY: passed on from the caller.
        while unsafe { self.ring.submission().push(e) }.is_err() {
            let _ = self.ring.submit();
        }
    }

    fn arm_accept(&mut self) {
        if self.accept_armed {
            return;
        }
        self.accept_armed = true;
        let e = opcode::AcceptMulti::new(types::Fd(self.listener.as_raw_fd()))
            .flags(libc::SOCK_CLOEXEC)
            .build()
            .user_data(
                Token {
                    kind: OP_ACCEPT,
                    gen: 0,
                    index: 0,
                }
                .encode(),
            );
        // SAFETY: the listener lives as long as the responder.
        unsafe { self.push(&e) };
    }

    /// The timeouts' sweep: ends sends the client has not taken for the
    /// send timeout, and closes every connection with nothing owed to it and
    /// nothing being sent that has been idle for the idle timeout, or has had
    /// a request head incomplete for the header timeout.
    fn close_idle(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.send_overdue(now, &self.timeouts) {
                // Has the client taken anything since the last look? The
                // first look takes the measure and the next decides.
                match SendLook::of(c.send_acked, bytes_acked(c.fd)) {
                    SendLook::Measure(b) => {
                        c.send_acked = Some(b);
                        continue;
                    }
                    SendLook::Progress(b) => {
                        c.send_acked = Some(b);
                        c.send_since = now;
                        continue;
                    }
                    SendLook::TimedOut => {}
                }
                // The send fails once the socket is shut (EPIPE), and its
                // completion closes the connection as any failed send does.
                c.send_killed = true;
                c.closing = true;
                // SAFETY: our fd, still open (closed only once not sending).
                unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
                add(&self.counters().send_timeouts, 1);
                continue;
            }
            if let Some(why) = c.expired(now, &self.timeouts) {
                c.closing = true;
                let counter = match why {
                    Expired::Idle => &self.counters().idle_closed,
                    Expired::Header => &self.counters().header_timeouts,
                };
                add(counter, 1);
                self.try_finish(i);
            }
        }
    }

    pub(super) fn run(&mut self, stop: &AtomicBool) {
        self.arm_accept();
        while !stop.load(Ordering::Relaxed) {
            let secs = date::unix_secs();
            if secs != self.answers.date_secs {
                self.answers.stamp_dates(secs);
            }
            let now = now_ns();
            self.now = now;
            self.enter(self.wait_ns(now));
            // What the completions did happened after the wait: an accept or
            // a request is as old as this, not as the pass before the wait.
            self.now = now_ns();
            self.reap();
            if self.delayed {
                self.release_held(now_ns());
            }
            if !self.accept_armed && now_ns() >= self.accept_paused_until {
                self.arm_accept();
            }
            // After the completions: a request that came during the wait
            // has been read.
            if let Some(every) = self.timeouts.sweep_every {
                let now = self.now;
                if now >= self.next_idle_sweep {
                    self.next_idle_sweep = now + every;
                    self.close_idle(now);
                }
            }
        }
        self.last_look();
        self.shutdown();
    }

    /// How long the loop may wait at `now`: until the next held answer is
    /// due, accepts resume or the timeouts' sweep, 100 ms at most.
    fn wait_ns(&self, now: u64) -> u64 {
        let mut wait_ns: u64 = 100_000_000;
        if let Some(t) = self.holds.next_release_ns() {
            wait_ns = wait_ns.min(t.saturating_sub(now));
        }
        if !self.accept_armed && self.accept_paused_until > now {
            wait_ns = wait_ns.min(self.accept_paused_until - now);
        }
        if self.timeouts.sweep_every.is_some() {
            wait_ns = wait_ns.min(self.next_idle_sweep.saturating_sub(now));
        }
        wait_ns
    }

    /// Submits what is queued and waits up to `wait_ns` for a completion.
    fn enter(&mut self, wait_ns: u64) {
        let res = if wait_ns < 2_000 {
            self.ring.submit()
        } else {
            let ts = types::Timespec::from(Duration::from_nanos(wait_ns));
            let args = types::SubmitArgs::new().timespec(&ts);
            crate::ring::wait_with_args(&self.ring, 1, &args)
        };
        if let Err(e) = res {
            if !matches!(
                e.raw_os_error(),
                Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
            ) {
                std::thread::sleep(Duration::from_millis(1));
            }
        }
    }

    /// Handles every completion, gives the receive buffers back and re-arms
    /// the receives that ended.
    fn reap(&mut self) {
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion());
        for cqe in &cqes {
            self.complete(cqe);
        }
        self.cqes = cqes;
        if std::mem::take(&mut self.short_of_bufs) {
            self.bufs.grow();
        }
        self.bufs.publish();
        while let Some(i) = self.rearm.pop() {
            self.arm_recv(i as usize);
        }
    }

    fn complete(&mut self, cqe: &cqueue::Entry) {
        let tok = Token::decode(cqe.user_data());
        let res = cqe.result();
        match tok.kind {
            OP_ACCEPT => {
                if !cqueue::more(cqe.flags()) {
                    self.accept_armed = false;
                }
                if res >= 0 {
                    self.on_accept(res);
                } else if matches!(-res, libc::EMFILE | libc::ENFILE) {
                    // Out of descriptors: the multishot ended; accept again
                    // in 1 ms. (Not a sleep: that would stall every
                    // connection of this worker.)
                    self.accept_paused_until = now_ns() + 1_000_000;
                }
            }
            OP_RECV => {
                let flags = cqe.flags();
                let more = cqueue::more(flags);
                let bid = cqueue::buffer_select(flags);
                let i = tok.index as usize;
                let current = i < self.conns.len() && self.conns[i].gen == tok.gen;
                if !current {
                    if let Some(b) = bid {
                        self.bufs.recycle(b);
                    }
                    return;
                }
                if !more {
                    self.conns[i].recv_armed = false;
                }
                if res > 0 {
                    if let Some(b) = bid {
                        if self.conns[i].closing {
                            // After a 400 or the last answer (Connection:
                            // close, HTTP/1.0) nothing more is read: what
                            // still arrives is dropped, not answered.
                            self.bufs.recycle(b);
                        } else {
                            self.on_data(i, b, res as usize);
                        }
                    }
                    let c = &self.conns[i];
                    if c.live && !c.recv_armed && !c.closing {
                        self.rearm.push(i as u32);
                    }
                } else if res == -libc::ENOBUFS {
                    self.short_of_bufs = true;
                    self.rearm.push(i as u32);
                } else {
                    // EOF or error: nothing more will be read.
                    self.conns[i].closing = true;
                    self.try_finish(i);
                }
            }
            // A table update failed (it posts nothing when it succeeds): new
            // connections are named by descriptor; this slot's operations
            // fail and its connection is closed.
            OP_FILES => self.slots = Box::default(),
            OP_SEND => {
                let i = tok.index as usize;
                if i >= self.conns.len() || self.conns[i].gen != tok.gen {
                    return;
                }
                self.conns[i].sending = false;
                self.conns[i].last_ns = self.now;
                if let Some(k) = self.conns[i].send_copy.take() {
                    self.answers.give_back(k);
                }
                // With MSG_WAITALL a send ends short only on an error after
                // part of it went (a reset, the send timeout's shutdown):
                // its answers were not all delivered and are not counted.
                if res < 0 || (res as u32) < self.conns[i].send_len {
                    self.conns[i].sending_ok = 0;
                    self.conns[i].owed.clear();
                    if let Some(h) = self.conns[i].h2.as_mut() {
                        h.out.clear(); // nothing more can go
                    }
                    self.conns[i].closing = true;
                    self.try_finish(i);
                    return;
                }
                let sent_ok = std::mem::take(&mut self.conns[i].sending_ok);
                add(&self.counters().requests, u64::from(sent_ok));
                self.flush(i);
            }
            _ => {}
        }
    }

    fn on_accept(&mut self, fd: RawFd) {
        let _ = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
        let i = match self.free.pop() {
            Some(i) => i as usize,
            None => {
                self.conns.push(SConn::new(self.files.as_ref()));
                self.conns.len() - 1
            }
        };
        let c = &mut self.conns[i];
        c.accept(fd, self.now, i < self.slots.len());
        c.tls = self.tls.as_ref().and_then(Tls::new);
        // Over TLS, ALPN says which protocol once the handshake is done.
        c.proto_known = !self.h2 || c.tls.is_none();
        c.h2 = (self.h2 && c.tls.is_none()).then(H2State::new);
        if c.fixed {
            self.slots[i] = fd;
            self.set_slot(i, &self.slots[i]);
        }
        add(&self.counters().connections, 1);
        self.arm_recv(i);
        if self.conns[i].h2.is_some() {
            self.flush(i); // the server's SETTINGS
        }
    }

    fn arm_recv(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.live || c.recv_armed || c.closing {
            return;
        }
        c.recv_armed = true;
        let bgid = self.bufs.bgid();
        let e = on_socket!(c.slot(i), c.fd, |s| opcode::RecvMulti::new(s, bgid).build()).user_data(
            Token {
                kind: OP_RECV,
                gen: c.gen,
                index: i as u32,
            }
            .encode(),
        );
        // SAFETY: the buffers belong to the registered ring, owned by the responder.
        unsafe { self.push(&e) };
    }

    fn on_data(&mut self, i: usize, bid: u16, len: usize) {
        let delayed = self.delayed;
        let files = self.files.is_some();
        let mut plain = std::mem::take(&mut self.plain);
        let proto_known = self.conns[i].proto_known;
        let mut chose_h2 = None;
        let data = match self.conns[i].tls.as_mut() {
            None => self.bufs.buffer(bid, len),
            Some(t) => {
                plain.clear();
                if t.open(self.bufs.buffer(bid, len), &mut plain).is_err() {
                    // Not TLS, or a failed handshake: the alert goes, then the close.
                    self.bufs.recycle(bid);
                    self.plain = plain;
                    let c = &mut self.conns[i];
                    c.owed.clear();
                    c.closing = true;
                    self.flush(i);
                    return;
                }
                if !proto_known {
                    chose_h2 = t.chose_h2();
                }
                &plain[..]
            }
        };
        if let Some(h2) = chose_h2 {
            // The handshake is done: ALPN said which protocol.
            self.conns[i].proto_known = true;
            self.conns[i].h2 = h2.then(H2State::new);
        }
        if self.conns[i].h2.is_some() {
            let c = &mut self.conns[i];
            c.last_ns = self.now;
            let stats = &self.stats;
            let h = c.h2.as_mut().expect("checked");
            let r = h.read(data, &self.h2_table, delayed, || stats.json());
            self.bufs.recycle(bid);
            self.plain = plain;
            self.after_h2_read(i, r);
            return;
        }
        let c = &mut self.conns[i];
        c.last_ns = self.now;
        let mut new_held = 0u32;
        let owed = &mut c.owed;
        let says_keep_alive = &mut c.says_keep_alive;
        let mut ends = false;
        let res = c.scanner.feed(data, |r| {
            if ends {
                return; // after the last answer: not answered
            }
            if r.continue_only {
                owed.push_back(Owed::Continue);
                return;
            }
            *says_keep_alive |= r.says_keep_alive;
            ends |= !r.keep_alive;
            if r.special_path {
                owed.push_back(Owed::Stats {
                    head: r.head,
                    close: !r.keep_alive,
                }); // never delayed
                return;
            }
            if delayed {
                new_held += 1;
            }
            if files {
                owed.push_back(Owed::File {
                    file: r.found.unwrap_or(NOT_FOUND),
                    ready: !delayed,
                    head: r.head,
                    close: !r.keep_alive,
                });
            } else if r.head {
                owed.push_back(Owed::Head {
                    ready: !delayed,
                    close: !r.keep_alive,
                });
            } else if !r.keep_alive {
                owed.push_back(Owed::OkClose { ready: !delayed });
            } else {
                let ready = u32::from(!delayed);
                match owed.back_mut() {
                    Some(Owed::Ok { n, ready: r }) if !delayed || *r == 0 => {
                        *n += 1;
                        *r += ready;
                    }
                    _ => owed.push_back(Owed::Ok { n: 1, ready }),
                }
            }
        });
        self.bufs.recycle(bid);
        self.plain = plain;
        // A head still incomplete keeps the time its first bytes came.
        if !c.scanner.mid_head() {
            c.head_since = 0;
        } else if c.head_since == 0 {
            c.head_since = self.now.max(1);
        }
        if res.is_err() && !ends {
            c.owed.push_back(Owed::Bad);
            c.closing = true;
            add(&self.stats.workers[self.worker].bad_requests, 1);
        }
        if ends {
            // Connection: close (or HTTP/1.0): answer what was asked, then close.
            c.closing = true;
        }
        let gen = c.gen;
        if new_held > 0 {
            let now = now_ns();
            for _ in 0..new_held {
                self.hold(i as u32, gen, now);
            }
        }
        self.flush(i);
    }

    /// What HTTP/2 connection `i` read: bad requests counted, a connection
    /// error closes it once the GOAWAY has gone, held answers start their
    /// hold; then what is ready goes.
    fn after_h2_read(&mut self, i: usize, r: super::h2::Read) {
        if r.bad > 0 {
            add(&self.counters().bad_requests, u64::from(r.bad));
        }
        if r.failed {
            // The GOAWAY goes, then the connection closes.
            self.conns[i].closing = true;
        }
        if r.flooded && self.conns[i].sending {
            // A client provoking answers it does not read: the send in
            // flight fails once the socket is shut, and its completion
            // closes the connection (as the send timeout does).
            let c = &mut self.conns[i];
            c.send_killed = true;
            // SAFETY: our fd, still open (closed only once not sending).
            unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
        }
        let gen = self.conns[i].gen;
        if r.held > 0 {
            let now = now_ns();
            for _ in 0..r.held {
                self.hold(i as u32, gen, now);
            }
        }
        self.flush(i);
    }

    /// Delay: an answer starts its hold now if a pool slot is free, else queues.
    fn hold(&mut self, i: u32, gen: u32, now: u64) {
        self.holds.hold(i, gen, now);
        self.publish_in_flight();
    }

    /// Answers held or queued now, for /stats.
    fn publish_in_flight(&self) {
        let cnt = self.counters();
        cnt.in_flight
            .store(self.holds.len() as u64, Ordering::Relaxed);
    }

    /// A closed connection's held and queued answers will never be sent:
    /// they give back their pool slots (to queued answers of live
    /// connections) and leave the in-flight gauge.
    fn forget_held(&mut self, i: u32, gen: u32) {
        self.holds.forget(i, gen, now_ns());
        self.publish_in_flight();
    }

    /// Releases held answers whose time has come; queued ones take their slots.
    fn release_held(&mut self, now: u64) {
        let mut touched = false;
        while let Some((i, gen)) = self.holds.pop_due(now) {
            touched = true;
            let idx = i as usize;
            if idx < self.conns.len() && self.conns[idx].gen == gen && self.conns[idx].live {
                match self.conns[idx].h2.as_mut() {
                    Some(h) => h.release_oldest(&self.h2_table),
                    None => Owed::release_oldest(&mut self.conns[idx].owed),
                }
                self.flush(idx);
            }
            self.holds.admit_next(now);
        }
        if touched {
            self.publish_in_flight();
        }
    }

    /// Sends what is owed and ready, in order; one send in flight at a time.
    fn flush(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.live || c.sending {
            return;
        }
        if c.tls.as_ref().is_some_and(|t| t.wants_send()) {
            // Handshake records or an alert first; the completion flushes again.
            c.sending = true;
            c.sending_ok = 0;
            // SAFETY: no plaintext to read; the records go from the session's own buffer.
            unsafe { self.queue_send(i, std::ptr::null(), 0) };
            return;
        }
        if c.h2.is_some() {
            self.flush_h2(i);
            return;
        }
        // Fast path: only plain answers ready at the front.
        if let Some(Owed::Ok { n, ready }) = c.owed.front_mut() {
            if *ready > 0 {
                let k = (*ready as usize).min(self.answers.batch_n);
                *ready -= k as u32;
                *n -= k as u32;
                if *n == 0 {
                    c.owed.pop_front();
                }
                c.sending = true;
                c.sending_ok = k as u32;
                let (copy, buf, n) = self.answers.lend(k, c.says_keep_alive);
                c.send_copy = Some(copy);
                // SAFETY: the batches are owned by the responder for its
                // lifetime, and the copy lent is not re-dated before its
                // send completes (`send_copy` gives it back).
                unsafe { self.queue_send(i, buf, n) };
                return;
            }
            return; // the front answer is still held
        }
        self.flush_mixed(i);
    }

    /// HTTP/2: sends what the codec has rendered (frames of many streams
    /// in one send), rendering more of the answers held back by the
    /// windows when nothing is waiting; closes a closing connection once
    /// all has gone.
    fn flush_h2(&mut self, i: usize) {
        let c = &mut self.conns[i];
        let Some(h) = c.h2.as_mut() else {
            return;
        };
        if h.out.is_empty() && !c.closing {
            h.pump(&self.h2_table);
        }
        if h.out.is_empty() {
            if c.closing {
                self.try_finish(i);
            }
            return;
        }
        // The rendered bytes become the send's; the codec writes the next
        // ones into the buffer the last send used.
        std::mem::swap(&mut c.out, &mut h.out);
        h.out.clear();
        c.sending = true;
        c.sending_ok = std::mem::take(&mut h.ok_in_out);
        let (buf, n) = (c.out.as_ptr(), c.out.len() as u32);
        // SAFETY: `out` is not touched while `sending` is set, and the slot is not
        // reused before the send completes (see try_finish).
        unsafe { self.queue_send(i, buf, n) };
    }

    /// Sends the answer at the front that is not a plain one: stats, 400,
    /// 100 Continue, HEAD or a closing answer, copied into the connection's
    /// own buffer.
    fn flush_mixed(&mut self, i: usize) {
        let c = &mut self.conns[i];
        c.out.clear();
        let mut ok = 0u32;
        let mut ends = false;
        match c.owed.front() {
            Some(&Owed::Stats {
                head: only_head,
                close,
            }) => {
                let body = self.stats.json();
                self.answers
                    .stats(&mut c.out, &body, only_head, close, c.says_keep_alive);
                c.owed.pop_front();
            }
            Some(Owed::OkClose { ready: true }) => {
                c.out.extend_from_slice(&self.answers.ok_close);
                c.owed.clear();
                ok = 1;
                ends = true;
            }
            Some(Owed::Continue) => {
                c.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                c.owed.pop_front();
            }
            Some(&Owed::Head { ready: true, close }) => {
                c.out
                    .extend_from_slice(self.answers.head(close, c.says_keep_alive));
                ok = 1;
                if close {
                    c.owed.clear();
                    ends = true;
                } else {
                    c.owed.pop_front();
                }
            }
            Some(&Owed::File {
                file,
                ready: true,
                head,
                close,
            }) => {
                self.send_file(i, file, head, close);
                return;
            }
            Some(Owed::Bad) => {
                c.out.extend_from_slice(&self.answers.bad);
                c.owed.clear();
                ends = true;
            }
            Some(_) => return, // held
            None => {
                self.try_finish(i);
                return;
            }
        }
        if ends {
            c.closing = true;
        }
        c.sending = true;
        c.sending_ok = ok;
        let (buf, n) = (c.out.as_ptr(), c.out.len() as u32);
        // SAFETY: `out` is not touched while `sending` is set, and the slot is not
        // reused before the send completes (see try_finish).
        unsafe { self.queue_send(i, buf, n) };
    }

    /// Sends the answer of `--files` for file number `file` (404 for
    /// [`NOT_FOUND`]): its head built in the connection's buffer, then the
    /// body from the set, unchanged for the responder's life, by pointer.
    fn send_file(&mut self, i: usize, file: u32, head_only: bool, close: bool) {
        let Some(set) = self.files.as_deref() else {
            return;
        };
        let c = &mut self.conns[i];
        let found = set.files.get(file as usize);
        let (start, fields) = match found {
            Some(f) => (answers::OK_START.as_bytes(), &f.fields[..]),
            None => (NOT_FOUND_START, NOT_FOUND_FIELDS),
        };
        c.out.extend_from_slice(start);
        c.out.extend_from_slice(self.answers.date_line());
        c.out.extend_from_slice(fields);
        c.out.extend_from_slice(match (close, c.says_keep_alive) {
            (true, _) => b"Connection: close\r\n\r\n",
            (false, true) => b"Connection: keep-alive\r\n\r\n",
            (false, false) => b"\r\n",
        });
        let body: &[u8] = match found {
            _ if head_only => &[],
            Some(f) => &f.body,
            None => {
                c.out.extend_from_slice(NOT_FOUND_BODY);
                &[]
            }
        };
        if found.is_none() {
            add(&self.stats.workers[self.worker].not_found, 1);
        }
        if close {
            c.owed.clear();
            c.closing = true;
        } else {
            c.owed.pop_front();
        }
        c.sending = true;
        c.sending_ok = 1;
        let (body, body_len) = (body.as_ptr(), body.len());
        // SAFETY: `out` is not touched while `sending` is set; the body
        // belongs to the set, which outlives the responder's sends.
        unsafe { self.queue_file_send(i, body, body_len) };
    }

    /// Closes a connection that is done reading once nothing is being sent.
    fn try_finish(&mut self, i: usize) {
        let c = &mut self.conns[i];
        if !c.live || !c.closing || c.sending {
            return;
        }
        if c.owed.iter().any(|o| !o.is_held()) {
            // Something is still sendable: flush will come back here.
            return;
        }
        if c.h2.as_ref().is_some_and(|h| !h.out.is_empty()) {
            return; // a GOAWAY or answers still to go: flush comes back
        }
        if c.recv_armed {
            // SAFETY: our fd; ends the armed receive.
            unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
        }
        // SAFETY: our fd, closed once.
        unsafe { libc::close(c.fd) };
        c.fd = -1;
        c.live = false;
        c.recv_armed = false;
        let gen = c.gen;
        c.gen = next_gen(c.gen);
        // Answers still held or queued: never sent, their slots go back.
        let mut lost: u64 = c.owed.iter().map(Owed::held_answers).sum();
        c.owed.clear();
        if let Some(h) = c.h2.as_mut() {
            lost += h.held.len() as u64;
            h.held.clear();
        }
        if lost > 0 {
            add(&self.counters().abandoned, lost);
            self.forget_held(i as u32, gen);
        }
        let c = &mut self.conns[i];
        if std::mem::take(&mut c.fixed) {
            // The table holds the socket open until its slot is cleared.
            if let Some(slot) = self.slots.get_mut(i) {
                *slot = -1;
            }
            self.set_slot(i, &NO_FD[0]);
        }
        self.free.push(i as u32);
    }

    /// Queues an update of slot `i` of the file table to the descriptor at
    /// `fd` (read by the kernel when the SQE is submitted).
    fn set_slot(&mut self, i: usize, fd: *const RawFd) {
        // SAFETY: `fd` points into `slots` (never reallocated while the ring
        // lives) or to a static.
        unsafe { self.push(&slot_update(fd, i as u32, OP_FILES)) };
    }

    /// Queues the send of connection `i`'s `out` (a head) and `body_len`
    /// bytes at `body`: one `sendmsg` of both (or one send of their records
    /// over TLS).
    ///
    /// # Safety
    /// `out` and the body must stay valid and unchanged until the send completes.
    unsafe fn queue_file_send(&mut self, i: usize, body: *const u8, body_len: usize) {
        let c = &mut self.conns[i];
        if body_len == 0 {
            let (buf, n) = (c.out.as_ptr(), c.out.len() as u32);
            // SAFETY: passed on from the caller.
            return unsafe { self.queue_send(i, buf, n) };
        }
        // SAFETY: the caller's `body_len` bytes at `body` are valid now.
        let body = unsafe { std::slice::from_raw_parts(body, body_len) };
        let last = c.closing && c.owed.is_empty();
        let e = if let Some(t) = c.tls.as_mut() {
            t.seal(&[&c.out, body], last);
            let (buf, n) = (t.out.as_ptr(), t.out.len() as u32);
            on_socket!(c.slot(i), c.fd, |s| opcode::Send::new(s, buf, n)
                .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
                .build())
        } else {
            let msg = c
                .vectored
                .get_or_insert_with(Vectored::new)
                .set(&c.out, body);
            on_socket!(c.slot(i), c.fd, |s| opcode::SendMsg::new(s, msg)
                .flags((libc::MSG_NOSIGNAL | libc::MSG_WAITALL) as u32)
                .build())
        };
        let n = match c.tls.as_ref() {
            Some(t) => t.out.len(),
            None => c.out.len() + body_len,
        };
        // SAFETY: passed on from the caller; TLS records stay in `t.out`,
        // the message in the connection's boxed `vectored`.
        unsafe { self.push_send(i, e, n as u32) };
    }

    /// Queues one send of `n` bytes at `buf` on connection `i`'s socket.
    ///
    /// # Safety
    /// `buf` must stay valid and unchanged until the send completes.
    unsafe fn queue_send(&mut self, i: usize, buf: *const u8, n: u32) {
        let c = &mut self.conns[i];
        let (buf, n) = match c.tls.as_mut() {
            None => (buf, n),
            Some(t) => {
                let plain: &[u8] = if n == 0 {
                    &[]
                } else {
                    // SAFETY: the caller's `n` bytes at `buf` are valid now.
                    unsafe { std::slice::from_raw_parts(buf, n as usize) }
                };
                // The last answer of a closing connection ends with close_notify.
                t.seal(&[plain], c.closing && c.owed.is_empty());
                // `out` stays untouched until this send completes.
                (t.out.as_ptr(), t.out.len() as u32)
            }
        };
        let c = &self.conns[i];
        let e = on_socket!(c.slot(i), c.fd, |s| opcode::Send::new(s, buf, n)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build());
        // SAFETY: passed on from the caller.
        unsafe { self.push_send(i, e, n) };
    }

    /// Queues send `e` of `n` bytes on connection `i`, and notes it for the
    /// send timeout and the completion.
    ///
    /// # Safety
    /// What `e` reads must stay valid and unchanged until it completes.
    unsafe fn push_send(&mut self, i: usize, e: squeue::Entry, n: u32) {
        let c = &mut self.conns[i];
        c.send_since = self.now;
        c.send_acked = None;
        c.send_len = n;
        let tok = Token {
            kind: OP_SEND,
            gen: c.gen,
            index: i as u32,
        };
        // SAFETY: passed on from the caller.
        unsafe { self.push(&e.user_data(tok.encode())) };
    }

    /// At the stop, HTTP/2 connections with no send in flight are told
    /// GOAWAY(NO_ERROR), best effort (a non-blocking send; a full socket
    /// buffer drops it): a client then knows the close was meant.
    fn say_goaway(&mut self) {
        let mut bye = Vec::new();
        for c in &mut self.conns {
            let (true, false, Some(h)) = (c.live, c.sending, c.h2.as_mut()) else {
                continue;
            };
            bye.clear();
            h.conn.close(&mut bye);
            if bye.is_empty() {
                continue;
            }
            let bytes: &[u8] = match c.tls.as_mut() {
                Some(t) => {
                    t.seal(&[&bye], true);
                    &t.out
                }
                None => &bye,
            };
            // SAFETY: our fd, still open; `bytes` is valid for its length.
            unsafe {
                libc::send(
                    c.fd,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    libc::MSG_DONTWAIT | libc::MSG_NOSIGNAL,
                )
            };
        }
    }

    /// At the stop: sends that completed since the last reap count (the
    /// final count was short by the last batch), and answers still held or
    /// queued on open connections are counted abandoned (they were dropped
    /// without a word at --for's end or Ctrl-C).
    fn last_look(&mut self) {
        // SAFETY: no argument; GETEVENTS runs deferred completions, no wait.
        let _ = unsafe {
            self.ring.submitter().enter::<libc::sigset_t>(
                0,
                0,
                io_uring::EnterFlags::GETEVENTS.bits(),
                None,
            )
        };
        let mut cqes = std::mem::take(&mut self.cqes);
        cqes.clear();
        cqes.extend(self.ring.completion());
        for cqe in &cqes {
            if Token::decode(cqe.user_data()).kind == OP_SEND {
                self.complete(cqe);
            }
        }
        self.cqes = cqes;
        let lost: u64 = self
            .conns
            .iter()
            .filter(|c| c.live)
            .map(|c| {
                let held = c.h2.as_ref().map_or(0, |h| h.held.len() as u64);
                c.owed.iter().map(Owed::held_answers).sum::<u64>() + held
            })
            .sum();
        if lost > 0 {
            add(&self.counters().abandoned, lost);
        }
    }

    /// Ends every request in flight and closes the sockets. They are shut
    /// down first, which ends their receives and sends one by one; the cancel
    /// of everything that follows finds few requests left (it scans all that
    /// are armed once per request it ends: quadratic in the connections).
    fn shutdown(&mut self) {
        let _ = self.ring.submit();
        self.say_goaway();
        for c in &self.conns {
            if c.live {
                // SAFETY: our fd, still open.
                unsafe { libc::shutdown(c.fd, libc::SHUT_RDWR) };
            }
        }
        // Reap what the shutdowns posted, for at most 200 ms.
        let ts = types::Timespec::from(Duration::from_millis(10));
        let args = types::SubmitArgs::new().timespec(&ts);
        let deadline = Instant::now() + Duration::from_millis(200);
        while Instant::now() < deadline
            && crate::ring::wait_with_args(&self.ring, 1, &args).is_ok()
            && self.ring.completion().count() > 0
        {}
        // Waits until every cancelled request has completed.
        let cancelled = self.ring.submitter().register_sync_cancel(
            Some(types::Timespec::from(Duration::from_millis(200))),
            types::CancelBuilder::any().all(),
        );
        for c in &mut self.conns {
            if c.live {
                // SAFETY: our fds, closed once.
                unsafe { libc::close(c.fd) };
                c.live = false;
            }
        }
        // Drain what the cancellation posted.
        let ts = types::Timespec::from(Duration::from_millis(20));
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = crate::ring::wait_with_args(&self.ring, 1, &args);
        self.ring.completion().for_each(drop);
        if cancelled.is_err() {
            // A receive might still be finishing inside the kernel: keep its memory.
            self.bufs.leak();
        }
    }
}
