//! Spawning the per-core workers, the state every driver shares (time window,
//! quota, pacing, progress ticks), and collecting the results.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::Duration;

use xload_stats::{Interval, Recorder};

use crate::clock::{now_ns, ns_to_us};
use crate::conn::{Sent, Timing};
use crate::plan::{EngineChoice, EngineKind, Plan};
use crate::sched::Schedule;
use crate::{epoll, pin, uring};

/// One worker's counters for one tick of the measured window.
pub struct Tick {
    pub worker: usize,
    /// Tick number within the measured window, from 0.
    pub seq: u64,
    pub interval: Interval,
    /// How long the interval lasted, ns: the tick, or less for the last one
    /// of a window that ended between ticks (`-d 2500ms`, `-n`, Ctrl-C).
    pub len_ns: u64,
}

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
    /// Open loop: intended sends dropped because the queue was full.
    pub dropped: u64,
    /// A failure that stopped this worker early, if any.
    pub error: Option<String>,
    /// io_uring closed loop with 16 connections or more (and multishot ring
    /// timeouts, Linux 6.4+): what its waits brought, warm-up included.
    pub batching: Option<xload_stats::Batching>,
}

/// The merged result of a run.
pub struct Outcome {
    pub recorder: Recorder,
    pub engine: EngineKind,
    pub engine_reason: String,
    pub workers: Vec<WorkerInfo>,
    /// Length of the measured window (ends early on Ctrl-C or `-n`).
    pub measured: Duration,
    /// The run was stopped by the caller's stop flag.
    pub interrupted: bool,
}

/// Decides which driver runs, and why. For `Auto`, io_uring is tried for real:
/// a ring with a provided buffer ring and a multishot receive on a socket pair.
pub fn probe_engine(choice: EngineChoice) -> Result<(EngineKind, String), String> {
    match choice {
        EngineChoice::Epoll => Ok((EngineKind::Epoll, "chosen with --engine epoll".into())),
        EngineChoice::Uring => uring::probe().map(|mode| {
            (
                EngineKind::Uring,
                format!("{mode}, multishot recv, provided buffer ring"),
            )
        }),
        EngineChoice::Auto => match uring::probe() {
            Ok(mode) => Ok((
                EngineKind::Uring,
                format!("{mode}, multishot recv, provided buffer ring"),
            )),
            Err(why) => Ok((
                EngineKind::Epoll,
                format!("epoll: io_uring unavailable: {why}"),
            )),
        },
    }
}

/// Why an open-loop send left late (see [`Ctx::late_cause`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Late {
    /// This loop was behind.
    Own,
    /// Every connection had a request in flight.
    Waiting,
    /// Behind the backlog of such a wait, drained at the catch-up limit.
    CatchUp,
}

/// State every driver shares: the time window, the quota, pacing and ticks.
pub(crate) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub rec: Recorder,
    stop: &'a AtomicBool,
    measure_ns: u64,
    end_ns: u64,
    pub measuring: bool,
    measured_from_ns: u64,
    measured_to_ns: u64,
    next_tick_ns: u64,
    tick_ns: u64,
    tick_seq: u64,
    index: usize,
    ticks: Option<Sender<Tick>>,
    /// Requests this worker may still send in the measured window (None:
    /// unlimited). The warm-up sends without using it.
    quota: Option<u64>,
    /// Open loop: the schedule has started (a connection was ready).
    sched_started: bool,
    /// Open loop: since when due sends have waited with every connection
    /// busy (None: a connection was free when last looked).
    no_connection_since: Option<u64>,
    /// Open loop: since when, after such a wait, a connection is free and
    /// the backlog waits for the catch-up limit (None: not catching up).
    catch_up_since: Option<u64>,
    /// The measured window just opened: the quota is yet to be set from
    /// what the warm-up left in flight ([`Ctx::open_window_quota`]).
    window_opened: bool,
    pub sched: Option<Schedule>,
    pub open_loop: bool,
    /// Requests still in flight when the driver's loop ended (filled once,
    /// at the end, by [`Ctx::left_unanswered`]).
    left: Vec<Sent>,
    /// The ages of what the window closed on, µs: (from the intended send
    /// in open loop, else from the send; from the send, None if never sent).
    unanswered: Vec<(u64, Option<u64>)>,
    /// When the driver's loop ended (the window's end after Ctrl-C; its
    /// teardown, which can take hundreds of milliseconds, comes after).
    /// Set, the loop's last look is on: nothing more is sent.
    stopped_ns: Option<u64>,
    /// The window's recorder, set aside during the last look (what it
    /// reads is not counted: the window has closed).
    window_rec: Option<Recorder>,
}

