//! Snapshots: the original value of every knob apply is about to write, saved
//! and fsync'd before the first write, so a crash mid-apply still leaves a way
//! back. One JSON file per snapshot under the state dir (`/var/lib/xtune`).

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use xload_sys::calendar::utc;

use crate::fs::write_atomic;
use crate::host::{ProcInfo, IRQBALANCE_CONFIGS};
use crate::knob::{is_irqbalance_config, place_of, Place, Stage};

/// Snapshot file schema.
pub const SCHEMA: &str = "xtune-snapshot/1";

/// Default state directory.
pub const DEFAULT_STATE_DIR: &str = "/var/lib/xtune";

/// What a knob was before apply.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Original {
    /// A kernel file; `raw` is the bytes read, newline included.
    File {
        /// Host path.
        path: String,
        /// Content as read.
        raw: String,
    },
    /// irqbalance environment file (None: it did not exist).
    Config {
        /// Host path.
        path: String,
        /// Content, or None when absent.
        content: Option<String>,
        /// What the apply wrote there: a file that no longer reads so (a
        /// package upgrade, an edit) is not rolled back over. None in
        /// snapshots from before it was kept.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        written: Option<String>,
    },
    /// A queue file that did not exist before the apply: a queue the
    /// apply's channel change adds, which goes away when the channels are
    /// restored (nothing to write back).
    Created {
        /// Host path.
        path: String,
    },
    /// irqbalance processes that were running.
    Service {
        /// Processes to start again.
        running: Vec<ProcInfo>,
    },
}

/// One saved knob.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Knob identity.
    pub knob: String,
    /// Write stage (rollback goes in reverse).
    pub stage: Stage,
    /// Value before apply.
    pub original: Original,
    /// An IRQ's handlers when saved (`/proc/irq/N/` directories): IRQ numbers
    /// are handed out again when a driver is reloaded, and a rollback does
    /// not pin another device's interrupt.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub irq_actions: Vec<String>,
}

/// Life of a snapshot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum State {
    /// Saved; writes in progress (a crash leaves this state).
    Pending,
    /// Apply finished.
    Applied,
    /// Apply failed and restored what it had written.
    Undone,
    /// Rolled back by `xtune rollback`.
    RolledBack,
}

impl State {
    /// Still has writes on the host to restore (applied, or left pending by a crash).
    pub fn restorable(self) -> bool {
        matches!(self, State::Applied | State::Pending)
    }
}

/// A snapshot file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// [`SCHEMA`].
    pub schema: String,
    /// File stem, sortable by time: `20260301-142501-123-host`.
    pub id: String,
    /// Creation time.
    pub created_unix_ms: u64,
    /// `host` or `netns:NAME`.
    pub target: String,
    /// Host name.
    pub hostname: String,
    /// Profile name.
    pub profile: String,
    /// Saved knobs in write order.
    pub entries: Vec<Entry>,
    /// Knobs the kernel refused to move (managed IRQs).
    #[serde(default)]
    pub fixed_by_kernel: Vec<String>,
    /// Lifecycle state.
    pub state: State,
    /// Order in the store: one more than the highest when saved (under the
    /// store's lock), so the stack does not depend on the clock (a clock
    /// stepped back between two applies would put them in the wrong order).
    /// 0 in files written before it existed: those sort by time, first.
    #[serde(default)]
    pub seq: u64,
    /// A namespace target's cookie when taken ([`crate::netns::cookie`]):
    /// a namespace deleted and created again under the same name is
    /// another one, whose values this snapshot does not hold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub netns_cookie: Option<u64>,
    /// The kernel's boot id when taken (`/proc/sys/kernel/random/boot_id`):
    /// a reboot resets every runtime value a snapshot saves, and IRQ
    /// numbers may name other devices after it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot_id: Option<String>,
    /// When rolled back.
    #[serde(default)]
    pub rolled_back_unix_ms: Option<u64>,
}

