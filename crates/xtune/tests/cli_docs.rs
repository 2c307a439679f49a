//! `xtune completions SHELL` and `xtune man`: generated from the clap
//! definition, they name the real subcommands and options.

use std::process::{Command, Output};

fn xtune(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtune"))
        .args(args)
        .output()
        .expect("run xtune")
}

fn stdout_of(args: &[&str]) -> String {
    xload_testkit::stdout_of(env!("CARGO_BIN_EXE_xtune"), args)
}

#[test]
fn completions_name_every_subcommand_and_the_global_options() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        for word in [
            "apply", "verify", "rollback", "observe", "netns", "dry-run", "settle",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
    }
}

#[test]
fn man_pages_list_subcommands_and_options() {
    let page = stdout_of(&["man"]);
    assert!(
        page.contains(".TH xtune 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    for word in [
        r"xtune\-apply(1)",
        r"xtune\-verify(1)",
        r"\-\-netns",
        r"\-\-json",
    ] {
        assert!(page.contains(word), "man page lacks {word}");
    }
    let apply = stdout_of(&["man", "apply"]);
    assert!(
        apply.contains(".TH xtune-apply 1"),
        "{}",
        &apply[..200.min(apply.len())]
    );
    assert!(apply.contains(r"\-\-dry\-run"), "no --dry-run");
}

#[test]
fn man_pages_have_examples_and_exit_status_before_the_version() {
    let page = stdout_of(&["man"]);
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("no {s} in\n{page}"));
    assert!(at(".SH \"EXAMPLES\"") < at(".SH \"EXIT STATUS\""));
    assert!(at(".SH \"EXIT STATUS\"") < at(".SH VERSION"));
    assert!(page.contains(r"\fBxtune verify tuning/loadgen.toml \-\-settle 10s\fR"));
    assert!(page.contains("\\fB3\\fR\nxtune verify found drift."));
    let apply = stdout_of(&["man", "apply"]);
    assert!(apply.contains(".SH \"EXIT STATUS\""), "{apply}");
}

#[test]
fn a_missing_shell_or_an_unknown_page_is_a_usage_error() {
    assert_eq!(xtune(&["completions"]).status.code(), Some(2));
    assert_eq!(xtune(&["completions", "tcsh"]).status.code(), Some(2));
    let out = xtune(&["man", "aply"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no subcommand \"aply\""));
}