impl<'a> Ctx<'a> {
    /// Whether the loop goes on at `now`: handles stop, end, the start of the
    /// measured window and progress ticks.
    pub fn on_time(&mut self, now: u64) -> bool {
        if self.stop.load(Ordering::Relaxed) || now >= self.end_ns {
            return false;
        }
        if !self.measuring && now >= self.measure_ns {
            self.rec.reset();
            self.measuring = true;
            self.window_opened = true;
            // The window is [measure_ns, end_ns] even if this loop noticed late.
            self.measured_from_ns = self.measure_ns;
            self.next_tick_ns = self.measure_ns + self.tick_ns;
            if let Some(s) = self.sched.as_mut() {
                // Sends due before the window belong to the warm-up; one due
                // at its first instant is the window's.
                s.advance(self.measure_ns.saturating_sub(1));
                s.start_window();
            }
        }
        if self.measuring && now >= self.next_tick_ns {
            self.tick();
        }
        // Once -n is used up nothing more is intended: no queue to grow
        // (and to count as dropped) while the last answers come back.
        let exhausted = self.exhausted();
        if let Some(s) = self.sched.as_mut().filter(|_| !exhausted) {
            s.advance(now);
        }
        true
    }

    /// How responses are timed.
    #[inline]
    pub fn timing(&self) -> Timing {
        if self.open_loop {
            Timing::Open
        } else {
            Timing::Closed
        }
    }

    /// Publishes the counters of the tick that just ended.
    fn tick(&mut self) {
        self.publish(self.tick_ns);
    }

    /// Publishes the interval since the last tick, `len_ns` long.
    fn publish(&mut self, len_ns: u64) {
        self.next_tick_ns += self.tick_ns;
        let interval = self.rec.take_interval();
        if let Some(tx) = &self.ticks {
            let _ = tx.send(Tick {
                worker: self.index,
                seq: self.tick_seq,
                interval,
                len_ns,
            });
        }
        self.tick_seq += 1;
    }

    /// The next moment the loop must wake without I/O.
    pub fn wake_ns(&self) -> u64 {
        let mut t = self.end_ns;
        if self.measuring {
            t = t.min(self.next_tick_ns);
        } else {
            t = t.min(self.measure_ns);
        }
        if let Some(s) = &self.sched {
            if self.quota != Some(0) {
                t = t.min(s.wake_ns());
            }
        }
        t
    }

    /// Once, when the measured window has opened: the window's quota is the
    /// worker's share of `-n` less the warm-up's requests still in flight
    /// (`in_flight`), which will be answered, and counted, in the window.
    pub fn open_window_quota(&mut self, in_flight: u64) {
        self.window_opened = false;
        if let Some(total) = self.plan.quota_of(self.index) {
            self.quota = Some(total.saturating_sub(in_flight));
        }
    }

    /// Open loop: a connection is ready to send. The first time, the
    /// schedule starts here rather than at the run's start (thread, ring and
    /// connection setup take milliseconds: sends intended then could only
    /// leave late), and a measured window already open starts here too
    /// (its rate is over the time it could send).
    #[inline]
    pub fn connection_ready(&mut self, now: u64) {
        // A first connection that completes after the loop ended changes
        // no window.
        if self.sched_started || self.closing() {
            return;
        }
        self.sched_started = true;
        if let Some(s) = self.sched.as_mut() {
            s.rebase(now);
            if self.measuring {
                // The window is as long as asked from here: it ends that
                // much later (a 1 s window measured 0.990-0.996 s and
                // intended fewer than rate × duration sends), and its
                // seconds count from here.
                // A first connection that took longer than a tick (a
                // server slow to accept) does not stretch the run: the
                // window then starts late and is that much shorter.
                s.start_window();
                let shift = now.saturating_sub(self.measured_from_ns);
                self.measured_from_ns = self.measured_from_ns.max(now);
                if self.tick_seq == 0 && shift < self.tick_ns {
                    if self.end_ns != u64::MAX {
                        self.end_ns = self.end_ns.saturating_add(shift);
                    }
                    self.next_tick_ns = self.measured_from_ns + self.tick_ns;
                }
            }
        }
    }

