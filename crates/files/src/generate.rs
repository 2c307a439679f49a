//! `xload files generate`: a seeded set of files of mixed sizes in
//! subdirectories (`dir000/file00000.bin`, 100 files a directory), and its
//! manifest.

use std::path::Path;

use crate::manifest::{sha256, Entry, Manifest, MANIFEST_NAME};
use crate::rng::Rng;
use crate::sizes::SizeDist;
use crate::Error;

/// Files a generated set may have.
pub const MAX_COUNT: usize = 1_000_000;
/// Files in one subdirectory.
const PER_DIR: usize = 100;

/// What to generate.
#[derive(Clone, Debug)]
pub struct Spec {
    pub count: usize,
    pub sizes: SizeDist,
    /// As given (written into the manifest's comment).
    pub sizes_text: String,
    pub seed: u64,
    /// Write into a directory that is not empty.
    pub force: bool,
}

/// Digits of `n` in decimal, at least `min`.
fn width(n: usize, min: usize) -> usize {
    n.to_string().len().max(min)
}

/// The relative path of file `i` of a set of `count`.
pub fn file_path(i: usize, count: usize) -> String {
    let last = count.saturating_sub(1);
    format!(
        "dir{:0dw$}/file{:0fw$}.bin",
        i / PER_DIR,
        i,
        dw = width(last / PER_DIR, 3),
        fw = width(last, 5)
    )
}

/// Writes the set described by `spec` into `dir` (created if missing) and
/// `dir/MANIFEST`; returns the manifest. The same spec gives the same bytes.
pub fn generate(dir: &Path, spec: &Spec) -> Result<Manifest, Error> {
    if spec.count == 0 || spec.count > MAX_COUNT {
        return Err(Error::Invalid(format!(
            "--count must be 1 to {MAX_COUNT}, not {}",
            spec.count
        )));
    }
    check_target(dir, spec.force)?;
    std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
    let mut sizes = Rng::new(spec.seed);
    let mut manifest = Manifest::default();
    let mut buf = Vec::new();
    for i in 0..spec.count {
        let size = spec.sizes.sample(&mut sizes);
        // Each file its own stream: its bytes depend on the seed and its number only.
        let mut content = Rng::new(Rng::new(spec.seed ^ (i as u64).rotate_left(32)).next_u64());
        buf.resize(size as usize, 0);
        content.fill(&mut buf);
        let rel = file_path(i, spec.count);
        let path = dir.join(&rel);
        if i % PER_DIR == 0 {
            let sub = path.parent().unwrap_or(dir);
            std::fs::create_dir_all(sub).map_err(|e| Error::io(sub, e))?;
        }
        std::fs::write(&path, &buf).map_err(|e| Error::io(&path, e))?;
        let entry = Entry {
            path: rel,
            size,
            sha256: sha256(&buf),
        };
        manifest.push(entry).map_err(Error::Invalid)?;
    }
    let comment = [format!(
        "xload files generate --count {} --sizes {} --seed {}: {} bytes",
        spec.count,
        spec.sizes_text,
        spec.seed,
        manifest.total_size()
    )];
    let path = dir.join(MANIFEST_NAME);
    std::fs::write(&path, manifest.to_text(&comment)).map_err(|e| Error::io(&path, e))?;
    Ok(manifest)
}

/// `dir` is missing, or an empty directory, or `force` is set.
fn check_target(dir: &Path, force: bool) -> Result<(), Error> {
    match std::fs::metadata(dir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(Error::io(dir, e)),
        Ok(m) if !m.is_dir() => Err(Error::Invalid(format!(
            "{} exists and is not a directory",
            dir.display()
        ))),
        Ok(_) => {
            let mut entries = std::fs::read_dir(dir).map_err(|e| Error::io(dir, e))?;
            if entries.next().is_some() && !force {
                return Err(Error::Invalid(format!(
                    "{} is not empty (--force writes the set into it, over files of the same names)",
                    dir.display()
                )));
            }
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_widen_with_the_count() {
        assert_eq!(file_path(0, 1000), "dir000/file00000.bin");
        assert_eq!(file_path(999, 1000), "dir009/file00999.bin");
        assert_eq!(file_path(123_456, 200_000), "dir1234/file123456.bin");
    }
}
