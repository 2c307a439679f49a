//! Where threads ran: each thread's CPU time between two readings of
//! /proc/self/task/TID/stat counted on the CPU it last ran on (field 39,
//! `processor`). Sampled often over a window, it tells on which CPUs
//! unpinned workers spent their time, where one reading at the end names
//! only the CPU each ran on last.

use std::collections::BTreeMap;

use crate::parse::ThreadTimes;

/// CPU ticks per (thread, CPU), accumulated over successive readings.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Placement {
    last: Vec<ThreadTimes>,
    ticks: BTreeMap<(i32, usize), u64>,
}

impl Placement {
    /// Adds one reading of the threads (sorted or not): each thread's CPU
    /// time since its previous reading counts on the CPU it last ran on
    /// now. A thread's first reading only sets its start.
    pub fn observe(&mut self, threads: &[ThreadTimes]) {
        for t in threads {
            let Some(p) = self.last.iter().find(|p| p.tid == t.tid) else {
                continue;
            };
            let d = t.cpu_ticks().saturating_sub(p.cpu_ticks());
            if d > 0 {
                *self.ticks.entry((t.tid, t.last_cpu)).or_default() += d;
            }
        }
        self.last.clear();
        self.last.extend_from_slice(threads);
    }

    /// The ticks the threads `tids` used on each CPU.
    pub fn cpu_ticks(&self, tids: &[i32]) -> BTreeMap<usize, u64> {
        let mut out = BTreeMap::new();
        for (&(tid, cpu), &n) in &self.ticks {
            if tids.contains(&tid) {
                *out.entry(cpu).or_default() += n;
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(tid: i32, ticks: u64, cpu: usize) -> ThreadTimes {
        ThreadTimes {
            tid,
            comm: "w".into(),
            state: 'R',
            utime_ticks: ticks,
            stime_ticks: 1,
            last_cpu: cpu,
        }
    }

    #[test]
    fn time_counts_on_the_cpu_each_thread_ran_on_between_readings() {
        let mut p = Placement::default();
        p.observe(&[t(10, 5, 1), t(11, 0, 0)]);
        p.observe(&[t(10, 15, 0), t(11, 7, 0)]);
        p.observe(&[t(10, 20, 0), t(11, 9, 1), t(12, 50, 1)]);
        // 12's first reading only starts it; 99 never ran.
        assert_eq!(
            p.cpu_ticks(&[10, 11, 12, 99]),
            BTreeMap::from([(0, 22), (1, 2)])
        );
        assert_eq!(p.cpu_ticks(&[10]), BTreeMap::from([(0, 15)]));
        assert!(p.cpu_ticks(&[99]).is_empty());
    }
}
