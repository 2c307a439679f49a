//! The state every driver shares, one per worker: the time window (warm-up,
//! measured window, end), the quota of `-n`, open-loop pacing and why a send
//! left late, progress ticks, and what the window closed on. Built by
//! [`Ctx::new`] before the driver's loop; read back once it has ended.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;

use xload_stats::{Interval, Recorder};
use xload_workload::{Pick, RequestPlan, Session};

use crate::clock::ns_to_us;
use crate::conn::{Sent, Timing};
use crate::mix::{session_seed, Mix};
use crate::plan::Plan;
use crate::sched::Schedule;

/// One worker's counters for one tick of the measured window.
pub struct Tick {
    pub worker: usize,
    /// Tick number within the measured window, from 0.
    pub seq: u64,
    pub interval: Interval,
    /// How long the interval lasted, ns: the tick, or less for the last one
    /// of a window that ended between ticks (`-d 2500ms`, `-n`, Ctrl-C).
    pub len_ns: u64,
    /// Requests sent and unanswered when the tick was published (the
    /// window's own, as `unanswered_at_end.in_flight` counts them).
    pub in_flight: u64,
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

/// The run's marks on the monotonic clock, the same for every worker.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub start_ns: u64,
    /// The end of the warm-up: the measured window opens.
    pub measure_ns: u64,
    /// The end of the run (u64::MAX: none, `-n` or the stop flag ends it).
    pub end_ns: u64,
}

impl Window {
    /// The window of `plan` for a run that starts at `start_ns`.
    pub(crate) fn of(plan: &Plan, start_ns: u64) -> Window {
        let measure_ns = match plan.start_at_ns {
            Some(at) => at.max(start_ns),
            None => start_ns + plan.warmup.as_nanos() as u64,
        };
        let end_ns = match plan.duration {
            Some(d) => measure_ns + d.as_nanos() as u64,
            None => u64::MAX,
        };
        Window {
            start_ns,
            measure_ns,
            end_ns,
        }
    }
}

/// What a worker measured, handed back once its loop has ended.
pub(crate) struct Measured {
    pub rec: Recorder,
    /// The worker's measured window (empty if it stopped before it opened).
    pub from_ns: u64,
    pub to_ns: u64,
    /// The ages of what the window closed on (see [`Ctx::finish`]).
    pub unanswered: Vec<(u64, Option<u64>)>,
    /// Requests in flight when the window closed whose answers the loop's
    /// last look read: in flight then, but no age to record.
    pub answered_at_close: u64,
}

/// State every driver shares, in named parts: the window's clock, the
/// quota, the open-loop pacer, progress ticks, the last look and sessions.
pub(crate) struct Ctx<'a> {
    pub plan: &'a Plan,
    pub rec: Recorder,
    stop: &'a AtomicBool,
    pub measuring: bool,
    index: usize,
    /// Requests this worker may still send in the measured window (None:
    /// unlimited). The warm-up sends without using it.
    quota: Option<u64>,
    pub sched: Option<Schedule>,
    pub open_loop: bool,
    clock: Clock,
    ticker: Ticker,
    pacer: Pacer,
    last: LastLook,
    sessions: Sessions,
}

/// The measured window: when it opens and ends, as measured.
struct Clock {
    measure_ns: u64,
    end_ns: u64,
    measured_from_ns: u64,
    measured_to_ns: u64,
    /// The measured window just opened: the quota is yet to be set from
    /// what the warm-up left in flight ([`Ctx::open_window_quota`]).
    window_opened: bool,
    /// Nothing is sent before the window (a start instant without warm-up).
    hold: bool,
    /// When the driver's loop ended (the window's end after Ctrl-C; its
    /// teardown, which can take hundreds of milliseconds, comes after).
    /// Set, the loop's last look is on: nothing more is sent.
    stopped_ns: Option<u64>,
}

