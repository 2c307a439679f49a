//! How a capacity run reaches its hosts: every command goes through the
//! runner `xload --on` uses (`--rsh`, ssh by default; `local` runs here).
//! `xtune verify` checks each host's profile, `xtune observe` records its
//! seconds during a step, and the clients run `xload` with their share.

use std::time::Duration;

use serde::{Deserialize, Serialize};
use xload_probe::observe::ObserveReport;
use xload_probe::watch::ProcessSel;
use xload_stats::walltime::format_rfc3339_us;
use xload_sys::remote::{self, Job, Output, Transport};

use super::plan::{HostPlan, Plan, Stepped};

/// The transport and the programs on the hosts.
pub(crate) struct Reach {
    pub rsh: Transport,
    /// The xload command on remote hosts (`local` runs this binary).
    pub xload: Vec<String>,
    /// The xtune command on every host, `local` included.
    pub xtune: Vec<String>,
}

impl Reach {
    /// The argv that runs `cmd` on `host`.
    pub(crate) fn argv(&self, host: &str, cmd: Vec<String>) -> Result<Vec<String>, String> {
        if host == "local" {
            Ok(cmd)
        } else {
            self.rsh.argv(host, &cmd)
        }
    }

    fn xload_on(&self, host: &str) -> Vec<String> {
        if host == "local" {
            if let Ok(exe) = std::env::current_exe() {
                return vec![exe.to_string_lossy().into_owned()];
            }
        }
        self.xload.clone()
    }
}

/// Before anything runs: xtune answers on every host and xload on every
/// client (`--version`), all at once, so that a missing program or an
/// unreachable host is named before the first step, not after it.
pub(crate) fn preflight(reach: &Reach, plan: &Plan) -> Result<(), String> {
    let mut checks: Vec<(String, &str)> = Vec::new();
    for h in std::iter::once(&plan.server).chain(&plan.clients) {
        if !checks
            .iter()
            .any(|(host, what)| *host == h.host && *what == "xtune")
        {
            checks.push((h.host.clone(), "xtune"));
        }
    }
    for c in &plan.clients {
        checks.push((c.host.clone(), "xload"));
    }
    let jobs = checks
        .iter()
        .map(|(host, what)| {
            let mut cmd = if *what == "xtune" {
                reach.xtune.clone()
            } else {
                reach.xload_on(host)
            };
            cmd.push("--version".into());
            Ok(Job {
                argv: reach.argv(host, cmd)?,
                stdin: None,
            })
        })
        .collect::<Result<Vec<_>, String>>()?;
    let outs = remote::run_all(&jobs, &|_, _| {});
    let failed: Vec<String> = checks
        .iter()
        .zip(&jobs)
        .zip(&outs)
        .filter(|(_, o)| o.exit_code != 0)
        .map(|(((host, what), job), o)| {
            let said = o
                .stderr
                .lines()
                .rfind(|l| !l.trim().is_empty())
                .unwrap_or("");
            format!(
                "{what} on {host} does not answer ({}: exit {}{}{said})",
                job.argv.join(" "),
                o.exit_code,
                if said.is_empty() { "" } else { ": " }
            )
        })
        .collect();
    if failed.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{}
  install it there, or name it with --remote-xtune / --remote-xload, or fix --rsh",
        failed.join("\n  ")
    ))
}

/// A host's tuning as `xtune verify` read it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct Tuning {
    /// `server` or `client`.
    pub role: String,
    pub host: String,
    /// The profile file, as the plan names it.
    pub profile: String,
    /// Every knob means what the profile wants.
    pub ok: bool,
    /// Knob by knob: identity, wanted, actual (the value read), verdict.
    pub knobs: Vec<KnobValue>,
    /// The command that verified it.
    pub command: String,
}

/// One knob as verified.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub(crate) struct KnobValue {
    pub knob: String,
    pub wanted: String,
    pub actual: String,
    pub verdict: String,
    #[serde(default)]
    pub reason: String,
}

impl Tuning {
    /// The knobs that drifted, as `knob wanted W, actual A`.
    pub(crate) fn drift(&self) -> Vec<String> {
        self.knobs
            .iter()
            .filter(|k| k.verdict == "drift")
            .map(|k| {
                let why = if k.reason.is_empty() {
                    String::new()
                } else {
                    format!(" ({})", k.reason)
                };
                format!("{} wanted {}, actual {}{why}", k.knob, k.wanted, k.actual)
            })
            .collect()
    }
}

