//! Workload runs: which prebuilt request each send carries, and the check of
//! each response. The worker walks a seeded schedule of picks drawn before
//! the run (an index, not a draw, per request); each connection remembers the
//! pick of each request in flight (HTTP/1.1: one; HTTP/2: one per stream
//! slot) and feeds its response to that request's checker.

use std::sync::Arc;

use xload_stats::Recorder;
use xload_workload::{
    header_values, Captured, Checker, Jar, Origin, Pick, RequestPlan, Session, SessionWalk,
};

/// Picks per worker schedule: the schedule repeats after this many sends.
const SCHEDULE_LEN: usize = 1 << 16;

/// A workload, resolved against the target: every request prebuilt.
#[derive(Clone, Debug)]
pub struct Workload {
    pub requests: Arc<RequestPlan>,
    /// Seed of the schedules (each worker mixes in its index).
    pub seed: u64,
    /// Sessions (`--sessions N`): each connection is a session walking the
    /// classes with think time; None: independent picks by weight.
    pub session: Option<Session>,
    /// Each connection keeps a cookie jar (sessions: `[session] cookies`,
    /// on by default; independent picks: `--cookies`).
    pub cookies: bool,
}

/// Most head bytes kept for captures and `Set-Cookie` (the rest is not read).
const MAX_HEAD: usize = 64 * 1024;
/// Most body bytes kept for body captures.
const MAX_BODY: usize = 1 << 20;

/// What a stateful connection (cookies or captures) keeps for its session:
/// its cookies and captured values.
struct State {
    jar: Option<Jar>,
    values: Captured,
}

/// What a stateful connection keeps per request in flight: the request
/// rendered with the session's state, and the response's head (and body,
/// for body captures) to read it from. Every buffer is reused: a warm
/// session allocates nothing per request.
struct Io {
    /// The request in flight, as rendered (HTTP/1.1 bytes).
    out: Vec<u8>,
    /// Its request-target (the cookies' path match).
    target: Vec<u8>,
    /// HTTP/1.1: the head as received; HTTP/2: a first line, then the
    /// decoded fields as `name: value` lines (what `header_values` reads).
    head: Vec<u8>,
    head_done: bool,
    body: Vec<u8>,
    keep_body: bool,
}

impl Io {
    fn new() -> Box<Io> {
        Box::new(Io {
            out: Vec::new(),
            target: Vec::new(),
            head: Vec::new(),
            head_done: false,
            body: Vec::new(),
            keep_body: false,
        })
    }
}

impl State {
    /// A new session: no cookie, no value.
    fn clear(&mut self) {
        if let Some(j) = &mut self.jar {
            j.clear();
        }
        self.values.clear();
    }
}

/// One worker's walk through its schedule.
pub(crate) struct Mix {
    requests: Arc<RequestPlan>,
    schedule: Box<[Pick]>,
    next: usize,
}

impl Mix {
    pub(crate) fn new(w: &Workload, worker: usize) -> Mix {
        let seed = w.seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        Mix {
            requests: w.requests.clone(),
            schedule: w.requests.schedule(seed, SCHEDULE_LEN).into_boxed_slice(),
            next: 0,
        }
    }

    /// The class names, for the recorder.
    pub(crate) fn class_names(&self) -> Vec<&str> {
        self.requests
            .classes
            .iter()
            .map(|c| c.name.as_str())
            .collect()
    }

    /// The next request to send.
    #[inline]
    pub(crate) fn next(&mut self) -> Pick {
        let p = self.schedule[self.next];
        self.next = (self.next + 1) % self.schedule.len();
        p
    }

    pub(crate) fn requests(&self) -> &Arc<RequestPlan> {
        &self.requests
    }
}