/// Snapshot store errors.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// I/O on the state dir.
    #[error("{}: {source}", path.display())]
    Io {
        /// File or directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// A snapshot file that is not valid JSON of the schema.
    #[error("{}: not an xtune snapshot: {message}", path.display())]
    Corrupt {
        /// File.
        path: PathBuf,
        /// Parser message.
        message: String,
    },
    /// Named snapshot absent.
    #[error("no snapshot `{0}` (see `xtune snapshots`)")]
    NotFound(String),
    /// No snapshot to roll back for this target.
    #[error("no snapshot to roll back for {0} (see `xtune snapshots`)")]
    NothingToRollBack(String),
    /// A state dir xtune cannot safely pick from.
    #[error("{0}")]
    Blocked(String),
    /// The state dir, or a directory above it, is a file (or another
    /// non-directory): it cannot hold snapshots.
    #[error("{}: {} is not a directory: name a directory for the snapshots (default {DEFAULT_STATE_DIR})", dir.display(), blocker.display())]
    NotADirectory {
        /// The state dir.
        dir: PathBuf,
        /// The part of its path that exists and is no directory.
        blocker: PathBuf,
    },
}

/// The state directory.
#[derive(Clone, Debug)]
pub struct Store {
    dir: PathBuf,
}

impl Store {
    /// Store at `dir` (created on first save, mode 0700).
    pub fn new(dir: impl Into<PathBuf>) -> Store {
        Store { dir: dir.into() }
    }

    /// The directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// A new id for `target`, unique in this store.
    pub fn new_id(&self, target: &str, now_ms: u64) -> String {
        let stem = format!(
            "{}-{}",
            timestamp_id(now_ms),
            target.replace([':', '/'], "-")
        );
        let mut id = stem.clone();
        let mut n = 1;
        while self.path_of(&id).exists() {
            n += 1;
            id = format!("{stem}-{n}");
        }
        id
    }

    /// Takes the store's lock: one apply or rollback at a time per state
    /// dir, from reading the knobs' current values to the snapshot's last
    /// state, so that two (on different targets) do not take the same id
    /// or order number. The target's own lock ([`crate::lock::lock_target`])
    /// is taken before it. Waits for the holder (saying so on stderr);
    /// released when the guard drops.
    pub fn lock(&self) -> Result<StoreLock, StoreError> {
        self.create_dir()?;
        let what = format!("state dir {}", self.dir.display());
        crate::lock::exclusive(&self.dir.join(".lock"), &what, None).map_err(|e| StoreError::Io {
            path: e.path,
            source: e.source,
        })
    }

    /// Whether the directory can be (or is) a state dir: the nearest part
    /// of its path that exists must be a directory. Commands call it first,
    /// so that a file given as the state dir is named, not met as EEXIST.
    pub fn check(&self) -> Result<(), StoreError> {
        for part in self.dir.ancestors() {
            match std::fs::metadata(part) {
                Ok(m) if m.is_dir() => return Ok(()),
                Ok(_) => {
                    return Err(StoreError::NotADirectory {
                        dir: self.dir.clone(),
                        blocker: part.to_path_buf(),
                    })
                }
                // Absent: created on first save; look further up.
                Err(_) => {}
            }
        }
        Ok(())
    }

