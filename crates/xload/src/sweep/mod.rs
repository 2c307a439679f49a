//! `xload sweep`: load in steps (concurrency, open-loop rate or workload
//! sessions), each with its own warm-up and measured window; the knee; the
//! recommended operating range; with `--slo ... --find-max`, a bisection for
//! the highest rate meeting the SLO; with `--sessions ... --find-max`, the
//! highest compliant session count ([`capacity`]).

mod capacity;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use clap::Args;
use serde_json::{json, Value};
use xload_stats::gate::{meets_slo, Gate};
use xload_stats::knee::{curve_rps_at, find_knee_in, range_note, recommended, Mode, Point};
use xload_stats::Report;

use crate::args::{parse_count_f64, CommonArgs};
use crate::fd_limit::ensure_fd_limit;
use crate::gate::parse_gate;
use crate::output::write_out;
use crate::plot::Curve;
use crate::prepared::{check_reachable, prepare_with};
use crate::run::execute;
use crate::Failure;

#[derive(Debug, Clone, Args)]
pub(crate) struct SweepArgs {
    /// Target URL: http://host[:port]/path?query (with -w, default: the workload's url); or a
    /// workload file (FILE.toml), as `xload run FILE`: then the target is the workload's url.
    pub url: Option<String>,

    /// Concurrency levels: 1,2,4,8 — or A..B (doubling) or A..B/N (N even steps); run lightest first.
    /// With --rate, a single value: the connections every rate step uses.
    #[arg(short = 'c', long = "connections", value_parser = parse_conn_levels)]
    pub conc: Option<Levels>,

    /// Open-loop rates (requests/s): 1000,2000 — or A..B/N (N even steps) or A..B (doubling); run lowest first.
    #[arg(long = "rate", value_parser = parse_rate_levels)]
    pub rates: Option<Levels>,

    /// Workload sessions (needs -w): 1000,2000 — or A..B (doubling) or A..B/N; run fewest first.
    /// With --find-max: the coarse steps of the search for the highest compliant count.
    #[arg(long = "sessions", value_parser = parse_conn_levels, conflicts_with_all = ["conc", "rates"])]
    pub sessions: Option<Levels>,

    /// Knee: the step after which RPS grows by less than this fraction...
    #[arg(long = "knee-gain", default_value_t = 0.10)]
    pub knee_gain: f64,

    /// ...while p99 grows by more than this factor.
    #[arg(long = "knee-p99", default_value_t = 1.5)]
    pub knee_p99: f64,

    /// Service level to meet, e.g. 'p99<10ms' (repeatable); used by --find-max.
    #[arg(long = "slo")]
    pub slo: Vec<String>,

    /// With --rate and --slo: bisect over rate (bracket: the lowest and highest --rate) for the
    /// highest rate meeting every --slo with zero errors. With --sessions: the highest session
    /// count whose every check passes and every class meets its limits, stably; confirmed by a repeat.
    #[arg(long = "find-max")]
    pub find_max: bool,

    /// With --find-max over rate: a maximum found while the client was
    /// SATURATED is the client's limit and fails the sweep (exit 3); with
    /// this it is reported as such and exits 0.
    #[arg(long = "allow-client-limited", requires = "find_max")]
    pub allow_client_limited: bool,

    /// Bisection stops when the bracket is narrower than this fraction of its top.
    #[arg(long = "tolerance", default_value_t = 0.03)]
    pub tolerance: f64,

    /// Most trials of the bisection, after the two that probe the bracket's top and bottom.
    #[arg(long = "max-trials", default_value_t = 10)]
    pub max_trials: usize,

    /// A sessions step is unstable when its rate over the last third of the window is this
    /// fraction below the first third's...
    #[arg(long = "drift-rps", default_value_t = 0.10)]
    pub drift_rps: f64,

    /// ...or its p99 this factor above the first third's (and 1 ms more).
    #[arg(long = "drift-p99", default_value_t = 2.0)]
    pub drift_p99: f64,

