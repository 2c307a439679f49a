//! The transmit side: one pinned thread per queue, each with its own AF_XDP
//! socket and UMEM, its flows' frame templates and its own token bucket.
//!
//! Hot loop, top to bottom: reap completions into the free-frame stack;
//! ask the bucket how many frames may go; take that many free frames, copy
//! each flow's template in and stamp sequence + timestamp (+ checksum);
//! publish them on the TX ring; kick the kernel with `sendto` when the ring
//! says it needs a wakeup (always, in copy mode: the kick *is* the send).
//! "Sent" means completed: the kernel handed the frame back on the
//! completion ring after the device took it.

use std::io;
use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;
use std::time::Duration;

use crate::clock;
use crate::frame::FrameTemplate;
use crate::rate::TokenBucket;
use crate::seq::{flow_key, SeqFault, SeqSource};
use crate::xsk::{BindMode, XdpDesc, XdpStatistics, XskConfig, XskError, XskSocket};

const FRAME_SIZE: u32 = 2048;
const FRAME_COUNT: u32 = 4096;
const TX_RING: u32 = 2048;
const COMP_RING: u32 = 4096;
/// Longest wait for the kernel to hand back in-flight frames at the end.
const DRAIN_NS: u64 = 500_000_000;

/// What one queue's thread sends.
#[derive(Debug, Clone)]
pub struct TxQueuePlan {
    pub queue: u32,
    /// CPU to pin the thread to.
    pub cpu: Option<usize>,
    /// One template per flow of this queue (frames rotate over them).
    pub flows: Vec<FrameTemplate>,
    /// Pacing for this thread; `None` = as fast as possible.
    pub rate_per_s: Option<f64>,
    /// Stop after this many frames (submitted) on this queue.
    pub max_frames: Option<u64>,
}

/// A whole transmit run.
#[derive(Debug, Clone)]
pub struct TxPlan {
    pub ifindex: u32,
    pub bind_mode: BindMode,
    pub queues: Vec<TxQueuePlan>,
    /// Frames per TX ring submission.
    pub batch: u32,
    pub fault: SeqFault,
    pub duration: Duration,
    /// Run tag written in every frame (identifies the flows' key space).
    pub run_tag: u16,
}

/// How far one flow went.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct FlowSent {
    /// `seq::flow_key(run_tag, src_port)`.
    pub key: u32,
    pub src_port: u16,
    /// Next sequence number the flow would have used.
    pub next_seq: u64,
}

/// Result of one queue's thread.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct TxQueueResult {
    pub queue: u32,
    pub cpu: Option<usize>,
    pub zero_copy: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub zero_copy_error: Option<String>,
    /// Frames put on the TX ring.
    pub submitted: u64,
    /// Frames completed by the kernel.
    pub sent: u64,
    /// `sendto` kicks.
    pub kicks: u64,
    /// Kicks that returned EAGAIN/EBUSY/ENOBUFS (device or completion
    /// backpressure; also the copy-mode per-call budget).
    pub kick_backpressure: u64,
    /// Other kick errors.
    pub kick_errors: u64,
    /// Loop turns with tokens available but no free frame or ring slot.
    pub starved: u64,
    /// Time spent waiting for the token bucket.
    pub rate_wait_ns: u64,
    /// Sending time: start of the send loop to its end (the drain of
    /// in-flight completions afterwards is not included).
    pub send_ns: u64,
    /// Whole time including that drain.
    pub wall_ns: u64,
    /// CPU time of the thread.
    pub cpu_ns: u64,
    pub xdp_statistics: XdpStatistics,
    #[serde(skip)]
    pub flows: Vec<FlowSent>,
    /// Fatal error that ended the thread early.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Why a transmit run could not start.
#[derive(Debug, thiserror::Error)]
pub enum TxError {
    #[error("queue {queue}: {source}")]
    Socket {
        queue: u32,
        #[source]
        source: XskError,
    },
    #[error("queue {queue}: cannot pin to CPU {cpu}: {source}")]
    Pin {
        queue: u32,
        cpu: usize,
        #[source]
        source: io::Error,
    },
    #[error("queue {0} has no flows")]
    NoFlows(u32),
    #[error("cannot start thread: {0}")]
    Spawn(io::Error),
    #[error("a transmit thread panicked")]
    Panicked,
}

const GO_WAIT: u8 = 0;
const GO_RUN: u8 = 1;
const GO_ABORT: u8 = 2;

