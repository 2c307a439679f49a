//! HTTP/1.1 keep-alive over AF_XDP with two user-space TCP stacks, side by
//! side: smoltcp (`--stack smoltcp`) and the purpose-built client stack of
//! `xload_xdp::tcp` (`--stack own`), to decide with a measurement whether a
//! well-kept stack can carry `--engine xdp` (issue 23).
//!
//! It builds a [`ServerLab`] (nginx, one process, on the server CPU inside a
//! namespace), claims the lab's spare address on the generator end with the
//! claim XDP program (IPv4 and ARP for it go to an AF_XDP socket, the rest
//! to the kernel), and runs the stack on that socket pinned to the client
//! CPU: the stack answers ARP for the address and learns the server's MAC.
//! For each connection count it opens the connections, then for `--duration`
//! keeps one request in flight on each, then stops sending, drains, and
//! reconciles its count of responses with nginx's stub_status exactly.
//! With `--stack both` (the default) the two alternate per connection count.
//! It reports requests/s, the client CPU's whole busy time per request
//! (/proc/stat user+nice+system+irq+softirq: the AF_XDP copy runs in softirq
//! or a NAPI thread, not always in this process), this process's own CPU per
//! request, and the time spent in the stack per request: `Interface::poll`
//! for smoltcp, which grows with the number of sockets (smoltcp finds the
//! socket of each received segment by walking all sockets, and every poll
//! walks all of them for egress); for the own stack its receive and transmit
//! passes, HTTP parsing included, which visit only the connections that
//! frames are for.
//!
//! ```sh
//! cargo run --release -p xload-xdp --example xdp_http -- --conns 10,100,1000 --duration 5
//! ```
//! Needs root; traffic stays on the lab's veth pair.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};

use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp as stcp;
use smoltcp::wire::{EthernetAddress, HardwareAddress, IpAddress, IpCidr};
use xload_xdp::claim::ClaimProgram;
use xload_xdp::lab::{ServerLab, ServerLabOptions};
use xload_xdp::netdev;
use xload_xdp::port::FramePort;
use xload_xdp::tcp::{self, Client, Event};
use xload_xdp::xsk::{BindMode, XskConfig, XskSocket};

const FRAME_SIZE: u32 = 2048;
const FRAME_COUNT: u32 = 8192;
const RING: u32 = 2048;
/// Busy share of the client CPU under which a phase may start.
const QUIET_PCT: f64 = 10.0;
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: lab\r\n\r\n";

// ---------------------------------------------------------------------------
// The AF_XDP socket as a smoltcp Device.
// ---------------------------------------------------------------------------

/// The lab's AF_XDP socket as a smoltcp device: frames through the
/// library's [`FramePort`]; a received frame is copied out of the UMEM
/// (smoltcp's receive hands out a transmit token that borrows the port).
struct XskDevice {
    port: FramePort,
    rx_buf: Vec<u8>,
}

struct XskRx<'a> {
    frame: &'a [u8],
}

struct XskTx<'a> {
    port: &'a mut FramePort,
}

impl smoltcp::phy::RxToken for XskRx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.frame)
    }
}

impl smoltcp::phy::TxToken for XskTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut out = None;
        // A token is only handed out when a frame and a ring slot are free.
        let sent = self.port.tx_one(|buf| {
            out = Some(f(&mut buf[..len]));
            Some(len)
        });
        assert!(sent, "a TX frame was reserved");
        out.expect("the frame was written")
    }
}

impl XskDevice {
    fn new(xsk: XskSocket) -> XskDevice {
        XskDevice {
            port: FramePort::new(xsk),
            rx_buf: vec![0; FRAME_SIZE as usize],
        }
    }
}

impl Device for XskDevice {
    type RxToken<'a> = XskRx<'a>;
    type TxToken<'a> = XskTx<'a>;

    fn receive(
        &mut self,
        _now: smoltcp::time::Instant,
    ) -> Option<(Self::RxToken<'_>, Self::TxToken<'_>)> {
        if !self.port.tx_room() {
            return None;
        }
        let buf = &mut self.rx_buf;
        let mut len = 0;
        let got = self.port.rx_one(|frame| {
            len = frame.len().min(buf.len());
            buf[..len].copy_from_slice(&frame[..len]);
        });
        if !got {
            return None;
        }
        Some((
            XskRx {
                frame: &self.rx_buf[..len],
            },
            XskTx {
                port: &mut self.port,
            },
        ))
    }

