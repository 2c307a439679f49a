//! `xload serve`: a thread-per-core HTTP/1.1 responder over io_uring, the
//! default target for demos, tests and hardware-capacity checks.
//!
//! Each worker is pinned to its CPU and owns a listener bound with
//! SO_REUSEPORT (the kernel spreads connections over workers), one multishot
//! accept, one multishot receive per connection into a provided buffer ring,
//! and at most one send in flight per connection (so pipelined answers stay
//! in order). Answers are prebuilt bytes: an answer costs a recv completion,
//! a send and its completion. `--delay` holds each answer on a timer (the
//! loop's wait timeout, not a sleeping thread); `--pool N` lets at most N
//! answers be held at once, the rest queue in arrival order — a model of a
//! connection pool in front of a slow dependency. `/stats` answers the
//! responder's own counters as JSON.

mod date;
mod request;

pub use request::{Bad, Request, Scanner};

use std::collections::VecDeque;
use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

use crate::clock::now_ns;
use crate::pin;
use crate::ring::{build_ring, next_gen, on_socket, slot_update, BufRing, Token, NO_FD};
use crate::sock::set_int_opt;

/// How the responder runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Response body size in bytes.
    pub body_size: usize,
    /// One worker per entry; Some(cpu) pins it.
    pub cpus: Vec<Option<usize>>,
    /// Hold each answer this long.
    pub delay: Option<Duration>,
    /// At most this many answers held at once (over all workers, split evenly).
    pub pool: Option<usize>,
    /// Close a connection that has sent nothing for this long while nothing
    /// was owed to it (None: never).
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose request head has not come whole this long
    /// after its first bytes (None: never).
    pub header_timeout: Option<Duration>,
    /// Close a connection whose answer has not gone out this long after it
    /// was sent: a client that does not read (None: never).
    pub send_timeout: Option<Duration>,
}

/// Counters of one worker, alone on its cache line (written by that worker only).
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    pub bad_requests: AtomicU64,
    /// Answers held by --delay/--pool right now.
    pub in_flight: AtomicU64,
    /// Answers never sent because the client closed its side while they
    /// were held or queued (--delay, --pool).
    pub abandoned: AtomicU64,
    /// Connections closed by the idle timeout.
    pub idle_closed: AtomicU64,
    /// Connections closed by the header timeout.
    pub header_timeouts: AtomicU64,
    /// Connections closed by the send timeout.
    pub send_timeouts: AtomicU64,
}

/// The responder's counters, readable from any thread.
pub struct ServeStats {
    pub workers: Vec<WorkerCounters>,
}

/// Adds `n` to a counter only its worker writes (no read-modify-write needed).
#[inline]
fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

impl ServeStats {
    /// One counter summed over the workers.
    fn total(&self, counter: impl Fn(&WorkerCounters) -> &AtomicU64) -> u64 {
        self.workers
            .iter()
            .map(|w| counter(w).load(Ordering::Relaxed))
            .sum()
    }
    /// Requests answered (all workers).
    pub fn requests(&self) -> u64 {
        self.total(|w| &w.requests)
    }
    pub fn connections(&self) -> u64 {
        self.total(|w| &w.connections)
    }
    pub fn bad_requests(&self) -> u64 {
        self.total(|w| &w.bad_requests)
    }
    pub fn in_flight(&self) -> u64 {
        self.total(|w| &w.in_flight)
    }
    /// Answers dropped because their client closed its side first.
    pub fn abandoned(&self) -> u64 {
        self.total(|w| &w.abandoned)
    }
    /// Connections closed for being idle longer than the idle timeout.
    pub fn idle_closed(&self) -> u64 {
        self.total(|w| &w.idle_closed)
    }
    /// Connections closed because a request head did not come whole in time.
    pub fn header_timeouts(&self) -> u64 {
        self.total(|w| &w.header_timeouts)
    }
    /// Connections closed because their client did not take an answer in time.
    pub fn send_timeouts(&self) -> u64 {
        self.total(|w| &w.send_timeouts)
    }
    /// The `/stats` document.
    pub fn json(&self) -> String {
        format!(
            "{{\"requests\":{},\"in_flight\":{},\"connections\":{},\"bad_requests\":{},\"abandoned\":{},\"idle_closed\":{},\"header_timeouts\":{},\"send_timeouts\":{},\"workers\":{}}}",
            self.requests(),
            self.in_flight(),
            self.connections(),
            self.bad_requests(),
            self.abandoned(),
            self.idle_closed(),
            self.header_timeouts(),
            self.send_timeouts(),
            self.workers.len()
        )
    }
}

