//! The per-worker recorder: what one worker thread writes on every response
//! and error, without locks, atomics or allocation.

use hdrhistogram::Histogram;

use crate::classes::{merge_stats, ClassStats};
use crate::error::{add_to, ReportError};
use crate::error_kind::ErrorKind;
use crate::h2::{H2Settings, H2State};
use crate::hist::{add_into, new_latency_histogram};
use crate::tls::TlsState;

/// Status codes 0..=999 each have a counter; anything larger (not a valid
/// HTTP status) is counted in slot 0, reported as `"other"`.
pub(crate) const STATUS_SLOTS: usize = 1000;

/// Statistics of one worker. Not shared: each worker owns one and the run
/// merges them ([`Recorder::merge`]) at the end or per tick.
///
/// Latency is kept in two histograms: `latency_tick_us` holds the values
/// since the last [`take_interval`](Recorder::take_interval) and
/// `latency_folded_us` everything before it, so each response costs one
/// histogram record and the total is their sum. Counters are running totals;
/// the interval counts are differences from a mark set at each take.
#[derive(Clone, Debug)]
pub struct Recorder {
    latency_tick_us: Histogram<u64>,
    latency_folded_us: Histogram<u64>,
    requests: u64,
    bytes_received: u64,
    bytes_sent: u64,
    connects: u64,
    status: Box<[u64; STATUS_SLOTS]>,
    errors: [u64; ErrorKind::COUNT],
    /// `Other` errors per errno, in order of first occurrence.
    errno_counts: Vec<(i32, u64)>,
    /// `Parse` errors per cause, in order of first occurrence.
    parse_causes: Vec<(&'static str, u64)>,
    open_loop: Option<Box<OpenLoopState>>,
    /// https: handshakes (created by the first one).
    tls: Option<Box<TlsState>>,
    /// HTTP/2: protocol events (created by the first h2 connection).
    h2: Option<Box<H2State>>,
    unanswered: Unanswered,
    mark: IntervalMark,
    /// Workload runs: per-class figures, indexed by class (empty otherwise).
    classes: Vec<ClassStats>,
}

/// Requests left without an answer when the measured window closed: sent
/// and still in flight, or (open loop) intended and still waiting to leave.
/// A server that stalls at the end of a run answers none of them; counting
/// only what was answered would show a healthy tail. Those already older
/// than the answered requests' p99 are put in the latency histogram at
/// their age, a lower bound of their latency (younger ones are left out:
/// their latency is unknown and recording their age would bias it down).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Unanswered {
    /// Sent and not answered when the window closed (answers the loop read
    /// after it included): the window's responses plus these are exactly
    /// the requests sent in it.
    pub in_flight: u64,
    /// Open loop: intended in the window and never sent.
    pub unsent: u64,
    /// Of both, those recorded at their age (older than `threshold_us`).
    pub recorded: u64,
    /// The age of the oldest, µs (from its intended send in open loop).
    pub oldest_us: u64,
    /// The answered requests' p99 when the window closed, µs.
    pub threshold_us: u64,
}

impl Unanswered {
    /// Adds another worker's or report's.
    pub fn add(&mut self, o: &Unanswered) {
        self.in_flight += o.in_flight;
        self.unsent += o.unsent;
        self.recorded += o.recorded;
        self.oldest_us = self.oldest_us.max(o.oldest_us);
        self.threshold_us = self.threshold_us.max(o.threshold_us);
    }

    /// [`Unanswered::add`] for counts read from reports: a sum that does
    /// not fit in 64 bits is an error naming its key.
    pub(crate) fn checked_add(&mut self, o: &Unanswered) -> Result<(), ReportError> {
        let mut sum = *self;
        add_to(
            &mut sum.in_flight,
            o.in_flight,
            "unanswered_at_end.in_flight",
        )?;
        add_to(&mut sum.unsent, o.unsent, "unanswered_at_end.unsent")?;
        add_to(&mut sum.recorded, o.recorded, "unanswered_at_end.recorded")?;
        sum.oldest_us = sum.oldest_us.max(o.oldest_us);
        sum.threshold_us = sum.threshold_us.max(o.threshold_us);
        *self = sum;
        Ok(())
    }
}

