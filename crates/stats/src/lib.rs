//! Statistics for xload: what each worker records, how records merge, and
//! how a run is reported and judged: the knee and operating range of a
//! sweep ([`knee`]), thresholds and service levels ([`gate`]).
//!
//! Main design choice: **one [`Recorder`] per worker thread, never shared**.
//! The hot path ([`Recorder::record_response`]) is a histogram increment and
//! a few counter adds on memory the worker owns: no locks, no atomics, no
//! allocation. Recorders merge exactly (histogram counts per value are
//! summed), at the end of a run or per tick ([`Recorder::take_interval`]),
//! and a [`Report`] is built from the merged recorder.
//!
//! Latency lives in HdrHistograms (1 µs .. 1 h, 3 significant digits). The
//! JSON report (schema `xload/1`) carries the histogram in HdrHistogram's
//! V2 compressed base64 form ("HISTFAAA…"), so reports from several runs or
//! hosts merge exactly ([`Report::merge`]) and other HdrHistogram tools can
//! read them. Percentiles are always recomputed from histograms, never
//! averaged. Before a merge, [`MergeCheck`] says whether reports make one
//! load (one run, each once, over one interval).
//!
//! JSON keys beyond the required set of docs/json.md: the run's place in a run of
//! several hosts ([`RunInfo`]: `run_id`, `segment`, `host`, `started_at`,
//! `start_at`, `start_error_us`, `xload_version`, `argv`, `settings`, right
//! after `schema`), `engine_reason`, `pipeline`,
//! `bytes_sent`, `connects`, `parse_errors` (cause -> count),
//! `errors_other` (`"errno_ENOBUFS"` -> count), `latency_us.{stdev,p75,p95,
//! p9999}`; open loop: `rate_target`, `latency_uncorrected_us`,
//! `histogram_uncorrected`, `schedule_lag_us`, `histogram_schedule_lag`,
//! `sends`, `late_sends`, `late_waiting_for_connection`, `dropped`; io_uring
//! closed loop: `batching` (`waits`,
//! `completions`, `completions_per_wait`, `cap_min`, `cap_max`); https:
//! `tls` ([`TlsReport`]); then
//! `client` (opaque, from the probe) and
//! `timeseries` (rows of `second`, `requests`, `rps`, `p50_us`, `p99_us`,
//! `errors`) and `timeseries_histograms` (each row's histogram); a workload
//! run adds `classes` (per class: counts, consistency errors and offending
//! paths, latency and its histogram, limits). Unknown
//! keys round-trip through [`Report::extra`].

#![forbid(unsafe_code)]

pub mod check;
mod classes;
mod error;
mod error_kind;
pub mod gate;
mod h2;
mod hist;
pub mod hlog;
pub mod knee;
mod merge;
mod recorder;
mod report;
mod text;
mod tls;
pub mod walltime;

pub use check::{MergeCheck, Note, Refusal, Windows};
pub use classes::{classes_csv, ClassLimit, ClassReport, ClassStats, Offender, MAX_OFFENDERS};
pub use error::ReportError;
pub use error_kind::{errno_key, errno_symbol, ErrorKind};
pub use h2::{H2Report, H2Settings};
pub use hdrhistogram::Histogram;
pub use hist::{
    decode_histogram, encode_histogram, new_latency_histogram, LatencySummary, LATENCY_HIGHEST_US,
    LATENCY_LOWEST_US, LATENCY_SIGFIG,
};
pub use recorder::{Censor, Interval, Recorder, Unanswered};
pub use report::{Batching, IntervalRow, OpenLoop, Report, RunInfo, RunMeta, SecondHistogram};
pub use text::{TextOptions, TABLE_PERCENTILES};
pub use tls::TlsReport;

/// The value of the `schema` key.
pub const SCHEMA: &str = "xload/1";
