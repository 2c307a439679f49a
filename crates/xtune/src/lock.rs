//! Locks that keep applies and rollbacks apart. Two of them, taken in this
//! order: the target's ([`lock_target`]: the host, or one network
//! namespace), so that two xtunes with different state dirs cannot both
//! read the same originals and write over each other; then the snapshot
//! store's ([`crate::snapshot::Store::lock`]), which numbers its snapshots.
//! Both are `flock`s, released when the process ends however it ends.

use std::fs::{File, OpenOptions};
use std::io::{Read, Seek, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};

/// Where the target locks live, under the host root (`/` in production):
/// on a tmpfs that starts empty at every boot, and outside any state dir.
pub const LOCK_DIR: &str = "run/xtune";

/// A lock could not be taken.
#[derive(Debug, thiserror::Error)]
#[error("cannot lock {}: {source}", path.display())]
pub struct LockError {
    /// The lock file (or its directory).
    pub path: PathBuf,
    /// Cause.
    pub source: std::io::Error,
}

/// Held while an apply or rollback runs; released on drop.
#[derive(Debug)]
pub struct Held {
    _file: File,
}

/// The lock file of `target` (`host`, `netns:NAME`) on the host rooted at
/// `root`: `/run/xtune/host.lock`, `/run/xtune/netns-NAME.lock`.
pub fn target_lock_path(root: &Path, target: &str) -> PathBuf {
    let name = match target.strip_prefix("netns:") {
        Some(ns) => format!("netns-{ns}.lock"),
        None => format!("{target}.lock"),
    };
    root.join(LOCK_DIR).join(name)
}

/// Takes `target`'s lock: one apply or rollback at a time per host or
/// namespace, whatever state dir each uses. `holder` says who takes it
/// (written into the file, so a waiting xtune can name it).
pub fn lock_target(root: &Path, target: &str, holder: &str) -> Result<Held, LockError> {
    let path = target_lock_path(root, target);
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(dir)
            .map_err(|source| LockError {
                path: dir.to_path_buf(),
                source,
            })?;
    }
    let what = format!("{target} (lock {})", path.display());
    exclusive(&path, &what, Some(holder))
}

/// Opens (creating, mode 0600) and `flock`s `path` exclusively. When
/// another process holds it, says so on stderr, naming `what` and the
/// holder recorded in the file, and waits. With `holder`, records it.
pub fn exclusive(path: &Path, what: &str, holder: Option<&str>) -> Result<Held, LockError> {
    let err = |source| LockError {
        path: path.to_path_buf(),
        source,
    };
    let mut file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .read(true)
        .write(true)
        .mode(0o600)
        .open(path)
        .map_err(err)?;
    let fd = file.as_raw_fd();
    // SAFETY: flock on a descriptor this function owns.
    if unsafe { libc::flock(fd, libc::LOCK_EX | libc::LOCK_NB) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EWOULDBLOCK) {
            return Err(err(e));
        }
        let mut recorded = String::new();
        let _ = file.read_to_string(&mut recorded);
        let by = match recorded.trim() {
            "" => String::new(),
            h => format!(" ({h})"),
        };
        eprintln!("xtune: another xtune{by} is applying or rolling back on {what}: waiting for it");
        loop {
            // SAFETY: as above.
            if unsafe { libc::flock(fd, libc::LOCK_EX) } == 0 {
                break;
            }
            let e = std::io::Error::last_os_error();
            if e.kind() != std::io::ErrorKind::Interrupted {
                return Err(err(e));
            }
        }
    }
    if let Some(h) = holder {
        // Best effort: the record only helps a waiting xtune's message.
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = writeln!(file, "{h}");
    }
    Ok(Held { _file: file })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn each_target_has_its_own_lock_outside_any_state_dir() {
        let root = Path::new("/");
        assert_eq!(
            target_lock_path(root, "host"),
            Path::new("/run/xtune/host.lock")
        );
        assert_eq!(
            target_lock_path(root, "netns:lab1"),
            Path::new("/run/xtune/netns-lab1.lock")
        );
    }

    #[test]
    fn a_target_lock_is_exclusive_while_held_and_names_its_holder() {
        let t = TempDir::new("lock-target");
        let held = lock_target(t.path(), "netns:lab", "pid 1: apply").unwrap();
        let path = t.path().join("run/xtune/netns-lab.lock");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "pid 1: apply\n");
        let f = File::open(&path).unwrap();
        // SAFETY: flock on a descriptor owned here.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, -1, "a second holder got the lock");
        // Another target is not held.
        drop(lock_target(t.path(), "host", "pid 2: apply").unwrap());
        drop(held);
        // SAFETY: as above.
        let r = unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
        assert_eq!(r, 0, "released when the guard dropped");
    }
}