/// `xtune verify` of `h`'s profile on its host; None without a profile.
/// The merged profile travels on stdin, so it need not exist there.
pub(crate) fn verify(reach: &Reach, role: &str, h: &HostPlan) -> Result<Option<Tuning>, String> {
    let Some((path, profile)) = &h.profile else {
        return Ok(None);
    };
    let mut cmd = reach.xtune.clone();
    cmd.extend(["verify", "--json", "--profile-label", &profile.name, "-"].map(String::from));
    let argv = reach.argv(&h.host, cmd)?;
    let out = remote::run(&argv, Some(&profile.to_toml_string()), &mut |_| {});
    let report = match out.exit_code {
        0 | 3 => serde_json::from_str::<xtune::report::Report>(out.stdout.trim())
            .map_err(|e| format!("xtune verify on {}: unreadable report ({e})", h.host))?,
        code => {
            return Err(format!(
                "xtune verify on {} ({}) failed with exit {code}: {}",
                h.host,
                argv.join(" "),
                out.stderr.trim()
            ))
        }
    };
    if let Some(e) = &report.error {
        return Err(format!("xtune verify on {}: {e}", h.host));
    }
    Ok(Some(Tuning {
        role: role.to_string(),
        host: h.host.clone(),
        profile: path.display().to_string(),
        ok: report.ok,
        knobs: report
            .knobs
            .iter()
            .map(|k| KnobValue {
                knob: k.knob.clone(),
                wanted: k.wanted.clone(),
                actual: k.actual.clone(),
                verdict: serde_json::to_value(k.verdict)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from))
                    .unwrap_or_default(),
                reason: k.reason.clone(),
            })
            .collect(),
        command: argv.join(" "),
    }))
}

/// The job that records `host` each second for `span` (`xtune observe --json`).
pub(crate) fn observer(
    reach: &Reach,
    host: &str,
    span: Duration,
    process: Option<&ProcessSel>,
) -> Result<Job, String> {
    let mut cmd = reach.xtune.clone();
    cmd.extend([
        "observe".into(),
        "--json".into(),
        "--for".into(),
        format!("{}ms", span.as_millis()),
        "--interval".into(),
        "1s".into(),
    ]);
    match process {
        Some(ProcessSel::Pid(p)) => cmd.extend(["--process".into(), p.to_string()]),
        Some(ProcessSel::Name(n)) => cmd.extend(["--process".into(), n.clone()]),
        None => {}
    }
    Ok(Job {
        argv: reach.argv(host, cmd)?,
        stdin: None,
    })
}

/// The observation an observer job printed.
pub(crate) fn observation(host: &str, out: &Output) -> Result<ObserveReport, String> {
    if out.exit_code != 0 {
        return Err(format!(
            "xtune observe on {host} failed with exit {}: {}",
            out.exit_code,
            out.stderr.trim()
        ));
    }
    serde_json::from_str(out.stdout.trim())
        .map_err(|e| format!("xtune observe on {host}: unreadable report ({e})"))
}

/// `total` split over `n` shares, the first ones one larger.
fn share(total: f64, n: usize, index: usize, whole: bool) -> f64 {
    if !whole {
        return total / n as f64;
    }
    let (t, n) = (total as u64, n as u64);
    (t / n + u64::from((index as u64) < t % n)) as f64
}

