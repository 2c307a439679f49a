//! The commands on one target (diff, apply, verify, rollback) as functions
//! that return a [`Report`]: no printing, no exit (the report carries its
//! exit code). The binary parses arguments, builds a [`Site`], calls one of
//! these and renders what comes back; the rules of each command (what counts
//! as drift, which snapshot may be rolled back) live here, tested on a fake host.

use std::collections::BTreeSet;
use std::time::Duration;

use crate::agents::Agents;
use crate::apply::{self, ApplyMeta, Services};
use crate::fs::Fs;
use crate::host::Topology;
use crate::knob::{build, PlanError, TargetCtx};
use crate::plan::{observe, Plan};
use crate::profile::Profile;
use crate::report::{Report, Verdict};
use crate::snapshot::{Snapshot, State, Store};

/// Where a local command runs: the door to the host, irqbalance control, the
/// snapshot store, and the facts that name the target. The binary builds it
/// after entering a network namespace, so every field describes the target.
pub struct Site<'a> {
    /// Reads and writes of the target's kernel files.
    pub fs: &'a dyn Fs,
    /// Stops and starts irqbalance.
    pub services: &'a dyn Services,
    /// The snapshot store.
    pub store: &'a Store,
    /// `host` or `netns:NAME`, as snapshots and reports name it.
    pub target: String,
    /// Host name for the report.
    pub hostname: String,
    /// The running kernel's boot id (None where it cannot be read).
    pub boot_id: Option<String>,
    /// A namespace target's cookie ([`crate::netns::cookie`]); None for the host.
    pub netns_cookie: Option<u64>,
}

impl Site<'_> {
    /// An empty report of `command` on this target.
    pub fn report(&self, command: &str, p: Option<&Profile>) -> Report {
        let mut r = Report::new(command, &self.hostname, &self.target);
        r.profile = p.map(|p| p.name.clone());
        r
    }

    /// A command refused before it wrote anything: exit `code`, the error
    /// saying nothing was written.
    pub fn refused(&self, command: &str, p: Option<&Profile>, msg: &str, code: i32) -> Report {
        let mut r = self.report(command, p);
        r.ok = false;
        r.exit_code = code;
        r.error = Some(format!("{msg}; nothing was written"));
        r
    }

    /// The snapshot was taken before the running kernel booted (both boot
    /// ids known and different).
    pub fn earlier_boot(&self, snap: &Snapshot) -> bool {
        matches!((&snap.boot_id, &self.boot_id), (Some(then), Some(now)) if then != now)
    }
}

/// `/proc/sys/kernel/random/boot_id`, new at every boot.
pub fn read_boot_id(fs: &dyn Fs) -> Option<String> {
    fs.read("/proc/sys/kernel/random/boot_id")
        .ok()
        .map(|s| s.trim().to_string())
        .filter(|s| !s.is_empty())
}

/// Expands the profile for this target and reads every knob.
pub fn plan(site: &Site, p: &Profile, tctx: &TargetCtx) -> Result<Plan, PlanError> {
    let topo = Topology::read(site.fs, p);
    let b = build(p, &topo, tctx)?;
    let current = observe(site.fs, &b.desired);
    Ok(Plan::from_parts(b.desired, current, b.notes))
}

/// `xtune diff`, and `xtune apply --dry-run` with `dry_run`: current ->
/// wanted for every knob, nothing written.
pub fn diff(site: &Site, p: &Profile, tctx: &TargetCtx, dry_run: bool) -> Report {
    let command = if dry_run { "apply" } else { "diff" };
    let plan = match plan(site, p, tctx) {
        Ok(plan) => plan,
        Err(e) => return site.refused(command, Some(p), &e.to_string(), e.exit_code()),
    };
    let mut r = site.report(command, Some(p));
    r.dry_run = dry_run;
    r.knobs = plan
        .items
        .iter()
        .map(|item| item.line(item.verdict(Verdict::Change)))
        .collect();
    r.notes = plan.notes;
    r.count();
    r
}

