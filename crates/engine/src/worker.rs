//! Spawning the per-core workers and collecting their results: one pinned
//! thread per CPU, each with its own [`Ctx`] and driver loop; at the end,
//! their recorders merged and the run's measured window.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use xload_stats::Recorder;

use crate::clock::now_ns;
use crate::ctx::{Ctx, Measured, Tick, Window};
use crate::error::Error;
use crate::plan::{EngineChoice, EngineKind, Plan};
use crate::{epoll, pin, uring, xdp};

/// What one worker did, besides its recorder.
#[derive(Clone, Debug)]
pub struct WorkerInfo {
    pub index: usize,
    pub cpu: Option<usize>,
    pub tid: i32,
    pub engine: EngineKind,
    /// io_uring setup mode, or "epoll".
    pub mode: &'static str,
    /// Completions the kernel could not post in the CQ ring at once.
    pub cq_overflow: u64,
    /// io_uring: sockets were named by their slot in a registered file table.
    pub fixed_files: bool,
    /// io_uring: connections were set up and closed in the ring.
    pub direct_sockets: bool,
    /// Open loop: intended sends dropped because the queue was full.
    pub dropped: u64,
    /// A failure that stopped this worker early, if any.
    pub error: Option<String>,
    /// `--engine auto`: why this worker runs on epoll although io_uring was
    /// chosen (its ring could not be set up).
    pub fallback: Option<String>,
    /// io_uring closed loop with 16 connections or more (and multishot ring
    /// timeouts, Linux 6.4+): what its waits brought, warm-up included.
    pub batching: Option<xload_stats::Batching>,
    /// xdp: the socket, the program and the stack's counters.
    pub detail: Option<String>,
}

/// The merged result of a run.
pub struct Outcome {
    pub recorder: Recorder,
    pub engine: EngineKind,
    pub engine_reason: String,
    pub workers: Vec<WorkerInfo>,
    /// Length of the measured window (ends early on Ctrl-C or `-n`).
    pub measured: Duration,
    /// When the measured window began, CLOCK_MONOTONIC ns: the earliest
    /// worker's (an open loop's each open at their first connection).
    pub window_start_ns: u64,
    /// The run was stopped by the caller's stop flag.
    pub interrupted: bool,
}

/// Decides which driver runs, and why. For `Auto`, io_uring is tried for real:
/// a ring with a provided buffer ring and a multishot receive on a socket pair.
pub fn probe_engine(choice: EngineChoice) -> Result<(EngineKind, String), Error> {
    match choice {
        EngineChoice::Epoll => Ok((EngineKind::Epoll, "chosen with --engine epoll".into())),
        // What it runs on is known once its worker has attached.
        EngineChoice::Xdp => Ok((EngineKind::Xdp, String::new())),
        EngineChoice::Uring => uring::probe()
            .map(|mode| {
                (
                    EngineKind::Uring,
                    format!("{mode}, multishot recv, provided buffer ring"),
                )
            })
            .map_err(Error::UringUnavailable),
        EngineChoice::Auto => match uring::probe() {
            Ok(mode) => Ok((
                EngineKind::Uring,
                format!("{mode}, multishot recv, provided buffer ring"),
            )),
            Err(why) => Ok((EngineKind::Epoll, format!("io_uring unavailable: {why}"))),
        },
    }
}

/// Runs the plan: one worker per entry of `plan.worker_cpus`, until the window
/// ends, the quota is met or `stop` is set. Progress ticks go to `ticks`.
pub fn run(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    ticks: Option<Sender<Tick>>,
) -> Result<Outcome, Error> {
    run_observed(plan, stop, ticks, || {}, || {})
}

/// As [`run`], calling `at_start` once every worker thread exists (an
/// observer can find them in /proc/self/task from then on) and `at_end` once
/// every worker has finished its loop but before the worker threads exit: an
/// observer can still read their CPU times at the end of the window.
pub fn run_observed(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    ticks: Option<Sender<Tick>>,
    at_start: impl FnOnce(),
    at_end: impl FnOnce(),
) -> Result<Outcome, Error> {
    let gate = Arc::new(Gate::default());
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (engine, engine_reason) = probe_engine(plan.engine)?;
    let window = Window::of(plan, now_ns());
    let plan = Arc::new(plan.clone());
    let mut handles = Vec::new();
    for (index, &cpu) in plan.worker_cpus.iter().enumerate() {
        let worker = Worker {
            index,
            cpu,
            engine,
            window,
            plan: Arc::clone(&plan),
            stop: Arc::clone(&stop),
            ticks: ticks.clone(),
            gate: Arc::clone(&gate),
            done: done_tx.clone(),
        };
        let h = std::thread::Builder::new()
            .name(format!("xload-w{index}"))
            .spawn(move || worker.run())
            .map_err(Error::Spawn)?;
        handles.push(h);
    }
    at_start();
    drop(done_tx);
    // Every worker reports done (or died: its sender is dropped with it).
    for _ in 0..handles.len() {
        if done_rx.recv().is_err() {
            break;
        }
    }
    at_end();
    gate.open();
    let (recorder, workers, longest, first_ns) = collect(handles)?;
    let mut engine_reason = engine_reason;
    let mut engine = engine;
    for w in &workers {
        if let Some(why) = &w.fallback {
            engine_reason.push_str(&format!("; worker {} runs on epoll: {why}", w.index));
        }
    }
    if workers.iter().all(|w| w.fallback.is_some()) {
        engine = EngineKind::Epoll;
    }
    if workers.iter().any(|w| w.engine == EngineKind::Uring) {
        let on_uring = workers.iter().filter(|w| w.engine == EngineKind::Uring);
        engine_reason.push_str(if on_uring.clone().all(|w| w.fixed_files) {
            ", registered sockets"
        } else {
            ", socket descriptors (no registered file table)"
        });
        if on_uring.clone().all(|w| w.direct_sockets) {
            engine_reason.push_str(", direct sockets");
        }
    }
    if engine == EngineKind::Xdp {
        // No fallback: a socket or program that cannot be set up fails the run.
        if let Some(e) = workers.iter().find_map(|w| w.error.clone()) {
            return Err(Error::Xdp(e));
        }
        engine_reason = workers.iter().filter_map(|w| w.detail.clone()).collect();
    }
    let interrupted = stop.load(Ordering::Relaxed);
    Ok(Outcome {
        recorder,
        engine,
        engine_reason,
        workers,
        measured: Duration::from_nanos(longest),
        window_start_ns: first_ns.unwrap_or(window.measure_ns),
        interrupted,
    })
}

