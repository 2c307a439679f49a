//! Batched waits for a closed loop with many connections: how many
//! completions an enter waits for ([`Batch`]), where the cap of that count
//! sits ([`Climb`]), and the multishot ring timeout that bounds every such
//! wait ([`Tick`]). The decisions live here; the driver submits the SQEs.

use io_uring::types;

/// The batching tick (see [`Batch`]): its period follows the round trip
/// (1/N of it) within a floor and a ceiling; 1 ms until a round trip is known.
const TICK_RTT_DIV: u64 = 2;
const TICK_FLOOR_NS: u64 = 100_000;
const TICK_CEIL_NS: u64 = 5_000_000;
const TICK_INITIAL_NS: u64 = 1_000_000;

/// How many completions a closed loop's enter waits for.
///
/// Waiting for several answers at once spares wake-ups when the server, not
/// this loop, sets the pace. What bounds such a wait matters on a VM: a timer
/// armed and cancelled around every sleep (the 6.12 min-wait, or any timeout
/// nearer than the scheduler tick) reprograms the CPU's timer twice per
/// sleep, each a VM exit, a cost paid per request (docs/engine.md). So
/// the bound is one multishot ring timeout (the [`Tick`]), armed once,
/// whose every expiry ends the wait in progress: an answer that
/// has arrived waits at most one period to be reaped. `want` follows what the
/// waits bring: two waits in a row that the tick ended short lower it to what
/// came (a few live connections among stuck ones are then reaped as they
/// answer; one short wait is the tick landing mid-batch), a reap
/// that brought more than it waited for raises it by a quarter, up to `cap`
/// (where the [`Climb`] puts it).
#[derive(Debug)]
pub(super) struct Batch {
    pub want: usize,
    cap: usize,
    /// Completions in the current reap that are not answers: the tick's
    /// (expiries, removes) and the TLS sends' (a sealed send posts its
    /// completion to free its buffer).
    pub aside_cqes: usize,
    /// The tick expired since the last reap.
    pub ticked: bool,
    /// The enter before this reap was a batched wait that returned normally.
    pub waited: bool,
    /// The last reap was a wait the tick ended short.
    short: bool,
    /// The enter before this reap waited for completions (batched or not).
    pub slept: bool,
    /// What the run's waits brought, for the report.
    seen: Batching,
}

/// A worker's waits over the whole run (warm-up included): how many enters
/// waited for completions (batched or not; including those that returned at
/// once because enough were queued, or at their timeout with none), how many
/// completions (receives, mostly; a connect or a failed send counts too, the
/// batching tick's own do not) they brought, and the range of the batch cap
/// (the most a wait asks for; a wait asks for less while its count adapts).
/// The report's [`xload_stats::Batching`] is made from it at the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Batching {
    waits: u64,
    completions: u64,
    cap_min: usize,
    cap_max: usize,
}

impl Batching {
    pub(crate) fn report(&self) -> xload_stats::Batching {
        xload_stats::Batching::new(self.waits, self.completions, self.cap_min, self.cap_max)
    }
}

impl Batch {
    /// What the run's waits brought, for the report.
    pub(super) fn report(&self) -> xload_stats::Batching {
        self.seen.report()
    }

    pub(super) fn set_cap(&mut self, cap: usize) {
        self.cap = cap.max(1);
        self.want = self.want.min(self.cap);
        self.seen.cap_min = self.seen.cap_min.min(self.cap);
        self.seen.cap_max = self.seen.cap_max.max(self.cap);
    }

    pub(super) fn new(cap: usize) -> Batch {
        Batch {
            want: 1,
            cap: cap.max(1),
            aside_cqes: 0,
            ticked: false,
            waited: false,
            short: false,
            slept: false,
            seen: Batching {
                waits: 0,
                completions: 0,
                cap_min: cap.max(1),
                cap_max: cap.max(1),
            },
        }
    }

