//! Per-tick aggregation across workers: the time series rows of the report and
//! the live status line on a terminal.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::sync::mpsc::Receiver;
use std::sync::Arc;
use std::thread::JoinHandle;

use xload_engine::Tick;
use xload_stats::{Interval, IntervalRow, SecondHistogram};

use crate::metrics::Board;

/// The per-second rows of a run, each with its latency histogram and when
/// it began and how long it lasted.
#[derive(Default)]
pub(crate) struct Series {
    pub rows: Vec<IntervalRow>,
    pub histograms: Vec<SecondHistogram>,
    pub spans: Vec<Span>,
}

/// When a row's interval began, from the start of the measured window, and
/// how long it lasted, in seconds (the last one may be shorter than a tick).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Span {
    pub start_s: f64,
    pub len_s: f64,
}

/// How progress is shown while a run goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Live {
    /// Not at all.
    Off,
    /// One status line redrawn in place (a terminal).
    Terminal,
    /// One plain line per tick on stderr, `xload progress: ...`
    /// (`--progress-lines`: what `xload --on` relays, prefixed by host).
    Lines,
}

/// The aggregator thread.
pub(crate) struct Progress {
    handle: JoinHandle<Series>,
}

impl Progress {
    /// Starts aggregating ticks from `workers` workers, showing them as `live` says.
    /// Each worker's interval is also added to `board` (`--metrics-listen`).
    pub(crate) fn spawn(
        rx: Receiver<Tick>,
        workers: usize,
        tick_s: f64,
        live: Live,
        board: Option<Arc<Board>>,
    ) -> Progress {
        let handle = std::thread::spawn(move || aggregate(rx, workers, tick_s, live, board));
        Progress { handle }
    }

    /// Waits for the workers' channel to close and returns the rows.
    pub(crate) fn finish(self) -> Series {
        self.handle.join().unwrap_or_default()
    }
}

/// The per-second histograms while the run lasts: in an unlinked temporary
/// file, so that a long run's memory does not grow by their ~1.5 KB a
/// second (a soak's RSS stays flat); read back when the run ends. In memory
/// where no temporary file can be made.
struct Spool {
    file: Option<File>,
    /// Each histogram's second and length in the file, in order.
    index: Vec<(u64, u32)>,
    memory: Vec<SecondHistogram>,
}

impl Spool {
    fn new() -> Spool {
        Spool {
            file: temp_file(),
            index: Vec::new(),
            memory: Vec::new(),
        }
    }

    fn push(&mut self, h: SecondHistogram) {
        // After a failed write (a full disk) every later one stays in memory,
        // so that the file's histograms all come before memory's.
        if self.memory.is_empty() {
            if let Some(f) = &mut self.file {
                if f.write_all(h.histogram.as_bytes()).is_ok() {
                    self.index.push((h.second, h.histogram.len() as u32));
                    return;
                }
            }
        }
        self.memory.push(h);
    }

    /// Every histogram, in the order pushed (the file's first).
    fn into_vec(mut self) -> Vec<SecondHistogram> {
        let mut out = Vec::with_capacity(self.index.len() + self.memory.len());
        if let Some(mut f) = self.file.take() {
            let mut text = String::new();
            let read = f
                .seek(SeekFrom::Start(0))
                .and_then(|_| f.read_to_string(&mut text));
            if read.is_ok() {
                let mut at = 0usize;
                for &(second, len) in &self.index {
                    let end = (at + len as usize).min(text.len());
                    out.push(SecondHistogram {
                        second,
                        histogram: text[at..end].to_string(),
                    });
                    at = end;
                }
            }
        }
        out.append(&mut self.memory);
        out
    }
}

/// An unlinked file in the temporary directory ($TMPDIR or /tmp).
fn temp_file() -> Option<File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .mode(0o600)
        .custom_flags(libc::O_TMPFILE)
        .open(std::env::temp_dir())
        .ok()
}

/// A tick being merged: how many workers sent it, their merged counts, and
/// the longest of their lengths (a last, partial tick may differ by worker).
type Open = (usize, Interval, u64);

