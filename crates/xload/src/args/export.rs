//! Options of `xload URL` whose outputs other tools read: an HdrHistogram
//! interval log and a Prometheus endpoint; what they do lives in
//! `crate::export` and `crate::metrics`.

use clap::Args;

/// Outputs for other tools (HdrHistogram's log readers).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ExportArgs {
    /// Write an HdrHistogram interval log to PATH: one latency histogram (µs) per second of
    /// the measured window, as HistogramLogProcessor, HdrHistogram's plotter and Python's
    /// hdrh read it (docs/xload.md).
    #[arg(long = "hlog")]
    pub hlog: Option<std::path::PathBuf>,

    /// Serve Prometheus metrics on http://ADDR/metrics while the run lasts (responses, errors,
    /// bytes, latency histogram; per worker and all), updated once a second (docs/xload.md).
    #[arg(long = "metrics-listen")]
    pub metrics_listen: Option<std::net::SocketAddr>,

    /// After the report is written, keep --metrics-listen up until one scrape has read the
    /// final values (xload_final 1), at most this long (default 0s).
    #[arg(long = "metrics-linger", value_parser = super::parse_duration, requires = "metrics_listen")]
    pub metrics_linger: Option<std::time::Duration>,
}