    /// Adjusts `want` after a reap of `completions` and starts counting the
    /// next one.
    pub(super) fn after_reap(&mut self, completions: usize) {
        // What the wait got: answers (and connects, failed sends), not the
        // tick's or the TLS sends' completions, which the wait asked for on
        // top (see `Driver::wait`).
        let got = completions - self.aside_cqes;
        if self.slept {
            self.seen.waits += 1;
            self.seen.completions += got as u64;
        }
        // The tick came and fewer completions than asked for. Usually the tick
        // ended the wait; a tick that expired while this loop was busy posts
        // at the next enter and that wait ends by count, one short. Only two
        // in a row count, and with waits shorter than a period (the point of
        // batching) two ticks never land on consecutive waits.
        let short = self.waited && self.ticked && got < self.want;
        if short && self.short {
            self.want = got.max(1);
        } else if got > self.want {
            self.want = (self.want + self.want / 4 + 1).min(self.cap);
        }
        self.short = short;
        self.aside_cqes = 0;
        self.ticked = false;
        self.waited = false;
        self.slept = false;
    }
}

/// Where a closed loop's batch cap sits, moved by the round trips it brings.
///
/// A bigger batch spares this loop wake-ups, and can spare the server some:
/// nginx answers more requests per `epoll_wait` when they come together, so
/// a larger cap costs both sides less CPU per request. But an answer waits
/// in the ring until its batch fills, about `cap / connections` of a round
/// trip: against a server that gains nothing from batches (`xload serve
/// --delay 1ms`) the same change raises the p50 and lowers the RPS. No one
/// cap fits both, so the cap climbs.
///
/// The round trip is measured every 10 ms by Little's law (requests in
/// flight on open connections × time ÷ answers: in a closed loop, the mean
/// latency as measured, reap waits included). After an epoch of
/// [`CLIMB_TICKS`] measurements the cap takes a step, up by a quarter plus
/// one or down by a fifth plus one, compared with the previous epoch's mean:
/// going up, it goes on up unless the round trip got longer by more than
/// 1/[`CLIMB_TOLERANCE`]; going down, it goes on down only if the round trip
/// got shorter by more than that. So batches grow while they cost no
/// latency this loop can measure (the server gains at least what the
/// answers lose by waiting) and shrink when they do; a change smaller than
/// the noise of the measure counts for bigger batches. A measurement with no
/// answers (a stalled server, the reset that ends the warm-up) or a change
/// in the number of open connections starts a new epoch compared with
/// nothing. Bounds: 1/16 of the connections (at least 2) to 1/4 (at most 64:
/// an answer then waits on average at most 1/8 of a round trip to be
/// reaped), starting at 1/8; from 1,024 connections on, 64. Fewer than 16
/// connections (or an open loop): 1, no batching.
///
/// HTTP/2 with several streams per connection counts differently: a
/// connection that answered still has streams in flight, so a wait for
/// other connections' answers leaves none of it idle, and the answers it
/// gets meanwhile come in the same receive and leave in the same send. What
/// a wait can count is connections with something received (one receive
/// completion each however many answers it holds): the cap is between 1/4
/// and 3/4 of the connections (at most 64), starting at 1/2. So 10
/// connections of 100 streams reap when about 5 have answered, instead of
/// after every receive (a send of a few requests per receive, ~4x
/// h2load's sends per request against nginx).
#[derive(Debug)]
pub(super) struct Climb {
    lo: usize,
    hi: usize,
    pub cap: usize,
    up: bool,
    /// The previous epoch's mean round trip.
    last_ns: Option<u64>,
    /// This epoch's round trips so far, and the open connections they saw.
    sum_ns: u64,
    ticks: u32,
    open: usize,
}

/// Round-trip measurements (10 ms apart) per step of the [`Climb`].
const CLIMB_TICKS: u32 = 2;
/// A change of the round trip of at most this fraction (1/100) of it counts
/// for bigger batches.
const CLIMB_TOLERANCE: u64 = 100;

