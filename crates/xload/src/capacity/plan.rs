//! The capacity plan (docs/capacity.md): target, hosts and their tuning
//! profiles, and the procedure, read from TOML into a checked [`Plan`].
//! Every error names the file, the line and the key, as workload files do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use xload_probe::watch::ProcessSel;
use xload_stats::gate::Gate;
use xload_workload::doc::{Doc, Node, Table};
use xload_workload::Error;

/// What each step changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stepped {
    /// `-c`: connections (closed loop).
    Connections,
    /// `--rate`: requests per second (open loop, `connections` fixed).
    Rate,
    /// `--sessions`: workload sessions.
    Sessions,
}

impl Stepped {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Stepped::Connections => "connections",
            Stepped::Rate => "rate",
            Stepped::Sessions => "sessions",
        }
    }
}

/// One host of the plan.
#[derive(Clone, Debug)]
pub(crate) struct HostPlan {
    /// As the transport reaches it; `local` runs here, without it.
    pub host: String,
    /// Its xtune profile: the file and the merged profile.
    pub profile: Option<(PathBuf, xtune::profile::Profile)>,
    /// The server process whose CPU is followed.
    pub process: Option<ProcessSel>,
}

/// A checked plan.
#[derive(Clone, Debug)]
pub(crate) struct Plan {
    /// The plan file as named.
    pub file: String,
    /// The target URL (the workload's `url` when only a workload is given).
    pub url: String,
    /// A workload file to run instead of plain GETs.
    pub workload: Option<PathBuf>,
    /// `--rsh` template of the plan, if it gives one.
    pub rsh: Option<String>,
    pub server: HostPlan,
    pub clients: Vec<HostPlan>,
    pub stepped: Stepped,
    /// The levels, rising.
    pub levels: Vec<f64>,
    pub duration: Duration,
    pub warmup: Duration,
    pub cooldown: Duration,
    /// Repeats of the maximum that must pass too.
    pub confirmations: usize,
    /// Bisection between the last passing and the first failing level stops
    /// when they are closer than this share of the upper...
    pub tolerance: f64,
    /// ...or after this many trials (0: no bisection).
    pub max_trials: usize,
    /// `--fail-if` gates a step must meet, as written and parsed.
    pub slo: Vec<(String, Gate)>,
    /// Connections of a rate step (default 64).
    pub connections: usize,
    /// More xload options for every client run.
    pub args: Vec<String>,
}

const TOP: &[&str] = &[
    "target",
    "workload",
    "rsh",
    "server",
    "clients",
    "procedure",
];
const HOST: &[&str] = &["host", "profile", "process"];
const PROCEDURE: &[&str] = &[
    "step",
    "levels",
    "duration",
    "warmup",
    "cooldown",
    "confirmations",
    "tolerance",
    "max_trials",
    "slo",
    "connections",
    "args",
];
/// Options the plan sets itself; in `args` they would fight it.
const OWNED_ARGS: &[&str] = &[
    "-c",
    "--connections",
    "--rate",
    "--sessions",
    "-d",
    "-z",
    "--duration",
    "--warmup",
    "--json",
    "--on",
    "--start-at",
    "--segment",
    "--run-id",
    "--fail-if",
    "--threshold",
    "-w",
    "--workload",
];

/// Reads and checks a plan file.
pub(crate) fn load(path: &Path) -> Result<Plan, Error> {
    let file = path.display().to_string();
    let src = std::fs::read_to_string(path)
        .map_err(|e| Error::file(&file, format!("cannot read: {e}")))?;
    parse(&src, &file, path.parent().unwrap_or(Path::new(".")))
}

