//! Connection bookkeeping shared by both drivers: the requests in flight on a
//! connection, feeding received bytes to the codec, recording what completed,
//! and naming what went wrong. No I/O here.

use std::sync::Arc;

use xload_http::h2::{self, ErrorCode, Event, H2Request};
use xload_http::{Limits, Parse, ParseError, Response, ResponseParser};
use xload_stats::{ErrorKind, H2Settings, Recorder};

use crate::clock::ns_to_us;
use crate::mix::ConnMix;

/// When one request was meant to leave and when it did.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Sent {
    pub intended_ns: u64,
    pub sent_ns: u64,
    /// Open loop: the send was counted in the measured window's `sends`
    /// (it left once the window had opened). Only the answers to those
    /// count as the window's requests, and only those unanswered as its
    /// `in_flight`: requests + in_flight = sends, exactly. A closed loop
    /// credits every answer of the window: always true there.
    pub counted: bool,
}

/// A fixed-capacity FIFO of the requests in flight on one connection.
/// INVARIANT: `len <= slots.len()`; allocated once per connection.
pub(crate) struct Pending {
    slots: Box<[Sent]>,
    head: usize,
    len: usize,
}

impl Pending {
    pub(crate) fn with_capacity(n: usize) -> Pending {
        Pending {
            slots: vec![Sent::default(); n.max(1)].into_boxed_slice(),
            head: 0,
            len: 0,
        }
    }

    #[inline]
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    #[inline]
    pub(crate) fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Room for more requests.
    #[cfg(test)]
    pub(crate) fn free(&self) -> usize {
        self.slots.len() - self.len
    }

    #[inline]
    pub(crate) fn push(&mut self, s: Sent) {
        debug_assert!(self.len < self.slots.len());
        let cap = self.slots.len();
        let i = (self.head + self.len) % cap;
        self.slots[i] = s;
        self.len += 1;
    }

    #[inline]
    pub(crate) fn pop(&mut self) -> Option<Sent> {
        if self.len == 0 {
            return None;
        }
        let s = self.slots[self.head];
        self.head = (self.head + 1) % self.slots.len();
        self.len -= 1;
        Some(s)
    }

    /// The requests in flight, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Sent> + '_ {
        (0..self.len).map(|i| self.slots[(self.head + i) % self.slots.len()])
    }

    /// The oldest request's send time, for the timeout sweep.
    #[inline]
    pub(crate) fn oldest_sent_ns(&self) -> Option<u64> {
        (self.len > 0).then(|| self.slots[self.head].sent_ns)
    }

    pub(crate) fn clear(&mut self) {
        self.head = 0;
        self.len = 0;
    }
}

/// How responses are timed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timing {
    /// Latency from the actual send.
    Closed,
    /// Latency from the intended send time (corrected) and from the actual send
    /// (uncorrected). Every response completed in the measured window counts,
    /// whenever its send was intended: a server that fell behind is credited
    /// with what it served, and a generator that fell behind shows it in its
    /// late sends and schedule lag.
    Open,
}

/// What feeding bytes led to.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Fed {
    /// All bytes consumed; the connection stays usable.
    More,
    /// A response said the connection ends (Connection: close, HTTP/1.0, 101):
    /// close it and open another. Not an error.
    Close,
    /// The bytes were not a valid response: counted, the connection is replaced.
    Invalid(ParseError),
    /// A response arrived with no request in flight.
    Unsolicited,
    /// HTTP/2: a connection error (counted, its GOAWAY queued): the
    /// connection is replaced and its open streams fail.
    Failed,
}

/// The protocol half of a connection: parser and requests in flight.
///
/// This is the seam between the drivers and the HTTP version: a driver
/// feeds received bytes ([`Exchange::feed`]), puts what
/// [`Exchange::outgoing`] or (HTTP/2) the output buffer holds on the wire,
/// and asks what is in flight ([`Exchange::in_flight`],
/// [`Exchange::sent_iter`], [`Exchange::oldest_sent_ns`]); whether the
/// connection speaks HTTP/1.1 (a FIFO of pipelined requests) or HTTP/2
/// (streams completing in any order) is the exchange's business.
pub(crate) struct Exchange {
    parser: ResponseParser,
    /// HTTP/1.1: the requests in flight, oldest first.
    pub pending: Pending,
    /// HTTP/2: the connection's codec and streams (kept across reconnects
    /// with its buffers; `h2_on` says whether this connection speaks it).
    h2: Option<Box<H2Conn>>,
    h2_on: bool,
    /// The smallest response (bytes on the wire) this connection has seen.
    pub min_wire: u64,
    /// Workload runs: the request in flight and its checker (set at the first send).
    mix: Option<Box<ConnMix>>,
}

impl Exchange {
    pub(crate) fn new(head: bool, pipeline: usize) -> Exchange {
        Exchange {
            parser: ResponseParser::new(Limits::default(), head),
            pending: Pending::with_capacity(pipeline),
            h2: None,
            h2_on: false,
            min_wire: u64::MAX,
            mix: None,
        }
    }

    /// This connection speaks HTTP/2 (`h2`), starting now: the preface and
    /// SETTINGS are queued in its output. Else (None) HTTP/1.1.
    pub(crate) fn begin(&mut self, h2: Option<&crate::plan::H2Plan>, rec: &mut Recorder, now: u64) {
        self.h2_on = h2.is_some();
        if let Some(p) = h2 {
            let c = self.h2.get_or_insert_with(|| Box::new(H2Conn::new(p)));
            c.start(rec, now);
        }
    }

    /// HTTP/2: this connection speaks it.
    #[inline]
    pub(crate) fn is_h2(&self) -> bool {
        self.h2_on
    }

    /// HTTP/2: the connection's state (when it speaks h2).
    #[inline]
    pub(crate) fn h2(&mut self) -> Option<&mut H2Conn> {
        if self.h2_on {
            self.h2.as_deref_mut()
        } else {
            None
        }
    }

    /// HTTP/2: the connection's state (when it speaks h2), to read.
    #[inline]
    pub(crate) fn h2_ref(&self) -> Option<&H2Conn> {
        self.h2.as_deref().filter(|_| self.h2_on)
    }