    /// Open loop: due sends wait and no connection is free.
    #[inline]
    pub fn no_free_connection(&mut self, now: u64) {
        if self.sched.as_ref().is_some_and(|s| s.has_queued()) {
            if self.no_connection_since.is_none() {
                self.no_connection_since = Some(now);
            }
            // Busy again: what comes due now waits for a connection.
            self.catch_up_since = None;
        }
    }

    /// Open loop: a connection is free and nothing may leave on it now.
    /// Once no send waits (caught up), the wait for connections is over;
    /// while the backlog of such a wait drains at the catch-up limit,
    /// sends intended from now on wait behind it.
    #[inline]
    pub fn free_connection(&mut self, now: u64) {
        if !self.sched.as_ref().is_some_and(|s| s.has_queued()) {
            self.no_connection_since = None;
            self.catch_up_since = None;
        } else if self.no_connection_since.is_some() && self.catch_up_since.is_none() {
            self.catch_up_since = Some(now);
        }
    }

    /// Open loop: why a send intended at `intended` left more than
    /// `late_ns` late. It waited for a connection if every connection was
    /// already busy before it became late; if it was intended once one was
    /// free again, it waited behind that wait's backlog for the catch-up
    /// limit; else this loop itself was behind.
    #[inline]
    pub fn late_cause(&self, intended: u64, late_ns: u64) -> Late {
        match self.no_connection_since {
            Some(_) if self.catch_up_since.is_some_and(|c| intended >= c) => Late::CatchUp,
            Some(t) if t <= intended.saturating_add(late_ns) => Late::Waiting,
            _ => Late::Own,
        }
    }

    /// The measured window has opened and its quota is not set yet.
    #[inline]
    pub fn window_opening(&self) -> bool {
        self.window_opened
    }

    /// How many of `want` requests may be sent now (closed loop): all of
    /// them during the warm-up, else what the quota allows.
    #[inline]
    pub fn allow(&mut self, want: usize) -> usize {
        if self.closing() {
            return 0;
        }
        if !self.measuring {
            return want;
        }
        match self.quota.as_mut() {
            None => want,
            Some(q) => {
                let n = (*q).min(want as u64) as usize;
                *q -= n as u64;
                n
            }
        }
    }

    /// Gives back quota for `n` requests that were sent but never answered nor
    /// counted as failed (their connection ended): they will be sent again.
    pub fn refund(&mut self, n: usize) {
        if !self.measuring {
            return;
        }
        if let Some(q) = self.quota.as_mut() {
            *q += n as u64;
        }
    }

    /// Nothing more will be sent (quota used up).
    pub fn exhausted(&self) -> bool {
        self.quota == Some(0)
    }

    /// Open loop: the intended time of a send allowed now, if any.
    #[inline]
    pub fn take_scheduled(&mut self) -> Option<u64> {
        if self.exhausted() || self.closing() {
            return None;
        }
        let t = self.sched.as_mut()?.take()?;
        if let Some(q) = self.quota.as_mut().filter(|_| self.measuring) {
            *q -= 1;
        }
        Some(t)
    }

    /// The driver's loop has ended at `now`: its last look may read answers
    /// that already arrived (so that they are not taken for requests left
    /// unanswered), but nothing more is sent and nothing it reads counts.
    pub fn close(&mut self, now: u64) {
        self.stopped_ns = Some(now);
        self.window_rec = Some(std::mem::take(&mut self.rec));
    }

    /// The loop has ended ([`Ctx::close`]): no connection is opened.
    #[inline]
    pub fn closing(&self) -> bool {
        self.stopped_ns.is_some()
    }

    /// The last look is over: these requests are left unanswered. The
    /// window's recorder is back.
    pub fn left_unanswered(&mut self, sent: impl Iterator<Item = Sent>) {
        if let Some(rec) = self.window_rec.take() {
            self.rec = rec;
        }
        self.left.extend(sent);
    }

