//! The file set's manifest: `path → size, SHA-256`.
//!
//! A minimal reader kept behind this small interface until the shared manifest
//! model of `xload files` lands. Format: one file per line,
//! `SHA256-HEX SIZE PATH` separated by whitespace (the path is the rest of the
//! line, relative to the served directory); `#` starts a comment line.

use std::collections::HashMap;

use crate::error::Error;

/// One file of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ManifestEntry {
    /// Path relative to the served directory, without a leading `/`.
    pub path: String,
    pub size: u64,
    pub sha256: [u8; 32],
}

/// Every file of the set, in the manifest's order.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Manifest {
    pub entries: Vec<ManifestEntry>,
    index: HashMap<String, usize>,
}

impl Manifest {
    /// Reads and parses a manifest file; errors name `file` and the line.
    pub fn load(path: &std::path::Path, file: &str) -> Result<Self, Error> {
        let text = std::fs::read_to_string(path)
            .map_err(|e| Error::file(file, format!("cannot read manifest: {e}")))?;
        Self::parse(&text, file)
    }

    /// Parses manifest text.
    pub fn parse(text: &str, file: &str) -> Result<Self, Error> {
        let mut m = Manifest::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: &str| Error {
                file: file.to_string(),
                line: Some(i + 1),
                key: String::new(),
                message: message.to_string(),
            };
            let fields = line
                .split_once(char::is_whitespace)
                .and_then(|(hex, rest)| {
                    let (size, path) = rest.trim_start().split_once(char::is_whitespace)?;
                    Some((hex, size, path))
                });
            let Some((hex, size, path)) = fields else {
                return Err(err("expected SHA256-HEX SIZE PATH"));
            };
            let sha256 =
                parse_sha256(hex).ok_or_else(|| err("expected 64 hex digits of SHA-256"))?;
            let size = size
                .parse()
                .map_err(|_| err("expected the size in bytes"))?;
            let path = path.trim().trim_start_matches('/').to_string();
            if m.index.insert(path.clone(), m.entries.len()).is_some() {
                return Err(err(&format!("{path:?} listed twice")));
            }
            m.entries.push(ManifestEntry { path, size, sha256 });
        }
        Ok(m)
    }

    /// The entry for a path (a leading `/` is ignored).
    pub fn get(&self, path: &str) -> Option<&ManifestEntry> {
        self.index
            .get(path.trim_start_matches('/'))
            .map(|&i| &self.entries[i])
    }
}

/// 64 hex digits to 32 bytes.
pub fn parse_sha256(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.as_bytes();
    if hex.len() != 64 {
        return None;
    }
    let mut out = [0u8; 32];
    for (i, pair) in hex.chunks(2).enumerate() {
        let digit = |b: u8| (b as char).to_digit(16);
        out[i] = (digit(pair[0])? * 16 + digit(pair[1])?) as u8;
    }
    Some(out)
}

/// 32 bytes to 64 lowercase hex digits.
pub fn sha256_hex(digest: &[u8; 32]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_names_bad_lines() {
        let hex = "ab".repeat(32);
        let m = Manifest::parse(&format!("# set\n{hex} 10 a/b.bin\n{hex}  0 /c\n"), "M").unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.get("/a/b.bin").unwrap().size, 10);
        assert_eq!(m.get("c").unwrap().sha256, [0xab; 32]);
        assert_eq!(sha256_hex(&[0xab; 32]), hex);
        let e = Manifest::parse(&format!("{hex} 1 a\nzz 1 b\n"), "M").unwrap_err();
        assert_eq!(e.to_string(), "M:2: expected 64 hex digits of SHA-256");
        let e = Manifest::parse(&format!("{hex} 1 a\n{hex} 2 a\n"), "M").unwrap_err();
        assert_eq!(e.line, Some(2));
    }
}