    /// io_uring teardown with a send possibly still in the kernel: the
    /// HTTP/2 buffers are never freed.
    pub(crate) fn leak_h2(&mut self) {
        if let Some(h) = self.h2.take() {
            std::mem::forget(h);
        }
    }

    /// HTTP/2: its state, even on a connection that no longer speaks it
    /// (a send of its output may still be in the kernel).
    #[inline]
    pub(crate) fn h2_any(&mut self) -> Option<&mut H2Conn> {
        self.h2.as_deref_mut()
    }

    /// Requests in flight.
    #[inline]
    pub(crate) fn in_flight(&self) -> usize {
        match &self.h2 {
            Some(h) if self.h2_on => h.in_flight,
            _ => self.pending.len(),
        }
    }

    /// Nothing is in flight.
    #[inline]
    pub(crate) fn is_idle(&self) -> bool {
        self.in_flight() == 0
    }

    /// The requests in flight (HTTP/1.1: oldest first).
    pub(crate) fn sent_iter(&self) -> impl Iterator<Item = Sent> + '_ {
        let h2 = self.h2.as_deref().filter(|_| self.h2_on);
        self.pending
            .iter()
            .chain(h2.into_iter().flat_map(|h| h.sent_iter()))
    }

    /// The oldest request's send time, for the timeout sweep.
    pub(crate) fn oldest_sent_ns(&self) -> Option<u64> {
        match &self.h2 {
            Some(h) if self.h2_on => h.sent_iter().map(|s| s.sent_ns).min(),
            _ => self.pending.oldest_sent_ns(),
        }
    }

    /// Closed loop: how many more requests the connection takes now (HTTP/1.1: `pipeline`
    /// when nothing is in flight; HTTP/2: the streams it may still open).
    #[inline]
    pub(crate) fn room(&self, pipeline: usize) -> usize {
        match &self.h2 {
            Some(h) if self.h2_on => h.room(),
            _ if self.pending.is_empty() => pipeline,
            _ => 0,
        }
    }

    /// Queues one request sent as `sent`: HTTP/1.1 remembers it (its bytes are
    /// the caller's to send); HTTP/2 opens a stream, its frames in the output.
    #[inline]
    pub(crate) fn push(&mut self, sent: Sent) {
        match self.h2.as_deref_mut() {
            Some(h) if self.h2_on => h.open(sent),
            _ => self.pending.push(sent),
        }
    }

    /// Workload runs: the next request sent on this connection (the next
    /// [`Exchange::push`]) is `pick`. HTTP/1.1: one request in flight, slot 0;
    /// HTTP/2: the slot of the stream it opens.
    #[inline]
    pub(crate) fn start(&mut self, pick: xload_workload::Pick, now_ns: u64) {
        let Some(mix) = &mut self.mix else { return };
        if self.h2_on {
            if let Some(h) = self.h2.as_deref_mut() {
                return h.start_request(mix, pick, now_ns);
            }
        }
        let head = mix.start(0, pick, now_ns);
        self.parser.set_head(head);
    }

    pub(crate) fn has_mix(&self) -> bool {
        self.mix.is_some()
    }

    /// Workload runs: gives the connection the plan's requests (once), and
    /// with sessions the session and its seed; `slots`: requests in flight
    /// at most (HTTP/2's streams per connection, else 1).
    pub(crate) fn attach_mix(
        &mut self,
        requests: Option<std::sync::Arc<xload_workload::RequestPlan>>,
        session: Option<(&xload_workload::Session, u64)>,
        cookies: bool,
        slots: usize,
    ) {
        self.mix = requests.map(|r| Box::new(ConnMix::new(r, session, cookies, slots)));
    }

    /// Workload runs: the connection's workload state, if any.
    pub(crate) fn mix_mut(&mut self) -> Option<&mut ConnMix> {
        self.mix.as_deref_mut()
    }

    /// The bytes to put on the wire: the workload's request in flight, or
    /// `batch` (the run's one request, repeated for the pipeline).
    #[inline]
    pub(crate) fn outgoing<'a>(&'a self, batch: &'a [u8]) -> &'a [u8] {
        match &self.mix {
            Some(m) => m.request(0),
            None => batch,
        }
    }

    /// Whether part of a response has been parsed (its rest is still due).
    #[inline]
    pub(crate) fn mid_response(&self) -> bool {
        self.parser.in_progress()
    }

    /// Forget everything: the connection was replaced.
    pub(crate) fn reset(&mut self) {
        self.parser.reset();
        self.pending.clear();
        if let Some(h) = self.h2.as_deref_mut() {
            h.reset();
        }
        self.h2_on = false;
        if let Some(m) = &mut self.mix {
            m.restart_session();
        }
    }

    /// Feeds received bytes; records each completed response. Returns the number
    /// of responses completed and what the connection should do next.
    #[inline]
    pub(crate) fn feed(
        &mut self,
        mut data: &[u8],
        now_ns: u64,
        rec: &mut Recorder,
        timing: Timing,
    ) -> (u32, Fed) {
        if self.h2_on {
            if let Some(h) = self.h2.as_deref_mut() {
                return h.feed(data, now_ns, rec, timing, self.mix.as_deref_mut());
            }
        }
        let mut done = 0;
        // A 204 or 304 with bytes behind it in this receive: recorded once
        // those bytes turn out not to be its body (then the exchange counts
        // as that error alone, not as a response and an error).
        let mut held: Option<Response> = None;
        if let Some(m) = &mut self.mix {
            m.received(data);
        }
        loop {
            let parsed = match &mut self.mix {
                // (A workload has one request in flight: what follows a held
                // response is no body of its.)
                Some(m) if m.feeds_body(0) && held.is_none() => {
                    self.parser.parse_body(data, |b| m.body(0, b))
                }
                _ => self.parser.parse(data),
            };
            if let Some(response) = held.take() {
                if parsed == Err(ParseError::BodyAfterBodilessStatus) {
                    return (done, Fed::Invalid(ParseError::BodyAfterBodilessStatus));
                }
                // Still pending: popped here, with the latency of its completion.
                self.finish(response, now_ns, rec, timing);
                done += 1;
            }
            match parsed {
                Ok(Parse::Partial) => return (done, Fed::More),
                Ok(Parse::Complete { consumed, response }) => {
                    if self.pending.is_empty() {
                        return (done, Fed::Unsolicited);
                    }
                    data = &data[consumed.min(data.len())..];
                    if response.keep_alive
                        && matches!(response.status, 204 | 304)
                        && !data.is_empty()
                    {
                        held = Some(response);
                        continue;
                    }
                    self.finish(response, now_ns, rec, timing);
                    done += 1;
                    if !response.keep_alive {
                        return (done, Fed::Close);
                    }
                    if data.is_empty() {
                        return (done, Fed::More);
                    }
                }
                Err(e) => return (done, Fed::Invalid(e)),
            }
        }
    }

    /// Records a completed response for the oldest request in flight
    /// (the caller checked there is one).
    #[inline]
    fn finish(&mut self, response: Response, now_ns: u64, rec: &mut Recorder, timing: Timing) {
        let Some(sent) = self.pending.pop() else {
            return;
        };
        self.min_wire = self.min_wire.min(response.wire_bytes);
        let latency_us = record(
            rec,
            sent,
            now_ns,
            response.status,
            response.wire_bytes,
            timing,
        );
        if let Some(m) = &mut self.mix {
            let (status, body) = (response.status, response.body_bytes);
            m.finish(0, rec, latency_us, status, body, now_ns);
        }
    }

    /// The peer closed its side. Returns whether a response completed (a
    /// close-delimited body) and the error to count, if any.
    pub(crate) fn eof(
        &mut self,
        now_ns: u64,
        rec: &mut Recorder,
        timing: Timing,
    ) -> (bool, Option<ErrorKind>) {
        if self.h2_on {
            // HTTP/2 frames every response: an end with streams open loses them.
            return match self.in_flight() {
                0 => (false, None),
                _ => (false, Some(ErrorKind::Closed)),
            };
        }
        match self.parser.eof() {
            Ok(Some(response)) => match self.pending.pop() {
                Some(sent) => {
                    let latency_us = record(
                        rec,
                        sent,
                        now_ns,
                        response.status,
                        response.wire_bytes,
                        timing,
                    );
                    if let Some(m) = &mut self.mix {
                        let (status, body) = (response.status, response.body_bytes);
                        m.finish(0, rec, latency_us, status, body, now_ns);
                    }
                    (true, None)
                }
                None => (false, Some(ErrorKind::Parse)),
            },
            Ok(None) if self.pending.is_empty() => (false, None),
            Ok(None) => (false, Some(ErrorKind::Closed)),
            Err(_) => (false, Some(ErrorKind::EofMidResponse)),
        }
    }
}