    fn transmit(&mut self, _now: smoltcp::time::Instant) -> Option<Self::TxToken<'_>> {
        if !self.port.tx_room() {
            return None;
        }
        Some(XskTx {
            port: &mut self.port,
        })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = 1514;
        caps.max_burst_size = Some(64);
        caps
    }
}

// ---------------------------------------------------------------------------
// The HTTP side: one request in flight per connection.
// ---------------------------------------------------------------------------

/// One keep-alive connection's HTTP state.
#[derive(Default)]
struct Conn {
    /// A request is out and its response not yet whole.
    waiting: bool,
    /// Bytes of the response head read so far (a head can span segments).
    head: Vec<u8>,
    /// Body bytes still to skip.
    body_left: usize,
    responses: u64,
}

impl Conn {
    /// Feeds received bytes; returns how many were used and counts whole
    /// responses (Content-Length bodies; nginx's `= /` sends 0 bytes).
    fn feed(&mut self, mut data: &[u8]) -> usize {
        let total = data.len();
        while !data.is_empty() && self.waiting {
            if self.body_left > 0 {
                let n = self.body_left.min(data.len());
                self.body_left -= n;
                data = &data[n..];
                if self.body_left == 0 {
                    self.finish();
                }
                continue;
            }
            let before = self.head.len();
            self.head.extend_from_slice(data);
            let Some(end) = find(&self.head, b"\r\n\r\n") else {
                data = &[];
                continue;
            };
            let used = end + 4 - before;
            self.body_left = content_length(&self.head[..end]);
            data = &data[used..];
            self.head.clear();
            if self.body_left == 0 {
                self.finish();
            }
        }
        total - data.len()
    }

    fn finish(&mut self) {
        self.waiting = false;
        self.responses += 1;
    }
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head);
    text.lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-length")
                .then(|| v.trim().parse().ok())
                .flatten()
        })
        .unwrap_or(0)
}

/// Sends a request on every idle established connection and reads what
/// came; returns whether anything happened.
fn drive_http(
    sockets: &mut SocketSet<'_>,
    handles: &[SocketHandle],
    conns: &mut [Conn],
    send: bool,
) -> bool {
    let mut busy = false;
    for (h, c) in handles.iter().zip(conns.iter_mut()) {
        let s = sockets.get_mut::<stcp::Socket>(*h);
        if s.can_recv() {
            let _ = s.recv(|buf| {
                let n = c.feed(buf);
                (n, ())
            });
            busy = true;
        }
        let room = s.send_capacity() - s.send_queue() >= REQUEST.len();
        if send && !c.waiting && s.may_send() && room && s.send_slice(REQUEST).is_ok() {
            c.waiting = true;
            busy = true;
        }
    }
    busy
}

// ---------------------------------------------------------------------------
// Measurement.
// ---------------------------------------------------------------------------

/// One phase's figures.
#[derive(Default)]
struct Phase {
    stack: &'static str,
    conns: usize,
    window_s: f64,
    responses: u64,
    busy_s: f64,
    process_s: f64,
    poll_s: f64,
    app_s: f64,
    polls: u64,
    total_responses: u64,
    nginx_requests: u64,
    /// The client CPU's busy share in the second before the phase: other
    /// load on a shared machine, which the busy figure includes.
    background_pct: f64,
    /// Kernel backlog drops during the phase (any traffic on the machine).
    drops: u64,
}

fn cpu_busy_s(cpu: usize) -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let name = format!("cpu{cpu} ");
    let hz = 100.0_f64.max(clock_ticks());
    stat.lines()
        .find(|l| l.starts_with(&name))
        .map(|l| {
            let v: Vec<u64> = l
                .split_whitespace()
                .skip(1)
                .filter_map(|x| x.parse().ok())
                .collect();
            [0, 1, 2, 5, 6]
                .iter()
                .map(|&i| v.get(i).copied().unwrap_or(0))
                .sum::<u64>() as f64
                / hz
        })
        .unwrap_or(0.0)
}

/// Frames the kernel dropped for a full per-CPU backlog (all CPUs):
/// /proc/net/softnet_stat's second column.
fn backlog_drops() -> u64 {
    let text = std::fs::read_to_string("/proc/net/softnet_stat").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.split_whitespace().nth(1))
        .filter_map(|h| u64::from_str_radix(h, 16).ok())
        .sum()
}