/// The xload command of client `index` for a step at `level`.
pub(crate) fn client_job(
    reach: &Reach,
    plan: &Plan,
    index: usize,
    level: f64,
    run_id: &str,
    start_at_us: i64,
) -> Result<Job, String> {
    let count = plan.clients.len();
    let host = &plan.clients[index].host;
    let mut cmd = reach.xload_on(host);
    if let Some(w) = &plan.workload {
        cmd.extend(["-w".into(), w.display().to_string()]);
    }
    cmd.push(plan.url.clone());
    match plan.stepped {
        Stepped::Connections => {
            cmd.extend(["-c".into(), share(level, count, index, true).to_string()])
        }
        Stepped::Sessions => cmd.extend([
            "--sessions".into(),
            share(level, count, index, true).to_string(),
        ]),
        Stepped::Rate => cmd.extend([
            "--rate".into(),
            format!("{}", share(level, count, index, false)),
            "-c".into(),
            share(plan.connections as f64, count, index, true).to_string(),
        ]),
    }
    cmd.extend([
        "-d".into(),
        format!("{}ms", plan.duration.as_millis()),
        "--warmup".into(),
        format!("{}ms", plan.warmup.as_millis()),
        "--segment".into(),
        format!("{}/{count}", index + 1),
        "--run-id".into(),
        run_id.to_string(),
        "--start-at".into(),
        format_rfc3339_us(start_at_us),
        "--json".into(),
        "-".into(),
        "-q".into(),
    ]);
    cmd.extend(plan.args.iter().cloned());
    Ok(Job {
        argv: reach.argv(host, cmd)?,
        stdin: None,
    })
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    fn reach() -> Reach {
        Reach {
            rsh: Transport::parse("ip netns exec {host}").unwrap(),
            xload: vec!["/opt/xload".into()],
            xtune: vec!["sudo".into(), "xtune".into()],
        }
    }

    fn plan(step: &str) -> Plan {
        let src = format!(
            "target = \"http://10.0.0.1/\"\n[server]\nhost = \"srv\"\n\
             [[clients]]\nhost = \"c1\"\n[[clients]]\nhost = \"c2\"\n\
             [procedure]\n{step}\nlevels = [5]\nduration = \"2s\"\nwarmup = \"500ms\"\nargs = [\"--no-keepalive\"]\n"
        );
        super::super::plan::parse(&src, "p.toml", Path::new(".")).unwrap()
    }

    fn value_after<'a>(argv: &'a [String], opt: &str) -> &'a str {
        let i = argv
            .iter()
            .position(|a| a == opt)
            .unwrap_or_else(|| panic!("{opt} in {argv:?}"));
        &argv[i + 1]
    }

    #[test]
    fn local_runs_here_and_other_hosts_go_through_the_transport() {
        let r = reach();
        assert_eq!(r.argv("local", vec!["xtune".into()]).unwrap(), ["xtune"]);
        assert_eq!(
            r.argv("srv", vec!["xtune".into(), "observe".into()])
                .unwrap(),
            ["ip", "netns", "exec", "srv", "xtune", "observe"]
        );
        assert!(r.argv("-bad", vec!["x".into()]).is_err());
    }

    #[test]
    fn each_client_gets_its_share_one_run_id_and_one_start() {
        let (r, p) = (reach(), plan("step = \"connections\""));
        let jobs: Vec<Job> = (0..2)
            .map(|i| client_job(&r, &p, i, 5.0, "run1", 0).unwrap())
            .collect();
        assert_eq!(
            &jobs[0].argv[..5],
            ["ip", "netns", "exec", "c1", "/opt/xload"]
        );
        assert_eq!(value_after(&jobs[0].argv, "-c"), "3");
        assert_eq!(value_after(&jobs[1].argv, "-c"), "2");
        for (i, j) in jobs.iter().enumerate() {
            assert_eq!(value_after(&j.argv, "--segment"), format!("{}/2", i + 1));
            assert_eq!(value_after(&j.argv, "--run-id"), "run1");
            assert_eq!(
                value_after(&j.argv, "--start-at"),
                "1970-01-01T00:00:00.000000Z"
            );
            assert_eq!(value_after(&j.argv, "-d"), "2000ms");
            assert_eq!(value_after(&j.argv, "--warmup"), "500ms");
            assert_eq!(j.argv.last().unwrap(), "--no-keepalive");
        }
        let p = plan("step = \"rate\"\nconnections = 3");
        let j = client_job(&r, &p, 1, 5.0, "run1", 0).unwrap();
        assert_eq!(value_after(&j.argv, "--rate"), "2.5");
        assert_eq!(value_after(&j.argv, "-c"), "1");
    }

    #[test]
    fn observers_record_each_second_and_follow_the_process() {
        let r = reach();
        let j = observer(
            &r,
            "srv",
            Duration::from_millis(4500),
            Some(&ProcessSel::Name("nginx".into())),
        )
        .unwrap();
        assert_eq!(
            j.argv,
            [
                "ip",
                "netns",
                "exec",
                "srv",
                "sudo",
                "xtune",
                "observe",
                "--json",
                "--for",
                "4500ms",
                "--interval",
                "1s",
                "--process",
                "nginx"
            ]
        );
        let bad = Output {
            exit_code: 2,
            stdout: String::new(),
            stderr: "no such command".into(),
        };
        assert!(observation("srv", &bad)
            .unwrap_err()
            .contains("exit 2: no such command"));
    }

    #[test]
    fn preflight_names_the_program_that_does_not_answer() {
        let p = plan("step = \"connections\"");
        // A transport that runs nothing and succeeds: every check passes.
        let ok = Reach {
            rsh: Transport::parse("sh -c true {host}").unwrap(),
            ..reach()
        };
        assert_eq!(preflight(&ok, &p), Ok(()));
        let missing = Reach {
            rsh: Transport::parse("env").unwrap(),
            xload: vec!["/nonexistent/xload".into()],
            xtune: vec!["/nonexistent/xtune".into()],
        };
        let e = preflight(&missing, &p).unwrap_err();
        for host in ["srv", "c1", "c2"] {
            assert!(
                e.contains(&format!("xtune on {host} does not answer")),
                "{e}"
            );
        }
        assert!(
            e.contains("xload on c2 does not answer") && e.contains("--remote-xtune"),
            "{e}"
        );
    }

    #[test]
    fn drift_lines_name_the_knob_wanted_and_actual() {
        let t = Tuning {
            role: "server".into(),
            host: "srv".into(),
            profile: "s.toml".into(),
            ok: false,
            knobs: vec![
                KnobValue {
                    knob: "sysctl:a".into(),
                    wanted: "1".into(),
                    actual: "1".into(),
                    verdict: "ok".into(),
                    reason: String::new(),
                },
                KnobValue {
                    knob: "sysctl:b".into(),
                    wanted: "64".into(),
                    actual: "128".into(),
                    verdict: "drift".into(),
                    reason: "sysctl.d sets it".into(),
                },
            ],
            command: String::new(),
        };
        assert_eq!(
            t.drift(),
            ["sysctl:b wanted 64, actual 128 (sysctl.d sets it)"]
        );
    }
}
