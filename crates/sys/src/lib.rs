//! xload-sys: the small operating-system and command-line helpers that every
//! xload crate and both binaries share, each written once.
//!
//! Main design choice: only `libc` underneath, no other dependency, so any
//! crate of the workspace (the engine's hot loop included) may use it without
//! pulling in a command-line or serialisation stack. Each module is one
//! concern with one rule:
//! - [`clock`]: `CLOCK_MONOTONIC` and thread CPU time in nanoseconds.
//! - [`cpu`]: the CPU-list grammar (`0-3,6`), the affinity mask, pinning.
//! - [`signal`]: the one SIGINT/SIGTERM stop flag every command uses.
//! - [`stdout`]: report text on stdout, where a closed pipe is a clean stop.
//! - [`calendar`]: UTC calendar fields of a Unix time.
//! - [`duration`]: `500ms`, `2s`, `1.5m` on the command line.
//! - [`edit`]: edit distance, for "did you mean" hints.
//! - [`netns`]: entering a named network namespace by `setns`.
//! - [`fmt`]: latencies, counts, rates and byte sizes for people.
//! - [`remote`]: a command on other hosts through ssh or another transport.
//! - [`input`]: input files read whole, regular files only, up to a limit.
//! - [`roff`]: man page sections clap does not generate.

pub mod calendar;
pub mod clock;
pub mod cpu;
pub mod duration;
pub mod edit;
pub mod fmt;
pub mod input;
pub mod netns;
pub mod remote;
pub mod roff;
pub mod signal;
pub mod stdout;
