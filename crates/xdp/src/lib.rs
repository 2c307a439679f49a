//! AF_XDP small-packet generator and receiver behind `xload pps` and
//! `xload pps-rx`: the raw packet rate of a NIC/host path, measured end to
//! end, with every frame accounted for.
//!
//! Main design choice: no C libraries and no compiler at build time. The
//! AF_XDP rings ([`xsk`]) are a thin layer over `libc` mapped at the offsets
//! the kernel reports, and the two XDP programs ([`program`]) are written as
//! eBPF instructions with a tiny assembler and loaded with raw `bpf(2)`
//! ([`bpf`]). Programs are attached only through a `bpf_link`, so the
//! kernel detaches them when the last fd closes: on normal exit, on error
//! paths, on Ctrl-C and even on SIGKILL.
//!
//! Map of the crate, bottom up:
//! - [`frame`]: Ethernet/IPv4/IPv6/UDP frames built once per flow, stamped
//!   per packet (sequence number, `CLOCK_MONOTONIC` send time, incremental
//!   UDP checksum); the parser the receiver uses.
//! - [`bpf`], [`program`]: syscalls, assembler, the receive programs
//!   (redirect to an XSKMAP, or count and drop in a per-CPU array);
//!   [`claim`]: the program of a user-space stack owning one IPv4 address.
//! - [`xsk`]: UMEM, fill/completion/RX/TX rings, bind with need-wakeup,
//!   zero-copy tried before copy mode, `XDP_STATISTICS`.
//! - [`netdev`]: interface facts by rtnetlink/ethtool (namespace-correct,
//!   unlike sysfs), entering a network namespace.
//! - [`rate`], [`seq`], [`clock`]: token bucket, per-flow sequence
//!   tracking (lost/reordered/duplicated), clocks and CPU accounting
//!   (pinning is xload-sys's).
//! - [`tx`], [`rx`]: one pinned thread per queue with its own socket.
//! - [`pps`]: whole runs, the local receiver in a peer namespace, the
//!   RFC 2544-style zero-loss search; [`report`]: reports and the verdict.
//!   The command line (`xload pps`, `xload pps-rx`) is the xload binary's.
//! - [`port`]: one AF_XDP socket's frames for a user-space stack.
//! - [`tcp`]: a sans-IO TCP/IPv4 client stack (many connections from one
//!   owned address) for HTTP over AF_XDP; [`claim`] steers its frames.
//! - [`lab`]: veth labs for tests and benchmarks (two namespaces, or a
//!   server namespace with the generator end here).
pub mod bpf;
pub mod claim;
pub mod clock;
pub mod frame;
pub mod lab;
pub mod netdev;
pub mod port;
pub mod pps;
pub mod program;
pub mod rate;
pub mod report;
pub mod rx;
pub mod seq;
pub mod tcp;
pub mod tx;
pub mod xsk;