    /// Records what the window closed on (see [`xload_stats::Unanswered`]):
    /// requests in flight, and open-loop sends of the window still waiting
    /// to leave (not when the quota ended the run: none was refused).
    /// Their ages are kept in `unanswered` and recorded once every
    /// worker's answers are merged, against the run's p99 (a worker's own
    /// can be no figure: a worker whose connections all stalled has none).
    fn record_unanswered(&mut self, exhausted: bool) {
        let end = self.measured_to_ns;
        let open = self.open_loop;
        for s in std::mem::take(&mut self.left) {
            let from = if open { s.intended_ns } else { s.sent_ns };
            self.unanswered.push((
                ns_to_us(end.saturating_sub(from)),
                Some(ns_to_us(end.saturating_sub(s.sent_ns))),
            ));
        }
        if let Some(sched) = self.sched.as_ref().filter(|_| !exhausted) {
            // No more than the -n quota would still have sent.
            let room = self.quota.map_or(usize::MAX, |q| q as usize);
            for t in sched
                .queued_intended()
                .filter(|&t| t >= self.measured_from_ns)
                .take(room)
            {
                self.unanswered
                    .push((ns_to_us(end.saturating_sub(t)), None));
            }
        }
    }

    /// Marks the end of the run.
    pub fn finish(&mut self, now: u64) {
        let now = self.stopped_ns.unwrap_or(now);
        self.measured_to_ns = now.min(self.end_ns);
        // The window often ends on a tick boundary: publish that last tick.
        // One that ends between ticks publishes the part it measured, with
        // its length, so the series covers the whole window.
        if self.measuring {
            let tick_start = self.next_tick_ns.saturating_sub(self.tick_ns);
            let len = self
                .measured_to_ns
                .saturating_sub(tick_start)
                .min(self.tick_ns);
            if len > 0 {
                self.publish(len);
            }
        }
        if !self.measuring {
            // Stopped during warm-up: nothing was measured.
            self.rec.reset();
            self.measured_from_ns = self.measured_to_ns;
        }
        let exhausted = self.exhausted();
        if self.measuring && !exhausted {
            // Every send intended before the window's end is intended, sent
            // or not: the loop's last look may have come a little before
            // the last of them (intended = sent + dropped = rate × window).
            let end = self.measured_to_ns;
            if let Some(s) = self.sched.as_mut() {
                s.advance(end.saturating_sub(1));
            }
        }
        if self.measuring {
            self.record_unanswered(exhausted);
        }
        if let Some(s) = self.sched.as_mut() {
            if exhausted {
                s.abandon(); // the quota ended the run, not a lack of connections
            } else {
                s.finish();
            }
            if self.measuring {
                self.rec.record_dropped(s.dropped);
            }
        }
    }
}

