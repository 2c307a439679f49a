//! The responder's counters: one cache line per worker, written by that
//! worker only, read from any thread (the `/stats` answer, the final summary).

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one worker, alone on its cache line (written by that worker only).
#[repr(align(128))]
#[derive(Default)]
pub struct WorkerCounters {
    pub requests: AtomicU64,
    pub connections: AtomicU64,
    pub bad_requests: AtomicU64,
    /// Answers held by --delay/--pool right now.
    pub in_flight: AtomicU64,
    /// Answers never sent because the client closed its side while they
    /// were held or queued (--delay, --pool).
    pub abandoned: AtomicU64,
    /// Connections closed by the idle timeout.
    pub idle_closed: AtomicU64,
    /// Connections closed by the header timeout.
    pub header_timeouts: AtomicU64,
    /// Connections closed by the send timeout.
    pub send_timeouts: AtomicU64,
    /// `--files`: 404 answers (counted in `requests` too).
    pub not_found: AtomicU64,
}

/// The responder's counters, readable from any thread.
pub struct ServeStats {
    pub workers: Vec<WorkerCounters>,
}

/// Adds `n` to a counter only its worker writes (no read-modify-write needed).
#[inline]
pub(super) fn add(counter: &AtomicU64, n: u64) {
    counter.store(counter.load(Ordering::Relaxed) + n, Ordering::Relaxed);
}

impl ServeStats {
    /// One counter summed over the workers.
    fn total(&self, counter: impl Fn(&WorkerCounters) -> &AtomicU64) -> u64 {
        self.workers
            .iter()
            .map(|w| counter(w).load(Ordering::Relaxed))
            .sum()
    }
    /// Requests answered (all workers).
    pub fn requests(&self) -> u64 {
        self.total(|w| &w.requests)
    }
    pub fn connections(&self) -> u64 {
        self.total(|w| &w.connections)
    }
    pub fn bad_requests(&self) -> u64 {
        self.total(|w| &w.bad_requests)
    }
    pub fn in_flight(&self) -> u64 {
        self.total(|w| &w.in_flight)
    }
    /// Answers dropped because their client closed its side first.
    pub fn abandoned(&self) -> u64 {
        self.total(|w| &w.abandoned)
    }
    /// Connections closed for being idle longer than the idle timeout.
    pub fn idle_closed(&self) -> u64 {
        self.total(|w| &w.idle_closed)
    }
    /// Connections closed because a request head did not come whole in time.
    pub fn header_timeouts(&self) -> u64 {
        self.total(|w| &w.header_timeouts)
    }
    /// Connections closed because their client did not take an answer in time.
    pub fn send_timeouts(&self) -> u64 {
        self.total(|w| &w.send_timeouts)
    }
    /// `--files`: answers that were 404.
    pub fn not_found(&self) -> u64 {
        self.total(|w| &w.not_found)
    }
    /// The `/stats` document.
    pub fn json(&self) -> String {
        format!(
            "{{\"requests\":{},\"in_flight\":{},\"connections\":{},\"bad_requests\":{},\"abandoned\":{},\"idle_closed\":{},\"header_timeouts\":{},\"send_timeouts\":{},\"not_found\":{},\"workers\":{}}}",
            self.requests(),
            self.in_flight(),
            self.connections(),
            self.bad_requests(),
            self.abandoned(),
            self.idle_closed(),
            self.header_timeouts(),
            self.send_timeouts(),
            self.not_found(),
            self.workers.len()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_accumulates_on_one_counter() {
        let c = AtomicU64::new(0);
        add(&c, 2);
        add(&c, 0);
        add(&c, 5);
        assert_eq!(c.load(Ordering::Relaxed), 7);
    }

    #[test]
    fn totals_sum_every_worker() {
        let stats = ServeStats {
            workers: (0..3).map(|_| WorkerCounters::default()).collect(),
        };
        for (k, w) in stats.workers.iter().enumerate() {
            let k = k as u64 + 1;
            add(&w.requests, k);
            add(&w.connections, 10 * k);
            add(&w.bad_requests, 100 * k);
            w.in_flight.store(k, Ordering::Relaxed);
            add(&w.abandoned, 2 * k);
            add(&w.idle_closed, 3 * k);
            add(&w.header_timeouts, 4 * k);
            add(&w.send_timeouts, 5 * k);
            add(&w.not_found, 6 * k);
        }
        assert_eq!(stats.requests(), 6);
        assert_eq!(stats.connections(), 60);
        assert_eq!(stats.bad_requests(), 600);
        assert_eq!(stats.in_flight(), 6);
        assert_eq!(stats.abandoned(), 12);
        assert_eq!(stats.idle_closed(), 18);
        assert_eq!(stats.header_timeouts(), 24);
        assert_eq!(stats.send_timeouts(), 30);
        assert_eq!(
            stats.json(),
            "{\"requests\":6,\"in_flight\":6,\"connections\":60,\"bad_requests\":600,\
             \"abandoned\":12,\"idle_closed\":18,\"header_timeouts\":24,\
             \"send_timeouts\":30,\"not_found\":36,\"workers\":3}"
        );
    }

    #[test]
    fn each_worker_has_its_own_cache_line() {
        assert_eq!(std::mem::align_of::<WorkerCounters>(), 128);
        assert_eq!(std::mem::size_of::<WorkerCounters>() % 128, 0);
    }
}
