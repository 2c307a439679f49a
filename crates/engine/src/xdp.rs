//! The AF_XDP driver (`--engine xdp`): connections run in the user-space
//! TCP stack of `xload_xdp::tcp` over one AF_XDP socket, so everything above
//! the transport (codec, recorder, open loop, pipelining) is the other
//! drivers'.
//!
//! The worker owns an IPv4 address the kernel does not (`--src-ip`): the
//! claim XDP program sends every frame for it (IPv4 to it, ARP about it) to
//! the socket on queue 0 and passes the rest to the kernel. Connection `i`
//! is local port [`PORT_BASE`] + `i`; a replaced connection is aborted with
//! a RST and reopened on the same port with a fresh ISN. One worker (one
//! socket, queue 0). The program hangs on a `bpf_link` that is closed when
//! the worker ends: on the run's end, Ctrl-C, an error, or the process's death.

use std::net::{IpAddr, Ipv4Addr};

use xload_stats::Recorder;
use xload_xdp::claim::ClaimProgram;
use xload_xdp::port::FramePort;
use xload_xdp::program::{AttachMode, XdpLink};
use xload_xdp::tcp::{Client, Counters, Event, Failure, State as Tcp};
use xload_xdp::xsk::{BindMode, XskConfig, XskSocket};

use crate::clock::now_ns;
use crate::conn::{record_errno, Phase};
use crate::ctx::Ctx;
use crate::drive::{Core, DriverStats, State, Sweeper, Timeouts, Transport};
use crate::plan::{Plan, XdpTarget};
use crate::ring::next_gen;

/// Local port of connection 0.
pub(crate) const PORT_BASE: u16 = 20_000;
/// Most connections one worker carries (its ports up to 65535).
pub(crate) const MAX_CONNS: usize = (u16::MAX - PORT_BASE) as usize + 1;
/// Period of the stack's timer pass (retransmissions, delayed ACKs).
const TIMER_NS: u64 = 2_000_000;
/// How long connections get to close cleanly at the end before a RST.
const CLOSE_NS: u64 = 1_000_000_000;

/// What the worker reports beyond [`DriverStats`].
pub(crate) struct XdpStats {
    pub stats: DriverStats,
    /// The stack's counters and the socket's drops, for the Engine line.
    pub detail: String,
}

/// The socket with its program: the link (and so the program) goes first
/// when dropped.
struct Attached {
    link: XdpLink,
    port: FramePort,
    _prog: ClaimProgram,
}

/// Test-only frame faults (see [`XdpTarget`]): frames dropped, and frames
/// held back and delivered (or sent) after the next ones.
struct Faults {
    drop_every: u64,
    hold_every: u64,
    frames: u64,
    dropped: u64,
    held: u64,
    rx_held: Vec<Vec<u8>>,
    tx_held: Vec<Vec<u8>>,
}

#[derive(PartialEq)]
enum Fate {
    Pass,
    Drop,
    Hold,
}

impl Faults {
    fn new(t: &XdpTarget) -> Option<Faults> {
        (t.drop_every > 0 || t.hold_every > 0).then(|| Faults {
            drop_every: u64::from(t.drop_every),
            hold_every: u64::from(t.hold_every),
            frames: 0,
            dropped: 0,
            held: 0,
            rx_held: Vec::new(),
            tx_held: Vec::new(),
        })
    }

    fn fate(&mut self) -> Fate {
        self.frames += 1;
        let every = |n: u64, phase: u64| n > 0 && (self.frames + phase).is_multiple_of(n);
        if every(self.drop_every, 0) {
            self.dropped += 1;
            Fate::Drop
        } else if every(self.hold_every, self.hold_every / 2) {
            self.held += 1;
            Fate::Hold
        } else {
            Fate::Pass
        }
    }
}

struct Driver<'c, 'p> {
    ctx: &'c mut Ctx<'p>,
    /// Connections have no part of their own: the stack knows them by index.
    core: Core<()>,
    client: Client,
    /// Taken out while received frames are handed to the stack.
    port: Option<FramePort>,
    timeouts: Timeouts,
    faults: Option<Faults>,
}

