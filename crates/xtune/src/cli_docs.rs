//! `xtune completions SHELL` and `xtune man [COMMAND]`: shell completion
//! scripts and roff man pages generated from the clap definition. They are
//! answered before the tuning commands are parsed (they read no profile and
//! touch no host), so `Cli` needs no variant for them.

use clap::{value_parser, Arg, Command};
use clap_complete::Shell;

/// The two documentation commands, as an extension of `cmd`.
fn with_doc_commands(cmd: Command) -> Command {
    cmd.subcommand(
        Command::new("completions")
            .about("Shell completion script on stdout (bash, zsh, fish, elvish, powershell)")
            .arg(
                Arg::new("shell")
                    .required(true)
                    .value_parser(value_parser!(Shell)),
            ),
    )
    .subcommand(
        Command::new("man")
            .about("Man page (roff) on stdout: `xtune man > xtune.1`, `xtune man apply`")
            .arg(Arg::new("command").help("A subcommand's own page (e.g. apply)")),
    )
}

/// Answers `completions` and `man` when they are the first argument:
/// Some(exit code), else None (the caller parses its own commands).
pub(crate) fn answer(cmd: Command) -> Option<i32> {
    let first = std::env::args().nth(1)?;
    if first != "completions" && first != "man" {
        return None;
    }
    let mut cmd = with_doc_commands(cmd);
    let matches = match cmd.clone().try_get_matches() {
        Ok(m) => m,
        Err(e) => {
            let _ = e.print();
            return Some(if e.use_stderr() { 2 } else { 0 });
        }
    };
    let mut buf = Vec::new();
    match matches.subcommand() {
        Some(("completions", m)) => {
            let shell = *m.get_one::<Shell>("shell").expect("required");
            clap_complete::generate(shell, &mut cmd, "xtune", &mut buf);
        }
        Some(("man", m)) => {
            cmd.build();
            let page = match m.get_one::<String>("command") {
                None => cmd,
                // After `build`, a subcommand's display name (the page title)
                // is `xtune-apply`.
                Some(name) => match cmd.find_subcommand(name) {
                    Some(c) => c.clone().version(env!("CARGO_PKG_VERSION")),
                    None => {
                        let names: Vec<&str> =
                            cmd.get_subcommands().map(|c| c.get_name()).collect();
                        eprintln!(
                            "xtune: man: no subcommand {name:?} (one of: {})",
                            names.join(", ")
                        );
                        return Some(2);
                    }
                },
            };
            if let Err(e) = clap_mangen::Man::new(page).render(&mut buf) {
                eprintln!("xtune: man: {e}");
                return Some(1);
            }
        }
        _ => return None,
    }
    if let Err(e) = xload_sys::stdout::write_stdout(&String::from_utf8_lossy(&buf)) {
        eprintln!("xtune: writing to stdout: {e}");
    }
    Some(0)
}