/// Seed of connection `conn`'s sessions on worker `worker`.
pub(crate) fn session_seed(seed: u64, worker: usize, conn: usize) -> u64 {
    seed ^ (worker as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15)
        ^ (conn as u64).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// A session's walk and its seed (to start over when the session ends).
struct SessionState {
    session: Session,
    seed: u64,
    walk: SessionWalk,
    /// Sessions started on this connection (mixed into the next one's seed).
    started: u64,
}

/// One request in flight: its pick and the checker of its response
/// (HTTP/1.1: the connection's one; HTTP/2: one per stream slot).
struct Slot {
    pick: Pick,
    checker: Checker,
    /// The class's checks read the body (SHA-256, byte strings).
    feeds_body: bool,
    /// Stateful connections: the rendered request and the response kept.
    io: Option<Box<Io>>,
}

/// A connection's requests in flight (a slot each: HTTP/2 streams keyed by
/// their tag, HTTP/1.1 slot 0) and the session state they share.
pub(crate) struct ConnMix {
    requests: Arc<RequestPlan>,
    slots: Box<[Slot]>,
    session: Option<Box<SessionState>>,
    /// Cookies or captures: None keeps the prebuilt requests.
    state: Option<Box<State>>,
    /// Sessions: when the think time after the last response ends (0: not thinking).
    pub(crate) think_due_ns: u64,
}

impl ConnMix {
    /// A connection's workload state with `slots` requests in flight at
    /// most (HTTP/2's streams; 1 for HTTP/1.1).
    pub(crate) fn new(
        requests: Arc<RequestPlan>,
        session: Option<(&Session, u64)>,
        cookies: bool,
        slots: usize,
    ) -> ConnMix {
        let stateful = cookies || requests.stateful();
        let state = stateful.then(|| {
            Box::new(State {
                jar: cookies.then(Jar::new),
                values: Captured::new(requests.captures.len()),
            })
        });
        let slot = || Slot {
            pick: Pick {
                class: 0,
                variant: 0,
            },
            checker: Checker::new(),
            feeds_body: false,
            io: stateful.then(Io::new),
        };
        ConnMix {
            state,
            requests,
            slots: (0..slots.max(1)).map(|_| slot()).collect(),
            session: session.map(|(s, seed)| {
                Box::new(SessionState {
                    session: s.clone(),
                    seed,
                    walk: SessionWalk::new(s, seed),
                    started: 1,
                })
            }),
            think_due_ns: 0,
        }
    }

    /// Requests are rendered per send (cookies or captures), not prebuilt.
    #[inline]
    pub(crate) fn renders(&self) -> bool {
        self.state.is_some()
    }

    /// The target is https (the `:scheme` of HTTP/2 requests rendered per send).
    pub(crate) fn https(&self) -> bool {
        self.requests.https
    }

    /// Sessions: the next request of this connection's session; None when
    /// the session ended (a Markov chain reached a class with no way out,
    /// or the class needs a value no response of the session gave: then
    /// the session restarts, counted for the class).
    pub(crate) fn session_pick(&mut self, rec: &mut Recorder) -> Option<Pick> {
        let s = self.session.as_mut()?;
        let class = s.walk.next_class()?;
        if let Some(st) = &self.state {
            if !st.values.has_all(self.requests.classes[class].uses) {
                rec.record_session_restart(class);
                return None;
            }
        }
        Some(self.requests.pick_in(class, s.walk.rng()))
    }

    /// Sessions: the pause before the next request.
    pub(crate) fn think(&mut self) -> std::time::Duration {
        self.session
            .as_mut()
            .map_or(std::time::Duration::ZERO, |s| s.walk.think())
    }

    /// The connection was replaced: its session starts over (a new seed, so
    /// sessions differ).
    pub(crate) fn restart_session(&mut self) {
        self.think_due_ns = 0;
        if let Some(st) = &mut self.state {
            st.clear();
        }
        if let Some(s) = &mut self.session {
            s.started += 1;
            let seed = s.seed ^ s.started.wrapping_mul(0x94d0_49bb_1331_11eb);
            s.walk = SessionWalk::new(&s.session, seed);
        }
    }

    /// HTTP/2: a request ended without a response (reset,
    /// malformed, refused): a session starts over, as after a failed
    /// HTTP/1.1 exchange, rather than go on without what it would have given.
    pub(crate) fn abandon(&mut self) {
        if self.session.is_some() {
            self.restart_session();
        }
    }

    /// A request of `pick` is sent on `slot` at `now_ns`; returns whether it is HEAD.
    #[inline]
    pub(crate) fn start(&mut self, slot: usize, pick: Pick, now_ns: u64) -> bool {
        let class = &self.requests.classes[pick.class as usize];
        let variant = self.requests.variant(pick);
        let sl = &mut self.slots[slot];
        sl.pick = pick;
        sl.feeds_body = class.needs_body();
        sl.checker.start(variant);
        if let (Some(st), Some(io)) = (&mut self.state, &mut sl.io) {
            io.out.clear();
            io.head.clear();
            io.head_done = false;
            io.body.clear();
            io.keep_body = class.captures_body();
            let (jar, target) = (&mut st.jar, &mut io.target);
            let (host, https) = (self.requests.host.as_str(), self.requests.https);
            variant.render(&st.values, &mut io.out, |out| {
                let Some(jar) = jar.as_mut() else { return };
                // The request line is written: its target is what cookies match.
                let line = out.split(|&b| b == b' ').nth(1).unwrap_or(b"/");
                target.clear();
                target.extend_from_slice(line);
                let origin = Origin {
                    host,
                    path: target,
                    https,
                };
                jar.write_header(origin, now_ns, out);
            });
        }
        class.head
    }

    /// The HTTP/1.1 bytes of `slot`'s request; they live as long as the
    /// plan (or, rendered with the session's values, until the slot's next
    /// request).
    #[inline]
    pub(crate) fn request(&self, slot: usize) -> &[u8] {
        let sl = &self.slots[slot];
        match &sl.io {
            Some(io) => &io.out,
            None => self.requests.request(sl.pick),
        }
    }

    /// The place of `slot`'s request among the plan's prebuilt ones
    /// ([`RequestPlan::index`]).
    #[inline]
    pub(crate) fn index(&self, slot: usize) -> usize {
        self.requests.index(self.slots[slot].pick)
    }

    /// HTTP/1.1 bytes received for the response in flight: a stateful
    /// connection keeps its head (for `Set-Cookie` and header captures).
    #[inline]
    pub(crate) fn received(&mut self, data: &[u8]) {
        let Some(io) = &mut self.slots[0].io else {
            return;
        };
        if io.head_done {
            return;
        }
        let from = io.head.len().saturating_sub(3);
        let take = data.len().min(MAX_HEAD.saturating_sub(io.head.len()));
        io.head.extend_from_slice(&data[..take]);
        match io.head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => {
                io.head.truncate(from + at + 4);
                io.head_done = true;
            }
            None => io.head_done = io.head.len() >= MAX_HEAD,
        }
    }

    /// HTTP/2: a field of `slot`'s response head, as the codec decoded it:
    /// a stateful connection keeps it as a `name: value` line.
    #[inline]
    pub(crate) fn field(&mut self, slot: usize, name: &[u8], value: &[u8]) {
        let Some(io) = &mut self.slots[slot].io else {
            return;
        };
        if io.head_done {
            return; // trailers
        }
        if io.head.is_empty() {
            io.head.extend_from_slice(b"HTTP/2\r\n");
        }
        if io.head.len() + name.len() + value.len() + 4 <= MAX_HEAD {
            for part in [name, b": ", value, b"\r\n"] {
                io.head.extend_from_slice(part);
            }
        }
    }

    /// HTTP/2: `slot`'s final head has arrived (later fields are trailers).
    #[inline]
    pub(crate) fn head_done(&mut self, slot: usize) {
        if let Some(io) = &mut self.slots[slot].io {
            io.head_done = true;
        }
    }

    #[inline]
    pub(crate) fn feeds_body(&self, slot: usize) -> bool {
        self.slots[slot].feeds_body
    }

    /// A piece of `slot`'s response body, when the checks read it.
    #[inline]
    pub(crate) fn body(&mut self, slot: usize, piece: &[u8]) {
        let sl = &mut self.slots[slot];
        let class = &self.requests.classes[sl.pick.class as usize];
        sl.checker.body(class, piece);
        if let Some(io) = &mut sl.io {
            if io.keep_body {
                let take = piece.len().min(MAX_BODY.saturating_sub(io.body.len()));
                io.body.extend_from_slice(&piece[..take]);
            }
        }
    }

    /// `slot`'s response (`status`, `body_bytes` long) is complete (at
    /// `now_ns`): records it for its class, checks it, and on a stateful
    /// connection takes its cookies and captures; a failure there starts
    /// the session over.
    #[inline]
    pub(crate) fn finish(
        &mut self,
        slot: usize,
        rec: &mut Recorder,
        latency_us: Option<u64>,
        status: u16,
        body_bytes: u64,
        now_ns: u64,
    ) {
        // An answer to a send the window does not count (open loop: sent in
        // the warm-up) still moves its session on, but records nothing.
        let counted = latency_us.is_some();
        let sl = &mut self.slots[slot];
        let class_index = sl.pick.class as usize;
        if let Some(latency_us) = latency_us {
            rec.record_class(class_index, latency_us);
        }
        let class = &self.requests.classes[class_index];
        let variant = self.requests.variant(sl.pick);
        let mut failed = false;
        if !class.check.is_empty() {
            sl.checker.status(status);
            if let Err(failure) = sl.checker.finish(class, variant, body_bytes) {
                if counted {
                    rec.record_consistency(class_index, &variant.path, &failure);
                }
                failed = true;
            }
        }
        let (Some(st), Some(io)) = (&mut self.state, &sl.io) else {
            return;
        };
        if let Some(jar) = &mut st.jar {
            let origin = Origin {
                host: &self.requests.host,
                path: &io.target,
                https: self.requests.https,
            };
            let mut wall = None;
            for v in header_values(&io.head, b"set-cookie") {
                let secs = *wall.get_or_insert_with(|| {
                    std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(0, |d| d.as_secs())
                });
                jar.set(v, origin, now_ns, secs);
            }
        }
        if !failed {
            for c in &class.captures {
                if let Err(miss) = st.values.take(c, &io.head, &io.body) {
                    let reason = CaptureMiss(&c.name, miss);
                    if counted {
                        rec.record_capture_failure(class_index, &variant.path, &reason);
                    }
                    failed = true;
                    break;
                }
            }
        }
        // A failed response of a stateful session: the session starts
        // over (SPECweb's failed transaction) rather than going on with
        // a state it does not have.
        if failed && self.session.is_some() {
            if counted {
                rec.record_session_restart(class_index);
            }
            self.restart_session();
        }
    }
}