/// Opens the socket on queue 0 of the target's interface, loads the claim
/// program for its address and attaches it.
fn attach(t: &XdpTarget) -> Result<(Attached, [u8; 6], String), String> {
    let link =
        xload_xdp::netdev::link_by_name(&t.dev).map_err(|e| format!("--dev {}: {e}", t.dev))?;
    let mac = link
        .mac
        .ok_or_else(|| format!("--dev {}: the interface has no MAC address", t.dev))?;
    let prog = ClaimProgram::load(t.src_ip, link.num_rx_queues.max(1))
        .map_err(|e| format!("the claim XDP program: {e}"))?;
    let xsk = XskSocket::open(XskConfig {
        ifindex: link.ifindex,
        queue: 0,
        frame_size: 2048,
        frame_count: 8192,
        rx_size: 2048,
        tx_size: 2048,
        fill_size: 4096,
        comp_size: 2048,
        mode: BindMode::Auto,
    })
    .map_err(|e| format!("AF_XDP socket on {} queue 0: {e}", t.dev))?;
    prog.register_socket(0, xsk.fd())
        .map_err(|e| format!("the claim program's socket map: {e}"))?;
    let zero_copy = xsk.zero_copy;
    let link = prog
        .attach(link.ifindex, false)
        .map_err(|e| format!("attaching XDP to {}: {e}", t.dev))?;
    let how = format!(
        "AF_XDP on {} queue 0 ({} XDP, {}), user-space TCP from {}, one worker",
        t.dev,
        match link.mode {
            AttachMode::Native => "native",
            AttachMode::Generic => "generic",
        },
        if zero_copy { "zero-copy" } else { "copy mode" },
        t.src_ip
    );
    let port = FramePort::new(xsk);
    Ok((
        Attached {
            link,
            port,
            _prog: prog,
        },
        mac,
        how,
    ))
}

/// Checks what the xdp engine can carry before anything is attached.
fn check(plan: &Plan, nconns: usize) -> Result<(&XdpTarget, Ipv4Addr), String> {
    let t = plan.xdp.as_ref().ok_or("--engine xdp needs --dev")?;
    if plan.unix.is_some() {
        return Err("--engine xdp speaks TCP over its own stack, not a Unix socket".into());
    }
    let IpAddr::V4(server) = plan.addr.ip() else {
        return Err(format!("--engine xdp speaks IPv4 only, not {}", plan.addr));
    };
    if plan.tls.is_some() {
        return Err("--engine xdp speaks plain http:// only".into());
    }
    if plan.worker_cpus.len() != 1 {
        return Err("--engine xdp runs one worker (one socket on queue 0)".into());
    }
    if nconns > MAX_CONNS {
        return Err(format!(
            "--engine xdp carries at most {MAX_CONNS} connections (local ports {PORT_BASE}-65535)"
        ));
    }
    Ok((t, server))
}

pub(crate) fn run_worker(ctx: &mut Ctx<'_>, index: usize) -> Result<XdpStats, String> {
    let plan = ctx.plan;
    let nconns = plan.connections_of(index);
    let (target, server) = check(plan, nconns)?;
    let (attached, mac, how) = attach(target)?;
    let Attached { link, port, _prog } = attached;
    let core = Core::new(ctx, index, || ());
    let seed = now_ns() ^ u64::from(std::process::id()) << 32;
    let mut d = Driver {
        core,
        client: Client::new(
            mac,
            target.src_ip,
            server,
            plan.addr.port(),
            PORT_BASE,
            nconns as u32,
            seed,
        ),
        port: Some(port),
        timeouts: Timeouts::of(plan),
        faults: Faults::new(target),
        ctx,
    };
    d.main_loop();
    // Answers already in are not requests left unanswered: one last look,
    // nothing sent.
    let in_flight = crate::drive::in_flight(&d.core.conns);
    d.ctx.close(now_ns(), in_flight);
    d.receive(now_ns());
    d.ctx
        .left_unanswered(d.core.conns.iter().flat_map(|c| c.ex.sent_iter()));
    d.close_all();
    let detail = d.detail(&how);
    drop(link);
    Ok(XdpStats {
        stats: DriverStats {
            mode: "xdp",
            cq_overflow: 0,
            fixed_files: false,
            direct_sockets: false,
            batching: None,
        },
        detail,
    })
}