    /// Plot throughput and p99 against load: PATH.svg or PATH.png.
    #[arg(long = "plot")]
    pub plot: Option<PathBuf>,

    /// Pause between steps so the server drains what the previous step queued.
    #[arg(long = "cooldown", default_value = "250ms", value_parser = crate::args::parse_duration)]
    pub cooldown: Duration,

    #[command(flatten)]
    pub common: CommonArgs,
}

/// Load levels as one argument value.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Levels(pub Vec<f64>);

/// Parses `1,2,4`, `A..B` (doubling) or `A..B/N` (N evenly spaced values)
/// as connection counts: whole numbers (`1.5` would run 1 and print 2).
pub(crate) fn parse_conn_levels(s: &str) -> Result<Levels, String> {
    let v = parse_level_list(s)?;
    if let Some(x) = v.iter().find(|x| x.fract() != 0.0) {
        return Err(format!("connections {s:?}: {x} is not a whole number"));
    }
    Ok(Levels(v))
}

/// Rates: at least 1/s (the table prints whole requests per second) and at
/// most one per nanosecond.
pub(crate) fn parse_rate_levels(s: &str) -> Result<Levels, String> {
    let v = parse_level_list(s)?;
    if let Some(x) = v
        .iter()
        .find(|&&x| !(1.0..=crate::args::MAX_RATE).contains(&x))
    {
        return Err(format!("rates {s:?}: {x} is outside 1/s..1G/s"));
    }
    Ok(Levels(v))
}

