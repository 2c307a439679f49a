//! The HTTP veth lab: one network namespace holding the server end of a veth
//! pair, the generator end in the calling (root) namespace, so a load
//! generator runs as an ordinary process and only the server is fenced off.
//!
//! Receive steering makes each side's receive work land on its own CPU:
//! RPS on the server end sends the server's receive softirq to the server
//! CPU, RPS on the generator end sends the generator's to the generator CPU
//! (a veth delivers on the sender's CPU otherwise, and one side's receive
//! would be charged to the other). The server end computes its checksums in
//! software (`ethtool -K tx off`): frames leave it complete, as from a NIC,
//! so a user-space stack on the generator end can check them.
//!
//! Servers started in the lab ([`ServerLab::start_nginx`],
//! [`ServerLab::start_command`]) are killed before the namespace is deleted;
//! deleting it destroys the pair. Both happen on drop. A lab whose owner was
//! killed outright (SIGKILL) has no drop: its namespace is named after the
//! owner (`xload-lab-PID-START-N`, START the owner's start time in clock
//! ticks since boot, so a reused pid is another process), and
//! [`remove_orphans`] finds and removes the labs whose owner is gone.

use std::fs;
use std::io;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use super::run;
use crate::frame::MacAddr;

/// Where the two ends' receive work and the servers run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ServerLabOptions {
    /// CPU of the server end's receive (RPS) and of servers started here.
    pub server_cpu: usize,
    /// CPU of the generator end's receive (RPS).
    pub client_cpu: usize,
}

impl Default for ServerLabOptions {
    fn default() -> Self {
        ServerLabOptions {
            server_cpu: 1,
            client_cpu: 0,
        }
    }
}

/// A process started inside the lab's namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LabServer {
    pub pid: u32,
    /// Where it listens (the server end's address).
    pub addr: SocketAddr,
}

/// One namespace with the server end of a veth pair; the generator end in
/// the caller's namespace. Servers are killed and the namespace deleted on
/// drop.
#[derive(Debug)]
pub struct ServerLab {
    /// The server's namespace.
    pub ns: String,
    /// The generator end, in the caller's namespace.
    pub dev_gen: String,
    /// The server end, inside `ns`.
    pub dev_srv: String,
    pub mac_gen: MacAddr,
    pub mac_srv: MacAddr,
    /// The kernel's address on the generator end.
    pub ip_gen: Ipv4Addr,
    /// The server's address.
    pub ip_srv: Ipv4Addr,
    /// An address in the lab's subnet that no kernel owns: a user-space
    /// stack on the generator end claims it (and answers ARP for it).
    pub ip_user: Ipv4Addr,
    pub options: ServerLabOptions,
    servers: Vec<Child>,
    dirs: Vec<PathBuf>,
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// The start of every lab namespace's name: `xload-lab-PID-START-N`.
pub const LAB_PREFIX: &str = "xload-lab-";

/// How long a started server has to accept a connection.
const START_TIMEOUT: Duration = Duration::from_secs(10);

impl ServerLab {
    /// Creates the namespace, the pair, addresses (a free /24 in
    /// 10.96.0.0/11), RPS on both ends and software checksums on the server
    /// end. IPv6 is off on the pair (no solicitations in the counts).
    pub fn new(options: ServerLabOptions) -> io::Result<ServerLab> {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let start = start_ticks(pid).ok_or_else(|| {
            io::Error::other("cannot read this process's start time (/proc/self/stat)")
        })?;
        // Device names have at most 15 bytes: pid (at most 7 digits) and n.
        let id = format!("{pid}-{n}");
        let (b, c) = free_subnet(pid.wrapping_mul(7).wrapping_add(n))?;
        let mut lab = ServerLab {
            ns: format!("{LAB_PREFIX}{pid}-{start}-{n}"),
            dev_gen: format!("xg{id}"),
            dev_srv: format!("xs{id}"),
            mac_gen: MacAddr([0x02, 0x58, 0x4c, 0x01, (n & 0xff) as u8, 0x01]),
            mac_srv: MacAddr([0x02, 0x58, 0x4c, 0x01, (n & 0xff) as u8, 0x02]),
            ip_gen: Ipv4Addr::new(10, b, c, 1),
            ip_srv: Ipv4Addr::new(10, b, c, 2),
            ip_user: Ipv4Addr::new(10, b, c, 3),
            options,
            servers: Vec::new(),
            dirs: Vec::new(),
        };
        run(&["netns", "add", &lab.ns])?;
        // From here on, drop deletes the namespace (and with it the pair).
        let built = lab.build();
        built.map(|()| lab)
    }

