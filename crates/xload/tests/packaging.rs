//! What users install from: the README stays short and its links resolve,
//! and the Dockerfile builds packages and copies binaries the workspace has
//! (`docker build` itself cannot run in the test environment: no container
//! engine, no registry).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(root().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// GitHub's anchor of a heading: lower case, punctuation dropped, spaces to dashes.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == '-' || *c == '_' || *c == ' ')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| {
            l.trim_start_matches('#')
                .strip_prefix(' ')
                .filter(|_| l.starts_with('#'))
        })
        .map(slug)
        .collect()
}

/// The relative link targets of a markdown text: `](target)`.
fn links(text: &str) -> Vec<String> {
    text.split("](")
        .skip(1)
        .filter_map(|rest| rest.split_once(')').map(|(t, _)| t.to_string()))
        .filter(|t| !t.starts_with("http://") && !t.starts_with("https://"))
        .collect()
}

#[test]
fn readme_is_at_most_8_kb() {
    let len = read("README.md").len();
    assert!(
        len <= 8 * 1024,
        "README.md is {len} bytes: move details into docs/"
    );
}

#[test]
fn links_in_readme_and_docs_resolve() {
    let mut pages = vec![PathBuf::from("README.md")];
    for e in std::fs::read_dir(root().join("docs")).unwrap() {
        let p = e.unwrap().path();
        if p.extension().is_some_and(|x| x == "md") {
            pages.push(Path::new("docs").join(p.file_name().unwrap()));
        }
    }
    let mut broken = Vec::new();
    for page in &pages {
        let text = read(page.to_str().unwrap());
        for link in links(&text) {
            let (path, anchor) = link.split_once('#').unwrap_or((&link, ""));
            let target = if path.is_empty() {
                root().join(page)
            } else {
                root().join(page.parent().unwrap()).join(path)
            };
            if !target.exists() {
                broken.push(format!("{}: {link} (no such file)", page.display()));
            } else if !anchor.is_empty() {
                let body = std::fs::read_to_string(&target).unwrap_or_default();
                if !anchors(&body).contains(anchor) {
                    broken.push(format!("{}: {link} (no such heading)", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Package name -> binary names, for every workspace member under crates/.
fn workspace_binaries() -> Vec<(String, Vec<String>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(root().join("crates")).unwrap() {
        let manifest = e.unwrap().path().join("Cargo.toml");
        let Ok(text) = std::fs::read_to_string(&manifest) else {
            continue;
        };
        let mut section = String::new();
        let (mut package, mut bins) = (None, Vec::new());
        for line in text.lines().map(str::trim) {
            if line.starts_with('[') {
                section = line.to_string();
            } else if let Some(v) = line.strip_prefix("name = ") {
                let v = v.trim_matches('"').to_string();
                match section.as_str() {
                    "[package]" => package = Some(v),
                    "[[bin]]" => bins.push(v),
                    _ => {}
                }
            }
        }
        if let Some(p) = package {
            if bins.is_empty() && manifest.with_file_name("src/main.rs").exists() {
                bins.push(p.clone());
            }
            out.push((p, bins));
        }
    }
    out
}

#[test]
fn dockerfile_builds_and_copies_what_the_workspace_has() {
    let docker = read("Dockerfile");
    let build = docker
        .lines()
        .find(|l| l.trim_start().starts_with("RUN cargo build"))
        .expect("a RUN cargo build line");
    assert!(
        build.contains("--release") && build.contains("--locked"),
        "{build}"
    );
    let words: Vec<&str> = build.split_whitespace().collect();
    let packages: Vec<&str> = words
        .windows(2)
        .filter(|w| w[0] == "-p")
        .map(|w| w[1])
        .collect();
    assert_eq!(packages, ["xload", "xtune"], "{build}");

    let workspace = workspace_binaries();
    let mut built_bins = BTreeSet::new();
    for p in &packages {
        let (_, bins) = workspace
            .iter()
            .find(|(name, _)| name == p)
            .unwrap_or_else(|| panic!("no workspace package {p}"));
        built_bins.extend(bins.iter().cloned());
    }

    let workdir = docker
        .lines()
        .find_map(|l| l.strip_prefix("WORKDIR "))
        .expect("WORKDIR")
        .trim();
    let copy = docker
        .lines()
        .find(|l| l.starts_with("COPY --from=build"))
        .expect("COPY --from=build");
    let copy_words: Vec<&str> = copy.split_whitespace().collect();
    let sources = &copy_words[2..copy_words.len() - 1];
    let copied: BTreeSet<String> = sources
        .iter()
        .map(|s| {
            let bin = s
                .strip_prefix(&format!("{workdir}/target/release/"))
                .unwrap_or_else(|| panic!("{s} is not under {workdir}/target/release/"));
            bin.to_string()
        })
        .collect();
    assert_eq!(copied, built_bins, "the binaries copied are the ones built");

    let entry = docker
        .lines()
        .find_map(|l| l.strip_prefix("ENTRYPOINT "))
        .expect("ENTRYPOINT");
    assert!(entry.contains("\"xload\""), "{entry}");
    for l in docker
        .lines()
        .filter(|l| l.starts_with("COPY ") && !l.contains("--from"))
    {
        let src = l.split_whitespace().nth(1).unwrap();
        assert!(root().join(src).exists(), "{l}: no {src}");
    }

    let ignore = read(".dockerignore");
    assert!(
        ignore.lines().any(|l| l.trim() == "target"),
        "target/ stays out of the context"
    );
    assert!(read("README.md").contains("docker build"));
}

#[test]
fn cargo_lock_is_current_for_locked_builds() {
    // `cargo install --locked` and the Dockerfile's `--locked` build fail when
    // Cargo.lock would change.
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "tree",
            "--locked",
            "--offline",
            "--workspace",
            "--depth",
            "1",
        ])
        .current_dir(root())
        .output()
        .expect("run cargo metadata");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The workspace members listed in the root Cargo.toml.
fn workspace_members() -> Vec<String> {
    let root_toml = read("Cargo.toml");
    let list = root_toml
        .split_once("members = [")
        .and_then(|(_, rest)| rest.split_once(']'))
        .expect("a members list in Cargo.toml")
        .0;
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

#[test]
fn every_member_takes_the_workspace_lints_and_ci_runs_clippy() {
    let members = workspace_members();
    assert!(members.len() >= 8, "{members:?}");
    let mut missing = Vec::new();
    for m in &members {
        let text = read(&format!("{m}/Cargo.toml"));
        let mut section = "";
        let opted_in = text.lines().map(str::trim).any(|l| {
            if l.starts_with('[') {
                section = l;
            }
            section == "[lints]" && l.replace(' ', "") == "workspace=true"
        });
        if !opted_in {
            missing.push(m.as_str());
        }
    }
    assert!(
        missing.is_empty(),
        "members without `[lints] workspace = true`: {missing:?}"
    );

    let script = read("scripts/test");
    let lines: Vec<&str> = script.lines().map(str::trim).collect();
    let clippy = lines
        .iter()
        .position(|l| {
            l.starts_with("cargo clippy --workspace --all-targets") && l.ends_with("-- -D warnings")
        })
        .expect("scripts/test runs cargo clippy on the whole workspace with -D warnings");
    let test = lines
        .iter()
        .position(|l| l.starts_with("cargo test --workspace"))
        .expect("scripts/test runs cargo test");
    assert!(clippy < test, "clippy runs before the tests");
    assert!(
        script.contains("set -euo pipefail"),
        "a failed clippy fails the run"
    );
}
