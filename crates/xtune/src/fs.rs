//! The one door to the host: every read and write of `/proc`, `/sys` and `/etc`
//! goes through [`Fs`], rooted at `/` in production and at a temporary tree
//! imitating `/proc/sys` and `/sys/class/net` in tests.

use std::fs::File;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

pub use crate::fs_error::{errno_name, errno_text, FsError};

/// Reads and writes of the host's kernel interfaces and configuration files.
pub trait Fs {
    /// Whole content of a file.
    fn read(&self, path: &str) -> Result<String, FsError>;
    /// Writes `value` plus a newline in one `write(2)`, as `echo value > path`
    /// does; never creates the file (a missing knob is `ENOENT`, as in the kernel).
    fn write(&self, path: &str, value: &str) -> Result<(), FsError>;
    /// Replaces a regular file atomically (temp file, fsync, rename), creating it.
    fn replace_file(&self, path: &str, content: &str) -> Result<(), FsError>;
    /// Removes a regular file.
    fn remove(&self, path: &str) -> Result<(), FsError>;
    /// True when the path exists (following symlinks).
    fn exists(&self, path: &str) -> bool;
    /// Entry names of a directory, sorted.
    fn list(&self, dir: &str) -> Result<Vec<String>, FsError>;
    /// Target of a symbolic link (`/proc/PID/exe`), when it can be read.
    fn read_link(&self, _path: &str) -> Option<String> {
        None
    }
    /// True when the path is a directory (following symlinks).
    fn is_dir(&self, _path: &str) -> bool {
        false
    }
    /// True when the file exists and nobody may write it (mode without any
    /// write bit, as the kernel shows a sysctl it keeps read-only).
    fn read_only(&self, _path: &str) -> bool {
        false
    }
}

/// [`Fs`] over the real file system below `root`. On the real root (`/`),
/// the `ethtool:DEV/...` pseudo-paths are the NIC's own settings, read and
/// written over netlink ([`crate::ethtool`]); below any other root they are
/// plain files, so a test tree can imitate them.
#[derive(Clone, Debug)]
pub struct RootFs {
    root: PathBuf,
    ethtool: bool,
}

impl RootFs {
    /// `root` is `/` on a real host.
    pub fn new(root: impl Into<PathBuf>) -> RootFs {
        let root = root.into();
        RootFs {
            ethtool: root == Path::new("/"),
            root,
        }
    }

    fn door(&self, path: &str) -> bool {
        self.ethtool && crate::ethtool::is_door(path)
    }

    /// Where `path` (host-absolute) lives under the root.
    pub fn resolve(&self, path: &str) -> PathBuf {
        self.root.join(path.trim_start_matches('/'))
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }
}

impl Fs for RootFs {
    fn read(&self, path: &str) -> Result<String, FsError> {
        if self.door(path) {
            return crate::ethtool::read(path);
        }
        let bytes =
            std::fs::read(self.resolve(path)).map_err(|e| FsError::from_io("read", path, &e))?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn write(&self, path: &str, value: &str) -> Result<(), FsError> {
        if self.door(path) {
            return crate::ethtool::write(path, value);
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .truncate(true)
            .custom_flags(libc::O_CLOEXEC)
            .open(self.resolve(path))
            .map_err(|e| FsError::from_io("write", path, &e))?;
        let mut buf = Vec::with_capacity(value.len() + 1);
        buf.extend_from_slice(value.as_bytes());
        buf.push(b'\n');
        // One write call: procfs and sysfs parse each write on its own, so a
        // value split over two writes would be two different values.
        let n = file
            .write(&buf)
            .map_err(|e| FsError::from_io("write", path, &e))?;
        if n != buf.len() {
            return Err(FsError {
                op: "write",
                path: path.to_string(),
                errno: 0,
                detail: format!("short write: {n} of {} bytes", buf.len()),
            });
        }
        Ok(())
    }

    fn replace_file(&self, path: &str, content: &str) -> Result<(), FsError> {
        let target = self.resolve(path);
        write_atomic(&target, content.as_bytes(), 0o644)
            .map_err(|e| FsError::from_io("write", path, &e))
    }

    fn remove(&self, path: &str) -> Result<(), FsError> {
        std::fs::remove_file(self.resolve(path)).map_err(|e| FsError::from_io("remove", path, &e))
    }

    fn exists(&self, path: &str) -> bool {
        if self.door(path) {
            return crate::ethtool::read(path).is_ok();
        }
        self.resolve(path).exists()
    }

    fn is_dir(&self, path: &str) -> bool {
        self.resolve(path).is_dir()
    }

    fn list(&self, dir: &str) -> Result<Vec<String>, FsError> {
        let rd =
            std::fs::read_dir(self.resolve(dir)).map_err(|e| FsError::from_io("list", dir, &e))?;
        let mut names: Vec<String> = rd
            .filter_map(|e| e.ok())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        Ok(names)
    }

    fn read_link(&self, path: &str) -> Option<String> {
        std::fs::read_link(self.resolve(path))
            .ok()
            .map(|p| p.to_string_lossy().into_owned())
    }

    fn read_only(&self, path: &str) -> bool {
        use std::os::unix::fs::PermissionsExt;
        std::fs::metadata(self.resolve(path)).is_ok_and(|m| m.permissions().mode() & 0o222 == 0)
    }
}

/// Replaces `path` with `bytes` durably: write a temp file in the same
/// directory (created with `mode`, less the umask), fsync it, rename over
/// `path`, fsync the directory.
pub fn write_atomic(path: &Path, bytes: &[u8], mode: u32) -> std::io::Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "file".into());
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    {
        use std::os::unix::fs::OpenOptionsExt;
        let _ = std::fs::remove_file(&tmp);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
    }
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    File::open(dir)?.sync_all()
}

/// Trims the one trailing newline the kernel appends to every value.
pub fn trim_value(raw: &str) -> &str {
    raw.strip_suffix('\n').unwrap_or(raw)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::TempDir;

    #[test]
    fn write_appends_newline_and_never_creates_a_missing_knob() {
        let t = TempDir::new("fs-write");
        t.put("/proc/sys/net/core/somaxconn", "4096\n");
        let fs = RootFs::new(t.path());
        fs.write("/proc/sys/net/core/somaxconn", "128").unwrap();
        assert_eq!(t.get("/proc/sys/net/core/somaxconn"), "128\n");
        let e = fs.write("/proc/sys/net/core/nope", "1").unwrap_err();
        assert_eq!(e.errno, libc::ENOENT);
        assert_eq!(
            e.to_string(),
            "write /proc/sys/net/core/nope: ENOENT (No such file or directory)"
        );
        assert!(!fs.exists("/proc/sys/net/core/nope"));
    }

    #[test]
    fn errno_names_are_symbolic() {
        assert_eq!(errno_name(libc::EINVAL), "EINVAL");
        assert_eq!(errno_name(libc::EPERM), "EPERM");
        assert_eq!(errno_text(libc::EIO), "EIO (Input/output error)");
    }
}
