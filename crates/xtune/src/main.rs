//! `xtune`: apply, verify, diff and roll back tuning profiles.
//!
//! Exit codes: 0 success; 1 could not be done (a write failed and was undone,
//! the host lacks a knob, a remote failed); 2 bad arguments or profile;
//! 3 verify found drift.

mod cli_docs;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{CommandFactory, Parser, Subcommand};

use xtune::apply::SystemServices;
use xtune::commands::{self, read_boot_id, Site};
use xtune::fs::{Fs, RootFs};
use xtune::host::sysctl_path;
use xtune::knob::{TargetCtx, RPS_SOCK_FLOW_ENTRIES};
use xtune::profile::Profile;
use xtune::remote::{self, RemoteJob};
use xtune::report::Report;
use xtune::snapshot::{human_time, Store, DEFAULT_STATE_DIR};

#[derive(Parser, Debug)]
#[command(
    name = "xtune",
    version,
    about = "Apply, verify by meaning, diff and roll back host tuning profiles",
    after_help = "Exit codes: 0 ok, 1 could not be done (nothing left half-applied), 2 bad arguments, 3 verify found drift."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
    /// Work inside network namespace NAME (/run/netns/NAME).
    #[arg(long, global = true, value_name = "NAME")]
    netns: Option<String>,
    /// With --netns: leave host-wide knobs out (noted) instead of refusing.
    #[arg(long, global = true)]
    skip_global: bool,
    /// Run the same command on HOST over ssh (xtune installed there; the
    /// profile is sent on stdin). XTUNE_SSH overrides the ssh program.
    #[arg(long, global = true, value_name = "HOST")]
    ssh: Option<String>,
    /// Run on several hosts and combine the reports: --on client=H1 --on server=H2.
    #[arg(long = "on", global = true, value_name = "ROLE=HOST")]
    on: Vec<String>,
    /// Snapshot directory.
    #[arg(long, global = true, value_name = "DIR")]
    state_dir: Option<PathBuf>,
    /// Print the report as JSON on stdout.
    #[arg(long, global = true)]
    json: bool,
    /// Read and write below DIR instead of / (tests; export --systemd: an image tree).
    #[arg(long, global = true, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Name to report for a profile read from stdin.
    #[arg(long, global = true, hide = true, value_name = "NAME")]
    profile_label: Option<String>,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Snapshot, then write the profile (NIC, IRQ, RPS/XPS/RFS, sysctl, governor/irqbalance).
    Apply {
        /// Profile file ('-' reads stdin).
        profile: String,
        /// Show current -> wanted for every knob, write nothing.
        #[arg(long)]
        dry_run: bool,
    },
    /// Compare every knob with the profile by meaning; exit 3 on drift.
    Verify {
        /// Profile file ('-' reads stdin).
        profile: String,
        /// Verify again after DUR (5s, 500ms, 1m) to catch agents rewriting values.
        #[arg(long, value_name = "DUR")]
        settle: Option<String>,
    },
    /// Show current -> wanted for every knob (same as apply --dry-run).
    Diff {
        /// Profile file ('-' reads stdin).
        profile: String,
    },
    /// Restore the last snapshot of this target, or the one named.
    Rollback {
        /// Snapshot id (see `xtune snapshots`).
        snapshot: Option<String>,
    },
    /// List snapshots.
    Snapshots,
    /// Watch this host (per-CPU usr/sys/softirq/idle, NET_RX per CPU, top IRQs,
    /// TCP counters) and name the saturated resource: run it on the server host
    /// during a load test.
    Observe {
        /// How long to observe: 500ms, 10s, 2m.
        #[arg(long = "for", value_name = "DUR", default_value = "10s", value_parser = xload_sys::duration::parse_duration)]
        for_duration: std::time::Duration,
        /// Length of one table row.
        #[arg(long, value_name = "DUR", default_value = "1s", value_parser = xload_sys::duration::parse_duration)]
        interval: std::time::Duration,
        /// Also the CPU of this server process: a pid, or a name (every process of
        /// that name in this network namespace, e.g. nginx).
        #[arg(long, value_name = "PID|NAME", value_parser = xload_probe::watch::ProcessSel::parse)]
        process: Option<xload_probe::watch::ProcessSel>,
    },
    /// Make the profile survive a reboot: its sysctls as a sysctl.d file, or
    /// the whole profile (NIC settings too) as a systemd unit and udev rule.
    Export {
        /// Profile file.
        profile: String,
        /// The sysctls as a sysctl.d file (stdout or -o).
        #[arg(long)]
        sysctl_d: bool,
        /// Write /etc/xtune/NAME.toml, /etc/systemd/system/xtune-NAME.service
        /// (apply, then verify, after network-online.target) and a udev rule
        /// re-applying when a named device comes back; below --root DIR if given.
        #[arg(long, conflicts_with = "sysctl_d")]
        systemd: bool,
        /// With --systemd: also `systemctl enable` the unit (nothing is
        /// enabled without it).
        #[arg(long, requires = "systemd")]
        enable: bool,
        /// Write to FILE instead of stdout.
        #[arg(long, short, value_name = "FILE")]
        output: Option<PathBuf>,
    },
}

