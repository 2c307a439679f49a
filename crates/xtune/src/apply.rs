//! The applier: snapshot first, then write in stage order, undo on failure;
//! and rollback from a snapshot. The only code that changes the host.

use std::time::{Duration, Instant};

use crate::fs::{trim_value, Fs, FsError};
use crate::host::{irq_actions, irq_of_path, ProcInfo};
use crate::knob::{compare, with_banned_cpulist, Comparison, Current, Stage, Target, Wanted};
use crate::plan::{is_writable, observe_one, Item, Plan};
use crate::report::{KnobLine, Verdict};
use crate::snapshot::{now_ms, Entry, Original, Snapshot, State, Store, SCHEMA};

/// Starting and stopping irqbalance.
pub trait Services {
    /// Stops these irqbalance processes and waits until they are gone.
    fn stop_irqbalance(&self, running: &[ProcInfo]) -> Result<(), String>;
    /// Starts irqbalance again the way it ran before.
    fn start_irqbalance(&self, was: &[ProcInfo]) -> Result<(), String>;
}

/// systemd when the process lives in a unit, else signals and the recorded argv.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemServices;

impl Services for SystemServices {
    fn stop_irqbalance(&self, running: &[ProcInfo]) -> Result<(), String> {
        for p in running {
            if let Some(unit) = &p.unit {
                systemctl("stop", unit)?;
            } else {
                // SAFETY: kill(2) with a pid read from /proc and a valid signal number.
                let rc = unsafe { libc::kill(p.pid as libc::pid_t, libc::SIGTERM) };
                if rc != 0 {
                    let e = std::io::Error::last_os_error();
                    if e.raw_os_error() != Some(libc::ESRCH) {
                        return Err(format!("kill {}: {e}", p.pid));
                    }
                }
            }
        }
        let deadline = Instant::now() + Duration::from_secs(5);
        for p in running {
            let host = crate::fs::RootFs::new("/");
            while host.exists(&format!("/proc/{}", p.pid)) && !crate::host::is_zombie(&host, p.pid)
            {
                if Instant::now() > deadline {
                    return Err(format!("irqbalance pid {} still running after 5 s", p.pid));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        }
        Ok(())
    }

    fn start_irqbalance(&self, was: &[ProcInfo]) -> Result<(), String> {
        for p in was {
            if let Some(unit) = &p.unit {
                systemctl("start", unit)?;
            } else if let Some((prog, args)) = p.cmdline.split_first() {
                std::process::Command::new(prog)
                    .args(args)
                    .stdin(std::process::Stdio::null())
                    .stdout(std::process::Stdio::null())
                    .stderr(std::process::Stdio::null())
                    .spawn()
                    .map_err(|e| format!("start {prog}: {e}"))?;
            } else {
                return Err(format!(
                    "irqbalance pid {} had no command line to restart it with",
                    p.pid
                ));
            }
        }
        Ok(())
    }
}

fn systemctl(verb: &str, unit: &str) -> Result<(), String> {
    let out = std::process::Command::new("systemctl")
        .args([verb, unit])
        .output()
        .map_err(|e| format!("systemctl {verb} {unit}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "systemctl {verb} {unit}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Who and what an apply is for (stored in the snapshot).
#[derive(Clone, Debug)]
pub struct ApplyMeta {
    /// `host` or `netns:NAME`.
    pub target: String,
    /// Host name.
    pub hostname: String,
    /// Profile name.
    pub profile: String,
    /// A namespace target's [`crate::netns::cookie`].
    pub netns_cookie: Option<u64>,
    /// The kernel's boot id ([`crate::snapshot::Snapshot::boot_id`]).
    pub boot_id: Option<String>,
}

/// Result of [`apply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApplyOutcome {
    /// One line per knob of the plan.
    pub lines: Vec<KnobLine>,
    /// Snapshot id, when anything was to be written.
    pub snapshot: Option<String>,
    /// The failure (knob and errno) that made apply undo its writes.
    pub error: Option<String>,
    /// Notes (re-asserted IRQs, readback mismatches).
    pub notes: Vec<String>,
}

impl ApplyOutcome {
    /// 0 when every write went through, 1 otherwise.
    pub fn exit_code(&self) -> i32 {
        i32::from(self.error.is_some())
    }
}

/// Errors before the first write: nothing was changed.
#[derive(Debug, thiserror::Error)]
pub enum ApplyError {
    /// The snapshot could not be saved.
    #[error("cannot save the snapshot, nothing written: {0}")]
    Snapshot(#[from] crate::snapshot::StoreError),
    /// A knob to change is a file the kernel shows read-only.
    #[error("{knob} is read-only here ({path} has no write permission: the kernel does not let it be set), nothing written")]
    ReadOnly {
        /// Knob.
        knob: String,
        /// Its file.
        path: String,
    },
    /// A knob to change could not be read, so it could not be saved.
    #[error("cannot read {knob} to save it, nothing written: {error}")]
    Unreadable {
        /// Knob.
        knob: String,
        /// Read error.
        error: FsError,
    },
}

enum WriteResult {
    Written,
    FixedByKernel(FsError),
}

/// Applies the plan: saves the original of every knob to change, fsyncs the
/// snapshot, then writes in stage order. Knobs that already mean the wanted
/// value are not written. Each write is read back; if a write fails or does
/// not read back as its wanted meaning, every write is restored from the
/// snapshot and the outcome names the knob and errno or the value read.
pub fn apply(
    fs: &dyn Fs,
    services: &dyn Services,
    store: &Store,
    plan: &Plan,
    meta: &ApplyMeta,
) -> Result<ApplyOutcome, ApplyError> {
    let changes: Vec<&Item> = plan.changes().collect();
    if changes.is_empty() {
        return Ok(ApplyOutcome {
            lines: plan
                .items
                .iter()
                .map(|i| i.line(verdict_unwritten(i)))
                .collect(),
            snapshot: None,
            error: None,
            notes: Vec::new(),
        });
    }
    refuse_read_only(fs, &changes)?;
    let snap = save_snapshot(fs, store, &changes, meta)?;
    let mut run = Applier::new(fs, services, store, plan, snap);
    match run.write_and_check() {
        Ok(()) => run.settle_snapshot_state(),
        Err(msg) => {
            run.error = Some(msg);
            run.undo_every_write();
        }
    }
    run.save_final_state();
    Ok(run.into_outcome())
}

/// A read-only knob to change stops the apply before the snapshot and
/// before any write.
fn refuse_read_only(fs: &dyn Fs, changes: &[&Item]) -> Result<(), ApplyError> {
    for item in changes {
        if let Target::File { path, .. } = &item.desired.target {
            if fs.read_only(path) {
                return Err(ApplyError::ReadOnly {
                    knob: item.desired.knob.clone(),
                    path: path.clone(),
                });
            }
        }
    }
    Ok(())
}

/// The original of every knob to change, saved durably before the first write.
fn save_snapshot(
    fs: &dyn Fs,
    store: &Store,
    changes: &[&Item],
    meta: &ApplyMeta,
) -> Result<Snapshot, ApplyError> {
    // Devices whose channel count this apply changes: their queue files
    // that do not exist yet are created by it.
    let regrouped: Vec<&str> = changes
        .iter()
        .filter(|i| i.desired.knob.contains(":channels."))
        .filter_map(|i| i.desired.knob.split(':').nth(1))
        .collect();
    let mut entries = Vec::with_capacity(changes.len());
    for item in changes {
        entries.push(entry_for(fs, item, original_of(item, &regrouped)?));
    }
    let created = now_ms();
    let snap = Snapshot {
        schema: SCHEMA.into(),
        id: store.new_id(&meta.target, created),
        created_unix_ms: created,
        target: meta.target.clone(),
        hostname: meta.hostname.clone(),
        profile: meta.profile.clone(),
        entries,
        fixed_by_kernel: Vec::new(),
        state: State::Pending,
        seq: store.next_seq(),
        netns_cookie: meta.netns_cookie,
        boot_id: meta.boot_id.clone(),
        rolled_back_unix_ms: None,
    };
    store.save(&snap)?;
    Ok(snap)
}

/// A snapshot entry for `item`, whose value before apply is `original`.
fn entry_for(fs: &dyn Fs, item: &Item, original: Original) -> Entry {
    Entry {
        knob: item.desired.knob.clone(),
        stage: item.desired.stage,
        irq_actions: saved_irq_actions(fs, &original, item.desired.stage),
        original,
    }
}

/// What became of one knob of the plan.
#[derive(Clone, Debug)]
struct KnobResult {
    verdict: Verdict,
    /// Replaces the plan's reason when not empty.
    reason: String,
    errno: Option<String>,
}

impl KnobResult {
    fn new(verdict: Verdict, reason: impl Into<String>, errno: Option<String>) -> KnobResult {
        KnobResult {
            verdict,
            reason: reason.into(),
            errno,
        }
    }
}

/// One apply past its snapshot: the writes, the checks after them, and the
/// undo or the snapshot's final state. Every phase is a method, called in
/// the order [`apply`] lists them.
struct Applier<'a> {
    fs: &'a dyn Fs,
    services: &'a dyn Services,
    store: &'a Store,
    plan: &'a Plan,
    snap: Snapshot,
    /// One per plan item, in plan order.
    results: Vec<KnobResult>,
    /// Indices into `snap.entries` of the knobs written, in write order.
    written: Vec<usize>,
    /// The failure (knob and errno) that made apply undo its writes.
    error: Option<String>,
    notes: Vec<String>,
    /// The snapshot id reported; None when the snapshot held nothing new.
    snapshot: Option<String>,
}

impl<'a> Applier<'a> {
    fn new(
        fs: &'a dyn Fs,
        services: &'a dyn Services,
        store: &'a Store,
        plan: &'a Plan,
        snap: Snapshot,
    ) -> Applier<'a> {
        let results = plan
            .items
            .iter()
            .map(|item| KnobResult::new(verdict_unwritten(item), item.cmp.reason.clone(), None))
            .collect();
        Applier {
            fs,
            services,
            store,
            plan,
            snapshot: Some(snap.id.clone()),
            snap,
            results,
            written: Vec::new(),
            error: None,
            notes: Vec::new(),
        }
    }

    /// The writes and every check after them; an error names the knob
    /// that failed (the caller undoes every write).
    fn write_and_check(&mut self) -> Result<(), String> {
        self.write_in_stage_order()?;
        self.repin_irqs_irqbalance_moved();
        let rewrote = self.rewrite_knobs_reset_by_later_writes()?;
        self.read_every_write_back(rewrote)
    }

    /// Writes each knob to change in the plan's stage order and reads it
    /// back at once: the kernel may accept a value and keep another
    /// (clamped, rounded, a vector with fewer elements), and a profile it
    /// does not take is a failure like a refused write, not a success to
    /// find out at verify.
    fn write_in_stage_order(&mut self) -> Result<(), String> {
        let plan = self.plan;
        let changes = plan
            .items
            .iter()
            .enumerate()
            .filter(|(_, i)| i.needs_change());
        for (entry, (i, item)) in changes.enumerate() {
            // The irqbalance steps are several actions (write the config, then
            // restart; stop each daemon): one can fail after another took effect.
            // Their restore is harmless when nothing changed, so they count as
            // written from the start and a failure undoes what part was done.
            let several = matches!(
                item.desired.target,
                Target::IrqbalanceConfig { .. } | Target::IrqbalanceService
            );
            if several {
                self.written.push(entry);
            }
            match write_knob(self.fs, self.services, item) {
                Ok(WriteResult::Written) => {
                    if !several {
                        self.written.push(entry);
                    }
                    self.results[i] = KnobResult::new(Verdict::Written, "", None);
                    if let Err(msg) = read_back(self.fs, item) {
                        self.results[i] = KnobResult::new(Verdict::Failed, msg.clone(), None);
                        return Err(format!("{}: {msg}", item.desired.knob));
                    }
                }
                Ok(WriteResult::FixedByKernel(e)) => {
                    self.snap.fixed_by_kernel.push(item.desired.knob.clone());
                    self.results[i] = KnobResult::new(
                        Verdict::FixedByKernel,
                        format!(
                            "managed interrupt: the kernel refuses to move it ({})",
                            e.errno_name()
                        ),
                        Some(e.errno_name().to_string()),
                    );
                }
                Err(e) => {
                    self.results[i] =
                        KnobResult::new(Verdict::Failed, e.message.clone(), e.errno.clone());
                    return Err(format!("{}: {}", item.desired.knob, e.message));
                }
            }
        }
        Ok(())
    }

    /// If irqbalance was stopped after IRQs were pinned, it may have moved
    /// them in between: writes again any that moved (a failure is a note).
    fn repin_irqs_irqbalance_moved(&mut self) {
        let plan = self.plan;
        let stopped_irqbalance = plan.items.iter().zip(&self.results).any(|(it, r)| {
            matches!(it.desired.target, Target::IrqbalanceService) && r.verdict == Verdict::Written
        });
        if !stopped_irqbalance {
            return;
        }
        for (item, result) in plan.items.iter().zip(&self.results) {
            if item.desired.stage != Stage::Irq || result.verdict != Verdict::Written {
                continue;
            }
            let now = observe_one(self.fs, &item.desired);
            if compare(&item.desired, &now).matches {
                continue;
            }
            if let Target::File { path, value } = &item.desired.target {
                let knob = &item.desired.knob;
                self.notes.push(match self.fs.write(path, value) {
                    Ok(()) => format!("{knob} moved before irqbalance stopped; written again"),
                    Err(e) => format!("{knob}: rewrite failed: {e}"),
                });
            }
        }
    }

    /// A knob that meant its value before the writes may not after them:
    /// one write can set others (`conf.all.forwarding` sets every device's).
    /// Saves each such knob in the snapshot, then writes it. Returns whether
    /// any was written.
    fn rewrite_knobs_reset_by_later_writes(&mut self) -> Result<bool, String> {
        let plan = self.plan;
        let fs = self.fs;
        let reset: Vec<usize> = plan
            .items
            .iter()
            .enumerate()
            .filter(|(i, item)| {
                self.results[*i].verdict == Verdict::Ok
                    && is_writable(&item.desired.target)
                    && !compare(&item.desired, &observe_one(fs, &item.desired)).matches
            })
            .map(|(i, _)| i)
            .collect();
        if reset.is_empty() {
            return Ok(false);
        }
        let first_new = self.snap.entries.len();
        for &i in &reset {
            let item = &plan.items[i];
            let original =
                original_of(item, &[]).map_err(|e| format!("{}: {e}", item.desired.knob))?;
            self.snap.entries.push(entry_for(fs, item, original));
        }
        self.store
            .save(&self.snap)
            .map_err(|e| format!("could not save the snapshot: {e}"))?;
        for (n, &i) in reset.iter().enumerate() {
            let item = &plan.items[i];
            let now = compare(&item.desired, &observe_one(fs, &item.desired)).actual;
            let changed = format!("another write of this profile changed it to `{now}`");
            let (result, failure) = match write_knob(fs, self.services, item) {
                Ok(WriteResult::Written) => {
                    self.written.push(first_new + n);
                    let reason = format!("{changed}; written again");
                    (KnobResult::new(Verdict::Written, reason, None), None)
                }
                Ok(WriteResult::FixedByKernel(e)) => {
                    let msg = format!(
                        "{changed}, and the kernel refuses to move it back ({})",
                        e.errno_name()
                    );
                    let errno = Some(e.errno_name().to_string());
                    (
                        KnobResult::new(Verdict::Failed, msg.clone(), errno),
                        Some(msg),
                    )
                }
                Err(e) => (
                    KnobResult::new(Verdict::Failed, e.message.clone(), e.errno),
                    Some(e.message),
                ),
            };
            self.results[i] = result;
            if let Some(msg) = failure {
                return Err(format!("{}: {msg}", item.desired.knob));
            }
        }
        Ok(true)
    }

    /// Reads every written knob back once more: a later write may undo an
    /// earlier one (a knob that resets another, an agent between writes);
    /// after a rewrite, a profile whose knobs set each other cannot hold.
    fn read_every_write_back(&mut self, rewrote: bool) -> Result<(), String> {
        for (item, result) in self.plan.items.iter().zip(self.results.iter_mut()) {
            if result.verdict != Verdict::Written {
                continue;
            }
            match read_back(self.fs, item) {
                Err(mut msg) => {
                    if rewrote {
                        msg.push_str(
                            ": knobs of this profile set each other, so they cannot all hold",
                        );
                    }
                    *result = KnobResult::new(Verdict::Failed, msg.clone(), None);
                    return Err(format!("{}: {msg}", item.desired.knob));
                }
                Ok(c) if !c.reason.is_empty() && !c.reason.starts_with("same elements") => {
                    result.reason = c.reason;
                }
                Ok(_) => {}
            }
        }
        Ok(())
    }

    /// After a failure: restores every write in reverse order, the failed
    /// knob too when it was written, and marks the knobs never attempted.
    /// The snapshot stays rollback-able when something could not be restored.
    fn undo_every_write(&mut self) {
        let mut undo_failures = Vec::new();
        for &ei in self.written.iter().rev() {
            let entry = &self.snap.entries[ei];
            let pos = self
                .plan
                .items
                .iter()
                .position(|it| it.desired.knob == entry.knob);
            let result = pos.map(|p| &mut self.results[p]);
            match restore_entry(self.fs, self.services, entry) {
                Ok(()) => match result {
                    Some(r) if r.verdict == Verdict::Failed => r.reason.push_str("; restored"),
                    Some(r) => {
                        *r = KnobResult::new(Verdict::Undone, "restored after the failure", None)
                    }
                    None => {}
                },
                Err(msg) => {
                    undo_failures.push(format!("{}: {msg}", entry.knob));
                    if let Some(r) = result {
                        *r = KnobResult::new(Verdict::UndoFailed, msg, None);
                    }
                }
            }
        }
        for (item, r) in self.plan.items.iter().zip(self.results.iter_mut()) {
            if item.needs_change() && r.verdict == Verdict::Change {
                *r = KnobResult::new(Verdict::Change, "not attempted", None);
            }
        }
        if let Some(e) = self.error.as_mut() {
            e.push_str(if undo_failures.is_empty() {
                "; every write was undone"
            } else {
                "; NOT every write could be undone (see UNDO FAILED)"
            });
        }
        self.snap.state = State::Undone;
        if !undo_failures.is_empty() {
            self.snap.state = State::Applied; // something is still changed: keep it rollback-able
            self.notes.push(format!(
                "could not restore: {}; run `xtune rollback {}`",
                undo_failures.join("; "),
                self.snap.id
            ));
        }
    }

    /// After success: the snapshot is applied, unless nothing moved.
    fn settle_snapshot_state(&mut self) {
        if !self.written.is_empty() {
            self.snap.state = State::Applied;
            return;
        }
        // Nothing moved: every knob to change was a managed interrupt the
        // kernel keeps where it put it. A snapshot of nothing would be one
        // more for each apply (each tries again) and one more rollback
        // that restores nothing before the real one.
        // The first such apply keeps its snapshot, with nothing to restore
        // (undone), as the record verify reads the managed IRQs from.
        self.snap.state = State::Undone;
        let snap = &self.snap;
        let known: Vec<String> = self
            .store
            .list()
            .0
            .into_iter()
            .filter(|s| s.target == snap.target && s.id != snap.id)
            .flat_map(|s| s.fixed_by_kernel)
            .collect();
        let kept = snap.fixed_by_kernel.len();
        if snap.fixed_by_kernel.iter().all(|k| known.contains(k)) {
            self.snapshot = None;
            self.notes.push(format!(
                "nothing changed: the kernel keeps {kept} managed interrupt(s) where it put them; no snapshot kept"
            ));
        } else {
            self.notes.push(format!(
                "nothing changed: the kernel keeps {kept} managed interrupt(s) where it put them; snapshot {} records them, with nothing to restore",
                snap.id
            ));
        }
    }

    /// Saves the snapshot's last state, or removes it when it is not kept.
    fn save_final_state(&mut self) {
        let saved = if self.snapshot.is_none() {
            self.store.remove(&self.snap.id)
        } else {
            self.store.save(&self.snap).map(|_| ())
        };
        if let Err(e) = saved {
            self.notes
                .push(format!("could not update the snapshot state: {e}"));
        }
    }

    /// One report line per knob of the plan.
    fn into_outcome(self) -> ApplyOutcome {
        let lines = self
            .plan
            .items
            .iter()
            .zip(self.results)
            .map(|(item, r)| {
                let mut l = item.line(r.verdict);
                if !r.reason.is_empty() {
                    l.reason = r.reason;
                }
                l.errno = r.errno;
                l
            })
            .collect();
        ApplyOutcome {
            lines,
            snapshot: self.snapshot,
            error: self.error,
            notes: self.notes,
        }
    }
}

/// The handlers of the IRQ an `[irq]` entry saves, kept beside its value.
fn saved_irq_actions(fs: &dyn Fs, original: &Original, stage: Stage) -> Vec<String> {
    match (original, stage) {
        (Original::File { path, .. }, Stage::Irq) => {
            irq_of_path(path).map_or_else(Vec::new, |irq| irq_actions(fs, irq))
        }
        _ => Vec::new(),
    }
}

/// The handlers now on the IRQ an `[irq]` entry saved, if they are others
/// than those it saved (its number was handed out again: a driver reloaded).
fn irq_moved(fs: &dyn Fs, path: &str, saved: &[String]) -> Option<Vec<String>> {
    if saved.is_empty() {
        return None;
    }
    let now = irq_actions(fs, irq_of_path(path)?);
    (now != saved).then_some(now)
}

/// Reads a written knob back: its comparison when it means what the
/// profile wants, else what it reads back as, in words.
fn read_back(fs: &dyn Fs, item: &Item) -> Result<Comparison, String> {
    let c = compare(&item.desired, &observe_one(fs, &item.desired));
    if c.matches {
        return Ok(c);
    }
    Err(match &item.desired.target {
        Target::File { value, .. } => format!(
            "the kernel took `{value}` but reads back `{}`{}",
            c.actual,
            if c.reason.is_empty() {
                String::new()
            } else {
                format!(" ({})", c.reason)
            }
        ),
        _ => format!("done, but reads back as {}", c.actual),
    })
}

/// Verdict of a knob apply did not write.
fn verdict_unwritten(item: &Item) -> Verdict {
    item.verdict(Verdict::Change)
}

fn original_of(item: &Item, regrouped: &[&str]) -> Result<Original, ApplyError> {
    match (&item.desired.target, &item.current) {
        (Target::File { path, .. }, Current::File { raw, .. }) => match raw {
            Ok(raw) => Ok(Original::File {
                path: path.clone(),
                raw: raw.clone(),
            }),
            Err(e)
                if e.errno == libc::ENOENT
                    && item.desired.stage == Stage::Steering
                    && item
                        .desired
                        .knob
                        .split(':')
                        .nth(1)
                        .is_some_and(|dev| regrouped.contains(&dev)) =>
            {
                Ok(Original::Created { path: path.clone() })
            }
            Err(e) => Err(ApplyError::Unreadable {
                knob: item.desired.knob.clone(),
                error: e.clone(),
            }),
        },
        (Target::IrqbalanceConfig { path }, Current::Config(content)) => Ok(Original::Config {
            path: path.clone(),
            content: content.clone(),
            written: match &item.desired.wanted {
                Wanted::BannedCpus(cpus) => Some(with_banned_cpulist(content.as_deref(), cpus)),
                _ => None,
            },
        }),
        (Target::IrqbalanceService, Current::Service(running)) => Ok(Original::Service {
            running: running.clone(),
        }),
        _ => Err(ApplyError::Unreadable {
            knob: item.desired.knob.clone(),
            error: FsError {
                op: "read",
                path: String::new(),
                errno: 0,
                detail: "no current value".into(),
            },
        }),
    }
}

struct WriteError {
    message: String,
    errno: Option<String>,
}

fn write_knob(
    fs: &dyn Fs,
    services: &dyn Services,
    item: &Item,
) -> Result<WriteResult, WriteError> {
    match &item.desired.target {
        Target::File { path, value } => match fs.write(path, value) {
            Ok(()) => Ok(WriteResult::Written),
            // Managed interrupts: EIO before Linux 6.12, EPERM from 6.12.
            Err(e)
                if item.desired.stage == Stage::Irq
                    && (e.errno == libc::EIO || e.errno == libc::EPERM) =>
            {
                Ok(WriteResult::FixedByKernel(e))
            }
            Err(e) => {
                // ENOENT from a file that exists: the kernel knows no such
                // value (an unknown congestion control or qdisc).
                let hint = if e.errno == libc::ENOENT && fs.exists(path) {
                    let avail = path.strip_suffix("tcp_congestion_control").map(|dir| {
                        fs.read(&format!("{dir}tcp_available_congestion_control"))
                            .map(|a| format!(" (available: {})", display_value(&a)))
                            .unwrap_or_default()
                    });
                    format!(
                        ": the file exists, the kernel has no `{value}`{}",
                        avail.unwrap_or_default()
                    )
                } else {
                    String::new()
                };
                Err(WriteError {
                    message: format!(
                        "writing `{value}` to {path} failed: {}{hint}",
                        crate::fs::errno_text(e.errno)
                    ),
                    errno: Some(e.errno_name().to_string()),
                })
            }
        },
        Target::IrqbalanceConfig { path } => {
            let Wanted::BannedCpus(cpus) = &item.desired.wanted else {
                return Err(WriteError {
                    message: "internal: ban knob without a CPU list".into(),
                    errno: None,
                });
            };
            let content = match &item.current {
                Current::Config(c) => c.as_deref(),
                _ => None,
            };
            fs.replace_file(path, &with_banned_cpulist(content, cpus))
                .map_err(|e| WriteError {
                    message: e.to_string(),
                    errno: Some(e.errno_name().to_string()),
                })?;
            // A running daemon reads its environment at start only.
            let running = crate::host::find_processes(fs, "irqbalance");
            if !running.is_empty() {
                services
                    .stop_irqbalance(&running)
                    .and_then(|()| services.start_irqbalance(&running))
                    .map_err(|m| WriteError {
                        message: format!("restarting irqbalance: {m}"),
                        errno: None,
                    })?;
            }
            Ok(WriteResult::Written)
        }
        Target::IrqbalanceService => {
            // The daemon running now: an earlier step (a new ban list) may
            // have restarted it under a new pid since the plan was read. None
            // running: already stopped (the snapshot keeps how it ran).
            let running = crate::host::find_processes(fs, "irqbalance");
            services.stop_irqbalance(&running).map_err(|m| WriteError {
                message: format!("stopping irqbalance: {m}"),
                errno: None,
            })?;
            Ok(WriteResult::Written)
        }
        Target::Unavailable { .. } | Target::Advice => Ok(WriteResult::Written),
    }
}

/// Writes an entry's original value back.
fn restore_entry(fs: &dyn Fs, services: &dyn Services, entry: &Entry) -> Result<(), String> {
    match &entry.original {
        // Goes away with the channel change, undone after it.
        Original::Created { .. } => Ok(()),
        Original::File { path, raw } => fs.write(path, trim_value(raw)).map_err(|e| e.to_string()),
        Original::Config { path, content, .. } => {
            match content {
                Some(c) => fs.replace_file(path, c).map_err(|e| e.to_string())?,
                None => match fs.remove(path) {
                    Ok(()) => {}
                    Err(e) if e.errno == libc::ENOENT => {}
                    Err(e) => return Err(e.to_string()),
                },
            }
            let running = crate::host::find_processes(fs, "irqbalance");
            if !running.is_empty() {
                services.stop_irqbalance(&running)?;
                services.start_irqbalance(&running)?;
            }
            Ok(())
        }
        Original::Service { running } => {
            if running.is_empty() || !crate::host::find_processes(fs, "irqbalance").is_empty() {
                return Ok(());
            }
            services.start_irqbalance(running)
        }
    }
}

/// irqbalance's state for display.
fn service_text(running: &[ProcInfo]) -> String {
    match running.len() {
        0 => "not running".into(),
        1 => "running (1 process)".into(),
        n => format!("running ({n} processes)"),
    }
}

/// A raw kernel value for display: whitespace runs (the kernel's tabs) as one space.
pub fn display_value(raw: &str) -> String {
    raw.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Restores a snapshot: every entry, last written first. A file is written
/// only when its content differs from the original, and read back to check
/// it is the original byte for byte.
///
/// `rebooted`: the host has booted since the snapshot was taken. The reboot
/// reset every kernel value it saved (sysctl, IRQ affinity, RPS/XPS/RFS,
/// governor) and may have renumbered its IRQs, so those are left as the boot
/// made them; what survives a reboot (the irqbalance config file, whether
/// irqbalance runs) is restored.
pub fn rollback(
    fs: &dyn Fs,
    services: &dyn Services,
    store: &Store,
    mut snap: Snapshot,
    rebooted: bool,
) -> (Vec<KnobLine>, bool) {
    let mut lines = Vec::new();
    for entry in snap.entries.iter().rev() {
        let done = match &entry.original {
            Original::File { path, raw } => {
                let fixed = snap.fixed_by_kernel.contains(&entry.knob);
                restore_file(fs, entry, path, raw, rebooted, fixed)
            }
            Original::Created { path } => Restore {
                verdict: Verdict::NotApplicable,
                reason:
                    "a queue the channel change created: it goes when the channels are restored"
                        .into(),
                path: Some(path.clone()),
                before: fs
                    .read(path)
                    .map(|b| display_value(&b))
                    .unwrap_or_else(|_| "(gone)".into()),
            },
            _ => restore_irqbalance(fs, services, entry, rebooted),
        };
        lines.push(KnobLine {
            knob: entry.knob.clone(),
            wanted: original_text(&entry.original),
            actual: done.before,
            verdict: done.verdict,
            reason: done.reason,
            agent: None,
            errno: None,
            path: done.path,
        });
    }
    lines.reverse();
    // A value that read back otherwise may depend on one restored after it
    // (an offload the kernel holds off until its checksum offload is back):
    // read those again once every entry is restored.
    for (line, entry) in lines.iter_mut().zip(&snap.entries) {
        if line.verdict != Verdict::UndoFailed || !line.reason.starts_with("reads back as") {
            continue;
        }
        if let Original::File { path, raw } = &entry.original {
            if fs.read(path).as_deref() == Ok(raw) {
                line.verdict = Verdict::Restored;
                line.reason = "once the settings restored after it were back".into();
            }
        }
    }
    let ok = lines.iter().all(|l| l.verdict != Verdict::UndoFailed);
    if ok {
        snap.state = State::RolledBack;
        snap.rolled_back_unix_ms = Some(now_ms());
        let _ = store.save(&snap);
    }
    (lines, ok)
}

/// What rollback did with one entry.
struct Restore {
    verdict: Verdict,
    reason: String,
    path: Option<String>,
    /// What it found before restoring, for display.
    before: String,
}

/// The original of an entry, for display.
fn original_text(original: &Original) -> String {
    match original {
        Original::File { raw, .. } => display_value(raw),
        Original::Created { .. } => "(none: created by the apply)".into(),
        Original::Config {
            content: Some(_), ..
        } => "(file content)".into(),
        Original::Config { content: None, .. } => "(no file)".into(),
        Original::Service { running } => service_text(running),
    }
}

/// Rollback of a kernel file: left alone after a reboot, when gone, or when
/// its IRQ number now serves another device; else written back if it differs.
fn restore_file(
    fs: &dyn Fs,
    entry: &Entry,
    path: &str,
    raw: &str,
    rebooted: bool,
    fixed_by_kernel: bool,
) -> Restore {
    let before = fs.read(path);
    let before_text = match &before {
        Ok(b) => display_value(b),
        Err(e) if e.errno == libc::ENOENT => "(gone)".into(),
        Err(e) => format!("unreadable: {}", e.errno_name()),
    };
    let (verdict, reason) = if rebooted {
        (
            Verdict::NotApplicable,
            "reset by the reboot since the snapshot (the boot's value is in force; IRQ numbers may name other devices): not restored"
                .into(),
        )
    } else if matches!(&before, Err(e) if e.errno == libc::ENOENT) {
        // The device (or the whole knob) went away since the apply: there
        // is nothing left to restore.
        (
            Verdict::NotApplicable,
            "gone: the file no longer exists (device removed?); nothing to restore".into(),
        )
    } else if let Some(now) = irq_moved(fs, path, &entry.irq_actions) {
        // The number was handed to other handlers (a driver reloaded): the
        // saved affinity was another device's.
        (
            Verdict::NotApplicable,
            format!(
                "the IRQ now serves {} (saved for {}): another device's since a driver reload; not restored",
                if now.is_empty() { "nothing".to_string() } else { now.join(", ") },
                entry.irq_actions.join(", ")
            ),
        )
    } else if before.as_deref() == Ok(raw) {
        (Verdict::Unchanged, String::new())
    } else {
        write_original(fs, path, raw, fixed_by_kernel)
    };
    Restore {
        verdict,
        reason,
        path: Some(path.to_string()),
        before: before_text,
    }
}

/// Writes a file's original back and checks it reads back byte for byte.
fn write_original(fs: &dyn Fs, path: &str, raw: &str, fixed_by_kernel: bool) -> (Verdict, String) {
    match fs.write(path, trim_value(raw)) {
        Err(e) if fixed_by_kernel => (
            Verdict::FixedByKernel,
            format!("never moved: {}", e.errno_name()),
        ),
        Err(e) => (Verdict::UndoFailed, e.to_string()),
        Ok(()) => match fs.read(path) {
            Ok(after) if after == raw => (Verdict::Restored, String::new()),
            Ok(after) => (
                Verdict::UndoFailed,
                format!("reads back as `{}`", trim_value(&after)),
            ),
            Err(e) => (Verdict::UndoFailed, e.to_string()),
        },
    }
}

/// Rollback of the irqbalance config file or service: a config file changed
/// since the apply is left as is, and so is whether irqbalance runs after a
/// reboot; else the original is restored.
fn restore_irqbalance(
    fs: &dyn Fs,
    services: &dyn Services,
    entry: &Entry,
    rebooted: bool,
) -> Restore {
    // A config file is read once: for the line and for the checks.
    let (config_now, path) = match &entry.original {
        Original::Config { path, .. } => (Some(fs.read(path).ok()), Some(path.clone())),
        _ => (None, None),
    };
    let before = match (&entry.original, &config_now) {
        (_, Some(Some(_))) => "(file content)".into(),
        (_, Some(None)) => "(no file)".into(),
        (Original::Service { .. }, _) => {
            service_text(&crate::host::find_processes(fs, "irqbalance"))
        }
        _ => String::new(),
    };
    let left = match (&entry.original, config_now) {
        // Still the original (an apply that stopped before writing it):
        // nothing to restore.
        (
            Original::Config {
                content,
                written: Some(_),
                ..
            },
            Some(now),
        ) if now == *content => Some((Verdict::Unchanged, String::new())),
        (
            Original::Config {
                written: Some(w), ..
            },
            Some(now),
        ) if now.as_deref() != Some(w.as_str()) => Some((
            Verdict::NotApplicable,
            format!(
                "{}: changed since the apply (a package upgrade, an edit?): left as is; its original is in the snapshot",
                if now.is_some() { "the file" } else { "the file is gone" }
            ),
        )),
        (Original::Service { .. }, _) if rebooted => Some((
            Verdict::NotApplicable,
            "the boot decided whether irqbalance runs (the apply stopped it for one boot only): left as is"
                .into(),
        )),
        _ => None,
    };
    let (verdict, reason, path) = match left {
        Some((verdict, reason)) => (verdict, reason, path),
        None => match restore_entry(fs, services, entry) {
            Ok(()) => (Verdict::Restored, String::new(), path),
            Err(m) => (Verdict::UndoFailed, m, None),
        },
    };
    Restore {
        verdict,
        reason,
        path,
        before,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fs::RootFs;
    use crate::host::Topology;
    use crate::knob::{build, TargetCtx};
    use crate::plan::observe;
    use crate::profile::Profile;
    use crate::testutil::{fake_host, TempDir};
    use std::cell::RefCell;

    /// An Fs that fails the n-th write (1-based) with `errno` and counts
    /// writes; with `keep` (path, value, stored), the kernel keeps `stored`
    /// when `value` is written to `path` (a clamp, a rounding, a kept element).
    struct FaultyFs {
        inner: RootFs,
        fail_on: usize,
        errno: i32,
        writes: RefCell<usize>,
        keep: Option<(&'static str, &'static str, &'static str)>,
    }

    impl Fs for FaultyFs {
        fn read(&self, p: &str) -> Result<String, FsError> {
            self.inner.read(p)
        }
        fn write(&self, p: &str, v: &str) -> Result<(), FsError> {
            *self.writes.borrow_mut() += 1;
            if *self.writes.borrow() == self.fail_on {
                return Err(FsError {
                    op: "write",
                    path: p.into(),
                    errno: self.errno,
                    detail: String::new(),
                });
            }
            match self.keep {
                Some((path, value, stored)) if p == path && v == value => {
                    self.inner.write(p, stored)
                }
                _ => self.inner.write(p, v),
            }
        }
        fn replace_file(&self, p: &str, c: &str) -> Result<(), FsError> {
            self.inner.replace_file(p, c)
        }
        fn remove(&self, p: &str) -> Result<(), FsError> {
            self.inner.remove(p)
        }
        fn exists(&self, p: &str) -> bool {
            self.inner.exists(p)
        }
        fn list(&self, d: &str) -> Result<Vec<String>, FsError> {
            self.inner.list(d)
        }
    }

    /// An Fs where writing `conf.all.forwarding` also sets `conf.va0.forwarding`,
    /// as the kernel does for every device; with `same`, the two names are one
    /// setting (as `net.ipv4.ip_forward` and `conf.all.forwarding`).
    struct ForwardingFs {
        inner: RootFs,
        same: bool,
    }

    const ALL_FWD: &str = "/proc/sys/net/ipv4/conf/all/forwarding";
    const DEV_FWD: &str = "/proc/sys/net/ipv4/conf/va0/forwarding";

    impl Fs for ForwardingFs {
        fn read(&self, p: &str) -> Result<String, FsError> {
            self.inner.read(p)
        }
        fn write(&self, p: &str, v: &str) -> Result<(), FsError> {
            self.inner.write(p, v)?;
            if p == ALL_FWD || self.same {
                self.inner
                    .write(if p == ALL_FWD { DEV_FWD } else { ALL_FWD }, v)?;
            }
            Ok(())
        }
        fn replace_file(&self, p: &str, c: &str) -> Result<(), FsError> {
            self.inner.replace_file(p, c)
        }
        fn remove(&self, p: &str) -> Result<(), FsError> {
            self.inner.remove(p)
        }
        fn exists(&self, p: &str) -> bool {
            self.inner.exists(p)
        }
        fn list(&self, d: &str) -> Result<Vec<String>, FsError> {
            self.inner.list(d)
        }
    }

    const FORWARDING: &[(&str, &str)] = &[
        ("net.ipv4.conf.all.forwarding", "0"),
        ("net.ipv4.conf.va0.forwarding", "0"),
    ];

    #[test]
    fn a_knob_that_meant_its_value_and_is_reset_by_a_later_write_is_written_again() {
        let host = fake_host("apply-reset", 2, FORWARDING, &[]);
        let fs = ForwardingFs {
            inner: RootFs::new(host.path()),
            same: false,
        };
        let store = Store::new(host.path().join("state"));
        let text = "[sysctl]\n\"net.ipv4.conf.va0.forwarding\" = 0\n\"net.ipv4.conf.all.forwarding\" = 1\n";
        let plan = plan_for(&fs, text, &host);
        assert_eq!(
            plan.changes().count(),
            1,
            "only all.forwarding differs at plan time"
        );
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None);
        assert_eq!(out.exit_code(), 0);
        assert_eq!(host.get(ALL_FWD), "1\n");
        assert_eq!(
            host.get(DEV_FWD),
            "0\n",
            "the device's value the profile wants"
        );
        let dev = out.lines.iter().find(|l| l.knob.contains("va0")).unwrap();
        assert_eq!(dev.verdict, Verdict::Written, "{dev:?}");
        assert!(dev.reason.contains("changed it to `1`"), "{}", dev.reason);
        // The snapshot holds the device knob too, so rollback puts back 0/0.
        let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(snap.entries.len(), 2);
        // Verified right after: nothing has drifted, and a second apply writes nothing.
        let again = plan_for(&fs, text, &host);
        assert_eq!(again.changes().count(), 0);
    }

    #[test]
    fn knobs_that_set_each_other_fail_and_are_undone() {
        // Two names of one setting (as `net.ipv4.ip_forward` and
        // `net.ipv4.conf.all.forwarding`) wanted at two values cannot hold.
        let host = fake_host("apply-conflict", 2, FORWARDING, &[]);
        let fs = ForwardingFs {
            inner: RootFs::new(host.path()),
            same: true,
        };
        let store = Store::new(host.path().join("state"));
        let text = "[sysctl]\n\"net.ipv4.conf.va0.forwarding\" = 0\n\"net.ipv4.conf.all.forwarding\" = 1\n";
        let plan = plan_for(&fs, text, &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.exit_code(), 1);
        let err = out.error.clone().unwrap();
        assert!(err.contains("set each other"), "{err}");
        assert!(err.contains("every write was undone"), "{err}");
        assert_eq!(host.get(ALL_FWD), "0\n");
        assert_eq!(host.get(DEV_FWD), "0\n");
        let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(snap.state, State::Undone);
    }

    struct NoServices;
    impl Services for NoServices {
        fn stop_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
            Ok(())
        }
        fn start_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
            Ok(())
        }
    }

    fn meta() -> ApplyMeta {
        ApplyMeta {
            netns_cookie: None,
            boot_id: None,
            target: "host".into(),
            hostname: "test".into(),
            profile: "p".into(),
        }
    }

    fn plan_for(fs: &dyn Fs, text: &str, dir: &TempDir) -> Plan {
        let p = Profile::from_text(text, "p", dir.path()).unwrap();
        let topo = Topology::read(fs, &p);
        let b = build(&p, &topo, &TargetCtx::default()).unwrap();
        let cur = observe(fs, &b.desired);
        Plan::from_parts(b.desired, cur, b.notes)
    }

    const SYSCTLS: &[(&str, &str)] = &[
        ("net.core.somaxconn", "4096"),
        ("net.ipv4.tcp_fin_timeout", "60"),
        ("net.ipv4.ip_local_port_range", "32768\t60999"),
        ("net.ipv4.tcp_tw_reuse", "2"),
    ];
    const PROFILE: &str = "[sysctl]\n\"net.core.somaxconn\" = 65535\n\"net.ipv4.tcp_fin_timeout\" = 15\n\"net.ipv4.ip_local_port_range\" = \"1024 65535\"\n\"net.ipv4.tcp_tw_reuse\" = 1\n";

    #[test]
    fn apply_writes_in_order_then_reapply_writes_nothing() {
        let host = fake_host("apply-ok", 2, SYSCTLS, &[("eth0", 2, 2)]);
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let text = format!("{PROFILE}[rps]\neth0 = \"all\"\n");
        let plan = plan_for(&fs, &text, &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None);
        assert_eq!(host.get("/proc/sys/net/core/somaxconn"), "65535\n");
        assert_eq!(
            host.get("/proc/sys/net/ipv4/ip_local_port_range"),
            "1024 65535\n"
        );
        assert_eq!(host.get("/sys/class/net/eth0/queues/rx-1/rps_cpus"), "3\n");
        // RPS (steering) before sysctls.
        let order: Vec<&str> = out.lines.iter().map(|l| l.knob.as_str()).collect();
        assert_eq!(order[0], "rps:eth0:rx-0");
        let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(snap.state, State::Applied);
        assert_eq!(snap.entries.len(), 6);

        let again = plan_for(&fs, &text, &host);
        assert_eq!(again.changes().count(), 0);
        let out2 = apply(&fs, &NoServices, &store, &again, &meta()).unwrap();
        assert_eq!(out2.snapshot, None, "nothing to write, no snapshot");
        assert!(out2.lines.iter().all(|l| l.verdict == Verdict::Ok));
    }

    #[test]
    fn third_write_failing_undoes_the_first_two_and_names_knob_and_errno() {
        let host = fake_host("apply-fail", 2, SYSCTLS, &[]);
        let before: Vec<String> = SYSCTLS
            .iter()
            .map(|(k, _)| host.get(&format!("/proc/sys/{}", k.replace('.', "/"))))
            .collect();
        let fs = FaultyFs {
            inner: RootFs::new(host.path()),
            fail_on: 3,
            errno: libc::EINVAL,
            writes: RefCell::new(0),
            keep: None,
        };
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, PROFILE, &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.exit_code(), 1);
        let err = out.error.clone().unwrap();
        assert!(
            err.starts_with("sysctl:net.ipv4.ip_local_port_range: "),
            "{err}"
        );
        assert!(err.contains("EINVAL"), "{err}");
        let after: Vec<String> = SYSCTLS
            .iter()
            .map(|(k, _)| host.get(&format!("/proc/sys/{}", k.replace('.', "/"))))
            .collect();
        assert_eq!(before, after, "every earlier write undone byte for byte");
        let verdicts: Vec<Verdict> = out.lines.iter().map(|l| l.verdict).collect();
        assert_eq!(
            verdicts,
            vec![
                Verdict::Undone,
                Verdict::Undone,
                Verdict::Failed,
                Verdict::Change
            ]
        );
        assert_eq!(out.lines[2].errno.as_deref(), Some("EINVAL"));
        let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(snap.state, State::Undone);
        assert!(
            store.latest_for("host").is_err(),
            "an undone apply has nothing to roll back"
        );
    }

    /// An irqbalance running as pid 700, its config dir without a config.
    fn with_irqbalance(host: &TempDir) {
        host.mkdir("/etc/default");
        host.put("/proc/700/comm", "irqbalance\n");
        host.put("/proc/700/cmdline", "/usr/sbin/irqbalance\0");
    }

    /// A host whose eth0 has two data-path IRQs, 40 and 41, on both CPUs.
    fn nic_with_two_irqs(name: &str) -> TempDir {
        let host = fake_host(name, 2, &[], &[]);
        host.put("/sys/class/net/eth0/tx_queue_len", "1000\n");
        host.mkdir("/sys/class/net/eth0/device");
        host.mkdir("/proc/irq/40/eth0-TxRx-0");
        host.mkdir("/proc/irq/41/eth0-TxRx-1");
        host.put("/proc/irq/40/smp_affinity", "3\n");
        host.put("/proc/irq/41/smp_affinity", "3\n");
        host
    }

    #[test]
    fn managed_irq_refusal_is_fixed_by_kernel_not_a_failure() {
        let host = nic_with_two_irqs("apply-irq");
        for errno in [libc::EPERM, libc::EIO] {
            // The first write (IRQ 40's) is refused, as the kernel refuses a
            // managed interrupt.
            let managed = || FaultyFs {
                inner: RootFs::new(host.path()),
                fail_on: 1,
                errno,
                writes: RefCell::new(0),
                keep: None,
            };
            let fs = managed();
            let store = Store::new(host.path().join(format!("state{errno}")));
            let plan = plan_for(&fs, "[irq]\neth0 = \"spread\"\n", &host);
            let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
            assert_eq!(out.error, None);
            assert_eq!(out.lines[0].verdict, Verdict::FixedByKernel);
            assert_eq!(out.lines[1].verdict, Verdict::Written);
            let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
            assert_eq!(snap.fixed_by_kernel, vec!["irq:40".to_string()]);
            // Again: only the managed one is left to change and it does
            // not move; no snapshot is kept for nothing.
            let fs = managed();
            let plan = plan_for(&fs, "[irq]\neth0 = \"spread\"\n", &host);
            let again = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
            assert_eq!(again.error, None);
            assert_eq!(again.snapshot, None, "{:?}", again.notes);
            assert_eq!(again.lines[0].verdict, Verdict::FixedByKernel);
            assert!(again.notes.iter().any(|n| n.contains("no snapshot kept")));
            assert_eq!(store.list().0.len(), 1, "only the first apply's snapshot");
            assert_eq!(store.latest_for("host").unwrap().id, snap.id);
            host.put("/proc/irq/41/smp_affinity", "3\n");
        }
    }

    #[test]
    fn rollback_leaves_an_irq_number_that_now_serves_another_device() {
        let host = nic_with_two_irqs("apply-irq-reload");
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[irq]\neth0 = \"spread\"\n", &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None);
        let snap = store.latest_for("host").unwrap();
        let saved: Vec<&[String]> = snap.entries.iter().map(|e| &e.irq_actions[..]).collect();
        assert_eq!(saved, [["eth0-TxRx-0"], ["eth0-TxRx-1"]]);
        // The NIC driver is reloaded and IRQ 40 goes to a disk queue.
        std::fs::remove_dir(host.path().join("proc/irq/40/eth0-TxRx-0")).unwrap();
        host.mkdir("/proc/irq/40/nvme0q1");
        host.put("/proc/irq/40/smp_affinity", "2\n");
        let (lines, ok) = rollback(&fs, &NoServices, &store, snap, false);
        assert!(ok, "{lines:?}");
        let irq40 = lines.iter().find(|l| l.knob == "irq:40").unwrap();
        assert_eq!(irq40.verdict, Verdict::NotApplicable, "{irq40:?}");
        assert!(irq40.reason.contains("nvme0q1"), "{irq40:?}");
        assert_eq!(host.get("/proc/irq/40/smp_affinity"), "2\n", "not touched");
        let irq41 = lines.iter().find(|l| l.knob == "irq:41").unwrap();
        assert_eq!(irq41.verdict, Verdict::Restored, "{irq41:?}");
        assert_eq!(host.get("/proc/irq/41/smp_affinity"), "3\n");
    }

    #[test]
    fn rollback_restores_originals_byte_for_byte() {
        let host = fake_host("apply-rollback", 2, SYSCTLS, &[("eth0", 2, 2)]);
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        // 1024: the fake host does not round up to a power of two as the kernel does.
        let text = format!("{PROFILE}[rps]\neth0 = \"all\"\n[rfs.flow_cnt]\neth0 = 1024\n");
        let paths = [
            "/proc/sys/net/core/somaxconn",
            "/proc/sys/net/ipv4/ip_local_port_range",
            "/sys/class/net/eth0/queues/rx-0/rps_cpus",
            "/sys/class/net/eth0/queues/rx-1/rps_flow_cnt",
        ];
        let before: Vec<String> = paths.iter().map(|p| host.get(p)).collect();
        let plan = plan_for(&fs, &text, &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None);
        assert_ne!(host.get(paths[0]), before[0]);
        let snap = store.latest_for("host").unwrap();
        let (lines, ok) = rollback(&fs, &NoServices, &store, snap, false);
        assert!(ok, "{lines:?}");
        let after: Vec<String> = paths.iter().map(|p| host.get(p)).collect();
        assert_eq!(before, after);
        assert!(
            lines.iter().all(|l| l.verdict == Verdict::Restored),
            "{lines:?}"
        );
        assert!(
            store.latest_for("host").is_err(),
            "rolled back snapshots are not rolled back twice"
        );
    }

    #[test]
    fn irqbalance_ban_writes_the_config_and_rollback_removes_a_created_file() {
        let host = fake_host("apply-ban", 2, &[], &[]);
        with_irqbalance(&host);
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[irqbalance]\nban = \"1\"\n", &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None, "{out:?}");
        assert!(host
            .get("/etc/default/irqbalance")
            .contains("IRQBALANCE_BANNED_CPULIST=1\n"));
        let (lines, ok) = rollback(
            &fs,
            &NoServices,
            &store,
            store.latest_for("host").unwrap(),
            false,
        );
        assert!(ok, "{lines:?}");
        assert!(!fs.exists("/etc/default/irqbalance"));
    }