    /// Creates the directory (and its parents), mode 0700 from the start,
    /// and makes an existing one 0700: snapshots hold what a host was
    /// tuned from, for root only.
    fn create_dir(&self) -> Result<(), StoreError> {
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        self.check()?;
        let io = |source| StoreError::Io {
            path: self.dir.clone(),
            source,
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(io)?;
        std::fs::set_permissions(&self.dir, std::fs::Permissions::from_mode(0o700)).map_err(io)
    }

    /// The order number for a new snapshot (see [`Snapshot::seq`]); call it
    /// under [`Store::lock`].
    pub fn next_seq(&self) -> u64 {
        self.list().0.iter().map(|s| s.seq).max().unwrap_or(0) + 1
    }

    fn path_of(&self, id: &str) -> PathBuf {
        self.dir.join(format!("{id}.json"))
    }

    /// Writes the snapshot durably (temp file, fsync, rename, fsync dir).
    pub fn save(&self, snap: &Snapshot) -> Result<PathBuf, StoreError> {
        self.create_dir()?;
        let path = self.path_of(&snap.id);
        let json = serde_json::to_vec_pretty(snap).map_err(|e| StoreError::Corrupt {
            path: path.clone(),
            message: e.to_string(),
        })?;
        write_atomic(&path, &json, 0o600).map_err(|source| StoreError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Deletes a snapshot file (one that holds nothing to restore).
    pub fn remove(&self, id: &str) -> Result<(), StoreError> {
        let path = self.path_of(id);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(StoreError::Io { path, source: e })
            }
            _ => Ok(()),
        }
    }

    /// Loads one snapshot by id (or file name).
    pub fn load(&self, id: &str) -> Result<Snapshot, StoreError> {
        let id = id.strip_suffix(".json").unwrap_or(id);
        if id.is_empty() || id.contains('/') || id.starts_with('.') {
            return Err(StoreError::NotFound(id.to_string()));
        }
        let path = self.path_of(id);
        if !path.exists() {
            return Err(StoreError::NotFound(id.to_string()));
        }
        read_snapshot(&path)
    }

    /// All snapshots, oldest first. Unreadable files are returned as errors
    /// alongside, so one bad file does not hide the others.
    pub fn list(&self) -> (Vec<Snapshot>, Vec<StoreError>) {
        let mut snaps = Vec::new();
        let mut errors = Vec::new();
        let rd = match std::fs::read_dir(&self.dir) {
            Ok(rd) => rd,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return (snaps, errors),
            Err(source) => {
                errors.push(StoreError::Io {
                    path: self.dir.clone(),
                    source,
                });
                return (snaps, errors);
            }
        };
        for entry in rd.flatten() {
            let path = entry.path();
            if path.extension().and_then(|e| e.to_str()) != Some("json") {
                continue;
            }
            match read_snapshot(&path) {
                Ok(s) => snaps.push(s),
                Err(e) => errors.push(e),
            }
        }
        snaps.sort_by(|a, b| order(a).cmp(&order(b)));
        (snaps, errors)
    }

    /// The newest snapshot of `target` that still has something to restore
    /// (applied or left pending by a crash), for `xtune rollback` without a name.
    /// An unreadable snapshot file stops it: it may be the newest of this
    /// target, and restoring an older one past it would leave its knobs
    /// changed without a word.
    pub fn latest_for(&self, target: &str) -> Result<Snapshot, StoreError> {
        let (snaps, errors) = self.list();
        if let Some(e) = errors.into_iter().find(|e| may_be_of(e, target)) {
            return Err(StoreError::Blocked(format!(
                "{e}; it may be this target's newest snapshot: move it out of {} (or roll back by id) to go on",
                self.dir.display()
            )));
        }
        snaps
            .into_iter()
            .rev()
            .find(|s| s.target == target && s.state.restorable())
            .ok_or_else(|| StoreError::NothingToRollBack(target.to_string()))
    }

    /// An unreadable file of the store that may be a snapshot of `target`
    /// (a file whose name says it is another target's cannot be): a
    /// rollback of `target` stops on it.
    pub fn unreadable_for(&self, target: &str) -> Option<StoreError> {
        self.list().1.into_iter().find(|e| may_be_of(e, target))
    }

    /// Snapshots of the same target newer than `snap` that still have
    /// something to restore: rolling back `snap` before them would break
    /// the stack (theirs hold the values `snap` wrote as their originals).
    pub fn newer_restorable(&self, snap: &Snapshot) -> Vec<Snapshot> {
        let (snaps, _) = self.list();
        snaps
            .into_iter()
            .filter(|s| {
                s.target == snap.target
                    && s.id != snap.id
                    && s.state.restorable()
                    && order(s) > order(snap)
            })
            .collect()
    }
}

/// Held while an apply or rollback runs: see [`Store::lock`].
pub type StoreLock = crate::lock::Held;

/// A snapshot's place in the stack.
fn order(s: &Snapshot) -> (u64, u64, &str) {
    (s.seq, s.created_unix_ms, s.id.as_str())
}

/// Whether an unreadable file of the store may be a snapshot of `target`:
/// its name (`YYYYMMDD-HHMMSS-mmm-TARGET[-N]`, see [`Store::new_id`]) says
/// whose it is; a name of another form may be anyone's.
fn may_be_of(e: &StoreError, target: &str) -> bool {
    let (StoreError::Io { path, .. } | StoreError::Corrupt { path, .. }) = e else {
        return true;
    };
    let Some(stem) = path.file_stem().and_then(|s| s.to_str()) else {
        return true;
    };
    let stamped = stem.len() > 20
        && stem.is_char_boundary(20)
        && stem[..20].bytes().enumerate().all(|(i, b)| {
            if matches!(i, 8 | 15 | 19) {
                b == b'-'
            } else {
                b.is_ascii_digit()
            }
        });
    if !stamped {
        return true;
    }
    let rest = &stem[20..];
    let ours = target.replace([':', '/'], "-");
    rest == ours
        || rest
            .strip_prefix(&ours)
            .and_then(|t| t.strip_prefix('-'))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
}

fn read_snapshot(path: &Path) -> Result<Snapshot, StoreError> {
    let what = "a snapshot";
    let bytes =
        xload_sys::input::read(path, what, xload_sys::input::DATA_LIMIT).map_err(|source| {
            StoreError::Io {
                path: path.to_path_buf(),
                source,
            }
        })?;
    let snap: Snapshot = serde_json::from_slice(&bytes).map_err(|e| StoreError::Corrupt {
        path: path.to_path_buf(),
        message: e.to_string(),
    })?;
    if snap.schema != SCHEMA {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            message: format!("schema `{}`, expected `{SCHEMA}`", snap.schema),
        });
    }
    // A rollback saves it back under its id: the id is its file's name.
    let stem = path.file_stem().and_then(|s| s.to_str());
    if stem != Some(snap.id.as_str()) {
        return Err(StoreError::Corrupt {
            path: path.to_path_buf(),
            message: format!("its id `{}` is not its file name (edited?)", snap.id),
        });
    }
    for entry in &snap.entries {
        entry.check_place().map_err(|message| StoreError::Corrupt {
            path: path.to_path_buf(),
            message,
        })?;
    }
    Ok(snap)
}

