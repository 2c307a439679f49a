//! Shared support for xload's integration tests: `mod support;` from each
//! file in `tests/`.
//!
//! - [`server`]: std-only HTTP/1.1 test servers (one thread per connection)
//!   whose behaviour is chosen per test (well-formed keep-alive and pipelined
//!   answers, every malformed-response fault the client must survive, stalls,
//!   a slot pool with a fixed delay) and whose counters are exact, so a test
//!   can reconcile the counts xload reports with what the server did.
//! - [`nginx`]: a private nginx on a free loopback port with its own config in
//!   a temp dir, and its stub_status request counter.
//! - [`netns`]: the `ip` command for namespace labs.
//! - [`run`]: free ports, temp dirs, and running the built `xload` binary with
//!   a hard timeout.
//! - [`serve`]: a running `xload serve` on a free port.
//! - [`tls`]: self-signed certificates and rustls test clients.
//!
//! Design choice: no async runtime and no dependency the `xload` crate does not
//! already have (std and libc), so the support code cannot hide a bug that the
//! code under test shares. Every item here is used by some test file but not by
//! all of them, hence the `dead_code` allowance.
#![allow(dead_code)]

pub(crate) mod netns;
pub(crate) mod nginx;
pub(crate) mod run;
pub(crate) mod serve;
pub(crate) mod server;
pub(crate) mod timing;
pub(crate) mod tls;

#[allow(unused_imports)]
pub(crate) use run::{
    free_port, read_json, run_xload, run_xload_with_timeout, spawn_xload, wait_listening, TempDir,
    XloadChild,
};
#[allow(unused_imports)]
pub(crate) use server::{Behavior, TestServer};