/// The ages above which unanswered requests are recorded: the p99s of the
/// answered ones when the window closed (see [`Recorder::unanswered_censor`]).
#[derive(Clone, Copy, Debug)]
pub struct Censor {
    corrected_us: u64,
    uncorrected_us: u64,
}

/// What only an open-loop run records.
#[derive(Clone, Debug)]
pub(crate) struct OpenLoopState {
    /// Latency from the actual send (the corrected one, from the intended
    /// send time, is the recorder's main histogram).
    pub(crate) latency_uncorrected_us: Histogram<u64>,
    /// How late each send left versus its intended time.
    pub(crate) schedule_lag_us: Histogram<u64>,
    pub(crate) late_sends: u64,
    /// Of the late sends, those that waited for a free connection (every
    /// connection had a request in flight when they came due).
    pub(crate) late_waiting: u64,
    /// Of the late sends, those intended once connections were free again
    /// that waited behind the backlog for the catch-up limit (2× the rate).
    pub(crate) late_catch_up: u64,
    /// Sends that left (each intended send leaves or is dropped).
    pub(crate) sends: u64,
    pub(crate) dropped: u64,
}

impl OpenLoopState {
    fn new() -> OpenLoopState {
        OpenLoopState {
            latency_uncorrected_us: new_latency_histogram(),
            schedule_lag_us: new_latency_histogram(),
            late_sends: 0,
            late_waiting: 0,
            late_catch_up: 0,
            sends: 0,
            dropped: 0,
        }
    }
}

/// Running totals at the last `take_interval`.
#[derive(Clone, Copy, Debug, Default)]
struct IntervalMark {
    requests: u64,
    errors: u64,
    bytes_received: u64,
    by_kind: [u64; ErrorKind::COUNT],
}

/// What happened between two [`Recorder::take_interval`] calls.
#[derive(Clone, Debug)]
pub struct Interval {
    /// Responses completed.
    pub requests: u64,
    /// Errors of every kind.
    pub errors: u64,
    /// Response bytes received (on the wire: status line, headers, body).
    pub bytes: u64,
    /// Errors by kind (indexed by `ErrorKind as usize`).
    pub errors_by_kind: [u64; ErrorKind::COUNT],
    /// Latency of those responses, µs (corrected latency in open loop).
    pub latency: Histogram<u64>,
}

impl Interval {
    /// An empty interval.
    pub fn new() -> Interval {
        Interval {
            requests: 0,
            errors: 0,
            bytes: 0,
            errors_by_kind: [0; ErrorKind::COUNT],
            latency: new_latency_histogram(),
        }
    }

    /// Adds `other` (another worker's same tick) into `self`, exactly.
    pub fn merge(&mut self, other: &Interval) {
        self.requests += other.requests;
        self.errors += other.errors;
        self.bytes += other.bytes;
        for (mine, theirs) in self.errors_by_kind.iter_mut().zip(other.errors_by_kind) {
            *mine += theirs;
        }
        add_into(&mut self.latency, &other.latency);
    }
}

impl Default for Interval {
    fn default() -> Self {
        Interval::new()
    }
}

impl Default for Recorder {
    fn default() -> Self {
        Recorder::new()
    }
}

impl Recorder {
    /// A closed-loop recorder: latency histogram (1 µs .. 1 h, 3 significant
    /// digits), counters, status codes and errors.
    pub fn new() -> Self {
        Recorder {
            latency_tick_us: new_latency_histogram(),
            latency_folded_us: new_latency_histogram(),
            requests: 0,
            bytes_received: 0,
            bytes_sent: 0,
            connects: 0,
            status: Box::new([0; STATUS_SLOTS]),
            errors: [0; ErrorKind::COUNT],
            errno_counts: Vec::new(),
            parse_causes: Vec::new(),
            open_loop: None,
            tls: None,
            h2: None,
            unanswered: Unanswered::default(),
            mark: IntervalMark::default(),
            classes: Vec::new(),
        }
    }