/// Progress ticks: when the next is due and where they go.
struct Ticker {
    next_tick_ns: u64,
    tick_ns: u64,
    tick_seq: u64,
    ticks: Option<Sender<Tick>>,
    /// The driver's count of requests in flight, taken when a tick is due.
    in_flight_now: u64,
}

/// Open loop: the schedule's start and how sends waited for connections.
struct Pacer {
    /// Open loop: the schedule has started (a connection was ready).
    sched_started: bool,
    /// Open loop: since when due sends have waited with every connection
    /// busy (None: a connection was free when last looked).
    no_connection_since: Option<u64>,
    /// Open loop: since when, after such a wait, a connection is free and
    /// the backlog waits for the catch-up limit (None: not catching up).
    catch_up_since: Option<u64>,
    /// Open loop, holding: a connection was ready before the window.
    held_ready: bool,
}

/// What the window closed on: requests left in flight and their ages.
struct LastLook {
    /// Requests still in flight when the driver's loop ended (filled once,
    /// at the end, by [`Ctx::left_unanswered`]).
    left: Vec<Sent>,
    /// Requests in flight when the loop ended, before its last look.
    in_flight_at_close: u64,
    /// Of those, the ones the last look found answered.
    answered_at_close: u64,
    /// The ages of what the window closed on, µs: (from the intended send
    /// in open loop, else from the send; from the send, None if never sent).
    unanswered: Vec<(u64, Option<u64>)>,
    /// The window's recorder, set aside during the last look (what it
    /// reads is not counted: the window has closed).
    window_rec: Option<Recorder>,
}

/// Workload runs: the worker's picks and the connections thinking.
struct Sessions {
    /// Workload runs: this worker's schedule of prebuilt requests.
    mix: Option<Mix>,
    /// Sessions: connections thinking, by when their think time ends.
    thinking: BinaryHeap<Reverse<(u64, u32)>>,
}