/// `xtune apply`: snapshot, then write (see [`apply::apply`]). Call it
/// under the store's lock.
pub fn apply(site: &Site, p: &Profile, tctx: &TargetCtx) -> Report {
    let plan = match plan(site, p, tctx) {
        Ok(plan) => plan,
        Err(e) => return site.refused("apply", Some(p), &e.to_string(), e.exit_code()),
    };
    // A rollback after this apply would stop on an unreadable snapshot
    // that may be this target's: refuse before writing anything.
    if let Some(e) = site.store.unreadable_for(&site.target) {
        let msg = format!(
            "{e}; it may be a snapshot of {}, and a rollback after this apply would stop on it: move it out of {} first (nothing was written)",
            site.target,
            site.store.dir().display()
        );
        return site.refused("apply", Some(p), &msg, 1);
    }
    let meta = ApplyMeta {
        target: site.target.clone(),
        hostname: site.hostname.clone(),
        profile: p.name.clone(),
        netns_cookie: site.netns_cookie,
        boot_id: site.boot_id.clone(),
    };
    let pending = pending_notes(site);
    let mut r = site.report("apply", Some(p));
    r.notes = plan.notes.clone();
    match apply::apply(site.fs, site.services, site.store, &plan, &meta) {
        Ok(out) => {
            r.exit_code = out.exit_code();
            r.ok = out.error.is_none();
            r.snapshot = out.snapshot;
            r.knobs = out.lines;
            r.error = out.error;
            r.notes.extend(out.notes);
            r.notes.extend(pending);
            let fixed = r.knobs.iter().any(|k| k.verdict == Verdict::FixedByKernel);
            if r.snapshot.is_none() && r.ok && !fixed {
                r.notes
                    .push("nothing to change: every knob already has its wanted meaning".into());
            }
        }
        Err(e) => {
            r.ok = false;
            r.exit_code = 1;
            r.error = Some(e.to_string());
            r.notes.extend(pending);
        }
    }
    r.count();
    r
}

/// `xtune verify`: every knob judged by meaning; exit 3 on drift. With
/// `settle`, reads again after that long and reports the second reading.
pub fn verify(site: &Site, p: &Profile, tctx: &TargetCtx, settle: Option<Duration>) -> Report {
    let topo = Topology::read(site.fs, p);
    let b = match build(p, &topo, tctx) {
        Ok(b) => b,
        Err(e) => return site.refused("verify", Some(p), &e.to_string(), e.exit_code()),
    };
    let read = || observe(site.fs, &b.desired);
    let first = Plan::from_parts(b.desired.clone(), read(), b.notes.clone());
    let last = match settle {
        Some(d) => {
            std::thread::sleep(d);
            Plan::from_parts(b.desired.clone(), read(), b.notes.clone())
        }
        None => first.clone(),
    };
    let mut r = site.report("verify", Some(p));
    r.settle_s = settle.map(|d| d.as_secs_f64());
    let judged = Readings {
        first: &first,
        settle,
        fixed: fixed_by_kernel(site),
        agents: Agents::scan(site.fs),
    };
    judged.judge(last, &mut r);
    r.notes.extend(pending_notes(site));
    r.count();
    let drift = r
        .knobs
        .iter()
        .filter(|k| k.verdict == Verdict::Drift)
        .count();
    r.ok = drift == 0;
    r.exit_code = if drift == 0 { 0 } else { 3 };
    r
}

/// What verify judges the last reading with.
struct Readings<'a> {
    /// The reading before the settle window (the last one without one).
    first: &'a Plan,
    /// The settle window.
    settle: Option<Duration>,
    /// Knobs the kernel keeps where it put them (see [`fixed_by_kernel`]).
    fixed: BTreeSet<String>,
    /// Agents that may have rewritten a drifted knob.
    agents: Agents,
}

impl Readings<'_> {
    /// One line per knob of `last` into `r`, and its notes.
    fn judge(&self, last: Plan, r: &mut Report) {
        for (i, item) in last.items.iter().enumerate() {
            let otherwise = if self.fixed.contains(&item.desired.knob) {
                Verdict::FixedByKernel
            } else {
                Verdict::Drift
            };
            let verdict = item.verdict(otherwise);
            let mut line = item.line(verdict);
            if verdict == Verdict::Drift {
                if let (Some(d), Some(before)) = (self.settle, self.first.items.get(i)) {
                    if before.cmp.matches {
                        let was = format!(
                            "was {} before the {} settle window",
                            before.cmp.actual,
                            fmt_duration(d)
                        );
                        line.reason = if line.reason.is_empty() {
                            was
                        } else {
                            format!("{was}; {}", line.reason)
                        };
                    }
                }
                line.agent = self.agents.explain(&item.desired.knob);
            }
            if verdict == Verdict::FixedByKernel {
                line.reason = "managed interrupt: the kernel refused to move it at apply".into();
            }
            r.knobs.push(line);
        }
        r.notes = last.notes;
    }
}