impl<'p> Transport<'p> for Driver<'_, 'p> {
    type Sock = ();
    fn ctx(&mut self) -> &mut Ctx<'p> {
        self.ctx
    }
    fn core(&self) -> &Core<()> {
        &self.core
    }
    fn split(&mut self) -> (&mut Core<()>, &mut Recorder) {
        (&mut self.core, &mut self.ctx.rec)
    }
    /// Queues the bytes in the stack; they leave at the end of the pass.
    fn transmit(&mut self, i: usize, n: usize, _now: u64) {
        let c = &self.core.conns[i];
        let bytes = c.ex.outgoing(&self.core.batch[..n * self.core.req_len]);
        if self.client.send(i as u32, bytes) {
            self.ctx.rec.add_bytes_sent(bytes.len() as u64);
        }
    }
    fn open(&mut self, i: usize, now: u64) {
        // Nothing more is sent once the quota is met or the loop has ended.
        if self.ctx.exhausted() || self.ctx.closing() {
            self.core.conns[i].state = State::Closed { until_ns: u64::MAX };
            return;
        }
        self.client.connect(i as u32);
        self.core.conns[i].state = State::Connecting { since_ns: now };
    }
    fn close(&mut self, i: usize) {
        self.client.abort(i as u32);
        let c = &mut self.core.conns[i];
        c.gen = next_gen(c.gen);
        c.state = State::Closed { until_ns: 0 };
        c.ex.reset();
    }
    // No TLS on this engine (refused by `check`).
    fn send_records(&mut self, _i: usize, _now: u64) {}
    /// HTTP/2 is refused before an xdp run starts.
    fn send_output(&mut self, _i: usize, _now: u64) {}
    fn sweep(&mut self, now: u64) {
        self.sweep_states(now, self.timeouts);
    }
}

impl Driver<'_, '_> {
    fn main_loop(&mut self) {
        let now = now_ns();
        self.ramp_up(now);
        let mut sweeper = Sweeper::new(now, self.timeouts.shortest_ns());
        let mut next_timer = now + TIMER_NS;
        loop {
            let now = now_ns();
            if !self.tick_common(now, &mut sweeper) {
                break;
            }
            if now >= next_timer {
                self.timers(now);
                next_timer = now + TIMER_NS;
            }
            self.ramp_up(now);
            self.tend(now);
            if self.finished() {
                break;
            }
            self.send_frames(now);
            if self.receive(now_ns()) > 0 {
                // Answers may have queued requests: out at once.
                self.send_frames(now_ns());
                continue;
            }
            let wake = self.wake_ns(sweeper.next_ns.min(next_timer));
            let held = self.faults.as_ref().is_some_and(|f| !f.rx_held.is_empty());
            let wait_ns = wake.saturating_sub(now_ns());
            if wait_ns >= 1_000_000 && !held {
                if let Some(port) = &self.port {
                    port.wait((wait_ns / 1_000_000).min(100) as i32);
                }
            }
        }
    }

    /// Hands every received frame to the stack and acts on what it says;
    /// returns how many frames there were.
    fn receive(&mut self, now: u64) -> u32 {
        let Some(mut port) = self.port.take() else {
            return 0;
        };
        let n = match self.faults.is_some() {
            false => port.rx_each(|frame| self.on_frame(frame, now)),
            true => {
                let held = self
                    .faults
                    .as_mut()
                    .map(|f| std::mem::take(&mut f.rx_held))
                    .unwrap_or_default();
                let n = port.rx_each(|frame| match self.faults.as_mut().map(Faults::fate) {
                    Some(Fate::Drop) => {}
                    Some(Fate::Hold) => {
                        if let Some(f) = self.faults.as_mut() {
                            f.rx_held.push(frame.to_vec());
                        }
                    }
                    _ => self.on_frame(frame, now),
                });
                // Held frames come after the ones that overtook them.
                for frame in &held {
                    self.on_frame(frame, now);
                }
                n + held.len() as u32
            }
        };
        self.port = Some(port);
        n
    }

    fn on_frame(&mut self, frame: &[u8], now: u64) {
        match self.client.receive(frame, now) {
            Event::None => {}
            Event::Connected(id) => self.connected(id as usize, now),
            Event::Data(id, bytes) => {
                let i = id as usize;
                if self.core.conns[i].state != State::Open {
                    return;
                }
                let gen = self.core.conns[i].gen;
                let timing = self.ctx.timing();
                let (_, fed) = self.core.conns[i]
                    .ex
                    .feed(bytes, now, &mut self.ctx.rec, timing);
                self.after_feed(i, fed, now);
                // A FIN that came with the data.
                if self.core.conns[i].gen == gen
                    && self.core.conns[i].state == State::Open
                    && matches!(self.client.state(id), Tcp::CloseWait | Tcp::Done)
                {
                    self.on_eof(i, now);
                }
            }
            Event::PeerClosed(id) => {
                if self.core.conns[id as usize].state == State::Open {
                    self.on_eof(id as usize, now);
                }
            }
            Event::Failed(id, why) => self.failed(id as usize, why, now),
        }
    }

