//! Veth labs for tests and benchmarks. [`VethLab`]: `ip netns add` twice,
//! one veth pair with the requested queue count between them, addresses,
//! and removal of both namespaces (which destroys the pair) on drop.
//! [`ServerLab`] ([`server`]): one namespace for an HTTP server, the
//! generator end in the caller's namespace, receive steered per side.
//!
//! Uses the `ip` command (iproute2) because that is what a user would type;
//! every traffic source in tests stays inside these namespaces.

use std::io;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::frame::MacAddr;

pub mod server;
pub use server::{remove_orphans, LabServer, Orphan, ServerLab, ServerLabOptions};

/// Why a [`ServerLab`] cannot be built here, if it cannot: not root, or
/// no `ip` (iproute2), `ethtool` or `taskset` command.
pub fn unsupported_netns() -> Option<String> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root (network namespaces, bpf, AF_XDP)".into());
    }
    for (cmd, arg, package) in [
        ("ip", "-V", "iproute2"),
        ("ethtool", "--version", "ethtool"),
        ("taskset", "-V", "util-linux"),
    ] {
        if Command::new(cmd).arg(arg).output().is_err() {
            return Some(format!("the {cmd} command ({package}) is missing"));
        }
    }
    None
}

/// Why lab tests cannot run here, if they cannot: not root, no `ip`
/// command, no AF_XDP sockets or no `bpf()` in this kernel.
pub fn unsupported() -> Option<String> {
    if let Some(why) = unsupported_netns() {
        return Some(why);
    }
    // SAFETY: plain socket(2); closed right away.
    let fd = unsafe { libc::socket(libc::AF_XDP, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Some(format!(
            "no AF_XDP sockets in this kernel: {}",
            io::Error::last_os_error()
        ));
    }
    // SAFETY: fd was just opened and is not used elsewhere.
    unsafe { libc::close(fd) };
    if let Err(e) =
        crate::bpf::map_create(crate::bpf::MAP_TYPE_PERCPU_ARRAY, 4, 8, 1, "xload_probe")
    {
        return Some(format!("bpf() unavailable: {e}"));
    }
    None
}

/// Two namespaces joined by a veth pair; both are deleted on drop.
#[derive(Debug)]
pub struct VethLab {
    /// Namespace of the sending end.
    pub ns_tx: String,
    /// Namespace of the receiving end.
    pub ns_rx: String,
    pub dev_tx: String,
    pub dev_rx: String,
    pub mac_tx: MacAddr,
    pub mac_rx: MacAddr,
    pub ip_tx: String,
    pub ip_rx: String,
    pub queues: u32,
    created: Vec<String>,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

fn run(args: &[&str]) -> io::Result<Output> {
    let out = Command::new("ip").args(args).output()?;
    if !out.status.success() {
        return Err(io::Error::other(format!(
            "ip {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(out)
}

impl VethLab {
    /// Builds the lab; `queues` RX and TX queues on each end. IPv6 is
    /// disabled on the pair unless `ipv6` (no router/neighbour solicitations
    /// disturbing packet counts).
    pub fn new(queues: u32, ipv6: bool) -> io::Result<VethLab> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let id = format!("{}{}", std::process::id() % 100_000, n);
        let mut lab = VethLab {
            ns_tx: format!("xload-t{id}"),
            ns_rx: format!("xload-r{id}"),
            dev_tx: format!("xt{id}"),
            dev_rx: format!("xr{id}"),
            mac_tx: MacAddr([0x02, 0x58, 0x4c, 0x00, (n & 0xff) as u8, 0x01]),
            mac_rx: MacAddr([0x02, 0x58, 0x4c, 0x00, (n & 0xff) as u8, 0x02]),
            ip_tx: format!("10.{}.{}.1", 200 + (n / 256) % 50, n % 256),
            ip_rx: format!("10.{}.{}.2", 200 + (n / 256) % 50, n % 256),
            queues,
            created: Vec::new(),
        };
        run(&["netns", "add", &lab.ns_tx])?;
        lab.created.push(lab.ns_tx.clone());
        run(&["netns", "add", &lab.ns_rx])?;
        lab.created.push(lab.ns_rx.clone());
        let q = queues.max(1).to_string();
        run(&[
            "link",
            "add",
            &lab.dev_tx,
            "netns",
            &lab.ns_tx,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            &lab.dev_rx,
            "netns",
            &lab.ns_rx,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ])?;
        for (ns, dev, mac, ip) in [
            (&lab.ns_tx, &lab.dev_tx, lab.mac_tx, &lab.ip_tx),
            (&lab.ns_rx, &lab.dev_rx, lab.mac_rx, &lab.ip_rx),
        ] {
            run(&["-n", ns, "link", "set", dev, "address", &mac.to_string()])?;
            if !ipv6 {
                let out = Command::new("ip")
                    .args(["netns", "exec", ns, "sysctl", "-qw"])
                    .arg(format!("net.ipv6.conf.{dev}.disable_ipv6=1"))
                    .output()?;
                if !out.status.success() {
                    return Err(io::Error::other(format!(
                        "disable IPv6 on {dev}: {}",
                        String::from_utf8_lossy(&out.stderr).trim()
                    )));
                }
            }
            run(&["-n", ns, "addr", "add", &format!("{ip}/24"), "dev", dev])?;
            run(&["-n", ns, "link", "set", "lo", "up"])?;
        }
        run(&["-n", &lab.ns_tx, "link", "set", &lab.dev_tx, "up"])?;
        run(&["-n", &lab.ns_rx, "link", "set", &lab.dev_rx, "up"])?;
        Ok(lab)
    }

    /// `ip -n NS ARGS...`, returning stdout.
    pub fn ip(&self, ns: &str, args: &[&str]) -> io::Result<String> {
        let mut full = vec!["-n", ns];
        full.extend_from_slice(args);
        Ok(String::from_utf8_lossy(&run(&full)?.stdout).into_owned())
    }

    /// Whether `ip link show` lists an XDP program on `dev` in `ns`.
    pub fn xdp_listed(&self, ns: &str, dev: &str) -> io::Result<bool> {
        let out = self.ip(ns, &["link", "show", "dev", dev])?;
        Ok(out.contains("xdp") || out.contains("prog/xdp"))
    }

    /// Reads `/sys/class/net/DEV/statistics/NAME` as seen inside `ns`.
    pub fn sysfs_stat(&self, ns: &str, dev: &str, name: &str) -> io::Result<u64> {
        let out = Command::new("ip")
            .args(["netns", "exec", ns, "cat"])
            .arg(format!("/sys/class/net/{dev}/statistics/{name}"))
            .output()?;
        String::from_utf8_lossy(&out.stdout)
            .trim()
            .parse()
            .map_err(|e| io::Error::other(format!("{dev} {name}: {e}")))
    }
}

impl Drop for VethLab {
    fn drop(&mut self) {
        for ns in self.created.iter().rev() {
            let _ = Command::new("ip").args(["netns", "del", ns]).output();
        }
    }
}
