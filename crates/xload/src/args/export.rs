//! Options of `xload URL` whose outputs other tools read: an HdrHistogram
//! interval log; what they do lives in `crate::export`.

use clap::Args;

/// Outputs for other tools (HdrHistogram's log readers).
#[derive(Debug, Clone, Default, Args)]
pub(crate) struct ExportArgs {
    /// Write an HdrHistogram interval log to PATH: one latency histogram (µs) per second of
    /// the measured window, as HistogramLogProcessor, HdrHistogram's plotter and Python's
    /// hdrh read it (docs/xload.md).
    #[arg(long = "hlog")]
    pub hlog: Option<std::path::PathBuf>,
}
