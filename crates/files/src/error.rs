//! What can go wrong with a file set.

use std::path::PathBuf;

/// An error of the file-set commands; [`Error::is_usage`] tells bad input
/// (exit 2) from a failure to read or write (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Reading or writing `path` failed.
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        source: std::io::Error,
    },
    /// A manifest line that is not `SHA256-HEX SIZE PATH`.
    #[error("{file}:{line}: {message}")]
    Manifest {
        file: String,
        line: usize,
        message: String,
    },
    /// Bad input: a size distribution, a count, a directory that is not empty.
    #[error("{0}")]
    Invalid(String),
}

impl Error {
    /// Bad input (a malformed manifest too) rather than a failed read or write.
    pub fn is_usage(&self) -> bool {
        matches!(self, Error::Invalid(_) | Error::Manifest { .. })
    }

    /// A failed read of an input file given by the user: one that is no
    /// regular file or is over its limit ([`xload_sys::input`]) is bad
    /// input, anything else a failed read.
    pub(crate) fn input(path: &std::path::Path, source: std::io::Error) -> Error {
        use std::io::ErrorKind::{FileTooLarge, InvalidInput};
        match source.kind() {
            InvalidInput | FileTooLarge => Error::Invalid(format!("{}: {source}", path.display())),
            _ => Error::io(path, source),
        }
    }

    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Error {
        Error::Io {
            path: path.to_path_buf(),
            source,
        }
    }
}