/// One connection's HTTP/2 side: the codec, the streams in flight (a slot
/// per stream, its tag, allocated once), the output buffer, and the streams
/// to send again. Feeding it returns [`Fed::Close`] once a connection that
/// may open no more streams (GOAWAY) has none open: it is replaced.
pub(crate) struct H2Conn {
    conn: h2::Connection<u32>,
    reqs: Arc<[H2Request]>,
    streams: u32,
    /// Requests with a body: flow-control stalls are tracked.
    has_body: bool,
    /// By tag (the stream's slot): when its request was meant to leave and did.
    slots: Box<[Sent]>,
    live: Box<[bool]>,
    /// Free slots (a stack).
    free: Vec<u32>,
    pub in_flight: usize,
    /// Bytes to send: preface, requests, ACKs, WINDOW_UPDATEs.
    pub out: Vec<u8>,
    /// epoll: bytes of `out` written.
    pub written: usize,
    /// io_uring: bytes handed to a send in the kernel (left untouched until
    /// its completion).
    flight: Vec<u8>,
    flight_live: bool,
    /// Open loop: the connection is in the driver's idle list.
    pub listed: bool,
    /// When the connection started (its SETTINGS must be acknowledged in time).
    started_ns: u64,
    /// Since when a request body waits for window (None: none waits).
    stall_since: Option<u64>,
    /// Since when the server's SETTINGS allow no stream at all and none is
    /// open (None: streams may open, or some are).
    shut_since: Option<u64>,
    settings_noted: bool,
    /// Streams to send again (never processed by the server) since the last
    /// [`H2Conn::take_retries`].
    retries: usize,
    /// Streams ended (answered or not) since the last [`H2Conn::take_ended`].
    ended: usize,
    /// Workload runs that render each request (cookies, captures): each
    /// stream slot's request, by tag (empty: the plan's table serves).
    own: Vec<H2Request>,
    /// The request the next [`H2Conn::open`] sends, in the table in use.
    next_request: u32,
}

/// The requests streams are opened with: a connection's own (rendered per
/// send) once it has them, else the plan's.
fn table<'a>(reqs: &'a [H2Request], own: &'a [H2Request]) -> &'a [H2Request] {
    if own.is_empty() {
        reqs
    } else {
        own
    }
}

impl H2Conn {
    fn new(p: &crate::plan::H2Plan) -> H2Conn {
        let n = p.streams.max(1) as usize;
        let mut c = H2Conn {
            conn: h2::Connection::new(Self::config(p.streams)),
            reqs: p.request.clone(),
            streams: p.streams.max(1),
            has_body: p.request.iter().any(|r| !r.body().is_empty()),
            slots: vec![Sent::default(); n].into_boxed_slice(),
            live: vec![false; n].into_boxed_slice(),
            free: (0..n as u32).rev().collect(),
            in_flight: 0,
            out: Vec::with_capacity(4096),
            written: 0,
            flight: Vec::with_capacity(4096),
            flight_live: false,
            listed: false,
            started_ns: 0,
            stall_since: None,
            shut_since: None,
            settings_noted: false,
            retries: 0,
            ended: 0,
            own: Vec::new(),
            next_request: 0,
        };
        c.reset();
        c
    }

    fn config(streams: u32) -> h2::Config {
        h2::Config {
            max_streams: streams.max(1),
            ..h2::Config::default()
        }
    }

