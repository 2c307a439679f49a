//! What `observe` reads besides a [`crate::Sample`]: the run queue, the
//! interfaces' drop counters, and the CPU time of one named server process
//! (a pid, or every process of that name in this network namespace: the
//! server of a namespace lab, not another one of the same name elsewhere).

use std::fs;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::parse::{parse_net_dev, parse_procs_running, parse_task_stat, NetDevDrops};

/// Which process to follow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProcessSel {
    /// This pid.
    Pid(i32),
    /// Every process whose `comm` is this name, in the reader's network namespace.
    Name(String),
}

impl ProcessSel {
    /// `1234` is a pid, anything else a process name (`nginx`).
    pub fn parse(s: &str) -> Result<ProcessSel, String> {
        let s = s.trim();
        if s.is_empty() || s.contains('/') || s.len() > 15 && s.parse::<i32>().is_err() {
            return Err(format!(
                "process {s:?}: a pid or a process name (comm, at most 15 characters, as ps -o comm shows it)"
            ));
        }
        Ok(match s.parse::<i32>() {
            Ok(pid) if pid > 0 => ProcessSel::Pid(pid),
            Ok(_) => return Err(format!("process {s:?}: a pid is above 0")),
            Err(_) => ProcessSel::Name(s.to_string()),
        })
    }
}

/// One reading of the extras.
#[derive(Clone, Debug, Default)]
pub struct Extras {
    /// /proc/stat `procs_running`.
    pub procs_running: Option<u64>,
    /// /proc/net/dev drops, every interface.
    pub net_dev: Vec<NetDevDrops>,
    /// utime + stime of the followed processes, clock ticks (None: none found).
    pub process_ticks: Option<u64>,
}

/// Reads [`Extras`] from a proc root.
#[derive(Debug)]
pub struct Watch {
    root: PathBuf,
    process: Option<ProcessSel>,
    /// The pids of a name, found once and again when one goes away.
    pids: Vec<i32>,
    /// Readings left before a name not found is looked for again (a scan
    /// of /proc costs more than everything else observe reads).
    scan_in: u32,
}

/// Readings between two scans for a name not found.
const RESCAN_EVERY: u32 = 10;

impl Watch {
    /// A watch of `root` (`/proc`), following `process` if given.
    pub fn new(root: PathBuf, process: Option<ProcessSel>) -> Watch {
        Watch {
            root,
            process,
            pids: Vec::new(),
            scan_in: 0,
        }
    }

    /// The pids followed at the last reading.
    pub fn pids(&self) -> &[i32] {
        &self.pids
    }

    /// Reads everything once; a file this kernel or fixture lacks leaves its field empty.
    pub fn read(&mut self) -> Extras {
        let text = |rel: &str| fs::read_to_string(self.root.join(rel)).ok();
        Extras {
            procs_running: text("stat").as_deref().and_then(parse_procs_running),
            net_dev: text("net/dev")
                .as_deref()
                .and_then(|t| parse_net_dev(t).ok())
                .unwrap_or_default(),
            process_ticks: self.process_ticks(),
        }
    }

    fn process_ticks(&mut self) -> Option<u64> {
        let sel = self.process.clone()?;
        if self.pids.is_empty() {
            if self.scan_in > 0 {
                self.scan_in -= 1;
                return None;
            }
            self.pids = match &sel {
                ProcessSel::Pid(p) => vec![*p],
                ProcessSel::Name(n) => self.find(n),
            };
            if self.pids.is_empty() {
                self.scan_in = RESCAN_EVERY - 1;
            }
        }
        match self.ticks_of_pids() {
            Some(t) => Some(t),
            None if matches!(sel, ProcessSel::Name(_)) => {
                // A process went away (a worker restarted): look again.
                self.pids = match &sel {
                    ProcessSel::Name(n) => self.find(n),
                    ProcessSel::Pid(_) => Vec::new(),
                };
                self.ticks_of_pids()
            }
            None => None,
        }
    }

    /// Sum over the pids; None if there are none or one cannot be read.
    fn ticks_of_pids(&self) -> Option<u64> {
        if self.pids.is_empty() {
            return None;
        }
        let mut sum = 0u64;
        for pid in &self.pids {
            let text = fs::read_to_string(self.root.join(format!("{pid}/stat"))).ok()?;
            sum += parse_task_stat(&text).ok()?.cpu_ticks();
        }
        Some(sum)
    }