    /// An open-loop recorder: also keeps the uncorrected latency and the
    /// schedule lag histograms, late sends and dropped sends.
    pub fn new_open_loop() -> Self {
        let mut r = Recorder::new();
        r.open_loop = Some(Box::new(OpenLoopState::new()));
        r
    }

    /// Whether this recorder keeps open-loop figures.
    pub fn is_open_loop(&self) -> bool {
        self.open_loop.is_some()
    }

    /// One complete response: its latency, status code and size on the wire
    /// (status line, headers and body as received).
    #[inline]
    pub fn record_response(&mut self, latency_us: u64, status: u16, wire_bytes: u64) {
        self.latency_tick_us.saturating_record(latency_us);
        self.requests += 1;
        self.bytes_received += wire_bytes;
        let slot = status as usize;
        let slot = if slot < STATUS_SLOTS { slot } else { 0 };
        self.status[slot] += 1;
    }

    /// One complete response in open loop: latency from the intended send
    /// time (`corrected_us`, the main figure) and from the actual send
    /// (`uncorrected_us`). How late its send left was recorded by
    /// [`Recorder::record_send`].
    #[inline]
    pub fn record_response_open_loop(
        &mut self,
        corrected_us: u64,
        uncorrected_us: u64,
        status: u16,
        wire_bytes: u64,
    ) {
        self.record_response(corrected_us, status, wire_bytes);
        let ol = self.open_loop_mut();
        ol.latency_uncorrected_us.saturating_record(uncorrected_us);
    }

    /// One failed request or connection attempt.
    #[inline]
    pub fn record_error(&mut self, kind: ErrorKind) {
        self.errors[kind as usize] += 1;
    }

    /// A failure reported as an `errno`. Values with a category of their own
    /// (ECONNREFUSED, ECONNRESET, EPIPE, EMFILE, ENFILE, EADDRNOTAVAIL; see
    /// [`ErrorKind::from_errno`]) count there; every other value counts as
    /// [`ErrorKind::Other`] and in a per-errno breakdown (JSON key
    /// `"errno_ENOBUFS"`). Rare path: the breakdown allocates on the first
    /// occurrence of each errno.
    pub fn record_errno(&mut self, errno: i32) {
        let kind = ErrorKind::from_errno(errno);
        self.record_error(kind);
        if kind == ErrorKind::Other {
            match self.errno_counts.iter_mut().find(|(e, _)| *e == errno) {
                Some((_, n)) => *n += 1,
                None => self.errno_counts.push((errno, 1)),
            }
        }
    }

    /// A response that failed to parse: counts [`ErrorKind::Parse`] and the
    /// cause (`xload_http::ParseError::name()`). Allocation-free after the
    /// first occurrence of a cause.
    #[inline]
    pub fn record_parse_error(&mut self, cause: &'static str) {
        self.record_error(ErrorKind::Parse);
        // Causes are few (a dozen at most): a linear scan over a short
        // vector beats hashing. Pointer equality first, then content, so
        // equal strings from different statics still share a slot.
        match self
            .parse_causes
            .iter_mut()
            .find(|(c, _)| std::ptr::eq(*c, cause) || *c == cause)
        {
            Some((_, n)) => *n += 1,
            None => self.parse_causes.push((cause, 1)),
        }
    }

    /// Request bytes written to the wire.
    #[inline]
    /// Bytes received that no response counted (HTTP/2 frames, counted as read).
    pub fn add_bytes_received(&mut self, n: u64) {
        self.bytes_received += n;
    }

    pub fn add_bytes_sent(&mut self, n: u64) {
        self.bytes_sent += n;
    }

    /// Workload runs: keeps per-class figures for these classes (by index).
    pub fn set_classes(&mut self, names: &[&str]) {
        self.classes = names.iter().map(|n| ClassStats::new(n)).collect();
    }

    /// A response of class `class` (also recorded by `record_response*`).
    #[inline]
    pub fn record_class(&mut self, class: usize, latency_us: u64) {
        if let Some(c) = self.classes.get_mut(class) {
            c.record(latency_us);
        }
    }

