//! Workload runs: which prebuilt request each send carries, and the check of
//! each response. The worker walks a seeded schedule of picks drawn before
//! the run (an index, not a draw, per request); each connection remembers the
//! pick in flight and feeds its response to the class's checker.

use std::sync::Arc;

use xload_http::Response;
use xload_stats::Recorder;
use xload_workload::{Checker, Pick, RequestPlan, Session, SessionWalk};

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
    /// Sessions: when the think time after the last response ends (0: not thinking).
    pub(crate) think_due_ns: u64,
}

impl ConnMix {
    pub(crate) fn new(requests: Arc<RequestPlan>, session: Option<(&Session, u64)>) -> ConnMix {
        ConnMix {
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
    /// the session ended (a Markov chain reached a class with no way out).
    pub(crate) fn session_pick(&mut self) -> Option<Pick> {
        let s = self.session.as_mut()?;
        let class = s.walk.next_class()?;
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
        if let Some(s) = &mut self.session {
            s.started += 1;
            let seed = s.seed ^ s.started.wrapping_mul(0x94d0_49bb_1331_11eb);
            s.walk = SessionWalk::new(&s.session, seed);
        }
    }

    /// A request of `pick` is sent; returns whether it is HEAD.
    #[inline]
    pub(crate) fn start(&mut self, pick: Pick) -> bool {
        self.pick = pick;
        let class = &self.requests.classes[pick.class as usize];
        self.feeds_body = class.needs_body();
        self.checker.start(self.requests.variant(pick));
        class.head
    }

    /// The bytes of the request in flight; they live as long as the plan.
    #[inline]
    pub(crate) fn request(&self) -> &[u8] {
        self.requests.request(self.pick)
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
    }

    /// The response is complete: records it for its class and checks it.
    #[inline]
    pub(crate) fn finish(&mut self, rec: &mut Recorder, latency_us: u64, response: &Response) {
        let class_index = self.pick.class as usize;
        rec.record_class(class_index, latency_us);
        let class = &self.requests.classes[class_index];
        if class.check.is_empty() {
            return;
        }
        let variant = self.requests.variant(self.pick);
        self.checker.status(response.status);
        if let Err(failure) = self.checker.finish(class, variant, response.body_bytes) {
            rec.record_consistency(class_index, &variant.path, &failure);
        }
    }
}