    /// A new connection: the codec starts over, the output is dropped
    /// (what the kernel still sends of `flight` is left alone).
    fn reset(&mut self) {
        self.conn = h2::Connection::new(Self::config(self.streams));
        self.live.fill(false);
        self.free.clear();
        self.free.extend((0..self.slots.len() as u32).rev());
        self.in_flight = 0;
        self.out.clear();
        self.written = 0;
        self.stall_since = None;
        self.shut_since = None;
        self.settings_noted = false;
        self.retries = 0;
        self.ended = 0;
        self.next_request = 0;
    }

    fn start(&mut self, rec: &mut Recorder, now: u64) {
        self.reset();
        self.started_ns = now;
        self.conn.preface(&mut self.out);
        rec.record_h2_connection(0);
    }

    /// Streams that may be opened now.
    #[inline]
    pub(crate) fn room(&self) -> usize {
        if self.conn.can_open() {
            (self.conn.stream_limit() as usize).saturating_sub(self.conn.active())
        } else {
            0
        }
    }

    /// The server has not acknowledged the client's SETTINGS within
    /// `timeout_ns` of the connection's start.
    pub(crate) fn settings_overdue(&self, now: u64, timeout_ns: u64) -> bool {
        !self.conn.settings_acked() && now.saturating_sub(self.started_ns) >= timeout_ns
    }

    /// The server's SETTINGS_MAX_CONCURRENT_STREAMS is 0 with no stream open,
    /// and no later SETTINGS raised it within `timeout_ns`: nothing can be
    /// sent on this connection.
    pub(crate) fn shut_overdue(&mut self, now: u64, timeout_ns: u64) -> bool {
        let shut = self.conn.peer_settings_seen()
            && self.conn.stream_limit() == 0
            && self.conn.active() == 0;
        if !shut {
            self.shut_since = None;
            return false;
        }
        now.saturating_sub(*self.shut_since.get_or_insert(now)) >= timeout_ns
    }

    fn sent_iter(&self) -> impl Iterator<Item = Sent> + '_ {
        self.slots
            .iter()
            .zip(self.live.iter())
            .filter(|(_, l)| **l)
            .map(|(s, _)| *s)
    }

    /// Workload runs: the next stream carries `pick`. Its slot's checker
    /// starts; a connection that renders its requests (cookies, captures)
    /// turns the slot's HTTP/1.1 bytes into its own header block, the
    /// others send the plan's prebuilt one.
    fn start_request(&mut self, mix: &mut ConnMix, pick: xload_workload::Pick, now: u64) {
        let Some(&tag) = self.free.last() else {
            debug_assert!(false, "start_request() without a free slot");
            return;
        };
        let slot = tag as usize;
        mix.start(slot, pick, now);
        if !mix.renders() {
            self.next_request = mix.index(slot) as u32;
            return;
        }
        if self.own.len() < self.slots.len() {
            self.own.resize_with(self.slots.len(), H2Request::empty);
        }
        let ok = self.own[slot].render_http1(mix.request(slot), mix.https());
        debug_assert!(ok, "a rendered request has its request line and empty line");
        self.next_request = tag;
    }

    /// Opens a stream for the run's request, or the workload's started by
    /// [`H2Conn::start_request`] (the caller checked `room`).
    fn open(&mut self, sent: Sent) {
        let Some(tag) = self.free.pop() else {
            debug_assert!(false, "open() without a free slot");
            return;
        };
        self.slots[tag as usize] = sent;
        self.live[tag as usize] = true;
        self.in_flight += 1;
        let reqs = table(&self.reqs, &self.own);
        let request = std::mem::take(&mut self.next_request) as usize;
        self.conn.open(reqs, request, tag, &mut self.out);
        if self.has_body && self.stall_since.is_none() && self.conn.send_blocked(reqs) {
            self.stall_since = Some(sent.sent_ns);
        }
    }

    /// Streams ended since the last call.
    pub(crate) fn take_ended(&mut self) -> usize {
        std::mem::take(&mut self.ended)
    }

    /// Streams to send again since the last call (refunded to the quota by the caller).
    pub(crate) fn take_retries(&mut self) -> usize {
        std::mem::take(&mut self.retries)
    }

    /// The unsent part of the output (epoll).
    #[inline]
    pub(crate) fn unwritten(&self) -> &[u8] {
        &self.out[self.written..]
    }

    /// epoll: `n` more bytes were written; the output empties once all are.
    #[inline]
    pub(crate) fn wrote(&mut self, n: usize) {
        self.written += n;
        if self.written >= self.out.len() {
            self.out.clear();
            self.written = 0;
        }
    }

    /// io_uring: the output to hand to one send, unless one is in the
    /// kernel (its completion sends the rest). The bytes stay untouched
    /// until [`H2Conn::send_done`].
    pub(crate) fn take_flight(&mut self) -> Option<(*const u8, usize)> {
        if self.flight_live || self.out.is_empty() {
            return None;
        }
        std::mem::swap(&mut self.out, &mut self.flight);
        self.out.clear();
        self.flight_live = true;
        Some((self.flight.as_ptr(), self.flight.len()))
    }

    /// io_uring: the send of `flight` completed.
    pub(crate) fn send_done(&mut self) -> usize {
        self.flight_live = false;
        let n = self.flight.len();
        self.flight.clear();
        n
    }

    fn take(slots: &[Sent], live: &mut [bool], free: &mut Vec<u32>, tag: u32) -> Option<Sent> {
        let l = live.get_mut(tag as usize)?;
        if !*l {
            return None;
        }
        *l = false;
        free.push(tag);
        Some(slots[tag as usize])
    }

    /// Feeds received bytes; records each completed response (workload
    /// runs: for its stream's class, checked, with its fields and body
    /// given to `mix`).
    fn feed(
        &mut self,
        data: &[u8],
        now: u64,
        rec: &mut Recorder,
        timing: Timing,
        mut mix: Option<&mut ConnMix>,
    ) -> (u32, Fed) {
        rec.add_bytes_received(data.len() as u64);
        let mut done = 0u32;
        let mut ended = 0usize;
        let mut retries = 0usize;
        let mut settings = false;
        let H2Conn {
            conn,
            reqs,
            own,
            slots,
            live,
            free,
            out,
            ..
        } = self;
        let r = conn.recv(data, table(reqs, own), out, &mut |ev| {
            let tag = match ev {
                Event::Response { tag, .. }
                | Event::Reset { tag, .. }
                | Event::Malformed { tag, .. }
                | Event::Refused { tag, .. } => tag,
                Event::Settings => return settings = true,
                Event::GoAway { .. } => return rec.record_h2_goaway(),
                Event::Field { tag, name, value } => {
                    if let Some(m) = mix.as_deref_mut() {
                        m.field(tag as usize, name, value);
                    }
                    return;
                }
                Event::Head { tag, .. } => {
                    if let Some(m) = mix.as_deref_mut() {
                        m.head_done(tag as usize);
                    }
                    return;
                }
                Event::Data { tag, data } => {
                    if let Some(m) = mix.as_deref_mut().filter(|m| m.feeds_body(tag as usize)) {
                        m.body(tag as usize, data);
                    }
                    return;
                }
                _ => return,
            };
            let Some(sent) = Self::take(slots, live, free, tag) else {
                return;
            };
            ended += 1;
            match ev {
                Event::Response {
                    status, body_bytes, ..
                } => {
                    let latency_us = record(rec, sent, now, status, 0, timing);
                    if let Some(m) = mix.as_deref_mut() {
                        m.finish(tag as usize, rec, latency_us, status, body_bytes, now);
                    }
                    done += 1;
                    return;
                }
                Event::Reset { code, .. } => {
                    rec.record_h2_reset(code.name().unwrap_or("unknown"));
                    if code == ErrorCode::REFUSED_STREAM {
                        // Never processed (RFC 9113 §8.7): sent again.
                        rec.record_h2_retry();
                        retries += 1;
                    } else {
                        rec.record_error(ErrorKind::H2StreamReset);
                    }
                }
                Event::Malformed { why, .. } => rec.record_parse_error(why.name()),
                _ => {
                    // Above a GOAWAY's last-stream-id: never processed.
                    rec.record_h2_retry();
                    retries += 1;
                }
            }
            // Ended without a response: a session starts over.
            if let Some(m) = mix.as_deref_mut() {
                m.abandon();
            }
        });
        self.in_flight -= ended;
        self.ended += ended;
        self.retries += retries;
        if settings && !self.settings_noted {
            self.settings_noted = true;
            let p = self.conn.peer_settings();
            let limited = |v: u32| (v != u32::MAX).then_some(v);
            rec.record_h2_settings(H2Settings {
                header_table_size: p.header_table_size,
                enable_push: p.enable_push,
                max_concurrent_streams: limited(p.max_concurrent_streams),
                initial_window_size: p.initial_window_size,
                max_frame_size: p.max_frame_size,
                max_header_list_size: limited(p.max_header_list_size),
            });
        }
        if settings {
            rec.record_h2_connection(self.conn.stream_limit());
        }
        if self.has_body {
            self.note_stall(now, rec);
        }
        if let Err(e) = r {
            rec.record_h2_connection_error(e.name());
            return (done, Fed::Failed);
        }
        if self.conn.is_closing() && self.in_flight == 0 {
            return (done, Fed::Close);
        }
        (done, Fed::More)
    }

    /// Requests with bodies: time streams wait for the server's window.
    fn note_stall(&mut self, now: u64, rec: &mut Recorder) {
        let blocked = self.conn.send_blocked(table(&self.reqs, &self.own));
        match (self.stall_since, blocked) {
            (None, true) => self.stall_since = Some(now),
            (Some(t), false) => {
                rec.add_h2_stall_ns(now.saturating_sub(t));
                self.stall_since = None;
            }
            _ => {}
        }
    }
}