    /// A response of class `class` for `path` failed a check: counted as a
    /// [`ErrorKind::Consistency`] error and for the class, with the path
    /// among the class's first offenders. Rare path.
    pub fn record_consistency(&mut self, class: usize, path: &str, reason: &dyn std::fmt::Display) {
        self.record_error(ErrorKind::Consistency);
        if let Some(c) = self.classes.get_mut(class) {
            c.record_consistency(path, reason);
        }
    }

    /// A response of class `class` for `path` gave no value to capture
    /// `name`: a consistency error of the class, counted as a capture failure.
    pub fn record_capture_failure(
        &mut self,
        class: usize,
        path: &str,
        reason: &dyn std::fmt::Display,
    ) {
        self.record_consistency(class, path, reason);
        if let Some(c) = self.classes.get_mut(class) {
            c.record_capture_failure();
        }
    }

    /// A session started over because of a response (or a missing value)
    /// of class `class`.
    pub fn record_session_restart(&mut self, class: usize) {
        if let Some(c) = self.classes.get_mut(class) {
            c.record_session_restart();
        }
    }

    /// Per-class figures (empty unless [`Recorder::set_classes`] was called).
    pub fn classes(&self) -> &[ClassStats] {
        &self.classes
    }

    /// Open loop: intended sends dropped because the queue cap was hit.
    #[inline]
    pub fn record_dropped(&mut self, n: u64) {
        self.open_loop_mut().dropped += n;
    }

    /// Open loop: a send left after its intended time.
    #[inline]
    pub fn record_late_send(&mut self) {
        self.open_loop_mut().late_sends += 1;
    }

    /// Open loop: a send left after its intended time because it waited for
    /// a free connection (a late send, counted apart as well).
    #[inline]
    pub fn record_late_send_waiting(&mut self) {
        let ol = self.open_loop_mut();
        ol.late_sends += 1;
        ol.late_waiting += 1;
    }

    /// Open loop: a send intended after the connections were free again,
    /// late because the backlog of a server stall drains at most at twice
    /// the rate (a late send, counted apart as well).
    #[inline]
    pub fn record_late_send_catch_up(&mut self) {
        let ol = self.open_loop_mut();
        ol.late_sends += 1;
        ol.late_catch_up += 1;
    }

    /// Open loop: a send left, `schedule_lag_us` after its intended time
    /// (every send, answered or not, is in the lag's distribution).
    #[inline]
    pub fn record_send(&mut self, schedule_lag_us: u64) {
        let ol = self.open_loop_mut();
        ol.sends += 1;
        ol.schedule_lag_us.saturating_record(schedule_lag_us);
    }

    /// The thresholds for [`Recorder::record_unanswered`], taken once when
    /// the window closes, before any unanswered request is recorded.
    pub fn unanswered_censor(&mut self) -> Censor {
        // Under 100 answers a p99 is no figure: the slowest answer stands
        // in; with none, nothing is known to be slow and nothing is
        // recorded (an age alone is no latency).
        let p99 = |h: &Histogram<u64>| {
            if h.is_empty() {
                u64::MAX
            } else if h.len() < 100 {
                h.max()
            } else {
                h.value_at_quantile(0.99)
            }
        };
        let corrected_us = p99(&self.latency_histogram());
        let uncorrected_us = self
            .open_loop
            .as_ref()
            .map_or(corrected_us, |o| p99(&o.latency_uncorrected_us));
        if corrected_us != u64::MAX {
            self.unanswered.threshold_us = self.unanswered.threshold_us.max(corrected_us);
        }
        Censor {
            corrected_us,
            uncorrected_us,
        }
    }

    /// `n` requests in flight when the window closed whose answers came
    /// after it: in flight, with no age to record.
    pub fn record_answered_at_close(&mut self, n: u64) {
        self.unanswered.in_flight += n;
    }