/// Keeps finished workers alive (and visible in /proc) until the observer
/// has looked at them.
#[derive(Default)]
struct Gate {
    open: Mutex<bool>,
    cv: Condvar,
}

impl Gate {
    fn open(&self) {
        *self.open.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.cv.notify_all();
    }

    fn wait(&self) {
        let mut go = self.open.lock().unwrap_or_else(|e| e.into_inner());
        while !*go {
            go = self.cv.wait(go).unwrap_or_else(|e| e.into_inner());
        }
    }
}

/// One worker thread's part of the run.
struct Worker {
    index: usize,
    cpu: Option<usize>,
    engine: EngineKind,
    window: Window,
    plan: Arc<Plan>,
    stop: Arc<AtomicBool>,
    ticks: Option<Sender<Tick>>,
    gate: Arc<Gate>,
    /// Sends once the loop has ended.
    done: std::sync::mpsc::Sender<()>,
}

impl Worker {
    /// The thread's body: pins itself, runs its driver until the window
    /// ends, then waits at the gate.
    fn run(self) -> (WorkerInfo, Measured) {
        let index = self.index;
        let mut info = WorkerInfo {
            index,
            cpu: self.cpu,
            tid: pin::gettid(),
            engine: self.engine,
            mode: "epoll",
            cq_overflow: 0,
            fixed_files: false,
            direct_sockets: false,
            dropped: 0,
            error: None,
            fallback: None,
            batching: None,
            detail: None,
        };
        if let Some(c) = self.cpu {
            if let Err(e) = pin::pin_current_thread(c) {
                info.error = Some(format!("cannot pin worker {index} to cpu {c}: {e}"));
            }
        }
        let mut ctx = Ctx::new(&self.plan, &self.stop, index, self.ticks, self.window);
        let res = match self.engine {
            EngineKind::Uring => match uring::run_worker(&mut ctx, index) {
                // A ring this worker could not set up (the probe's small
                // one could): with `--engine auto`, epoll.
                Err(why) if self.plan.engine == EngineChoice::Auto => {
                    info.engine = EngineKind::Epoll;
                    info.fallback = Some(why);
                    epoll::run_worker(&mut ctx, index)
                }
                r => r,
            },
            EngineKind::Epoll => epoll::run_worker(&mut ctx, index),
            EngineKind::Xdp => xdp::run_worker(&mut ctx, index).map(|x| {
                info.detail = Some(x.detail);
                x.stats
            }),
        };
        match res {
            Ok(stats) => {
                info.mode = stats.mode;
                info.cq_overflow = stats.cq_overflow;
                info.fixed_files = stats.fixed_files;
                info.direct_sockets = stats.direct_sockets;
                info.batching = stats.batching;
            }
            Err(e) => info.error = Some(e),
        }
        ctx.finish(now_ns());
        info.dropped = ctx.dropped();
        ctx.close_ticks();
        // Stay alive (and visible in /proc) until the observer has looked.
        let _ = self.done.send(());
        drop(self.done);
        self.gate.wait();
        (info, ctx.into_measured())
    }
}

/// Joins the workers and merges what they measured: the recorder (with the
/// requests the window closed on, against the run's answers), each
/// worker's info, the run's window length in ns and when the earliest
/// worker's window opened (None: no worker measured).
fn collect(
    handles: Vec<JoinHandle<(WorkerInfo, Measured)>>,
) -> Result<(Recorder, Vec<WorkerInfo>, u64, Option<u64>), Error> {
    let mut recorder: Option<Recorder> = None;
    let mut workers = Vec::new();
    // The run's window: the longest of its workers'. They all open at the
    // end of the warm-up, except an open loop's, which each open at their
    // first connection and last as long: their union would be longer than
    // any and understate the rate.
    let mut longest = 0u64;
    let mut first_ns: Option<u64> = None;
    let mut unanswered = Vec::new();
    let mut answered_at_close = 0;
    for h in handles {
        let (info, m) = h.join().map_err(|_| Error::Panicked)?;
        unanswered.extend(m.unanswered);
        answered_at_close += m.answered_at_close;
        match recorder.as_mut() {
            Some(r) => r.merge(&m.rec),
            None => recorder = Some(m.rec),
        }
        // A worker stopped before its window opened measured nothing: its
        // (empty) window does not stretch the run's.
        if m.to_ns > m.from_ns {
            longest = longest.max(m.to_ns - m.from_ns);
            first_ns = Some(first_ns.map_or(m.from_ns, |f| f.min(m.from_ns)));
        }
        workers.push(info);
    }
    let mut recorder = recorder.ok_or(Error::NoWorkers)?;
    // Against the run's answers, all workers merged.
    let censor = recorder.unanswered_censor();
    for (age, since_sent) in unanswered {
        recorder.record_unanswered(&censor, age, since_sent);
    }
    recorder.record_answered_at_close(answered_at_close);
    Ok((recorder, workers, longest, first_ns))
}
