//! `xload --on HOST,...`: one run made from several generator hosts. Each
//! host runs the xload installed there (through `--rsh`, ssh by default)
//! with its share of the load, one run id and one start instant; their
//! progress lines are relayed prefixed by host, their JSON reports merged
//! exactly ([`crate::merge::checked_merge`]) and shown with a row per host.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use xload_stats::walltime::format_rfc3339_us;
use xload_stats::{Report, TextOptions};
use xload_sys::remote::{self, Job, TRANSPORT_FAILED};

use super::rows::{host_rows, HostOutcome};
use crate::args::RunArgs;
use crate::merge::{checked_merge, MergeAllow};
use crate::output::{check_outputs, write_out};
use crate::Failure;

/// Options that `xload --on` decides for each host, or keeps to itself:
/// (long name, short name, takes a value).
const LOCAL_OPTIONS: &[(&str, Option<char>, bool)] = &[
    ("connections", Some('c'), true),
    ("rate", None, true),
    ("seed", None, true),
    ("requests", Some('n'), true),
    ("run-id", None, true),
    ("segment", None, true),
    ("start-at", None, true),
    ("json", None, true),
    ("csv", None, true),
    ("fail-if", None, true),
    ("on", None, true),
    ("rsh", None, true),
    ("remote-xload", None, true),
    ("keep-reports", None, true),
    ("allow-partial", None, false),
    ("progress-lines", None, false),
    ("quiet", Some('q'), false),
    ("latency", None, false),
];

/// How long after now the windows open when no --start-at is given: time
/// for the logins and each host's preflight.
const DEFAULT_LEAD_US: i64 = 3_000_000;

/// The command line of this run (without the program) less the options
/// `--on` sets per host or keeps local. Short options are taken one per
/// word (`-c 8`, `-c8`), not bundled (`-qc8`).
pub(crate) fn forward_args(argv: &[String]) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut words = argv.iter();
    while let Some(w) = words.next() {
        if w == "--" {
            out.push(w.clone());
            out.extend(words.by_ref().cloned());
            break;
        }
        let local = if let Some(long) = w.strip_prefix("--") {
            let name = long.split('=').next().unwrap_or(long);
            LOCAL_OPTIONS
                .iter()
                .find(|(l, _, _)| *l == name)
                .map(|&(_, _, value)| value && !long.contains('='))
        } else if let Some(short) = w.strip_prefix('-').filter(|s| !s.is_empty()) {
            let mut chars = short.chars();
            let first = chars.next().unwrap_or('-');
            let rest = chars.as_str();
            match LOCAL_OPTIONS.iter().find(|(_, s, _)| *s == Some(first)) {
                Some(&(_, _, value)) => {
                    if !value && !rest.is_empty() {
                        return Err(format!(
                            "with --on, give short options one per word: {w} is bundled"
                        ));
                    }
                    Some(value && rest.is_empty())
                }
                None => None,
            }
        } else {
            None
        };
        match local {
            // Dropped, with its value when that is the next word.
            Some(true) => {
                words.next();
            }
            Some(false) => {}
            None => out.push(w.clone()),
        }
    }
    Ok(out)
}

/// `total` split over `n` shares, the first ones one larger.
fn split(total: u64, n: usize, index: usize) -> u64 {
    let n = n as u64;
    total / n + u64::from((index as u64) < total % n)
}

/// The xload command line for host `index` (0-based) of `count`.
fn host_command(
    ra: &RunArgs,
    forwarded: &[String],
    run_id: &str,
    start_at: i64,
    index: usize,
    count: usize,
) -> Vec<String> {
    let mut cmd: Vec<String> = ra
        .hosts
        .remote_xload
        .split_whitespace()
        .map(str::to_string)
        .collect();
    cmd.extend(forwarded.iter().cloned());
    let c = split(ra.connections as u64, count, index);
    cmd.extend(["-c".into(), c.to_string()]);
    if let Some(rate) = ra.rate {
        cmd.extend(["--rate".into(), format!("{}", rate / count as f64)]);
    }
    if let Some(n) = ra.common.requests {
        cmd.extend(["-n".into(), split(n, count, index).to_string()]);
    }
    // One seed on every host would send in step: each gets its own, repeatable.
    if let Some(seed) = ra.common.seed {
        cmd.extend(["--seed".into(), seed.wrapping_add(index as u64).to_string()]);
    }
    cmd.extend([
        "--segment".into(),
        format!("{}/{count}", index + 1),
        "--run-id".into(),
        run_id.to_string(),
        "--start-at".into(),
        format_rfc3339_us(start_at),
        "--json".into(),
        "-".into(),
        "--progress-lines".into(),
    ]);
    cmd
}