    fn build(&mut self) -> io::Result<()> {
        let (ns, gen, srv) = (self.ns.clone(), self.dev_gen.clone(), self.dev_srv.clone());
        run(&[
            "link", "add", &gen, "type", "veth", "peer", "name", &srv, "netns", &ns,
        ])?;
        run(&["link", "set", &gen, "address", &self.mac_gen.to_string()])?;
        run(&[
            "-n",
            &ns,
            "link",
            "set",
            &srv,
            "address",
            &self.mac_srv.to_string(),
        ])?;
        write_file(&format!("/proc/sys/net/ipv6/conf/{gen}/disable_ipv6"), "1")?;
        self.in_ns(&[
            "sh",
            "-c",
            &format!("echo 1 > /proc/sys/net/ipv6/conf/{srv}/disable_ipv6"),
        ])?;
        run(&["addr", "add", &format!("{}/24", self.ip_gen), "dev", &gen])?;
        run(&[
            "-n",
            &ns,
            "addr",
            "add",
            &format!("{}/24", self.ip_srv),
            "dev",
            &srv,
        ])?;
        run(&["-n", &ns, "link", "set", "lo", "up"])?;
        run(&["link", "set", &gen, "up"])?;
        run(&["-n", &ns, "link", "set", &srv, "up"])?;
        let mask = |cpu: usize| cpu_mask(cpu);
        write_file(
            &format!("/sys/class/net/{gen}/queues/rx-0/rps_cpus"),
            &mask(self.options.client_cpu)?,
        )?;
        // `ip netns exec` mounts the namespace's own sysfs.
        self.in_ns(&[
            "sh",
            "-c",
            &format!(
                "echo {} > /sys/class/net/{srv}/queues/rx-0/rps_cpus",
                mask(self.options.server_cpu)?
            ),
        ])?;
        self.in_ns(&["ethtool", "-K", &srv, "tx", "off"])?;
        Ok(())
    }

