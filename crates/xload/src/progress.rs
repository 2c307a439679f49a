//! Per-tick aggregation across workers: the time series rows of the report and
//! the live status line on a terminal.

use std::collections::BTreeMap;
use std::io::Write;
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
    let mut total_requests = 0u64;
    let mut total_errors = 0u64;
    let mut printed = false;
    for t in rx {
        if let Some(b) = &board {
            b.add(t.worker, &t.interval);
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
            series.push(row, &iv, seq, tick_s, len_ns);
        }
    }
    // Ticks that not every worker reached: the last ones of workers that
    // stopped at different times (-n), each with what was measured in it.
    for (seq, (_, iv, len_ns)) in open {
        let row = row(seq, &iv, tick_s, len_ns);
        series.push(row, &iv, seq, tick_s, len_ns);
    }
    if printed {
        let _ = write!(std::io::stderr(), "\r\x1b[2K");
    }
    series
}

impl Series {
    fn push(&mut self, row: IntervalRow, iv: &Interval, seq: u64, tick_s: f64, len_ns: u64) {
        self.histograms
            .push(SecondHistogram::new(row.second, &iv.latency));
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