/// Checks what `--on` needs before anything runs.
fn check(ra: &RunArgs) -> Result<(), Failure> {
    let hosts = &ra.hosts.on;
    if let Some(h) = hosts
        .iter()
        .enumerate()
        .find_map(|(i, h)| hosts[..i].contains(h).then_some(h))
    {
        return Err(Failure::Usage(format!(
            "--on: host {h} given twice (its share would run twice)"
        )));
    }
    if ra.connections < hosts.len() {
        return Err(Failure::Usage(format!(
            "-c {} is fewer connections than the {} hosts of --on: each host needs one",
            ra.connections,
            hosts.len()
        )));
    }
    if let Some(n) = ra.common.requests.filter(|&n| n < hosts.len() as u64) {
        return Err(Failure::Usage(format!(
            "-n {n} is fewer requests than the {} hosts of --on",
            hosts.len()
        )));
    }
    if ra.hosts.segment.is_some() {
        return Err(Failure::Usage(
            "--on gives each host its --segment; drop --segment".into(),
        ));
    }
    if let Some(dir) = &ra.hosts.keep_reports {
        if !dir.is_dir() {
            return Err(Failure::Usage(format!(
                "--keep-reports {}: not a directory",
                dir.display()
            )));
        }
    }
    if ra.hosts.remote_xload.split_whitespace().next().is_none() {
        return Err(Failure::Usage("--remote-xload is empty".into()));
    }
    check_outputs(&ra.common)
}

/// `xload --on HOSTS ... URL`: run everywhere, merge, show, judge.
pub(crate) fn main_on(url: &str, ra: &RunArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    // The hosts resolve and reach the target; here only its form is checked.
    xload_http::parse_url(url).map_err(|e| Failure::Usage(format!("{url}: {e}")))?;
    check(ra)?;
    let gates = crate::gate::parse_gates(&ra.common)?;
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let forwarded = forward_args(&argv).map_err(Failure::Usage)?;
    let hosts = &ra.hosts.on;
    let run_id = ra.hosts.run_id.clone().unwrap_or_else(super::new_run_id);
    let start_at = ra
        .hosts
        .start_at
        .unwrap_or_else(|| super::unix_now_us() + DEFAULT_LEAD_US);
    let jobs: Vec<Job> = hosts
        .iter()
        .enumerate()
        .map(|(i, host)| {
            let cmd = host_command(ra, &forwarded, &run_id, start_at, i, hosts.len());
            let argv = ra.hosts.rsh.argv(host, &cmd).map_err(Failure::Usage)?;
            Ok(Job { argv, stdin: None })
        })
        .collect::<Result<_, Failure>>()?;
    eprintln!(
        "xload: run {run_id} on {} hosts ({}), windows open at {}",
        hosts.len(),
        hosts.join(", "),
        format_rfc3339_us(start_at)
    );
    // Relay what each host says of itself (progress, warnings, errors);
    // its text report stays behind (the merged one is printed below).
    let relay = |i: usize, line: &str| {
        let said = line.starts_with("xload:") || line.starts_with("xload progress:");
        if said && !stop.load(Ordering::Relaxed) {
            eprintln!("[{}] {line}", hosts[i]);
        }
    };
    let outputs = remote::run_all(&jobs, &relay);
    let outcomes: Vec<HostOutcome> = hosts
        .iter()
        .zip(outputs)
        .map(|(host, out)| HostOutcome::of(host, out))
        .collect();
    finish(ra, &outcomes, &gates)
}

