//! The receive side: the XDP program on the interface and, in xsk mode, one
//! pinned thread per queue draining its AF_XDP socket.
//!
//! Hot loop: take up to a batch of RX descriptors; decode each frame,
//! record its sequence number in the flow tracker and its one-way latency
//! (send timestamp vs. `CLOCK_MONOTONIC` now, meaningful because sender and
//! receiver share the host clock); hand the buffers straight back on the
//! fill ring. When the ring is empty the thread sleeps in `poll()` so an
//! idle receiver costs no CPU.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::clock;
use crate::frame;
use crate::netdev::{self, LinkInfo, NetdevError};
use crate::program::{
    AttachMode, ProgramError, ProgramOptions, RxMode, XdpCounters, XdpLink, XdpProgram,
};
use crate::seq::{flow_key, SeqTracker};
use crate::xsk::{BindMode, XdpStatistics, XskConfig, XskError, XskSocket};

const FRAME_SIZE: u32 = 2048;
const FRAME_COUNT: u32 = 8192;
const RX_RING: u32 = 4096;
const FILL_RING: u32 = 8192;
const BATCH: u32 = 256;

/// What to receive and how.
#[derive(Debug, Clone)]
pub struct RxPlan {
    pub dev: String,
    /// Queues to bind (xsk mode); all of them should be listed, since a
    /// queue without a socket drops its xload frames.
    pub queues: Vec<u32>,
    /// CPU per queue (same order), `None` = unpinned.
    pub cpus: Vec<Option<usize>>,
    pub mode: RxMode,
    pub dst_port: u16,
    /// Test mode: the XDP program drops every Nth matched frame.
    pub drop_every: u32,
    pub bind_mode: BindMode,
    /// Attach in generic (skb) mode instead of trying native first.
    pub force_generic: bool,
    /// Verify IPv4 header and UDP checksums of every frame.
    pub verify_checksums: bool,
    /// Count each flow from the first number seen (a standalone receiver
    /// started after its sender), not from 0 (a receiver started first).
    pub from_first_seen: bool,
}

/// Live counters one worker publishes for the sender's loss search.
#[derive(Debug, Default)]
pub struct RxLive {
    /// Distinct frames delivered so far.
    pub delivered: AtomicU64,
    /// Frames read from the RX ring so far (any kind).
    pub frames: AtomicU64,
    /// Frames the kernel dropped at this socket (ring full, no fill buffer).
    pub dropped: AtomicU64,
}

/// One queue's receive result.
#[derive(Debug, Clone, serde::Serialize)]
pub struct RxQueueResult {
    pub queue: u32,
    pub cpu: Option<usize>,
    pub zero_copy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_copy_error: Option<String>,
    /// Frames read from the RX ring.
    pub frames: u64,
    /// Frames that were not xload frames.
    pub foreign: u64,
    pub checksum_errors: u64,
    pub wakeups: u64,
    pub cpu_ns: u64,
    /// Thread CPU time over the receiver's run time, percent of one CPU.
    pub thread_cpu_pct: f64,
    pub xdp_statistics: XdpStatistics,
    #[serde(skip)]
    pub tracker: SeqTracker,
    #[serde(skip)]
    pub latency_ns: Option<Histogram<u64>>,
    /// When the first and the last batch holding xload frames were read
    /// (CLOCK_MONOTONIC ns): the window the frames arrived in.
    #[serde(skip)]
    pub first_rx_ns: Option<u64>,
    #[serde(skip)]
    pub last_rx_ns: Option<u64>,
}

