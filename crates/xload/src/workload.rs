//! `xload run FILE [URL]` and `-w FILE`: a workload file's target, its
//! requests prebuilt for the engine, and its classes' limits for the report.

use std::path::Path;
use std::sync::Arc;

use xload_http::Url;
use xload_stats::{ClassLimit, Report};
use xload_workload::RequestPlan;

use crate::args::CommonArgs;
use crate::Failure;

/// Reads and validates a workload file; a bad one is a usage error (exit 2)
/// that names the file, line and key.
pub(crate) fn load(path: &Path) -> Result<xload_workload::Workload, Failure> {
    xload_workload::load(path).map_err(|e| Failure::Usage(e.to_string()))
}

/// The target of a run: the URL given, else the workload's `url`.
pub(crate) fn target(url: Option<&str>, a: &CommonArgs) -> Result<String, Failure> {
    match (url, &a.workload) {
        (Some(u), _) => Ok(u.to_string()),
        (None, Some(path)) => load(path)?.url.ok_or_else(|| {
            Failure::Usage(format!(
                "{}: no `url` in the workload and no URL given: xload run {} http://host:port/",
                path.display(),
                path.display()
            ))
        }),
        (None, None) => Err(Failure::Usage(
            "a target URL is required: xload [OPTIONS] http://host[:port]/path (or a subcommand; see --help)".into(),
        )),
    }
}

/// What the run needs of a workload: the engine's prebuilt requests and
/// each class's limits, in class order.
pub(crate) struct Resolved {
    pub engine: xload_engine::Workload,
    pub limits: Vec<Vec<ClassLimit>>,
}

/// Loads `-w` (if given) and renders its requests for `url`. Options that
/// shape the one request of a plain run are refused with a workload: the
/// workload says what each class sends.
pub(crate) fn resolve(a: &CommonArgs, url: &Url) -> Result<Option<Resolved>, Failure> {
    let Some(path) = &a.workload else {
        return Ok(None);
    };
    let shaped = [
        (a.method != "GET", "-m"),
        (!a.headers.is_empty(), "-H"),
        (a.auth.is_some(), "-a"),
        (a.body.is_some(), "--body"),
        (a.body_file.is_some(), "--body-file"),
        (a.pipeline != 1, "--pipeline"),
        (a.no_keepalive, "--no-keepalive"),
    ];
    if let Some((_, flag)) = shaped.iter().find(|(given, _)| *given) {
        return Err(Failure::Usage(format!(
            "{flag} does not apply with a workload: its classes say what each request is (HTTP/1.1: one request in flight per connection; HTTP/2: --streams)"
        )));
    }
    let w = load(path)?;
    let requests = RequestPlan::build(&w, url).map_err(Failure::Usage)?;
    let limits = w
        .classes
        .iter()
        .map(|c| {
            let mut l: Vec<ClassLimit> = c
                .limits
                .mean
                .iter()
                .map(|d| ClassLimit::new("mean", us(*d)))
                .collect();
            l.extend(
                c.limits
                    .percentiles
                    .iter()
                    .map(|(share, d)| ClassLimit::new(&format!("p{share}"), us(*d))),
            );
            l
        })
        .collect();
    Ok(Some(Resolved {
        engine: xload_engine::Workload {
            requests: Arc::new(requests),
            seed: w.seed,
            session: None,
            cookies: a.cookies,
        },
        limits,
    }))
}

fn us(d: std::time::Duration) -> u64 {
    d.as_micros().min(u128::from(u64::MAX)) as u64
}

/// `--sessions N`: each connection walks the workload's `[session]`.
pub(crate) fn enable_sessions(
    plan: &mut xload_engine::Plan,
    a: &CommonArgs,
) -> Result<(), Failure> {
    let (Some(w), Some(path)) = (plan.workload.as_mut(), &a.workload) else {
        return Err(Failure::Usage(
            "--sessions needs a workload: xload run FILE --sessions N".into(),
        ));
    };
    if plan.h2.as_ref().is_some_and(|h| h.streams > 1) {
        return Err(Failure::Usage(
            "--sessions with --http2: a session sends one request at a time, on a connection of its own with one stream: drop --streams".into(),
        ));
    }
    let session = load(path)?.session.ok_or_else(|| {
        Failure::Usage(format!(
            "{}: --sessions needs a [session] table (sequence or markov, think)",
            path.display()
        ))
    })?;
    w.cookies = session.cookies;
    w.session = Some(session);
    Ok(())
}

/// Without `--sessions`: a workload whose classes capture values needs
/// sessions (a value belongs to the session whose response gave it).
pub(crate) fn without_sessions(plan: &xload_engine::Plan, a: &CommonArgs) -> Result<(), Failure> {
    match (&plan.workload, &a.workload) {
        (Some(w), Some(path)) if w.requests.stateful() => Err(Failure::Usage(format!(
            "{}: its classes capture values for later requests of a session: run it with --sessions N",
            path.display()
        ))),
        _ => Ok(()),
    }
}

/// Judges each class's limits in the report.
pub(crate) fn judge(report: &mut Report, limits: &[Vec<ClassLimit>]) {
    for (class, l) in report.classes.iter_mut().zip(limits) {
        if let Err(e) = class.set_limits(l.clone()) {
            eprintln!("xload: class {}: limits not judged: {e}", class.name);
        }
    }
}