/// Merges the reports that came back, prints the merge and the host rows,
/// writes the outputs; the exit code.
fn finish(
    ra: &RunArgs,
    outcomes: &[HostOutcome],
    gates: &[xload_stats::gate::Gate],
) -> Result<i32, Failure> {
    let done: Vec<(&str, &Report)> = outcomes
        .iter()
        .filter_map(|o| o.report.as_ref().map(|r| (o.host.as_str(), r)))
        .collect();
    let failed: Vec<&HostOutcome> = outcomes.iter().filter(|o| o.report.is_none()).collect();
    for o in &failed {
        eprintln!("xload: host {}: {}", o.host, o.failure());
    }
    if done.is_empty() {
        return Err(Failure::Run(format!(
            "no host returned a report ({} failed)",
            failed.len()
        )));
    }
    let reports: Vec<Report> = done.iter().map(|(_, r)| (*r).clone()).collect();
    if let Some(dir) = &ra.hosts.keep_reports {
        for (host, r) in &done {
            let path = dir.join(format!("{host}.json"));
            write_out(&path.to_string_lossy(), &r.to_json())?;
        }
    }
    let name = |i: usize| {
        done.get(i)
            .map_or_else(|| format!("host {i}"), |(h, _)| format!("host {h}"))
    };
    let mut merged =
        checked_merge(&reports, &name, MergeAllow::default()).map_err(|e| match e {
            Failure::Usage(m) | Failure::Run(m) => Failure::Run(m),
        })?;
    let (table, json_rows) = host_rows(outcomes);
    merged.extra.insert("hosts".into(), json_rows);
    merged.extra.insert(
        "partial".into(),
        serde_json::Value::Bool(!failed.is_empty()),
    );
    let text = merged.render_text(&TextOptions {
        latency_table: ra.common.latency,
    });
    let out = format!("{text}\n{table}");
    if ra.common.document_to_stdout() {
        eprint!("{out}");
    } else {
        crate::out(&out);
    }
    if let Some(path) = &ra.common.json {
        write_out(path, &merged.to_json())?;
    }
    if let Some(path) = &ra.common.csv {
        let csv = crate::progress::csv(&merged.timeseries);
        write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if !failed.is_empty() {
        let names: Vec<&str> = failed.iter().map(|o| o.host.as_str()).collect();
        eprintln!(
            "xload: PARTIAL: {} of {} hosts failed ({}); the merge covers the others",
            failed.len(),
            outcomes.len(),
            names.join(", ")
        );
        if !ra.hosts.allow_partial {
            return Ok(1);
        }
    }
    let violated: Vec<_> = gates.iter().filter(|g| g.violated(&merged)).collect();
    for g in &violated {
        eprintln!("xload: {}", g.explain(&merged));
    }
    Ok(if violated.is_empty() { 0 } else { 3 })
}

impl HostOutcome {
    /// What one host's run returned: its report, or why there is none.
    fn of(host: &str, out: remote::Output) -> HostOutcome {
        let report = (out.exit_code == 0)
            .then(|| Report::from_json(out.stdout.trim()).ok())
            .flatten();
        HostOutcome {
            host: host.to_string(),
            exit_code: out.exit_code,
            unreachable: out.exit_code == TRANSPORT_FAILED,
            stderr: out.stderr,
            report,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    #[test]
    fn local_options_are_left_out_of_what_hosts_get() {
        let argv = words(
            "--on a,b -c 8 --rate=1000 -n100 -d 2s -H X:1 --json out.json --rsh ssh -q --latency --fail-if p99>1ms --start-at +5s http://t/",
        );
        assert_eq!(
            forward_args(&argv).unwrap(),
            words("-d 2s -H X:1 http://t/")
        );
        assert_eq!(
            forward_args(&words("--connections 4 -t 2 -- http://t/")).unwrap(),
            words("-t 2 -- http://t/")
        );
        assert!(forward_args(&words("-qc 8 http://t/")).is_err());
    }

    #[test]
    fn each_host_gets_its_share_segment_and_seed() {
        use clap::Parser;
        let cli = crate::Cli::try_parse_from(words(
            "xload --on a,b,c -c 10 --rate 900 -n 100 --seed 7 --arrival poisson -d 2s http://t/",
        ))
        .expect("parses");
        let forwarded = forward_args(&words("-d 2s --arrival poisson http://t/")).unwrap();
        let cmd = host_command(&cli.run, &forwarded, "r", 0, 1, 3);
        let line = cmd.join(" ");
        assert!(line.starts_with("xload -d 2s --arrival poisson http://t/ -c 3 --rate 300 -n 33 --seed 8 --segment 2/3 --run-id r --start-at 1970-01-01T00:00:00.000000Z --json - --progress-lines"), "{line}");
    }

    #[test]
    fn shares_add_up_to_the_total() {
        assert_eq!(
            (0..3).map(|i| split(10, 3, i)).collect::<Vec<_>>(),
            [4, 3, 3]
        );
        assert_eq!((0..4).map(|i| split(64, 4, i)).sum::<u64>(), 64);
    }
}