/// A running responder.
pub struct Server {
    pub addr: SocketAddr,
    pub stats: Arc<ServeStats>,
    /// How each worker's ring was set up.
    pub mode: &'static str,
    /// Sockets are named by their slot in a registered file table.
    pub registered_sockets: bool,
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<Result<(), String>>>,
}

impl Server {
    /// Binds every worker's listener and starts the workers.
    pub fn start(cfg: ServeConfig) -> io::Result<Server> {
        let n = cfg.cpus.len().max(1);
        let mut listeners = Vec::with_capacity(n);
        let mut addr = cfg.listen;
        if addr.port() != 0 {
            port_is_free(addr)?;
        }
        for _ in 0..n {
            let l = reuseport_listener(addr)?;
            addr = l.local_addr()?; // the first bind picks the port for all
            listeners.push(l);
        }
        let stats = Arc::new(ServeStats {
            workers: (0..n).map(|_| WorkerCounters::default()).collect(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let pool = cfg.pool.map(|p| p.max(1));
        let mut handles = Vec::with_capacity(n);
        let (mode_tx, mode_rx) = std::sync::mpsc::channel();
        for (w, listener) in listeners.into_iter().enumerate() {
            let cpu = cfg.cpus.get(w).copied().flatten();
            let stats = Arc::clone(&stats);
            let stop = Arc::clone(&stop);
            let body_size = cfg.body_size;
            let delay_ns = cfg.delay.map(|d| d.as_nanos() as u64);
            let timeouts = Timeouts::of(&cfg);
            let pool_w = pool.map(|p| (p / n + usize::from(w < p % n)).max(1));
            let mode_tx = mode_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("xload-serve{w}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        pin::pin_current_thread(c).map_err(|e| format!("pin to cpu {c}: {e}"))?;
                    }
                    let mut r =
                        Responder::new(listener, w, stats, body_size, delay_ns, pool_w, timeouts)?;
                    let _ = mode_tx.send((r.mode, !r.slots.is_empty()));
                    r.run(&stop);
                    Ok(())
                })?;
            handles.push(h);
        }
        drop(mode_tx);
        let (mode, registered_sockets) = mode_rx.recv().unwrap_or(("unavailable", false));
        if mode == "unavailable" {
            let mut why = String::from("responder workers failed to start");
            for h in handles {
                if let Ok(Err(e)) = h.join() {
                    why = e;
                }
            }
            return Err(io::Error::other(why));
        }
        Ok(Server {
            addr,
            stats,
            mode,
            registered_sockets,
            stop,
            handles,
        })
    }

    /// A flag that stops the workers when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Stops the workers and waits for them.
    pub fn stop(self) -> Result<(), String> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits for the workers (they end when the stop flag is set).
    pub fn join(self) -> Result<(), String> {
        let mut first_err = Ok(());
        for h in self.handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_err = first_err.and(Err(e)),
                Err(_) => first_err = first_err.and(Err("responder worker panicked".to_string())),
            }
        }
        first_err
    }
}

/// SO_REUSEPORT lets any process of the same user join a listening group:
/// a second `xload serve` on a busy port would silently share its
/// connections. A plain bind first finds the port taken.
fn port_is_free(addr: SocketAddr) -> io::Result<()> {
    let probe = std::net::TcpListener::bind(addr);
    match probe {
        Ok(l) => {
            drop(l);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(io::Error::new(
            e.kind(),
            format!("bind {addr}: address already in use (another process listens there)"),
        )),
        Err(e) => Err(io::Error::new(e.kind(), format!("bind {addr}: {e}"))),
    }
}

fn reuseport_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own; TcpListener takes ownership.
    let l = unsafe { TcpListener::from_raw_fd(fd) };
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        set_int_opt(fd, libc::SOL_SOCKET, opt, 1).map_err(io::Error::from_raw_os_error)?;
    }
    let sa = crate::sock::sockaddr(addr);
    // SAFETY: the address is valid for `len` bytes.
    if unsafe { libc::bind(fd, &sa.storage as *const _ as *const libc::sockaddr, sa.len) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("bind {addr}: {e}")));
    }
    // SAFETY: valid fd.
    if unsafe { libc::listen(fd, 4096) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(l)
}