    /// Runs `args` inside the namespace and waits; an error carries stderr.
    pub fn in_ns(&self, args: &[&str]) -> io::Result<String> {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.ns])
            .args(args)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| io::Error::other(format!("{}: {e}", args.join(" "))))?;
        if !out.status.success() {
            return Err(io::Error::other(format!(
                "in {}: {}: {}",
                self.ns,
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Starts `program args` inside the namespace pinned to the server CPU
    /// and waits until `port` on the server address accepts a connection.
    /// Killed on drop.
    pub fn start_command(
        &mut self,
        program: &Path,
        args: &[String],
        port: u16,
        log: Option<&Path>,
    ) -> io::Result<LabServer> {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.ns, "taskset", "-c"])
            .arg(self.options.server_cpu.to_string())
            .arg(program)
            .args(args)
            .stdin(Stdio::null());
        match log {
            Some(path) => {
                let f = fs::File::create(path)?;
                cmd.stdout(f.try_clone()?).stderr(f);
            }
            None => {
                cmd.stdout(Stdio::null()).stderr(Stdio::null());
            }
        }
        // `ip netns exec` and `taskset` exec into the program: one pid.
        let child = cmd
            .spawn()
            .map_err(|e| io::Error::other(format!("{}: {e}", program.display())))?;
        let pid = child.id();
        self.servers.push(child);
        let addr = SocketAddr::from((self.ip_srv, port));
        let deadline = Instant::now() + START_TIMEOUT;
        loop {
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(LabServer { pid, addr });
            }
            let exited = self
                .servers
                .last_mut()
                .and_then(|c| c.try_wait().ok().flatten());
            if let Some(status) = exited {
                return Err(io::Error::other(format!(
                    "{} exited ({status}) before listening on {addr}",
                    program.display()
                )));
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!(
                    "{} does not accept on {addr} after {START_TIMEOUT:?}",
                    program.display()
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Starts nginx (one process, pinned to the server CPU) on `port` of the
    /// server address with [`nginx_config`]; its files live in a temporary
    /// directory removed on drop.
    pub fn start_nginx(&mut self, nginx: &Path, port: u16) -> io::Result<LabServer> {
        let dir = std::env::temp_dir().join(format!("{}-nginx{port}", self.ns));
        fs::create_dir_all(&dir)?;
        self.dirs.push(dir.clone());
        let conf = dir.join("nginx.conf");
        fs::write(
            &conf,
            nginx_config(&dir, SocketAddr::from((self.ip_srv, port))),
        )?;
        let args = [
            "-p".to_string(),
            format!("{}/", dir.display()),
            "-e".to_string(),
            dir.join("error.log").display().to_string(),
            "-c".to_string(),
            conf.display().to_string(),
        ];
        let log = dir.join("stderr.log");
        self.start_command(nginx, &args, port, Some(&log))
    }
}

impl Drop for ServerLab {
    fn drop(&mut self) {
        for child in &mut self.servers {
            // SAFETY: kill(2) on a child we spawned and have not reaped.
            unsafe { libc::kill(child.id() as libc::pid_t, libc::SIGTERM) };
        }
        for child in &mut self.servers {
            let deadline = Instant::now() + Duration::from_secs(3);
            while matches!(child.try_wait(), Ok(None)) && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = Command::new("ip").args(["netns", "del", &self.ns]).output();
        // The pair usually goes with the namespace; make sure.
        let _ = Command::new("ip")
            .args(["link", "del", &self.dev_gen])
            .stderr(Stdio::null())
            .output();
        for dir in &self.dirs {
            let _ = fs::remove_dir_all(dir);
        }
    }
}

/// A lab left behind by an owner that is gone, as [`remove_orphans`] found it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Orphan {
    /// The namespace.
    pub ns: String,
    /// The pid of the process that made it.
    pub owner: u32,
    /// The processes found running inside (its servers), killed.
    pub killed: Vec<u32>,
}

/// The owner pid and start time a lab namespace's name records, if it is
/// one (`xload-lab-PID-START-N`).
pub fn lab_owner(ns: &str) -> Option<(u32, u64)> {
    let mut parts = ns.strip_prefix(LAB_PREFIX)?.split('-');
    let (pid, start, n) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() || n.parse::<u32>().is_err() {
        return None;
    }
    Some((pid.parse().ok()?, start.parse().ok()?))
}

/// Whether the process that made a lab still runs: `pid` exists and
/// started at `start` (a pid handed to a newer process is not the owner).
fn owner_alive(pid: u32, start: u64) -> bool {
    start_ticks(pid) == Some(start)
}

/// Start time of `pid` in clock ticks since boot (`/proc/PID/stat` field
/// 22), None when there is no such process.
fn start_ticks(pid: u32) -> Option<u64> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and ')': fields after it
    // start past the last ')'; field 22 is the 20th of those.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// Removes every lab (see [`ServerLab`]) whose owner is gone: the
/// processes inside its namespace (its servers) are killed, the namespace
/// is deleted (which destroys the veth pair) and its temporary directories
/// removed. Labs of running owners, and namespaces of any other name, are
/// left alone. Returns the labs removed; an error names the first lab that
/// could not be.
pub fn remove_orphans() -> io::Result<Vec<Orphan>> {
    let names = match fs::read_dir("/run/netns") {
        Ok(rd) => rd
            .filter_map(|e| e.ok())
            .filter_map(|e| e.file_name().into_string().ok())
            .collect::<Vec<_>>(),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(io::Error::other(format!("/run/netns: {e}"))),
    };
    let mut removed = Vec::new();
    for ns in names {
        let Some((owner, start)) = lab_owner(&ns) else {
            continue;
        };
        if owner_alive(owner, start) {
            continue;
        }
        // Another xload may be removing the same lab at once: one that
        // vanished under our hands is not an error, nor ours to report.
        let gone = || !Path::new("/run/netns").join(&ns).exists();
        let killed = match kill_inside(&ns) {
            Ok(k) => k,
            Err(_) if gone() => continue,
            Err(e) => return Err(e),
        };
        match run(&["netns", "del", &ns]) {
            Ok(_) => {}
            Err(_) if gone() => continue,
            Err(e) => return Err(e),
        }
        remove_temp_dirs(&ns);
        removed.push(Orphan { ns, owner, killed });
    }
    Ok(removed)
}

/// Kills the processes in namespace `ns` (SIGTERM, then SIGKILL after 3 s)
/// and waits until none is left; their pids.
fn kill_inside(ns: &str) -> io::Result<Vec<u32>> {
    let pids = |sig: Option<libc::c_int>| -> io::Result<Vec<u32>> {
        let out = run(&["netns", "pids", ns])?;
        let list: Vec<u32> = String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect();
        if let Some(sig) = sig {
            for &p in &list {
                // SAFETY: kill(2) with a signal number; the pids are the
                // processes inside a lab namespace whose owner is gone.
                unsafe { libc::kill(p as libc::pid_t, sig) };
            }
        }
        Ok(list)
    };
    let first = pids(Some(libc::SIGTERM))?;
    let deadline = Instant::now() + Duration::from_secs(3);
    while !pids(None)?.is_empty() {
        if Instant::now() > deadline {
            pids(Some(libc::SIGKILL))?;
            let hard = Instant::now() + Duration::from_secs(5);
            while !pids(None)?.is_empty() {
                if Instant::now() > hard {
                    return Err(io::Error::other(format!(
                        "{ns}: processes still inside after SIGKILL"
                    )));
                }
                std::thread::sleep(Duration::from_millis(20));
            }
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(first)
}

/// The temporary directories a lab made (`NS-nginxPORT`).
fn remove_temp_dirs(ns: &str) {
    let prefix = format!("{ns}-nginx");
    let Ok(rd) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in rd.filter_map(|e| e.ok()) {
        if e.file_name().to_string_lossy().starts_with(&prefix) {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

/// nginx for the lab: one process (`master_process off`, so pinning it is
/// pinning the worker, and killing it leaves no orphan), no logging on the
/// hot path, keep-alive without a request cap, `= /` an empty 200,
/// `/stub` stub_status.
pub fn nginx_config(dir: &Path, listen: SocketAddr) -> String {
    let dir = dir.display();
    format!(
        r#"daemon off;
master_process off;
worker_processes 1;
pid {dir}/nginx.pid;
error_log {dir}/error.log warn;
worker_rlimit_nofile 65536;
events {{
    worker_connections 16384;
}}
http {{
    access_log off;
    default_type text/plain;
    client_body_temp_path {dir}/client_body;
    proxy_temp_path {dir}/proxy;
    fastcgi_temp_path {dir}/fastcgi;
    uwsgi_temp_path {dir}/uwsgi;
    scgi_temp_path {dir}/scgi;
    keepalive_requests 1000000000;
    keepalive_timeout 75s;
    server {{
        listen {listen} backlog=4096;
        server_name lab;
        location = / {{ return 200 ""; }}
        location = /small {{ return 200 "hello from nginx, a small body\n"; }}
        location /stub {{ stub_status; }}
        location / {{ return 404; }}
    }}
}}
"#
    )
}

/// The hex CPU mask sysfs takes for one CPU.
fn cpu_mask(cpu: usize) -> io::Result<String> {
    if cpu >= 64 {
        return Err(io::Error::other(format!(
            "CPU {cpu}: the lab pins CPUs 0-63"
        )));
    }
    Ok(format!("{:x}", 1u64 << cpu))
}

fn write_file(path: &str, value: &str) -> io::Result<()> {
    fs::write(path, value).map_err(|e| io::Error::other(format!("{path}: {e}")))
}

/// A 10.B.C.0/24 (B in 96..128) that no address or route of this namespace
/// uses, starting the search at `seed` so parallel labs rarely race for one.
fn free_subnet(seed: u32) -> io::Result<(u8, u8)> {
    let routes = String::from_utf8_lossy(&run(&["-4", "route", "show", "table", "all"])?.stdout)
        .into_owned();
    let addrs = String::from_utf8_lossy(&run(&["-4", "addr", "show"])?.stdout).into_owned();
    for i in 0..(32 * 256) {
        let k = (seed.wrapping_add(i)) % (32 * 256);
        let (b, c) = (96 + (k / 256) as u8, (k % 256) as u8);
        let prefix = format!("10.{b}.{c}.");
        if !routes.contains(&prefix) && !addrs.contains(&prefix) {
            return Ok((b, c));
        }
    }
    Err(io::Error::other("no free /24 in 10.96.0.0/11 for the lab"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lab_name_records_its_owner_and_only_a_live_owner_keeps_it() {
        let me = std::process::id();
        let start = start_ticks(me).expect("own start time");
        let ns = format!("{LAB_PREFIX}{me}-{start}-3");
        assert_eq!(lab_owner(&ns), Some((me, start)));
        assert!(owner_alive(me, start));
        // The same pid started at another time is another process.
        assert!(!owner_alive(me, start + 1));
        for other in [
            "xload-lab12340",
            "xload-lab-1-2",
            "xload-lab-1-2-x",
            "xload-lab-1-2-3-4",
            "lab1",
        ] {
            assert_eq!(lab_owner(other), None, "{other}");
        }
    }

    #[test]
    fn cpu_masks_are_hex_bits() {
        assert_eq!(cpu_mask(0).unwrap(), "1");
        assert_eq!(cpu_mask(1).unwrap(), "2");
        assert_eq!(cpu_mask(13).unwrap(), "2000");
        assert!(cpu_mask(64).is_err());
    }

    #[test]
    fn nginx_config_listens_on_the_lab_address() {
        let conf = nginx_config(Path::new("/tmp/x"), "10.96.1.2:80".parse().unwrap());
        assert!(conf.contains("listen 10.96.1.2:80 backlog=4096;"));
        assert!(conf.contains("stub_status"));
        assert!(conf.contains("master_process off;"));
    }
}