fn parse_level_list(s: &str) -> Result<Vec<f64>, String> {
    let s = s.trim();
    if let Some((a, rest)) = s.split_once("..") {
        let (b, n) = match rest.split_once('/') {
            Some((b, n)) => (b, Some(n)),
            None => (rest, None),
        };
        let a = parse_count_f64(a)?;
        let b = parse_count_f64(b)?;
        if a <= 0.0 || b < a {
            return Err(format!("range {s:?}: expected 0 < A <= B"));
        }
        let v = match n {
            Some(n) => {
                let n: usize = n
                    .trim()
                    .parse()
                    .map_err(|_| format!("range {s:?}: bad step count {n:?}"))?;
                if !(1..=1000).contains(&n) {
                    return Err(format!("range {s:?}: step count must be 1..1000"));
                }
                if n == 1 {
                    vec![b]
                } else {
                    (0..n)
                        .map(|i| (a + (b - a) * i as f64 / (n - 1) as f64).round())
                        .collect()
                }
            }
            None => {
                let mut v = Vec::new();
                let mut x = a;
                while x <= b && v.len() < 64 {
                    v.push(x);
                    x *= 2.0;
                }
                if v.last() != Some(&b) {
                    v.push(b);
                }
                v
            }
        };
        return Ok(ascending(v));
    }
    let v = s
        .split(',')
        .map(|p| parse_count_f64(p.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if v.is_empty() || v.iter().any(|&x| x <= 0.0) {
        return Err(format!("levels {s:?}: expected positive numbers"));
    }
    Ok(ascending(v))
}

/// Steps run and are analysed from the lightest load up: the knee compares
/// each step with the one before it (`-c 16,1,2` compared 16 with 1), and
/// a level given twice (or two of a range that round alike) is one step.
fn ascending(mut v: Vec<f64>) -> Vec<f64> {
    v.sort_by(f64::total_cmp);
    v.dedup();
    v
}

/// Where the human-readable table goes: stdout, or stderr when stdout carries
/// the JSON document (`--json -`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Sink {
    Stdout,
    Stderr,
}

impl Sink {
    pub(crate) fn line(self, s: &str) {
        match self {
            Sink::Stdout => crate::outln!("{s}"),
            Sink::Stderr => eprintln!("{s}"),
        }
    }
}

/// A step's row: load, RPS, p50, p95, p99, max, errors, client CPU.
fn row(mode: Mode, load: f64, r: &Report) -> String {
    let p95 = r
        .latency_histogram()
        .ok()
        .map(|h| {
            if h.is_empty() {
                0
            } else {
                h.value_at_quantile(0.95)
            }
        })
        .unwrap_or(0);
    let l = &r.latency_us;
    let (cpu, sat) = client_cpu(r);
    let load = match mode {
        Mode::Concurrency | Mode::Sessions => format!("{load:.0}"),
        Mode::Rate => format!("{load:.0}/s"),
    };
    format!(
        "{load:>10} {:>11.0} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}{}",
        r.rps,
        fmt_us(l.p50),
        fmt_us(p95),
        fmt_us(l.p99),
        fmt_us(l.max),
        r.errors_total,
        cpu,
        if sat { " SATURATED" } else { "" }
    )
}

/// The workers' CPU (% of one CPU, summed over workers) and the verdict. The
/// workers' own figures, not the process's: `xload demo` runs the responder in
/// the same process.
fn client_cpu(r: &Report) -> (String, bool) {
    match &r.client {
        Some(c) => {
            let sat = c.get("saturated").and_then(Value::as_bool).unwrap_or(false);
            let workers: f64 = c
                .get("workers")
                .and_then(Value::as_array)
                .map(|ws| {
                    ws.iter()
                        .filter_map(|w| w.get("busy_pct").and_then(Value::as_f64))
                        .sum()
                })
                .unwrap_or(0.0);
            let pct = if workers > 0.0 {
                workers
            } else {
                let cpu_s = c.get("cpu_s").and_then(Value::as_f64).unwrap_or(0.0);
                if r.duration_s > 0.0 {
                    100.0 * cpu_s / r.duration_s
                } else {
                    0.0
                }
            };
            (format!("{pct:.0}%"), sat)
        }
        None => ("-".into(), false),
    }
}

/// A latency in a sweep table cell: narrow (`41.2ms`).
fn fmt_us(us: u64) -> String {
    xload_sys::fmt::fmt_us(us as f64, xload_sys::fmt::UsStyle::Narrow)
}

/// The result of a sweep.
pub(crate) struct SweepResult {
    pub mode: Mode,
    pub steps: Vec<(f64, Report)>,
    pub knee: Option<usize>,
    /// `--find-max`: what the search found (JSON `max_rate` or `max_sessions`).
    pub found: Option<Value>,
    /// The step the plot marks as the compliant maximum (sessions).
    pub found_step: Option<usize>,
    pub interrupted: bool,
}

impl SweepResult {
    pub(crate) fn points(&self) -> Vec<Point> {
        self.steps
            .iter()
            .map(|(l, r)| Point {
                load: *l,
                rps: r.rps,
                p99_us: r.latency_us.p99 as f64,
            })
            .collect()
    }

    /// Writes the plot of the steps and the knee (`--plot`).
    pub(crate) fn plot(&self, path: &Path, target: &str) -> Result<(), String> {
        let points = self.points();
        let mark = match (self.knee, self.found_step) {
            (Some(k), _) => Some((k, format!("knee: {:.0} req/s", points[k].rps))),
            (None, Some(f)) => Some((f, format!("max compliant: {:.0}", points[f].load))),
            (None, None) => None,
        };
        let curve = Curve {
            mode: self.mode,
            points: &points,
            mark,
        };
        crate::plot::plot(path, &curve, target)
    }

    /// A load for JSON: connections and sessions as integers, rates as numbers.
    fn load_json(&self, load: f64) -> Value {
        match self.mode {
            Mode::Concurrency | Mode::Sessions => json!(load.round() as u64),
            Mode::Rate => json!(load),
        }
    }

    pub(crate) fn to_json(&self, target: &str) -> Value {
        let steps: Vec<Value> = self
            .steps
            .iter()
            .map(|(load, r)| {
                let mut v = serde_json::to_value(r).unwrap_or(Value::Null);
                if let Value::Object(m) = &mut v {
                    m.insert(self.mode.key().into(), self.load_json(*load));
                }
                v
            })
            .collect();
        let knee = self.knee.map(|k| {
            let (load, r) = &self.steps[k];
            let [lo, hi] = recommended(&self.points(), k, self.mode);
            json!({ self.mode.key(): self.load_json(*load), "rps": r.rps, "p99_us": r.latency_us.p99,
                    "recommended": { self.mode.key(): [self.load_json(lo.0), self.load_json(hi.0)],
                                     "rps": [lo.1, hi.1],
                                     "curve_rps": [curve_rps_at(&self.points(), k, lo.0),
                                                   curve_rps_at(&self.points(), k, hi.0)] } })
        });
        let found_key = match self.mode {
            Mode::Sessions => "max_sessions",
            Mode::Concurrency | Mode::Rate => "max_rate",
        };
        json!({
            "schema": "xload-sweep/1",
            "target": target,
            "mode": self.mode,
            "steps": steps,
            "knee": knee,
            found_key: self.found,
            "interrupted": self.interrupted,
        })
    }
}

/// What a run of steps varies: the load (`mode`) through `levels`, with
/// `fixed_conns` connections in rate mode and `cooldown` between steps.
pub(crate) struct Steps<'l> {
    pub mode: Mode,
    pub levels: &'l [f64],
    pub fixed_conns: usize,
    pub cooldown: Duration,
    /// Print the table's header first (not for a --find-max trial after
    /// the first: the rows go under one header).
    pub header: bool,
}