impl Entry {
    /// Whether the entry saved its knob where the knob's identity says it
    /// lives ([`place_of`]): a rollback writes these paths as root, so a
    /// snapshot edited to point a knob at another file is refused whole.
    pub fn check_place(&self) -> Result<(), String> {
        let place = place_of(&self.knob)?;
        let edited = |path: &str, own: &str| {
            format!(
                "entry {} saves {path}, not the knob's own {own} (edited?); xtune restores a knob only into its own file",
                self.knob
            )
        };
        match (&place, &self.original) {
            (Place::File(own), Original::File { path, .. }) if path != own => {
                Err(edited(path, own))
            }
            (Place::File(own), Original::Created { path }) if path != own => Err(edited(path, own)),
            (Place::File(_), Original::File { .. } | Original::Created { .. }) => Ok(()),
            (Place::IrqbalanceConfig, Original::Config { path, .. })
                if !is_irqbalance_config(path) =>
            {
                Err(edited(path, &IRQBALANCE_CONFIGS.join(" or ")))
            }
            (Place::IrqbalanceConfig, Original::Config { .. })
            | (Place::IrqbalanceService, Original::Service { .. }) => Ok(()),
            _ => Err(format!(
                "entry {} saves a {} value, which that knob does not have (edited?)",
                self.knob,
                match self.original {
                    Original::File { .. } | Original::Created { .. } => "kernel file",
                    Original::Config { .. } => "config file",
                    Original::Service { .. } => "service",
                }
            )),
        }
    }
}

/// Milliseconds since the epoch.
pub fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// `YYYYMMDD-HHMMSS-mmm` in UTC.
pub fn timestamp_id(ms: u64) -> String {
    let u = utc(ms / 1000);
    format!(
        "{:04}{:02}{:02}-{:02}{:02}{:02}-{:03}",
        u.year,
        u.month,
        u.day,
        u.hour,
        u.minute,
        u.second,
        ms % 1000
    )
}

