//! `xtune observe` without xtune: `cargo run -p xload-probe --example observe -- --for 3s`.

use clap::Parser;
use xload_probe::observe::{observe_main, ObserveArgs};

/// Observe this host's CPUs, softirqs, IRQs and TCP counters.
#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    observe: ObserveArgs,
}

fn main() {
    let cli = Cli::parse();
    std::process::exit(observe_main(&cli.observe));
}