    /// A request left unanswered when the window closed, `age_us` old (from
    /// its intended send in open loop, else from its send);
    /// `since_sent_us` is None for an open-loop send that never left. See
    /// [`Unanswered`]. Not for the hot path.
    pub fn record_unanswered(&mut self, c: &Censor, age_us: u64, since_sent_us: Option<u64>) {
        let u = &mut self.unanswered;
        match since_sent_us {
            Some(_) => u.in_flight += 1,
            None => u.unsent += 1,
        }
        u.oldest_us = u.oldest_us.max(age_us);
        if age_us > c.corrected_us {
            u.recorded += 1;
            self.latency_tick_us.saturating_record(age_us);
        }
        if let (Some(ol), Some(sent)) = (self.open_loop.as_mut(), since_sent_us) {
            if sent > c.uncorrected_us {
                ol.latency_uncorrected_us.saturating_record(sent);
            }
        }
    }

    /// Requests left unanswered when the window closed.
    pub fn unanswered(&self) -> Unanswered {
        self.unanswered
    }

    /// https: a TLS handshake completed, `connect_us` after its TCP connect
    /// began and `handshake_us` after it connected, of which `compute_ns` in
    /// the TLS library's computation; `version` and `cipher` are what it
    /// negotiated (kept from the first). Once per connection; the first call
    /// allocates the TLS state.
    pub fn record_tls_handshake(
        &mut self,
        connect_us: u64,
        handshake_us: u64,
        compute_ns: u64,
        resumed: bool,
        version: &'static str,
        cipher: &'static str,
    ) {
        let t = self.tls.get_or_insert_with(|| Box::new(TlsState::new()));
        t.connect_us.saturating_record(connect_us);
        t.handshake_us.saturating_record(handshake_us);
        t.compute_ns += compute_ns;
        if resumed {
            t.resumed += 1;
        } else {
            t.full += 1;
        }
        if t.version.is_empty() {
            t.version = version;
            t.cipher = cipher;
        }
    }

    /// https: full and resumed handshakes completed (0, 0 for plain http).
    pub fn tls_handshakes(&self) -> (u64, u64) {
        self.tls.as_ref().map_or((0, 0), |t| (t.full, t.resumed))
    }

    fn h2_mut(&mut self) -> &mut H2State {
        self.h2.get_or_insert_with(Box::default)
    }

    /// HTTP/2: a connection speaks h2 (once per connection; the first
    /// allocates the h2 state). `limit`: the streams it may carry at once.
    pub fn record_h2_connection(&mut self, limit: u32) {
        let h = self.h2_mut();
        h.streams_limit = h.streams_limit.max(limit);
    }

    /// HTTP/2: the server's SETTINGS (kept from the first).
    pub fn record_h2_settings(&mut self, s: H2Settings) {
        let h = self.h2_mut();
        if h.settings.is_none() {
            h.settings = Some(s);
        }
    }

    /// HTTP/2: a GOAWAY arrived.
    pub fn record_h2_goaway(&mut self) {
        self.h2_mut().goaways += 1;
    }

    /// HTTP/2: a stream the server never processed is sent again.
    pub fn record_h2_retry(&mut self) {
        self.h2_mut().retried += 1;
    }

    /// HTTP/2: the server reset a stream with `code` (the RFC's name).
    pub fn record_h2_reset(&mut self, code: &'static str) {
        self.h2_mut().reset_by(code);
    }

    /// HTTP/2: the connection failed with `cause`; counted as
    /// [`ErrorKind::H2Connection`] too.
    pub fn record_h2_connection_error(&mut self, cause: &'static str) {
        self.record_error(ErrorKind::H2Connection);
        self.h2_mut().conn_error(cause);
    }

    /// HTTP/2: streams waited `ns` for the server's flow-control window.
    pub fn add_h2_stall_ns(&mut self, ns: u64) {
        self.h2_mut().stall_ns += ns;
    }

    pub(crate) fn h2(&self) -> Option<&H2State> {
        self.h2.as_deref()
    }

    pub(crate) fn tls(&self) -> Option<&TlsState> {
        self.tls.as_deref()
    }

    /// A connection was opened (connections per second without keep-alive).
    #[inline]
    pub fn record_connect(&mut self) {
        self.connects += 1;
    }

    /// Responses completed.
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Errors of every kind.
    pub fn errors_total(&self) -> u64 {
        self.errors.iter().sum()
    }

