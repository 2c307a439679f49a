//! `xload completions SHELL` and `xload man [COMMAND]`: shell completion
//! scripts and roff man pages, generated from the clap definition so they
//! never disagree with `--help`.

use clap::{Args, CommandFactory};
use clap_complete::Shell;

use crate::{Cli, Failure};

#[derive(Debug, Args)]
pub(crate) struct CompletionsArgs {
    /// The shell to write the completion script for.
    pub shell: Shell,
}

#[derive(Debug, Args)]
pub(crate) struct ManArgs {
    /// A subcommand's own page (e.g. `sweep`); default: the main page.
    pub command: Option<String>,
}

/// Writes the completion script for `a.shell` to stdout.
pub(crate) fn main_completions(a: &CompletionsArgs) -> Result<i32, Failure> {
    let mut buf = Vec::new();
    clap_complete::generate(a.shell, &mut Cli::command(), "xload", &mut buf);
    crate::out(&String::from_utf8_lossy(&buf));
    Ok(0)
}

/// Writes the man page (roff) of xload or of one of its subcommands to stdout.
pub(crate) fn main_man(a: &ManArgs) -> Result<i32, Failure> {
    let mut cmd = Cli::command();
    cmd.build();
    let page = match a.command.as_deref() {
        None => cmd,
        // After `build`, a subcommand's display name is `xload-sweep`, the
        // page's title (as git's pages are named).
        Some(name) => cmd
            .find_subcommand(name)
            .map(|c| c.clone().version(env!("CARGO_PKG_VERSION")))
            .ok_or_else(|| {
                let names: Vec<&str> = cmd.get_subcommands().map(|c| c.get_name()).collect();
                Failure::Usage(format!(
                    "man: no subcommand {name:?} (one of: {})",
                    names.join(", ")
                ))
            })?,
    };
    let examples = examples(a.command.as_deref());
    let mut buf = Vec::new();
    render(page, examples, &mut buf).map_err(|e| Failure::Run(format!("man: {e}")))?;
    crate::out(&String::from_utf8_lossy(&buf));
    Ok(0)
}

/// Exit statuses of every xload command (docs/design.md).
const EXIT_STATUS: &[(&str, &str)] = &[
    ("0", "Success."),
    ("1", "The run could not be done: no response at all, target unreachable, a file that could not be written."),
    ("2", "Bad arguments or input files (the message names the option, file and line)."),
    ("3", "A --fail-if condition held, or xload capacity confirmed no maximum."),
    ("130, 143", "A run, sweep, demo or pps stopped by SIGINT or SIGTERM, after its partial report (serve, pps-rx and lab exit 0: they run until stopped)."),
];

/// The EXAMPLES of a page: (command line, what it does).
fn examples(command: Option<&str>) -> &'static [(&'static str, &'static str)] {
    match command {
        None => &[
            ("xload serve --listen 127.0.0.1:8080 &", "Start the embedded responder."),
            ("xload -c 100 -d 30s http://127.0.0.1:8080/", "100 connections for 30 seconds, closed loop."),
            ("xload --rate 50k -d 1m --latency http://127.0.0.1:8080/", "Open loop at 50,000 requests/s, latency corrected for coordinated omission, full percentile table."),
            ("xload -c 64 --json run.json --csv series.csv --hlog run.hlog URL", "Write the JSON report, the per-second CSV and an HdrHistogram interval log."),
            ("xload -d 10m --metrics-listen 127.0.0.1:9464 URL", "Serve Prometheus metrics on http://127.0.0.1:9464/metrics while the run lasts."),
            ("xload --fail-if 'p99>50ms' --fail-if 'errors>0' URL", "Exit 3 when the p99 is above 50 ms or any request failed (CI)."),
            ("xload sweep -c 1,4,16,64,256 URL", "Load in steps of concurrency: table, knee, operating range."),
            ("xload demo", "The embedded responder and a short sweep on loopback, no setup."),
        ],
        Some("sweep") => &[
            ("xload sweep -c 1,4,16,64,256 --plot sweep.svg URL", "Concurrency steps, the knee and a plot."),
            ("xload sweep --rate 10k,20k,40k --find-max --slo 'p99<10ms' URL", "Rate steps; then the highest rate meeting the SLO."),
        ],
        Some("serve") => &[
            ("xload serve --listen 127.0.0.1:8080 --cpus 2-3", "Answer on two pinned CPUs."),
            ("xload serve --files DIR --metrics-listen 127.0.0.1:9465", "Answer with the files under DIR; Prometheus metrics on port 9465."),
        ],
        Some("run") => &[(
            "xload run workloads/static.toml http://127.0.0.1:8080/",
            "Run a workload file's request classes, checks and limits.",
        )],
        Some("merge") => &[(
            "xload merge a.json b.json --json all.json",
            "Merge the reports of one run made from two hosts, exactly.",
        )],
        Some(_) => &[],
    }
}

/// The man page of `cmd`, with EXAMPLES (when given) and EXIT STATUS.
fn render(
    cmd: clap::Command,
    examples: &[(&str, &str)],
    w: &mut dyn std::io::Write,
) -> std::io::Result<()> {
    xload_sys::roff::render_man(cmd, examples, EXIT_STATUS, w)
}