impl Climb {
    /// For `conns` connections in a closed loop (0 for an open loop), each
    /// with up to `streams` requests at once (HTTP/2 streams; 1 otherwise).
    pub(super) fn new(conns: usize, streams: usize) -> Climb {
        let (lo, hi, start) = if streams > 1 {
            let hi = (conns * 3 / 4).clamp(1, 64);
            ((conns / 4).clamp(1, hi), hi, conns / 2)
        } else if conns < 16 {
            (1, 1, 1)
        } else {
            ((conns / 16).clamp(2, 64), (conns / 4).min(64), conns / 8)
        };
        Climb {
            lo,
            hi,
            cap: start.clamp(lo, hi),
            up: true,
            last_ns: None,
            sum_ns: 0,
            ticks: 0,
            open: 0,
        }
    }

    /// One measurement: the round trip if answers came since the last one,
    /// and the open connections; returns the cap.
    pub(super) fn observe(&mut self, rtt_ns: Option<u64>, open: usize) -> usize {
        let Some(rtt_ns) = rtt_ns.filter(|_| open == self.open) else {
            self.open = open;
            self.last_ns = None;
            self.sum_ns = 0;
            self.ticks = 0;
            return self.cap;
        };
        self.sum_ns = self.sum_ns.saturating_add(rtt_ns);
        self.ticks += 1;
        if self.ticks < CLIMB_TICKS {
            return self.cap;
        }
        let rtt = self.sum_ns / u64::from(self.ticks);
        self.sum_ns = 0;
        self.ticks = 0;
        if let Some(last) = self.last_ns {
            let tol = last / CLIMB_TOLERANCE;
            let turn = if self.up {
                rtt > last.saturating_add(tol)
            } else {
                rtt.saturating_add(tol) >= last
            };
            if turn {
                self.up = !self.up;
            }
        }
        self.last_ns = Some(rtt);
        self.cap = if self.up {
            (self.cap + self.cap / 4 + 1).min(self.hi)
        } else {
            self.cap.saturating_sub(self.cap / 5 + 1).max(self.lo)
        };
        self.cap
    }

    /// Whether waits may ask for more than one completion at all (the
    /// batching tick is needed).
    pub(super) fn batches(&self) -> bool {
        self.hi > 1
    }
}

/// The batching tick: a multishot ring timeout (Linux 6.4+).
pub(super) struct Tick {
    /// In use; off for an open loop, fewer than 16 connections, or a kernel
    /// without multishot timeouts (waits then return on the first completion).
    pub on: bool,
    /// The current tick (generation `gen`) is armed.
    pub armed: bool,
    /// Each arm has its own generation in its user data, so the remove of
    /// an old tick never hits its replacement, and an old one that escaped
    /// its remove (it was expiring) is known by its next completion.
    pub gen: u32,
    pub period_ns: u64,
    /// Read by the kernel when the arm SQE is submitted.
    pub ts: Box<types::Timespec>,
}

impl Tick {
    /// A tick not armed yet, at the initial period; `on`: batching at all.
    pub(super) fn new(on: bool) -> Tick {
        Tick {
            on,
            armed: false,
            gen: 0,
            period_ns: TICK_INITIAL_NS,
            ts: Box::new(types::Timespec::from(std::time::Duration::from_nanos(
                TICK_INITIAL_NS,
            ))),
        }
    }
}