/// Why the receiver could not start.
#[derive(Debug, thiserror::Error)]
pub enum RxError {
    #[error(transparent)]
    Netdev(#[from] NetdevError),
    #[error("interface {0} is down (bring it up with: ip link set {0} up)")]
    Down(String),
    #[error("XDP program on {dev}: {source}")]
    Program {
        dev: String,
        #[source]
        source: ProgramError,
    },
    #[error("{dev} queue {queue}: {source}")]
    Socket {
        dev: String,
        queue: u32,
        #[source]
        source: XskError,
    },
    #[error("{dev} has {have} RX queues; queue {queue} does not exist")]
    NoQueue { dev: String, queue: u32, have: u32 },
    #[error("cannot pin to CPU {cpu}: {source}")]
    Pin {
        cpu: usize,
        #[source]
        source: io::Error,
    },
    #[error("cannot start thread: {0}")]
    Spawn(io::Error),
    #[error("a receive thread panicked")]
    Panicked,
}

/// A running receiver. Dropping it stops the workers and detaches the
/// program (so do process exit and Ctrl-C: the kernel drops the link
/// with its last fd).
pub struct Receiver {
    pub plan: RxPlan,
    pub link_before: LinkInfo,
    pub attach_mode: AttachMode,
    program: XdpProgram,
    link: Option<XdpLink>,
    workers: Vec<JoinHandle<RxQueueResult>>,
    live: Vec<Arc<RxLive>>,
    stop: Arc<AtomicBool>,
    start_ns: u64,
    cpu_before: clock::CpuSample,
}

/// What a stopped receiver measured.
#[derive(Debug)]
pub struct RxRun {
    pub plan: RxPlan,
    pub attach_mode: AttachMode,
    pub queues: Vec<RxQueueResult>,
    pub counters: XdpCounters,
    pub link_before: LinkInfo,
    pub link_after: LinkInfo,
    pub wall_ns: u64,
    pub cpu_usage: Vec<clock::CpuUsage>,
}

impl RxRun {
    /// Seconds from the first to the last batch of xload frames read by any
    /// queue (xsk mode; None in count mode, with fewer than two frames, or
    /// when they all came in one batch).
    pub fn rx_window_s(&self) -> Option<f64> {
        let first = self.queues.iter().filter_map(|q| q.first_rx_ns).min()?;
        let last = self.queues.iter().filter_map(|q| q.last_rx_ns).max()?;
        let frames: u64 = self.queues.iter().map(|q| q.tracker.delivered()).sum();
        (last > first && frames >= 2).then(|| (last - first) as f64 / 1e9)
    }
}

impl Receiver {
    /// Loads the program, binds one socket per queue (xsk mode), attaches
    /// the program on `plan.dev` (in the calling thread's network namespace)
    /// and starts the workers.
    pub fn start(plan: RxPlan) -> Result<Receiver, RxError> {
        let link_before = netdev::link_by_name(&plan.dev)?;
        if !link_before.is_up() {
            return Err(RxError::Down(plan.dev.clone()));
        }
        if plan.mode == RxMode::Xsk {
            for &q in &plan.queues {
                if q >= link_before.num_rx_queues {
                    return Err(RxError::NoQueue {
                        dev: plan.dev.clone(),
                        queue: q,
                        have: link_before.num_rx_queues,
                    });
                }
            }
        }
        let max_queues = plan.queues.iter().max().map_or(1, |m| m + 1);
        let prog_err = |source| RxError::Program {
            dev: plan.dev.clone(),
            source,
        };
        let program = XdpProgram::load(ProgramOptions {
            mode: plan.mode,
            dst_port: plan.dst_port,
            drop_every: plan.drop_every,
            max_queues: max_queues.max(link_before.num_rx_queues),
        })
        .map_err(prog_err)?;
        // Sockets are bound, filled and in the XSKMAP before the program is
        // attached: a frame it matches always finds its queue's socket. The
        // other order dropped what came in between, and a counter snapshot
        // taken once the sockets were up hid those drops (on a busy host,
        // up to 2,200 of 10,000 frames). The fresh map counts from attach.
        let socks = match plan.mode {
            RxMode::Xsk => open_sockets(&plan, link_before.ifindex, &program)?,
            RxMode::Count => Vec::new(),
        };
        let link = program
            .attach(link_before.ifindex, plan.force_generic)
            .map_err(prog_err)?;
        let stop = Arc::new(AtomicBool::new(false));
        let mut rx = Receiver {
            plan: plan.clone(),
            link_before: link_before.clone(),
            attach_mode: link.mode,
            program,
            link: Some(link),
            workers: Vec::new(),
            live: Vec::new(),
            stop: stop.clone(),
            start_ns: 0,
            cpu_before: clock::CpuSample::default(),
        };
        // Frames matched before a worker runs wait in its RX ring.
        for ((i, &q), sock) in plan.queues.iter().enumerate().zip(socks) {
            let cpu = plan.cpus.get(i).copied().flatten();
            let live = Arc::new(RxLive::default());
            rx.live.push(live.clone());
            let stop = stop.clone();
            let verify = plan.verify_checksums;
            let from_first = plan.from_first_seen;
            let h = thread::Builder::new()
                .name(format!("xload-rx{q}"))
                .spawn(move || rx_thread(sock, q, cpu, verify, from_first, &stop, &live))
                .map_err(RxError::Spawn)?;
            rx.workers.push(h);
        }
        rx.cpu_before = clock::sample_cpus();
        rx.start_ns = clock::monotonic_ns();
        Ok(rx)
    }

    /// Frames delivered so far: distinct xload frames read from the sockets
    /// (xsk mode) or matched and not test-dropped in XDP (count mode).
    pub fn delivered_now(&self) -> u64 {
        match self.plan.mode {
            RxMode::Xsk => self
                .live
                .iter()
                .map(|l| l.delivered.load(Ordering::Relaxed))
                .sum(),
            RxMode::Count => self
                .program
                .counters()
                .map(|c| c.matched_packets - c.injected_drops)
                .unwrap_or(0),
        }
    }

