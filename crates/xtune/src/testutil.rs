//! Helpers for unit tests: a temporary directory removed on drop, and a fake
//! `/proc` + `/sys` tree to point an [`crate::fs::RootFs`] at.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A directory under the system temp dir, deleted with everything in it on drop.
pub(crate) struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `xtune-<tag>-<pid>-<n>`.
    pub(crate) fn new(tag: &str) -> TempDir {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("xtune-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create temp dir");
        TempDir { path }
    }

    /// The directory.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// Writes `content` to `rel` (a path like `/proc/sys/net/core/somaxconn`),
    /// creating parent directories.
    pub(crate) fn put(&self, rel: &str, content: &str) {
        let p = self.path.join(rel.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&p, content).expect("write fake file");
    }

    /// Reads `rel` back.
    pub(crate) fn get(&self, rel: &str) -> String {
        std::fs::read_to_string(self.path.join(rel.trim_start_matches('/')))
            .expect("read fake file")
    }

    /// Creates a directory `rel`.
    pub(crate) fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.path.join(rel.trim_start_matches('/'))).expect("mkdir");
    }

    /// Creates a symlink at `rel` pointing to `target` (relative or absolute inside the tree).
    pub(crate) fn symlink(&self, rel: &str, target: &str) {
        let p = self.path.join(rel.trim_start_matches('/'));
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::os::unix::fs::symlink(target, p).expect("symlink");
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// A fake host with `cpus` online CPUs, the given sysctls, and devices with
/// `(name, rx_queues, tx_queues)`.
pub(crate) fn fake_host(
    tag: &str,
    cpus: u32,
    sysctls: &[(&str, &str)],
    devices: &[(&str, u32, u32)],
) -> TempDir {
    let t = TempDir::new(tag);
    let list = if cpus == 1 {
        "0".to_string()
    } else {
        format!("0-{}", cpus - 1)
    };
    t.put("/sys/devices/system/cpu/online", &format!("{list}\n"));
    t.put("/sys/devices/system/cpu/possible", &format!("{list}\n"));
    t.put("/sys/devices/system/cpu/isolated", "\n");
    t.put("/sys/devices/system/cpu/offline", "\n");
    t.mkdir("/proc");
    t.mkdir("/etc/sysctl.d");
    for (k, v) in sysctls {
        t.put(
            &format!("/proc/sys/{}", k.replace('.', "/")),
            &format!("{v}\n"),
        );
    }
    for (dev, rx, tx) in devices {
        let base = format!("/sys/class/net/{dev}");
        t.put(&format!("{base}/tx_queue_len"), "1000\n");
        for q in 0..*rx {
            t.put(&format!("{base}/queues/rx-{q}/rps_cpus"), "0\n");
            t.put(&format!("{base}/queues/rx-{q}/rps_flow_cnt"), "0\n");
        }
        for q in 0..*tx {
            t.put(&format!("{base}/queues/tx-{q}/xps_cpus"), "0\n");
        }
    }
    t
}