/// Runs the steps, printing each row as it completes.
pub(crate) fn run_steps(
    url: &str,
    a: &CommonArgs,
    steps_of: Steps<'_>,
    out: Sink,
    stop: &Arc<AtomicBool>,
) -> Result<(Vec<(f64, Report)>, bool), Failure> {
    let Steps {
        mode,
        levels,
        fixed_conns,
        cooldown,
        header: print_header,
    } = steps_of;
    let (d, w) = (Duration::from_secs(5), Duration::from_secs(1));
    let mut steps = Vec::new();
    let header = match mode {
        Mode::Concurrency => "conc",
        Mode::Rate => "rate",
        Mode::Sessions => "sessions",
    };
    let mut addr: Option<std::net::SocketAddr> = None;
    for (i, &load) in levels.iter().enumerate() {
        let (conns, rate) = match mode {
            Mode::Concurrency | Mode::Sessions => (load as usize, None),
            Mode::Rate => (fixed_conns, Some(load)),
        };
        let mut p = prepare_with(url, a, conns.max(1), rate, d, w)?;
        if mode == Mode::Sessions {
            crate::workload::enable_sessions(&mut p.plan, a)?;
        } else {
            crate::workload::without_sessions(&p.plan, a)?;
        }
        if i == 0 {
            // Under a valid first step only: a bad URL or workload prints no table.
            if print_header {
                out.line(&format!(
                    "{header:>10} {:>11} {:>9} {:>9} {:>9} {:>9} {:>7} {:>7}",
                    "rps", "p50", "p95", "p99", "max", "errors", "cpu"
                ));
            }
            // Rate steps all use `fixed_conns`; the others' loads are connections.
            let most_conns = match mode {
                Mode::Concurrency | Mode::Sessions => {
                    levels.iter().map(|&l| l as usize).max().unwrap_or(1)
                }
                Mode::Rate => fixed_conns,
            };
            ensure_fd_limit(most_conns.max(1))?;
            check_reachable(&mut p, stop)?;
            addr = Some(p.plan.addr);
        }
        if let Some(a) = addr {
            p.plan.addr = a;
        }
        if i > 0 && !cooldown.is_zero() {
            // Let the server drain what the previous step left queued.
            std::thread::sleep(cooldown);
        }
        let m = execute(&p, Arc::clone(stop), crate::progress::Live::Off, None)?;
        if m.interrupted && m.report.requests == 0 {
            // Stopped before this step measured anything (in its warm-up):
            // no row, no point at zero on the plot, no step in the analysis.
            return Ok((steps, true));
        }
        out.line(&row(mode, load, &m.report));
        steps.push((load, m.report));
        if m.interrupted || stop.load(Ordering::Relaxed) {
            return Ok((steps, true));
        }
    }
    Ok((steps, false))
}