impl Cmd {
    fn name(&self) -> &'static str {
        match self {
            Cmd::Apply { .. } => "apply",
            Cmd::Verify { .. } => "verify",
            Cmd::Diff { .. } => "diff",
            Cmd::Rollback { .. } => "rollback",
            Cmd::Snapshots => "snapshots",
            Cmd::Export { .. } => "export",
            Cmd::Observe { .. } => "observe",
        }
    }

    fn profile_arg(&self) -> Option<&str> {
        match self {
            Cmd::Apply { profile, .. } | Cmd::Verify { profile, .. } | Cmd::Diff { profile } => {
                Some(profile)
            }
            _ => None,
        }
    }
}

/// Writes a report to stdout. A reader that went away (`| head`) is not an
/// error worth a panic: everything was already done when the report prints.
fn out(text: &str) {
    if let Err(e) = xload_sys::stdout::write_stdout(text) {
        eprintln!("xtune: writing the report: {e}");
    }
}

macro_rules! outln {
    ($($t:tt)*) => { out(&format!("{}\n", format_args!($($t)*))) };
}

macro_rules! outp {
    ($($t:tt)*) => { out(&format!($($t)*)) };
}

fn main() {
    if let Some(code) = cli_docs::answer(Cli::command()) {
        std::process::exit(code);
    }
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            // A script that asked for --json reads a report on stdout even
            // when the command line itself was wrong.
            let json = std::env::args().skip(1).any(|a| a == "--json");
            if e.use_stderr() && json {
                let command = std::env::args()
                    .skip(1)
                    .find(|a| !a.starts_with('-'))
                    .unwrap_or_else(|| "-".into());
                let mut r = Report::new(&command, &hostname(), "-");
                r.ok = false;
                r.exit_code = 2;
                let text = e.render().to_string();
                let head = text.split("\n\nUsage").next().unwrap_or(&text);
                let msg: Vec<&str> = head.split_whitespace().collect();
                r.error = Some(msg.join(" ").trim_start_matches("error: ").to_string());
                outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
            }
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    std::process::exit(run(cli));
}

/// Runs `xtune observe` on this host, printing to stdout. Exit code: 0 done
/// (whatever the verdict, or the reader went away), 1 /proc could not be
/// read or the output not written, 2 bad options.
fn observe_here(args: &xload_probe::observe::ObserveArgs) -> i32 {
    use std::io::Write;
    use xload_probe::observe::{observe, ObserveError};
    let mut out = std::io::stdout().lock();
    match observe(args, &mut xload_probe::Sampler::new(), &mut out) {
        Ok(_) => 0,
        Err(ObserveError::Write(e)) if e.kind() == std::io::ErrorKind::BrokenPipe => 0,
        Err(e) => {
            // Keep stdout clean for --json consumers.
            let _ = out.flush();
            eprintln!("xtune observe: {e}");
            match e {
                ObserveError::BadArgs(_) => 2,
                ObserveError::Probe(_) | ObserveError::Write(_) => 1,
            }
        }
    }
}