/// Records a response; returns its latency (corrected in open loop), µs,
/// or None for an answer that is not the window's ([`Sent::counted`]).
#[inline]
fn record(
    rec: &mut Recorder,
    sent: Sent,
    now_ns: u64,
    status: u16,
    wire_bytes: u64,
    timing: Timing,
) -> Option<u64> {
    let since_sent_us = ns_to_us(now_ns.saturating_sub(sent.sent_ns));
    if timing == Timing::Open && !sent.counted {
        // The answer to a send of the warm-up: not the window's.
        return None;
    }
    if timing == Timing::Open {
        let corrected_us = ns_to_us(now_ns.saturating_sub(sent.intended_ns));
        rec.record_response_open_loop(corrected_us, since_sent_us, status, wire_bytes);
        Some(corrected_us)
    } else {
        rec.record_response(since_sent_us, status, wire_bytes);
        Some(since_sent_us)
    }
}

/// Counts a failed exchange under its category.
pub(crate) fn record_fed_error(rec: &mut Recorder, fed: &Fed) {
    match fed {
        Fed::Invalid(e) => rec.record_parse_error(e.name()),
        Fed::Unsolicited => rec.record_parse_error("unsolicited_response"),
        Fed::More | Fed::Close | Fed::Failed => {}
    }
}

/// Where a failure happened: the same errno means different things.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Phase {
    Socket,
    Connect,
    Exchange,
}

/// Counts an errno under the category it means in `phase`.
pub(crate) fn record_errno(rec: &mut Recorder, phase: Phase, errno: i32) {
    let kind = match (phase, errno) {
        (_, libc::EMFILE | libc::ENFILE) => Some(ErrorKind::FdLimit),
        (_, libc::EADDRNOTAVAIL) => Some(ErrorKind::NoEphemeralPort),
        (Phase::Connect, libc::ECONNREFUSED) => Some(ErrorKind::ConnectRefused),
        (Phase::Connect, libc::ETIMEDOUT | libc::ECANCELED | libc::ETIME) => {
            Some(ErrorKind::ConnectTimeout)
        }
        (_, libc::ECONNRESET | libc::EPIPE | libc::ECONNABORTED) => Some(ErrorKind::Reset),
        (Phase::Exchange, libc::ETIMEDOUT) => Some(ErrorKind::RequestTimeout),
        _ => None,
    };
    match kind {
        Some(k) => rec.record_error(k),
        None => rec.record_errno(errno),
    }
}

/// Consecutive connect failures of one connection, and when to try again.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Backoff {
    failures: u32,
}