/// `xload sweep`.
/// `xload sweep FILE.toml ...`: a positional that names a workload file (a
/// `.toml` path, or an existing file, never `scheme://`) is the workload, as
/// in `xload run FILE`; its `url` is then the target.
pub(crate) fn take_workload_positional(s: &mut SweepArgs) -> Result<(), Failure> {
    let Some(arg) = s.url.as_deref() else {
        return Ok(());
    };
    let path = std::path::Path::new(arg);
    if arg.contains("://") || !(arg.ends_with(".toml") || path.is_file()) {
        return Ok(());
    }
    if let Some(w) = &s.common.workload {
        return Err(Failure::Usage(format!(
            "{arg} and -w {}: one workload per sweep (xload sweep FILE, or xload sweep -w FILE URL)",
            w.display()
        )));
    }
    s.common.workload = Some(path.to_path_buf());
    s.url = None;
    Ok(())
}

pub(crate) fn main_sweep(s: &SweepArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let gates = crate::gate::parse_gates(&s.common)?;
    let slo = s
        .slo
        .iter()
        .map(|g| parse_gate(g))
        .collect::<Result<Vec<_>, _>>()
        // The parser speaks of --fail-if, whose syntax --slo shares.
        .map_err(|e| Failure::Usage(e.replacen("--fail-if", "--slo", 1)))?;
    crate::output::check_outputs(&s.common)?;
    if s.common.latency {
        return Err(Failure::Usage(
            "--latency applies to a single run or a merge; a sweep prints p50/p95/p99 per step"
                .into(),
        ));
    }
    let (mode, levels, fixed) = sweep_levels(s)?;
    if let Some(path) = &s.plot {
        crate::plot::check_path(path).map_err(Failure::Usage)?;
    }
    let url = crate::workload::target(s.url.as_deref(), &s.common)?;
    let out = if s.common.document_to_stdout() {
        Sink::Stderr
    } else {
        Sink::Stdout
    };
    // A sessions search that found no compliant count, or could not confirm
    // the one it found, fails (exit 3); one stopped by Ctrl-C says so and
    // fails nothing.
    let mut search_failed = false;
    let result = if s.find_max && mode == Mode::Sessions {
        let (r, ok) = capacity::find_max_sessions(&url, s, &slo, &levels, out, &stop)?;
        search_failed = !ok && !r.interrupted;
        r
    } else if s.find_max {
        let r = find_max(&url, s, &slo, &levels, fixed, out, &stop)?;
        let limited = r
            .found
            .as_ref()
            .and_then(|f| f.get("client_limited"))
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if limited && !r.interrupted && !s.allow_client_limited {
            eprintln!(
                "xload: the maximum found is the client's limit (the client was SATURATED): \
                 fix the client (more CPUs, --cpus, hosts) or pass --allow-client-limited"
            );
            search_failed = true;
        }
        r
    } else {
        let steps_of = Steps {
            mode,
            levels: &levels,
            fixed_conns: fixed,
            cooldown: s.cooldown,
            header: true,
        };
        let (steps, interrupted) = run_steps(&url, &s.common, steps_of, out, &stop)?;
        let mut r = SweepResult {
            mode,
            steps,
            knee: None,
            found: None,
            found_step: None,
            interrupted,
        };
        r.knee = find_knee_in(&r.points(), r.mode, s.knee_gain, s.knee_p99);
        r
    };
    print_knee(&result, out);
    let target = result
        .steps
        .first()
        .map(|(_, r)| r.target.clone())
        .unwrap_or_else(|| url.clone());
    write_outputs(s, &result, &target)?;
    if result.steps.iter().all(|(_, r)| r.requests == 0) {
        return Err(Failure::Run(format!("no response from {target}")));
    }
    let mut failed = false;
    for (load, r) in &result.steps {
        for g in gates.iter().filter(|g| g.violated(r)) {
            eprintln!("xload: step {} {load}: {}", mode.key(), g.explain(r));
            failed = true;
        }
    }
    Ok(if failed || search_failed { 3 } else { 0 })
}

