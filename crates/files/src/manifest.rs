//! The manifest of a file set: `path → size, SHA-256`, one file per line as
//! `SHA256-HEX SIZE PATH` (whitespace between, the path is the rest of the
//! line, relative to the set's directory, `/`-separated); `#` starts a
//! comment line. `xload files generate` writes it as `DIR/MANIFEST`.

use std::collections::HashMap;
use std::path::Path;

use crate::Error;

/// The name `xload files generate` gives the manifest inside the set.
pub const MANIFEST_NAME: &str = "MANIFEST";

/// One file of the set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// Relative to the set's directory, `/`-separated, no leading `/`.
    pub path: String,
    pub size: u64,
    pub sha256: [u8; 32],
}

/// Every file of the set, in the manifest's order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Manifest {
    pub entries: Vec<Entry>,
    index: HashMap<String, usize>,
}

impl Manifest {
    /// Reads and parses a manifest file; errors name the file and the line.
    pub fn load(path: &Path) -> Result<Manifest, Error> {
        let text =
            xload_sys::input::read_to_string(path, "a manifest", xload_sys::input::DATA_LIMIT)
                .map_err(|e| Error::input(path, e))?;
        Manifest::parse(&text, &path.display().to_string())
    }

    /// Parses manifest text; `file` names it in errors.
    pub fn parse(text: &str, file: &str) -> Result<Manifest, Error> {
        let mut m = Manifest::default();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let err = |message: String| Error::Manifest {
                file: file.to_string(),
                line: i + 1,
                message,
            };
            let mut fields = line.splitn(2, char::is_whitespace);
            let hex = fields.next().unwrap_or("");
            let rest = fields.next().unwrap_or("").trim_start();
            let (size, path) = rest
                .split_once(char::is_whitespace)
                .ok_or_else(|| err("expected SHA256-HEX SIZE PATH".into()))?;
            let sha256 =
                parse_sha256(hex).ok_or_else(|| err("expected 64 hex digits of SHA-256".into()))?;
            let size = size
                .parse()
                .map_err(|_| err(format!("expected the size in bytes, not {size:?}")))?;
            let path = path.trim().trim_start_matches('/');
            if !is_relative_path(path) {
                return Err(err(format!(
                    "{path:?} is not a relative path inside the set"
                )));
            }
            m.push(Entry {
                path: path.to_string(),
                size,
                sha256,
            })
            .map_err(err)?;
        }
        Ok(m)
    }

    /// Adds an entry; a path already listed is refused.
    pub fn push(&mut self, e: Entry) -> Result<(), String> {
        if self.index.contains_key(&e.path) {
            return Err(format!("{:?} listed twice", e.path));
        }
        self.index.insert(e.path.clone(), self.entries.len());
        self.entries.push(e);
        Ok(())
    }

    /// The entry of a path (a leading `/` is ignored).
    pub fn get(&self, path: &str) -> Option<&Entry> {
        self.index
            .get(path.trim_start_matches('/'))
            .map(|&i| &self.entries[i])
    }

    /// Bytes of every file together.
    pub fn total_size(&self) -> u64 {
        self.entries.iter().map(|e| e.size).sum()
    }

    /// The manifest's text, `comment` lines first (each prefixed with `# `).
    pub fn to_text(&self, comment: &[String]) -> String {
        let mut s = String::with_capacity(100 * (self.entries.len() + comment.len()));
        for c in comment {
            s.push_str("# ");
            s.push_str(c);
            s.push('\n');
        }
        for e in &self.entries {
            s.push_str(&format!(
                "{} {} {}\n",
                sha256_hex(&e.sha256),
                e.size,
                e.path
            ));
        }
        s
    }
}

/// A `/`-separated path with no empty, `.` or `..` segment and no NUL.
fn is_relative_path(p: &str) -> bool {
    !p.is_empty()
        && !p.contains('\0')
        && p.split('/').all(|s| !s.is_empty() && s != "." && s != "..")
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

/// The SHA-256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let d = ring::digest::digest(&ring::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(d.as_ref());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_entries_and_names_bad_lines() {
        let hex = "ab".repeat(32);
        let m = Manifest::parse(&format!("# set\n{hex} 10 a/b.bin\n{hex}  0 /c d\n"), "M").unwrap();
        assert_eq!(m.entries.len(), 2);
        assert_eq!(m.get("/a/b.bin").unwrap().size, 10);
        assert_eq!(m.get("c d").unwrap().sha256, [0xab; 32]);
        assert_eq!(m.total_size(), 10);
        let bad = |text: String| Manifest::parse(&text, "M").unwrap_err().to_string();
        assert_eq!(
            bad(format!("{hex} 1 a\nzz 1 b\n")),
            "M:2: expected 64 hex digits of SHA-256"
        );
        assert_eq!(
            bad(format!("{hex} 1 a\n{hex} 2 a\n")),
            "M:2: \"a\" listed twice"
        );
        assert_eq!(
            bad(format!("{hex} x a\n")),
            "M:1: expected the size in bytes, not \"x\""
        );
        assert_eq!(
            bad(format!("{hex} 1\n")),
            "M:1: expected SHA256-HEX SIZE PATH"
        );
        assert!(bad(format!("{hex} 1 a/../../etc/passwd\n")).contains("not a relative path"));
    }

    #[test]
    fn text_round_trips() {
        let mut m = Manifest::default();
        for (i, p) in ["x/1.bin", "y"].iter().enumerate() {
            m.push(Entry {
                path: p.to_string(),
                size: i as u64 * 7,
                sha256: sha256(p.as_bytes()),
            })
            .unwrap();
        }
        let text = m.to_text(&["a set".into()]);
        assert!(text.starts_with("# a set\n"));
        assert_eq!(Manifest::parse(&text, "M").unwrap(), m);
        // The SHA-256 of "abc" (FIPS 180-2).
        assert_eq!(
            sha256_hex(&sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