/// This thread's CPU time: stack timings leave out time the thread was
/// preempted (the NAPI thread runs at SCHED_FIFO on the same CPU).
fn cpu_ns() -> u64 {
    xload_sys::clock::thread_cpu_ns()
}

fn clock_ticks() -> f64 {
    // SAFETY: sysconf has no preconditions.
    unsafe { libc::sysconf(libc::_SC_CLK_TCK) as f64 }
}

fn process_cpu_s() -> f64 {
    // SAFETY: getrusage writes one rusage into the zeroed struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: as above; RUSAGE_SELF is always valid.
    unsafe { libc::getrusage(libc::RUSAGE_SELF, &mut u) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 * 1e-6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// nginx's stub_status `requests` counter, read through the kernel's stack.
fn stub_requests(addr: SocketAddr) -> std::io::Result<u64> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(2)))?;
    s.write_all(b"GET /stub HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n")?;
    let mut page = String::new();
    s.read_to_string(&mut page)?;
    let at = page
        .find("server accepts handled requests")
        .ok_or_else(|| std::io::Error::other(format!("not stub_status: {page}")))?;
    page[at..]
        .split_whitespace()
        .filter_map(|w| w.parse::<u64>().ok())
        .nth(2)
        .ok_or_else(|| std::io::Error::other("no requests counter"))
}

struct Stack {
    dev: XskDevice,
    iface: Interface,
    started: Instant,
}

impl Stack {
    fn now(&self) -> smoltcp::time::Instant {
        smoltcp::time::Instant::from_micros(self.started.elapsed().as_micros() as i64)
    }

    /// One poll of the interface, timed; then the frame rings are flushed.
    fn poll(&mut self, sockets: &mut SocketSet<'_>, poll_ns: &mut u64) {
        let t = cpu_ns();
        let now = self.now();
        self.iface.poll(now, &mut self.dev, sockets);
        *poll_ns += cpu_ns() - t;
        self.dev.port.flush();
    }

    /// Sleeps on the socket until a frame comes or smoltcp's next timer.
    fn wait(&mut self, sockets: &SocketSet<'_>) {
        let now = self.now();
        let ms = self
            .iface
            .poll_delay(now, sockets)
            .map_or(10, |d| d.total_millis().min(10) as i32);
        if ms > 0 {
            self.dev.port.wait(ms);
        }
    }
}

/// Waits (up to a minute) for a second in which the client CPU is quiet:
/// on a shared machine other load lands in the busy figure. Returns the
/// last second's busy share, %.
fn wait_quiet(client_cpu: usize) -> f64 {
    let mut background_pct = 100.0;
    let quiet_deadline = Instant::now() + Duration::from_secs(60);
    while background_pct > QUIET_PCT && Instant::now() < quiet_deadline && !stopped() {
        let quiet0 = cpu_busy_s(client_cpu);
        std::thread::sleep(Duration::from_secs(1));
        background_pct = (cpu_busy_s(client_cpu) - quiet0) * 100.0;
    }
    background_pct
}

/// What both stacks' phases share: the quiet wait and nginx's and the
/// kernel's counters around the phase, the CPU clocks around its window.
struct Bracket {
    stub: SocketAddr,
    client_cpu: usize,
    background_pct: f64,
    before: u64,
    drops0: u64,
    busy0: f64,
    proc0: f64,
    start: Instant,
}

impl Bracket {
    /// Waits for a quiet client CPU and reads the counters.
    fn open(lab: &ServerLab, client_cpu: usize) -> Result<Bracket, String> {
        let stub = SocketAddr::from((lab.ip_srv, 80));
        let background_pct = wait_quiet(client_cpu);
        let before = stub_requests(stub).map_err(|e| format!("stub_status: {e}"))?;
        Ok(Bracket {
            stub,
            client_cpu,
            background_pct,
            before,
            drops0: backlog_drops(),
            busy0: 0.0,
            proc0: 0.0,
            start: Instant::now(),
        })
    }

    /// Starts the measured window.
    fn start_window(&mut self) {
        (self.busy0, self.proc0) = (cpu_busy_s(self.client_cpu), process_cpu_s());
        self.start = Instant::now();
    }

    /// Whether the window of `duration` is still open.
    fn in_window(&self, duration: Duration) -> bool {
        self.start.elapsed() < duration && !stopped()
    }

