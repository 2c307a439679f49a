//! `xload capacity PLAN.toml`: one run that validates a host's capacity,
//! the procedure of seeds 000 and 004 automated. Every host's xtune profile
//! is verified first (drift refuses the run), then the load steps up through
//! the plan's levels from the clients while `xtune observe` records every
//! host each second; each step gets the clients' saturation rule-out and
//! the server's limiting resource with its evidence, the maximum is
//! confirmed by repeats, and the report is JSON, Markdown and one HTML page.
//! `--compare` turns reports of several rounds into seed 004's tuning log.

mod compare;
mod evidence;
mod html;
mod plan;
mod procedure;
mod reach;
mod report;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use xload_stats::walltime::{format_rfc3339_us, now_us, parse_rfc3339};
use xload_stats::Report;
use xload_sys::remote::{self, Output};

use self::evidence::{in_window, judge, Evidence};
use self::plan::{Plan, Stepped};
use self::reach::{Reach, Tuning};
use self::report::{CapacityReport, ClientSide, Step, SCHEMA};
use crate::output::{writable, write_out};
use crate::Failure;

/// Time from now to a step's start: each client's start and preflight...
const LEAD: Duration = Duration::from_millis(1500);
/// ...and its login, through a remote shell (ssh).
const LEAD_REMOTE_SHELL: Duration = Duration::from_secs(3);
/// The observers run this much past the window's end, so that its last
/// second is recorded.
const TAIL: Duration = Duration::from_millis(1000);

/// `xload capacity PLAN.toml` / `xload capacity --compare R1.json R2.json...`.
#[derive(Args, Debug)]
pub(crate) struct CapacityArgs {
    /// The capacity plan (TOML, docs/capacity.md).
    #[arg(required_unless_present = "compare")]
    pub plan: Option<PathBuf>,

    /// The tuning log of earlier runs' JSON reports, in round order: what changed
    /// between rounds (computed from the verified tunings), the maximum, p99, the bottleneck.
    #[arg(long = "compare", num_args = 1.., conflicts_with = "plan")]
    pub compare: Vec<PathBuf>,

    /// Run even when a host's tuning drifted from its profile (the report says so first).
    #[arg(long = "allow-drift")]
    pub allow_drift: bool,

    /// How to reach the hosts, {host} replaced by the name (overrides the plan's `rsh`).
    #[arg(long = "rsh")]
    pub rsh: Option<String>,

    /// The xload command on the client hosts.
    #[arg(long = "remote-xload", default_value = "xload")]
    pub remote_xload: String,

    /// The xtune command on every host (`local` too): it verifies and observes.
    #[arg(long = "remote-xtune", default_value = "xtune")]
    pub remote_xtune: String,

    /// Write the JSON report (xload-capacity/1) to PATH ('-' = stdout).
    #[arg(long = "json")]
    pub json: Option<String>,

    /// Write the HTML report (one self-contained page) to PATH.
    #[arg(long = "html")]
    pub html: Option<String>,

    /// Write the Markdown report to PATH ('-' = stdout).
    #[arg(long = "markdown")]
    pub markdown: Option<String>,
}

/// Runs the command; the exit code: 0 with a confirmed maximum, 3 without.
pub(crate) fn main_capacity(a: &CapacityArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    check_outputs(a)?;
    if !a.compare.is_empty() {
        return compare::main_compare(a);
    }
    let path = a
        .plan
        .as_ref()
        .expect("clap requires the plan without --compare");
    let plan = plan::load(path).map_err(|e| Failure::Usage(e.to_string()))?;
    let words = |s: &str, opt: &str| {
        let w: Vec<String> = s.split_whitespace().map(String::from).collect();
        if w.is_empty() {
            Err(Failure::Usage(format!("{opt} is empty")))
        } else {
            Ok(w)
        }
    };
    let template = a
        .rsh
        .clone()
        .or_else(|| plan.rsh.clone())
        .unwrap_or_else(|| xload_sys::remote::DEFAULT_TEMPLATE.to_string());
    let reach = Reach {
        rsh: xload_sys::remote::Transport::parse(&template)
            .map_err(|e| Failure::Usage(format!("--rsh: {e}")))?,
        xload: words(&a.remote_xload, "--remote-xload")?,
        xtune: words(&a.remote_xtune, "--remote-xtune")?,
    };
    let started_at = format_rfc3339_us(now_us());
    reach::preflight(&reach, &plan).map_err(Failure::Run)?;
    let (tuning, drift) = verify_all(&reach, &plan, a.allow_drift)?;
    let mut report = CapacityReport {
        schema: SCHEMA.into(),
        plan: plan.file.clone(),
        target: plan.url.clone(),
        stepped: plan.stepped.name().into(),
        started_at,
        command: std::env::args().collect(),
        drift,
        tuning,
        steps: Vec::new(),
        knee: None,
        maximum: None,
        notes: Vec::new(),
    };
    procedure::run(&plan, &stop, &mut report, &mut |level, k| {
        let st = step(&reach, &plan, level, k)?;
        announce(&st);
        Ok(st)
    })?;
    finish(a, &report)
}

