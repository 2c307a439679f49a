//! Std-only HTTP/1.1 test servers with chosen behaviours and exact counters.
//!
//! One acceptor thread and one thread per connection; no async runtime. Each
//! server binds `127.0.0.1:0`, so tests run in parallel without port clashes.
//!
//! Counters (all exact, readable during and after the run):
//! - [`TestServer::accepted`]: connections accepted.
//! - [`TestServer::requests`]: requests fully read (request line, headers and
//!   Content-Length body) and acted upon, malformed ones (answered 4xx/5xx)
//!   included. Bytes a connection merely drains after it decided to close or
//!   to go silent are not parsed and not counted.
//! - [`TestServer::served`]: answers whose every byte the kernel accepted. For
//!   well-formed behaviours an answer is one HTTP response (error responses
//!   such as 400 included); for the fault behaviours it is the bytes the
//!   behaviour sends for one request (the garbage, the truncated response,
//!   ...). Pipelined responses written in one batch are counted one by one by
//!   the byte offset where each ends, so a partial write counts exactly the
//!   responses that went out whole.
//! - [`TestServer::bytes_written`], [`TestServer::bad_requests`],
//!   [`TestServer::open_connections`].
//!
//! `served()` and `bytes_written()` first wait (briefly) for writes in progress
//! to be counted, so a response a client has read is always in `served()`.
//! `accepted()` and `requests()` count when the server gets to them: after a
//! client's connect or write returns, poll for them rather than read once.
//!
//! A client that counts completed responses therefore sees at most `served()`
//! and at least `served()` minus the responses still in flight when it stopped.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Largest request head (request line + headers) the servers accept; larger
/// heads get `431` and the connection is closed.
pub(crate) const MAX_REQUEST_HEAD_BYTES: usize = 64 * 1024;
/// Largest request body accepted; larger gets `413` and close.
pub(crate) const MAX_REQUEST_BODY_BYTES: u64 = 1024 * 1024;

/// Body of a [`Behavior::CloseDelimited`] response (HTTP/1.0, no length, ended by close).
pub(crate) const CLOSE_DELIMITED_BODY: &[u8] =
    b"close-delimited body: ends when the server closes\n";
/// What [`Behavior::Garbage`] answers to each request: another protocol's banner.
pub(crate) const GARBAGE: &[u8] = b"SSH-2.0-OpenSSH_9.2p1 not-http\r\n\x00\x01\x02\xff\r\n\r\n";
/// Longest [`TestServer::served`] waits for writes in progress to be counted.
pub(crate) const SETTLE_TIMEOUT: Duration = Duration::from_millis(100);
/// Content-Length declared by [`Behavior::TruncatedBody`] and [`Behavior::WrongContentLength`].
pub(crate) const DECLARED_BODY_LEN: usize = 100;
/// Body bytes actually sent by [`Behavior::TruncatedBody`] and [`Behavior::WrongContentLength`].
pub(crate) const SENT_BODY_LEN: usize = 10;
/// Size of the header block [`Behavior::OversizeHeader`] sends (200 KiB).
pub(crate) const OVERSIZE_HEADER_BYTES: usize = 200 * 1024;

