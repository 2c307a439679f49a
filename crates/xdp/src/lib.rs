//! AF_XDP small-packet generator and receiver for `xload pps` / `xload pps-rx`.
pub mod bpf;
pub mod cli;
pub mod frame;
pub mod program;
pub mod units;
