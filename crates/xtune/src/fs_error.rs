//! The error of a read or write through [`Fs`](crate::fs::Fs) and the
//! errno names it shows; its own module so that the doors behind `Fs`
//! (`ethtool`) can return it without depending on `fs`.

use std::fmt;

/// A failed read or write, with the errno the kernel gave.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub struct FsError {
    /// "read", "write", "list", "remove".
    pub op: &'static str,
    /// Path as seen by the host (`/proc/sys/...`), not the test root.
    pub path: String,
    /// errno (0 when the failure was not a system call error, e.g. a short write).
    pub errno: i32,
    /// Extra words when errno alone does not say it.
    pub detail: String,
}

impl fmt::Display for FsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} {}: {}", self.op, self.path, errno_text(self.errno))?;
        if !self.detail.is_empty() {
            write!(f, " ({})", self.detail)?;
        }
        Ok(())
    }
}

impl FsError {
    pub(crate) fn from_io(op: &'static str, path: &str, e: &std::io::Error) -> FsError {
        FsError {
            op,
            path: path.to_string(),
            errno: e.raw_os_error().unwrap_or(0),
            detail: if e.raw_os_error().is_some() {
                String::new()
            } else {
                e.to_string()
            },
        }
    }

    /// The symbolic errno, `EINVAL`.
    pub fn errno_name(&self) -> &'static str {
        errno_name(self.errno)
    }
}

/// `EINVAL (Invalid argument)`.
pub fn errno_text(errno: i32) -> String {
    if errno == 0 {
        return "error".into();
    }
    format!(
        "{} ({})",
        errno_name(errno),
        std::io::Error::from_raw_os_error(errno)
    )
    .replace(&format!(" (os error {errno})"), "")
}

/// Symbolic name of the errnos a tuning write can meet.
pub fn errno_name(errno: i32) -> &'static str {
    match errno {
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::EIO => "EIO",
        libc::ENXIO => "ENXIO",
        libc::E2BIG => "E2BIG",
        libc::EBADF => "EBADF",
        libc::EAGAIN => "EAGAIN",
        libc::ENOMEM => "ENOMEM",
        libc::EACCES => "EACCES",
        libc::EFAULT => "EFAULT",
        libc::EBUSY => "EBUSY",
        libc::EEXIST => "EEXIST",
        libc::ENODEV => "ENODEV",
        libc::ENOTDIR => "ENOTDIR",
        libc::EISDIR => "EISDIR",
        libc::EINVAL => "EINVAL",
        libc::ENOSPC => "ENOSPC",
        libc::EROFS => "EROFS",
        libc::ERANGE => "ERANGE",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::EOVERFLOW => "EOVERFLOW",
        libc::ESRCH => "ESRCH",
        0 => "no errno",
        _ => "errno",
    }
}