fn run(cli: Cli) -> i32 {
    if let Cmd::Observe {
        for_duration,
        interval,
        process,
    } = &cli.cmd
    {
        if cli.ssh.is_none() {
            if cli.netns.is_some() || !cli.on.is_empty() {
                return usage_error(
                    &cli,
                    "observe watches this host (or one --ssh HOST): --netns and --on do not apply",
                );
            }
            let args = xload_probe::observe::ObserveArgs {
                for_duration: *for_duration,
                interval: *interval,
                json: cli.json,
                process: process.clone(),
            };
            return observe_here(&args);
        }
    }
    if let Cmd::Export {
        profile,
        sysctl_d,
        systemd,
        enable,
        output,
    } = &cli.cmd
    {
        if *systemd {
            return export_systemd(&cli, profile, *enable, output.is_some());
        }
        return export(&cli, profile, *sysctl_d, output.as_deref());
    }
    if cli.ssh.is_some() && !cli.on.is_empty() {
        return usage_error(
            &cli,
            "--ssh and --on cannot be combined; use --on ROLE=HOST for each host",
        );
    }
    if let Some(n) = &cli.netns {
        if let Err(e) = xtune::netns::check_name(n) {
            return usage_error(&cli, &e.to_string());
        }
    }

    // The profile is read and checked before anything else happens anywhere.
    let profile = match cli.cmd.profile_arg() {
        Some(arg) => match load_profile(arg, cli.profile_label.as_deref()) {
            Ok(p) => Some(p),
            Err(e) => return usage_error(&cli, &e),
        },
        None => None,
    };

    if let Some(host) = &cli.ssh {
        let job = RemoteJob {
            role: host.clone(),
            host: host.clone(),
            args: forward_args(&cli, cli.json, profile.as_ref()),
            stdin: profile.as_ref().map(Profile::to_toml_string),
        };
        return remote::run_passthrough(&job);
    }
    let roles = match roles(&cli, profile.as_ref()) {
        Ok(r) => r,
        Err(e) => return usage_error(&cli, &e),
    };
    if !roles.is_empty() {
        return multi(&cli, profile.as_ref(), roles);
    }
    run_local(&cli, profile.as_ref())
}