/// IRQs apply found fixed by the kernel (managed) are not drift: those a
/// snapshot of this target still in force recorded (applied, or undone with
/// nothing to restore). Not rolled-back ones, nor ones from an earlier boot:
/// IRQ numbers change across reboots and driver reloads.
fn fixed_by_kernel(site: &Site) -> BTreeSet<String> {
    let (snaps, _) = site.store.list();
    snaps
        .iter()
        .filter(|s| s.target == site.target && s.state != State::RolledBack)
        .filter(|s| !site.earlier_boot(s))
        .flat_map(|s| s.fixed_by_kernel.iter().cloned())
        .collect()
}

/// A note for each snapshot of this target left pending: an apply that
/// did not finish (killed or crashed between its writes) may have left the
/// target half-tuned; `xtune rollback` restores it. And one for each
/// snapshot still in force from before the last reboot, which reset the
/// kernel values it saved: `xtune rollback` leaves those to the boot.
pub fn pending_notes(site: &Site) -> Vec<String> {
    let (snaps, _) = site.store.list();
    let mine = || {
        snaps
            .iter()
            .filter(|s| s.target == site.target && s.state.restorable())
    };
    let pending = mine()
        .filter(|s| s.state == State::Pending && !site.earlier_boot(s))
        .map(|s| {
            format!(
                "snapshot {} (profile {}) is still pending: an apply that did not finish (killed or crashed mid-write), or one running now; {} may be half-tuned: `xtune rollback` restores it",
                s.id, s.profile, site.target
            )
        });
    let rebooted = mine().filter(|s| site.earlier_boot(s)).map(|s| {
        format!(
            "snapshot {} (profile {}) was taken before the host last booted: the reboot reset the kernel values it saved; `xtune rollback` leaves those as the boot set them and restores only its irqbalance config file",
            s.id, s.profile
        )
    });
    pending.chain(rebooted).collect()
}

/// `xtune rollback [ID]`: restores the newest snapshot of this target still
/// in force, or the one named. Call it under the store's lock.
pub fn rollback(site: &Site, id: Option<&str>) -> Report {
    let snap = match pick_snapshot(site, id) {
        Ok(s) => s,
        Err((msg, code)) => return site.refused("rollback", None, &msg, code),
    };
    let rebooted = site.earlier_boot(&snap);
    if !rebooted {
        if let Err(msg) = same_namespace(site, &snap) {
            return site.refused("rollback", None, &msg, 1);
        }
    }
    let mut r = site.report("rollback", None);
    r.profile = Some(snap.profile.clone());
    r.snapshot = Some(snap.id.clone());
    if rebooted {
        r.notes.push(format!(
            "the host has rebooted since snapshot {} was taken (boot id {}, now {}): the reboot reset the kernel values it saved \
             and may have renumbered its IRQs, so they are left as the boot set them, as is whether irqbalance runs; its irqbalance config file is restored",
            snap.id,
            snap.boot_id.as_deref().unwrap_or("?"),
            site.boot_id.as_deref().unwrap_or("?"),
        ));
    }
    let (lines, ok) = apply::rollback(site.fs, site.services, site.store, snap, rebooted);
    r.knobs = lines;
    r.ok = ok;
    r.exit_code = i32::from(!ok);
    if !ok {
        r.error = Some("some knobs could not be restored (see UNDO FAILED lines)".into());
    }
    r.count();
    r
}