    /// Errors of one kind.
    pub fn error_count(&self, kind: ErrorKind) -> u64 {
        self.errors[kind as usize]
    }

    /// Responses with status `code` (codes above 999 share slot 0).
    pub fn status_count(&self, code: u16) -> u64 {
        self.status.get(code as usize).copied().unwrap_or(0)
    }

    /// Response bytes received.
    pub fn bytes_received(&self) -> u64 {
        self.bytes_received
    }

    /// Request bytes sent.
    pub fn bytes_sent(&self) -> u64 {
        self.bytes_sent
    }

    /// Connections opened.
    pub fn connects(&self) -> u64 {
        self.connects
    }

    /// Open loop: late sends (0 in closed loop).
    pub fn late_sends(&self) -> u64 {
        self.open_loop.as_ref().map_or(0, |o| o.late_sends)
    }

    /// Open loop: late sends that waited for a free connection (0 in closed loop).
    pub fn late_waiting(&self) -> u64 {
        self.open_loop.as_ref().map_or(0, |o| o.late_waiting)
    }

    /// Open loop: late sends held by the catch-up limit (0 in closed loop).
    pub fn late_catch_up(&self) -> u64 {
        self.open_loop.as_ref().map_or(0, |o| o.late_catch_up)
    }

    /// Open loop: sends that left (0 in closed loop).
    pub fn sends(&self) -> u64 {
        self.open_loop.as_ref().map_or(0, |o| o.sends)
    }

    /// Open loop: dropped sends (0 in closed loop).
    pub fn dropped(&self) -> u64 {
        self.open_loop.as_ref().map_or(0, |o| o.dropped)
    }

    /// `Other` errors per errno, in order of first occurrence.
    pub fn errno_counts(&self) -> &[(i32, u64)] {
        &self.errno_counts
    }

    /// `Parse` errors per cause, in order of first occurrence.
    pub fn parse_causes(&self) -> &[(&'static str, u64)] {
        &self.parse_causes
    }

    /// Status code counts: (code, count) for every code seen, ascending.
    /// Codes above 999 are reported as code 0.
    pub fn status_counts(&self) -> impl Iterator<Item = (u16, u64)> + '_ {
        self.status
            .iter()
            .enumerate()
            .filter(|(_, n)| **n > 0)
            .map(|(code, n)| (code as u16, *n))
    }

    /// The latency histogram of everything recorded (µs; corrected latency
    /// in open loop). Allocates: not for the hot path.
    pub fn latency_histogram(&self) -> Histogram<u64> {
        let mut h = self.latency_folded_us.clone();
        add_into(&mut h, &self.latency_tick_us);
        h
    }

    /// Open loop: the uncorrected latency histogram (µs).
    pub fn latency_uncorrected_histogram(&self) -> Option<&Histogram<u64>> {
        self.open_loop.as_ref().map(|o| &o.latency_uncorrected_us)
    }

    /// Open loop: the schedule lag histogram (µs).
    pub fn schedule_lag_histogram(&self) -> Option<&Histogram<u64>> {
        self.open_loop.as_ref().map(|o| &o.schedule_lag_us)
    }

    /// End of warm-up: forget everything recorded so far. Keeps the
    /// open-loop mode and the allocated breakdown capacity.
    pub fn reset(&mut self) {
        self.latency_tick_us.reset();
        self.latency_folded_us.reset();
        self.requests = 0;
        self.bytes_received = 0;
        self.bytes_sent = 0;
        self.connects = 0;
        self.status.fill(0);
        self.errors = [0; ErrorKind::COUNT];
        self.errno_counts.clear();
        self.parse_causes.clear();
        self.unanswered = Unanswered::default();
        self.classes.iter_mut().for_each(ClassStats::reset);
        if let Some(t) = self.tls.as_mut() {
            t.reset();
        }
        if let Some(h) = self.h2.as_mut() {
            h.reset();
        }
        if let Some(ol) = self.open_loop.as_mut() {
            ol.latency_uncorrected_us.reset();
            ol.schedule_lag_us.reset();
            ol.late_sends = 0;
            ol.late_waiting = 0;
            ol.late_catch_up = 0;
            ol.sends = 0;
            ol.dropped = 0;
        }
        self.mark = IntervalMark::default();
    }