/// A command on this host or one of its namespaces.
fn run_local(cli: &Cli, profile: Option<&Profile>) -> i32 {
    let fs = RootFs::new(cli.root.clone().unwrap_or_else(|| PathBuf::from("/")));
    let store = Store::new(
        cli.state_dir
            .clone()
            .unwrap_or_else(|| PathBuf::from(DEFAULT_STATE_DIR)),
    );
    let mut site = Site {
        fs: &fs,
        services: &SystemServices,
        store: &store,
        target: local_target(cli),
        hostname: hostname(),
        boot_id: read_boot_id(&fs),
        netns_cookie: None,
    };
    let command = cli.cmd.name();
    if let Err(e) = store.check() {
        let flag = if cli.state_dir.is_some() {
            "--state-dir "
        } else {
            ""
        };
        return usage_error(cli, &format!("{flag}{e}"));
    }

    // One apply or rollback at a time per target (whatever its state dir),
    // then per state dir, from reading the current values to the
    // snapshot's last state.
    let _locks = match &cli.cmd {
        Cmd::Apply { dry_run: false, .. } | Cmd::Rollback { .. } => {
            let holder = format!(
                "pid {}: {command} with state dir {}",
                std::process::id(),
                store.dir().display()
            );
            let target = xtune::lock::lock_target(fs.root(), &site.target, &holder)
                .map_err(|e| e.to_string());
            match target.and_then(|t| {
                let s = store
                    .lock()
                    .map_err(|e| format!("cannot lock the state dir: {e}"))?;
                Ok((t, s))
            }) {
                Ok(l) => Some(l),
                Err(msg) => return emit(cli.json, site.refused(command, profile, &msg, 1)),
            }
        }
        _ => None,
    };

    // Which net.* sysctls the host has, read before entering the namespace:
    // present on the host but absent inside means host-wide.
    let host_net_sysctls = match (profile, &cli.netns) {
        (Some(p), Some(_)) => host_net_sysctls(&fs, p),
        _ => BTreeSet::new(),
    };
    if let Some(n) = &cli.netns {
        if let Err(e) = xtune::netns::enter(n) {
            return emit(
                cli.json,
                site.refused(
                    command,
                    profile,
                    &e.to_string(),
                    xtune::netns::exit_code(&e),
                ),
            );
        }
        site.netns_cookie = xtune::netns::cookie();
    }
    let tctx = TargetCtx {
        netns: cli.netns.clone(),
        host_net_sysctls,
        skip_global: cli.skip_global,
    };

    let p = || profile.expect("profile commands load a profile");
    let report = match &cli.cmd {
        Cmd::Snapshots => return snapshots(&site, cli.json),
        Cmd::Rollback { snapshot } => commands::rollback(&site, snapshot.as_deref()),
        Cmd::Apply { dry_run: true, .. } => commands::diff(&site, p(), &tctx, true),
        Cmd::Apply { dry_run: false, .. } => commands::apply(&site, p(), &tctx),
        Cmd::Diff { .. } => commands::diff(&site, p(), &tctx, false),
        Cmd::Verify { settle, .. } => match settle.as_deref().map(parse_duration).transpose() {
            Ok(settle) => commands::verify(&site, p(), &tctx, settle),
            Err(e) => site.refused("verify", Some(p()), &e, 2),
        },
        Cmd::Export { .. } => unreachable!("export returned above"),
        Cmd::Observe { .. } => unreachable!("observe ran above or went to --ssh"),
    };
    emit(cli.json, report)
}

/// The profile's `net.*` sysctls that exist (as files) in this namespace.
fn host_net_sysctls(fs: &RootFs, p: &Profile) -> BTreeSet<String> {
    let mut keys: Vec<&str> = p.sysctl.iter().map(|(k, _)| k.as_str()).collect();
    keys.push(RPS_SOCK_FLOW_ENTRIES);
    keys.into_iter()
        .filter(|k| k.starts_with("net."))
        .filter(|k| fs.exists(&sysctl_path(k)) && !fs.is_dir(&sysctl_path(k)))
        .map(str::to_string)
        .collect()
}

fn load_profile(arg: &str, label: Option<&str>) -> Result<Profile, String> {
    if arg == "-" {
        let bytes = xload_sys::input::read_stream(
            std::io::stdin().lock(),
            "a profile",
            xtune::profile::PROFILE_LIMIT,
        );
        let text = bytes
            .and_then(|b| {
                String::from_utf8(b)
                    .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
            })
            .map_err(|e| format!("reading the profile from stdin: {e}"))?;
        let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
        Profile::from_text(&text, label.unwrap_or("stdin"), &cwd).map_err(|e| e.to_string())
    } else {
        let mut p = Profile::load(Path::new(arg)).map_err(|e| e.to_string())?;
        if let Some(l) = label {
            p.name = l.to_string();
        }
        Ok(p)
    }
}

/// Roles from --on, else from the profile's [hosts] table.
fn roles(
    cli: &Cli,
    profile: Option<&Profile>,
) -> Result<Vec<(String, String, Option<Profile>)>, String> {
    let mut out: Vec<(String, String, Option<Profile>)> = Vec::new();
    let from_table = |role: &str| -> Result<Option<Profile>, String> {
        let Some(p) = profile else { return Ok(None) };
        match p
            .hosts
            .iter()
            .find(|(r, _)| r == role)
            .and_then(|(_, h)| h.profile.clone())
        {
            Some(path) => Profile::load(&path)
                .map(Some)
                .map_err(|e| format!("[hosts] {role}: {e}")),
            None => Ok(None),
        }
    };
    if !cli.on.is_empty() {
        if matches!(cli.cmd, Cmd::Snapshots) {
            return Err("snapshots lists one host's store: use --ssh HOST".into());
        }
        for spec in &cli.on {
            let (role, host) = remote::parse_on(spec)?;
            if out.iter().any(|(r, _, _)| *r == role) {
                return Err(format!("--on: role `{role}` given twice"));
            }
            let prof = from_table(&role)?;
            out.push((role, host, prof));
        }
        return Ok(out);
    }
    if matches!(cli.cmd, Cmd::Snapshots) {
        return Ok(out);
    }
    if let Some(p) = profile {
        for (role, spec) in &p.hosts {
            let prof = from_table(role)?;
            out.push((role.clone(), spec.host.clone(), prof));
        }
    }
    Ok(out)
}