const OP_ACCEPT: u8 = 1;
const OP_RECV: u8 = 2;
const OP_SEND: u8 = 3;
const OP_FILES: u8 = 4;

/// Slots of a worker's registered file table (bounded by RLIMIT_NOFILE):
/// connections beyond them are named by descriptor.
const MAX_SLOTS: u32 = 4096;

/// Pipelined answers sent in one go, at most.
const MAX_BATCH: usize = 64;
/// Bytes a prebuilt batch of answers may take (at least one answer).
const BATCH_BYTES: usize = 1 << 20;

/// What a connection owes, in request order.
#[derive(Debug)]
enum Owed {
    /// `n` plain answers, of which `ready` may go now (the rest are delayed).
    Ok { n: u32, ready: u32 },
    /// The last answer: says Connection: close, then the connection ends.
    OkClose { ready: bool },
    /// `100 Continue` for a request that asked before sending its body.
    Continue,
    /// The answer to a HEAD: the plain answer's head only; `close` when it
    /// is the last one.
    Head { ready: bool, close: bool },
    /// `/stats`: its head only for HEAD (the same fields as for GET), and
    /// `Connection: close` when the request said so.
    Stats { head: bool, close: bool },
    /// 400, then close.
    Bad,
}

impl Owed {
    /// Answers of this entry still held (or queued) and not sendable.
    fn held_answers(&self) -> u64 {
        match *self {
            Owed::Ok { n, ready } => u64::from(n - ready.min(n)),
            Owed::OkClose { ready: false } | Owed::Head { ready: false, .. } => 1,
            _ => 0,
        }
    }

    /// An answer still held by --delay (or queued for a --pool slot).
    fn is_held(&self) -> bool {
        matches!(
            self,
            Owed::Ok { ready: 0, .. }
                | Owed::OkClose { ready: false }
                | Owed::Head { ready: false, .. }
        )
    }
}

struct SConn {
    fd: RawFd,
    gen: u32,
    live: bool,
    recv_armed: bool,
    sending: bool,
    /// No more reading: close once everything owed is sent.
    closing: bool,
    scanner: Scanner,
    owed: VecDeque<Owed>,
    /// Bytes of a mixed answer (stats, 400, close) being sent.
    out: Vec<u8>,
    /// Plain answers in the send in flight.
    sending_ok: u32,
    /// The send in flight reads the prebuilt answers of this copy.
    send_copy: Option<usize>,
    /// The client asked for keep-alive explicitly (HTTP/1.0): answers say it too.
    says_keep_alive: bool,
    /// The socket sits in the registered file table at this connection's index.
    fixed: bool,
    /// When it was accepted or last sent bytes or was last written to.
    last_ns: u64,
    /// When the first bytes of a request head still incomplete came (0: none).
    head_since: u64,
    /// When the send in flight was queued, and whether the send timeout has
    /// shut the socket under it already.
    send_since: u64,
    send_killed: bool,
    /// The bytes the client had acknowledged when the send timeout last
    /// looked: a send the client is still draining (a large body to a slow
    /// reader) is not timed out, as nginx's send_timeout runs between two
    /// writes, not over the whole answer.
    send_acked: Option<u64>,
    /// Bytes of the send in flight.
    send_len: u32,
}

impl SConn {
    /// This connection's slot in the registered file table, if it has one.
    #[inline]
    fn slot(&self, i: usize) -> Option<u32> {
        self.fixed.then_some(i as u32)
    }
}

/// The bytes a TCP socket's peer has acknowledged (`tcpi_bytes_acked`,
/// Linux 4.1+; it grows only as the peer's receive window lets data in, so
/// as the client reads); None if the kernel does not say.
fn bytes_acked(fd: RawFd) -> Option<u64> {
    // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    (rc == 0 && len as usize >= need).then_some(info.tcpi_bytes_acked)
}

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

