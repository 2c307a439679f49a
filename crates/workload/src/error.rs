//! One error type for a workload file: it names the file, the line and the key.

use std::fmt;

/// Why a workload (or the manifest it names) was refused.
///
/// Displayed as `FILE:LINE: KEY: MESSAGE`, e.g.
/// `workload.toml:12: classes.static.weight: expected a positive number`;
/// the line and key are left out when they do not apply (an unreadable file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The file as the user named it.
    pub file: String,
    /// 1-based line of the offending value, when known.
    pub line: Option<usize>,
    /// Dotted key path of the offending value (`classes.static.weight`), or empty.
    pub key: String,
    /// What is wrong, and what was expected.
    pub message: String,
}

impl Error {
    /// An error about the whole file (unreadable, missing).
    pub fn file(file: &str, message: impl Into<String>) -> Self {
        Error {
            file: file.to_string(),
            line: None,
            key: String::new(),
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.file)?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
        }
        f.write_str(": ")?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_names_file_line_and_key() {
        let e = Error {
            file: "w.toml".into(),
            line: Some(12),
            key: "classes.static.weight".into(),
            message: "expected a positive number".into(),
        };
        assert_eq!(
            e.to_string(),
            "w.toml:12: classes.static.weight: expected a positive number"
        );
        assert_eq!(
            Error::file("w.toml", "cannot read").to_string(),
            "w.toml: cannot read"
        );
    }
}