    #[test]
    fn after_a_reboot_rollback_restores_the_config_file_and_leaves_kernel_values() {
        let host = fake_host("apply-reboot", 2, SYSCTLS, &[]);
        with_irqbalance(&host);
        let fs = RootFs::new(host.path());
        let daemon = FakeDaemon::new(&host);
        let store = Store::new(host.path().join("state"));
        let text = format!("{PROFILE}[irqbalance]\nban = \"1\"\nstop = true\n");
        let plan = plan_for(&fs, &text, &host);
        let out = apply(&fs, &daemon, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None, "{out:?}");
        let tuned = host.get("/proc/sys/net/core/somaxconn");
        assert!(fs.exists("/etc/default/irqbalance"));
        let (lines, ok) = rollback(
            &fs,
            &daemon,
            &store,
            store.latest_for("host").unwrap(),
            true,
        );
        assert!(ok, "{lines:?}");
        // The config file (kept across a reboot) is undone; the kernel value
        // (reset by the reboot, here left as found) is not written.
        assert!(!fs.exists("/etc/default/irqbalance"));
        assert_eq!(host.get("/proc/sys/net/core/somaxconn"), tuned);
        let sysctl = lines
            .iter()
            .find(|l| l.knob == "sysctl:net.core.somaxconn")
            .unwrap();
        assert_eq!(sysctl.verdict, Verdict::NotApplicable, "{sysctl:?}");
        assert!(sysctl.reason.contains("reboot"), "{sysctl:?}");
        // Whether irqbalance runs is the boot's to say: not started again.
        let service = lines
            .iter()
            .find(|l| l.knob == "irqbalance:service")
            .unwrap();
        assert_eq!(service.verdict, Verdict::NotApplicable, "{service:?}");
        assert!(
            crate::host::find_processes(&fs, "irqbalance").is_empty(),
            "irqbalance was started again"
        );
        assert!(
            store.latest_for("host").is_err(),
            "the snapshot is done with"
        );
    }

