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
    let mut buf = Vec::new();
    clap_mangen::Man::new(page)
        .render(&mut buf)
        .map_err(|e| Failure::Run(format!("man: {e}")))?;
    crate::out(&String::from_utf8_lossy(&buf));
    Ok(0)
}