/// The outputs' paths, checked before hours of steps.
fn check_outputs(a: &CapacityArgs) -> Result<(), Failure> {
    let to_stdout = [&a.json, &a.markdown]
        .iter()
        .filter(|p| p.as_deref() == Some("-"))
        .count();
    if to_stdout > 1 {
        return Err(Failure::Usage(
            "--json - and --markdown - would both write to stdout".into(),
        ));
    }
    for (opt, p) in [
        ("--json", &a.json),
        ("--html", &a.html),
        ("--markdown", &a.markdown),
    ] {
        if let Some(p) = p.as_deref().filter(|p| *p != "-") {
            writable(p).map_err(|e| Failure::Usage(format!("{opt} {p}: {e}")))?;
        }
    }
    Ok(())
}

/// `xtune verify` on every host with a profile; drift refuses the run
/// (exit 1, host and knob named) unless `allow`.
fn verify_all(
    reach: &Reach,
    plan: &Plan,
    allow: bool,
) -> Result<(Vec<Tuning>, Vec<String>), Failure> {
    let mut tuning = Vec::new();
    let hosts =
        std::iter::once(("server", &plan.server)).chain(plan.clients.iter().map(|c| ("client", c)));
    for (role, h) in hosts {
        if let Some(t) = reach::verify(reach, role, h).map_err(Failure::Run)? {
            eprintln!(
                "xload: {role} {}: profile {} {}",
                t.host,
                t.profile,
                if t.ok { "verified" } else { "DRIFTED" }
            );
            tuning.push(t);
        }
    }
    let drift: Vec<String> = tuning
        .iter()
        .flat_map(|t| {
            t.drift()
                .into_iter()
                .map(move |d| format!("{} {}: {d}", t.role, t.host))
        })
        .collect();
    if !drift.is_empty() && !allow {
        return Err(Failure::Run(format!(
            "the tuning drifted from its profile, so the run would not measure what the profile says:\n  {}\n\
             fix it (xtune apply) or run anyway with --allow-drift (the report then says so first)",
            drift.join("\n  ")
        )));
    }
    for d in &drift {
        eprintln!("xload: warning: running with drift (--allow-drift): {d}");
    }
    Ok((tuning, drift))
}

fn announce(st: &Step) {
    let what = if st.confirmation == 0 {
        "step".to_string()
    } else {
        format!("confirmation {}", st.confirmation)
    };
    eprintln!(
        "xload: {what} {}: {:.0} req/s, p99 {}, {} errors: {}; server: {}",
        report::fmt_level(st.level),
        st.rps,
        report::fmt_us(st.p99_us),
        st.errors,
        if st.pass { "pass" } else { &st.why },
        st.verdict.text
    );
}