    /// Processes named `name` in this reader's network namespace.
    fn find(&self, name: &str) -> Vec<i32> {
        let own_ns = fs::read_link(self.root.join("self/ns/net")).ok();
        let Ok(entries) = fs::read_dir(&self.root) else {
            return Vec::new();
        };
        let mut pids: Vec<i32> = entries
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse::<i32>().ok())
            .filter(|pid| {
                let comm = fs::read_to_string(self.root.join(format!("{pid}/comm")));
                comm.is_ok_and(|c| c.trim_end() == name)
            })
            .filter(|pid| {
                let ns = fs::read_link(self.root.join(format!("{pid}/ns/net"))).ok();
                own_ns.is_none() || ns == own_ns
            })
            .collect();
        pids.sort_unstable();
        pids
    }
}

/// Per-interface drop deltas between two readings, interfaces with none left out.
pub fn drop_deltas(start: &[NetDevDrops], end: &[NetDevDrops]) -> Vec<NetDevDrops> {
    end.iter()
        .filter_map(|e| {
            let s = start.iter().find(|s| s.dev == e.dev)?;
            let d = NetDevDrops {
                dev: e.dev.clone(),
                rx_dropped: e.rx_dropped.saturating_sub(s.rx_dropped),
                rx_fifo: e.rx_fifo.saturating_sub(s.rx_fifo),
                tx_dropped: e.tx_dropped.saturating_sub(s.tx_dropped),
            };
            (d.rx_dropped + d.rx_fifo + d.tx_dropped > 0).then_some(d)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_a_pid_or_a_name() {
        assert_eq!(ProcessSel::parse("1234"), Ok(ProcessSel::Pid(1234)));
        assert_eq!(
            ProcessSel::parse("nginx"),
            Ok(ProcessSel::Name("nginx".into()))
        );
        for bad in ["", "0", "-3", "/usr/sbin/nginx", "a-name-far-too-long"] {
            assert!(ProcessSel::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn this_process_is_followed_by_pid_and_by_name_in_its_namespace() {
        let me = std::process::id() as i32;
        let mut w = Watch::new("/proc".into(), Some(ProcessSel::Pid(me)));
        assert!(w.read().process_ticks.is_some());
        let comm = fs::read_to_string("/proc/self/comm").unwrap();
        let mut w = Watch::new(
            "/proc".into(),
            Some(ProcessSel::Name(comm.trim().to_string())),
        );
        let e = w.read();
        assert!(e.process_ticks.is_some());
        assert!(w.pids().contains(&me), "{:?}", w.pids());
        assert!(e.procs_running.is_some_and(|n| n >= 1));
        assert!(e.net_dev.iter().any(|d| d.dev == "lo"));
    }

    #[test]
    fn a_name_not_found_is_looked_for_every_tenth_reading() {
        let dir = std::env::temp_dir().join(format!("watch-{}", std::process::id()));
        std::fs::create_dir_all(dir.join("42")).unwrap();
        let mut w = Watch::new(dir.clone(), Some(ProcessSel::Name("srv".into())));
        assert_eq!(w.read().process_ticks, None);
        // It starts now: found at the tenth reading after the miss, not before.
        std::fs::write(dir.join("42/comm"), "srv\n").unwrap();
        std::fs::write(dir.join("42/stat"), "42 (srv) S 1 1 1 0 -1 0 0 0 0 0 7 5 0 0 20 0 1 0 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 1 0 3\n").unwrap();
        let found: Vec<bool> = (0..10).map(|_| w.read().process_ticks.is_some()).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(found.iter().position(|&f| f), Some(9), "{found:?}");
        assert_eq!(w.pids(), &[42]);
    }

    #[test]
    fn drop_deltas_keep_interfaces_that_dropped() {
        let d = |dev: &str, rx, tx| NetDevDrops {
            dev: dev.into(),
            rx_dropped: rx,
            rx_fifo: 0,
            tx_dropped: tx,
        };
        let got = drop_deltas(
            &[d("lo", 0, 0), d("eth0", 5, 1)],
            &[d("lo", 0, 0), d("eth0", 9, 1)],
        );
        assert_eq!(got, vec![d("eth0", 4, 0)]);
    }
}
