//! One load run carried out: a [`Prepared`] plan → workers → report with
//! the client's verdict, and `xload URL` (run, print, write, judge).

use std::io::IsTerminal;
use std::sync::atomic::AtomicBool;
use std::sync::mpsc;
use std::sync::Arc;
use std::time::Duration;

use xload_engine::Plan;
use xload_stats::gate::Gate;
use xload_stats::{Batching, Report, RunMeta, TextOptions};

use crate::args::RunArgs;
use crate::fd_limit::ensure_fd_limit;
use crate::output::{check_outputs, write_out};
use crate::prepared::{check_reachable, prepare, Prepared};
use crate::progress::{Live, Progress};
use crate::Failure;

/// Everything measured by one execution of a prepared run.
pub(crate) struct Measured {
    pub report: Report,
    pub interrupted: bool,
    /// When the measured window began, CLOCK_MONOTONIC ns.
    pub window_start_ns: u64,
    /// The latency histogram of each row of `report.timeseries`.
    pub second_histograms: Vec<xload_stats::SecondHistogram>,
    /// When each row of `report.timeseries` began and how long it lasted.
    pub spans: Vec<crate::progress::Span>,
}

/// Executes a prepared run and builds its report (with the probe's verdict).
/// `board`: where `--metrics-listen` reads each tick.
pub(crate) fn execute(
    p: &Prepared,
    stop: Arc<AtomicBool>,
    live: Live,
    board: Option<Arc<crate::metrics::Board>>,
) -> Result<Measured, Failure> {
    let budget = preflight(p);
    let mut sampler = xload_probe::Sampler::new();
    // --start-at: wait until the engine must start (as late as can be, so
    // that nothing else comes between the wait and the engine's start).
    let timed;
    let plan = match p.start_at {
        None => &p.plan,
        Some(at) => {
            let at_ns =
                crate::hosts::wait_for_start(at, p.plan.warmup, &stop).ok_or_else(|| {
                    Failure::Run(
                        "interrupted while waiting for --start-at: nothing was measured".into(),
                    )
                })?;
            timed = Plan {
                start_at_ns: Some(at_ns),
                ..p.plan.clone()
            };
            &timed
        }
    };
    let (tx, rx) = mpsc::channel();
    let workers = p.plan.worker_cpus.len();
    let tick_s = p.plan.tick.as_secs_f64();
    let progress = Progress::spawn(rx, workers, tick_s, live, board);
    // The client's evidence covers the measured window: sample when the
    // warm-up ends (the workers reset their recorders at the same moment).
    let end_sample = std::sync::Mutex::new(None);
    let first_sample = std::sync::Mutex::new(None);
    let (outcome, start, placement) = std::thread::scope(|s| {
        let engine = s.spawn(|| {
            // Without a warm-up the start sample is taken as soon as the
            // worker threads exist (before, their CPU times would be missing);
            // the end sample while they still exist.
            xload_engine::run_observed(
                plan,
                stop.clone(),
                Some(tx),
                || {
                    if plan.warmup.is_zero() && plan.start_at_ns.is_none() {
                        *first_sample.lock().unwrap_or_else(|e| e.into_inner()) =
                            xload_probe::Sampler::new().sample().ok();
                    }
                },
                || {
                    let mut end_sampler = xload_probe::Sampler::new();
                    *end_sample.lock().unwrap_or_else(|e| e.into_inner()) =
                        end_sampler.sample().ok();
                },
            )
        });
        let until = std::time::Instant::now()
            + plan.start_at_ns.map_or(plan.warmup, |at| {
                Duration::from_nanos(at.saturating_sub(xload_engine::clock::now_ns()))
            });
        while std::time::Instant::now() < until
            && !stop.load(std::sync::atomic::Ordering::Relaxed)
            && !engine.is_finished()
        {
            std::thread::sleep((until - std::time::Instant::now()).min(Duration::from_millis(20)));
        }
        let start = if plan.warmup.is_zero() && plan.start_at_ns.is_none() {
            None
        } else {
            sampler.sample().ok()
        };
        let placement = follow_placement(
            &mut sampler,
            start.as_ref(),
            &first_sample,
            &end_sample,
            || engine.is_finished(),
        );
        (engine.join(), start, placement)
    });
    let start = start.or_else(|| first_sample.into_inner().unwrap_or_else(|e| e.into_inner()));
    let outcome = outcome
        .map_err(|_| Failure::Run("the engine thread panicked".into()))?
        .map_err(|e| Failure::Run(e.to_string()))?;
    let series = progress.finish();
    let end = end_sample.into_inner().unwrap_or_else(|e| e.into_inner());
    for w in &outcome.workers {
        if let Some(e) = &w.error {
            eprintln!("xload: worker {}: {e}", w.index);
        }
    }
    let mut report = build_report(p, &outcome, series.rows);
    if let (Some(start), Some(end), Some(budget)) = (start, end, budget) {
        let mut input = verdict_input(p, &outcome, &report);
        if !input.workers_pinned {
            input.worker_cpu_ticks = placement.map(|pl| pl.cpu_ticks(&input.worker_tids));
        }
        let summary = xload_probe::summarize(&start, &end, &input, &budget);
        report.client = serde_json::to_value(&summary).ok();
    }
    report.interrupted = outcome.interrupted;
    Ok(Measured {
        report,
        interrupted: outcome.interrupted,
        window_start_ns: outcome.window_start_ns,
        second_histograms: series.histograms,
        spans: series.spans,
    })
}

