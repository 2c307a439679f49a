//! Test support shared by the test trees of the workspace (a dev-dependency
//! only, never published): what was copied between `crates/*/tests` and the
//! crates' unit tests lives here once.
//!
//! - [`TempDir`]: a directory removed on drop, with helpers to lay out a fake
//!   `/proc` and `/sys` tree inside it.
//! - [`both_engines!`]: one test per engine (io_uring and epoll) from one
//!   function taking the engine's name.
//! - [`stdout_of`]: runs a built binary that must succeed, returns its stdout.
//! - [`alloc`]: a global allocator counting the thread's allocations.
//!
//! Design choice: std only, so the support cannot share a bug with the code
//! under test through a common dependency.

pub mod alloc;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};

/// A directory under the system temp dir, deleted with everything in it on
/// drop (also when the test panics).
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `$TMPDIR/xtest-<tag>-<pid>-<n>`, empty (a stale one left by an
    /// earlier process with the same pid is removed first).
    pub fn new(tag: &str) -> TempDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path = std::env::temp_dir().join(format!("xtest-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap_or_else(|e| panic!("create {}: {e}", path.display()));
        TempDir { path }
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `self.path().join(name)`.
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// `self.path().join(name)` as a string, for command-line arguments.
    pub fn join_str(&self, name: &str) -> String {
        self.path.join(name).to_string_lossy().into_owned()
    }

    /// The path of `rel` inside; a leading `/` is dropped, so
    /// `/proc/sys/net/core/somaxconn` names that file of the fake tree.
    fn inside(&self, rel: &str) -> PathBuf {
        self.path.join(rel.trim_start_matches('/'))
    }

    /// Writes `content` to `rel`, creating parent directories.
    pub fn put(&self, rel: &str, content: &str) {
        let p = self.inside(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::fs::write(&p, content).unwrap_or_else(|e| panic!("write {}: {e}", p.display()));
    }

    /// Writes `content` to `rel` (see [`TempDir::put`]) and returns its path
    /// as a string.
    pub fn file(&self, rel: &str, content: &str) -> String {
        self.put(rel, content);
        self.inside(rel).to_string_lossy().into_owned()
    }

    /// Reads `rel` back.
    pub fn get(&self, rel: &str) -> String {
        let p = self.inside(rel);
        std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("read {}: {e}", p.display()))
    }

    /// Creates the directory `rel` and its parents.
    pub fn mkdir(&self, rel: &str) {
        std::fs::create_dir_all(self.inside(rel)).expect("mkdir");
    }

    /// Creates a symlink at `rel` pointing to `target` (relative, or absolute
    /// inside the tree), creating parent directories.
    pub fn symlink(&self, rel: &str, target: &str) {
        let p = self.inside(rel);
        if let Some(parent) = p.parent() {
            std::fs::create_dir_all(parent).expect("create parent");
        }
        std::os::unix::fs::symlink(target, p).expect("symlink");
    }

    /// Number of `.json` files directly in `rel` (0 if it does not exist).
    pub fn count_json(&self, rel: &str) -> usize {
        std::fs::read_dir(self.inside(rel))
            .map(|rd| {
                rd.flatten()
                    .filter(|e| e.path().extension().is_some_and(|x| x == "json"))
                    .count()
            })
            .unwrap_or(0)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// One `#[test]` per engine for each named function `fn NAME(engine: &str)`:
/// `NAME::uring` and `NAME::epoll`, so a failure names the engine.
///
/// ```ignore
/// fn head_requests_complete(engine: &str) { /* --engine {engine} */ }
/// xload_testkit::both_engines!(head_requests_complete);
/// ```
#[macro_export]
macro_rules! both_engines {
    ($($name:ident),* $(,)?) => {
        $(
            mod $name {
                #[test]
                fn uring() {
                    super::$name("uring");
                }
                #[test]
                fn epoll() {
                    super::$name("epoll");
                }
            }
        )*
    };
}

/// Runs the binary at `bin` with `args`, asserts it exits 0 (stderr in the
/// message otherwise) and returns its stdout.
pub fn stdout_of(bin: &str, args: &[&str]) -> String {
    let out = Command::new(bin)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("run {bin}: {e}"));
    let name = Path::new(bin)
        .file_name()
        .map_or(bin.into(), |n| n.to_string_lossy());
    assert!(
        out.status.success(),
        "{name} {args:?}: {:?}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// nginx's stub_status request counter at `addr` (`GET /stub`; the read
/// counts itself).
pub fn nginx_stub_requests(addr: std::net::SocketAddr, timeout: std::time::Duration) -> u64 {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect_timeout(&addr, timeout).expect("stub");
    s.set_read_timeout(Some(timeout)).unwrap();
    s.write_all(b"GET /stub HTTP/1.1\r\nHost: lab\r\nConnection: close\r\n\r\n")
        .unwrap();
    let mut page = String::new();
    let _ = s.read_to_string(&mut page);
    let at = page
        .find("server accepts handled requests")
        .unwrap_or_else(|| panic!("not stub_status: {page}"));
    page[at..]
        .split_whitespace()
        .filter_map(|w| w.parse::<u64>().ok())
        .nth(2)
        .expect("requests counter")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn temp_dir_lays_out_a_tree_and_removes_it_on_drop() {
        let dir = TempDir::new("kit");
        dir.put("/proc/sys/net/core/somaxconn", "4096\n");
        assert_eq!(dir.get("proc/sys/net/core/somaxconn"), "4096\n");
        let f = dir.file("state/a.json", "{}");
        assert!(f.ends_with("state/a.json") && Path::new(&f).exists());
        dir.put("state/b.txt", "");
        assert_eq!(dir.count_json("state"), 1);
        assert_eq!(dir.count_json("nowhere"), 0);
        dir.mkdir("sys/class/net");
        dir.symlink("sys/class/net/eth0", "../../devices/eth0");
        assert!(dir.join("sys/class/net/eth0").is_symlink());
        assert_eq!(dir.join_str("x"), dir.path().join("x").to_string_lossy());
        let path = dir.path().to_path_buf();
        drop(dir);
        assert!(!path.exists());
    }

    #[test]
    fn two_temp_dirs_with_one_tag_are_distinct() {
        let (a, b) = (TempDir::new("same"), TempDir::new("same"));
        assert_ne!(a.path(), b.path());
    }

    fn records(engine: &str) {
        assert!(engine == "uring" || engine == "epoll", "{engine}");
    }
    both_engines!(records);

    #[test]
    fn stdout_of_returns_what_the_binary_printed() {
        assert_eq!(stdout_of("/bin/echo", &["hi"]), "hi\n");
    }

    #[test]
    #[should_panic(expected = "false [\"x\"]")]
    fn stdout_of_fails_on_a_nonzero_exit() {
        stdout_of("/bin/false", &["x"]);
    }
}