    /// Ends the window: `phase` with its length and the CPU it took.
    fn end_window(&self, phase: Phase) -> Phase {
        Phase {
            window_s: self.start.elapsed().as_secs_f64(),
            busy_s: cpu_busy_s(self.client_cpu) - self.busy0,
            process_s: process_cpu_s() - self.proc0,
            ..phase
        }
    }

    /// After the drain: `phase` with nginx's count and the drops.
    fn close(self, phase: Phase) -> Result<Phase, String> {
        let after = stub_requests(self.stub).map_err(|e| format!("stub_status: {e}"))?;
        Ok(Phase {
            // The second stub request counts itself.
            nginx_requests: after - self.before - 1,
            background_pct: self.background_pct,
            drops: backlog_drops() - self.drops0,
            ..phase
        })
    }
}

fn run_phase(
    stack: &mut Stack,
    lab: &ServerLab,
    conns_n: usize,
    port_base: u16,
    duration: Duration,
    client_cpu: usize,
) -> Result<Phase, String> {
    let mut bracket = Bracket::open(lab, client_cpu)?;
    let mut sockets = SocketSet::new(Vec::with_capacity(conns_n));
    let mut handles = Vec::with_capacity(conns_n);
    for i in 0..conns_n {
        let mut s = stcp::Socket::new(
            stcp::SocketBuffer::new(vec![0; 4096]),
            stcp::SocketBuffer::new(vec![0; 1024]),
        );
        s.set_nagle_enabled(false);
        let local = port_base + i as u16;
        s.connect(
            stack.iface.context(),
            (IpAddress::Ipv4(lab.ip_srv), 80),
            local,
        )
        .map_err(|e| format!("connect: {e}"))?;
        handles.push(sockets.add(s));
    }
    let mut conns: Vec<Conn> = (0..conns_n).map(|_| Conn::default()).collect();
    let mut poll_ns = 0u64;
    // Establish every connection first (bounded).
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        stack.poll(&mut sockets, &mut poll_ns);
        let up = handles
            .iter()
            .filter(|h| sockets.get::<stcp::Socket>(**h).state() == stcp::State::Established)
            .count();
        if up == conns_n {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{up} of {conns_n} connections established in 10 s"));
        }
        stack.wait(&sockets);
    }
    // The measured window.
    bracket.start_window();
    let (mut poll_ns, mut app_ns, mut polls) = (0u64, 0u64, 0u64);
    let counted0: u64 = conns.iter().map(|c| c.responses).sum();
    while bracket.in_window(duration) {
        stack.poll(&mut sockets, &mut poll_ns);
        let t = cpu_ns();
        let busy = drive_http(&mut sockets, &handles, &mut conns, true);
        app_ns += cpu_ns() - t;
        stack.poll(&mut sockets, &mut poll_ns);
        polls += 2;
        if !busy {
            stack.wait(&sockets);
        }
    }
    let phase = bracket.end_window(Phase {
        stack: "smoltcp",
        conns: conns_n,
        responses: conns.iter().map(|c| c.responses).sum::<u64>() - counted0,
        poll_s: poll_ns as f64 * 1e-9,
        app_s: app_ns as f64 * 1e-9,
        polls,
        ..Phase::default()
    });
    // Drain: no new requests; every outstanding answer comes (bounded).
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut drain_ns = 0u64;
    while conns.iter().any(|c| c.waiting) && Instant::now() < deadline {
        stack.poll(&mut sockets, &mut drain_ns);
        drive_http(&mut sockets, &handles, &mut conns, false);
        stack.wait(&sockets);
    }
    close_all(stack, &mut sockets, &handles);
    bracket.close(Phase {
        total_responses: conns.iter().map(|c| c.responses).sum(),
        ..phase
    })
}

/// One pass of the own stack: every received frame through the client
/// (each response answered at once by the next request, which carries the
/// ACK), then every owed frame out. Returns the frames received and the
/// nanoseconds spent in the stack (receive and transmit passes, HTTP
/// included; not the ring flush and its `sendto`, as for smoltcp's poll).
fn pump_own(
    dev: &mut XskDevice,
    client: &mut Client,
    conns: &mut [Conn],
    send: bool,
    now_ns: u64,
) -> (u32, u64) {
    let t = cpu_ns();
    let n = dev
        .port
        .rx_each(|frame| match client.receive(frame, now_ns) {
            Event::Data(id, bytes) => {
                let c = &mut conns[id as usize];
                c.feed(bytes);
                if send && !c.waiting && client.send(id, REQUEST) {
                    c.waiting = true;
                }
            }
            Event::Failed(id, why) => eprintln!("connection {id} failed: {why:?}"),
            _ => {}
        });
    while dev.port.tx_one(|buf| client.transmit(buf, now_ns)) {}
    let ns = cpu_ns() - t;
    dev.port.flush();
    (n, ns)
}

