//! `xload files verify`: a directory checked against its manifest.

use std::path::Path;

use crate::manifest::{sha256, Manifest, MANIFEST_NAME};
use crate::set::walk;
use crate::Error;

/// A file that does not match its manifest entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Problem {
    Missing(String),
    Size { path: String, want: u64, got: u64 },
    Digest(String),
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Problem::Missing(p) => write!(f, "{p}: missing"),
            Problem::Size { path, want, got } => {
                write!(f, "{path}: {got} bytes, the manifest says {want}")
            }
            Problem::Digest(p) => write!(f, "{p}: SHA-256 differs from the manifest's"),
        }
    }
}

/// What a verification found.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Verdict {
    /// Files of the manifest that were read.
    pub checked: usize,
    pub bytes: u64,
    pub problems: Vec<Problem>,
    /// Files in the directory the manifest does not list (not an error).
    pub unlisted: Vec<String>,
}

/// Checks every file `manifest` lists against the files under `dir`.
pub fn verify(dir: &Path, manifest: &Manifest) -> Result<Verdict, Error> {
    let mut v = Verdict::default();
    for e in &manifest.entries {
        let path = dir.join(&e.path);
        // Read no more than the manifest says the file holds: a larger one
        // is wrong whatever its bytes (and a FIFO or device is no file).
        let bytes = match xload_sys::input::read(&path, "a file of the set", e.size) {
            Ok(b) => b,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
                v.problems.push(Problem::Missing(e.path.clone()));
                continue;
            }
            Err(err) if err.kind() == std::io::ErrorKind::FileTooLarge => {
                let got = std::fs::metadata(&path).map_or(e.size.saturating_add(1), |m| m.len());
                v.checked += 1;
                v.bytes += got;
                v.problems.push(Problem::Size {
                    path: e.path.clone(),
                    want: e.size,
                    got,
                });
                continue;
            }
            Err(err) => return Err(Error::io(&path, err)),
        };
        v.checked += 1;
        v.bytes += bytes.len() as u64;
        if bytes.len() as u64 != e.size {
            v.problems.push(Problem::Size {
                path: e.path.clone(),
                want: e.size,
                got: bytes.len() as u64,
            });
        } else if sha256(&bytes) != e.sha256 {
            v.problems.push(Problem::Digest(e.path.clone()));
        }
    }
    for (rel, _) in walk(dir)? {
        if rel != MANIFEST_NAME && manifest.get(&rel).is_none() {
            v.unlisted.push(rel);
        }
    }
    Ok(v)
}