/// Runs the plan: starts one thread per queue in the calling thread's
/// network namespace, waits until every socket is bound, sends until the
/// duration ends, `stop` is set or every queue reached `max_frames`, then
/// waits for completions.
pub fn run_tx(plan: &TxPlan, stop: &Arc<AtomicBool>) -> Result<Vec<TxQueueResult>, TxError> {
    for q in &plan.queues {
        if q.flows.is_empty() {
            return Err(TxError::NoFlows(q.queue));
        }
    }
    let go = Arc::new(AtomicU8::new(GO_WAIT));
    let (ready_tx, ready_rx) = mpsc::channel::<Result<(), TxError>>();
    let mut handles = Vec::new();
    for q in &plan.queues {
        let q = q.clone();
        let go = go.clone();
        let stop = stop.clone();
        let ready = ready_tx.clone();
        let p = plan.clone();
        let h = thread::Builder::new()
            .name(format!("xload-tx{}", q.queue))
            .spawn(move || tx_thread(&p, q, &go, &stop, ready))
            .map_err(TxError::Spawn)?;
        handles.push(h);
    }
    drop(ready_tx);
    let mut first_err = None;
    for _ in 0..handles.len() {
        match ready_rx.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(_) => {
                first_err.get_or_insert(TxError::Panicked);
            }
        }
    }
    go.store(
        if first_err.is_some() {
            GO_ABORT
        } else {
            GO_RUN
        },
        Ordering::Release,
    );
    let mut results = Vec::new();
    for h in handles {
        match h.join() {
            Ok(r) => results.push(r),
            Err(_) => {
                first_err.get_or_insert(TxError::Panicked);
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(results),
    }
}

fn tx_thread(
    plan: &TxPlan,
    q: TxQueuePlan,
    go: &AtomicU8,
    stop: &AtomicBool,
    ready: mpsc::Sender<Result<(), TxError>>,
) -> TxQueueResult {
    let mut res = TxQueueResult {
        queue: q.queue,
        cpu: q.cpu,
        ..Default::default()
    };
    if let Some(cpu) = q.cpu {
        if let Err(source) = xload_sys::cpu::pin_current_thread(cpu) {
            let _ = ready.send(Err(TxError::Pin {
                queue: q.queue,
                cpu,
                source,
            }));
            return res;
        }
    }
    clock::tighten_timer_slack();
    let sock = XskSocket::open(XskConfig {
        ifindex: plan.ifindex,
        queue: q.queue,
        frame_size: FRAME_SIZE,
        frame_count: FRAME_COUNT,
        rx_size: 0,
        tx_size: TX_RING,
        fill_size: 64,
        comp_size: COMP_RING,
        mode: plan.bind_mode,
    });
    let mut sock = match sock {
        Ok(s) => s,
        Err(source) => {
            let _ = ready.send(Err(TxError::Socket {
                queue: q.queue,
                source,
            }));
            return res;
        }
    };
    res.zero_copy = sock.zero_copy;
    res.zero_copy_error = sock.zero_copy_error.clone();
    let _ = ready.send(Ok(()));
    loop {
        match go.load(Ordering::Acquire) {
            GO_WAIT => thread::sleep(Duration::from_micros(200)),
            GO_RUN => break,
            _ => return res,
        }
    }
    send_loop(plan, &q, &mut sock, stop, &mut res);
    res.xdp_statistics = sock.statistics().unwrap_or_default();
    res
}

fn send_loop(
    plan: &TxPlan,
    q: &TxQueuePlan,
    sock: &mut XskSocket,
    stop: &AtomicBool,
    res: &mut TxQueueResult,
) {
    let batch = plan.batch.clamp(1, TX_RING / 2);
    let frame_len = q.flows[0].len();
    let mut free: Vec<u64> = (0..u64::from(FRAME_COUNT))
        .rev()
        .map(|i| i * u64::from(FRAME_SIZE))
        .collect();
    let mut seqs: Vec<SeqSource> = q.flows.iter().map(|_| SeqSource::new(plan.fault)).collect();
    let mut flow = 0usize;
    let max_frames = q.max_frames.unwrap_or(u64::MAX);
    let cpu_start = clock::thread_cpu_ns();
    let start = clock::monotonic_ns();
    let deadline = start.saturating_add(plan.duration.as_nanos() as u64);
    let mut bucket = q.rate_per_s.map(|r| TokenBucket::new(r, batch, start));
    let mut now = start;

    loop {
        reap(sock, &mut free, res);
        if stop.load(Ordering::Relaxed) || now >= deadline || res.submitted >= max_frames {
            break;
        }
        let mut want = batch.min((max_frames - res.submitted).min(u64::from(batch)) as u32);
        if let Some(b) = bucket.as_mut() {
            let got = b.take(now, want);
            if got == 0 {
                let wait = b.wait_ns(now, want).min(deadline.saturating_sub(now));
                let t0 = clock::monotonic_ns();
                // Long waits sleep; short ones yield (a sleep that wakes
                // late under load would cost tokens the capped bucket
                // cannot give back).
                if wait > 200_000 {
                    thread::sleep(Duration::from_nanos(wait - 50_000));
                } else {
                    thread::yield_now();
                }
                now = clock::monotonic_ns();
                res.rate_wait_ns += now - t0;
                continue;
            }
            want = got;
        }
        let Some(tx) = sock.tx.as_mut() else { return };
        let n = want.min(free.len() as u32).min(tx.free(want));
        if n < want {
            res.starved += 1;
        }
        if n > 0 {
            let tx_ns = now;
            for i in 0..n {
                let Some(addr) = free.pop() else { break };
                let template = &q.flows[flow];
                let seq = seqs[flow].next_seq();
                flow += 1;
                if flow == q.flows.len() {
                    flow = 0;
                }
                if let Some(buf) = sock.umem.frame_mut(addr, frame_len) {
                    template.write(buf, seq, tx_ns);
                }
                if let Some(tx) = sock.tx.as_mut() {
                    tx.write(
                        i,
                        XdpDesc {
                            addr,
                            len: frame_len as u32,
                            options: 0,
                        },
                    );
                }
            }
            if let Some(tx) = sock.tx.as_mut() {
                tx.submit(n);
            }
            res.submitted += u64::from(n);
        }
        if let Some(b) = bucket.as_mut() {
            // Tokens taken for frames that found no free slot are returned.
            b.refund(want - n);
        }
        kick(sock, res);
        if res.error.is_some() {
            break;
        }
        now = clock::monotonic_ns();
    }

    res.send_ns = clock::monotonic_ns() - start;
    // Drain: frames still on the TX ring or in flight come back on the
    // completion ring; copy mode needs kicks to send what is on the ring.
    let drain_deadline = clock::monotonic_ns() + DRAIN_NS;
    while res.sent < res.submitted && clock::monotonic_ns() < drain_deadline {
        kick(sock, res);
        reap(sock, &mut free, res);
        if res.sent < res.submitted {
            thread::sleep(Duration::from_micros(50));
        }
    }
    res.wall_ns = clock::monotonic_ns() - start;
    res.cpu_ns = clock::thread_cpu_ns() - cpu_start;
    res.flows = q
        .flows
        .iter()
        .zip(&seqs)
        .map(|(t, s)| {
            let src_port = src_port_of(t);
            FlowSent {
                key: flow_key(plan.run_tag, src_port),
                src_port,
                next_seq: s.next,
            }
        })
        .collect();
}

/// UDP source port of a template (bytes 0-1 of the UDP header).
fn src_port_of(t: &FrameTemplate) -> u16 {
    let b = t.bytes();
    let udp = if u16::from_be_bytes([b[12], b[13]]) == 0x86dd {
        14 + 40
    } else {
        14 + 20
    };
    u16::from_be_bytes([b[udp], b[udp + 1]])
}

#[inline]
fn reap(sock: &mut XskSocket, free: &mut Vec<u64>, res: &mut TxQueueResult) {
    let n = sock.comp.ready(COMP_RING);
    if n == 0 {
        return;
    }
    for i in 0..n {
        if let Some(addr) = sock.comp.read(i) {
            free.push(addr);
        }
    }
    sock.comp.release(n);
    res.sent += u64::from(n);
}

#[inline]
fn kick(sock: &mut XskSocket, res: &mut TxQueueResult) {
    let needs = match sock.tx.as_ref() {
        Some(tx) => tx.needs_wakeup() && tx.outstanding() > 0,
        None => false,
    };
    if !needs {
        return;
    }
    res.kicks += 1;
    if let Err(e) = sock.kick_tx() {
        match e.raw_os_error() {
            Some(libc::EAGAIN) | Some(libc::EBUSY) | Some(libc::ENOBUFS) => {
                res.kick_backpressure += 1
            }
            Some(libc::ENETDOWN) | Some(libc::ENXIO) => {
                res.kick_errors += 1;
                res.error.get_or_insert_with(|| format!("sendto: {e}"));
            }
            _ => res.kick_errors += 1,
        }
    }
}