/// What the steps vary (`-c` levels, or `--rate` levels at a fixed `-c`),
/// through which levels, and the connections of a rate step.
fn sweep_levels(s: &SweepArgs) -> Result<(Mode, Vec<f64>, usize), Failure> {
    if let Some(Levels(n)) = &s.sessions {
        if s.common.workload.is_none() {
            return Err(Failure::Usage(
                "--sessions needs a workload: xload sweep -w FILE URL --sessions A..B".into(),
            ));
        }
        return Ok((Mode::Sessions, n.clone(), 0));
    }
    let (mode, levels, fixed) = match (&s.conc, &s.rates) {
        (Some(Levels(c)), None) => (Mode::Concurrency, c.clone(), 0),
        (c, Some(Levels(r))) => {
            let fixed = match c.as_ref().map(|l| l.0.as_slice()) {
                None => 64,
                Some([one]) => *one as usize,
                Some(_) => {
                    return Err(Failure::Usage(
                        "with --rate, -c takes a single value (connections for every step)".into(),
                    ))
                }
            };
            (Mode::Rate, r.clone(), fixed)
        }
        (None, None) => {
            return Err(Failure::Usage(
                "sweep needs -c LEVELS, --rate LEVELS or -w FILE --sessions LEVELS".into(),
            ))
        }
    };
    if s.find_max && mode != Mode::Rate {
        return Err(Failure::Usage(
            "--find-max searches over rate (--rate LO..HI --slo ...) or workload sessions (-w FILE --sessions LO..HI)".into(),
        ));
    }
    if s.find_max && s.slo.is_empty() {
        return Err(Failure::Usage(
            "--find-max over rate needs the service level to meet: --slo 'p99<10ms'".into(),
        ));
    }
    Ok((mode, levels, fixed))
}

