//! xload: a thread-per-core HTTP/1.1 load generator that measures honestly and
//! says whether the client itself was the bottleneck.

mod app;
mod args;
mod capacity;
mod cli_docs;
mod demo;
mod export;
mod fd_limit;
mod files;
mod gate;
mod hoist;
mod hosts;
mod lab;
mod merge;
mod metrics;
mod output;
mod plot;
mod pps;
mod prepared;
mod progress;
mod run;
mod serve;
mod sweep;
mod tls;
mod workload;

use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use clap::{Parser, Subcommand};

use crate::args::RunArgs;

/// Why a command could not do its job; maps to the exit codes of docs/design.md.
#[derive(Debug)]
pub enum Failure {
    /// Bad arguments: exit 2.
    Usage(String),
    /// The run could not be done: exit 1.
    Run(String),
}

#[derive(Parser, Debug)]
#[command(
    name = "xload",
    version,
    about = "Thread-per-core HTTP/1.1 load generator",
    args_conflicts_with_subcommands = true
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    pub(crate) cmd: Option<Cmd>,

    /// Target URL: http://host[:port]/path?query
    pub(crate) url: Option<String>,

    #[command(flatten)]
    pub(crate) run: RunArgs,
}

#[derive(Subcommand, Debug)]
pub(crate) enum Cmd {
    /// Run a workload file (docs/workload.md): request classes, checks, limits.
    Run(RunWorkloadArgs),
    /// Load in steps (concurrency or rate): table, knee, operating range, plot.
    Sweep(sweep::SweepArgs),
    /// Validate a host's capacity from a plan: tuning verified, both sides' evidence per
    /// step, the bottleneck named, the maximum confirmed; JSON, Markdown and HTML reports.
    Capacity(capacity::CapacityArgs),
    /// The embedded thread-per-core HTTP/1.1 responder.
    Serve(serve::ServeArgs),
    /// Exact merge of JSON reports (runs on several hosts).
    Merge(merge::MergeArgs),
    /// Embedded responder + a short sweep on loopback: no setup.
    Demo(demo::DemoArgs),
    /// Static file sets with a SHA-256 manifest: generate, verify.
    Files(files::FilesArgs),
    /// AF_XDP small-packet transmit.
    Pps(pps::PpsArgs),
    /// AF_XDP / XDP receive and count.
    PpsRx(pps::PpsRxArgs),
    /// A veth lab: a namespace with nginx and/or `xload serve`, removed on exit.
    Lab(lab::LabArgs),
    /// Shell completion script on stdout (bash, zsh, fish, elvish, powershell).
    Completions(cli_docs::CompletionsArgs),
    /// Man page (roff) on stdout: `xload man > xload.1`, `xload man sweep`.
    Man(cli_docs::ManArgs),
}

/// `xload run WORKLOAD.toml [URL] [OPTIONS]`: `xload -w WORKLOAD.toml [URL]`.
#[derive(clap::Args, Debug)]
pub(crate) struct RunWorkloadArgs {
    /// Workload file (TOML).
    pub(crate) file: std::path::PathBuf,

    /// Target URL, overriding the workload's `url`.
    pub(crate) url: Option<String>,

    #[command(flatten)]
    pub(crate) run: RunArgs,
}

/// Runs a load (plain or workload): the URL given, else the workload's.
fn main_load(url: Option<&str>, ra: &RunArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let url = workload::target(url, &ra.common)?;
    if !ra.hosts.on.is_empty() && (ra.export.hlog.is_some() || ra.export.metrics_listen.is_some()) {
        return Err(Failure::Usage(
            "--hlog and --metrics-listen are for a run on this host; with --on, keep each host's report (--keep-reports)".into(),
        ));
    }
    if ra.hosts.on.is_empty() {
        run::main_run(&url, ra, stop)
    } else {
        hosts::on::main_on(&url, ra, stop)
    }
}

/// Writes report text to stdout. A reader that went away (`xload ... | head`)
/// is no reason to panic or to lose the exit code: the run is done.
pub(crate) fn out(text: &str) {
    if let Err(e) = xload_sys::stdout::write_stdout(text) {
        eprintln!("xload: writing the report: {e}");
    }
}

/// `println!` through [`out`].
macro_rules! outln {
    () => { $crate::out("\n") };
    ($($t:tt)*) => { $crate::out(&format!("{}\n", format_args!($($t)*))) };
}
pub(crate) use outln;

/// Ctrl-C or SIGTERM stops the run; the report covers what was measured
/// (xload_sys::signal: a signal repeated two seconds later exits at once).
fn install_sigint() -> Arc<AtomicBool> {
    xload_sys::signal::stop_flag()
}