/// Runs the plan: one worker per entry of `plan.worker_cpus`, until the window
/// ends, the quota is met or `stop` is set. Progress ticks go to `ticks`.
pub fn run(
    plan: &Plan,
    stop: Arc<AtomicBool>,
    ticks: Option<Sender<Tick>>,
) -> Result<Outcome, String> {
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
) -> Result<Outcome, String> {
    let release = Arc::new((std::sync::Mutex::new(false), std::sync::Condvar::new()));
    let (done_tx, done_rx) = std::sync::mpsc::channel::<()>();
    let (engine, engine_reason) = probe_engine(plan.engine)?;
    let start_ns = now_ns();
    let measure_ns = start_ns + plan.warmup.as_nanos() as u64;
    let end_ns = match plan.duration {
        Some(d) => measure_ns + d.as_nanos() as u64,
        None => u64::MAX,
    };
    let plan = Arc::new(plan.clone());
    let mut handles = Vec::new();
    for (index, &cpu) in plan.worker_cpus.iter().enumerate() {
        let plan = Arc::clone(&plan);
        let stop = Arc::clone(&stop);
        let ticks = ticks.clone();
        let release = Arc::clone(&release);
        let done_tx = done_tx.clone();
        let h = std::thread::Builder::new()
            .name(format!("xload-w{index}"))
            .spawn(move || {
                let mut info = WorkerInfo {
                    index,
                    cpu,
                    tid: pin::gettid(),
                    engine,
                    mode: "epoll",
                    cq_overflow: 0,
                    fixed_files: false,
                    dropped: 0,
                    error: None,
                    batching: None,
                };
                if let Some(c) = cpu {
                    if let Err(e) = pin::pin_current_thread(c) {
                        info.error = Some(format!("cannot pin worker {index} to cpu {c}: {e}"));
                    }
                }
                let open_loop = plan.open_loop.is_some();
                let sched = plan.open_loop.zip(plan.rate_of(index)).map(|(o, r)| {
                    Schedule::new(
                        r,
                        o.arrival,
                        // One second of this worker's own sends at most.
                        (r.ceil() as usize).clamp(1, o.queue_cap),
                        measure_ns.min(start_ns),
                        o.seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
                    )
                });
                let mut ctx = Ctx {
                    plan: &plan,
                    rec: if open_loop {
                        Recorder::new_open_loop()
                    } else {
                        Recorder::new()
                    },
                    stop: &stop,
                    measure_ns,
                    end_ns,
                    measuring: false,
                    measured_from_ns: measure_ns,
                    measured_to_ns: measure_ns,
                    next_tick_ns: u64::MAX,
                    tick_ns: plan.tick.as_nanos().max(1_000_000) as u64,
                    tick_seq: 0,
                    index,
                    ticks,
                    quota: plan.quota_of(index),
                    window_opened: false,
                    sched_started: false,
                    no_connection_since: None,
                    catch_up_since: None,
                    sched,
                    open_loop,
                    left: Vec::new(),
                    unanswered: Vec::new(),
                    stopped_ns: None,
                    window_rec: None,
                };
                let res = match engine {
                    EngineKind::Uring => uring::run_worker(&mut ctx, index),
                    EngineKind::Epoll => epoll::run_worker(&mut ctx, index),
                };
                match res {
                    Ok(stats) => {
                        info.mode = stats.mode;
                        info.cq_overflow = stats.cq_overflow;
                        info.fixed_files = stats.fixed_files;
                        info.batching = stats.batching;
                    }
                    Err(e) => info.error = Some(e),
                }
                ctx.finish(now_ns());
                info.dropped = ctx.sched.as_ref().map_or(0, |s| s.dropped);
                drop(ctx.ticks.take());
                // Stay alive (and visible in /proc) until the observer has looked.
                let _ = done_tx.send(());
                drop(done_tx);
                let (lock, cv) = &*release;
                let mut go = lock.lock().unwrap_or_else(|e| e.into_inner());
                while !*go {
                    go = cv.wait(go).unwrap_or_else(|e| e.into_inner());
                }
                drop(go);
                let unanswered = std::mem::take(&mut ctx.unanswered);
                (
                    ctx.rec,
                    info,
                    ctx.measured_from_ns,
                    ctx.measured_to_ns,
                    unanswered,
                )
            })
            .map_err(|e| format!("cannot start worker thread: {e}"))?;
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
    {
        let (lock, cv) = &*release;
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = true;
        cv.notify_all();
    }
    let mut recorder: Option<Recorder> = None;
    let mut workers = Vec::new();
    // The run's window: the longest of its workers'. They all open at the
    // end of the warm-up, except an open loop's, which each open at their
    // first connection and last as long: their union would be longer than
    // any (a 1 s run read 1.0026 s) and understate the rate.
    let mut longest = 0u64;
    let mut unanswered = Vec::new();
    for h in handles {
        let (rec, info, f, t, left) = h
            .join()
            .map_err(|_| "a worker thread panicked".to_string())?;
        unanswered.extend(left);
        match recorder.as_mut() {
            Some(r) => r.merge(&rec),
            None => recorder = Some(rec),
        }
        // A worker stopped before its window opened measured nothing: its
        // (empty) window does not stretch the run's.
        if t > f {
            longest = longest.max(t - f);
        }
        workers.push(info);
    }
    let mut recorder = recorder.ok_or("no workers")?;
    // Against the run's answers, all workers merged.
    let censor = recorder.unanswered_censor();
    for (age, since_sent) in unanswered {
        recorder.record_unanswered(&censor, age, since_sent);
    }
    let mut engine_reason = engine_reason;
    if engine == EngineKind::Uring {
        engine_reason.push_str(if workers.iter().all(|w| w.fixed_files) {
            ", registered sockets"
        } else {
            ", socket descriptors (no registered file table)"
        });
    }
    let interrupted = stop.load(Ordering::Relaxed);
    Ok(Outcome {
        recorder,
        engine,
        engine_reason,
        workers,
        measured: Duration::from_nanos(longest),
        interrupted,
    })
}

/// What a driver reports when it ends.
pub(crate) struct DriverStats {
    pub mode: &'static str,
    pub cq_overflow: u64,
    /// io_uring: sockets were named by their slot in a registered file table.
    pub fixed_files: bool,
    pub batching: Option<xload_stats::Batching>,
}