    /// Adds everything `other` recorded into `self`, exactly: histogram
    /// counts per value, counters, status codes, errors and breakdowns.
    /// Interval state merges too, so the next `take_interval` of `self`
    /// covers what both had not yet taken.
    pub fn merge(&mut self, other: &Recorder) {
        add_into(&mut self.latency_tick_us, &other.latency_tick_us);
        add_into(&mut self.latency_folded_us, &other.latency_folded_us);
        self.requests += other.requests;
        self.bytes_received += other.bytes_received;
        self.bytes_sent += other.bytes_sent;
        self.connects += other.connects;
        for (mine, theirs) in self.status.iter_mut().zip(other.status.iter()) {
            *mine += *theirs;
        }
        for (mine, theirs) in self.errors.iter_mut().zip(other.errors.iter()) {
            *mine += *theirs;
        }
        for &(errno, n) in &other.errno_counts {
            match self.errno_counts.iter_mut().find(|(e, _)| *e == errno) {
                Some((_, m)) => *m += n,
                None => self.errno_counts.push((errno, n)),
            }
        }
        for &(cause, n) in &other.parse_causes {
            match self.parse_causes.iter_mut().find(|(c, _)| *c == cause) {
                Some((_, m)) => *m += n,
                None => self.parse_causes.push((cause, n)),
            }
        }
        self.unanswered.add(&other.unanswered);
        merge_stats(&mut self.classes, &other.classes);
        if let Some(theirs) = other.tls.as_ref() {
            self.tls
                .get_or_insert_with(|| Box::new(TlsState::new()))
                .merge(theirs);
        }
        if let Some(theirs) = other.h2.as_ref() {
            self.h2.get_or_insert_with(Box::default).merge(theirs);
        }
        if let Some(theirs) = other.open_loop.as_ref() {
            let mine = self.open_loop_mut();
            add_into(
                &mut mine.latency_uncorrected_us,
                &theirs.latency_uncorrected_us,
            );
            add_into(&mut mine.schedule_lag_us, &theirs.schedule_lag_us);
            mine.late_sends += theirs.late_sends;
            mine.late_waiting += theirs.late_waiting;
            mine.late_catch_up += theirs.late_catch_up;
            mine.sends += theirs.sends;
            mine.dropped += theirs.dropped;
        }
        self.mark.requests += other.mark.requests;
        self.mark.errors += other.mark.errors;
        self.mark.bytes_received += other.mark.bytes_received;
        for (mine, theirs) in self.mark.by_kind.iter_mut().zip(other.mark.by_kind) {
            *mine += theirs;
        }
    }

    /// The counts and latency histogram since the previous call (or since
    /// creation / reset). Call once per tick; allocates one histogram.
    pub fn take_interval(&mut self) -> Interval {
        let latency = std::mem::replace(&mut self.latency_tick_us, new_latency_histogram());
        add_into(&mut self.latency_folded_us, &latency);
        let errors = self.errors_total();
        let mut errors_by_kind = self.errors;
        for (e, m) in errors_by_kind.iter_mut().zip(self.mark.by_kind) {
            *e -= m;
        }
        let interval = Interval {
            requests: self.requests - self.mark.requests,
            errors: errors - self.mark.errors,
            bytes: self.bytes_received - self.mark.bytes_received,
            errors_by_kind,
            latency,
        };
        self.mark = IntervalMark {
            requests: self.requests,
            errors,
            bytes_received: self.bytes_received,
            by_kind: self.errors,
        };
        interval
    }

    pub(crate) fn open_loop(&self) -> Option<&OpenLoopState> {
        self.open_loop.as_deref()
    }

    /// The open-loop state, created on first use when the recorder was made
    /// with [`Recorder::new`] (one allocation, once).
    #[inline]
    fn open_loop_mut(&mut self) -> &mut OpenLoopState {
        self.open_loop
            .get_or_insert_with(|| Box::new(OpenLoopState::new()))
    }
}