/// The arguments a remote xtune gets: the same command, profile on stdin.
fn forward_args(cli: &Cli, json: bool, profile: Option<&Profile>) -> Vec<String> {
    let mut a: Vec<String> = Vec::new();
    match &cli.cmd {
        Cmd::Apply { dry_run, .. } => {
            a.extend(["apply".into(), "-".into()]);
            if *dry_run {
                a.push("--dry-run".into());
            }
        }
        Cmd::Verify { settle, .. } => {
            a.extend(["verify".into(), "-".into()]);
            if let Some(s) = settle {
                a.extend(["--settle".into(), s.clone()]);
            }
        }
        Cmd::Diff { .. } => a.extend(["diff".into(), "-".into()]),
        Cmd::Rollback { snapshot } => {
            a.push("rollback".into());
            a.extend(snapshot.iter().cloned());
        }
        Cmd::Snapshots => a.push("snapshots".into()),
        Cmd::Observe {
            for_duration,
            interval,
            process,
        } => {
            a.extend([
                "observe".into(),
                "--for".into(),
                format!("{}ms", for_duration.as_millis()),
                "--interval".into(),
                format!("{}ms", interval.as_millis()),
            ]);
            match process {
                Some(xload_probe::watch::ProcessSel::Pid(p)) => {
                    a.extend(["--process".into(), p.to_string()])
                }
                Some(xload_probe::watch::ProcessSel::Name(n)) => {
                    a.extend(["--process".into(), n.clone()])
                }
                None => {}
            }
        }
        Cmd::Export { .. } => {}
    }
    if let Some(n) = &cli.netns {
        a.extend(["--netns".into(), n.clone()]);
    }
    if cli.skip_global {
        a.push("--skip-global".into());
    }
    if let Some(d) = &cli.state_dir {
        a.extend(["--state-dir".into(), d.to_string_lossy().into_owned()]);
    }
    if let Some(d) = &cli.root {
        a.extend(["--root".into(), d.to_string_lossy().into_owned()]);
    }
    if json {
        a.push("--json".into());
    }
    if let Some(p) = profile {
        a.extend(["--profile-label".into(), p.name.clone()]);
    }
    a
}

fn multi(
    cli: &Cli,
    profile: Option<&Profile>,
    roles: Vec<(String, String, Option<Profile>)>,
) -> i32 {
    let jobs: Vec<RemoteJob> = roles
        .into_iter()
        .map(|(role, host, role_profile)| {
            let p = role_profile.as_ref().or(profile);
            RemoteJob {
                role,
                host,
                args: forward_args(cli, true, p),
                stdin: p.map(Profile::to_toml_string),
            }
        })
        .collect();
    let combined = remote::run_many(&jobs);
    if cli.json {
        outln!(
            "{}",
            serde_json::to_string_pretty(&combined).unwrap_or_default()
        );
    } else {
        outp!("{}", combined.render_text());
    }
    combined.exit_code
}