/// `--json`, `--csv` and `--plot` of a finished sweep.
fn write_outputs(s: &SweepArgs, result: &SweepResult, target: &str) -> Result<(), Failure> {
    if let Some(path) = &s.common.json {
        let doc = serde_json::to_string_pretty(&result.to_json(target)).unwrap_or_default();
        write_out(path, &doc)?;
    }
    if let Some(path) = &s.common.csv {
        let mut csv = format!("{},second,rps,p50_us,p99_us,errors\n", result.mode.key());
        for (load, r) in &result.steps {
            for row in &r.timeseries {
                csv.push_str(&format!(
                    "{load},{},{:.1},{},{},{}\n",
                    row.second, row.rps, row.p50_us, row.p99_us, row.errors
                ));
            }
        }
        crate::output::write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if let Some(path) = &s.plot {
        result
            .plot(path, target)
            .map_err(|e| Failure::Run(format!("--plot {}: {e}", path.display())))?;
        eprintln!("xload: plot written to {}", path.display());
    }
    Ok(())
}

pub(crate) fn print_knee(r: &SweepResult, out: Sink) {
    let key = r.mode.key();
    if r.interrupted {
        out.line(&format!(
            "sweep interrupted after {} step(s): the analysis covers those only",
            r.steps.len()
        ));
    }
    match r.knee {
        Some(k) => {
            let (load, rep) = &r.steps[k];
            let unit = if r.mode == Mode::Rate { "/s" } else { "" };
            out.line(&format!(
                "knee: {key} {load:.0}{unit} — {:.0} req/s at p99 {}; beyond it throughput stops rising while p99 takes off",
                rep.rps,
                fmt_us(rep.latency_us.p99)
            ));
            let [(low, rps_low), (high, rps_high)] = recommended(&r.points(), k, r.mode);
            let at = if low == high {
                format!("{low:.0}{unit}")
            } else {
                format!("{low:.0}{unit}–{high:.0}{unit}")
            };
            out.line(&format!(
                "recommended operating range: {rps_low:.0}–{rps_high:.0} req/s (50–70% of the knee), at {key} {at} (read off the measured curve)"
            ));
            let note = (r.mode == Mode::Concurrency)
                .then(|| range_note(&r.points(), k, key))
                .flatten();
            if let Some(note) = note {
                out.line(&note);
            }
            if client_cpu(rep).1 {
                out.line(
                    "note: the client was SATURATED at the knee: it is the generator's limit, not the server's \
                     (add workers or generator hosts and merge their reports)",
                );
            }
        }
        None if r.found.is_none() => {
            out.line("knee: none found in these steps (throughput kept rising or p99 stayed flat): extend the range")
        }
        None => {}
    }
    if let Some(m) = &r.found {
        if let Some(line) = m.get("summary").and_then(Value::as_str) {
            out.line(line);
        }
    }
}

/// Bisection between a passing `lo` and a failing `hi`: `trial(x)` says
/// whether `x` passes (`None`: interrupted). Stops when the bracket is
/// narrower than `tolerance` of its top, after `max_trials`, or (with
/// `whole`, for counts) when no whole number lies between. Returns the
/// bracket and whether a trial was interrupted.
pub(crate) fn bisect(
    (mut lo, mut hi): (f64, f64),
    tolerance: f64,
    max_trials: usize,
    whole: bool,
    mut trial: impl FnMut(f64) -> Result<Option<bool>, Failure>,
) -> Result<((f64, f64), bool), Failure> {
    let mut n = 0;
    while (hi - lo) / hi > tolerance && n < max_trials && !(whole && hi - lo <= 1.0) {
        let mid = if whole {
            ((lo + hi) / 2.0).floor()
        } else {
            ((lo + hi) / 2.0).round()
        };
        match trial(mid)? {
            None => return Ok(((lo, hi), true)),
            Some(true) => lo = mid,
            Some(false) => hi = mid,
        }
        n += 1;
    }
    Ok(((lo, hi), false))
}

/// Whether the search's result is the client's limit: the client was
/// saturated at the bracket's edges (the highest rate that passed, or the
/// lowest that failed above it). Says where, with the client's verdict.
fn client_limited_at(steps: &[(f64, Report)], lo: f64, hi: f64) -> Option<String> {
    let edges: Vec<String> = steps
        .iter()
        .filter(|(rate, _)| *rate == lo || *rate == hi)
        .filter_map(|(rate, r)| {
            let c = r.client.as_ref()?;
            c.get("saturated")
                .and_then(Value::as_bool)
                .filter(|s| *s)
                .map(|_| {
                    let verdict = c.get("verdict").and_then(Value::as_str).unwrap_or("");
                    format!("at {rate:.0}/s ({verdict})")
                })
        })
        .collect();
    (!edges.is_empty()).then(|| edges.join(" and "))
}

/// Bisection over rate for the highest rate that meets every SLO gate with no errors.
fn find_max(
    url: &str,
    s: &SweepArgs,
    slo: &[Gate],
    levels: &[f64],
    conns: usize,
    out: Sink,
    stop: &Arc<AtomicBool>,
) -> Result<SweepResult, Failure> {
    let mut lo = if levels.len() > 1 {
        levels.iter().cloned().fold(f64::INFINITY, f64::min)
    } else {
        0.0
    };
    let mut hi = levels.iter().cloned().fold(0.0, f64::max);
    let mut steps = Vec::new();
    let mut trials = Vec::new();
    let mut interrupted = false;
    let mut trial = |rate: f64, steps: &mut Vec<(f64, Report)>| -> Result<Option<bool>, Failure> {
        let steps_of = Steps {
            mode: Mode::Rate,
            levels: &[rate],
            fixed_conns: conns,
            cooldown: s.cooldown,
            header: steps.is_empty(),
        };
        let (mut st, intr) = run_steps(url, &s.common, steps_of, out, stop)?;
        let Some((_, r)) = st.pop() else {
            return Ok(None);
        };
        let (ok, why) = meets_slo(&r, rate, slo);
        eprintln!("xload: trial {rate:.0}/s: {why}");
        trials.push(json!({"rate": rate, "pass": ok, "why": why}));
        steps.push((rate, r));
        if intr {
            return Ok(None);
        }
        Ok(Some(ok))
    };
    let mut summary = String::new();
    match trial(hi, &mut steps)? {
        None => interrupted = true,
        Some(true) => {
            summary = format!("max rate: at least {hi:.0}/s meets the SLO (the top of the bracket): raise the upper bound");
            lo = hi;
        }
        Some(false) => {
            let lo_ok = if lo > 0.0 {
                trial(lo, &mut steps)?
            } else {
                Some(true)
            };
            match lo_ok {
                None => interrupted = true,
                Some(false) => {
                    summary = format!(
                        "max rate: below {lo:.0}/s — even the bottom of the bracket misses the SLO"
                    );
                    hi = lo;
                    lo = 0.0;
                }
                Some(true) => {
                    let ((l, h), intr) =
                        bisect((lo, hi), s.tolerance, s.max_trials, false, |mid| {
                            trial(mid, &mut steps)
                        })?;
                    (lo, hi, interrupted) = (l, h, intr);
                    summary = format!(
                        "max rate meeting {}: {lo:.0}/s (bracket {lo:.0}–{hi:.0}/s, ±{:.1}%)",
                        slo.iter()
                            .map(|g| g.text.as_str())
                            .collect::<Vec<_>>()
                            .join(" and "),
                        50.0 * (hi - lo) / hi.max(1.0)
                    );
                }
            }
        }
    }
    steps.sort_by(|a, b| a.0.total_cmp(&b.0));
    let limited = client_limited_at(&steps, lo, hi);
    if let Some(why) = &limited {
        summary.push_str(&format!(
            " — the client's limit, not the server's: the client was SATURATED {why}"
        ));
    }
    let found = Some(json!({
        "rate": lo,
        "bracket": [lo, hi],
        "trials": trials,
        "summary": summary,
        "client_limited": limited.is_some(),
    }));
    Ok(SweepResult {
        mode: Mode::Rate,
        steps,
        knee: None,
        found,
        found_step: None,
        interrupted,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_lists_doubling_and_even_ranges() {
        assert_eq!(parse_level_list("1,2,4").unwrap(), vec![1.0, 2.0, 4.0]);
        assert_eq!(
            parse_level_list("1..16").unwrap(),
            vec![1.0, 2.0, 4.0, 8.0, 16.0]
        );
        assert_eq!(
            parse_level_list("1..12").unwrap(),
            vec![1.0, 2.0, 4.0, 8.0, 12.0]
        );
        assert_eq!(
            parse_level_list("1000..5000/5").unwrap(),
            vec![1000.0, 2000.0, 3000.0, 4000.0, 5000.0]
        );
        assert_eq!(parse_level_list("1k..2k/2").unwrap(), vec![1000.0, 2000.0]);
        assert!(parse_level_list("5..1").is_err());
        assert!(parse_level_list("0,1").is_err());
        assert!(parse_level_list("1..10/0").is_err());
        // Unordered or repeated: one ascending list.
        assert_eq!(
            parse_level_list("16,1,2,4,8,2").unwrap(),
            vec![1.0, 2.0, 4.0, 8.0, 16.0]
        );
        assert_eq!(parse_level_list("1..3/5").unwrap(), vec![1.0, 2.0, 3.0]);
    }
}