/// Where the workers run over the window, read every [`PLACEMENT_EVERY`]
/// until the end sample is taken (or the engine ended): unpinned, they are
/// judged on the CPUs they used (a reading at the end names only the last).
/// `None` when the window never started.
fn follow_placement(
    sampler: &mut xload_probe::Sampler,
    start: Option<&xload_probe::Sample>,
    first_sample: &std::sync::Mutex<Option<xload_probe::Sample>>,
    end_sample: &std::sync::Mutex<Option<xload_probe::Sample>>,
    finished: impl Fn() -> bool,
) -> Option<xload_probe::Placement> {
    let mut placement = xload_probe::Placement::default();
    let mut started = false;
    loop {
        let ended = end_sample
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_some()
            || finished();
        if !started {
            let first = first_sample.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(s) = start.or(first.as_ref()) {
                placement.observe(&s.threads);
                started = true;
            }
        } else if !ended {
            if let Ok(t) = sampler.threads() {
                placement.observe(&t);
            }
        }
        if ended {
            break;
        }
        std::thread::sleep(PLACEMENT_EVERY);
    }
    if let Some(end) = end_sample
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()
    {
        placement.observe(&end.threads);
    }
    started.then_some(placement)
}

/// How often the workers' threads are read for where they ran.
const PLACEMENT_EVERY: Duration = Duration::from_millis(50);

/// The probe's budget of this host, after warning about what it says of
/// the plan (fds, ephemeral ports per source); `None` if /proc is unreadable.
fn preflight(p: &Prepared) -> Option<xload_probe::Budget> {
    let budget = xload_probe::read_budget().ok()?;
    let loopback = p.plan.addr.ip().is_loopback();
    let sources = p.plan.sources.len();
    for w in xload_probe::preflight_sources(p.plan.connections, sources, loopback, &budget) {
        eprintln!("xload: warning: {w}");
    }
    Some(budget)
}

/// The report of an engine outcome and its time series, before the client verdict.
fn build_report(
    p: &Prepared,
    outcome: &xload_engine::Outcome,
    rows: Vec<xload_stats::IntervalRow>,
) -> Report {
    let workers = p.plan.worker_cpus.len();
    let meta = RunMeta {
        target: p.target.clone(),
        engine: outcome.engine.name().to_string(),
        engine_reason: Some(outcome.engine_reason.clone()),
        threads: workers,
        connections: p.plan.connections,
        duration_s: outcome.measured.as_secs_f64(),
        rate_target: p.plan.open_loop.map(|o| o.rate_per_s),
        pipeline: p.plan.pipeline,
    };
    let mut report = Report::build(&meta, &outcome.recorder);
    crate::workload::judge(&mut report, &p.class_limits);
    if p.plan.tls.is_some() {
        let mut t = report.tls.take().unwrap_or_default();
        t.mode = "user-space".into();
        t.library = "rustls".into();
        t.ktls_unavailable = Some(xload_engine::ktls_unavailable());
        report.tls = Some(t);
    }
    if let (Some(h), Some(plan)) = (report.h2.as_mut(), p.plan.h2.as_ref()) {
        h.streams_asked = plan.streams;
    }
    report.timeseries = rows;
    report.batching = outcome
        .workers
        .iter()
        .map(|w| w.batching)
        .fold(None, Batching::merge)
        // A run too short for a single wait has nothing to say about batching.
        .filter(|b| b.waits > 0);
    report
}

