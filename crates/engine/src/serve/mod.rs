//! `xload serve`: a thread-per-core HTTP/1.1 responder over io_uring, the
//! default target for demos, tests and hardware-capacity checks.
//!
//! Each worker is pinned to its CPU and owns a listener bound with
//! SO_REUSEPORT (the kernel spreads connections over workers), one multishot
//! accept, one multishot receive per connection into a provided buffer ring,
//! and at most one send in flight per connection (so pipelined answers stay
//! in order). Answers are prebuilt bytes: an answer costs a recv completion,
//! a send and its completion. `--delay` holds each answer on a timer (the
//! loop's wait timeout, not a sleeping thread); `--pool N` lets at most N
//! answers be held at once, the rest queue in arrival order — a model of a
//! connection pool in front of a slow dependency. `/stats` answers the
//! responder's own counters as JSON.

mod answers;
mod config;
mod conn;
mod counters;
mod date;
mod h2;
mod hold;
mod listener;
mod responder;
mod tls;

pub use config::{ConfigError, ServeConfig, MAX_BODY_SIZE};
pub use counters::{ServeStats, WorkerCounters};

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use crate::pin;
use listener::{port_is_free, reuseport_listener, unix_listeners};
use responder::Responder;

/// A running responder.
pub struct Server {
    pub addr: SocketAddr,
    /// Where it listens instead of `addr` (`--unix-socket`); removed when
    /// it stops.
    pub unix: Option<PathBuf>,
    pub stats: Arc<ServeStats>,
    /// How each worker's ring was set up.
    pub mode: &'static str,
    /// Sockets are named by their slot in a registered file table.
    pub registered_sockets: bool,
    stop: Arc<AtomicBool>,
    handles: Vec<std::thread::JoinHandle<Result<(), String>>>,
}

impl Server {
    /// Binds every worker's listener and starts the workers.
    pub fn start(cfg: ServeConfig) -> io::Result<Server> {
        Self::start_on(cfg, None)
    }

    /// Binds a Unix socket at `path` instead of `cfg.listen` (its workers
    /// share it) and starts the workers.
    pub fn start_unix(cfg: ServeConfig, path: &Path) -> io::Result<Server> {
        Self::start_on(cfg, Some(path))
    }

    fn start_on(cfg: ServeConfig, unix: Option<&Path>) -> io::Result<Server> {
        let n = cfg.workers();
        let mut listeners: Vec<OwnedFd> = Vec::with_capacity(n);
        let mut addr = cfg.listen;
        if let Some(path) = unix {
            listeners = unix_listeners(path, n)?;
        } else {
            if addr.port() != 0 {
                port_is_free(addr)?;
            }
            for _ in 0..n {
                let l = reuseport_listener(addr)?;
                addr = l.local_addr()?; // the first bind picks the port for all
                listeners.push(l.into());
            }
        }
        let unix = unix.map(Path::to_path_buf);
        let stats = Arc::new(ServeStats {
            workers: (0..n).map(|_| WorkerCounters::default()).collect(),
        });
        let stop = Arc::new(AtomicBool::new(false));
        let mut handles = Vec::with_capacity(n);
        let (mode_tx, mode_rx) = std::sync::mpsc::channel();
        for (w, listener) in listeners.into_iter().enumerate() {
            let cpu = cfg.cpus.get(w).copied().flatten();
            let stats = Arc::clone(&stats);
            let stop = Arc::clone(&stop);
            let wcfg = cfg.worker(w);
            let tls = cfg.tls.clone();
            let files = cfg.files.clone();
            let mode_tx = mode_tx.clone();
            let h = std::thread::Builder::new()
                .name(format!("xload-serve{w}"))
                .spawn(move || {
                    if let Some(c) = cpu {
                        pin::pin_current_thread(c).map_err(|e| format!("pin to cpu {c}: {e}"))?;
                    }
                    let mut r = Responder::new(listener, w, stats, wcfg, tls, files)?;
                    let _ = mode_tx.send((r.mode, !r.slots.is_empty()));
                    r.run(&stop);
                    Ok(())
                })?;
            handles.push(h);
        }
        drop(mode_tx);
        let (mode, registered_sockets) = mode_rx.recv().unwrap_or(("unavailable", false));
        if mode == "unavailable" {
            let mut why = String::from("responder workers failed to start");
            for h in handles {
                if let Ok(Err(e)) = h.join() {
                    why = e;
                }
            }
            if let Some(path) = &unix {
                let _ = std::fs::remove_file(path);
            }
            return Err(io::Error::other(why));
        }
        Ok(Server {
            addr,
            unix,
            stats,
            mode,
            registered_sockets,
            stop,
            handles,
        })
    }

    /// A flag that stops the workers when set.
    pub fn stop_flag(&self) -> Arc<AtomicBool> {
        Arc::clone(&self.stop)
    }

    /// Stops the workers and waits for them.
    pub fn stop(self) -> Result<(), crate::Error> {
        self.stop.store(true, Ordering::Relaxed);
        self.join()
    }

    /// Waits for the workers (they end when the stop flag is set).
    pub fn join(self) -> Result<(), crate::Error> {
        let mut first_err = Ok(());
        for h in self.handles {
            match h.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => first_err = first_err.and(Err(crate::Error::Responder(Some(e)))),
                Err(_) => first_err = first_err.and(Err(crate::Error::Responder(None))),
            }
        }
        if let Some(path) = &self.unix {
            let _ = std::fs::remove_file(path);
        }
        first_err
    }
}