/// The snapshot `xtune rollback [ID]` restores, or why none may be (and
/// the exit code): one named must be of this target and have no newer
/// snapshot in force above it (those saved the values it wrote as their
/// originals); without a name, the newest in force of this target.
fn pick_snapshot(site: &Site, id: Option<&str>) -> Result<Snapshot, (String, i32)> {
    let Some(id) = id else {
        return site
            .store
            .latest_for(&site.target)
            .map_err(|e| (e.to_string(), 1));
    };
    let s = site.store.load(id).map_err(|e| (e.to_string(), 2))?;
    if s.target != site.target {
        let hint = s
            .target
            .strip_prefix("netns:")
            .map(|n| format!("add --netns {n}"))
            .unwrap_or_else(|| "run without --netns".into());
        let msg = format!(
            "snapshot {id} was taken on {}, not {}: {hint}",
            s.target, site.target
        );
        return Err((msg, 2));
    }
    let newer = site.store.newer_restorable(&s);
    if !newer.is_empty() {
        let ids: Vec<&str> = newer.iter().map(|n| n.id.as_str()).collect();
        let msg = format!(
            "snapshot {} has newer applied snapshots on {}: {}; roll those back first (`xtune rollback` takes the newest), since they saved the values {} wrote as their originals",
            s.id,
            s.target,
            ids.join(", "),
            s.id
        );
        return Err((msg, 2));
    }
    Ok(s)
}

/// A namespace deleted and created again under the same name is another
/// one: what the snapshot saved went with the old one, and writing it into
/// the new one would change values nobody tuned. Refused, nothing written,
/// the snapshot kept: a physical NIC moved back to the host when the old
/// namespace went keeps its tuned values, and this snapshot holds their
/// originals.
fn same_namespace(site: &Site, snap: &Snapshot) -> Result<(), String> {
    match (snap.netns_cookie, site.netns_cookie) {
        (Some(then), Some(now)) if then != now => Err(format!(
            "{} was deleted and created again since snapshot {} (namespace cookie {then}, now {now}): \
             its originals belong to the namespace that is gone, not to this one; nothing written. \
             Move {} out of the state dir to go past it",
            site.target,
            snap.id,
            site.store.dir().join(format!("{}.json", snap.id)).display()
        )),
        _ => Ok(()),
    }
}

