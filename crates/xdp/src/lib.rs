//! AF_XDP small-packet generator and receiver for `xload pps` / `xload pps-rx`.
pub mod bpf;
pub mod cli;
pub mod clock;
pub mod frame;
pub mod lab;
pub mod netdev;
pub mod pps;
pub mod program;
pub mod rate;
pub mod report;
pub mod rx;
pub mod seq;
pub mod tx;
pub mod units;
pub mod xsk;
