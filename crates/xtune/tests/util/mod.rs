//! Test helpers: the built binary, throwaway network namespaces with a
//! multi-queue veth pair, and temporary directories. Everything is removed on
//! drop, also when a test fails.

#![allow(dead_code)]

use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

static COUNTER: AtomicU64 = AtomicU64::new(0);

fn unique(tag: &str) -> String {
    format!(
        "{tag}-{}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Path of the xtune binary under test.
pub(crate) fn xtune_bin() -> &'static str {
    env!("CARGO_BIN_EXE_xtune")
}

/// Runs xtune with `args`, optional stdin and extra environment.
pub(crate) fn xtune(args: &[&str]) -> Output {
    xtune_env(args, &[])
}

/// Runs xtune with environment variables set.
pub(crate) fn xtune_env(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(xtune_bin());
    cmd.args(args).stdin(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run xtune")
}

/// stdout as text.
pub(crate) fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// stderr as text.
pub(crate) fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Exit code (-1 for a signal).
pub(crate) fn code(o: &Output) -> i32 {
    o.status.code().unwrap_or(-1)
}

/// Why root-only tests cannot run here, or None when they can.
pub(crate) fn root_skip_reason() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("not root: network namespaces need CAP_SYS_ADMIN".into());
    }
    match Command::new("ip").arg("-V").output() {
        Ok(o) if o.status.success() => None,
        _ => Some("`ip` (iproute2) is not installed".into()),
    }
}

/// Prints the skip reason and returns true when the test must not run.
#[macro_export]
macro_rules! skip_unless_root {
    () => {
        if let Some(reason) = util::root_skip_reason() {
            let name = std::thread::current().name().unwrap_or("test").to_string();
            eprintln!("SKIPPED {name}: {reason}");
            return;
        }
    };
}

pub(crate) use xload_testkit::TempDir;

/// A network namespace with veth pair `xa`/`xb` (4 rx and 4 tx queues each),
/// deleted on drop.
pub(crate) struct Netns {
    /// Namespace name.
    pub name: String,
}

impl Netns {
    /// Creates the namespace and the veth pair.
    pub(crate) fn new(tag: &str) -> Netns {
        let name = format!("xt-{}", unique(tag));
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.exec(&[
            "ip",
            "link",
            "add",
            "xa",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
            "type",
            "veth",
            "peer",
            "name",
            "xb",
            "numtxqueues",
            "4",
            "numrxqueues",
            "4",
        ]);
        ns.exec(&["ip", "link", "set", "xa", "up"]);
        ns.exec(&["ip", "link", "set", "xb", "up"]);
        ns
    }

    /// Runs a command inside; panics on failure.
    pub(crate) fn exec(&self, cmd: &[&str]) -> String {
        let mut args = vec!["netns", "exec", &self.name];
        args.extend_from_slice(cmd);
        run("ip", &args)
    }

    /// Reads a file as seen inside (sysfs remounted for the namespace).
    pub(crate) fn read(&self, path: &str) -> String {
        self.exec(&["cat", path])
    }

    /// Writes a file inside, behind xtune's back.
    pub(crate) fn write(&self, path: &str, value: &str) {
        self.exec(&["sh", "-c", &format!("echo '{value}' > {path}")]);
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "del", &self.name])
            .output();
    }
}

fn run(prog: &str, args: &[&str]) -> String {
    let o = Command::new(prog).args(args).output().expect("spawn");
    assert!(
        o.status.success(),
        "{prog} {args:?} failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// Online CPUs of this machine, as the kernel lists them.
pub(crate) fn online_cpus() -> Vec<u32> {
    let s = std::fs::read_to_string("/sys/devices/system/cpu/online").expect("online cpus");
    let mut out = Vec::new();
    for part in s.trim().split(',') {
        match part.split_once('-') {
            Some((a, b)) => out.extend(a.parse::<u32>().unwrap()..=b.parse::<u32>().unwrap()),
            None => out.push(part.parse().unwrap()),
        }
    }
    out
}

/// Hex mask of CPUs as the kernel prints it for a machine with fewer than 32 CPUs.
pub(crate) fn mask(cpus: &[u32]) -> u64 {
    cpus.iter().fold(0u64, |m, c| m | (1 << c))
}