/// How a [`TestServer`] answers. Every behaviour reads requests properly (so
/// pipelined requests are seen one by one) before doing what it says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Behavior {
    /// `200 OK` with `Content-Length: body_len` and a body of `x`; keep-alive
    /// (HTTP/1.1 default; HTTP/1.0 only with `Connection: keep-alive`);
    /// pipelined requests answered in order; `Connection: close` in the
    /// request is honoured (answered with `Connection: close`, then FIN);
    /// `HEAD` gets the headers only.
    Ok { body_len: usize },
    /// `200 OK` with `Transfer-Encoding: chunked`, one chunk per entry (each
    /// non-zero), then the last chunk; keep-alive like `Ok`.
    Chunked { chunks: Vec<usize> },
    /// `HTTP/1.0 200 OK` without any length, body [`CLOSE_DELIMITED_BODY`],
    /// then FIN (the body ends at the close).
    CloseDelimited,
    /// Answers [`GARBAGE`] to the first request, then stays open and silent
    /// until the client closes.
    Garbage,
    /// `Content-Length: 100`, sends 10 body bytes, then FIN: the client sees
    /// EOF in the middle of the body.
    TruncatedBody,
    /// `200 OK` whose header block is [`OVERSIZE_HEADER_BYTES`] long (then
    /// `Content-Length: 0`); keep-alive, so only a header-size limit stops it.
    OversizeHeader,
    /// Declares `Content-Length: 100`, sends 10 body bytes, then keeps the
    /// connection open and idle: the client's request timeout must fire.
    WrongContentLength,
    /// `Transfer-Encoding: chunked` whose first chunk size line is `zz\r\n`,
    /// then open and silent.
    BadChunkSize,
    /// Answers the first request on a connection with a normal keep-alive
    /// response (no `Connection: close`), then sends FIN and drains: the next
    /// request on that connection sees EOF instead of a response.
    CloseWithoutConnectionClose,
    /// Reads one request, then closes with `SO_LINGER` 0: the client gets RST.
    Reset,
    /// Accepts and reads (requests are counted), never writes.
    NeverAnswer,
    /// Like `Ok { body_len: 0 }`, except that any response due during
    /// `[at, at + pause)` after [`TestServer::start`] is held until
    /// `at + pause`. For coordinated-omission tests.
    Stall { at: Duration, pause: Duration },
    /// At most `slots` requests (over all connections) are being served at
    /// once; each takes `delay`; the rest wait in FIFO order of arrival. The
    /// throughput plateaus at `slots / delay`. Responses like `Ok { body_len: 0 }`.
    Pool { slots: usize, delay: Duration },
    /// Each response sent `delay` after its request is handled (no global
    /// limit); responses like `Ok { body_len: 0 }`.
    Delay { delay: Duration },
    /// Like `Ok { body_len }` until `after` since [`TestServer::start`], then
    /// like `Ok { body_len: 0 }`: answers shrink in the middle of a run.
    Shrink { body_len: usize, after: Duration },
    /// Like `Ok { body_len: 0 }` on the first connection that sends a
    /// request; every other connection is read (its requests counted) and
    /// never answered, as if stuck behind a lock the first one holds.
    OnlyFirst,
    /// Like `Ok { body_len: 0 }` with status `code` (`503 Status 503`).
    Status { code: u16 },
    /// Answers every request with `answer`, byte for byte, then keeps
    /// serving (or, with `close`, sends FIN): a response shape no other
    /// behavior makes.
    Raw { answer: &'static [u8], close: bool },
}

/// A running test server. Stops (and joins all its threads) on [`stop`](Self::stop) or drop.
pub(crate) struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    acceptor: Mutex<Option<JoinHandle<()>>>,
}

impl TestServer {
    /// Binds `127.0.0.1:0` and starts serving with `behavior`.
    ///
    /// Panics on a bad behaviour (`Pool` with 0 slots, `Chunked` with an empty
    /// chunk) or if the loopback socket cannot be bound: both are test-setup errors.
    pub(crate) fn start(behavior: Behavior) -> TestServer {
        match &behavior {
            Behavior::Pool { slots, .. } => assert!(*slots > 0, "Pool needs at least one slot"),
            Behavior::Chunked { chunks } => assert!(
                chunks.iter().all(|&len| len > 0),
                "a zero-length chunk would end the body; use only non-zero chunk sizes"
            ),
            _ => {}
        }
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0");
        TestServer::start_with(listener, behavior)
    }

    /// As [`TestServer::start`] on a listener bound elsewhere (in a lab's
    /// network namespace, say).
    pub(crate) fn start_with(listener: TcpListener, behavior: Behavior) -> TestServer {
        let addr = listener
            .local_addr()
            .expect("local_addr of a bound listener");
        let shared = Arc::new(Shared::new(behavior));
        let acceptor_shared = Arc::clone(&shared);
        let acceptor = thread::Builder::new()
            .name("test-server-accept".into())
            .spawn(move || accept_loop(listener, acceptor_shared))
            .expect("spawn acceptor thread");
        TestServer {
            addr,
            shared,
            acceptor: Mutex::new(Some(acceptor)),
        }
    }

