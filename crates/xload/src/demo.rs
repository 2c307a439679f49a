//! `xload demo`: the embedded responder on a free loopback port and a short
//! concurrency sweep against it — throughput, p50/p99, the knee and the
//! client verdict per step, with no setup.

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clap::{Args, Parser};
use xload_engine::serve::{ServeConfig, Server};

use xload_stats::knee::{find_knee, Mode};

use crate::sweep::{print_knee, run_steps, Sink, Steps, SweepResult};
use crate::Failure;

#[derive(Debug, Clone, Args)]
pub(crate) struct DemoArgs {
    /// Also plot the sweep: PATH.svg or PATH.png.
    #[arg(long = "plot")]
    pub plot: Option<PathBuf>,

    /// Write the sweep as JSON.
    #[arg(long = "json")]
    pub json: Option<String>,

    /// Over HTTPS: the responder speaks TLS with a self-signed certificate
    /// (the generator skips verification).
    #[arg(long = "tls")]
    pub tls: bool,

    /// Over HTTP/2: the responder speaks h2 (h2c, or h2 by ALPN with
    /// --tls) and each connection carries DEMO_H2_STREAMS streams.
    #[arg(long = "h2")]
    pub h2: bool,

    /// Measured seconds per step.
    #[arg(long = "step", default_value = "1200ms", value_parser = crate::args::parse_positive_duration)]
    pub step: Duration,
}

/// Streams per connection in `xload demo --h2`.
const DEMO_H2_STREAMS: u32 = 10;

pub(crate) fn main_demo(a: &DemoArgs, stop: Arc<AtomicBool>) -> Result<i32, Failure> {
    let t0 = Instant::now();
    if let Some(path) = &a.plot {
        crate::plot::check_path(path).map_err(Failure::Usage)?;
    }
    // Before the sweep, not after it: a path that cannot be written is a
    // bad argument.
    if let Some(path) = a.json.as_deref().filter(|p| *p != "-") {
        crate::output::writable(path).map_err(|e| Failure::Usage(format!("--json {path}: {e}")))?;
    }
    let allowed = xload_engine::pin::allowed_cpus().map_err(|e| Failure::Run(e.to_string()))?;
    let (serve_cpus, gen_cpus) = split_cpus(&allowed);
    let tls = match a.tls {
        true if a.h2 => Some(crate::serve::offer_h2(
            &crate::tls::server(None, None)?.config,
        )),
        true => Some(crate::tls::server(None, None)?.config),
        false => None,
    };
    let server = Server::start(ServeConfig {
        listen: "127.0.0.1:0".parse().expect("static address"),
        body_size: 0,
        cpus: serve_cpus.clone(),
        delay: None,
        pool: None,
        idle_timeout: None,
        header_timeout: None,
        send_timeout: None,
        tls,
        files: None,
        h2: a.h2,
    })
    .map_err(|e| Failure::Run(format!("demo: cannot start the responder: {e}")))?;
    let scheme = if a.tls { "https" } else { "http" };
    let url = format!("{scheme}://{}/", server.addr);
    crate::outln!(
        "xload demo: embedded responder on {url} (cpu {}), generator on cpu {}",
        serve_cpus[0].map_or("any".to_string(), |c| c.to_string()),
        gen_cpus.clone().unwrap_or_else(|| "any".into())
    );
    let streams = if a.h2 {
        format!(" over HTTP/2, {DEMO_H2_STREAMS} streams each")
    } else {
        String::new()
    };
    crate::outln!(
        "sweeping connections 1 → 256{streams}, {:.1}s per step after a short warm-up\n",
        a.step.as_secs_f64()
    );

    let argv = demo_argv(a, &url, gen_cpus.as_deref());
    let common = crate::Cli::try_parse_from(&argv)
        .map_err(|e| Failure::Run(format!("demo: {e}")))?
        .run
        .common;
    let levels = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0, 128.0, 256.0];
    let steps_of = Steps {
        mode: Mode::Concurrency,
        levels: &levels,
        fixed_conns: 0,
        cooldown: Duration::ZERO,
        header: true,
    };
    let (steps, interrupted) = run_steps(&url, &common, steps_of, Sink::Stdout, &stop)?;
    let served = server.stats.requests();
    let _ = server.stop();
    let mut r = SweepResult {
        mode: Mode::Concurrency,
        steps,
        knee: None,
        found: None,
        found_step: None,
        interrupted,
    };
    r.knee = find_knee(&r.points(), 0.10, 1.5);
    crate::outln!();
    print_knee(&r, Sink::Stdout);
    let measured: u64 = r.steps.iter().map(|(_, rep)| rep.requests).sum();
    crate::outln!(
        "the responder answered {served} requests in all (measured windows: {measured}; the rest were warm-ups and in flight at step ends)"
    );
    if allowed.len() < 2 {
        // Both on one CPU: a busy CPU is theirs together.
        crate::outln!(
            "note: the generator and the responder shared one CPU (only one is allowed here): a SATURATED verdict cannot tell which of them is the limit; run on two CPUs or more"
        );
    }
    if let Some(path) = &a.json {
        let doc = serde_json::to_string_pretty(&r.to_json(&url)).unwrap_or_default();
        crate::output::write_out(path, &doc)?;
    }
    if let Some(path) = &a.plot {
        r.plot(path, &url)
            .map_err(|e| Failure::Run(format!("--plot {}: {e}", path.display())))?;
        crate::outln!("plot written to {}", path.display());
    }
    crate::outln!("demo took {:.1}s — next: `xload sweep URL -c 1..256 --plot sweep.svg` against your own server", t0.elapsed().as_secs_f64());
    Ok(0)
}

/// With two CPUs or more, the responder gets the last one and xload the rest,
/// so neither steals the other's CPU.
fn split_cpus(allowed: &[usize]) -> (Vec<Option<usize>>, Option<String>) {
    if allowed.len() < 2 {
        return (vec![None], None);
    }
    let last = *allowed.last().unwrap_or(&0);
    let rest: Vec<String> = allowed[..allowed.len() - 1]
        .iter()
        .map(|c| c.to_string())
        .collect();
    (vec![Some(last)], Some(rest.join(",")))
}

/// The command line each step of the demo runs with.
fn demo_argv(a: &DemoArgs, url: &str, gen_cpus: Option<&str>) -> Vec<String> {
    let mut argv = vec![
        "xload".to_string(),
        "--quiet".into(),
        "-d".into(),
        format!("{}ms", a.step.as_millis()),
        "--warmup".into(),
        "300ms".into(),
    ];
    if a.tls {
        argv.push("--insecure".into());
    }
    if a.h2 {
        argv.extend([
            "--http2".into(),
            "--streams".into(),
            DEMO_H2_STREAMS.to_string(),
        ]);
    }
    if let Some(c) = gen_cpus {
        argv.push("--cpus".into());
        argv.push(c.to_string());
    }
    argv.push(url.to_string());
    argv
}