fn aggregate(
    rx: Receiver<Tick>,
    workers: usize,
    tick_s: f64,
    live: Live,
    board: Option<Arc<Board>>,
) -> Series {
    let mut open: BTreeMap<u64, Open> = BTreeMap::new();
    let mut series = Series::default();
    let mut spool = Spool::new();
    let mut total_requests = 0u64;
    let mut total_errors = 0u64;
    let mut printed = false;
    for t in rx {
        if let Some(b) = &board {
            b.add(t.worker, &t.interval, t.in_flight);
        }
        let entry = open.entry(t.seq);
        let e = entry.or_insert_with(|| (0, Interval::new(), 0));
        e.0 += 1;
        e.1.merge(&t.interval);
        e.2 = e.2.max(t.len_ns);
        if e.0 < workers {
            continue;
        }
        // Complete: emit this and anything older still open (a worker that stopped early).
        while let Some((&seq, _)) = open.first_key_value() {
            if seq > t.seq {
                break;
            }
            let (_, (_, iv, len_ns)) = open.pop_first().expect("non-empty");
            let row = row(seq, &iv, tick_s, len_ns);
            total_requests += iv.requests;
            total_errors += iv.errors;
            if live != Live::Off {
                let line = format!(
                    "{:>5.0}s  {:>10.0} req/s  p50 {:>9}  p99 {:>9}  errors {}  (total {} responses)",
                    (seq + 1) as f64 * tick_s,
                    row.rps,
                    fmt_us(row.p50_us),
                    fmt_us(row.p99_us),
                    total_errors,
                    total_requests
                );
                let mut err = std::io::stderr().lock();
                let _ = if live == Live::Lines {
                    writeln!(err, "xload progress: {}", line.trim_start())
                } else {
                    write!(err, "\r\x1b[2K  {line}")
                };
                let _ = err.flush();
                printed = live == Live::Terminal;
            }
            series.push(&mut spool, row, &iv, seq, tick_s, len_ns);
        }
    }
    // Ticks that not every worker reached: the last ones of workers that
    // stopped at different times (-n), each with what was measured in it.
    for (seq, (_, iv, len_ns)) in open {
        let row = row(seq, &iv, tick_s, len_ns);
        series.push(&mut spool, row, &iv, seq, tick_s, len_ns);
    }
    series.histograms = spool.into_vec();
    if printed {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
    series
}

impl Series {
    fn push(
        &mut self,
        spool: &mut Spool,
        row: IntervalRow,
        iv: &Interval,
        seq: u64,
        tick_s: f64,
        len_ns: u64,
    ) {
        spool.push(SecondHistogram::new(row.second, &iv.latency));
        self.rows.push(row);
        self.spans.push(Span {
            start_s: seq as f64 * tick_s,
            len_s: (len_ns as f64 / 1e9).min(tick_s),
        });
    }
}

/// The row of tick `seq`, `len_ns` long (a tick, or less for a last,
/// partial one: its rate is over its own length, and it is labelled with
/// the second it ends in).
fn row(seq: u64, iv: &Interval, tick_s: f64, len_ns: u64) -> IntervalRow {
    let len_s = (len_ns as f64 / 1e9).min(tick_s);
    let end_s = seq as f64 * tick_s + len_s;
    let second = if len_s >= tick_s * 0.999 {
        end_s.round()
    } else {
        end_s.ceil()
    };
    IntervalRow::from_interval(second as u64, iv, len_s)
}

fn fmt_us(us: u64) -> String {
    xload_sys::fmt::fmt_us(us as f64, xload_sys::fmt::UsStyle::TwoDecimals)
}

/// The time series as CSV: one row per tick.
pub(crate) fn csv(rows: &[IntervalRow]) -> String {
    let mut s = String::from("second,rps,p50_us,p99_us,errors\n");
    for r in rows {
        s.push_str(&format!(
            "{},{:.1},{},{},{}\n",
            r.second, r.rps, r.p50_us, r.p99_us, r.errors
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(second: u64, text: &str) -> SecondHistogram {
        SecondHistogram {
            second,
            histogram: text.to_string(),
        }
    }

    #[test]
    fn the_spool_gives_back_every_histogram_in_order() {
        let mut spool = Spool::new();
        assert!(
            spool.file.is_some(),
            "no temporary file in {:?}",
            std::env::temp_dir()
        );
        let want: Vec<_> = (1..=500).map(|i| h(i, &format!("HISTFAAA{i}x"))).collect();
        for x in &want {
            spool.push(x.clone());
        }
        // Held in the file, not in memory.
        assert!(spool.memory.is_empty());
        assert_eq!(spool.into_vec(), want);
    }

    #[test]
    fn without_a_file_the_spool_keeps_them_in_memory() {
        let mut spool = Spool {
            file: None,
            index: Vec::new(),
            memory: Vec::new(),
        };
        spool.push(h(1, "a"));
        spool.push(h(2, ""));
        assert_eq!(spool.into_vec(), vec![h(1, "a"), h(2, "")]);
    }
}