/// A capture that found nothing, as an offender's reason.
struct CaptureMiss<'a>(&'a str, xload_workload::Miss);

impl std::fmt::Display for CaptureMiss<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "capture {}: {}", self.0, self.1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(toml: &str) -> Arc<RequestPlan> {
        let w = xload_workload::parse(toml, "w.toml", std::path::Path::new(".")).unwrap();
        let url = xload_http::parse_url("http://127.0.0.1:1/").unwrap();
        Arc::new(RequestPlan::build(&w, &url).unwrap())
    }

    fn pick(class: u32, variant: u32) -> Pick {
        Pick { class, variant }
    }

    /// Class `a` wants "hello" (SHA-256) with a 200 from /a/1../a/3, `b` a 404.
    fn two_checked_classes() -> Arc<RequestPlan> {
        let hello = ring::digest::digest(&ring::digest::SHA256, b"hello");
        let hex: String = hello.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        plan(&format!(
            "[classes.a]\npath = \"/a/{{n}}\"\nn = {{ range = [1, 3] }}\ncheck = {{ status = 200, sha256 = \"{hex}\" }}\n\
             [classes.b]\npath = \"/b\"\ncheck = {{ status = 404 }}\n"
        ))
    }

    /// HTTP/2 streams in flight at once on one connection: each slot keeps
    /// its own pick and checker, bodies arrive interleaved, responses end
    /// in any order, and each is recorded and judged for its own class.
    #[test]
    fn stream_slots_keep_their_own_pick_and_checker() {
        let requests = two_checked_classes();
        let mut m = ConnMix::new(requests.clone(), None, false, 3);
        let mut rec = Recorder::new();
        rec.set_classes(&["a", "b"]);
        assert!(!m.renders());
        m.start(0, pick(0, 1), 0);
        m.start(1, pick(1, 0), 0);
        m.start(2, pick(0, 2), 0);
        // Each slot names its own prebuilt request.
        assert_eq!(m.index(0), 1);
        assert_eq!(m.index(1), 3);
        assert_eq!(m.index(2), 2);
        assert!(m.request(1).starts_with(b"GET /b HTTP/1.1\r\n"));
        assert!(m.feeds_body(0) && !m.feeds_body(1) && m.feeds_body(2));
        for (slot, piece) in [(0, &b"he"[..]), (2, b"hel"), (0, b"llo"), (2, b"lO")] {
            m.body(slot, piece);
        }
        // Out of order: slot 2 (a corrupted body), slot 1 (a 200 for a
        // class that wants 404), slot 0 (right).
        m.finish(2, &mut rec, Some(10), 200, 5, 0);
        m.finish(1, &mut rec, Some(20), 200, 0, 0);
        m.finish(0, &mut rec, Some(30), 200, 5, 0);
        let c = rec.classes();
        assert_eq!((c[0].requests(), c[1].requests()), (2, 1));
        assert_eq!(
            (c[0].consistency_errors(), c[1].consistency_errors()),
            (1, 1)
        );
        assert_eq!(c[0].offenders()[0].path, "/a/3");
        assert_eq!(c[0].offenders()[0].reason, "body SHA-256 differs");
        assert_eq!(c[1].offenders()[0].path, "/b");
        assert_eq!(c[1].offenders()[0].reason, "status 200 not expected");
        // A slot reused starts a fresh checker.
        m.start(2, pick(0, 0), 0);
        m.body(2, b"hello");
        m.finish(2, &mut rec, Some(10), 200, 5, 0);
        assert_eq!(rec.classes()[0].consistency_errors(), 1);
        assert_eq!(rec.classes()[0].requests(), 3);
    }

    /// HTTP/2 with cookies: each stream slot renders its own request; a
    /// response's decoded fields (not its trailers) are read as a head, so
    /// its `Set-Cookie` goes to the connection's jar and the next request
    /// of any slot carries it.
    #[test]
    fn h2_fields_feed_the_shared_jar_and_slots_render_their_own() {
        let requests = plan("[classes.a]\npath = \"/a\"\n[classes.b]\npath = \"/b\"\n");
        let mut m = ConnMix::new(requests, None, true, 2);
        let mut rec = Recorder::new();
        rec.set_classes(&["a", "b"]);
        assert!(m.renders());
        m.start(0, pick(0, 0), 0);
        m.start(1, pick(1, 0), 0);
        assert!(m.request(0).starts_with(b"GET /a HTTP/1.1\r\n"));
        assert!(m.request(1).starts_with(b"GET /b HTTP/1.1\r\n"));
        m.field(1, b"content-type", b"text/plain");
        m.field(1, b"set-cookie", b"sid=7; Path=/");
        m.head_done(1);
        m.field(1, b"set-cookie", b"trailer=1; Path=/");
        m.finish(1, &mut rec, Some(1), 200, 0, 0);
        // Slot 0 is still in flight with its own request.
        assert!(!m.request(0).windows(6).any(|w| w == b"Cookie"));
        m.finish(0, &mut rec, Some(1), 200, 0, 0);
        m.start(0, pick(1, 0), 1);
        let text = String::from_utf8(m.request(0).to_vec()).unwrap();
        assert!(text.starts_with("GET /b HTTP/1.1\r\n"), "{text}");
        assert!(text.ends_with("Cookie: sid=7\r\n\r\n"), "{text}");
        assert_eq!(rec.classes()[1].requests(), 1);
    }
}