/// One step: the observers on every host, the clients' runs at one
/// instant, their reports merged, the evidence cut to the window.
fn step(reach: &Reach, plan: &Plan, level: f64, confirmation: usize) -> Result<Step, Failure> {
    let run_id = crate::hosts::new_run_id();
    let remote_shell = reach.rsh.is_shell()
        && std::iter::once(&plan.server)
            .chain(&plan.clients)
            .any(|h| h.host != "local");
    let lead = if remote_shell {
        LEAD_REMOTE_SHELL
    } else {
        LEAD
    };
    let start_at = now_us() + lead.as_micros() as i64;
    let span = lead + plan.warmup + plan.duration + TAIL;
    let mut watched: Vec<(String, Option<&xload_probe::watch::ProcessSel>)> =
        vec![(plan.server.host.clone(), plan.server.process.as_ref())];
    for c in &plan.clients {
        if !watched.iter().any(|(h, _)| *h == c.host) {
            watched.push((c.host.clone(), None));
        }
    }
    let observers = watched
        .iter()
        .map(|(h, p)| reach::observer(reach, h, span, *p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
    let clients = (0..plan.clients.len())
        .map(|i| reach::client_job(reach, plan, i, level, &run_id, start_at))
        .collect::<Result<Vec<_>, _>>()
        .map_err(Failure::Usage)?;
    let (observed, ran) = std::thread::scope(|s| {
        let obs: Vec<_> = observers
            .iter()
            .map(|job| s.spawn(move || remote::run(&job.argv, None, &mut |_| {})))
            .collect();
        let relay = |i: usize, line: &str| {
            if line.starts_with("xload:") {
                eprintln!("[{}] {line}", plan.clients[i].host);
            }
        };
        let ran = remote::run_all(&clients, &relay);
        let observed: Vec<Output> = obs
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| Output {
                    exit_code: 255,
                    stdout: String::new(),
                    stderr: "observer thread panicked".into(),
                })
            })
            .collect();
        (observed, ran)
    });
    let mut intervals = Vec::new();
    for ((host, _), out) in watched.iter().zip(&observed) {
        let o = reach::observation(host, out).map_err(Failure::Run)?;
        intervals.push((host.clone(), o.intervals));
    }
    let reports = client_reports(plan, &ran)?;
    let names = |i: usize| format!("client {}", plan.clients[i].host);
    let merged =
        crate::merge::checked_merge(&reports, &names, crate::merge::MergeAllow::default())?;
    let (start_us, window_s) = window(&reports);
    let end_us = start_us + (window_s * 1e6) as i64;
    let evidence_of = |host: &str| -> Evidence {
        intervals
            .iter()
            .find(|(h, _)| h == host)
            .map(|(h, ivs)| in_window(h, ivs, start_us, end_us))
            .unwrap_or_default()
    };
    let server = evidence_of(&plan.server.host);
    let verdict = judge(&server);
    let clients_side = plan
        .clients
        .iter()
        .zip(&reports)
        .map(|(c, r)| client_side(&c.host, r, evidence_of(&c.host)))
        .collect();
    let (pass, why) = compliant(plan, level, &merged);
    Ok(Step {
        level,
        confirmation,
        rps: merged.rps,
        p50_us: merged.latency_us.p50,
        p99_us: merged.latency_us.p99,
        requests: merged.requests,
        errors: merged.errors_total,
        pass,
        why,
        window_start_us: start_us,
        window_s,
        clients: clients_side,
        server,
        verdict,
        command: clients
            .first()
            .map(|j| j.argv.join(" "))
            .unwrap_or_default(),
    })
}

/// Each client's report, or why a client gave none. A client that measured
/// and failed (no response at all: exit 1 after its report) still gave one:
/// that step fails, the run goes on.
fn client_reports(plan: &Plan, ran: &[Output]) -> Result<Vec<Report>, Failure> {
    plan.clients
        .iter()
        .zip(ran)
        .map(|(c, out)| match Report::from_json(out.stdout.trim()) {
            Ok(r) => Ok(r),
            Err(e) => {
                let last = out
                    .stderr
                    .lines()
                    .rfind(|l| !l.trim().is_empty())
                    .unwrap_or("");
                Err(Failure::Run(if out.exit_code == 0 {
                    format!("client {}: unreadable report: {e}", c.host)
                } else {
                    format!(
                        "client {}: xload ended with exit {} and no report: {last}",
                        c.host, out.exit_code
                    )
                }))
            }
        })
        .collect()
}

