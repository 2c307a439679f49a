//! How the responder runs: the configuration a caller gives, its checks, and
//! what each worker takes from it (its share of the pool, timeouts in ns).

use std::fmt;
use std::net::SocketAddr;
use std::time::Duration;

/// Largest response body the responder builds answers for.
pub const MAX_BODY_SIZE: usize = 64 * 1024 * 1024;

/// How the responder runs.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// Response body size in bytes.
    pub body_size: usize,
    /// One worker per entry; Some(cpu) pins it.
    pub cpus: Vec<Option<usize>>,
    /// Hold each answer this long.
    pub delay: Option<Duration>,
    /// At most this many answers held at once (over all workers, split evenly).
    pub pool: Option<usize>,
    /// Close a connection that has sent nothing for this long while nothing
    /// was owed to it (None: never).
    pub idle_timeout: Option<Duration>,
    /// Close a connection whose request head has not come whole this long
    /// after its first bytes (None: never).
    pub header_timeout: Option<Duration>,
    /// Close a connection whose answer has not gone out this long after it
    /// was sent: a client that does not read (None: never).
    pub send_timeout: Option<Duration>,
    /// Speak TLS with this configuration (`--tls`); None: plain HTTP.
    pub tls: Option<std::sync::Arc<rustls::ServerConfig>>,
    /// `--files`: answer each path from this set (404 for the rest) instead
    /// of `body_size` bytes.
    pub files: Option<std::sync::Arc<xload_files::FileSet>>,
    /// `--h2`: speak HTTP/2 (prior knowledge on plain connections; over
    /// TLS, whichever of h2 and http/1.1 ALPN chose).
    pub h2: bool,
}

/// A configuration the responder refuses (see [`ServeConfig::check`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// The body is larger than [`MAX_BODY_SIZE`].
    BodyTooLarge,
    /// A pool of no slot would hold every answer for ever.
    EmptyPool,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::BodyTooLarge => f.write_str("--body-size is limited to 64 MiB"),
            ConfigError::EmptyPool => f.write_str("--pool must be at least 1"),
        }
    }
}

impl std::error::Error for ConfigError {}

impl ServeConfig {
    /// The limits a caller should enforce before [`super::Server::start`]
    /// (which itself treats a pool of 0 as 1).
    pub fn check(&self) -> Result<(), ConfigError> {
        if self.body_size > MAX_BODY_SIZE {
            return Err(ConfigError::BodyTooLarge);
        }
        if self.pool == Some(0) {
            return Err(ConfigError::EmptyPool);
        }
        Ok(())
    }

    /// Workers: one per entry of `cpus`, at least one.
    pub(super) fn workers(&self) -> usize {
        self.cpus.len().max(1)
    }

    /// What worker `w` of [`ServeConfig::workers`] runs with.
    pub(super) fn worker(&self, w: usize) -> WorkerConfig {
        let n = self.workers();
        WorkerConfig {
            body_size: self.body_size,
            delay_ns: self.delay.map(|d| d.as_nanos() as u64),
            // The pool split evenly, the remainder to the first workers; at
            // least one slot each.
            pool: self
                .pool
                .map(|p| p.max(1))
                .map(|p| (p / n + usize::from(w < p % n)).max(1)),
            timeouts: Timeouts::of(self),
            h2: self.h2,
        }
    }
}

/// One worker's share of the configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct WorkerConfig {
    pub body_size: usize,
    /// Hold each answer this long (`--delay`).
    pub delay_ns: Option<u64>,
    /// At most this many answers held at once by this worker.
    pub pool: Option<usize>,
    pub timeouts: Timeouts,
    /// `--h2`.
    pub h2: bool,
}

/// The connection timeouts in ns (None: never), and how often connections
/// are looked over for them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Timeouts {
    pub idle: Option<u64>,
    pub header: Option<u64>,
    pub send: Option<u64>,
    /// A quarter of the shortest timeout, 1 ms to 1 s: a connection closes
    /// within that (or a second) after its timeout expires. None: no timeout.
    pub sweep_every: Option<u64>,
}

