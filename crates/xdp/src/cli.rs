//! Command-line entry points for `xload pps` and `xload pps-rx` (scaffold: the
//! xdp helper replaces this file; the two function signatures are the contract
//! with crates/xload/src/main.rs).

/// Arguments of `xload pps`.
#[derive(Debug, Clone, clap::Args)]
pub struct PpsArgs {}

/// Arguments of `xload pps-rx`.
#[derive(Debug, Clone, clap::Args)]
pub struct PpsRxArgs {}

/// Runs `xload pps`; returns the process exit code (0, 1, 2 or 3 as in DESIGN.md).
pub fn pps_main(_args: &PpsArgs) -> i32 {
    eprintln!("xload pps: not built yet");
    1
}

/// Runs `xload pps-rx`; returns the process exit code.
pub fn pps_rx_main(_args: &PpsRxArgs) -> i32 {
    eprintln!("xload pps-rx: not built yet");
    1
}