/// The measured window the clients shared: the earliest start, the longest span.
fn window(reports: &[Report]) -> (i64, f64) {
    let starts: Vec<i64> = reports
        .iter()
        .filter_map(|r| {
            r.run
                .started_at
                .as_deref()
                .and_then(|s| parse_rfc3339(s).ok())
        })
        .collect();
    let start = starts.iter().copied().min().unwrap_or_else(now_us);
    let end = reports
        .iter()
        .zip(&starts)
        .map(|(r, s)| s + (r.duration_s * 1e6) as i64)
        .max()
        .unwrap_or(start);
    (start, (end - start) as f64 / 1e6)
}

fn client_side(host: &str, r: &Report, evidence: Evidence) -> ClientSide {
    let c = r.client.as_ref();
    let verdict = c
        .and_then(|c| c.get("verdict")?.as_str().map(String::from))
        .unwrap_or_else(|| "no client verdict (the window was too short to judge)".into());
    ClientSide {
        host: host.to_string(),
        rps: r.rps,
        saturated: c
            .and_then(|c| c.get("saturated")?.as_bool())
            .unwrap_or(false),
        verdict,
        evidence,
    }
}

/// A step passes with answers, no error and every SLO gate holding (a rate
/// step also keeps up with its rate).
fn compliant(plan: &Plan, level: f64, r: &Report) -> (bool, String) {
    if r.requests == 0 {
        return (false, "no response".into());
    }
    let gates: Vec<xload_stats::gate::Gate> = plan.slo.iter().map(|(_, g)| g.clone()).collect();
    if plan.stepped == Stepped::Rate {
        return xload_stats::gate::meets_slo(r, level, &gates);
    }
    if r.errors_total > 0 {
        let mut kinds: Vec<String> = r.errors.iter().map(|(k, n)| format!("{k} {n}")).collect();
        kinds.sort();
        return (
            false,
            format!("{} errors ({})", r.errors_total, kinds.join(", ")),
        );
    }
    match gates.iter().find(|g| !g.holds(r)) {
        Some(g) => (false, format!("{} not met", g.text)),
        None => (true, "meets the SLO".into()),
    }
}

/// Prints the Markdown, writes the outputs; the exit code.
fn finish(a: &CapacityArgs, report: &CapacityReport) -> Result<i32, Failure> {
    let md = report.markdown();
    if a.json.as_deref() == Some("-") || a.markdown.as_deref() == Some("-") {
        eprint!("{md}");
    } else {
        crate::out(&md);
    }
    if let Some(p) = &a.json {
        write_out(p, &report.to_json())?;
    }
    if let Some(p) = &a.markdown {
        write_out(p, md.trim_end())?;
    }
    if let Some(p) = &a.html {
        write_out(p, &html::page(report, &[]))?;
    }
    Ok(match &report.maximum {
        Some(m) if m.confirmed => 0,
        _ => 3,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_client_that_measured_nothing_still_reports_and_one_that_did_not_run_is_named() {
        let src = "target = \"http://10.0.0.1/\"\n[server]\nhost = \"s\"\n[[clients]]\nhost = \"c1\"\n[procedure]\nlevels = [1]\n";
        let plan = plan::parse(src, "p.toml", std::path::Path::new(".")).unwrap();
        let empty = Report {
            schema: xload_stats::SCHEMA.into(),
            target: "http://10.0.0.1/".into(),
            ..Report::default()
        };
        let measured = Output {
            exit_code: 1,
            stdout: empty.to_json(),
            stderr: "xload: no response from http://10.0.0.1/ (closed 7)\n".into(),
        };
        let got = client_reports(&plan, &[measured]).unwrap();
        assert_eq!(got[0].requests, 0);
        let (pass, why) = compliant(&plan, 1.0, &got[0]);
        assert!(!pass && why == "no response", "{why}");
        let unreachable = Output {
            exit_code: 255,
            stdout: String::new(),
            stderr: "ssh: connect to host c1: No route to host\n".into(),
        };
        let Err(Failure::Run(e)) = client_reports(&plan, &[unreachable]) else {
            panic!("no report is a failure")
        };
        assert_eq!(e, "client c1: xload ended with exit 255 and no report: ssh: connect to host c1: No route to host");
    }
}