struct Responder {
    // The ring drops before the memory it uses.
    ring: IoUring,
    bufs: BufRing,
    mode: &'static str,
    listener: TcpListener,
    accept_armed: bool,
    /// Out of descriptors: no accept before this time (the other
    /// connections go on being served meanwhile).
    accept_paused_until: u64,
    worker: usize,
    stats: Arc<ServeStats>,
    conns: Vec<SConn>,
    free: Vec<u32>,
    /// Copies of the prebuilt batches ([`Responder::stamp_dates`]): sends go
    /// from `copies[copy]`; another is re-dated once no send reads it.
    copies: Vec<Batches>,
    copy: usize,
    /// Length of one plain answer in `Batches::ok`.
    ok_len: usize,
    /// Answers in a prebuilt batch: MAX_BATCH, fewer for large bodies (the
    /// batches stay within about BATCH_BYTES unless one answer is larger).
    batch_n: usize,
    /// Length of one answer in `Batches::ka`.
    ok_ka_len: usize,
    ok_close: Box<[u8]>,
    /// Body bytes at the end of each plain answer (left out for HEAD).
    body_size: usize,
    bad: Box<[u8]>,
    /// The second the answers' `Date` says, and its header line (for the
    /// answers built on the spot).
    date_secs: u64,
    date_line: [u8; date::LINE_LEN],
    /// The loop's clock, read once per pass.
    now: u64,
    timeouts: Timeouts,
    /// When connections are next looked over for the timeouts.
    next_idle_sweep: u64,
    delay_ns: Option<u64>,
    pool: Option<usize>,
    /// Held answers: (conn, gen, release time), in release order.
    held: VecDeque<(u32, u32, u64)>,
    /// Answers waiting for a pool slot: (conn, gen).
    queued: VecDeque<(u32, u32)>,
    rearm: Vec<u32>,
    cqes: Vec<cqueue::Entry>,
    /// Descriptors for the registered file table, one per slot (stable: the
    /// kernel reads a slot's entry when its update is submitted). Empty when
    /// the table could not be registered.
    slots: Box<[RawFd]>,
}

/// Every prebuilt answer starts with this; its `Date` value follows at
/// [`OK_DATE_AT`] (patched in place by [`Responder::stamp_dates`]).
const OK_START: &str = "HTTP/1.1 200 OK\r\nServer: xload\r\n";
const OK_DATE_AT: usize = OK_START.len() + "Date: ".len();
const BAD_START: &str = "HTTP/1.1 400 Bad Request\r\nServer: xload\r\n";
const BAD_DATE_AT: usize = BAD_START.len() + "Date: ".len();

/// The connection timeouts in ns (None: never), and how often connections
/// are looked over for them.
#[derive(Clone, Copy, Debug)]
struct Timeouts {
    idle: Option<u64>,
    header: Option<u64>,
    send: Option<u64>,
    /// A quarter of the shortest timeout, 1 ms to 1 s: a connection closes
    /// within that (or a second) after its timeout expires. None: no timeout.
    sweep_every: Option<u64>,
}

impl Timeouts {
    fn of(cfg: &ServeConfig) -> Timeouts {
        let ns = |d: Option<Duration>| d.map(|d| (d.as_nanos() as u64).max(1));
        let (idle, header, send) = (
            ns(cfg.idle_timeout),
            ns(cfg.header_timeout),
            ns(cfg.send_timeout),
        );
        let sweep_every = [idle, header, send]
            .into_iter()
            .flatten()
            .min()
            .map(|t| (t / 4).clamp(1_000_000, 1_000_000_000));
        Timeouts {
            idle,
            header,
            send,
            sweep_every,
        }
    }
}

/// One copy of the prebuilt answers sent by pointer, and the sends in flight
/// that read it.
struct Batches {
    /// `batch_n` keep-alive answers back to back.
    ok: Box<[u8]>,
    /// The same with `Connection: keep-alive`, for HTTP/1.0 keep-alive clients.
    ka: Box<[u8]>,
    sends: u32,
}

/// At most this many copies of the prebuilt batches (two when one answer is
/// larger than BATCH_BYTES): past that, a client that does not read (all
/// copies held by its blocked sends) makes the date wait, not the memory grow.
const MAX_COPIES: usize = 4;

fn ok_response(body_size: usize, connection: &str, secs: u64) -> Vec<u8> {
    let date = date::line(secs);
    let mut r = OK_START.as_bytes().to_vec();
    r.extend_from_slice(&date);
    r.extend_from_slice(
        format!("Content-Type: text/plain\r\nContent-Length: {body_size}\r\n{connection}\r\n")
            .as_bytes(),
    );
    r.resize(r.len() + body_size, b'x');
    r
}