    #[test]
    fn a_config_file_changed_since_the_apply_is_not_rolled_back_over() {
        let host = fake_host("apply-ban-edit", 2, &[], &[]);
        host.mkdir("/etc/default");
        host.put("/etc/default/irqbalance", "OPTIONS=\"\"\n");
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[irqbalance]\nban = \"1\"\n", &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None, "{out:?}");
        // A package upgrade rewrites the file after the apply.
        let upgraded = "OPTIONS=\"--policyscript=/x\"\nIRQBALANCE_BANNED_CPULIST=1\n";
        host.put("/etc/default/irqbalance", upgraded);
        let (lines, ok) = rollback(
            &fs,
            &NoServices,
            &store,
            store.latest_for("host").unwrap(),
            false,
        );
        assert!(ok, "{lines:?}");
        let line = lines
            .iter()
            .find(|l| l.knob.contains("ban"))
            .expect("the ban line");
        assert_eq!(line.verdict, Verdict::NotApplicable, "{line:?}");
        assert!(line.reason.contains("changed since the apply"), "{line:?}");
        assert_eq!(host.get("/etc/default/irqbalance"), upgraded, "left as is");
        // Unchanged since the apply: restored byte for byte.
        let plan = plan_for(&fs, "[irqbalance]\nban = \"0\"\n", &host);
        apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        let (lines, ok) = rollback(
            &fs,
            &NoServices,
            &store,
            store.latest_for("host").unwrap(),
            false,
        );
        assert!(ok, "{lines:?}");
        assert_eq!(host.get("/etc/default/irqbalance"), upgraded);
    }

    #[test]
    fn a_value_the_kernel_does_not_keep_fails_the_apply_and_undoes_it() {
        let host = fake_host("apply-keep", 2, SYSCTLS, &[("eth0", 2, 2)]);
        let before_port = host.get("/proc/sys/net/ipv4/ip_local_port_range");
        let fs = FaultyFs {
            inner: RootFs::new(host.path()),
            fail_on: 0,
            errno: 0,
            writes: RefCell::new(0),
            keep: Some(("/proc/sys/net/ipv4/tcp_fin_timeout", "15", "30")),
        };
        let store = Store::new(host.path().join("state"));
        let text = format!("{PROFILE}[limits]\nnofile = 1\n");
        let plan = plan_for(&fs, &text, &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.exit_code(), 1);
        let err = out.error.as_deref().unwrap();
        assert!(
            err.starts_with(
                "sysctl:net.ipv4.tcp_fin_timeout: the kernel took `15` but reads back `30`"
            ),
            "{err}"
        );
        assert!(err.ends_with("every write was undone"), "{err}");
        let line = |k: &str| out.lines.iter().find(|l| l.knob == k).unwrap();
        assert_eq!(
            line("sysctl:net.ipv4.tcp_fin_timeout").verdict,
            Verdict::Failed
        );
        assert_eq!(line("sysctl:net.core.somaxconn").verdict, Verdict::Undone);
        assert_eq!(
            line("sysctl:net.ipv4.ip_local_port_range").verdict,
            Verdict::Change
        );
        assert_eq!(
            line("sysctl:net.ipv4.ip_local_port_range").reason,
            "not attempted"
        );
        // A knob apply never writes keeps its own verdict after a failure.
        assert_ne!(line("limits:nofile").verdict, Verdict::Ok);
        // Everything is back, the failed knob too.
        assert_eq!(host.get("/proc/sys/net/core/somaxconn"), "4096\n");
        assert_eq!(host.get("/proc/sys/net/ipv4/tcp_fin_timeout"), "60\n");
        assert_eq!(
            host.get("/proc/sys/net/ipv4/ip_local_port_range"),
            before_port
        );
        let snap = store.load(out.snapshot.as_deref().unwrap()).unwrap();
        assert_eq!(snap.state, State::Undone);
    }

    #[test]
    fn advice_and_unavailable_knobs_keep_their_verdicts_when_a_write_fails() {
        let host = fake_host("apply-advice", 2, SYSCTLS, &[("eth0", 2, 2)]);
        let fs = FaultyFs {
            inner: RootFs::new(host.path()),
            fail_on: 2,
            errno: libc::EINVAL,
            writes: RefCell::new(0),
            keep: None,
        };
        let store = Store::new(host.path().join("state"));
        let text =
            format!("{PROFILE}[limits]\nnofile = 1048576000\n[cpu]\ngovernor = \"performance\"\n");
        let plan = plan_for(&fs, &text, &host);
        let want: Vec<(String, Verdict)> = plan
            .items
            .iter()
            .filter(|i| !i.needs_change())
            .map(|i| (i.desired.knob.clone(), verdict_unwritten(i)))
            .collect();
        assert!(want.iter().any(|(_, v)| *v == Verdict::Advice), "{want:?}");
        assert!(
            want.iter().any(|(_, v)| *v == Verdict::NotApplicable),
            "{want:?}"
        );
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.exit_code(), 1);
        for (knob, v) in want {
            let line = out.lines.iter().find(|l| l.knob == knob).unwrap();
            assert_eq!(line.verdict, v, "{knob}");
        }
    }

    /// irqbalance as processes in the fake /proc: stop removes them, start
    /// runs a new one under the next pid (as a restarted daemon gets).
    struct FakeDaemon<'a> {
        host: &'a TempDir,
        next_pid: RefCell<u32>,
        stopped: RefCell<Vec<u32>>,
    }

    impl<'a> FakeDaemon<'a> {
        /// Nothing stopped yet; started daemons get pids from 800.
        fn new(host: &'a TempDir) -> FakeDaemon<'a> {
            FakeDaemon {
                host,
                next_pid: RefCell::new(800),
                stopped: RefCell::new(Vec::new()),
            }
        }
    }

    impl Services for FakeDaemon<'_> {
        fn stop_irqbalance(&self, running: &[ProcInfo]) -> Result<(), String> {
            for p in running {
                let dir = self.host.path().join(format!("proc/{}", p.pid));
                if !dir.exists() {
                    return Err(format!("kill {}: No such process", p.pid));
                }
                std::fs::remove_dir_all(dir).unwrap();
                self.stopped.borrow_mut().push(p.pid);
            }
            Ok(())
        }
        fn start_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
            let pid = *self.next_pid.borrow();
            *self.next_pid.borrow_mut() += 1;
            self.host.put(&format!("/proc/{pid}/comm"), "irqbalance\n");
            self.host
                .put(&format!("/proc/{pid}/cmdline"), "/usr/sbin/irqbalance\0");
            Ok(())
        }
    }

    #[test]
    fn stop_after_a_ban_stops_the_restarted_daemon_and_rollback_starts_it_again() {
        let host = fake_host("apply-ban-stop", 2, &[], &[]);
        with_irqbalance(&host);
        let fs = RootFs::new(host.path());
        let daemon = FakeDaemon::new(&host);
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[irqbalance]\nban = \"1\"\nstop = true\n", &host);
        let out = apply(&fs, &daemon, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None, "{out:?}");
        // The ban restarted 700 as 800; the stop must stop 800.
        assert_eq!(*daemon.stopped.borrow(), vec![700, 800]);
        assert!(crate::host::find_processes(&fs, "irqbalance").is_empty());
        let (lines, ok) = rollback(
            &fs,
            &daemon,
            &store,
            store.latest_for("host").unwrap(),
            false,
        );
        assert!(ok, "{lines:?}");
        let service = lines
            .iter()
            .find(|l| l.knob == "irqbalance:service")
            .unwrap();
        assert_eq!(service.actual, "not running", "what rollback found");
        assert_eq!(service.wanted, "running (1 process)");
        assert_eq!(service.verdict, Verdict::Restored);
        assert_eq!(crate::host::find_processes(&fs, "irqbalance").len(), 1);
    }

    #[test]
    fn rollback_counts_a_removed_device_as_gone_not_failed() {
        let host = fake_host("apply-gone", 2, SYSCTLS, &[("eth0", 2, 2), ("va", 1, 1)]);
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[rps]\nva = \"all\"\neth0 = \"all\"\n", &host);
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        assert_eq!(out.error, None, "{out:?}");
        std::fs::remove_dir_all(host.path().join("sys/class/net/va")).unwrap();
        let (lines, ok) = rollback(
            &fs,
            &NoServices,
            &store,
            store.latest_for("host").unwrap(),
            false,
        );
        assert!(ok, "{lines:?}");
        let gone = lines.iter().find(|l| l.knob.contains("va")).unwrap();
        assert_eq!(gone.verdict, Verdict::NotApplicable);
        assert!(gone.reason.starts_with("gone"), "{}", gone.reason);
        assert_eq!(host.get("/sys/class/net/eth0/queues/rx-0/rps_cpus"), "0\n");
        assert!(
            store.latest_for("host").is_err(),
            "the snapshot is rolled back"
        );
    }

    #[test]
    fn a_value_the_kernel_does_not_know_is_named_with_what_it_offers() {
        let host = fake_host(
            "apply-cc",
            2,
            &[
                ("net.ipv4.tcp_congestion_control", "cubic"),
                ("net.ipv4.tcp_available_congestion_control", "reno\tcubic"),
            ],
            &[],
        );
        let fs = FaultyFs {
            inner: RootFs::new(host.path()),
            fail_on: 1,
            errno: libc::ENOENT,
            writes: RefCell::new(0),
            keep: None,
        };
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(
            &fs,
            "[sysctl]\n\"net.ipv4.tcp_congestion_control\" = \"bbr2\"\n",
            &host,
        );
        let out = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap();
        let err = out.error.unwrap();
        assert!(
            err.contains("the kernel has no `bbr2` (available: reno cubic)"),
            "{err}"
        );
    }

    #[test]
    fn a_read_only_knob_to_change_stops_the_apply_before_any_write() {
        use std::os::unix::fs::PermissionsExt;
        let host = fake_host("apply-ro", 2, SYSCTLS, &[("eth0", 2, 2)]);
        let ro = host.path().join("proc/sys/net/ipv4/tcp_fin_timeout");
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, PROFILE, &host);
        let e = apply(&fs, &NoServices, &store, &plan, &meta()).unwrap_err();
        assert!(matches!(e, ApplyError::ReadOnly { .. }), "{e}");
        assert!(
            e.to_string().contains("sysctl:net.ipv4.tcp_fin_timeout"),
            "{e}"
        );
        assert_eq!(
            host.get("/proc/sys/net/core/somaxconn"),
            "4096\n",
            "nothing written"
        );
        assert!(store.list().0.is_empty(), "no snapshot");
        // Already at the wanted value: nothing to change, no refusal.
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o644)).unwrap();
        host.put("/proc/sys/net/ipv4/tcp_fin_timeout", "15\n");
        std::fs::set_permissions(&ro, std::fs::Permissions::from_mode(0o444)).unwrap();
        let plan = plan_for(&fs, "[sysctl]\n\"net.ipv4.tcp_fin_timeout\" = 15\n", &host);
        assert!(apply(&fs, &NoServices, &store, &plan, &meta()).is_ok());
    }

    #[test]
    fn a_failed_irqbalance_restart_is_undone_like_any_write() {
        struct NoRestart;
        impl Services for NoRestart {
            fn stop_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
                Ok(())
            }
            fn start_irqbalance(&self, _: &[ProcInfo]) -> Result<(), String> {
                Err("systemctl start irqbalance.service: failed".into())
            }
        }
        let host = fake_host("apply-ban-fail", 2, &[], &[]);
        with_irqbalance(&host);
        host.put("/etc/default/irqbalance", "OPTIONS=\"\"\n");
        let fs = RootFs::new(host.path());
        let store = Store::new(host.path().join("state"));
        let plan = plan_for(&fs, "[irqbalance]\nban = \"1\"\n", &host);
        let out = apply(&fs, &NoRestart, &store, &plan, &meta()).unwrap();
        assert_eq!(out.exit_code(), 1);
        // The config was written before the restart failed: it is put back.
        assert_eq!(host.get("/etc/default/irqbalance"), "OPTIONS=\"\"\n");
        let line = &out.lines[0];
        assert_eq!(
            line.verdict,
            Verdict::UndoFailed,
            "restoring restarts too: {line:?}"
        );
    }
}