/// `xtune snapshots`: the store's listing.
/// `xtune snapshots`: exit 1 when a file of the store cannot be read (it
/// may be the snapshot a rollback needs), else 0.
fn snapshots(site: &Site, json: bool) -> i32 {
    let (snaps, errors) = site.store.list();
    let code = i32::from(!errors.is_empty());
    if json {
        let listing = serde_json::json!({
            "schema": "xtune-snapshots/1",
            "state_dir": site.store.dir().display().to_string(),
            "snapshots": snaps
                .iter()
                .map(|s| {
                    serde_json::json!({
                        "id": s.id, "created_unix_ms": s.created_unix_ms, "target": s.target,
                        "host": s.hostname, "profile": s.profile, "knobs": s.entries.len(),
                        "state": s.state, "fixed_by_kernel": s.fixed_by_kernel,
                        "earlier_boot": site.earlier_boot(s),
                    })
                })
                .collect::<Vec<_>>(),
            "errors": errors.iter().map(|e| e.to_string()).collect::<Vec<_>>(),
        });
        outln!(
            "{}",
            serde_json::to_string_pretty(&listing).unwrap_or_default()
        );
    } else {
        if snaps.is_empty() && errors.is_empty() {
            outln!("no snapshots in {}", site.store.dir().display());
        } else if !snaps.is_empty() {
            outln!(
                "{:<36}  {:<20}  {:<16}  {:<14}  {:>5}  STATE",
                "ID",
                "CREATED",
                "TARGET",
                "PROFILE",
                "KNOBS"
            );
            for s in &snaps {
                let mut state = serde_json::to_value(s.state)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default();
                if site.earlier_boot(s) {
                    state.push_str(" (earlier boot)");
                }
                outln!(
                    "{:<36}  {:<20}  {:<16}  {:<14}  {:>5}  {state}",
                    s.id,
                    human_time(s.created_unix_ms),
                    s.target,
                    s.profile,
                    s.entries.len()
                );
            }
        }
        if !errors.is_empty() {
            outln!(
                "{} unreadable file(s) in {}: named on stderr; a rollback of their target stops at them",
                errors.len(),
                site.store.dir().display()
            );
        }
        for e in &errors {
            eprintln!("xtune: {e}");
        }
    }
    code
}

fn export(cli: &Cli, profile: &str, sysctl_d: bool, output: Option<&Path>) -> i32 {
    if cli.ssh.is_some() || !cli.on.is_empty() || cli.netns.is_some() {
        return usage_error(
            cli,
            "export runs locally and writes a file; --ssh, --on and --netns do not apply",
        );
    }
    if !sysctl_d {
        return usage_error(cli, "export needs a format: --sysctl-d or --systemd");
    }
    if cli.json {
        // It writes a sysctl.d file, not a report: --json was ignored.
        return usage_error(
            cli,
            "export writes a sysctl.d file, not a report: leave out --json",
        );
    }
    let p = match load_profile(profile, cli.profile_label.as_deref()) {
        Ok(p) => p,
        Err(e) => return usage_error(cli, &e),
    };
    let text = xtune::export::sysctl_d(&p);
    match output {
        None => {
            outp!("{text}");
            0
        }
        Some(path) => match xtune::fs::write_atomic(path, text.as_bytes(), 0o644) {
            Ok(()) => {
                eprintln!("xtune: wrote {}", path.display());
                0
            }
            Err(e) => {
                eprintln!("xtune: writing {}: {e}", path.display());
                1
            }
        },
    }
}

