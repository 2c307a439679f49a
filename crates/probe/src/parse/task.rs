//! `/proc/<pid>/stat` and `/proc/<pid>/task/<tid>/stat`: CPU time of a process or thread.

use serde::{Deserialize, Serialize};

use super::parse_u64;
use crate::error::{ParseErrorKind, ProbeError};

const WHAT: &str = "/proc/<pid>/task/<tid>/stat";

/// CPU time of one thread (or, from /proc/<pid>/stat, of a whole process including its
/// exited threads).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThreadTimes {
    /// Thread id (process id for /proc/<pid>/stat).
    pub tid: i32,
    /// The thread name (`comm`, at most 15 bytes; may contain spaces and parentheses).
    pub comm: String,
    /// Scheduler state letter (`R`, `S`, `D`, ...).
    pub state: char,
    /// Time in user mode, clock ticks.
    pub utime_ticks: u64,
    /// Time in kernel mode, clock ticks.
    pub stime_ticks: u64,
    /// CPU the thread last ran on (field 39, `processor`).
    pub last_cpu: usize,
}

impl ThreadTimes {
    /// utime + stime, clock ticks.
    pub fn cpu_ticks(&self) -> u64 {
        self.utime_ticks.saturating_add(self.stime_ticks)
    }
}

/// Field numbers (1-based, as in proc(5)) of what we read.
const F_UTIME: usize = 14;
const F_STIME: usize = 15;
const F_PROCESSOR: usize = 39;

/// Parses one stat line: `tid (comm) state ppid ... utime stime ... processor ...`.
///
/// `comm` is found between the first `(` and the *last* `)`, because the name itself
/// may contain `)` and spaces (`x) (y z` is a valid thread name).
pub fn parse_task_stat(text: &str) -> Result<ThreadTimes, ProbeError> {
    let text = text.trim_end_matches(['\n', '\0']);
    if text.trim().is_empty() {
        return Err(ProbeError::parse(WHAT, 0, ParseErrorKind::Empty));
    }
    let open = text
        .find('(')
        .ok_or_else(|| ProbeError::parse(WHAT, 1, ParseErrorKind::MissingField("(comm)")))?;
    let close = text
        .rfind(')')
        .filter(|c| *c > open)
        .ok_or_else(|| ProbeError::parse(WHAT, 1, ParseErrorKind::NoCommEnd))?;
    let tid_text = text.get(..open).unwrap_or_default().trim();
    let tid = tid_text
        .parse::<i32>()
        .map_err(|_| ProbeError::parse(WHAT, 1, ParseErrorKind::BadNumber(tid_text.into())))?;
    let comm = text.get(open + 1..close).unwrap_or_default().to_owned();
    // Fields from 3 (state) on.
    let rest: Vec<&str> = text
        .get(close + 1..)
        .unwrap_or_default()
        .split_whitespace()
        .collect();
    let field = |n: usize| -> Result<&str, ProbeError> {
        rest.get(n - 3).copied().ok_or_else(|| {
            ProbeError::parse(
                WHAT,
                1,
                ParseErrorKind::TooFewColumns {
                    expected: F_PROCESSOR,
                    found: rest.len() + 2,
                },
            )
        })
    };
    let state_text = field(3)?;
    let mut chars = state_text.chars();
    let state = match (chars.next(), chars.next()) {
        (Some(c), None) if c.is_ascii_alphabetic() => c,
        _ => {
            return Err(ProbeError::parse(
                WHAT,
                1,
                ParseErrorKind::BadLine(state_text.into()),
            ))
        }
    };
    let utime_ticks = parse_u64(WHAT, 1, field(F_UTIME)?)?;
    let stime_ticks = parse_u64(WHAT, 1, field(F_STIME)?)?;
    let processor = field(F_PROCESSOR)?;
    let last_cpu = processor
        .parse::<usize>()
        .map_err(|_| ProbeError::parse(WHAT, 1, ParseErrorKind::BadNumber(processor.into())))?;
    Ok(ThreadTimes {
        tid,
        comm,
        state,
        utime_ticks,
        stime_ticks,
        last_cpu,
    })
}