    /// The bound address (always 127.0.0.1 with an ephemeral port).
    pub(crate) fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:PORT` followed by `path` (which should start with `/`).
    pub(crate) fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// The instant the server started; [`Behavior::Stall`] times count from here.
    pub(crate) fn started_at(&self) -> Instant {
        self.shared.started
    }

    /// Answers whose every byte the kernel accepted (see the module doc).
    /// Waits first (at most [`SETTLE_TIMEOUT`]) for writes in progress to be
    /// counted, so any response a client has already read is included.
    pub(crate) fn served(&self) -> u64 {
        self.shared.settle_writes();
        self.shared.served.load(Ordering::SeqCst)
    }

    /// Connections accepted.
    pub(crate) fn accepted(&self) -> u64 {
        self.shared.accepted.load(Ordering::SeqCst)
    }

    /// Requests fully read and acted upon (malformed ones included).
    pub(crate) fn requests(&self) -> u64 {
        self.shared.requests.load(Ordering::SeqCst)
    }

    /// Requests read, once the count has not changed for 100 ms (at most
    /// 2 s): what a client sent just before it exited may still be in this
    /// server's socket buffers.
    pub(crate) fn requests_settled(&self) -> u64 {
        let deadline = Instant::now() + Duration::from_secs(2);
        let mut last = self.requests();
        while Instant::now() < deadline {
            thread::sleep(Duration::from_millis(100));
            let now = self.requests();
            if now == last {
                break;
            }
            last = now;
        }
        last
    }

    /// Requests answered with 400/413/431/501 because they were malformed or unsupported.
    pub(crate) fn bad_requests(&self) -> u64 {
        self.shared.bad_requests.load(Ordering::SeqCst)
    }

    /// Bytes the kernel accepted from this server, over all connections.
    pub(crate) fn bytes_written(&self) -> u64 {
        self.shared.settle_writes();
        self.shared.bytes_written.load(Ordering::SeqCst)
    }

    /// Connections currently open (accepted and not yet closed by this server).
    pub(crate) fn open_connections(&self) -> u64 {
        self.shared.open.load(Ordering::SeqCst)
    }

    /// The head (request line and headers, CRLFs included) of the first
    /// request parsed, to check what the client sends.
    pub(crate) fn first_request_head(&self) -> Option<String> {
        lock(&self.shared.first_request_head).clone()
    }

    /// Asserts that a client's count of completed responses reconciles with
    /// this server's: never more than `served()`, and short of it by at most
    /// `max_in_flight` (responses written but still in flight when the client
    /// stopped, e.g. connections × pipeline depth).
    pub(crate) fn assert_reconciles(&self, client_responses: u64, max_in_flight: u64) {
        let served = self.served();
        assert!(
            client_responses <= served && served - client_responses <= max_in_flight,
            "client counted {client_responses} responses, server wrote {served} \
             (allowed in flight at the end: {max_in_flight})"
        );
    }

    /// Stops accepting, shuts every connection down, wakes every held
    /// response and joins all threads. Idempotent; counters stay readable.
    pub(crate) fn stop(&self) {
        let Some(acceptor) = lock(&self.acceptor).take() else {
            return;
        };
        self.shared.stopping.store(true, Ordering::SeqCst);
        // Wake the blocking accept(); the acceptor sees `stopping` and leaves
        // without counting this connection.
        let _ = TcpStream::connect_timeout(&self.addr, Duration::from_secs(1));
        for stream in lock(&self.shared.conns).values() {
            let _ = stream.shutdown(Shutdown::Both);
        }
        {
            let _guard = lock(&self.shared.wake_lock);
            self.shared.wake.notify_all();
        }
        {
            let _guard = lock(&self.shared.pool);
            self.shared.pool_changed.notify_all();
        }
        let _ = acceptor.join();
        let handles = std::mem::take(&mut *lock(&self.shared.handles));
        for handle in handles {
            let _ = handle.join();
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Locks a mutex, ignoring poisoning: a panicking connection thread must not
/// hide the counters from the test.
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

struct PoolState {
    next_ticket: u64,
    admit_ticket: u64,
    active: usize,
}

struct Shared {
    behavior: Behavior,
    started: Instant,
    stopping: AtomicBool,
    accepted: AtomicU64,
    requests: AtomicU64,
    served: AtomicU64,
    bad_requests: AtomicU64,
    bytes_written: AtomicU64,
    /// Connections inside `Conn::flush`: their written bytes may not be counted yet.
    writes_in_progress: AtomicU64,
    open: AtomicU64,
    next_conn_id: AtomicU64,
    /// [`Behavior::OnlyFirst`]: the connection that answers (MAX: none yet).
    live_conn: AtomicU64,
    first_request_head: Mutex<Option<String>>,
    /// A clone of every open connection, so `stop` can shut them down.
    conns: Mutex<HashMap<u64, TcpStream>>,
    handles: Mutex<Vec<JoinHandle<()>>>,
    wake_lock: Mutex<()>,
    wake: Condvar,
    pool: Mutex<PoolState>,
    pool_changed: Condvar,
    /// `Ok`-style responses indexed by `[close as usize][head as usize]`.
    ok_responses: [[Vec<u8>; 2]; 2],
    oversize_response: Vec<u8>,
}

impl Shared {
    fn new(behavior: Behavior) -> Shared {
        let body_len = match behavior {
            Behavior::Ok { body_len } => body_len,
            _ => 0,
        };
        let status = match behavior {
            Behavior::Status { code } => format!("{code} Status {code}"),
            _ => "200 OK".to_string(),
        };
        let ok = |close: bool, head: bool| {
            let mut response = format!(
                "HTTP/1.1 {status}\r\nServer: xload-test\r\nContent-Length: {body_len}\r\n{}\r\n",
                if close { "Connection: close\r\n" } else { "" }
            )
            .into_bytes();
            if !head {
                response.resize(response.len() + body_len, b'x');
            }
            response
        };
        let oversize_response = if behavior == Behavior::OversizeHeader {
            oversize_header_response()
        } else {
            Vec::new()
        };
        Shared {
            behavior,
            started: Instant::now(),
            stopping: AtomicBool::new(false),
            accepted: AtomicU64::new(0),
            requests: AtomicU64::new(0),
            served: AtomicU64::new(0),
            bad_requests: AtomicU64::new(0),
            bytes_written: AtomicU64::new(0),
            writes_in_progress: AtomicU64::new(0),
            open: AtomicU64::new(0),
            next_conn_id: AtomicU64::new(0),
            live_conn: AtomicU64::new(u64::MAX),
            first_request_head: Mutex::new(None),
            conns: Mutex::new(HashMap::new()),
            handles: Mutex::new(Vec::new()),
            wake_lock: Mutex::new(()),
            wake: Condvar::new(),
            pool: Mutex::new(PoolState {
                next_ticket: 0,
                admit_ticket: 0,
                active: 0,
            }),
            pool_changed: Condvar::new(),
            ok_responses: [
                [ok(false, false), ok(false, true)],
                [ok(true, false), ok(true, true)],
            ],
            oversize_response,
        }
    }

    fn stopping(&self) -> bool {
        self.stopping.load(Ordering::SeqCst)
    }

    /// Waits (at most [`SETTLE_TIMEOUT`]) until no write is between its
    /// syscall and its counting, so whatever a client has read is counted.
    fn settle_writes(&self) {
        let deadline = Instant::now() + SETTLE_TIMEOUT;
        while self.writes_in_progress.load(Ordering::SeqCst) > 0 && Instant::now() < deadline {
            thread::sleep(Duration::from_micros(50));
        }
    }

    /// Sleeps until `deadline`; returns false early if the server is stopping.
    fn sleep_until(&self, deadline: Instant) -> bool {
        let mut guard = lock(&self.wake_lock);
        loop {
            if self.stopping() {
                return false;
            }
            let now = Instant::now();
            if now >= deadline {
                return true;
            }
            guard = match self.wake.wait_timeout(guard, deadline - now) {
                Ok((guard, _)) => guard,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
    }

    /// Waits for a pool slot in FIFO order; None if the server is stopping.
    fn acquire_slot(&self, slots: usize) -> Option<SlotGuard<'_>> {
        let mut pool = lock(&self.pool);
        let ticket = pool.next_ticket;
        pool.next_ticket += 1;
        while !(pool.admit_ticket == ticket && pool.active < slots) {
            if self.stopping() {
                return None;
            }
            pool = match self
                .pool_changed
                .wait_timeout(pool, Duration::from_millis(50))
            {
                Ok((pool, _)) => pool,
                Err(poisoned) => poisoned.into_inner().0,
            };
        }
        pool.admit_ticket += 1;
        pool.active += 1;
        self.pool_changed.notify_all();
        Some(SlotGuard { shared: self })
    }
}

struct SlotGuard<'a> {
    shared: &'a Shared,
}

impl Drop for SlotGuard<'_> {
    fn drop(&mut self) {
        let mut pool = lock(&self.shared.pool);
        pool.active -= 1;
        self.shared.pool_changed.notify_all();
    }
}

fn oversize_header_response() -> Vec<u8> {
    let mut response = b"HTTP/1.1 200 OK\r\n".to_vec();
    let tail = b"Content-Length: 0\r\n\r\n";
    let mut line_no = 0;
    while response.len() + tail.len() < OVERSIZE_HEADER_BYTES {
        let room = OVERSIZE_HEADER_BYTES - response.len() - tail.len();
        let prefix = format!("X-Filler-{line_no:05}: ");
        // Lines of about 1 KiB; the last one is cut to land on the exact size.
        let value_len = room.saturating_sub(prefix.len() + 2).min(1000);
        if value_len == 0 {
            // Less room than a header line needs: pad the previous value instead.
            let crlf_at = response.len() - 2;
            response.splice(crlf_at..crlf_at, std::iter::repeat_n(b'a', room));
            break;
        }
        response.extend_from_slice(prefix.as_bytes());
        response.extend(std::iter::repeat_n(b'a', value_len));
        response.extend_from_slice(b"\r\n");
        line_no += 1;
    }
    response.extend_from_slice(tail);
    response
}

fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let stream = match listener.accept() {
            Ok((stream, _peer)) => stream,
            Err(_) if shared.stopping() => return,
            Err(_) => {
                // EMFILE and friends: back off instead of spinning.
                thread::sleep(Duration::from_millis(5));
                continue;
            }
        };
        // Registration and the stopping check happen under the registry lock;
        // `stop` sets the flag before taking it, so no connection escapes shutdown.
        let mut conns = lock(&shared.conns);
        if shared.stopping() {
            return;
        }
        shared.accepted.fetch_add(1, Ordering::SeqCst);
        let _ = stream.set_nodelay(true);
        let Ok(registry_clone) = stream.try_clone() else {
            // Out of descriptors: refuse this one (the client sees a close).
            continue;
        };
        let id = shared.next_conn_id.fetch_add(1, Ordering::SeqCst);
        conns.insert(id, registry_clone);
        drop(conns);
        shared.open.fetch_add(1, Ordering::SeqCst);
        let conn_shared = Arc::clone(&shared);
        let spawned = thread::Builder::new()
            .name(format!("test-server-conn-{id}"))
            .spawn(move || {
                let mut conn = Conn {
                    id,
                    stream,
                    inbuf: Vec::with_capacity(16 * 1024),
                    out: Vec::new(),
                    ends: Vec::new(),
                };
                serve_connection(&conn_shared, &mut conn);
                // Drop the registry's clone first, so the close below is the last
                // one and (for `Reset`) really sends RST.
                lock(&conn_shared.conns).remove(&id);
                drop(conn);
                conn_shared.open.fetch_sub(1, Ordering::SeqCst);
            });
        let mut handles = lock(&shared.handles);
        handles.retain(|handle| !handle.is_finished());
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(_) => {
                lock(&shared.conns).remove(&id);
                shared.open.fetch_sub(1, Ordering::SeqCst);
            }
        }
    }
}

struct Conn {
    /// Order of acceptance, from 0.
    id: u64,
    stream: TcpStream,
    inbuf: Vec<u8>,
    /// Queued response bytes and the offset in `out` where each answer ends.
    out: Vec<u8>,
    ends: Vec<usize>,
}

impl Conn {
    fn queue(&mut self, answer: &[u8]) {
        self.out.extend_from_slice(answer);
        self.ends.push(self.out.len());
    }

    /// Writes all queued answers, counting each one as soon as its last byte
    /// has been accepted by the kernel.
    fn flush(&mut self, shared: &Shared) -> io::Result<()> {
        if self.out.is_empty() {
            return Ok(());
        }
        shared.writes_in_progress.fetch_add(1, Ordering::SeqCst);
        let mut written = 0;
        let mut counted = 0;
        let result = loop {
            if written == self.out.len() {
                break Ok(());
            }
            match self.stream.write(&self.out[written..]) {
                Ok(0) => break Err(io::Error::from(io::ErrorKind::WriteZero)),
                Ok(n) => {
                    written += n;
                    shared.bytes_written.fetch_add(n as u64, Ordering::SeqCst);
                    let whole = self.ends[counted..]
                        .iter()
                        .take_while(|&&end| end <= written)
                        .count();
                    counted += whole;
                    shared.served.fetch_add(whole as u64, Ordering::SeqCst);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => break Err(e),
            }
        };
        self.out.clear();
        self.ends.clear();
        shared.writes_in_progress.fetch_sub(1, Ordering::SeqCst);
        result
    }

    /// Reads until the peer closes (or the server stops), discarding input.
    fn drain(&mut self) {
        let mut scratch = [0u8; 16 * 1024];
        loop {
            match self.stream.read(&mut scratch) {
                Ok(0) => return,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(_) => return,
            }
        }
    }

    /// Sends FIN, then waits for the peer's close so that unread pipelined
    /// requests do not turn the close into a RST.
    fn close_gracefully(&mut self) {
        let _ = self.stream.shutdown(Shutdown::Write);
        self.drain();
    }

    /// Makes the coming close send RST instead of FIN.
    fn set_linger_zero(&self) {
        let linger = libc::linger {
            l_onoff: 1,
            l_linger: 0,
        };
        // SAFETY: the fd is a live socket owned by `self.stream`; `linger` is a
        // valid `struct linger` on the stack and the length passed is its size.
        let rc = unsafe {
            libc::setsockopt(
                self.stream.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_LINGER,
                (&linger as *const libc::linger).cast(),
                std::mem::size_of::<libc::linger>() as libc::socklen_t,
            )
        };
        assert_eq!(
            rc,
            0,
            "setsockopt(SO_LINGER): {}",
            io::Error::last_os_error()
        );
    }
}

/// What a connection does after handling one request.
enum Next {
    /// Parse and handle the next request.
    Continue,
    /// Write what is queued, send FIN, drain until the peer closes.
    CloseGracefully,
    /// Write what is queued, then read and discard until the peer closes.
    GoSilent,
    /// Close now with RST.
    Reset,
}

fn serve_connection(shared: &Shared, conn: &mut Conn) {
    let mut scratch = vec![0u8; 64 * 1024];
    loop {
        let mut consumed = 0;
        let next = loop {
            match parse_request(&conn.inbuf[consumed..]) {
                Ok(Some(request)) => {
                    shared.requests.fetch_add(1, Ordering::SeqCst);
                    {
                        let mut first = lock(&shared.first_request_head);
                        if first.is_none() {
                            let head = &conn.inbuf[consumed..consumed + request.head_len];
                            *first = Some(String::from_utf8_lossy(head).into_owned());
                        }
                    }
                    consumed += request.total_len;
                    match handle_request(shared, conn, &request) {
                        Next::Continue => {}
                        other => break other,
                    }
                }
                Ok(None) => break Next::Continue,
                Err(error) => {
                    shared.requests.fetch_add(1, Ordering::SeqCst);
                    shared.bad_requests.fetch_add(1, Ordering::SeqCst);
                    let response = format!(
                        "HTTP/1.1 {}\r\nServer: xload-test\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                        error.status_line()
                    );
                    conn.queue(response.as_bytes());
                    break Next::CloseGracefully;
                }
            }
        };
        conn.inbuf.drain(..consumed);
        if conn.flush(shared).is_err() {
            return;
        }
        match next {
            Next::Continue => {}
            Next::CloseGracefully => return conn.close_gracefully(),
            Next::GoSilent => return conn.drain(),
            Next::Reset => return conn.set_linger_zero(),
        }
        if shared.stopping() {
            return;
        }
        match conn.stream.read(&mut scratch) {
            Ok(0) => return,
            Ok(n) => conn.inbuf.extend_from_slice(&scratch[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

fn handle_request(shared: &Shared, conn: &mut Conn, request: &Request) -> Next {
    let keep_or_close = if request.keep_alive {
        Next::Continue
    } else {
        Next::CloseGracefully
    };
    let ok_empty = |conn: &mut Conn| {
        conn.queue(
            &shared.ok_responses[usize::from(!request.keep_alive)][usize::from(request.is_head)],
        );
    };
    match &shared.behavior {
        Behavior::Ok { .. } | Behavior::Status { .. } => {
            ok_empty(conn);
            keep_or_close
        }
        Behavior::Shrink { body_len, after } => {
            if shared.started.elapsed() < *after {
                let mut response =
                    format!(
                    "HTTP/1.1 200 OK\r\nServer: xload-test\r\nContent-Length: {body_len}\r\n{}\r\n",
                    if request.keep_alive { "" } else { "Connection: close\r\n" }
                )
                    .into_bytes();
                if !request.is_head {
                    response.resize(response.len() + body_len, b'x');
                }
                conn.queue(&response);
            } else {
                ok_empty(conn);
            }
            keep_or_close
        }
        Behavior::Chunked { chunks } => {
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nServer: xload-test\r\nTransfer-Encoding: chunked\r\n{}\r\n",
                if request.keep_alive {
                    ""
                } else {
                    "Connection: close\r\n"
                }
            )
            .into_bytes();
            if !request.is_head {
                for &len in chunks {
                    response.extend_from_slice(format!("{len:x}\r\n").as_bytes());
                    response.resize(response.len() + len, b'x');
                    response.extend_from_slice(b"\r\n");
                }
                response.extend_from_slice(b"0\r\n\r\n");
            }
            conn.queue(&response);
            keep_or_close
        }
        Behavior::CloseDelimited => {
            let mut response = b"HTTP/1.0 200 OK\r\nServer: xload-test\r\n\r\n".to_vec();
            response.extend_from_slice(CLOSE_DELIMITED_BODY);
            conn.queue(&response);
            Next::CloseGracefully
        }
        Behavior::Garbage => {
            conn.queue(GARBAGE);
            Next::GoSilent
        }
        Behavior::TruncatedBody | Behavior::WrongContentLength => {
            let mut response =
                format!("HTTP/1.1 200 OK\r\nServer: xload-test\r\nContent-Length: {DECLARED_BODY_LEN}\r\n\r\n")
                    .into_bytes();
            response.resize(response.len() + SENT_BODY_LEN, b'x');
            conn.queue(&response);
            if shared.behavior == Behavior::TruncatedBody {
                Next::CloseGracefully
            } else {
                Next::GoSilent
            }
        }
        Behavior::OversizeHeader => {
            conn.queue(&shared.oversize_response);
            keep_or_close
        }
        Behavior::BadChunkSize => {
            conn.queue(b"HTTP/1.1 200 OK\r\nServer: xload-test\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n");
            Next::GoSilent
        }
        Behavior::CloseWithoutConnectionClose => {
            conn.queue(&shared.ok_responses[0][usize::from(request.is_head)]);
            Next::CloseGracefully
        }
        Behavior::Reset => Next::Reset,
        Behavior::NeverAnswer => Next::Continue,
        Behavior::Raw { answer, close } => {
            conn.queue(answer);
            if *close {
                Next::CloseGracefully
            } else {
                Next::Continue
            }
        }
        Behavior::OnlyFirst => {
            let live = match shared.live_conn.compare_exchange(
                u64::MAX,
                conn.id,
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => conn.id,
                Err(current) => current,
            };
            if conn.id == live {
                ok_empty(conn);
                return keep_or_close;
            }
            Next::Continue
        }
        Behavior::Stall { at, pause } => {
            let hold_from = shared.started + *at;
            let release_at = hold_from + *pause;
            let now = Instant::now();
            if now >= hold_from && now < release_at {
                // Earlier pipelined answers are not held back by this one.
                if conn.flush(shared).is_err() || !shared.sleep_until(release_at) {
                    return Next::GoSilent;
                }
            }
            ok_empty(conn);
            keep_or_close
        }
        Behavior::Pool { slots, delay } => {
            if conn.flush(shared).is_err() {
                return Next::GoSilent;
            }
            let Some(slot) = shared.acquire_slot(*slots) else {
                return Next::GoSilent;
            };
            if !shared.sleep_until(Instant::now() + *delay) {
                return Next::GoSilent;
            }
            ok_empty(conn);
            // Write before releasing the slot: a slot covers the whole answer.
            let written = conn.flush(shared);
            drop(slot);
            match written {
                Ok(()) => keep_or_close,
                Err(_) => Next::GoSilent,
            }
        }
        Behavior::Delay { delay } => {
            if conn.flush(shared).is_err() || !shared.sleep_until(Instant::now() + *delay) {
                return Next::GoSilent;
            }
            ok_empty(conn);
            keep_or_close
        }
    }
}

/// A parsed request: what the servers need to answer it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Request {
    /// Bytes of the request line and headers, final CRLF CRLF included.
    pub head_len: usize,
    /// Head plus Content-Length body.
    pub total_len: usize,
    pub is_head: bool,
    pub keep_alive: bool,
}

/// Why a request was refused; each maps to the status the server answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RequestError {
    HeadTooLarge,
    BadRequestLine,
    BadHeader,
    BadContentLength,
    BodyTooLarge,
    UnsupportedTransferEncoding,
}

impl RequestError {
    fn status_line(self) -> &'static str {
        match self {
            RequestError::HeadTooLarge => "431 Request Header Fields Too Large",
            RequestError::BodyTooLarge => "413 Content Too Large",
            RequestError::UnsupportedTransferEncoding => "501 Not Implemented",
            RequestError::BadRequestLine
            | RequestError::BadHeader
            | RequestError::BadContentLength => "400 Bad Request",
        }
    }
}

fn is_token(bytes: &[u8]) -> bool {
    !bytes.is_empty()
        && bytes
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b))
}

/// Parses one request from the start of `buf`: Ok(None) when more bytes are
/// needed. Request bodies are only supported with Content-Length.
pub(crate) fn parse_request(buf: &[u8]) -> Result<Option<Request>, RequestError> {
    let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") else {
        return if buf.len() > MAX_REQUEST_HEAD_BYTES {
            Err(RequestError::HeadTooLarge)
        } else {
            Ok(None)
        };
    };
    let head_len = head_end + 4;
    if head_len > MAX_REQUEST_HEAD_BYTES {
        return Err(RequestError::HeadTooLarge);
    }
    let mut lines = buf[..head_end]
        .split(|&b| b == b'\n')
        .map(|line| line.strip_suffix(b"\r").unwrap_or(line));
    let request_line = lines.next().unwrap_or_default();
    let parts: Vec<&[u8]> = request_line.split(|&b| b == b' ').collect();
    let [method, target, version] = parts[..] else {
        return Err(RequestError::BadRequestLine);
    };
    if !is_token(method) || target.is_empty() || target.iter().any(|b| b.is_ascii_control()) {
        return Err(RequestError::BadRequestLine);
    }
    let http11 = match version {
        b"HTTP/1.1" => true,
        b"HTTP/1.0" => false,
        _ => return Err(RequestError::BadRequestLine),
    };
    let mut content_length: Option<u64> = None;
    let mut close = false;
    let mut keep_alive_token = false;
    for line in lines {
        let Some(colon) = line.iter().position(|&b| b == b':') else {
            return Err(RequestError::BadHeader);
        };
        let (name, value) = (&line[..colon], line[colon + 1..].trim_ascii());
        if !is_token(name) || value.iter().any(|&b| b.is_ascii_control() && b != b'\t') {
            return Err(RequestError::BadHeader);
        }
        if name.eq_ignore_ascii_case(b"content-length") {
            let parsed = std::str::from_utf8(value)
                .ok()
                .filter(|text| !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|text| text.parse::<u64>().ok())
                .ok_or(RequestError::BadContentLength)?;
            if content_length.is_some_and(|previous| previous != parsed) {
                return Err(RequestError::BadContentLength);
            }
            content_length = Some(parsed);
        } else if name.eq_ignore_ascii_case(b"transfer-encoding") {
            return Err(RequestError::UnsupportedTransferEncoding);
        } else if name.eq_ignore_ascii_case(b"connection") {
            for token in value.split(|&b| b == b',').map(<[u8]>::trim_ascii) {
                close |= token.eq_ignore_ascii_case(b"close");
                keep_alive_token |= token.eq_ignore_ascii_case(b"keep-alive");
            }
        }
    }
    let body_len = content_length.unwrap_or(0);
    if body_len > MAX_REQUEST_BODY_BYTES {
        return Err(RequestError::BodyTooLarge);
    }
    let total_len = head_len + body_len as usize;
    if buf.len() < total_len {
        return Ok(None);
    }
    Ok(Some(Request {
        head_len,
        total_len,
        is_head: method == b"HEAD",
        keep_alive: !close && (http11 || keep_alive_token),
    }))
}
