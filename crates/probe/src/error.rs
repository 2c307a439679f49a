//! Typed errors: every failure names the file (or parser) and the cause.

use std::path::PathBuf;

/// Why a piece of /proc text was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseErrorKind {
    /// The text was empty (or only whitespace).
    #[error("empty input")]
    Empty,
    /// A token that had to be a number was not one.
    #[error("not a number: {0:?}")]
    BadNumber(String),
    /// A line had fewer columns than its layout requires (truncated input).
    #[error("expected {expected} columns, found {found}")]
    TooFewColumns {
        /// Columns the layout requires.
        expected: usize,
        /// Columns present.
        found: usize,
    },
    /// The header line (CPU columns) was missing or had no CPU names.
    #[error("missing or malformed CPU header line")]
    BadHeader,
    /// A line did not have the `name:` prefix or `cpuN` name the layout requires.
    #[error("malformed line: {0:?}")]
    BadLine(String),
    /// A field the caller needs was absent.
    #[error("missing field {0}")]
    MissingField(&'static str),
    /// `/proc/net/{snmp,netstat}`: a header line had no value line after it.
    #[error("header line for {0:?} has no value line")]
    UnpairedHeader(String),
    /// `/proc/net/{snmp,netstat}`: the value line's count differs from the header's.
    #[error("{prefix}: {names} names but {values} values")]
    CountMismatch {
        /// The `Tcp:`/`TcpExt:` prefix.
        prefix: String,
        /// Names in the header line.
        names: usize,
        /// Values in the value line.
        values: usize,
    },
    /// `/proc/<pid>/stat`: no `(comm)` with its closing parenthesis.
    #[error("no closing parenthesis after comm")]
    NoCommEnd,
    /// A value was outside the range its meaning allows.
    #[error("value out of range: {0}")]
    OutOfRange(String),
}

/// Everything the probe can fail with.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProbeError {
    /// Reading a file or directory failed.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A file's text did not match its layout.
    #[error("parsing {what}: line {line}: {kind}")]
    Parse {
        /// Which file layout (e.g. "/proc/stat").
        what: &'static str,
        /// 1-based line number (0 when the problem is the file as a whole).
        line: usize,
        /// The cause.
        kind: ParseErrorKind,
    },
}

impl ProbeError {
    pub(crate) fn parse(what: &'static str, line: usize, kind: ParseErrorKind) -> Self {
        ProbeError::Parse { what, line, kind }
    }

    /// The parse cause, when this is a parse error (handy in tests and for callers that
    /// want to tell "file absent" from "file garbled").
    pub fn parse_kind(&self) -> Option<&ParseErrorKind> {
        match self {
            ProbeError::Parse { kind, .. } => Some(kind),
            ProbeError::Io { .. } => None,
        }
    }
}