/// `export --systemd`: the profile, unit and udev rule under `--root` (or /).
fn export_systemd(cli: &Cli, profile: &str, enable: bool, output: bool) -> i32 {
    if cli.ssh.is_some() || !cli.on.is_empty() || cli.netns.is_some() {
        return usage_error(
            cli,
            "export runs locally and writes files; --ssh, --on and --netns do not apply",
        );
    }
    if output || cli.json {
        return usage_error(
            cli,
            "export --systemd writes its files below / (or --root DIR): leave out -o and --json",
        );
    }
    let p = match load_profile(profile, cli.profile_label.as_deref()) {
        Ok(p) => p,
        Err(e) => return usage_error(cli, &e),
    };
    if profile == "-" && cli.profile_label.is_none() {
        return usage_error(
            cli,
            "export --systemd names its files after the profile: give a file, not stdin",
        );
    }
    let exe = match std::env::current_exe() {
        Ok(e) => e.to_string_lossy().into_owned(),
        Err(e) => {
            eprintln!("xtune: cannot find its own path for the unit: {e}");
            return 1;
        }
    };
    let files = xtune::export::systemd(&p, &exe);
    let root = cli.root.clone().unwrap_or_else(|| PathBuf::from("/"));
    let fs = RootFs::new(&root);
    let mut all = vec![&files.profile, &files.unit];
    all.extend(files.udev.as_ref());
    for (path, text) in all {
        let target = fs.resolve(path);
        if let Some(dir) = target.parent() {
            if let Err(e) = std::fs::create_dir_all(dir) {
                eprintln!("xtune: creating {}: {e}", dir.display());
                return 1;
            }
        }
        if let Err(e) = xtune::fs::write_atomic(&target, text.as_bytes(), 0o644) {
            eprintln!("xtune: writing {}: {e}", target.display());
            return 1;
        }
        eprintln!("xtune: wrote {}", target.display());
    }
    let unit = files.unit_name().to_string();
    if !enable {
        eprintln!(
            "xtune: not enabled; to apply at every boot: systemctl daemon-reload && systemctl enable {unit}{}",
            if files.udev.is_some() {
                " (and udevadm control --reload for the rule)"
            } else {
                ""
            }
        );
        return 0;
    }
    let mut cmd = std::process::Command::new("systemctl");
    if cli.root.is_some() {
        cmd.arg(format!("--root={}", root.display()));
    }
    match cmd.args(["enable", &unit]).status() {
        Ok(s) if s.success() => {
            eprintln!("xtune: enabled {unit}");
            0
        }
        Ok(s) => {
            eprintln!("xtune: systemctl enable {unit} failed ({s})");
            1
        }
        Err(e) => {
            eprintln!("xtune: running systemctl: {e}");
            1
        }
    }
}

/// The target of a local run, as snapshots and reports name it.
fn local_target(cli: &Cli) -> String {
    cli.netns
        .as_ref()
        .map(|n| format!("netns:{n}"))
        .unwrap_or_else(|| "host".into())
}

/// Bad arguments or profile: exit 2, nothing read or written on the host.
fn usage_error(cli: &Cli, msg: &str) -> i32 {
    eprintln!("xtune: {msg}");
    if cli.json {
        // The target the command was aimed at, as in every other report.
        let target = match &cli.ssh {
            Some(h) if cli.netns.is_none() => format!("ssh:{h}"),
            None if cli.netns.is_none() && !cli.on.is_empty() => "-".into(),
            _ => local_target(cli),
        };
        let mut r = Report::new(cli.cmd.name(), &hostname(), &target);
        r.ok = false;
        r.exit_code = 2;
        r.error = Some(msg.to_string());
        outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
    }
    2
}

/// Prints the report (JSON on stdout with --json; else text on stdout and
/// the error on stderr) and returns its exit code.
fn emit(json: bool, mut r: Report) -> i32 {
    if json {
        outln!("{}", serde_json::to_string_pretty(&r).unwrap_or_default());
        if let Some(e) = &r.error {
            eprintln!("xtune: {e}");
        }
    } else {
        let err = r.error.take();
        outp!("{}", r.render_text());
        if let Some(e) = err {
            eprintln!("xtune: {e}");
        }
    }
    r.exit_code
}

fn hostname() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most buf.len() bytes into buf, which lives for the call.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    if rc != 0 {
        return "unknown".into();
    }
    let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
    String::from_utf8_lossy(&buf[..end]).into_owned()
}

/// `--settle`: `500ms`, `5s`, `2m`, `1h`, or bare seconds, at most 24 h.
fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = xload_sys::duration::parse_duration_or_seconds(s)
        .map_err(|e| format!("--settle `{s}`: {e} (e.g. 5s, 500ms, 1m)"))?;
    if d > Duration::from_secs(86_400) {
        return Err(format!("--settle `{s}`: must be between 0 and 24h"));
    }
    Ok(d)
}