/// A first word that is no subcommand but one or two letters away from one
/// (`swep`, `serv`) is a typo, not a host name to resolve.
fn mistyped_subcommand(first: &str) -> Option<String> {
    if first.len() < 3 || first.starts_with('-') || first.contains([':', '/', '.']) {
        return None;
    }
    let cmd = <Cli as clap::CommandFactory>::command();
    let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
    if names.contains(&first) {
        return None;
    }
    names
        .into_iter()
        .map(|name| (xload_sys::edit::edit_distance(first, name), name))
        .filter(|&(d, _)| d <= 2)
        .min()
        .map(|(_, name)| name.to_string())
}

/// The per-second histograms (~180 KiB each, allocated by the workers and
/// freed by the aggregator every tick) stay in the heap instead of being
/// mapped and unmapped each time: a long run's RSS then stays flat instead
/// of swinging by a few hundred KiB with the moment it is read.
fn steady_heap() {
    #[cfg(target_env = "gnu")]
    // SAFETY: mallopt only sets glibc malloc's tunables; called first thing
    // in main, before any other thread exists.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, 4 << 20);
        libc::mallopt(libc::M_TRIM_THRESHOLD, 64 << 20);
    }
}

fn main() -> ExitCode {
    steady_heap();
    let cmd = <Cli as clap::CommandFactory>::command();
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if let Some(first) = hoist::first_positional(&cmd, &argv) {
        if let Some(name) = mistyped_subcommand(&first) {
            eprintln!(
                "xload: unknown command `{first}`: did you mean `xload {name}`? (a target is a URL: http://host[:port]/path)"
            );
            return ExitCode::from(2);
        }
    }
    let argv = match hoist::hoist(&cmd, argv) {
        Ok(argv) => argv,
        Err(m) => {
            eprintln!("xload: {m}");
            return ExitCode::from(2);
        }
    };
    let cli = Cli::parse_from(argv);
    // Commands that measure exit 128 + the signal's number when one stopped
    // them (after writing their partial report), so that a CI job never
    // counts an aborted run as a pass; a server, a receiver (`pps-rx`) or a
    // lab stopped by SIGTERM did its job.
    let measures = !matches!(
        cli.cmd,
        Some(Cmd::Serve(_) | Cmd::PpsRx(_) | Cmd::Lab(_) | Cmd::Merge(_) | Cmd::Files(_))
            | Some(Cmd::Completions(_) | Cmd::Man(_))
    );
    let result = match cli.cmd {
        Some(Cmd::Sweep(mut a)) => sweep::take_workload_positional(&mut a)
            .and_then(|()| sweep::main_sweep(&a, install_sigint())),
        Some(Cmd::Capacity(a)) => capacity::main_capacity(&a, install_sigint()),
        Some(Cmd::Serve(a)) => serve::main_serve(&a, install_sigint()),
        Some(Cmd::Merge(a)) => merge::main_merge(&a),
        Some(Cmd::Demo(a)) => demo::main_demo(&a, install_sigint()),
        Some(Cmd::Files(a)) => files::main_files(&a),
        Some(Cmd::Pps(a)) => Ok(pps::main_pps(&a, install_sigint())),
        Some(Cmd::PpsRx(a)) => Ok(pps::main_pps_rx(&a, install_sigint())),
        Some(Cmd::Lab(a)) => lab::main_lab(&a, install_sigint()),
        Some(Cmd::Completions(a)) => cli_docs::main_completions(&a),
        Some(Cmd::Man(a)) => cli_docs::main_man(&a),
        Some(Cmd::Run(mut a)) => {
            if a.run.common.workload.is_some() {
                Err(Failure::Usage(
                    "xload run takes the workload file as its argument: drop -w".into(),
                ))
            } else {
                a.run.common.workload = Some(a.file.clone());
                main_load(a.url.as_deref(), &a.run, install_sigint())
            }
        }
        None => main_load(cli.url.as_deref(), &cli.run, install_sigint()),
    };
    let interrupted = |code: i32| {
        if measures {
            xload_sys::signal::exit_code(code)
        } else {
            code
        }
    };
    match result {
        Ok(code) => ExitCode::from(interrupted(code) as u8),
        Err(Failure::Usage(m)) => {
            eprintln!("xload: {m}");
            ExitCode::from(2)
        }
        Err(Failure::Run(m)) => {
            eprintln!("xload: {m}");
            ExitCode::from(interrupted(1) as u8)
        }
    }
}