impl Backoff {
    /// Counts one more failure; returns when to try again.
    pub(crate) fn fail(&mut self, now_ns: u64) -> u64 {
        self.failures += 1;
        now_ns + backoff_ns(self.failures)
    }

    /// The connection is up: the next failure starts from the shortest delay.
    pub(crate) fn reset(&mut self) {
        self.failures = 0;
    }
}

/// Delay before reconnecting after `failures` consecutive connect failures:
/// 1 ms doubling to 1 s, so a dead target is probed, not hammered.
fn backoff_ns(failures: u32) -> u64 {
    let ms = 1u64 << failures.min(10);
    ms.min(1000) * 1_000_000
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_is_fifo_and_wraps() {
        let mut p = Pending::with_capacity(3);
        for round in 0..5u64 {
            p.push(Sent {
                intended_ns: round,
                sent_ns: round * 10,
                counted: true,
            });
            p.push(Sent {
                intended_ns: round + 100,
                sent_ns: 0,
                counted: true,
            });
            assert_eq!(p.oldest_sent_ns(), Some(round * 10));
            assert_eq!(p.pop().unwrap().intended_ns, round);
            assert_eq!(p.pop().unwrap().intended_ns, round + 100);
            assert!(p.pop().is_none());
        }
        assert_eq!(p.free(), 3);
    }

    #[test]
    fn feed_records_pipelined_responses_and_latency() {
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 4);
        for _ in 0..2 {
            ex.pending.push(Sent {
                intended_ns: 1_000,
                sent_ns: 1_000,
                counted: true,
            });
        }
        let two = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokHTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
        let (done, fed) = ex.feed(two, 201_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (2, Fed::More));
        assert_eq!(rec.requests(), 2);
        assert!(ex.pending.is_empty());
    }

    /// A 204 with a body behind it in the same receive is one failed
    /// exchange: not recorded as a response, its request still in flight
    /// (so that replacing the connection counts it as the failure); a 204
    /// followed by a proper response is two responses.
    #[test]
    fn a_body_after_a_204_counts_the_exchange_once_as_the_error() {
        let sent = Sent {
            intended_ns: 1_000,
            sent_ns: 1_000,
            counted: true,
        };
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 2);
        ex.pending.push(sent);
        ex.pending.push(sent);
        let (done, fed) = ex.feed(
            b"HTTP/1.1 204 No Content\r\n\r\nhello",
            2_000,
            &mut rec,
            Timing::Closed,
        );
        assert_eq!(
            (done, fed),
            (0, Fed::Invalid(ParseError::BodyAfterBodilessStatus))
        );
        assert_eq!((rec.requests(), ex.pending.len()), (0, 2));

        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 2);
        ex.pending.push(sent);
        ex.pending.push(sent);
        let two = b"HTTP/1.1 204 No Content\r\n\r\nHTTP/1.1 304 Not Modified\r\n\r\n";
        let (done, fed) = ex.feed(two, 2_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (2, Fed::More));
        assert_eq!((rec.status_count(204), rec.status_count(304)), (1, 1));
        assert!(ex.pending.is_empty());
        // Split after the 204: it is recorded; the body that follows is the error.
        let mut ex = Exchange::new(false, 2);
        ex.pending.push(sent);
        ex.pending.push(sent);
        let (done, fed) = ex.feed(&two[..27], 2_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (1, Fed::More));
        let (done, fed) = ex.feed(b"hello", 2_000, &mut rec, Timing::Closed);
        assert_eq!(
            (done, fed),
            (0, Fed::Invalid(ParseError::BodyAfterBodilessStatus))
        );
    }

    #[test]
    fn feed_without_request_is_unsolicited() {
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 1);
        let (done, fed) = ex.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
            1,
            &mut rec,
            Timing::Closed,
        );
        assert_eq!((done, fed), (0, Fed::Unsolicited));
    }

    #[test]
    fn eof_classifies_idle_inflight_and_midway() {
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 1);
        assert_eq!(ex.eof(0, &mut rec, Timing::Closed), (false, None));
        ex.pending.push(Sent::default());
        assert_eq!(
            ex.eof(0, &mut rec, Timing::Closed),
            (false, Some(ErrorKind::Closed))
        );
        ex.reset();
        ex.pending.push(Sent::default());
        let _ = ex.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc",
            0,
            &mut rec,
            Timing::Closed,
        );
        assert_eq!(
            ex.eof(0, &mut rec, Timing::Closed),
            (false, Some(ErrorKind::EofMidResponse))
        );
    }

    #[test]
    fn close_delimited_body_completes_at_eof() {
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 1);
        ex.pending.push(Sent::default());
        let (done, fed) = ex.feed(b"HTTP/1.0 200 OK\r\n\r\nhello", 0, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (0, Fed::More));
        assert_eq!(ex.eof(0, &mut rec, Timing::Closed), (true, None));
        assert_eq!(rec.requests(), 1);
    }

    #[test]
    fn workload_responses_are_checked_per_class_across_receives() {
        let hello = ring::digest::digest(&ring::digest::SHA256, b"hello");
        let hex: String = hello.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let toml = format!("[classes.a]\npath = \"/\"\ncheck = {{ status = 200, sha256 = \"{hex}\" }}\n[classes.h]\nmethod = \"HEAD\"\npath = \"/h\"\n");
        let w = xload_workload::parse(&toml, "w.toml", std::path::Path::new(".")).unwrap();
        let url = xload_http::parse_url("http://127.0.0.1:1/").unwrap();
        let plan = std::sync::Arc::new(xload_workload::RequestPlan::build(&w, &url).unwrap());
        let mut rec = Recorder::new();
        rec.set_classes(&["a", "h"]);
        let mut ex = Exchange::new(false, 1);
        ex.attach_mix(Some(plan), None, false, 1);
        let a = xload_workload::Pick {
            class: 0,
            variant: 0,
        };
        for body in [&b"hello"[..], b"hellO"] {
            ex.start(a, 0);
            assert!(ex.outgoing(b"unused").starts_with(b"GET / HTTP/1.1\r\n"));
            ex.pending.push(Sent::default());
            let wire = [&b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"[..], body].concat();
            for piece in wire.chunks(3) {
                ex.feed(piece, 0, &mut rec, Timing::Closed);
            }
        }
        // HEAD: the parser expects no body whatever Content-Length says.
        ex.start(
            xload_workload::Pick {
                class: 1,
                variant: 0,
            },
            0,
        );
        ex.pending.push(Sent::default());
        let (done, _) = ex.feed(
            b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n",
            0,
            &mut rec,
            Timing::Closed,
        );
        assert_eq!(done, 1);
        let classes = rec.classes();
        assert_eq!((classes[0].requests(), classes[1].requests()), (2, 1));
        assert_eq!(classes[0].consistency_errors(), 1);
        assert_eq!(rec.error_count(ErrorKind::Consistency), 1);
        assert_eq!(classes[0].offenders()[0].reason, "body SHA-256 differs");
    }

    /// HTTP/2 behind the same seam: no stream before the server's
    /// SETTINGS, streams up to its limit, answers in any order, a refused
    /// stream given back for a retry, a GOAWAY that closes once drained.
    #[test]
    fn h2_streams_complete_in_any_order_and_refusals_come_back() {
        let url = xload_http::parse_url("http://127.0.0.1:1/").unwrap();
        let spec = xload_http::RequestSpec {
            method: "GET",
            url: &url,
            headers: &[],
            body: b"",
        };
        let plan = crate::plan::H2Plan {
            streams: 3,
            request: vec![H2Request::new(&spec).unwrap()].into(),
            alpn_optional: false,
        };
        let sent = |t| Sent {
            intended_ns: t,
            sent_ns: t,
            counted: true,
        };
        let mut rec = Recorder::new();
        let mut ex = Exchange::new(false, 1);
        ex.begin(Some(&plan), &mut rec, 0);
        assert!(ex.is_h2());
        assert!(ex.h2().unwrap().out.starts_with(b"PRI * HTTP/2.0"));
        assert_eq!(ex.room(1), 0, "no stream before the server's SETTINGS");
        // SETTINGS_MAX_CONCURRENT_STREAMS 2: below --streams 3.
        let settings = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 2];
        let (_, fed) = ex.feed(&settings, 1, &mut rec, Timing::Closed);
        assert_eq!(fed, Fed::More);
        assert_eq!(ex.room(1), 2);
        ex.push(sent(10)); // stream 1
        ex.push(sent(20)); // stream 3
        assert_eq!((ex.in_flight(), ex.room(1)), (2, 0));
        assert_eq!(ex.oldest_sent_ns(), Some(10));
        // Stream 3 answers first (HEADERS, END_STREAM | END_HEADERS, :status 200).
        let headers = [0, 0, 1, 1, 5, 0, 0, 0, 3, 0x88];
        let (done, fed) = ex.feed(&headers, 1_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (1, Fed::More));
        assert_eq!(ex.oldest_sent_ns(), Some(10), "stream 1 still waits");
        // Stream 1 is reset with REFUSED_STREAM: never processed, sent again.
        let rst = [0, 0, 4, 3, 0, 0, 0, 0, 1, 0, 0, 0, 7];
        let (done, fed) = ex.feed(&rst, 1_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (0, Fed::More));
        assert_eq!(ex.h2().unwrap().take_retries(), 1);
        assert!(ex.is_idle());
        assert_eq!((rec.requests(), rec.errors_total()), (1, 0));
        // A GOAWAY with last-stream-id 3 and stream 5 open: refused, and the
        // connection, drained, is closed.
        ex.push(sent(30));
        let goaway = [0, 0, 8, 7, 0, 0, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0, 0];
        let (done, fed) = ex.feed(&goaway, 2_000, &mut rec, Timing::Closed);
        assert_eq!((done, fed), (0, Fed::Close));
        assert_eq!(ex.h2().unwrap().take_retries(), 1);
        assert_eq!(ex.room(1), 0);
        // A new connection starts over.
        ex.reset();
        assert!(!ex.is_h2() && ex.is_idle());
    }

    /// One frame: header and payload.
    fn frame(kind: h2::FrameKind, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        h2::frame::write_header(&mut v, payload.len(), kind, flags, stream);
        v.extend_from_slice(payload);
        v
    }

    /// The HEADERS frames in `out`: (stream, header block).
    fn headers_sent(mut out: &[u8]) -> Vec<(u32, Vec<u8>)> {
        let mut v = Vec::new();
        while out.len() >= 9 {
            let len = u32::from_be_bytes([0, out[0], out[1], out[2]]) as usize;
            let stream = u32::from_be_bytes([out[5], out[6], out[7], out[8]]) & 0x7fff_ffff;
            if out[3] == h2::FrameKind::HEADERS.0 {
                v.push((stream, out[9..9 + len].to_vec()));
            }
            out = &out[9 + len..];
        }
        v
    }

    /// A workload's h2 plan: every variant's block, in `RequestPlan::index` order.
    fn workload_over_h2(
        toml: &str,
        streams: u32,
    ) -> (Arc<xload_workload::RequestPlan>, crate::plan::H2Plan) {
        let w = xload_workload::parse(toml, "w.toml", std::path::Path::new(".")).unwrap();
        let url = xload_http::parse_url("http://127.0.0.1:1/").unwrap();
        let plan = Arc::new(xload_workload::RequestPlan::build(&w, &url).unwrap());
        let table: Vec<H2Request> = plan
            .variants()
            .map(|v| {
                let mut r = H2Request::empty();
                assert!(r.render_http1(&v.request, false));
                r
            })
            .collect();
        let h2 = crate::plan::H2Plan {
            streams,
            request: table.into(),
            alpn_optional: false,
        };
        (plan, h2)
    }

    const SETTINGS: [u8; 9] = [0, 0, 0, 4, 0, 0, 0, 0, 0];
    const STATUS_200: u8 = 0x88;

    /// A workload over HTTP/2: each stream opens with its own pick's
    /// prebuilt block; answers end in any order, their DATA checked for
    /// their own class; a failed status or body check is a consistency
    /// error of the stream's class, as over HTTP/1.1.
    #[test]
    fn h2_workload_streams_carry_their_own_request_and_check() {
        let toml = "[classes.a]\npath = \"/a/{n}\"\nn = { range = [1, 2] }\ncheck = { status = 200, contains = \"ok\" }\n\
                    [classes.b]\npath = \"/b\"\ncheck = { status = 404 }\n";
        let (plan, h2plan) = workload_over_h2(toml, 3);
        let mut rec = Recorder::new();
        rec.set_classes(&["a", "b"]);
        let mut ex = Exchange::new(false, 1);
        ex.begin(Some(&h2plan), &mut rec, 0);
        ex.attach_mix(Some(plan), None, false, 3);
        ex.feed(&SETTINGS, 0, &mut rec, Timing::Closed);
        ex.h2().unwrap().out.clear();
        let sent = Sent {
            intended_ns: 0,
            sent_ns: 0,
            counted: true,
        };
        let picks = [(0, 1), (1, 0), (0, 0)];
        for (class, variant) in picks {
            ex.start(xload_workload::Pick { class, variant }, 0);
            ex.push(sent);
        }
        let blocks: Vec<_> = h2plan.request.iter().map(|r| r.block().to_vec()).collect();
        assert_eq!(
            headers_sent(&ex.h2().unwrap().out),
            [
                (1, blocks[1].clone()),
                (3, blocks[2].clone()),
                (5, blocks[0].clone())
            ]
        );
        // Stream 3 (b) answers 200; stream 5 (/a/1) "ok" in two DATA
        // frames; stream 1 (/a/2) "no": two consistency errors.
        use h2::frame::flags::{END_HEADERS, END_STREAM};
        let mut wire = frame(
            h2::FrameKind::HEADERS,
            END_HEADERS | END_STREAM,
            3,
            &[STATUS_200],
        );
        wire.extend(frame(h2::FrameKind::HEADERS, END_HEADERS, 5, &[STATUS_200]));
        wire.extend(frame(h2::FrameKind::HEADERS, END_HEADERS, 1, &[STATUS_200]));
        wire.extend(frame(h2::FrameKind::DATA, 0, 5, b"o"));
        wire.extend(frame(h2::FrameKind::DATA, 0, 1, b"n"));
        wire.extend(frame(h2::FrameKind::DATA, END_STREAM, 5, b"k"));
        wire.extend(frame(h2::FrameKind::DATA, END_STREAM, 1, b"o"));
        for piece in wire.chunks(5) {
            ex.feed(piece, 0, &mut rec, Timing::Closed);
        }
        assert!(ex.is_idle());
        let c = rec.classes();
        assert_eq!((c[0].requests(), c[1].requests()), (2, 1));
        assert_eq!(
            (c[0].consistency_errors(), c[1].consistency_errors()),
            (1, 1)
        );
        assert_eq!(c[0].offenders()[0].path, "/a/2");
        assert_eq!(c[0].offenders()[0].reason, "body lacks contains[0]");
        assert_eq!(c[1].offenders()[0].reason, "status 200 not expected");
        assert_eq!(rec.error_count(ErrorKind::Consistency), 2);
        assert_eq!(rec.requests(), 3);
    }

    /// A stateful workload over HTTP/2: a response's `set-cookie` field
    /// and a header capture reach the session; its next request is
    /// rendered with them into the stream slot's own header block.
    #[test]
    fn h2_session_takes_cookies_and_captures_from_decoded_fields() {
        let toml =
            "[classes.login]\npath = \"/login\"\ncapture = { token = { header = \"X-Token\" } }\n\
                    [classes.next]\npath = \"/next?t={token}\"\n\
                    [session]\nsequence = [\"login\", \"next\"]\nthink = \"1ms\"\n";
        let (plan, h2plan) = workload_over_h2(toml, 1);
        let w = xload_workload::parse(toml, "w.toml", std::path::Path::new(".")).unwrap();
        let session = w.session.unwrap();
        let mut rec = Recorder::new();
        rec.set_classes(&["login", "next"]);
        let mut ex = Exchange::new(false, 1);
        ex.begin(Some(&h2plan), &mut rec, 0);
        ex.attach_mix(Some(plan), Some((&session, 1)), true, 1);
        ex.feed(&SETTINGS, 0, &mut rec, Timing::Closed);
        let sent = Sent {
            intended_ns: 0,
            sent_ns: 0,
            counted: true,
        };
        let fields_of_next = |ex: &mut Exchange, rec: &mut Recorder| {
            let pick = ex.mix_mut().unwrap().session_pick(rec).unwrap();
            ex.h2().unwrap().out.clear();
            ex.start(pick, 0);
            ex.push(sent);
            let (_, block) = headers_sent(&ex.h2().unwrap().out).remove(0);
            let mut fields = Vec::new();
            h2::hpack::Decoder::new(4096)
                .decode(&block, |n, v| {
                    fields.push(format!(
                        "{}: {}",
                        String::from_utf8_lossy(n),
                        String::from_utf8_lossy(v)
                    ))
                })
                .unwrap();
            fields
        };
        let login = fields_of_next(&mut ex, &mut rec);
        assert!(login.contains(&":path: /login".to_string()), "{login:?}");
        let mut block = vec![STATUS_200];
        h2::hpack::encode_field(b"set-cookie", b"sid=9; Path=/", &mut block);
        h2::hpack::encode_field(b"x-token", b"t42", &mut block);
        use h2::frame::flags::{END_HEADERS, END_STREAM};
        let wire = frame(h2::FrameKind::HEADERS, END_HEADERS | END_STREAM, 1, &block);
        let (done, _) = ex.feed(&wire, 0, &mut rec, Timing::Closed);
        assert_eq!(done, 1);
        let next = fields_of_next(&mut ex, &mut rec);
        assert!(next.contains(&":path: /next?t=t42".to_string()), "{next:?}");
        assert!(next.contains(&"cookie: sid=9".to_string()), "{next:?}");
        assert_eq!(rec.classes()[0].capture_failures(), 0);
    }

    #[test]
    fn backoff_grows_and_caps() {
        assert_eq!(backoff_ns(0), 1_000_000);
        assert_eq!(backoff_ns(3), 8_000_000);
        assert_eq!(backoff_ns(30), 1_000_000_000);
    }
}
