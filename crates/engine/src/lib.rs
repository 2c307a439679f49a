//! Per-core load loops for xload.
//!
//! One worker thread per CPU, pinned, each owning its connections, its ring (or
//! epoll instance) and its [`Recorder`](xload_stats::Recorder): nothing is
//! shared between workers on the per-request path. The primary driver is io_uring (multishot receive into
//! a provided buffer ring, sends that post no completion on success, one
//! `io_uring_enter` per batch of completions); the fallback driver is epoll
//! (edge-triggered, same connection logic) for kernels or sandboxes where
//! io_uring is unavailable. Both drive the same sans-IO code: the HTTP codec in
//! `xload-http` and the connection bookkeeping in `conn`.
//!
//! Where things are: `worker` spawns and joins the workers; `ctx` is the
//! state each one's loop shares with its driver (window, quota, pacing,
//! ticks); `drive` is the driver-independent half of a connection's life;
//! `mix` carries a workload's prebuilt requests and response checks;
//! `uring` and `epoll` are the two drivers; [`serve`] is the responder;
//! [`certs`] makes self-signed certificates and accepts any (for `--tls`,
//! `--insecure` and the tests).
//!
//! Timeouts are checked by a coarse periodic sweep over the worker's
//! connections (every ~tenth of the request timeout, at most 100 ms) instead of a
//! timer structure updated on every request: the sweep costs O(connections) a
//! few times per second and nothing per request.

pub mod certs;
pub mod clock;
mod conn;
mod ctx;
mod drive;
mod epoll;
mod error;
mod lowat;
mod mix;
pub mod pin;
mod plan;
mod ramp;
pub mod ring;
mod sched;
pub mod serve;
mod sock;
mod tls;
mod uring;
mod worker;
mod xdp;

pub use ctx::Tick;
pub use error::Error;
pub use mix::Workload;
pub use plan::{Arrival, EngineChoice, EngineKind, H2Plan, OpenLoop, Plan, TlsClient, XdpTarget};
pub use sock::{check_source, UNIX_PATH_MAX};
pub use tls::ktls_unavailable;
pub use worker::{probe_engine, run, run_observed, Outcome, WorkerInfo};