/// `YYYY-MM-DD HH:MM:SS` UTC, for listings.
pub fn human_time(ms: u64) -> String {
    let u = utc(ms / 1000);
    format!(
        "{:04}-{:02}-{:02} {:02}:{:02}:{:02}Z",
        u.year, u.month, u.day, u.hour, u.minute, u.second
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;
    use std::fs::File;
    use std::os::fd::AsRawFd;

    fn snap(store: &Store, target: &str, ms: u64, state: State) -> Snapshot {
        Snapshot {
            schema: SCHEMA.into(),
            id: store.new_id(target, ms),
            created_unix_ms: ms,
            target: target.into(),
            hostname: "h".into(),
            profile: "p".into(),
            entries: vec![Entry {
                knob: "sysctl:net.core.somaxconn".into(),
                stage: Stage::Sysctl,
                original: Original::File {
                    path: "/proc/sys/net/core/somaxconn".into(),
                    raw: "4096\n".into(),
                },
                irq_actions: vec![],
            }],
            fixed_by_kernel: vec![],
            state,
            seq: 0,
            netns_cookie: None,
            boot_id: None,
            rolled_back_unix_ms: None,
        }
    }

    #[test]
    fn timestamps_are_utc_calendar_dates() {
        assert_eq!(timestamp_id(0), "19700101-000000-000");
        assert_eq!(timestamp_id(1_709_251_200_123), "20240301-000000-123");
        assert_eq!(human_time(951_782_400_000), "2000-02-29 00:00:00Z");
    }

    #[test]
    fn saved_snapshots_load_back_and_latest_skips_rolled_back_and_other_targets() {
        let t = TempDir::new("snap-store");
        let store = Store::new(t.path().join("state"));
        let a = snap(&store, "host", 1_000, State::Applied);
        store.save(&a).unwrap();
        let b = snap(&store, "host", 2_000, State::RolledBack);
        store.save(&b).unwrap();
        let c = snap(&store, "netns:lab", 3_000, State::Applied);
        store.save(&c).unwrap();
        assert_eq!(store.load(&a.id).unwrap(), a);
        assert_eq!(store.latest_for("host").unwrap().id, a.id);
        assert_eq!(store.latest_for("netns:lab").unwrap().id, c.id);
        assert!(matches!(
            store.latest_for("netns:x"),
            Err(StoreError::NothingToRollBack(_))
        ));
        let (all, errs) = store.list();
        assert_eq!(all.len(), 3);
        assert!(errs.is_empty());
        assert!(matches!(
            store.load("../etc/passwd"),
            Err(StoreError::NotFound(_))
        ));
    }

    #[test]
    fn ids_are_unique_within_one_millisecond() {
        let t = TempDir::new("snap-ids");
        let store = Store::new(t.path());
        let a = snap(&store, "host", 5, State::Applied);
        store.save(&a).unwrap();
        let b = store.new_id("host", 5);
        assert_ne!(a.id, b);
        assert!(b.ends_with("-2"));
    }

    #[test]
    fn the_stack_follows_the_order_saved_not_the_clock() {
        // The clock stepped back between two applies: the second (seq 2)
        // is the newer one all the same.
        let t = TempDir::new("snap-seq");
        let store = Store::new(t.path());
        let mut a = snap(&store, "host", 9_000, State::Applied);
        a.seq = store.next_seq();
        store.save(&a).unwrap();
        let mut b = snap(&store, "host", 1_000, State::Applied);
        b.seq = store.next_seq();
        assert_eq!((a.seq, b.seq), (1, 2));
        store.save(&b).unwrap();
        assert_eq!(store.latest_for("host").unwrap().id, b.id);
        assert_eq!(store.newer_restorable(&a)[0].id, b.id);
        assert!(store.newer_restorable(&b).is_empty());
    }

    #[test]
    fn an_unreadable_file_blocks_only_the_target_it_may_belong_to() {
        let t = TempDir::new("snap-bad-other");
        let store = Store::new(t.path());
        let good = snap(&store, "netns:lab", 7, State::Applied);
        store.save(&good).unwrap();
        // Another target's, by its name: it does not block this one.
        std::fs::write(t.path().join("20200101-000000-000-host.json"), "{").unwrap();
        assert_eq!(store.latest_for("netns:lab").unwrap().id, good.id);
        assert!(matches!(
            store.latest_for("host"),
            Err(StoreError::Blocked(_))
        ));
        // A name that may be this target's (its own, or a second one of the
        // same millisecond), or one of no known form, blocks it.
        for name in ["20200101-000000-000-netns-lab-2.json", "junk.json"] {
            std::fs::write(t.path().join(name), "{").unwrap();
            assert!(
                matches!(store.latest_for("netns:lab"), Err(StoreError::Blocked(_))),
                "{name}"
            );
            std::fs::remove_file(t.path().join(name)).unwrap();
        }
        // netns "lab-x" is another target.
        std::fs::write(t.path().join("20200101-000000-000-netns-lab-x.json"), "{").unwrap();
        assert_eq!(store.latest_for("netns:lab").unwrap().id, good.id);
    }

    #[test]
    fn the_lock_is_exclusive_while_held() {
        let t = TempDir::new("snap-lock");
        let store = Store::new(t.path().join("state"));
        let held = store.lock().unwrap();
        let f = File::open(t.path().join("state/.lock")).unwrap();
        // SAFETY: flock on a descriptor owned here.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, -1, "a second holder got the lock");
        drop(held);
        // SAFETY: as above.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, 0, "released when the guard dropped");
        // The lock file is not a snapshot.
        assert!(store.list().1.is_empty());
    }

    #[test]
    fn an_entry_that_saves_another_file_than_its_knobs_is_corrupt() {
        let t = TempDir::new("snap-place");
        let store = Store::new(t.path());
        let good = snap(&store, "host", 7, State::Applied);
        let mut edits: Vec<Original> = vec![
            Original::File {
                path: "/etc/shadow".into(),
                raw: "x\n".into(),
            },
            Original::Config {
                path: "/proc/sys/net/core/somaxconn".into(),
                content: None,
                written: None,
            },
            Original::Service { running: vec![] },
        ];
        for original in edits.drain(..) {
            let mut bad = good.clone();
            bad.entries[0].original = original.clone();
            store.save(&bad).unwrap();
            let e = store.load(&bad.id).unwrap_err();
            assert!(
                matches!(&e, StoreError::Corrupt { message, .. } if message.contains("sysctl:net.core.somaxconn")),
                "{original:?}: {e}"
            );
            assert!(matches!(
                store.latest_for("host"),
                Err(StoreError::Blocked(_))
            ));
        }
        // irqbalance's config lives in one of its two files, no other.
        let mut cfg = good.clone();
        cfg.entries[0] = Entry {
            knob: "irqbalance:banned_cpus".into(),
            stage: Stage::Irqbalance,
            original: Original::Config {
                path: "/etc/default/irqbalance".into(),
                content: None,
                written: None,
            },
            irq_actions: vec![],
        };
        store.save(&cfg).unwrap();
        assert_eq!(store.load(&cfg.id).unwrap(), cfg);
        cfg.entries[0].original = Original::Config {
            path: "/etc/cron.d/x".into(),
            content: None,
            written: None,
        };
        store.save(&cfg).unwrap();
        assert!(store.load(&cfg.id).is_err());
    }

    #[test]
    fn a_snapshot_whose_id_is_not_its_file_name_is_corrupt() {
        // A rollback saves the snapshot back under its id: an edited id
        // would make root write the file elsewhere.
        let t = TempDir::new("snap-id");
        let store = Store::new(t.path().join("state"));
        let mut s = snap(&store, "host", 7, State::Applied);
        store.save(&s).unwrap();
        let file = store.path_of(&s.id);
        s.id = "../../escaped".into();
        std::fs::write(&file, serde_json::to_vec(&s).unwrap()).unwrap();
        let stem = file.file_stem().unwrap().to_str().unwrap().to_string();
        let e = store.load(&stem).unwrap_err();
        assert!(e.to_string().contains("../../escaped"), "{e}");
        assert!(store.list().0.is_empty());
    }

    #[test]
    fn a_corrupt_file_is_reported_not_fatal() {
        let t = TempDir::new("snap-corrupt");
        let store = Store::new(t.path());
        std::fs::write(t.path().join("bad.json"), "{not json").unwrap();
        let good = snap(&store, "host", 7, State::Applied);
        store.save(&good).unwrap();
        let (all, errs) = store.list();
        assert_eq!(all.len(), 1);
        assert_eq!(errs.len(), 1);
        assert!(errs[0].to_string().contains("not an xtune snapshot"));
    }
}