/// Checks plan text named `file`; relative paths are taken from `dir`.
pub(crate) fn parse(src: &str, file: &str, dir: &Path) -> Result<Plan, Error> {
    let doc = Doc { file, src };
    let parsed = toml::de::DeTable::parse(src).map_err(|e| Error {
        file: file.to_string(),
        line: e.span().map(|s| doc.line(s.start)),
        key: String::new(),
        message: e.message().to_string(),
    })?;
    let root = Table::root(&doc, &parsed);
    root.only(TOP)?;
    let (url, workload) = target(&root, dir)?;
    let rsh = match root.get("rsh") {
        Some(n) => {
            let t = n.str()?;
            xload_sys::remote::Transport::parse(t).map_err(|e| n.error(e))?;
            Some(t.to_string())
        }
        None => None,
    };
    let Some(server) = root.get("server") else {
        return Err(root.error(
            "server",
            "missing: a [server] table with the host under test (host = \"NAME\")",
        ));
    };
    let server = host(&server.table()?, dir, true)?;
    let clients = match root.get("clients") {
        None => vec![HostPlan {
            host: "local".into(),
            profile: None,
            process: None,
        }],
        Some(n) => {
            let list = n.array()?;
            if list.is_empty() {
                return Err(n.error("expected at least one [[clients]] table"));
            }
            let mut out = Vec::new();
            for item in &list {
                let h = host(&item.table()?, dir, false)?;
                if out.iter().any(|c: &HostPlan| c.host == h.host) {
                    return Err(item.error(format!(
                        "client {} given twice (its share would run twice)",
                        h.host
                    )));
                }
                out.push(h);
            }
            out
        }
    };
    let Some(proc_node) = root.get("procedure") else {
        return Err(root.error(
            "procedure",
            "missing: a [procedure] table (step, levels, duration...)",
        ));
    };
    let mut plan = Plan {
        file: file.to_string(),
        url,
        workload,
        rsh,
        server,
        clients,
        stepped: Stepped::Connections,
        levels: Vec::new(),
        duration: Duration::from_secs(10),
        warmup: Duration::from_secs(1),
        cooldown: Duration::from_secs(1),
        confirmations: 2,
        tolerance: 0.05,
        max_trials: 4,
        slo: Vec::new(),
        connections: 64,
        args: Vec::new(),
    };
    procedure(&proc_node.table()?, &mut plan)?;
    Ok(plan)
}

fn target(root: &Table, dir: &Path) -> Result<(String, Option<PathBuf>), Error> {
    let workload = match root.get("workload") {
        Some(n) => {
            let path = dir.join(n.str()?);
            let w = xload_workload::load(&path).map_err(|e| n.error(e.to_string()))?;
            Some((path, w.url, n))
        }
        None => None,
    };
    let url =
        match (root.get("target"), &workload) {
            (Some(n), _) => {
                let url = n.str()?;
                xload_http::parse_url(url)
                    .map_err(|e| n.error(format!("{e} (e.g. http://10.0.0.2:8080/)")))?;
                url.to_string()
            }
            (None, Some((_, Some(url), _))) => url.clone(),
            (None, Some((_, None, n))) => {
                return Err(n.error("the workload has no `url`: give `target` too"))
            }
            (None, None) => return Err(root.error(
                "target",
                "missing: target = \"http://host:port/path\" (or workload = \"FILE\" with a url)",
            )),
        };
    Ok((url, workload.map(|(p, _, _)| p)))
}

fn host(t: &Table, dir: &Path, server: bool) -> Result<HostPlan, Error> {
    t.only(HOST)?;
    let Some(h) = t.get("host") else {
        return Err(t.error(
            "host",
            "missing: host = \"NAME\" (as --rsh reaches it, or \"local\")",
        ));
    };
    let name = h.str()?;
    crate::args::parse_host(name).map_err(|e| h.error(e))?;
    let profile = match t.get("profile") {
        Some(n) => {
            let path = dir.join(n.str()?);
            let p = xtune::profile::Profile::load(&path).map_err(|e| n.error(e.to_string()))?;
            Some((path, p))
        }
        None => None,
    };
    let process = match t.get("process") {
        Some(n) if !server => return Err(n.error("only the [server] names a process to follow")),
        Some(n) => Some(process(&n)?),
        None => None,
    };
    Ok(HostPlan {
        host: name.to_string(),
        profile,
        process,
    })
}

fn process(n: &Node) -> Result<ProcessSel, Error> {
    let text = match n.number() {
        Some(pid) => format!("{pid}"),
        None => n.str()?.to_string(),
    };
    ProcessSel::parse(&text).map_err(|e| n.error(e))
}