fn verdict_input(p: &Prepared, o: &xload_engine::Outcome, r: &Report) -> xload_probe::VerdictInput {
    let pinned = o.workers.iter().all(|w| w.cpu.is_some());
    let generator_cpus: Vec<usize> = if pinned {
        o.workers.iter().filter_map(|w| w.cpu).collect()
    } else {
        xload_engine::pin::allowed_cpus().unwrap_or_default()
    };
    // Shares of the sends that left (each late send is one of them).
    // Sends that waited for a connection, or behind such a wait's backlog
    // at the catch-up limit, are the server's pace, not this client's.
    let open = r.open_loop.as_ref();
    let catch_up = open.map_or(0, |o| o.late_catch_up);
    let waiting = open.map_or(0, |o| o.late_waiting_for_connection) + catch_up;
    let share = |n: u64| match open.map(|o| o.sends) {
        Some(s) if s > 0 => Some(n as f64 / s as f64),
        _ => None,
    };
    let late_sends = open.map(|o| o.late_sends);
    let late_ratio = late_sends.and_then(|l| share(l.saturating_sub(waiting)));
    let late_waiting_ratio = late_sends.and_then(|_| share(waiting));
    xload_probe::VerdictInput {
        generator_cpus,
        worker_tids: o.workers.iter().map(|w| w.tid).collect(),
        workers_pinned: pinned,
        connections: p.plan.connections,
        no_keepalive_conn_per_s: (p.closes && r.duration_s > 0.0)
            .then(|| r.connects as f64 / r.duration_s),
        schedule_lag_p99_us: open.map(|o| o.schedule_lag_us.p99),
        late_send_ratio: late_ratio,
        late_sends: late_sends.map(|l| l.saturating_sub(waiting)),
        late_waiting_ratio,
        late_catch_up_ratio: late_sends.and_then(|_| share(catch_up)),
        cq_overflows: o.workers.iter().map(|w| w.cq_overflow).sum(),
        fd_errors: r.errors.get("fd_limit").copied().unwrap_or(0),
        port_errors: r.errors.get("no_ephemeral_port").copied().unwrap_or(0),
        target_is_loopback: p.plan.addr.ip().is_loopback(),
        tls_handshakes: r
            .tls
            .as_ref()
            .map_or(0, |t| t.handshakes_full + t.handshakes_resumed),
        tls_handshake_cpu_s: r.tls.as_ref().map_or(0.0, |t| t.handshake_cpu_s),
        worker_cpu_ticks: None,
    }
}

/// `xload URL`: run, print, write, judge.
pub(crate) fn main_run(url: &str, ra: &RunArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let a = &ra.common;
    let mut p = prepare(url, a, ra.sessions.unwrap_or(ra.connections), ra.rate)?;
    if ra.sessions.is_some() {
        crate::workload::enable_sessions(&mut p.plan, a)?;
    } else {
        crate::workload::without_sessions(&p.plan, a)?;
    }
    p.start_at = ra.hosts.start_at;
    let run_id = ra
        .hosts
        .run_id
        .clone()
        .unwrap_or_else(crate::hosts::new_run_id);
    check_outputs(a)?;
    crate::export::check(&ra.export)?;
    ensure_fd_limit(p.plan.connections)?;
    check_reachable(&mut p, &stop)?;
    let live = if ra.hosts.progress_lines {
        Live::Lines
    } else if !a.quiet && std::io::stdout().is_terminal() && std::io::stderr().is_terminal() {
        Live::Terminal
    } else {
        Live::Off
    };
    let endpoint = match ra.export.metrics_listen {
        Some(addr) => Some(crate::metrics::Endpoint::start(addr).map_err(Failure::Usage)?),
        None => None,
    };
    let board = endpoint.as_ref().map(|e| Arc::clone(&e.board));
    let mut m = execute(&p, Arc::clone(&stop), live, board)?;
    crate::hosts::stamp(&mut m.report, &ra.hosts, a, &p, &run_id, m.window_start_ns);
    m.report.timeseries_histograms = std::mem::take(&mut m.second_histograms);
    let report = &m.report;
    let text = report.render_text(&TextOptions {
        latency_table: a.latency,
    });
    if a.document_to_stdout() {
        eprint!("{text}");
    } else {
        crate::out(&text);
    }
    if let Some(path) = &a.json {
        write_out(path, &report.to_json())?;
    }
    if let Some(path) = &a.csv {
        let csv = crate::progress::csv(&report.timeseries);
        write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if let Some(path) = &ra.export.hlog {
        crate::export::write_hlog(path, report, &report.timeseries_histograms, &m.spans)?;
    }
    if let Some(path) = &a.class_csv {
        let csv = xload_stats::classes_csv(&report.classes);
        write_out(&path.to_string_lossy(), csv.trim_end())?;
    }
    if let Some(e) = endpoint {
        e.close(ra.export.metrics_linger.unwrap_or_default(), &stop);
    }
    if report.requests == 0 && m.interrupted {
        // Stopped by the user before any answer was measured: nothing failed.
        if p.plan.warmup > Duration::ZERO && report.duration_s < 0.001 {
            eprintln!("xload: stopped during the warm-up, before the measured window began: nothing was measured");
        } else {
            eprintln!("xload: stopped before any response was measured");
        }
        return Ok(0);
    }
    if report.requests == 0 {
        let why = if report.errors_total > 0 {
            let mut v: Vec<_> = report
                .errors
                .iter()
                .map(|(k, n)| format!("{k} {n}"))
                .collect();
            v.sort();
            format!(" ({})", v.join(", "))
        } else if let Some(d) = p.plan.duration.filter(|d| d.as_millis() < 50) {
            // Not the target's fault: the window ended before a round trip.
            return Err(Failure::Run(format!(
                "no response from {} within -d {d:?}: too short for a round trip; measure longer (e.g. -d 1s)",
                p.target
            )));
        } else {
            String::new()
        };
        return Err(Failure::Run(format!("no response from {}{why}", p.target)));
    }
    let failed: Vec<&Gate> = p.gates.iter().filter(|g| g.violated(report)).collect();
    for g in &failed {
        eprintln!("xload: {}", g.explain(report));
    }
    if !failed.is_empty() {
        return Ok(3);
    }
    Ok(0)
}
