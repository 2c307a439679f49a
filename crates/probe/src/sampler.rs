//! Reading one [`Sample`] of the host from /proc (or from a fixture tree).

use std::fs;
use std::io::ErrorKind;
use std::path::{Path, PathBuf};
use std::time::Instant;

use crate::error::ProbeError;
use crate::parse::{
    parse_interrupts, parse_snmp_table, parse_sockstat, parse_softirqs, parse_stat,
    parse_task_stat, tcp_counters, CpuTimes, IrqLine, SockStat, Softirqs, TcpCounters, ThreadTimes,
};

/// Clock ticks per second of the /proc time columns (`sysconf(_SC_CLK_TCK)`, USER_HZ).
/// Falls back to 100, the value every Linux ABI exports, if sysconf fails.
pub fn ticks_per_s() -> u64 {
    // SAFETY: sysconf takes an integer name and touches no memory of ours; it is
    // async-signal-safe and has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    u64::try_from(ticks).ok().filter(|t| *t > 0).unwrap_or(100)
}

/// Everything the probe reads at one instant.
#[derive(Clone, Debug)]
pub struct Sample {
    /// When the sample was taken (before the first read).
    pub at: Instant,
    /// Clock ticks per second of the tick columns below.
    pub ticks_per_s: u64,
    /// Per-CPU time counters from /proc/stat, clock ticks.
    pub cpus: Vec<CpuTimes>,
    /// /proc/softirqs (NET_RX, NET_TX, ... per CPU).
    pub softirqs: Softirqs,
    /// /proc/interrupts lines.
    pub interrupts: Vec<IrqLine>,
    /// CPU number of each count column of `interrupts` (online CPUs).
    pub irq_cpus: Vec<usize>,
    /// TCP counters from /proc/net/snmp and /proc/net/netstat.
    pub tcp: TcpCounters,
    /// /proc/net/sockstat.
    pub sockstat: SockStat,
    /// This process as a whole (/proc/self/stat; includes threads that have exited).
    pub process: ThreadTimes,
    /// This process's live threads (/proc/self/task/*/stat), sorted by tid.
    pub threads: Vec<ThreadTimes>,
    /// Open file descriptors of this process (entries of /proc/self/fd, which includes
    /// the one handle used to list it).
    pub fds_open: usize,
}

/// Reads [`Sample`]s from a proc root: `/proc` by default, or a fixture directory laid
/// out the same way (`stat`, `softirqs`, `interrupts`, `net/{snmp,netstat,sockstat}`,
/// `self/{stat,task/<tid>/stat,fd/}`).
#[derive(Debug)]
pub struct Sampler {
    root: PathBuf,
    ticks_per_s: u64,
    buf: String,
}

impl Default for Sampler {
    fn default() -> Self {
        Self::new()
    }
}

impl Sampler {
    /// A sampler of this host and this process, via /proc.
    pub fn new() -> Self {
        Self::with_root(PathBuf::from("/proc"))
    }

    /// A sampler reading from `root` instead of /proc.
    pub fn with_root(root: PathBuf) -> Self {
        Sampler {
            root,
            ticks_per_s: ticks_per_s(),
            buf: String::with_capacity(64 * 1024),
        }
    }

    /// The proc root this sampler reads.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Clock ticks per second used for the tick columns.
    pub fn ticks_per_s(&self) -> u64 {
        self.ticks_per_s
    }

    /// Reads every source once.
    pub fn sample(&mut self) -> Result<Sample, ProbeError> {
        let at = Instant::now();
        let cpus = parse_stat(self.read("stat")?)?;
        let softirqs = parse_softirqs(self.read("softirqs")?)?;
        let interrupts = parse_interrupts(self.read("interrupts")?)?;
        let snmp = parse_snmp_table("/proc/net/snmp", self.read("net/snmp")?)?;
        let netstat = parse_snmp_table("/proc/net/netstat", self.read("net/netstat")?)?;
        let tcp = tcp_counters(&snmp, &netstat)?;
        let sockstat = parse_sockstat(self.read("net/sockstat")?)?;
        let process = parse_task_stat(self.read("self/stat")?)?;
        let threads = self.all_threads()?;
        let fds_open = self.count_fds()?;
        Ok(Sample {
            at,
            ticks_per_s: self.ticks_per_s,
            cpus,
            softirqs,
            interrupts: interrupts.lines,
            irq_cpus: interrupts.cpus,
            tcp,
            sockstat,
            process,
            threads,
            fds_open,
        })
    }

    /// Reads only the given threads of this process; threads that have exited are left
    /// out rather than reported as errors.
    pub fn sample_threads(&mut self, tids: &[i32]) -> Result<Vec<ThreadTimes>, ProbeError> {
        let mut out = Vec::with_capacity(tids.len());
        for tid in tids {
            if let Some(t) = self.thread(&tid.to_string())? {
                out.push(t);
            }
        }
        Ok(out)
    }

    /// Reads every live thread of this process, sorted by tid.
    pub fn threads(&mut self) -> Result<Vec<ThreadTimes>, ProbeError> {
        self.all_threads()
    }

    fn all_threads(&mut self) -> Result<Vec<ThreadTimes>, ProbeError> {
        let dir = self.root.join("self/task");
        let entries = fs::read_dir(&dir).map_err(|source| ProbeError::Io {
            path: dir.clone(),
            source,
        })?;
        let mut names = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|source| ProbeError::Io {
                path: dir.clone(),
                source,
            })?;
            if let Some(name) = entry.file_name().to_str() {
                if name.bytes().all(|b| b.is_ascii_digit()) {
                    names.push(name.to_owned());
                }
            }
        }
        let mut out = Vec::with_capacity(names.len());
        for name in names {
            if let Some(t) = self.thread(&name)? {
                out.push(t);
            }
        }
        out.sort_by_key(|t| t.tid);
        Ok(out)
    }

    /// One thread's stat, or None if the thread is gone (ENOENT/ESRCH between listing
    /// and reading is normal for a live process).
    fn thread(&mut self, tid: &str) -> Result<Option<ThreadTimes>, ProbeError> {
        let path = self.root.join("self/task").join(tid).join("stat");
        self.buf.clear();
        match fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_to_string(&mut f, &mut self.buf))
        {
            Ok(_) => parse_task_stat(&self.buf).map(Some),
            Err(e) if e.kind() == ErrorKind::NotFound || e.raw_os_error() == Some(libc::ESRCH) => {
                Ok(None)
            }
            Err(source) => Err(ProbeError::Io { path, source }),
        }
    }

    fn count_fds(&self) -> Result<usize, ProbeError> {
        let dir = self.root.join("self/fd");
        let entries = fs::read_dir(&dir).map_err(|source| ProbeError::Io {
            path: dir.clone(),
            source,
        })?;
        Ok(entries.filter(|e| e.is_ok()).count())
    }

    fn read(&mut self, rel: &str) -> Result<&str, ProbeError> {
        let path = self.root.join(rel);
        self.buf.clear();
        fs::File::open(&path)
            .and_then(|mut f| std::io::Read::read_to_string(&mut f, &mut self.buf))
            .map_err(|source| ProbeError::Io { path, source })?;
        Ok(&self.buf)
    }
}