/// The tick period for a round trip of `rtt_ns` (None: not known yet).
pub(super) fn tick_period_ns(rtt_ns: Option<u64>) -> u64 {
    rtt_ns.map_or(TICK_INITIAL_NS, |rtt| {
        (rtt / TICK_RTT_DIV).clamp(TICK_FLOOR_NS, TICK_CEIL_NS)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One reap after a batched wait: `answers` completions, plus the tick's
    /// when `tick`; returns the count the next wait asks for.
    fn reap(b: &mut Batch, answers: usize, tick: bool) -> usize {
        b.waited = true;
        b.ticked = tick;
        b.aside_cqes = usize::from(tick);
        b.after_reap(answers + usize::from(tick));
        b.want
    }

    #[test]
    fn batch_grows_with_surplus_and_shrinks_after_two_short_ticks() {
        let mut b = Batch::new(12);
        assert_eq!(b.want, 1);
        // Answers come faster than wanted: grows by a quarter (+1) up to the cap.
        let seen: Vec<usize> = (0..10)
            .map(|_| {
                let more = b.want + 3;
                reap(&mut b, more, false)
            })
            .collect();
        assert_eq!(seen, [2, 3, 4, 6, 8, 11, 12, 12, 12, 12]);
        // Exactly what was wanted: stays.
        assert_eq!(reap(&mut b, 12, false), 12);
        // One wait the tick cut short (it landed mid-batch): stays.
        assert_eq!(reap(&mut b, 5, true), 12);
        // A full wait in between resets that.
        assert_eq!(reap(&mut b, 12, false), 12);
        assert_eq!(reap(&mut b, 4, true), 12);
        assert_eq!(reap(&mut b, 12, false), 12);
        // A tick that expired while the loop was busy, then one that ended a
        // wait, with a full wait between them: no shrink.
        assert_eq!(reap(&mut b, 11, true), 12);
        assert_eq!(reap(&mut b, 12, false), 12);
        assert_eq!(reap(&mut b, 4, true), 12);
        // Two short in a row: down to what came, never below one.
        assert_eq!(reap(&mut b, 3, true), 3);
        assert_eq!(reap(&mut b, 0, true), 1);
        // Reaps after an enter that was not a batched wait change nothing.
        b.ticked = true;
        b.after_reap(0);
        b.ticked = true;
        b.after_reap(0);
        assert_eq!(b.want, 1);
        // A live connection among stuck ones: one answer per tick, want stays 1.
        assert_eq!(reap(&mut b, 1, true), 1);
        assert_eq!(reap(&mut b, 1, false), 1);
    }

    const OPEN: usize = 100;

    /// A climb for `OPEN` connections past its first measurement (which
    /// only notes the open connections).
    fn climber() -> Climb {
        let mut c = Climb::new(OPEN, 1);
        assert_eq!(c.observe(Some(1_000_000), OPEN), 12);
        c
    }

    /// One epoch at round trip `rtt`: the cap after it.
    fn epoch(c: &mut Climb, rtt: u64) -> usize {
        (0..CLIMB_TICKS)
            .map(|_| c.observe(Some(rtt), OPEN))
            .last()
            .unwrap()
    }

    /// Epochs of a climb over a landscape `rtt(cap)`: the caps it used.
    fn climb(c: &mut Climb, epochs: usize, rtt: impl Fn(usize) -> u64) -> Vec<usize> {
        let mut caps = vec![c.cap];
        for _ in 0..epochs {
            let r = rtt(c.cap);
            caps.push(epoch(c, r));
        }
        caps
    }

    #[test]
    fn climb_bounds_follow_the_connections() {
        let bounds = |n| {
            let c = Climb::new(n, 1);
            (c.lo, c.cap, c.hi)
        };
        // Open loop, or too few connections to batch: one (the tick is off).
        assert_eq!(bounds(0), (1, 1, 1));
        assert_eq!(bounds(15), (1, 1, 1));
        // Batching: never down to one.
        assert_eq!(bounds(16), (2, 2, 4));
        assert_eq!(bounds(100), (6, 12, 25));
        assert_eq!(bounds(800), (50, 64, 64));
        assert_eq!(bounds(1024), (64, 64, 64));
        assert_eq!(bounds(10_000), (64, 64, 64));
        let mut c = Climb::new(16, 1);
        let caps = climb(&mut c, 6, |cap| 1_000_000 + 100_000 * cap as u64);
        assert!(caps.iter().all(|&cap| (2..=4).contains(&cap)), "{caps:?}");
        assert!(!Climb::new(15, 1).batches() && Climb::new(16, 1).batches());
    }

    #[test]
    fn climb_bounds_of_http2_streams_follow_the_connections() {
        let bounds = |n, streams| {
            let c = Climb::new(n, streams);
            (c.lo, c.cap, c.hi, c.batches())
        };
        // One stream per connection: as HTTP/1.1.
        assert_eq!(bounds(10, 1), (1, 1, 1, false));
        assert_eq!(bounds(100, 1), (6, 12, 25, true));
        // Several: 1/4 to 3/4 of the connections (at most 64), from 1/2,
        // however few they are.
        assert_eq!(bounds(1, 100), (1, 1, 1, false));
        assert_eq!(bounds(2, 100), (1, 1, 1, false));
        assert_eq!(bounds(3, 10), (1, 1, 2, true));
        assert_eq!(bounds(10, 10), (2, 5, 7, true));
        assert_eq!(bounds(10, 100), (2, 5, 7, true));
        assert_eq!(bounds(100, 10), (25, 50, 64, true));
        assert_eq!(bounds(1000, 2), (64, 64, 64, true));
        // The climb moves within them.
        let mut c = Climb::new(10, 100);
        c.open = OPEN;
        let caps = climb(&mut c, 8, |cap| 1_000_000 - 5_000 * cap as u64);
        assert_eq!(caps, [5, 7, 7, 7, 7, 7, 7, 7, 7]);
        let mut c = Climb::new(10, 100);
        c.open = OPEN;
        let caps = climb(&mut c, 8, |cap| 1_000_000 + 100_000 * cap as u64);
        assert!(caps.iter().all(|&cap| (2..=7).contains(&cap)), "{caps:?}");
    }

    #[test]
    fn climb_steps_once_per_epoch() {
        let mut c = climber();
        for _ in 1..CLIMB_TICKS {
            assert_eq!(c.observe(Some(1_000_000), OPEN), 12);
        }
        assert_eq!(c.observe(Some(1_000_000), OPEN), 16, "first step is up");
    }

    #[test]
    fn climb_goes_down_when_batches_only_add_waiting() {
        // A server that gains nothing: each answer in a batch waits. Each
        // step costs more than the tolerance: down to the floor, where a
        // step up that costs is taken back at once.
        let mut c = climber();
        let caps = climb(&mut c, 16, |cap| 1_000_000 + 10_000 * cap as u64);
        assert_eq!(caps[..6], [12, 16, 12, 9, 7, 6]);
        assert!(caps[5..].iter().all(|&cap| cap <= 8), "{caps:?}");
        assert!(
            caps[5..].iter().filter(|&&cap| cap == 6).count() >= 5,
            "{caps:?}"
        );
    }

    #[test]
    fn climb_goes_up_while_batches_shorten_the_round_trip() {
        let mut c = climber();
        let caps = climb(&mut c, 8, |cap| 1_000_000 - 5_000 * cap as u64);
        assert_eq!(caps, [12, 16, 21, 25, 25, 25, 25, 25, 25]);
    }

    #[test]
    fn climb_goes_up_while_batches_cost_no_measurable_latency() {
        // A flat landscape (the difference is under the tolerance): up to the top.
        let mut c = climber();
        let caps = climb(&mut c, 8, |cap| 1_000_000 + 500 * cap as u64);
        assert_eq!(caps, [12, 16, 21, 25, 25, 25, 25, 25, 25]);
    }

    #[test]
    fn climb_going_down_turns_back_up_unless_it_gains() {
        // Above 12 the round trip is 10% longer; at 12 and below, flat.
        // Down from 16 gains (goes on down); down from 12 gains nothing
        // (back up); up from 9 costs nothing (goes on up, to 16 again).
        let mut c = climber();
        let caps = climb(
            &mut c,
            8,
            |cap| if cap > 12 { 1_100_000 } else { 1_000_000 },
        );
        assert_eq!(caps, [12, 16, 12, 9, 12, 16, 12, 9, 12]);
    }

    #[test]
    fn climb_tolerance_is_one_percent_either_way() {
        let from = |up: bool, rtt: u64| {
            let mut c = climber();
            c.up = up;
            c.last_ns = Some(1_000_000);
            epoch(&mut c, rtt);
            c.up
        };
        // Going up: 1% longer is within the tolerance, more is not.
        assert!(from(true, 1_010_000));
        assert!(!from(true, 1_010_001));
        // Going down: only more than 1% shorter keeps it going down.
        assert!(from(false, 990_000));
        assert!(!from(false, 989_999));
    }

    #[test]
    fn climb_compares_nothing_across_a_gap() {
        // Up to 16 on a round trip of 1 ms.
        let mut c = climber();
        assert_eq!(epoch(&mut c, 1_000_000), 16);
        // Answers stopped for a tick: the next epoch, twice as slow, is
        // compared with nothing and the climb goes on up.
        assert_eq!(c.observe(None, OPEN), 16);
        assert_eq!(epoch(&mut c, 2_000_000), 21);
        // The same with a connection gone: the tick that sees it is dropped.
        assert_eq!(c.observe(Some(8_000_000), OPEN - 1), 21);
        let caps: Vec<usize> = (0..CLIMB_TICKS)
            .map(|_| c.observe(Some(4_000_000), OPEN - 1))
            .collect();
        assert_eq!(caps.last(), Some(&25));
        assert_eq!(c.last_ns, Some(4_000_000));
        // And a half-done epoch is dropped, not mixed with the next.
        assert_eq!(c.observe(Some(1), OPEN - 1), 25);
        assert_eq!(c.observe(None, OPEN - 1), 25);
        assert_eq!((c.ticks, c.sum_ns, c.last_ns), (0, 0, None));
    }

    #[test]
    fn batch_counts_what_its_waits_brought() {
        let mut b = Batch::new(12);
        // A wait that brought 5 answers and the tick's expiry: 1 wait, 5.
        b.slept = true;
        b.aside_cqes = 1;
        b.after_reap(6);
        // A reap after an enter that did not wait: not counted.
        b.after_reap(3);
        // A wait that brought nothing (it timed out).
        b.slept = true;
        b.after_reap(0);
        // The cap moved down, then up.
        b.set_cap(6);
        b.set_cap(25);
        assert_eq!(
            b.seen,
            Batching {
                waits: 2,
                completions: 5,
                cap_min: 6,
                cap_max: 25,
            }
        );
    }

    #[test]
    fn batch_cap_lowers_what_is_waited_for() {
        let mut b = Batch::new(25);
        b.want = 20;
        b.set_cap(12);
        assert_eq!((b.cap, b.want), (12, 12));
        b.set_cap(30);
        assert_eq!((b.cap, b.want), (30, 12));
        b.set_cap(0);
        assert_eq!((b.cap, b.want), (1, 1));
    }

    #[test]
    fn climb_stays_near_the_best_cap() {
        // Round trip shortest at a cap of 16.
        let mut c = Climb::new(200, 1);
        c.observe(None, OPEN);
        let caps = climb(&mut c, 40, |cap| {
            1_000_000 + 2_000 * (cap as u64).abs_diff(16).pow(2)
        });
        assert!(
            caps[10..].iter().all(|&cap| (12..=21).contains(&cap)),
            "{caps:?}"
        );
    }

    #[test]
    fn tick_period_follows_the_round_trip() {
        assert_eq!(tick_period_ns(None), TICK_INITIAL_NS);
        assert_eq!(tick_period_ns(Some(800_000)), 400_000);
        assert_eq!(tick_period_ns(Some(10_000)), TICK_FLOOR_NS);
        assert_eq!(tick_period_ns(Some(1_000_000_000)), TICK_CEIL_NS);
    }
}