/// `5s`, or `1200ms` when not whole seconds.
fn fmt_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RootFs;
    use crate::host::ProcInfo;
    use crate::report::KnobLine;
    use crate::snapshot::{Entry, Original, SCHEMA};
    use crate::testutil::{fake_host, TempDir};

    struct NoServices;
    impl Services for NoServices {
        fn stop_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
            Ok(())
        }
        fn start_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
            Ok(())
        }
    }

    const SOMAXCONN: &str = "/proc/sys/net/core/somaxconn";
    const WANT_65535: &str = "[sysctl]\n\"net.core.somaxconn\" = 65535\n";

    /// A fake host with somaxconn at 4096, its root fs and a store in it.
    fn host(tag: &str) -> (TempDir, RootFs, Store) {
        let dir = fake_host(tag, 2, &[("net.core.somaxconn", "4096")], &[]);
        let fs = RootFs::new(dir.path());
        let store = Store::new(dir.path().join("state"));
        (dir, fs, store)
    }

    fn site<'a>(fs: &'a RootFs, store: &'a Store) -> Site<'a> {
        Site {
            fs,
            services: &NoServices,
            store,
            target: "host".into(),
            hostname: "test".into(),
            boot_id: Some("boot-now".into()),
            netns_cookie: None,
        }
    }

    fn profile(text: &str, dir: &TempDir) -> Profile {
        Profile::from_text(text, "p", dir.path()).unwrap()
    }

    /// A snapshot saving somaxconn at `original`, saved in the store.
    fn saved(store: &Store, id: &str, target: &str, state: State, seq: u64) -> Snapshot {
        let snap = Snapshot {
            schema: SCHEMA.into(),
            id: id.into(),
            created_unix_ms: 1_000 + seq,
            target: target.into(),
            hostname: "test".into(),
            profile: "p".into(),
            entries: vec![Entry {
                knob: "sysctl:net.core.somaxconn".into(),
                stage: crate::knob::Stage::Sysctl,
                original: Original::File {
                    path: SOMAXCONN.into(),
                    raw: "128\n".into(),
                },
                irq_actions: Vec::new(),
            }],
            fixed_by_kernel: Vec::new(),
            state,
            seq,
            netns_cookie: None,
            boot_id: Some("boot-now".into()),
            rolled_back_unix_ms: None,
        };
        store.save(&snap).unwrap();
        snap
    }

    fn line<'r>(r: &'r Report, knob: &str) -> &'r KnobLine {
        r.knobs.iter().find(|l| l.knob == knob).unwrap()
    }

    #[test]
    fn verify_reports_drift_on_changed_somaxconn() {
        let (dir, fs, store) = host("cmd-drift");
        let p = profile(WANT_65535, &dir);
        let r = verify(&site(&fs, &store), &p, &TargetCtx::default(), None);
        assert_eq!(r.exit_code, 3);
        assert!(!r.ok);
        assert_eq!(
            line(&r, "sysctl:net.core.somaxconn").verdict,
            Verdict::Drift
        );
        assert_eq!(r.counts.get("drift"), Some(&1));
        dir.put(SOMAXCONN, "65535\n");
        let r = verify(&site(&fs, &store), &p, &TargetCtx::default(), None);
        assert_eq!((r.exit_code, r.ok), (0, true), "{r:?}");
        assert_eq!(line(&r, "sysctl:net.core.somaxconn").verdict, Verdict::Ok);
    }

    #[test]
    fn a_drifted_knob_names_the_agent_that_sets_it() {
        let (dir, fs, store) = host("cmd-agent");
        dir.put("/etc/sysctl.d/99-site.conf", "net.core.somaxconn = 4096\n");
        let p = profile(WANT_65535, &dir);
        let r = verify(&site(&fs, &store), &p, &TargetCtx::default(), None);
        let agent = line(&r, "sysctl:net.core.somaxconn").agent.clone();
        assert!(
            agent.is_some_and(|a| a.contains("/etc/sysctl.d/99-site.conf:1")),
            "{r:?}"
        );
    }

    #[test]
    fn advice_is_advice_in_every_command_even_when_met() {
        // xtune's own limit meets nofile = 1; the load generator's may not.
        let (dir, fs, store) = host("cmd-advice");
        let p = profile(&format!("{WANT_65535}[limits]\nnofile = 1\n"), &dir);
        let s = site(&fs, &store);
        let tctx = TargetCtx::default();
        for r in [
            diff(&s, &p, &tctx, false),
            diff(&s, &p, &tctx, true),
            apply(&s, &p, &tctx),
            verify(&s, &p, &tctx, None),
        ] {
            assert_eq!(line(&r, "limits:nofile").verdict, Verdict::Advice, "{r:?}");
        }
    }

    #[test]
    fn a_managed_irq_is_fixed_by_kernel_only_while_its_snapshot_is_in_force() {
        // The rule goes by knob identity: a knob a snapshot of this target
        // recorded as kept by the kernel is not drift.
        let (dir, fs, store) = host("cmd-fixed");
        let p = profile(WANT_65535, &dir);
        let verdict = |s: &Site| {
            let r = verify(s, &p, &TargetCtx::default(), None);
            line(&r, "sysctl:net.core.somaxconn").clone()
        };
        let mut snap = saved(&store, "a", "host", State::Undone, 1);
        snap.fixed_by_kernel = vec!["sysctl:net.core.somaxconn".into()];
        store.save(&snap).unwrap();
        let l = verdict(&site(&fs, &store));
        assert_eq!(l.verdict, Verdict::FixedByKernel);
        assert_eq!(
            l.reason,
            "managed interrupt: the kernel refused to move it at apply"
        );
        let mut other = site(&fs, &store);
        other.boot_id = Some("boot-next".into());
        assert_eq!(verdict(&other).verdict, Verdict::Drift, "earlier boot");
        other = site(&fs, &store);
        other.target = "netns:lab".into();
        assert_eq!(verdict(&other).verdict, Verdict::Drift, "other target");
        snap.state = State::RolledBack;
        store.save(&snap).unwrap();
        assert_eq!(verdict(&site(&fs, &store)).verdict, Verdict::Drift);
    }

    #[test]
    fn settle_names_the_value_a_drifted_knob_had_before_the_window() {
        let (dir, fs, store) = host("cmd-settle");
        dir.put(SOMAXCONN, "65535\n");
        let p = profile(WANT_65535, &dir);
        let s = site(&fs, &store);
        let first = plan(&s, &p, &TargetCtx::default()).unwrap();
        dir.put(SOMAXCONN, "21\n");
        let last = plan(&s, &p, &TargetCtx::default()).unwrap();
        let readings = Readings {
            first: &first,
            settle: Some(Duration::from_millis(1200)),
            fixed: BTreeSet::new(),
            agents: Agents::default(),
        };
        let mut r = s.report("verify", Some(&p));
        readings.judge(last, &mut r);
        let l = line(&r, "sysctl:net.core.somaxconn");
        assert_eq!(l.verdict, Verdict::Drift);
        assert_eq!(l.reason, "was 65535 before the 1200ms settle window");
    }

    #[test]
    fn pending_and_pre_reboot_snapshots_of_this_target_get_notes() {
        let (_dir, fs, store) = host("cmd-pending");
        saved(&store, "pending", "host", State::Pending, 1);
        let mut old = saved(&store, "old-boot", "host", State::Applied, 2);
        old.boot_id = Some("boot-before".into());
        store.save(&old).unwrap();
        saved(&store, "done", "host", State::RolledBack, 3);
        saved(&store, "elsewhere", "netns:lab", State::Pending, 4);
        let notes = pending_notes(&site(&fs, &store));
        assert_eq!(notes.len(), 2, "{notes:?}");
        assert!(notes[0].starts_with("snapshot pending (profile p) is still pending"));
        assert!(notes[1]
            .starts_with("snapshot old-boot (profile p) was taken before the host last booted"));
    }

    #[test]
    fn apply_then_verify_then_rollback_round_trip() {
        let (dir, fs, store) = host("cmd-round");
        let p = profile(WANT_65535, &dir);
        let s = site(&fs, &store);
        let tctx = TargetCtx::default();
        let d = diff(&s, &p, &tctx, true);
        assert_eq!((d.command.as_str(), d.dry_run), ("apply", true));
        assert_eq!(
            line(&d, "sysctl:net.core.somaxconn").verdict,
            Verdict::Change
        );
        assert_eq!(dir.get(SOMAXCONN), "4096\n", "a dry run writes nothing");
        let r = apply(&s, &p, &tctx);
        assert_eq!(r.exit_code, 0, "{r:?}");
        assert_eq!(dir.get(SOMAXCONN), "65535\n");
        let id = r.snapshot.clone().unwrap();
        assert_eq!(verify(&s, &p, &tctx, None).exit_code, 0);
        let again = apply(&s, &p, &tctx);
        assert_eq!(again.snapshot, None);
        assert!(again
            .notes
            .iter()
            .any(|n| n.starts_with("nothing to change")));
        let r = rollback(&s, None);
        assert_eq!((r.exit_code, r.snapshot.as_deref()), (0, Some(id.as_str())));
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        assert_eq!(store.load(&id).unwrap().state, State::RolledBack);
        assert_eq!(rollback(&s, None).exit_code, 1, "nothing left to roll back");
    }

    #[test]
    fn a_plan_error_is_refused_with_its_exit_code_and_nothing_written() {
        let (dir, fs, store) = host("cmd-plan");
        let p = profile("[sysctl]\n\"net.core.nope\" = 1\n", &dir);
        let r = apply(&site(&fs, &store), &p, &TargetCtx::default());
        assert_eq!(r.exit_code, 1);
        let err = r.error.unwrap();
        assert!(err.contains("does not exist on this kernel"), "{err}");
        assert!(err.ends_with("; nothing was written"), "{err}");
        assert!(store.list().0.is_empty());
    }

    #[test]
    fn apply_stops_at_an_unreadable_snapshot_that_may_be_this_targets() {
        let (dir, fs, store) = host("cmd-corrupt");
        dir.put("/state/20260301-142501-123-host.json", "{not json");
        let p = profile(WANT_65535, &dir);
        let r = apply(&site(&fs, &store), &p, &TargetCtx::default());
        assert_eq!(r.exit_code, 1);
        assert!(r.error.unwrap().contains("move it out of"));
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
    }

    #[test]
    fn rollback_of_another_targets_snapshot_names_the_flag_to_add() {
        let (dir, fs, store) = host("cmd-target");
        saved(&store, "lab", "netns:lab", State::Applied, 1);
        let r = rollback(&site(&fs, &store), Some("lab"));
        assert_eq!(r.exit_code, 2);
        let err = r.error.unwrap();
        assert!(
            err.contains("taken on netns:lab, not host: add --netns lab"),
            "{err}"
        );
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        let r = rollback(&site(&fs, &store), Some("nope"));
        assert_eq!(r.exit_code, 2, "an unknown id is a bad argument");
    }

    #[test]
    fn rollback_by_id_under_a_newer_snapshot_in_force_is_refused() {
        let (dir, fs, store) = host("cmd-stack");
        saved(&store, "older", "host", State::Applied, 1);
        saved(&store, "newer", "host", State::Applied, 2);
        let r = rollback(&site(&fs, &store), Some("older"));
        assert_eq!(r.exit_code, 2);
        assert!(r
            .error
            .unwrap()
            .contains("newer applied snapshots on host: newer"));
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        // The newest first, then the older one may go.
        assert_eq!(rollback(&site(&fs, &store), Some("newer")).exit_code, 0);
        assert_eq!(rollback(&site(&fs, &store), Some("older")).exit_code, 0);
        assert_eq!(dir.get(SOMAXCONN), "128\n");
    }

    #[test]
    fn rollback_into_a_recreated_namespace_writes_nothing() {
        let (dir, fs, store) = host("cmd-cookie");
        let mut snap = saved(&store, "lab", "netns:lab", State::Applied, 1);
        snap.netns_cookie = Some(7);
        store.save(&snap).unwrap();
        let mut s = site(&fs, &store);
        s.target = "netns:lab".into();
        s.netns_cookie = Some(8);
        let r = rollback(&s, None);
        assert_eq!(r.exit_code, 1);
        assert!(r.error.unwrap().contains("namespace cookie 7, now 8"));
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        assert_eq!(store.load("lab").unwrap().state, State::Applied, "kept");
        // The same namespace: restored.
        s.netns_cookie = Some(7);
        assert_eq!(rollback(&s, None).exit_code, 0);
        assert_eq!(dir.get(SOMAXCONN), "128\n");
    }

    #[test]
    fn rollback_after_a_reboot_leaves_kernel_values_to_the_boot() {
        // Even in a namespace that looks recreated: the reboot explains it.
        let (dir, fs, store) = host("cmd-reboot");
        let mut snap = saved(&store, "lab", "netns:lab", State::Applied, 1);
        snap.netns_cookie = Some(7);
        snap.boot_id = Some("boot-before".into());
        store.save(&snap).unwrap();
        let mut s = site(&fs, &store);
        s.target = "netns:lab".into();
        s.netns_cookie = Some(8);
        let r = rollback(&s, None);
        assert_eq!(r.exit_code, 0, "{r:?}");
        assert!(
            r.notes[0].contains("boot id boot-before, now boot-now"),
            "{r:?}"
        );
        let l = line(&r, "sysctl:net.core.somaxconn");
        assert_eq!(l.verdict, Verdict::NotApplicable);
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        assert_eq!(store.load("lab").unwrap().state, State::RolledBack);
    }

    const RMEM: &str = "/proc/sys/net/ipv4/tcp_rmem";

    /// A fake host with somaxconn at 4096 and tcp_rmem as the kernel prints
    /// it (tabs), its root fs and a store in it.
    fn host_with_rmem(tag: &str) -> (TempDir, RootFs, Store) {
        let dir = fake_host(
            tag,
            2,
            &[
                ("net.core.somaxconn", "4096"),
                ("net.ipv4.tcp_rmem", "4096\t87380\t6291456"),
            ],
            &[],
        );
        let fs = RootFs::new(dir.path());
        let store = Store::new(dir.path().join("state"));
        (dir, fs, store)
    }

    #[test]
    fn verify_judges_a_vector_sysctl_by_meaning_not_by_its_text() {
        let (dir, fs, store) = host_with_rmem("cmd-meaning");
        let p = profile(
            "[sysctl]\n\"net.ipv4.tcp_rmem\" = [4096, 87380, 6291456]\n",
            &dir,
        );
        let s = site(&fs, &store);
        let tctx = TargetCtx::default();
        let r = verify(&s, &p, &tctx, None);
        assert_eq!((r.exit_code, r.ok), (0, true), "tabs vs spaces: {r:?}");
        assert_eq!(line(&r, "sysctl:net.ipv4.tcp_rmem").verdict, Verdict::Ok);
        let d = diff(&s, &p, &tctx, false);
        assert_eq!(line(&d, "sysctl:net.ipv4.tcp_rmem").verdict, Verdict::Ok);
        // One element changed behind xtune's back: drift, exit 3.
        dir.put(RMEM, "4096\t87380\t4194304\n");
        let r = verify(&s, &p, &tctx, None);
        assert_eq!((r.exit_code, r.ok), (3, false), "{r:?}");
        assert_eq!(line(&r, "sysctl:net.ipv4.tcp_rmem").verdict, Verdict::Drift);
        assert_eq!(r.counts.get("drift"), Some(&1));
    }

    #[test]
    fn rollback_restores_the_bytes_each_knob_had_before_apply() {
        let (dir, fs, store) = host_with_rmem("cmd-restore");
        let p = profile(
            &format!("{WANT_65535}\"net.ipv4.tcp_rmem\" = [4096, 131072, 16777216]\n"),
            &dir,
        );
        let s = site(&fs, &store);
        let r = apply(&s, &p, &TargetCtx::default());
        assert_eq!(r.exit_code, 0, "{r:?}");
        assert_eq!(dir.get(SOMAXCONN), "65535\n");
        assert_ne!(dir.get(RMEM), "4096\t87380\t6291456\n");
        let id = r.snapshot.unwrap();
        let r = rollback(&s, Some(&id));
        assert_eq!((r.exit_code, r.ok), (0, true), "{r:?}");
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        assert_eq!(dir.get(RMEM), "4096\t87380\t6291456\n", "tabs and all");
        assert_eq!(
            line(&r, "sysctl:net.ipv4.tcp_rmem").verdict,
            Verdict::Restored
        );
        assert_eq!(r.counts.get("restored"), Some(&2), "{r:?}");
        let r = verify(&s, &p, &TargetCtx::default(), None);
        assert_eq!(r.exit_code, 3, "rolled back: the profile drifts again");
    }

    #[test]
    fn rollback_by_id_of_an_unreadable_snapshot_is_refused_and_writes_nothing() {
        let (dir, fs, store) = host("cmd-unreadable");
        dir.put("/state/20260301-142501-123-host.json", "{not json");
        let s = site(&fs, &store);
        let r = rollback(&s, Some("20260301-142501-123-host"));
        assert_eq!((r.exit_code, r.ok), (2, false), "{r:?}");
        assert!(r.error.unwrap().ends_with("; nothing was written"));
        // Without an id, the newest may be the unreadable one: stop there too.
        saved(&store, "older", "host", State::Applied, 1);
        let r = rollback(&s, None);
        assert_eq!(r.exit_code, 1, "{r:?}");
        assert!(r.error.unwrap().contains("move it out of"));
        assert_eq!(dir.get(SOMAXCONN), "4096\n");
        assert_eq!(store.load("older").unwrap().state, State::Applied);
    }

    #[test]
    fn unmet_advice_neither_fails_verify_nor_is_written() {
        // A nofile far above any limit: advice in every command, counted
        // as advice, never drift, never in a snapshot.
        let (dir, fs, store) = host("cmd-advice-unmet");
        dir.put(SOMAXCONN, "65535\n");
        let p = profile(
            &format!("{WANT_65535}[limits]\nnofile = 1000000000000\n"),
            &dir,
        );
        let s = site(&fs, &store);
        let tctx = TargetCtx::default();
        let r = verify(&s, &p, &tctx, None);
        assert_eq!((r.exit_code, r.ok), (0, true), "{r:?}");
        assert_eq!(line(&r, "limits:nofile").verdict, Verdict::Advice);
        assert_eq!(r.counts.get("advice"), Some(&1));
        assert_eq!(r.counts.get("drift"), None);
        let r = apply(&s, &p, &tctx);
        assert_eq!(
            (r.exit_code, r.snapshot.as_deref()),
            (0, None),
            "nothing to write"
        );
        assert_eq!(line(&r, "limits:nofile").verdict, Verdict::Advice);
        assert!(store.list().0.is_empty());
    }
}
