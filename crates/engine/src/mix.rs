//! Workload runs: which prebuilt request each send carries, and the check of
//! each response. The worker walks a seeded schedule of picks drawn before
//! the run (an index, not a draw, per request); each connection remembers the
//! pick in flight and feeds its response to the class's checker.

use std::sync::Arc;

use xload_http::Response;
use xload_stats::Recorder;
use xload_workload::{Checker, Pick, RequestPlan};

/// Picks per worker schedule: the schedule repeats after this many sends.
const SCHEDULE_LEN: usize = 1 << 16;

/// A workload, resolved against the target: every request prebuilt.
#[derive(Clone, Debug)]
pub struct Workload {
    pub requests: Arc<RequestPlan>,
    /// Seed of the schedules (each worker mixes in its index).
    pub seed: u64,
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

/// A connection's request in flight and the checker of its response.
pub(crate) struct ConnMix {
    requests: Arc<RequestPlan>,
    pick: Pick,
    checker: Checker,
    /// The class's checks read the body (SHA-256, byte strings).
    feeds_body: bool,
}

impl ConnMix {
    pub(crate) fn new(requests: Arc<RequestPlan>) -> ConnMix {
        ConnMix {
            requests,
            pick: Pick {
                class: 0,
                variant: 0,
            },
            checker: Checker::new(),
            feeds_body: false,
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