fn run_phase_own(
    stack: &mut Stack,
    lab: &ServerLab,
    conns_n: usize,
    port_base: u16,
    duration: Duration,
    client_cpu: usize,
) -> Result<Phase, String> {
    let mut bracket = Bracket::open(lab, client_cpu)?;
    let seed = u64::from(std::process::id()) << 20 | u64::from(port_base);
    let (ip, mac) = (lab.ip_user, lab.mac_gen.0);
    let mut client = Client::new(mac, ip, lab.ip_srv, 80, port_base, conns_n as u32, seed);
    let mut conns: Vec<Conn> = (0..conns_n).map(|_| Conn::default()).collect();
    for i in 0..conns_n as u32 {
        client.connect(i);
    }
    let started = stack.started;
    let now = || started.elapsed().as_nanos() as u64;
    let dev = &mut stack.dev;
    let mut last_timer = now();
    let mut timers = |client: &mut Client| {
        let t = now();
        if t - last_timer >= 2_000_000 {
            last_timer = t;
            for (id, why) in client.on_timer(t) {
                eprintln!("connection {id} failed: {why:?}");
            }
        }
    };
    let all = |client: &Client, want: &[tcp::State]| {
        (0..conns_n as u32).all(|i| want.contains(&client.state(i)))
    };
    // One turn: a pump (sending requests when `send`), a wait when nothing
    // came, the timers; the stack's nanoseconds.
    let mut turn = |client: &mut Client, conns: &mut [Conn], send: bool| {
        let (got, ns) = pump_own(dev, client, conns, send, now());
        if got == 0 {
            dev.port.wait(1);
        }
        timers(client);
        ns
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !all(&client, &[tcp::State::Established]) {
        if Instant::now() > deadline {
            return Err("own stack: connections not established in 10 s".into());
        }
        turn(&mut client, &mut conns, false);
    }
    // The measured window: one request in flight per connection.
    bracket.start_window();
    for (i, c) in conns.iter_mut().enumerate() {
        c.waiting = client.send(i as u32, REQUEST);
    }
    let (mut stack_ns, mut polls) = (0u64, 0u64);
    while bracket.in_window(duration) {
        stack_ns += turn(&mut client, &mut conns, true);
        polls += 1;
    }
    let phase = bracket.end_window(Phase {
        stack: "own",
        conns: conns_n,
        responses: conns.iter().map(|c| c.responses).sum(),
        poll_s: stack_ns as f64 * 1e-9,
        polls,
        ..Phase::default()
    });
    // Drain, then close every connection (FIN both ways), bounded.
    let deadline = Instant::now() + Duration::from_secs(5);
    while conns.iter().any(|c| c.waiting) && Instant::now() < deadline {
        turn(&mut client, &mut conns, false);
    }
    for i in 0..conns_n as u32 {
        client.close(i);
    }
    let done = [tcp::State::Done, tcp::State::Failed, tcp::State::Closed];
    let deadline = Instant::now() + Duration::from_secs(3);
    while !all(&client, &done) && Instant::now() < deadline {
        turn(&mut client, &mut conns, false);
    }
    if client.counters.retransmits + client.counters.out_of_order > 0 {
        eprintln!(
            "own stack: {:?}; socket: {:?}",
            client.counters,
            stack.dev.port.statistics()
        );
    }
    bracket.close(Phase {
        total_responses: conns.iter().map(|c| c.responses).sum(),
        ..phase
    })
}

/// Closes every connection (FIN) and polls until they are closed or 3 s passed.
fn close_all(stack: &mut Stack, sockets: &mut SocketSet<'_>, handles: &[SocketHandle]) {
    for h in handles {
        sockets.get_mut::<stcp::Socket>(*h).close();
    }
    let deadline = Instant::now() + Duration::from_secs(3);
    let mut ns = 0;
    while Instant::now() < deadline {
        stack.poll(sockets, &mut ns);
        let open = handles
            .iter()
            .filter(|h| {
                !matches!(
                    sockets.get::<stcp::Socket>(**h).state(),
                    stcp::State::Closed | stcp::State::TimeWait
                )
            })
            .count();
        if open == 0 {
            break;
        }
        stack.wait(sockets);
    }
    for h in handles {
        sockets.get_mut::<stcp::Socket>(*h).abort();
    }
    stack.poll(sockets, &mut ns);
}

// ---------------------------------------------------------------------------
// Set-up and the report.
// ---------------------------------------------------------------------------

struct Args {
    stacks: Vec<&'static str>,
    conns: Vec<usize>,
    duration: Duration,
    client_cpu: usize,
    server_cpu: usize,
    napi_on_client: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut a = Args {
        stacks: vec!["smoltcp", "own"],
        conns: vec![10, 100, 1000],
        duration: Duration::from_secs(5),
        client_cpu: 0,
        server_cpu: 1,
        napi_on_client: true,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--conns" => {
                a.conns = value()?
                    .split(',')
                    .map(|x| x.parse().map_err(|e| format!("--conns {x}: {e}")))
                    .collect::<Result<_, _>>()?
            }
            "--duration" => {
                a.duration = Duration::from_secs_f64(
                    value()?.parse().map_err(|e| format!("--duration: {e}"))?,
                )
            }
            "--client-cpu" => a.client_cpu = value()?.parse().map_err(|e| format!("{e}"))?,
            "--server-cpu" => a.server_cpu = value()?.parse().map_err(|e| format!("{e}"))?,
            "--napi-anywhere" => a.napi_on_client = false,
            "--stack" => {
                a.stacks = match value()?.as_str() {
                    "smoltcp" => vec!["smoltcp"],
                    "own" => vec!["own"],
                    "both" => vec!["smoltcp", "own"],
                    other => return Err(format!("--stack {other}: smoltcp, own or both")),
                }
            }
            _ => return Err(format!("unknown argument {flag}")),
        }
    }
    if a.conns.iter().any(|&c| c == 0 || c > 20_000) {
        return Err("--conns: 1 to 20000 each".into());
    }
    Ok(a)
}