impl Timeouts {
    fn of(cfg: &ServeConfig) -> Timeouts {
        let ns = |d: Option<Duration>| d.map(|d| (d.as_nanos() as u64).max(1));
        let (idle, header, send) = (
            ns(cfg.idle_timeout),
            ns(cfg.header_timeout),
            ns(cfg.send_timeout),
        );
        let sweep_every = [idle, header, send]
            .into_iter()
            .flatten()
            .min()
            .map(|t| (t / 4).clamp(1_000_000, 1_000_000_000));
        Timeouts {
            idle,
            header,
            send,
            sweep_every,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(workers: usize) -> ServeConfig {
        ServeConfig {
            listen: "127.0.0.1:0".parse().unwrap(),
            body_size: 13,
            cpus: vec![None; workers],
            delay: None,
            pool: None,
            idle_timeout: None,
            header_timeout: None,
            send_timeout: None,
            tls: None,
            files: None,
            h2: false,
        }
    }

    #[test]
    fn check_refuses_a_huge_body_and_an_empty_pool() {
        let mut c = config(1);
        assert_eq!(c.check(), Ok(()));
        c.body_size = MAX_BODY_SIZE;
        assert_eq!(c.check(), Ok(()));
        c.body_size = MAX_BODY_SIZE + 1;
        assert_eq!(c.check(), Err(ConfigError::BodyTooLarge));
        assert_eq!(
            ConfigError::BodyTooLarge.to_string(),
            "--body-size is limited to 64 MiB"
        );
        let mut c = config(1);
        c.pool = Some(0);
        assert_eq!(c.check(), Err(ConfigError::EmptyPool));
        c.pool = Some(1);
        assert_eq!(c.check(), Ok(()));
    }

    #[test]
    fn the_pool_is_split_evenly_with_the_remainder_first() {
        let mut c = config(3);
        c.pool = Some(8);
        let shares: Vec<_> = (0..3).map(|w| c.worker(w).pool).collect();
        assert_eq!(shares, [Some(3), Some(3), Some(2)]);
        // Fewer slots than workers: one slot each all the same.
        c.pool = Some(2);
        let shares: Vec<_> = (0..3).map(|w| c.worker(w).pool).collect();
        assert_eq!(shares, [Some(1), Some(1), Some(1)]);
        // A pool of 0 counts as 1; no pool, no limit.
        c.pool = Some(0);
        assert_eq!(c.worker(0).pool, Some(1));
        c.pool = None;
        assert_eq!(c.worker(0).pool, None);
    }

    #[test]
    fn no_cpus_is_one_worker() {
        let mut c = config(0);
        c.pool = Some(5);
        assert_eq!(c.workers(), 1);
        assert_eq!(c.worker(0).pool, Some(5));
    }

    #[test]
    fn timeouts_are_swept_at_a_quarter_of_the_shortest() {
        let mut c = config(1);
        assert_eq!(c.worker(0).timeouts.sweep_every, None);
        c.delay = Some(Duration::from_millis(7));
        c.idle_timeout = Some(Duration::from_secs(60));
        c.header_timeout = Some(Duration::from_secs(2));
        let w = c.worker(0);
        assert_eq!(w.delay_ns, Some(7_000_000));
        assert_eq!(w.timeouts.idle, Some(60_000_000_000));
        assert_eq!(w.timeouts.header, Some(2_000_000_000));
        assert_eq!(w.timeouts.send, None);
        assert_eq!(w.timeouts.sweep_every, Some(500_000_000));
        // Within 1 ms .. 1 s.
        c.send_timeout = Some(Duration::from_micros(10));
        assert_eq!(c.worker(0).timeouts.sweep_every, Some(1_000_000));
        c.send_timeout = None;
        c.header_timeout = None;
        assert_eq!(c.worker(0).timeouts.sweep_every, Some(1_000_000_000));
        // A zero timeout is at least 1 ns, never "no timeout".
        c.idle_timeout = Some(Duration::ZERO);
        assert_eq!(c.worker(0).timeouts.idle, Some(1));
    }
}
