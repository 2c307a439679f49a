//! Workload runs: which prebuilt request each send carries, and the check of
//! each response. The worker walks a seeded schedule of picks drawn before
//! the run (an index, not a draw, per request); each connection remembers the
//! pick in flight and feeds its response to the class's checker.

use std::sync::Arc;

use xload_http::Response;
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

/// What a stateful connection (cookies or captures) keeps: the session's
/// cookies and captured values, the request rendered with them, and the
/// response's head (and body, for body captures) to read them from. Every
/// buffer is reused: a warm session allocates nothing per request.
struct State {
    jar: Option<Jar>,
    values: Captured,
    /// The request in flight, as rendered.
    out: Vec<u8>,
    /// Its request-target (the cookies' path match).
    target: Vec<u8>,
    head: Vec<u8>,
    head_done: bool,
    body: Vec<u8>,
    keep_body: bool,
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

/// A connection's request in flight and the checker of its response.
pub(crate) struct ConnMix {
    requests: Arc<RequestPlan>,
    pick: Pick,
    checker: Checker,
    /// The class's checks read the body (SHA-256, byte strings).
    feeds_body: bool,
    session: Option<Box<SessionState>>,
    /// Cookies or captures: None keeps the prebuilt bytes' path.
    state: Option<Box<State>>,
    /// Sessions: when the think time after the last response ends (0: not thinking).
    pub(crate) think_due_ns: u64,
}

impl ConnMix {
    pub(crate) fn new(
        requests: Arc<RequestPlan>,
        session: Option<(&Session, u64)>,
        cookies: bool,
    ) -> ConnMix {
        let state = (cookies || requests.stateful()).then(|| {
            Box::new(State {
                jar: cookies.then(Jar::new),
                values: Captured::new(requests.captures.len()),
                out: Vec::new(),
                target: Vec::new(),
                head: Vec::new(),
                head_done: false,
                body: Vec::new(),
                keep_body: false,
            })
        });
        ConnMix {
            state,
            requests,
            pick: Pick {
                class: 0,
                variant: 0,
            },
            checker: Checker::new(),
            feeds_body: false,
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

    /// A request of `pick` is sent at `now_ns`; returns whether it is HEAD.
    #[inline]
    pub(crate) fn start(&mut self, pick: Pick, now_ns: u64) -> bool {
        self.pick = pick;
        let class = &self.requests.classes[pick.class as usize];
        self.feeds_body = class.needs_body();
        let variant = self.requests.variant(pick);
        self.checker.start(variant);
        if let Some(st) = &mut self.state {
            st.out.clear();
            st.head.clear();
            st.head_done = false;
            st.body.clear();
            st.keep_body = class.captures_body();
            let (jar, target) = (&mut st.jar, &mut st.target);
            let (host, https) = (self.requests.host.as_str(), self.requests.https);
            variant.render(&st.values, &mut st.out, |out| {
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

    /// The bytes of the request in flight; they live as long as the plan
    /// (or, rendered with the session's values, until the next request).
    #[inline]
    pub(crate) fn request(&self) -> &[u8] {
        match &self.state {
            Some(st) => &st.out,
            None => self.requests.request(self.pick),
        }
    }

    /// Bytes received for the response in flight: a stateful connection
    /// keeps its head (for `Set-Cookie` and header captures).
    #[inline]
    pub(crate) fn received(&mut self, data: &[u8]) {
        let Some(st) = &mut self.state else { return };
        if st.head_done {
            return;
        }
        let from = st.head.len().saturating_sub(3);
        let take = data.len().min(MAX_HEAD.saturating_sub(st.head.len()));
        st.head.extend_from_slice(&data[..take]);
        match st.head[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            Some(at) => {
                st.head.truncate(from + at + 4);
                st.head_done = true;
            }
            None => st.head_done = st.head.len() >= MAX_HEAD,
        }
    }

    #[inline]
    pub(crate) fn feeds_body(&self) -> bool {
        self.feeds_body
    }

    /// A piece of the response body, when the checks read it.
    #[inline]
    pub(crate) fn body(&mut self, piece: &[u8]) {
        let class = &self.requests.classes[self.pick.class as usize];
        self.checker.body(class, piece);
        if let Some(st) = &mut self.state {
            if st.keep_body {
                let take = piece.len().min(MAX_BODY.saturating_sub(st.body.len()));
                st.body.extend_from_slice(&piece[..take]);
            }
        }
    }

    /// The response is complete (at `now_ns`): records it for its class,
    /// checks it, and on a stateful connection takes its cookies and
    /// captures; a failure there starts the session over.
    #[inline]
    pub(crate) fn finish(
        &mut self,
        rec: &mut Recorder,
        latency_us: Option<u64>,
        response: &Response,
        now_ns: u64,
    ) {
        // An answer to a send the window does not count (open loop: sent in
        // the warm-up) still moves its session on, but records nothing.
        let counted = latency_us.is_some();
        let class_index = self.pick.class as usize;
        if let Some(latency_us) = latency_us {
            rec.record_class(class_index, latency_us);
        }
        let class = &self.requests.classes[class_index];
        let variant = self.requests.variant(self.pick);
        let mut failed = false;
        if !class.check.is_empty() {
            self.checker.status(response.status);
            if let Err(failure) = self.checker.finish(class, variant, response.body_bytes) {
                if counted {
                    rec.record_consistency(class_index, &variant.path, &failure);
                }
                failed = true;
            }
        }
        let Some(st) = &mut self.state else { return };
        if let Some(jar) = &mut st.jar {
            let origin = Origin {
                host: &self.requests.host,
                path: &st.target,
                https: self.requests.https,
            };
            let mut wall = None;
            for v in header_values(&st.head, b"set-cookie") {
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
                if let Err(miss) = st.values.take(c, &st.head, &st.body) {
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