/// Threaded NAPI on the generator end, its threads pinned to the client
/// CPU: the veth's receive (and the copy into the UMEM) then runs on the
/// generator's CPU instead of the sender's (the server's).
fn napi_to_client(dev: &str, cpu: usize) -> Result<usize, String> {
    std::fs::write(format!("/sys/class/net/{dev}/threaded"), "1")
        .map_err(|e| format!("threaded NAPI on {dev}: {e}"))?;
    std::thread::sleep(Duration::from_millis(100));
    let mut pinned = 0;
    for entry in std::fs::read_dir("/proc")
        .map_err(|e| e.to_string())?
        .flatten()
    {
        let comm = std::fs::read_to_string(entry.path().join("comm")).unwrap_or_default();
        if comm.trim().starts_with(&format!("napi/{dev}-")) {
            let pid = entry.file_name().to_string_lossy().into_owned();
            // SCHED_FIFO: the thread preempts the busy-polling generator as
            // a NIC's interrupt and softirq would; otherwise it waits for
            // the scheduler while the veth's 256-frame ring overflows.
            let ok = std::process::Command::new("taskset")
                .args(["-pc", &cpu.to_string(), &pid])
                .output()
                .is_ok_and(|o| o.status.success())
                && std::process::Command::new("chrt")
                    .args(["-f", "-p", "1", &pid])
                    .output()
                    .is_ok_and(|o| o.status.success());
            pinned += usize::from(ok);
        }
    }
    Ok(pinned)
}

fn nginx_path() -> Result<std::path::PathBuf, String> {
    for p in ["/usr/sbin/nginx", "/usr/bin/nginx"] {
        if Path::new(p).is_file() {
            return Ok(p.into());
        }
    }
    Err("nginx not found".into())
}

static STOP: std::sync::OnceLock<std::sync::Arc<std::sync::atomic::AtomicBool>> =
    std::sync::OnceLock::new();

/// Ctrl-C or SIGTERM came: phases end early and the lab is removed.
fn stopped() -> bool {
    STOP.get()
        .is_some_and(|f| f.load(std::sync::atomic::Ordering::Relaxed))
}