fn procedure(t: &Table, plan: &mut Plan) -> Result<(), Error> {
    t.only(PROCEDURE)?;
    if let Some(n) = t.get("step") {
        plan.stepped = match n.str()? {
            "connections" => Stepped::Connections,
            "rate" => Stepped::Rate,
            "sessions" => Stepped::Sessions,
            other => {
                return Err(n.error(format!(
                    "{other:?}: expected \"connections\", \"rate\" or \"sessions\""
                )))
            }
        };
    }
    if plan.stepped == Stepped::Sessions && plan.workload.is_none() {
        return Err(t.error(
            "step",
            "sessions need a workload with a [session]: workload = \"FILE\"",
        ));
    }
    let Some(levels) = t.get("levels") else {
        return Err(t.error(
            "levels",
            "missing: the loads to step through, e.g. levels = [64, 256, 1024]",
        ));
    };
    for item in levels.array()? {
        let v = item.positive()?;
        if plan.stepped != Stepped::Rate && v.fract() != 0.0 {
            return Err(item.error(format!("{} are whole numbers", plan.stepped.name())));
        }
        if plan.levels.last().is_some_and(|&last| v <= last) {
            return Err(item.error("levels rise: each above the one before"));
        }
        plan.levels.push(v);
    }
    if plan.levels.is_empty() {
        return Err(levels.error("expected at least one level"));
    }
    let min_level = if plan.stepped == Stepped::Rate {
        0.0
    } else {
        plan.clients.len() as f64
    };
    if plan.levels[0] < min_level {
        return Err(levels.error(format!(
            "the first level {} is below one per client ({} clients)",
            plan.levels[0],
            plan.clients.len()
        )));
    }
    if let Some(n) = t.get("duration") {
        plan.duration = n.duration()?;
        if plan.duration.is_zero() {
            return Err(n.error("a step measures for longer than 0"));
        }
    }
    if let Some(n) = t.get("warmup") {
        plan.warmup = n.duration()?;
    }
    if let Some(n) = t.get("cooldown") {
        plan.cooldown = n.duration()?;
    }
    if let Some(n) = t.get("confirmations") {
        plan.confirmations = n.u64()? as usize;
        if plan.confirmations > 10 {
            return Err(n.error("at most 10 confirmations"));
        }
    }
    if let Some(n) = t.get("tolerance") {
        plan.tolerance = n.positive()?;
        if plan.tolerance >= 1.0 {
            return Err(n.error("a share of the level, below 1 (0.05: within 5%)"));
        }
    }
    if let Some(n) = t.get("max_trials") {
        plan.max_trials = n.u64()? as usize;
        if plan.max_trials > 20 {
            return Err(n.error("at most 20 bisection trials"));
        }
    }
    if let Some(n) = t.get("connections") {
        if plan.stepped != Stepped::Rate {
            return Err(
                n.error("`connections` is for step = \"rate\"; here the levels are the load")
            );
        }
        plan.connections = n.u64()? as usize;
        if plan.connections < plan.clients.len() {
            return Err(n.error("at least one connection per client"));
        }
    }
    if let Some(n) = t.get("slo") {
        for item in n.array()? {
            let text = item.str()?;
            let gate = crate::gate::parse_gate(text).map_err(|e| item.error(e))?;
            plan.slo.push((text.to_string(), gate));
        }
    }
    if let Some(n) = t.get("args") {
        for item in n.array()? {
            let a = item.str()?;
            let name = a.split('=').next().unwrap_or(a);
            if OWNED_ARGS.contains(&name)
                || OWNED_ARGS
                    .iter()
                    .any(|o| o.len() == 2 && a.starts_with(o) && a.len() > 2)
            {
                return Err(item.error(format!(
                    "{a}: the plan sets this itself (levels, duration, warmup, slo, workload)"
                )));
            }
            plan.args.push(a.to_string());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_str(src: &str) -> Result<Plan, String> {
        parse(src, "plan.toml", Path::new(".")).map_err(|e| e.to_string())
    }

    const GOOD: &str = r#"
target = "http://10.0.0.1:8080/"
rsh = "ip netns exec {host}"

[server]
host = "srv"
process = "nginx"

[[clients]]
host = "local"

[procedure]
step = "connections"
levels = [16, 64, 256]
duration = "2s"
warmup = "500ms"
confirmations = 1
slo = ["p99>50ms"]
args = ["--no-keepalive"]
"#;

    #[test]
    fn a_full_plan_is_read() {
        let p = parse_str(GOOD).unwrap();
        assert_eq!(p.url, "http://10.0.0.1:8080/");
        assert_eq!(p.server.host, "srv");
        assert_eq!(p.server.process, Some(ProcessSel::Name("nginx".into())));
        assert_eq!(p.clients.len(), 1);
        assert_eq!(p.levels, vec![16.0, 64.0, 256.0]);
        assert_eq!(p.duration, Duration::from_secs(2));
        assert_eq!(p.warmup, Duration::from_millis(500));
        assert_eq!(p.confirmations, 1);
        assert_eq!(p.slo[0].0, "p99>50ms");
        assert_eq!(p.args, ["--no-keepalive"]);
        assert_eq!(p.rsh.as_deref(), Some("ip netns exec {host}"));
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let cases = [
            (
                GOOD.replace("levels = [16, 64, 256]", "levels = [16, 8]"),
                "plan.toml:14: procedure.levels[1]: levels rise",
            ),
            (
                GOOD.replace("step = \"connections\"", "step = \"users\""),
                "plan.toml:13: procedure.step:",
            ),
            (
                GOOD.replace("process = \"nginx\"", "proces = \"nginx\""),
                "plan.toml:7: server.proces: unknown key",
            ),
            (
                GOOD.replace("slo = [\"p99>50ms\"]", "slo = [\"p99>>50ms\"]"),
                "plan.toml:18: procedure.slo[0]:",
            ),
            (
                GOOD.replace(
                    "target = \"http://10.0.0.1:8080/\"",
                    "target = \"ftp://x/\"",
                ),
                "plan.toml:2: target:",
            ),
            (
                GOOD.replace("args = [\"--no-keepalive\"]", "args = [\"-c\", \"5\"]"),
                "plan.toml:19: procedure.args[0]: -c: the plan sets",
            ),
            (
                GOOD.replace("duration = \"2s\"", "duration = \"2 parsecs\""),
                "plan.toml:15: procedure.duration:",
            ),
            (
                GOOD.replace(
                    "[[clients]]\nhost = \"local\"",
                    "[[clients]]\nhost = \"local\"\nprocess = \"x\"",
                ),
                "plan.toml:11: clients[0].process: only the [server]",
            ),
            (
                GOOD.replace("[server]\nhost = \"srv\"\nprocess = \"nginx\"\n", ""),
                "plan.toml:1: server: missing",
            ),
            ("target = [".to_string(), "plan.toml:1:"),
        ];
        for (src, want) in cases {
            let got = parse_str(&src).err().unwrap_or_default();
            assert!(got.starts_with(want), "want {want:?}, got {got:?}");
        }
    }

    #[test]
    fn a_missing_profile_is_named_at_its_key() {
        let src = GOOD.replace(
            "host = \"srv\"",
            "host = \"srv\"\nprofile = \"/nonexistent/server.toml\"",
        );
        let e = parse_str(&src).unwrap_err();
        assert!(
            e.starts_with(
                "plan.toml:7: server.profile: cannot read profile /nonexistent/server.toml"
            ),
            "{e}"
        );
    }

    #[test]
    fn clients_default_to_this_host_and_rates_may_be_fractional() {
        let src = GOOD
            .replace("[[clients]]\nhost = \"local\"\n", "")
            .replace("step = \"connections\"", "step = \"rate\"\nconnections = 8")
            .replace("[16, 64, 256]", "[0.5, 100.5]");
        let p = parse_str(&src).unwrap();
        assert_eq!(p.clients[0].host, "local");
        assert_eq!(p.stepped, Stepped::Rate);
        assert_eq!(p.connections, 8);
    }
}