impl<'a> Ctx<'a> {
    /// The context of worker `index` of `plan`: its recorder, quota and
    /// open-loop schedule; the loop stops once `stop` is set.
    pub(crate) fn new(
        plan: &'a Plan,
        stop: &'a AtomicBool,
        index: usize,
        ticks: Option<Sender<Tick>>,
        window: Window,
    ) -> Ctx<'a> {
        let open_loop = plan.open_loop.is_some();
        let sched = plan.open_loop.zip(plan.rate_of(index)).map(|(o, r)| {
            Schedule::new(
                r,
                o.arrival,
                // One second of this worker's own sends at most.
                (r.ceil() as usize).clamp(1, o.queue_cap),
                window.measure_ns.min(window.start_ns),
                o.seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15),
            )
        });
        let mut ctx = Ctx {
            plan,
            rec: if open_loop {
                Recorder::new_open_loop()
            } else {
                Recorder::new()
            },
            stop,
            measuring: false,
            index,
            quota: plan.quota_of(index),
            sched,
            open_loop,
            clock: Clock {
                measure_ns: window.measure_ns,
                end_ns: window.end_ns,
                measured_from_ns: window.measure_ns,
                measured_to_ns: window.measure_ns,
                window_opened: false,
                hold: plan.start_at_ns.is_some() && plan.warmup.is_zero(),
                stopped_ns: None,
            },
            ticker: Ticker {
                next_tick_ns: u64::MAX,
                tick_ns: plan.tick.as_nanos().max(1_000_000) as u64,
                tick_seq: 0,
                ticks,
                in_flight_now: 0,
            },
            pacer: Pacer {
                sched_started: false,
                no_connection_since: None,
                catch_up_since: None,
                held_ready: false,
            },
            last: LastLook {
                left: Vec::new(),
                in_flight_at_close: 0,
                answered_at_close: 0,
                unanswered: Vec::new(),
                window_rec: None,
            },
            sessions: Sessions {
                mix: None,
                thinking: BinaryHeap::new(),
            },
        };
        if let Some(w) = &plan.workload {
            let mix = Mix::new(w, index);
            ctx.rec.set_classes(&mix.class_names());
            ctx.sessions.mix = Some(mix);
            if w.session.is_some() {
                ctx.sessions.thinking.reserve(plan.connections_of(index));
            }
        }
        ctx
    }

    /// Workload runs: the next request of this worker's schedule.
    #[inline]
    pub(crate) fn next_pick(&mut self) -> Option<Pick> {
        self.sessions.mix.as_mut().map(Mix::next)
    }

    /// Sessions: connections walk their own sessions with think time.
    #[inline]
    pub(crate) fn sessions(&self) -> bool {
        self.plan
            .workload
            .as_ref()
            .is_some_and(|w| w.session.is_some())
    }

    /// Workload runs: each connection keeps a cookie jar.
    pub(crate) fn cookies(&self) -> bool {
        self.plan.workload.as_ref().is_some_and(|w| w.cookies)
    }

    /// Sessions: connection `i`'s session and seed.
    pub(crate) fn session_of(&self, i: usize) -> Option<(Session, u64)> {
        let w = self.plan.workload.as_ref()?;
        Some((w.session.clone()?, session_seed(w.seed, self.index, i)))
    }

    /// Sessions: how long after it is first ready connection `i` sends its
    /// first request. The connections of all workers take evenly spaced
    /// slots over one mean think time (worker-interleaved), so the offered
    /// load is smooth from the start instead of every session firing at once.
    pub(crate) fn first_offset_ns(&self, i: usize) -> u64 {
        let Some(s) = self.plan.workload.as_ref().and_then(|w| w.session.as_ref()) else {
            return 0;
        };
        let workers = self.plan.worker_cpus.len().max(1) as u128;
        let slots = self.plan.connections_of(self.index) as u128 * workers;
        let slot = i as u128 * workers + self.index as u128;
        if slot >= slots {
            return 0;
        }
        (s.think.mean().as_nanos() * slot / slots) as u64
    }

    /// Closed loop, held: nothing may be sent before the window opens.
    #[inline]
    pub(crate) fn holding(&self) -> bool {
        self.clock.hold && !self.measuring
    }

    /// Sessions: connection `i` thinks until `due_ns`.
    pub(crate) fn think(&mut self, i: usize, due_ns: u64) {
        self.sessions.thinking.push(Reverse((due_ns, i as u32)));
    }

    /// Sessions: a connection whose think time ended by `now`, with the end.
    #[inline]
    pub(crate) fn due_thinker(&mut self, now: u64) -> Option<(usize, u64)> {
        match self.sessions.thinking.peek() {
            Some(Reverse((due, _))) if *due <= now => {
                let Reverse((due, i)) = self.sessions.thinking.pop()?;
                Some((i as usize, due))
            }
            _ => None,
        }
    }

    /// Workload runs: the prebuilt requests.
    pub(crate) fn mix_requests(&self) -> Option<&Arc<RequestPlan>> {
        self.sessions.mix.as_ref().map(Mix::requests)
    }

    /// Whether [`Ctx::on_time`] at `now` publishes a tick: the driver then
    /// counts its requests in flight for it ([`Ctx::note_in_flight`]),
    /// once a tick rather than per request.
    #[inline]
    pub(crate) fn tick_due(&self, now: u64) -> bool {
        self.measuring && now >= self.ticker.next_tick_ns && self.ticker.ticks.is_some()
    }

    /// The requests in flight for the next tick published.
    pub(crate) fn note_in_flight(&mut self, n: u64) {
        self.ticker.in_flight_now = n;
    }

    /// Whether the loop goes on at `now`: handles stop, end, the start of the
    /// measured window and progress ticks.
    pub(crate) fn on_time(&mut self, now: u64) -> bool {
        if self.stop.load(Ordering::Relaxed) || now >= self.clock.end_ns {
            return false;
        }
        if !self.measuring && now >= self.clock.measure_ns {
            self.rec.reset();
            self.measuring = true;
            self.clock.window_opened = true;
            // The window is [measure_ns, end_ns] even if this loop noticed late.
            self.clock.measured_from_ns = self.clock.measure_ns;
            self.ticker.next_tick_ns = self.clock.measure_ns + self.ticker.tick_ns;
            if let Some(s) = self.sched.as_mut() {
                // Sends due before the window belong to the warm-up; one due
                // at its first instant is the window's.
                s.advance(self.clock.measure_ns.saturating_sub(1));
                s.start_window();
                // Held until now: the schedule starts with the window.
                if self.clock.hold && self.pacer.held_ready {
                    self.pacer.sched_started = true;
                    s.rebase(self.clock.measure_ns);
                }
            }
        }
        if self.measuring {
            self.publish_ended(now);
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
    pub(crate) fn timing(&self) -> Timing {
        if self.open_loop {
            Timing::Open
        } else {
            Timing::Closed
        }
    }

    /// Publishes the ticks that ended by `now`: the first with what was
    /// read since the last look, the others empty. The loop reads, then
    /// waits: a thread not run for longer than a tick stalled after its
    /// reads, so they belong to the first; the series keeps a row per tick.
    fn publish_ended(&mut self, now: u64) {
        if now < self.ticker.next_tick_ns {
            return;
        }
        self.publish(self.ticker.tick_ns);
        while self.ticker.next_tick_ns <= now {
            self.send_tick(self.ticker.tick_ns, Interval::new());
        }
    }

    /// Publishes the interval since the last tick, `len_ns` long.
    fn publish(&mut self, len_ns: u64) {
        let interval = self.rec.take_interval();
        self.send_tick(len_ns, interval);
    }

    fn send_tick(&mut self, len_ns: u64, interval: Interval) {
        self.ticker.next_tick_ns += self.ticker.tick_ns;
        if let Some(tx) = &self.ticker.ticks {
            let _ = tx.send(Tick {
                worker: self.index,
                seq: self.ticker.tick_seq,
                interval,
                len_ns,
                in_flight: self.ticker.in_flight_now,
            });
        }
        self.ticker.tick_seq += 1;
    }

    /// The next moment the loop must wake without I/O.
    pub(crate) fn wake_ns(&self) -> u64 {
        let mut t = self.clock.end_ns;
        if self.measuring {
            t = t.min(self.ticker.next_tick_ns);
        } else {
            t = t.min(self.clock.measure_ns);
        }
        if let Some(Reverse((due, _))) = self.sessions.thinking.peek() {
            t = t.min(*due);
        }
        if let Some(s) = &self.sched {
            // Holding, nothing is due before the window.
            if self.quota != Some(0) && (self.measuring || !self.clock.hold) {
                t = t.min(s.wake_ns());
            }
        }
        t
    }

    /// Once, when the measured window has opened: the window's quota is the
    /// worker's share of `-n` less the warm-up's requests still in flight
    /// (`in_flight`), which will be answered, and counted, in the window.
    pub(crate) fn open_window_quota(&mut self, in_flight: u64) {
        self.clock.window_opened = false;
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
    pub(crate) fn connection_ready(&mut self, now: u64) {
        // A first connection that completes after the loop ended changes
        // no window.
        if self.pacer.sched_started || self.closing() {
            return;
        }
        if self.clock.hold && !self.measuring {
            // The schedule starts when the window opens.
            self.pacer.held_ready = true;
            return;
        }
        self.pacer.sched_started = true;
        if let Some(s) = self.sched.as_mut() {
            s.rebase(now);
            if self.measuring {
                // The window is as long as asked from here: it ends that
                // much later (else it would measure less than asked and
                // intend fewer than rate × duration sends), and its
                // seconds count from here.
                // A first connection that took longer than a tick (a
                // server slow to accept) does not stretch the run: the
                // window then starts late and is that much shorter.
                s.start_window();
                let shift = now.saturating_sub(self.clock.measured_from_ns);
                self.clock.measured_from_ns = self.clock.measured_from_ns.max(now);
                if self.ticker.tick_seq == 0 && shift < self.ticker.tick_ns {
                    if self.clock.end_ns != u64::MAX {
                        self.clock.end_ns = self.clock.end_ns.saturating_add(shift);
                    }
                    self.ticker.next_tick_ns = self.clock.measured_from_ns + self.ticker.tick_ns;
                }
            }
        }
    }

    /// Open loop: due sends wait and no connection is free.
    #[inline]
    pub(crate) fn no_free_connection(&mut self, now: u64) {
        if self.sched.as_ref().is_some_and(|s| s.has_queued()) {
            if self.pacer.no_connection_since.is_none() {
                self.pacer.no_connection_since = Some(now);
            }
            // Busy again: what comes due now waits for a connection.
            self.pacer.catch_up_since = None;
        }
    }

    /// Open loop: a connection is free and nothing may leave on it now.
    /// Once no send waits (caught up), the wait for connections is over;
    /// while the backlog of such a wait drains at the catch-up limit,
    /// sends intended from now on wait behind it.
    #[inline]
    pub(crate) fn free_connection(&mut self, now: u64) {
        if !self.sched.as_ref().is_some_and(|s| s.has_queued()) {
            self.pacer.no_connection_since = None;
            self.pacer.catch_up_since = None;
        } else if self.pacer.no_connection_since.is_some() && self.pacer.catch_up_since.is_none() {
            self.pacer.catch_up_since = Some(now);
        }
    }

    /// Open loop: why a send intended at `intended` left more than
    /// `late_ns` late. It waited for a connection if every connection was
    /// already busy before it became late; if it was intended once one was
    /// free again, it waited behind that wait's backlog for the catch-up
    /// limit; else this loop itself was behind.
    #[inline]
    pub(crate) fn late_cause(&self, intended: u64, late_ns: u64) -> Late {
        match self.pacer.no_connection_since {
            Some(_) if self.pacer.catch_up_since.is_some_and(|c| intended >= c) => Late::CatchUp,
            Some(t) if t <= intended.saturating_add(late_ns) => Late::Waiting,
            _ => Late::Own,
        }
    }

    /// The measured window has opened and its quota is not set yet.
    #[inline]
    pub(crate) fn window_opening(&self) -> bool {
        self.clock.window_opened
    }

    /// Closed loop: connections waited for the window, which has just
    /// opened; each open connection is to be given its first requests.
    #[inline]
    pub(crate) fn held_until_now(&self) -> bool {
        self.clock.hold && !self.open_loop
    }

    /// How many of `want` requests may be sent now (closed loop): all of
    /// them during the warm-up, else what the quota allows.
    #[inline]
    pub(crate) fn allow(&mut self, want: usize) -> usize {
        if self.closing() {
            return 0;
        }
        if !self.measuring {
            return if self.clock.hold { 0 } else { want };
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
    pub(crate) fn refund(&mut self, n: usize) {
        if !self.measuring {
            return;
        }
        if let Some(q) = self.quota.as_mut() {
            *q += n as u64;
        }
    }

    /// Nothing more will be sent (quota used up).
    pub(crate) fn exhausted(&self) -> bool {
        self.quota == Some(0)
    }

    /// Open loop: the intended time of a send allowed now, if any.
    #[inline]
    pub(crate) fn take_scheduled(&mut self) -> Option<u64> {
        if self.exhausted() || self.closing() || (self.clock.hold && !self.measuring) {
            return None;
        }
        let t = self.sched.as_mut()?.take()?;
        if let Some(q) = self.quota.as_mut().filter(|_| self.measuring) {
            *q -= 1;
        }
        Some(t)
    }

    /// The driver's loop has ended at `now` with `in_flight` requests sent
    /// and unanswered: they are the window's `in_flight`, whatever the last
    /// look reads. That look may read answers that already arrived (so that
    /// they are not recorded at an age), but nothing more is sent and
    /// nothing it reads counts.
    pub(crate) fn close(&mut self, now: u64, in_flight: u64) {
        self.clock.stopped_ns = Some(now);
        self.last.in_flight_at_close = in_flight;
        self.ticker.in_flight_now = in_flight;
        self.last.window_rec = Some(std::mem::take(&mut self.rec));
    }

    /// The loop has ended ([`Ctx::close`]): no connection is opened.
    #[inline]
    pub(crate) fn closing(&self) -> bool {
        self.clock.stopped_ns.is_some()
    }

    /// The last look is over: these requests are left unanswered. The
    /// window's recorder is back.
    pub(crate) fn left_unanswered(&mut self, sent: impl Iterator<Item = Sent>) {
        if let Some(rec) = self.last.window_rec.take() {
            self.rec = rec;
        }
        // Those whose answers would have counted (`Sent::counted`).
        self.last.left.extend(sent.filter(|s| s.counted));
        self.last.answered_at_close = self
            .last
            .in_flight_at_close
            .saturating_sub(self.last.left.len() as u64);
    }

    /// Records what the window closed on (see [`xload_stats::Unanswered`]):
    /// requests in flight, and open-loop sends of the window still waiting
    /// to leave (not when the quota ended the run: none was refused).
    /// Their ages are kept in `unanswered` and recorded once every
    /// worker's answers are merged, against the run's p99 (a worker's own
    /// can be no figure: a worker whose connections all stalled has none).
    fn record_unanswered(&mut self, exhausted: bool) {
        let end = self.clock.measured_to_ns;
        let open = self.open_loop;
        for s in std::mem::take(&mut self.last.left) {
            let from = if open { s.intended_ns } else { s.sent_ns };
            self.last.unanswered.push((
                ns_to_us(end.saturating_sub(from)),
                Some(ns_to_us(end.saturating_sub(s.sent_ns))),
            ));
        }
        if let Some(sched) = self.sched.as_ref().filter(|_| !exhausted) {
            // No more than the -n quota would still have sent.
            let room = self.quota.map_or(usize::MAX, |q| q as usize);
            for t in sched
                .queued_intended()
                .filter(|&t| t >= self.clock.measured_from_ns)
                .take(room)
            {
                self.last
                    .unanswered
                    .push((ns_to_us(end.saturating_sub(t)), None));
            }
        }
    }

    /// Marks the end of the run.
    pub(crate) fn finish(&mut self, now: u64) {
        let now = self.clock.stopped_ns.unwrap_or(now);
        self.clock.measured_to_ns = now.min(self.clock.end_ns);
        // The window often ends on a tick boundary: publish that last tick.
        // One that ends between ticks publishes the part it measured, with
        // its length, so the series covers the whole window.
        if self.measuring {
            self.publish_ended(self.clock.measured_to_ns);
            let tick_start = self.ticker.next_tick_ns.saturating_sub(self.ticker.tick_ns);
            let len = self
                .clock
                .measured_to_ns
                .saturating_sub(tick_start)
                .min(self.ticker.tick_ns);
            if len > 0 {
                self.publish(len);
            }
        }
        if !self.measuring {
            // Stopped during warm-up: nothing was measured.
            self.rec.reset();
            self.clock.measured_from_ns = self.clock.measured_to_ns;
        }
        let exhausted = self.exhausted();
        if self.measuring && !exhausted {
            // Every send intended before the window's end is intended, sent
            // or not: the loop's last look may have come a little before
            // the last of them (intended = sent + dropped = rate × window).
            let end = self.clock.measured_to_ns;
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
    /// Open loop: intended sends dropped because the queue was full.
    pub(crate) fn dropped(&self) -> u64 {
        self.sched.as_ref().map_or(0, |s| s.dropped)
    }

    /// No more ticks come from this worker: its sender is dropped, so a
    /// receiver sees the end once every worker has closed its own.
    pub(crate) fn close_ticks(&mut self) {
        self.ticker.ticks = None;
    }

    /// What the worker measured ([`Ctx::finish`] first).
    pub(crate) fn into_measured(self) -> Measured {
        Measured {
            rec: self.rec,
            from_ns: self.clock.measured_from_ns,
            to_ns: self.clock.measured_to_ns,
            unanswered: self.last.unanswered,
            answered_at_close: if self.measuring {
                self.last.answered_at_close
            } else {
                0
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::plan::{Arrival, EngineChoice, OpenLoop};

    const MS: u64 = 1_000_000;

    /// One worker, a warm-up of 100 ms and a window of 1 s from 0.
    fn plan(requests: Option<u64>, open_loop: bool) -> Plan {
        Plan {
            addr: "127.0.0.1:1".parse().unwrap(),
            request: b"GET / HTTP/1.1\r\n\r\n".to_vec(),
            head: false,
            pipeline: 1,
            connections: 4,
            worker_cpus: vec![None],
            duration: Some(Duration::from_secs(1)),
            warmup: Duration::from_millis(100),
            requests,
            timeout: Duration::from_secs(1),
            connect_timeout: Duration::from_secs(1),
            handshake_timeout: Duration::from_secs(1),
            engine: EngineChoice::Auto,
            open_loop: open_loop.then_some(OpenLoop {
                rate_per_s: 1000.0,
                arrival: Arrival::Uniform,
                seed: 1,
                queue_cap: 1000,
            }),
            tick: Duration::from_millis(250),
            sources: Vec::new(),
            connect_rate_per_s: None,
            start_at_ns: None,
            workload: None,
            tls: None,
            xdp: None,
            unix: None,
            h2: None,
        }
    }

    fn ctx<'a>(plan: &'a Plan, stop: &'a AtomicBool) -> Ctx<'a> {
        Ctx::new(plan, stop, 0, None, Window::of(plan, 0))
    }

    #[test]
    fn the_window_follows_the_warm_up_and_the_duration() {
        let mut p = plan(None, false);
        let w = Window::of(&p, 5 * MS);
        assert_eq!(
            (w.start_ns, w.measure_ns, w.end_ns),
            (5 * MS, 105 * MS, 1105 * MS)
        );
        p.duration = None;
        assert_eq!(Window::of(&p, 0).end_ns, u64::MAX);
    }

    #[test]
    fn the_warm_up_sends_freely_and_the_window_spends_the_quota() {
        let p = plan(Some(10), false);
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        assert!(c.on_time(0));
        assert_eq!(c.allow(64), 64, "warm-up: no quota");
        assert!(c.on_time(100 * MS));
        assert!(c.measuring && c.window_opening());
        // Three requests of the warm-up are still in flight: they are
        // answered in the window and count against its quota.
        c.open_window_quota(3);
        assert!(!c.window_opening());
        assert_eq!(c.allow(4), 4);
        assert_eq!(c.allow(4), 3);
        assert!(c.exhausted());
        assert_eq!(c.allow(4), 0);
        // A connection lost with two unanswered: they are sent again.
        c.refund(2);
        assert!(!c.exhausted());
        assert_eq!(c.allow(4), 2);
    }

    #[test]
    fn the_loop_ends_at_the_end_or_the_stop() {
        let p = plan(None, false);
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        assert!(c.on_time(1099 * MS));
        assert!(!c.on_time(1100 * MS));
        let mut c = ctx(&p, &stop);
        stop.store(true, Ordering::Relaxed);
        assert!(!c.on_time(0));
    }

    #[test]
    fn the_next_wake_is_the_window_then_the_tick() {
        let p = plan(None, false);
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        c.on_time(0);
        assert_eq!(c.wake_ns(), 100 * MS);
        c.on_time(100 * MS);
        assert_eq!(c.wake_ns(), 350 * MS);
    }

    /// A loop stalled past several ticks (its thread not run) publishes
    /// every one of them: what it read before the stall in the first, the
    /// others empty. The series has a row per tick of the window.
    #[test]
    fn ticks_a_stalled_loop_slept_through_are_published_empty() {
        let p = plan(None, false); // warm-up 100 ms, 1 s window, 250 ms ticks
        let stop = AtomicBool::new(false);
        let (tx, rx) = std::sync::mpsc::channel();
        let mut c = Ctx::new(&p, &stop, 0, Some(tx), Window::of(&p, 0));
        assert!(c.on_time(100 * MS));
        // Read in tick 0, then not run until 600 ms into the window: ticks
        // 0 and 1 have ended, the read counts in tick 0.
        c.rec.record_response(10, 200, 100);
        assert!(c.on_time(700 * MS));
        assert_eq!(c.wake_ns(), 850 * MS);
        // Read in tick 2, then asleep past the end: ticks 2 and 3 come
        // from the finish.
        c.rec.record_response(10, 200, 100);
        c.rec.record_response(10, 200, 100);
        assert!(!c.on_time(1300 * MS));
        c.close(1300 * MS, 0);
        c.left_unanswered(std::iter::empty());
        c.finish(1300 * MS);
        c.close_ticks();
        let ticks: Vec<(u64, u64, u64)> = rx
            .iter()
            .map(|t| (t.seq, t.len_ns / MS, t.interval.requests))
            .collect();
        assert_eq!(
            ticks,
            vec![(0, 250, 1), (1, 250, 0), (2, 250, 2), (3, 250, 0)]
        );
    }

    #[test]
    fn once_closed_nothing_is_sent_and_the_window_keeps_its_counts() {
        let p = plan(None, true);
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        c.on_time(100 * MS);
        c.connection_ready(100 * MS);
        c.on_time(200 * MS);
        c.rec.record_connect();
        c.close(200 * MS, 0);
        assert!(c.closing());
        assert_eq!(c.allow(1), 0);
        assert_eq!(c.take_scheduled(), None);
        // What the last look reads does not count.
        c.rec.record_connect();
        c.left_unanswered(std::iter::empty());
        c.finish(900 * MS);
        let m = c.into_measured();
        assert_eq!((m.from_ns, m.to_ns), (100 * MS, 200 * MS));
        assert_eq!(m.rec.connects(), 1);
    }

    #[test]
    fn late_sends_are_blamed_on_what_they_waited_for() {
        let p = plan(None, true);
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        c.on_time(0);
        c.connection_ready(0);
        // Nothing waited for a connection: the loop itself was behind.
        assert_eq!(c.late_cause(10 * MS, MS), Late::Own);
        // Sends queued, every connection busy since 20 ms.
        c.on_time(30 * MS);
        c.no_free_connection(20 * MS);
        assert_eq!(c.late_cause(19 * MS, MS), Late::Waiting);
        assert_eq!(c.late_cause(10 * MS, MS), Late::Own, "late before the wait");
        // A connection is free again; the backlog drains from 40 ms.
        c.free_connection(40 * MS);
        assert_eq!(c.late_cause(39 * MS, MS), Late::Waiting);
        assert_eq!(c.late_cause(41 * MS, MS), Late::CatchUp);
    }

    /// The schedule starts when the first connection is ready, so the
    /// setup (threads, ring, connect) makes no send late: with no warm-up
    /// and a connection ready at 30 ms, the first send is due at 30 ms, and
    /// the window of 1 s ends 30 ms later, intending exactly rate × 1 s.
    #[test]
    fn the_schedule_starts_with_the_first_ready_connection() {
        let mut p = plan(None, true);
        p.warmup = Duration::ZERO;
        let stop = AtomicBool::new(false);
        let mut c = ctx(&p, &stop);
        assert!(c.on_time(0));
        // No connection is ready yet: the drivers take no send, whatever
        // the schedule says.
        assert!(c.on_time(30 * MS));
        c.connection_ready(30 * MS);
        assert!(c.on_time(30 * MS));
        assert_eq!(
            c.take_scheduled(),
            Some(30 * MS),
            "due when the connection was ready"
        );
        assert_eq!(c.take_scheduled(), None, "the next is a gap later");
        assert!(c.on_time(31 * MS));
        assert_eq!(c.take_scheduled(), Some(31 * MS));
        assert!(
            c.on_time(1029 * MS),
            "the window was moved by the setup's 30 ms"
        );
        assert!(!c.on_time(1030 * MS));
    }
}