fn bad_response(secs: u64) -> Vec<u8> {
    let mut r = BAD_START.as_bytes().to_vec();
    r.extend_from_slice(&date::line(secs));
    r.extend_from_slice(b"Content-Length: 0\r\nConnection: close\r\n\r\n");
    r
}

impl Responder {
    fn new(
        listener: TcpListener,
        worker: usize,
        stats: Arc<ServeStats>,
        body_size: usize,
        delay_ns: Option<u64>,
        pool: Option<usize>,
        timeouts: Timeouts,
    ) -> Result<Responder, String> {
        let (ring, mode) = build_ring(4096, 16384).map_err(|e| format!("io_uring_setup: {e}"))?;
        let bufs = BufRing::new(4096, 4096, 0).map_err(|e| format!("buffer ring: {e}"))?;
        bufs.register(&ring)
            .map_err(|e| format!("register buffer ring: {e}"))?;
        // 64 answers of a 16 MiB body were 1 GiB per batch and per worker.
        // (The head is under 192 bytes.)
        let batch_n = (BATCH_BYTES / (body_size + 192)).clamp(1, MAX_BATCH);
        let secs = date::unix_secs();
        let batch_of = |connection: &str| {
            let one = ok_response(body_size, connection, secs);
            let len = one.len();
            let batch: Vec<u8> = one.iter().copied().cycle().take(len * batch_n).collect();
            (batch.into_boxed_slice(), len)
        };
        // Connection i's socket goes in slot i: sends and receives then skip
        // the kernel's file lookup and reference count.
        let nofile = nofile_soft_limit().min(MAX_SLOTS as u64) as u32;
        let slots = if nofile > 0 && ring.submitter().register_files_sparse(nofile).is_ok() {
            vec![-1; nofile as usize].into_boxed_slice()
        } else {
            Box::default()
        };
        let (ok, ok_len) = batch_of("");
        let (ka, ok_ka_len) = batch_of("Connection: keep-alive\r\n");
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
            copies: vec![Batches { ok, ka, sends: 0 }],
            copy: 0,
            ok_len,
            batch_n,
            ok_ka_len,
            ok_close: ok_response(body_size, "Connection: close\r\n", secs).into_boxed_slice(),
            body_size,
            bad: bad_response(secs).into_boxed_slice(),
            date_secs: secs,
            date_line: date::line(secs),
            now: now_ns(),
            timeouts,
            next_idle_sweep: 0,
            delay_ns,
            pool,
            held: VecDeque::new(),
            queued: VecDeque::new(),
            rearm: Vec::new(),
            cqes: Vec::with_capacity(16384),
            slots,
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

    /// Writes the date of `secs` into the prebuilt answers. A send in
    /// flight may still read its batch (a send the socket could not take
    /// whole goes on from where it stopped), so only a copy no send reads
    /// is re-dated, and new sends then go from it. With every copy read (a
    /// client that does not read holds one for as long as its send is
    /// blocked), another copy is made, up to MAX_COPIES; past that the date
    /// waits (`date_secs` stays: the next pass tries again) until a send
    /// completes (or `--send-timeout` ends it).
    /// What is copied into a connection's own buffer (close, 400, /stats,
    /// HEAD) takes the date at once.
    fn stamp_dates(&mut self, secs: u64) {
        let date = date::imf_fixdate(secs);
        self.date_line[6..6 + date::LEN].copy_from_slice(&date);
        self.ok_close[OK_DATE_AT..OK_DATE_AT + date::LEN].copy_from_slice(&date);
        self.bad[BAD_DATE_AT..BAD_DATE_AT + date::LEN].copy_from_slice(&date);
        // The current copy if no send reads it, else another that none reads.
        let free = std::iter::once(self.copy)
            .chain(0..self.copies.len())
            .find(|&k| self.copies[k].sends == 0);
        let max = if self.ok_len > BATCH_BYTES {
            2
        } else {
            MAX_COPIES
        };
        let k = match free {
            Some(k) => k,
            None if self.copies.len() < max => {
                let cur = &self.copies[self.copy];
                let fresh = Batches {
                    ok: cur.ok.clone(),
                    ka: cur.ka.clone(),
                    sends: 0,
                };
                self.copies.push(fresh);
                self.copies.len() - 1
            }
            None => return,
        };
        let c = &mut self.copies[k];
        for (buf, stride) in [(&mut c.ok, self.ok_len), (&mut c.ka, self.ok_ka_len)] {
            for answer in buf.chunks_exact_mut(stride) {
                answer[OK_DATE_AT..OK_DATE_AT + date::LEN].copy_from_slice(&date);
            }
        }
        self.copy = k;
        self.date_secs = secs;
    }

    /// Closes every connection with nothing owed to it and nothing being
    /// sent (an answer held by --delay is owed) that has been idle for the
    /// idle timeout, or has had a request head incomplete for the header
    /// timeout (a client sending it a byte at a time is not idle).
    fn close_idle(&mut self, now: u64) {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.live
                && c.sending
                && !c.send_killed
                && self
                    .timeouts
                    .send
                    .is_some_and(|t| now.saturating_sub(c.send_since) >= t)
            {
                // Has the client taken anything since the last look? The
                // first look takes the measure and the next decides.
                match (c.send_acked, bytes_acked(c.fd)) {
                    // The kernel does not say: timed out.
                    (_, None) => {}
                    // First look: measured, decided at the next one.
                    (None, Some(b)) => {
                        c.send_acked = Some(b);
                        continue;
                    }
                    // The client took more: a full timeout more.
                    (Some(prev), Some(b)) if b > prev => {
                        c.send_acked = Some(b);
                        c.send_since = now;
                        continue;
                    }
                    // Nothing taken since the last look: timed out.
                    (Some(_), Some(_)) => {}
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
            if !c.live || c.closing || c.sending || !c.owed.is_empty() {
                continue;
            }
            let idle = self
                .timeouts
                .idle
                .is_some_and(|t| now.saturating_sub(c.last_ns) >= t);
            let slow_head = c.head_since != 0
                && self
                    .timeouts
                    .header
                    .is_some_and(|t| now.saturating_sub(c.head_since) >= t);
            if idle || slow_head {
                c.closing = true;
                let counter = if idle {
                    &self.counters().idle_closed
                } else {
                    &self.counters().header_timeouts
                };
                add(counter, 1);
                self.try_finish(i);
            }
        }
    }

    fn run(&mut self, stop: &AtomicBool) {
        self.arm_accept();
        while !stop.load(Ordering::Relaxed) {
            let secs = date::unix_secs();
            if secs != self.date_secs {
                self.stamp_dates(secs);
            }
            let now = now_ns();
            self.now = now;
            let mut wait_ns: u64 = 100_000_000;
            if let Some(&(_, _, t)) = self.held.front() {
                wait_ns = wait_ns.min(t.saturating_sub(now));
            }
            if !self.accept_armed && self.accept_paused_until > now {
                wait_ns = wait_ns.min(self.accept_paused_until - now);
            }
            if self.timeouts.sweep_every.is_some() {
                wait_ns = wait_ns.min(self.next_idle_sweep.saturating_sub(now));
            }
            let res = if wait_ns < 2_000 {
                self.ring.submit()
            } else {
                let ts = types::Timespec::from(Duration::from_nanos(wait_ns));
                let args = types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            };
            if let Err(e) = res {
                if !matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) {
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
            // What the completions did happened after the wait: an accept or
            // a request is as old as this, not as the pass before the wait.
            self.now = now_ns();
            let mut cqes = std::mem::take(&mut self.cqes);
            cqes.clear();
            cqes.extend(self.ring.completion());
            for cqe in &cqes {
                self.complete(cqe);
            }
            self.cqes = cqes;
            self.bufs.publish();
            while let Some(i) = self.rearm.pop() {
                self.arm_recv(i as usize);
            }
            if self.delay_ns.is_some() {
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
                    // in 1 ms. (A sleep here stalled every connection of
                    // this worker: 84 µs round trips became 2.2 ms.)
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
                    self.copies[k].sends -= 1;
                }
                // With MSG_WAITALL a send ends short only on an error after
                // part of it went (a reset, the send timeout's shutdown):
                // its answers were not all delivered and are not counted.
                if res < 0 || (res as u32) < self.conns[i].send_len {
                    self.conns[i].sending_ok = 0;
                    self.conns[i].owed.clear();
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
                self.conns.push(SConn {
                    fd: -1,
                    gen: 0,
                    live: false,
                    recv_armed: false,
                    sending: false,
                    closing: false,
                    scanner: Scanner::new(),
                    owed: VecDeque::with_capacity(8),
                    out: Vec::new(),
                    sending_ok: 0,
                    send_copy: None,
                    says_keep_alive: false,
                    fixed: false,
                    last_ns: 0,
                    head_since: 0,
                    send_since: 0,
                    send_killed: false,
                    send_acked: None,
                    send_len: 0,
                });
                self.conns.len() - 1
            }
        };
        let c = &mut self.conns[i];
        c.fd = fd;
        c.live = true;
        c.last_ns = self.now;
        c.head_since = 0;
        c.send_killed = false;
        c.closing = false;
        c.sending = false;
        c.sending_ok = 0;
        c.says_keep_alive = false;
        c.scanner.reset();
        c.owed.clear();
        c.fixed = i < self.slots.len();
        if c.fixed {
            self.slots[i] = fd;
            self.set_slot(i, &self.slots[i]);
        }
        add(&self.counters().connections, 1);
        self.arm_recv(i);
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
        let delayed = self.delay_ns.is_some();
        let data = self.bufs.buffer(bid, len);
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
            if r.stats {
                owed.push_back(Owed::Stats {
                    head: r.head,
                    close: !r.keep_alive,
                }); // never delayed
                return;
            }
            if delayed {
                new_held += 1;
            }
            if r.head {
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

    /// Delay: an answer starts its hold now if a pool slot is free, else queues.
    fn hold(&mut self, i: u32, gen: u32, now: u64) {
        let delay = self.delay_ns.unwrap_or(0);
        if self.pool.is_none_or(|p| self.held.len() < p) {
            self.held.push_back((i, gen, now + delay));
        } else {
            self.queued.push_back((i, gen));
        }
        self.publish_in_flight();
    }

    /// Answers held or queued now, for /stats.
    fn publish_in_flight(&self) {
        let cnt = self.counters();
        cnt.in_flight.store(
            (self.held.len() + self.queued.len()) as u64,
            Ordering::Relaxed,
        );
    }

    /// A closed connection's held and queued answers will never be sent:
    /// they give back their pool slots (to queued answers of live
    /// connections) and leave the in-flight gauge.
    fn forget_held(&mut self, i: u32, gen: u32) {
        self.held.retain(|&(ci, cg, _)| (ci, cg) != (i, gen));
        self.queued.retain(|&(ci, cg)| (ci, cg) != (i, gen));
        let delay = self.delay_ns.unwrap_or(0);
        let now = now_ns();
        while self.pool.is_none_or(|p| self.held.len() < p) {
            let Some((qi, qgen)) = self.queued.pop_front() else {
                break;
            };
            self.held.push_back((qi, qgen, now + delay));
        }
        self.publish_in_flight();
    }

    /// Releases held answers whose time has come; queued ones take their slots.
    fn release_held(&mut self, now: u64) {
        let delay = self.delay_ns.unwrap_or(0);
        let mut touched = false;
        while let Some(&(i, gen, t)) = self.held.front() {
            if t > now {
                break;
            }
            self.held.pop_front();
            touched = true;
            let idx = i as usize;
            if idx < self.conns.len() && self.conns[idx].gen == gen && self.conns[idx].live {
                // Mark the oldest not-yet-ready answer of this connection ready.
                for o in self.conns[idx].owed.iter_mut() {
                    match o {
                        Owed::Ok { n, ready } if *ready < *n => {
                            *ready += 1;
                            break;
                        }
                        Owed::OkClose { ready } | Owed::Head { ready, .. } if !*ready => {
                            *ready = true;
                            break;
                        }
                        _ => {}
                    }
                }
                self.flush(idx);
            }
            if let Some((qi, qgen)) = self.queued.pop_front() {
                self.held.push_back((qi, qgen, now + delay));
            }
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
        // Fast path: only plain answers ready at the front.
        if let Some(Owed::Ok { n, ready }) = c.owed.front_mut() {
            if *ready > 0 {
                let k = (*ready as usize).min(self.batch_n);
                *ready -= k as u32;
                *n -= k as u32;
                if *n == 0 {
                    c.owed.pop_front();
                }
                c.sending = true;
                c.sending_ok = k as u32;
                c.send_copy = Some(self.copy);
                let copy = &mut self.copies[self.copy];
                copy.sends += 1;
                let (batch, len) = if c.says_keep_alive {
                    (&copy.ka, self.ok_ka_len)
                } else {
                    (&copy.ok, self.ok_len)
                };
                let (buf, n) = (batch.as_ptr(), (k * len) as u32);
                // SAFETY: the batches are owned by the responder for its lifetime.
                unsafe { self.queue_send(i, buf, n) };
                return;
            }
            return; // the front answer is still held
        }
        // Slow path: stats, 400 or a closing answer.
        c.out.clear();
        let mut ok = 0u32;
        let mut ends = false;
        match c.owed.front() {
            Some(&Owed::Stats {
                head: only_head,
                close,
            }) => {
                let body = self.stats.json();
                let connection = if close {
                    "Connection: close\r\n"
                } else if c.says_keep_alive {
                    "Connection: keep-alive\r\n"
                } else {
                    ""
                };
                let head = format!(
                    "Content-Type: application/json\r\nContent-Length: {}\r\n{connection}\r\n",
                    body.len(),
                );
                c.out.extend_from_slice(OK_START.as_bytes());
                c.out.extend_from_slice(&self.date_line);
                c.out.extend_from_slice(head.as_bytes());
                if !only_head {
                    c.out.extend_from_slice(body.as_bytes());
                }
                c.owed.pop_front();
            }
            Some(Owed::OkClose { ready: true }) => {
                c.out.extend_from_slice(&self.ok_close);
                c.owed.clear();
                ok = 1;
                ends = true;
            }
            Some(Owed::Continue) => {
                c.out.extend_from_slice(b"HTTP/1.1 100 Continue\r\n\r\n");
                c.owed.pop_front();
            }
            Some(&Owed::Head { ready: true, close }) => {
                let one: &[u8] = if close {
                    &self.ok_close
                } else if c.says_keep_alive {
                    &self.copies[self.copy].ka[..self.ok_ka_len]
                } else {
                    &self.copies[self.copy].ok[..self.ok_len]
                };
                c.out.extend_from_slice(&one[..one.len() - self.body_size]);
                ok = 1;
                if close {
                    c.owed.clear();
                    ends = true;
                } else {
                    c.owed.pop_front();
                }
            }
            Some(Owed::Bad) => {
                c.out.extend_from_slice(&self.bad);
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
        let lost: u64 = c.owed.iter().map(Owed::held_answers).sum();
        c.owed.clear();
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

    /// Queues one send of `n` bytes at `buf` on connection `i`'s socket.
    ///
    /// # Safety
    /// `buf` must stay valid and unchanged until the send completes.
    unsafe fn queue_send(&mut self, i: usize, buf: *const u8, n: u32) {
        self.conns[i].send_since = self.now;
        self.conns[i].send_acked = None;
        self.conns[i].send_len = n;
        let c = &self.conns[i];
        let tok = Token {
            kind: OP_SEND,
            gen: c.gen,
            index: i as u32,
        };
        let e = on_socket!(c.slot(i), c.fd, |s| opcode::Send::new(s, buf, n)
            .flags(libc::MSG_NOSIGNAL | libc::MSG_WAITALL)
            .build())
        .user_data(tok.encode());
        // SAFETY: passed on from the caller.
        unsafe { self.push(&e) };
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
            .flat_map(|c| c.owed.iter())
            .map(Owed::held_answers)
            .sum();
        if lost > 0 {
            add(&self.counters().abandoned, lost);
        }
    }

    fn shutdown(&mut self) {
        let _ = self.ring.submit();
        // Waits until every cancelled request has completed.
        let cancelled = self.ring.submitter().register_sync_cancel(
            Some(types::Timespec::from(Duration::from_millis(200))),
            types::CancelBuilder::any().all(),
        );
        for c in &mut self.conns {
            if c.live {
                // SAFETY: our fds, closed once.
                unsafe {
                    libc::shutdown(c.fd, libc::SHUT_RDWR);
                    libc::close(c.fd);
                }
                c.live = false;
            }
        }
        // Drain what the cancellation posted.
        let ts = types::Timespec::from(Duration::from_millis(20));
        let args = types::SubmitArgs::new().timespec(&ts);
        let _ = self.ring.submitter().submit_with_args(1, &args);
        self.ring.completion().for_each(drop);
        if cancelled.is_err() {
            // A receive might still be finishing inside the kernel: keep its memory.
            self.bufs.leak();
        }
    }
}
