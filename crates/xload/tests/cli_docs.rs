//! `xload completions SHELL` and `xload man`: generated from the clap
//! definition, they name the real subcommands and options.

use std::process::{Command, Output};

fn xload(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xload"))
        .args(args)
        .output()
        .expect("run xload")
}

fn stdout_of(args: &[&str]) -> String {
    xload_testkit::stdout_of(env!("CARGO_BIN_EXE_xload"), args)
}

#[test]
fn completions_name_every_subcommand_and_the_main_options() {
    for shell in ["bash", "zsh", "fish", "elvish", "powershell"] {
        let script = stdout_of(&["completions", shell]);
        // fish writes long options as `-l connections`, the others `--connections`.
        for word in [
            "sweep",
            "serve",
            "merge",
            "demo",
            "pps-rx",
            "connections",
            "fail-if",
            "engine",
        ] {
            assert!(script.contains(word), "{shell} completions lack {word}");
        }
        assert!(
            script.contains("--connections") || script.contains("-l connections"),
            "{shell} completions lack the --connections option"
        );
    }
}

#[test]
fn bash_completion_script_loads_and_registers_xload() {
    let script = stdout_of(&["completions", "bash"]);
    let Ok(out) = Command::new("bash")
        .args(["-c", "eval \"$XLOAD_COMPLETION\" && complete -p xload"])
        .env("XLOAD_COMPLETION", &script)
        .output()
    else {
        eprintln!("skipped: no bash");
        return;
    };
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("xload"));
}

#[test]
fn man_page_lists_subcommands_and_options() {
    let page = stdout_of(&["man"]);
    assert!(
        page.contains(".TH xload 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    for word in [
        r"\-\-connections",
        r"\-\-rate",
        r"\-\-engine",
        r"xload\-sweep(1)",
        r"xload\-serve(1)",
        r"xload\-pps\-rx(1)",
    ] {
        assert!(page.contains(word), "man page lacks {word}");
    }
}

#[test]
fn man_page_of_a_subcommand_has_its_own_options() {
    let page = stdout_of(&["man", "sweep"]);
    assert!(
        page.contains(".TH xload-sweep 1"),
        "{}",
        &page[..200.min(page.len())]
    );
    assert!(page.contains(r"\-\-knee\-gain"), "no --knee-gain");
    let serve = stdout_of(&["man", "serve"]);
    assert!(serve.contains(r"\-\-body\-size"), "no --body-size");
}

#[test]
fn man_pages_have_examples_and_exit_status_before_the_version() {
    let page = stdout_of(&["man"]);
    let at = |s: &str| page.find(s).unwrap_or_else(|| panic!("no {s} in\n{page}"));
    assert!(at(".SH \"EXAMPLES\"") < at(".SH \"EXIT STATUS\""));
    assert!(at(".SH \"EXIT STATUS\"") < at(".SH VERSION"));
    assert!(page.contains(r"\fBxload \-c 100 \-d 30s http://127.0.0.1:8080/\fR"));
    for status in ["0", "1", "2", "3", "130, 143"] {
        assert!(
            page.contains(&format!("\\fB{status}\\fR\n")),
            "no exit status {status}"
        );
    }
    let sweep = stdout_of(&["man", "sweep"]);
    assert!(
        sweep.contains(r"\fBxload sweep \-c 1,4,16,64,256"),
        "{sweep}"
    );
    assert!(sweep.contains(".SH \"EXIT STATUS\""));
    // A page without examples of its own still says how it exits.
    let files = stdout_of(&["man", "files"]);
    assert!(!files.contains("EXAMPLES") && files.contains(".SH \"EXIT STATUS\""));
}

#[test]
fn man_page_of_an_unknown_subcommand_is_a_usage_error() {
    let out = xload(&["man", "sweeep"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no subcommand \"sweeep\""), "{err}");
    assert!(err.contains("sweep"), "{err}");
}