    /// Waits until every frame the XDP program matched is accounted for
    /// (read from a ring, test-dropped, without socket, or dropped at a
    /// socket) and, when `expected` says how many it should have matched by
    /// now (what was sent), it has matched that many; or nothing moved for
    /// `quiet`; or `max` passed. Without `expected`, frames still on a
    /// path with queueing (a shaper, a switch) were cut off and read as
    /// lost: the receiver stopped as soon as it had caught up.
    pub fn settle(&self, quiet: Duration, max: Duration, expected: Option<u64>) {
        let start = std::time::Instant::now();
        let mut last = (u64::MAX, u64::MAX);
        let mut since = std::time::Instant::now();
        while start.elapsed() < max {
            let c = self.counters_now();
            let done = match self.plan.mode {
                RxMode::Count => c.matched_packets,
                RxMode::Xsk => {
                    let read: u64 = self
                        .live
                        .iter()
                        .map(|l| {
                            l.frames.load(Ordering::Relaxed) + l.dropped.load(Ordering::Relaxed)
                        })
                        .sum();
                    read + c.injected_drops + c.redirect_failed
                }
            };
            let all_in = expected.is_none_or(|e| c.matched_packets >= e);
            if done >= c.matched_packets && self.plan.mode == RxMode::Xsk && all_in {
                return;
            }
            let now = (c.matched_packets, done);
            if now != last {
                last = now;
                since = std::time::Instant::now();
            } else if since.elapsed() >= quiet {
                return;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// XDP program counters since start (the program's fresh map has
    /// counted from its attach on).
    pub fn counters_now(&self) -> XdpCounters {
        self.program.counters().unwrap_or_default()
    }

    /// Reads the counters, stops the workers, then detaches the program.
    /// `link_after` is read in the calling thread's namespace: call this
    /// from the namespace the receiver was started in.
    pub fn finish(mut self) -> Result<RxRun, RxError> {
        let wall_ns = clock::monotonic_ns() - self.start_ns;
        // The program's counters and the device's are read at the end of
        // the window, before the sockets close: under traffic still flowing,
        // what the program can no longer redirect after that (redirect
        // failures) and what the device then drops belong to the teardown,
        // not to the path. The workers still drain what is in their rings.
        let counters = self.counters_now();
        let link_after = netdev::link_by_name(&self.plan.dev)?;
        self.stop.store(true, Ordering::Relaxed);
        let mut queues = Vec::new();
        let mut panicked = false;
        for h in self.workers.drain(..) {
            match h.join() {
                Ok(mut r) => {
                    r.thread_cpu_pct = r.cpu_ns as f64 * 100.0 / wall_ns.max(1) as f64;
                    queues.push(r)
                }
                Err(_) => panicked = true,
            }
        }
        // Count mode has no threads: its work is the XDP program in softirq
        // on whichever CPUs take the device's interrupts, so show them all.
        let cpus: Vec<usize> = match self.plan.mode {
            RxMode::Count => xload_sys::cpu::allowed_cpus().unwrap_or_default(),
            RxMode::Xsk => {
                let mut c: Vec<usize> = self.plan.cpus.iter().flatten().copied().collect();
                c.sort_unstable();
                c.dedup();
                c
            }
        };
        let cpu_usage = clock::cpu_usage(&self.cpu_before, &clock::sample_cpus(), &cpus);
        self.link.take();
        if panicked {
            return Err(RxError::Panicked);
        }
        Ok(RxRun {
            plan: self.plan.clone(),
            attach_mode: self.attach_mode,
            queues,
            counters,
            link_before: self.link_before.clone(),
            link_after,
            wall_ns,
            cpu_usage,
        })
    }
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.workers.drain(..) {
            let _ = h.join();
        }
    }
}

/// Binds one socket per queue of `plan`, in order (a failure surfaces
/// before anything runs), gives each every UMEM frame on its fill ring and
/// puts it in the program's XSKMAP.
fn open_sockets(
    plan: &RxPlan,
    ifindex: u32,
    program: &XdpProgram,
) -> Result<Vec<XskSocket>, RxError> {
    let mut socks = Vec::with_capacity(plan.queues.len());
    for &q in &plan.queues {
        let sock_err = |source| RxError::Socket {
            dev: plan.dev.clone(),
            queue: q,
            source,
        };
        let mut sock = XskSocket::open(XskConfig {
            ifindex,
            queue: q,
            frame_size: FRAME_SIZE,
            frame_count: FRAME_COUNT,
            rx_size: RX_RING,
            tx_size: 0,
            fill_size: FILL_RING,
            comp_size: 64,
            mode: plan.bind_mode,
        })
        .map_err(sock_err)?;
        // Every frame goes to the kernel before the program may redirect to
        // the socket: frames arriving at a receiver started under traffic
        // are not dropped for want of fill buffers in its first moments.
        let n = sock.fill.free(FRAME_COUNT).min(FRAME_COUNT);
        for i in 0..n {
            sock.fill.write(i, u64::from(i) * u64::from(FRAME_SIZE));
        }
        sock.fill.submit(n);
        program
            .register_socket(q, sock.fd())
            .map_err(|source| RxError::Program {
                dev: plan.dev.clone(),
                source,
            })?;
        socks.push(sock);
    }
    Ok(socks)
}

fn rx_thread(
    mut sock: XskSocket,
    queue: u32,
    cpu: Option<usize>,
    verify: bool,
    from_first_seen: bool,
    stop: &AtomicBool,
    live: &RxLive,
) -> RxQueueResult {
    let mut res = RxQueueResult {
        queue,
        cpu,
        zero_copy: sock.zero_copy,
        zero_copy_error: sock.zero_copy_error.clone(),
        frames: 0,
        foreign: 0,
        checksum_errors: 0,
        wakeups: 0,
        cpu_ns: 0,
        thread_cpu_pct: 0.0,
        xdp_statistics: XdpStatistics::default(),
        tracker: if from_first_seen {
            SeqTracker::from_first_seen()
        } else {
            SeqTracker::new()
        },
        latency_ns: Histogram::new_with_bounds(1, 3_600_000_000_000, 3).ok(),
        first_rx_ns: None,
        last_rx_ns: None,
    };
    if let Some(c) = cpu {
        // Best effort: a receiver that cannot pin still counts correctly.
        let _ = xload_sys::cpu::pin_current_thread(c);
    }
    let cpu_start = clock::thread_cpu_ns();
    // (The fill ring was filled before the socket went into the map.)
    let mut recycled: Vec<u64> = Vec::with_capacity(BATCH as usize);
    loop {
        let stopping = stop.load(Ordering::Relaxed);
        let Some(rx) = sock.rx.as_mut() else { break };
        let n = rx.ready(BATCH);
        if n == 0 {
            // Stop only with an empty ring: what arrived is counted.
            if stopping {
                break;
            }
            if sock.fill.needs_wakeup() {
                let _ = sock.kick_rx();
            }
            res.wakeups += 1;
            if let Ok(st) = sock.statistics() {
                live.dropped
                    .store(st.rx_dropped + st.rx_ring_full, Ordering::Relaxed);
            }
            let _ = sock.poll_rx(10);
            continue;
        }
        let now = clock::monotonic_ns();
        let delivered_before = res.tracker.delivered();
        recycled.clear();
        for i in 0..n {
            let Some(desc) = sock.rx.as_ref().and_then(|r| r.read(i)) else {
                break;
            };
            recycled.push(desc.addr);
            res.frames += 1;
            let Some(buf) = sock.umem.frame(desc.addr, desc.len as usize) else {
                res.foreign += 1;
                continue;
            };
            match frame::parse(buf, verify) {
                Ok(p) => {
                    if !p.checksums_ok {
                        res.checksum_errors += 1;
                        continue;
                    }
                    res.tracker.record(flow_key(p.run_tag, p.src_port), p.seq);
                    if let Some(h) = res.latency_ns.as_mut() {
                        h.saturating_record(now.saturating_sub(p.tx_ns).max(1));
                    }
                }
                Err(_) => res.foreign += 1,
            }
        }
        if let Some(rx) = sock.rx.as_mut() {
            rx.release(n);
        }
        // Hand the buffers back (aligned mode: the kernel masks the
        // headroom offset off the address).
        let mut put = 0;
        let free = sock.fill.free(recycled.len() as u32);
        for (i, &a) in recycled.iter().enumerate().take(free as usize) {
            sock.fill.write(i as u32, a - a % u64::from(FRAME_SIZE));
            put += 1;
        }
        sock.fill.submit(put);
        if res.tracker.delivered() > delivered_before {
            res.first_rx_ns.get_or_insert(now);
            res.last_rx_ns = Some(now);
        }
        live.delivered
            .store(res.tracker.delivered(), Ordering::Relaxed);
        live.frames.store(res.frames, Ordering::Relaxed);
    }
    res.cpu_ns = clock::thread_cpu_ns() - cpu_start;
    res.xdp_statistics = sock.statistics().unwrap_or_default();
    live.delivered
        .store(res.tracker.delivered(), Ordering::Relaxed);
    res
}