    fn connected(&mut self, i: usize, now: u64) {
        if !matches!(self.core.conns[i].state, State::Connecting { .. }) {
            return;
        }
        self.ctx.rec.record_connect();
        self.established(i, now);
        self.ready(i, now);
    }

    /// The stack gave connection `i` up: the errno a kernel socket would
    /// have reported, counted as the other drivers count it.
    fn failed(&mut self, i: usize, why: Failure, now: u64) {
        let errno = match why {
            Failure::Refused => libc::ECONNREFUSED,
            Failure::Reset => libc::ECONNRESET,
            Failure::TimedOut => libc::ETIMEDOUT,
        };
        match self.core.conns[i].state {
            State::Connecting { .. } => self.connect_failed(i, errno, now),
            State::Open => {
                record_errno(&mut self.ctx.rec, Phase::Exchange, errno);
                self.replace(i, now, true);
            }
            // Handshaking: no TLS on this engine.
            State::Closed { .. } | State::Handshaking { .. } => {}
        }
    }

    fn timers(&mut self, now: u64) {
        for (id, why) in self.client.on_timer(now) {
            self.failed(id as usize, why, now);
        }
    }

    /// Writes every frame the stack owes into the socket's TX ring (as far
    /// as it has room) and publishes them.
    fn send_frames(&mut self, now: u64) {
        let Some(port) = self.port.as_mut() else {
            return;
        };
        let client = &mut self.client;
        match self.faults.as_mut() {
            None => while port.tx_one(|buf| client.transmit(buf, now)) {},
            Some(f) => {
                // Frames held in the last pass go out behind this pass's.
                let held = std::mem::take(&mut f.tx_held);
                loop {
                    let mut taken = false;
                    let sent = port.tx_one(|buf| {
                        let n = client.transmit(buf, now)?;
                        taken = true;
                        match f.fate() {
                            Fate::Pass => Some(n),
                            Fate::Drop => None,
                            Fate::Hold => {
                                f.tx_held.push(buf[..n].to_vec());
                                None
                            }
                        }
                    });
                    if !sent && !taken {
                        break;
                    }
                }
                for frame in held {
                    if !port.tx_one(|buf| {
                        buf[..frame.len()].copy_from_slice(&frame);
                        Some(frame.len())
                    }) {
                        break;
                    }
                }
            }
        }
        port.flush();
    }

    /// The run is over: FIN on every connection, a bounded wait for the
    /// server's, then a RST to whatever is still open, so the server holds
    /// nothing of this run.
    fn close_all(&mut self) {
        for i in 0..self.core.conns.len() {
            if self.client.state(i as u32) == Tcp::SynSent {
                self.client.abort(i as u32);
            } else {
                self.client.close(i as u32);
            }
        }
        let deadline = now_ns() + CLOSE_NS;
        let finished = |c: &Client| {
            (0..c.len() as u32).all(|i| matches!(c.state(i), Tcp::Closed | Tcp::Done | Tcp::Failed))
        };
        while !finished(&self.client) && now_ns() < deadline {
            let now = now_ns();
            self.send_frames(now);
            let client = &mut self.client;
            let got = self.port.as_mut().map_or(0, |p| {
                p.rx_each(|frame| {
                    let _ = client.receive(frame, now);
                })
            });
            let _ = self.client.on_timer(now);
            if got == 0 {
                if let Some(port) = &self.port {
                    port.wait(1);
                }
            }
        }
        for i in 0..self.core.conns.len() {
            self.client.abort(i as u32);
        }
        self.send_frames(now_ns());
    }

    /// The Engine line's account of the stack and the socket.
    fn detail(&self, how: &str) -> String {
        let Counters {
            retransmits,
            fast_retransmits,
            out_of_order,
            bad_checksums,
            ..
        } = self.client.counters;
        let mut s = format!(
            "{how}; TCP: {retransmits} timeout and {fast_retransmits} fast retransmissions, \
             {out_of_order} segments out of order"
        );
        if bad_checksums > 0 {
            s.push_str(&format!(", {bad_checksums} bad checksums"));
        }
        if let Some(f) = &self.faults {
            s.push_str(&format!(
                "; test faults: {} frames dropped, {} held back",
                f.dropped, f.held
            ));
        }
        if let Some(st) = self.port.as_ref().and_then(|p| p.statistics().ok()) {
            if st.rx_dropped + st.rx_ring_full > 0 {
                s.push_str(&format!(
                    "; AF_XDP receive drops: {} ({} for a full ring)",
                    st.rx_dropped, st.rx_ring_full
                ));
            }
        }
        s
    }
}