fn main() {
    let _ = STOP.set(xload_sys::signal::stop_flag());
    if let Err(e) = run() {
        eprintln!("smoltcp_http: {e}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    if let Some(why) = xload_xdp::lab::unsupported() {
        return Err(why);
    }
    let mut lab = ServerLab::new(ServerLabOptions {
        server_cpu: args.server_cpu,
        client_cpu: args.client_cpu,
    })
    .map_err(|e| format!("lab: {e}"))?;
    lab.start_nginx(&nginx_path()?, 80)
        .map_err(|e| format!("nginx: {e}"))?;
    let link = netdev::link_by_name(&lab.dev_gen).map_err(|e| e.to_string())?;
    let prog = ClaimProgram::load(lab.ip_user, 1).map_err(|e| e.to_string())?;
    let xsk = XskSocket::open(XskConfig {
        ifindex: link.ifindex,
        queue: 0,
        frame_size: FRAME_SIZE,
        frame_count: FRAME_COUNT,
        rx_size: RING,
        tx_size: RING,
        fill_size: RING * 2,
        comp_size: RING,
        mode: BindMode::Auto,
    })
    .map_err(|e| e.to_string())?;
    prog.register_socket(0, xsk.fd())
        .map_err(|e| e.to_string())?;
    let attached = prog
        .attach(link.ifindex, false)
        .map_err(|e| e.to_string())?;
    let napi = match args.napi_on_client {
        true => napi_to_client(&lab.dev_gen, args.client_cpu)?,
        false => 0,
    };
    xload_sys::cpu::pin_current_thread(args.client_cpu).map_err(|e| e.to_string())?;
    eprintln!(
        "lab {}: the stacks claim {} on {} (XDP {:?}, {} copy, {napi} NAPI thread(s) on CPU {}), nginx at {}:80 on CPU {}",
        lab.ns,
        lab.ip_user,
        lab.dev_gen,
        attached.mode,
        if xsk.zero_copy { "zero" } else { "kernel" },
        args.client_cpu,
        lab.ip_srv,
        args.server_cpu
    );
    let mut dev = XskDevice::new(xsk);
    let mut cfg = Config::new(HardwareAddress::Ethernet(EthernetAddress(lab.mac_gen.0)));
    cfg.random_seed = u64::from(std::process::id()) ^ 0x9e37_79b9_7f4a_7c15;
    let started = Instant::now();
    let mut iface = Interface::new(cfg, &mut dev, smoltcp::time::Instant::from_micros(0));
    iface.update_ip_addrs(|a| {
        let _ = a.push(IpCidr::new(IpAddress::Ipv4(lab.ip_user), 24));
    });
    let mut stack = Stack {
        dev,
        iface,
        started,
    };
    println!("| stack | connections | requests/s | generator CPU busy µs/req | process CPU µs/req | stack CPU µs/req | app walk CPU µs/req | polls/s | responses = nginx requests | client CPU busy before % | backlog drops |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|");
    let mut port_base = 20_000u16;
    for &n in &args.conns {
        for &which in &args.stacks {
            if stopped() {
                return Err("interrupted".into());
            }
            let run = if which == "own" {
                run_phase_own
            } else {
                run_phase
            };
            let p = run(
                &mut stack,
                &lab,
                n,
                port_base,
                args.duration,
                args.client_cpu,
            )?;
            port_base = port_base.wrapping_add(n as u16 + 7).max(20_000);
            print_phase(&p);
        }
    }
    let dropped = lab
        .in_ns(&[
            "cat",
            &format!("/sys/class/net/{}/statistics/tx_dropped", lab.dev_srv),
        ])
        .unwrap_or_default();
    eprintln!(
        "frames: {} received, {} sent; the server end dropped {} (the generator end's XDP ring was full)",
        stack.dev.port.rx_frames,
        stack.dev.port.tx_frames,
        dropped.trim()
    );
    drop(attached);
    Ok(())
}

fn print_phase(p: &Phase) {
    let per = |s: f64| s * 1e6 / p.responses.max(1) as f64;
    println!(
        "| {} | {} | {:.0} | {:.2} | {:.2} | {:.2} | {:.2} | {:.0} | {} = {} {} | {:.0} | {} |",
        p.stack,
        p.conns,
        p.responses as f64 / p.window_s,
        per(p.busy_s),
        per(p.process_s),
        per(p.poll_s),
        per(p.app_s),
        p.polls as f64 / p.window_s,
        p.total_responses,
        p.nginx_requests,
        if p.total_responses == p.nginx_requests {
            "✓"
        } else {
            "MISMATCH"
        },
        p.background_pct,
        p.drops
    );
}
