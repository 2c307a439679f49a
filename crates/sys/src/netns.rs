//! Entering a named network namespace (`ip netns add NAME`, a file in
//! `/run/netns`) by `setns`. It moves the calling thread only; threads it
//! spawns afterwards start in the namespace too.

use std::fmt;
use std::os::fd::AsRawFd;

/// Why the namespace could not be entered.
#[derive(Debug)]
pub enum NetnsError {
    /// The name is not a plain namespace name.
    BadName(String),
    /// `/run/netns/NAME` does not exist.
    NotFound(String),
    /// A system call failed.
    Sys {
        /// Namespace.
        name: String,
        /// Which call.
        call: &'static str,
        /// errno.
        source: std::io::Error,
    },
}

impl fmt::Display for NetnsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            NetnsError::BadName(n) => write!(f, "`{n}` is not a network namespace name"),
            NetnsError::NotFound(n) => {
                write!(f, "no network namespace `{n}` (see `ip netns list`)")
            }
            NetnsError::Sys { name, call, source } => {
                write!(f, "entering network namespace `{name}`: {call}: {source}")
            }
        }
    }
}

impl std::error::Error for NetnsError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            NetnsError::Sys { source, .. } => Some(source),
            _ => None,
        }
    }
}

/// Checks a namespace name: what `ip netns` accepts as a file name in /run/netns.
pub fn check_name(name: &str) -> Result<(), NetnsError> {
    if name.is_empty() || name == "." || name == ".." || name.contains(['/', '\0']) {
        return Err(NetnsError::BadName(name.to_string()));
    }
    Ok(())
}

/// Moves the calling thread into network namespace `name`.
pub fn enter(name: &str) -> Result<(), NetnsError> {
    check_name(name)?;
    let file = std::fs::File::open(format!("/run/netns/{name}")).map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            NetnsError::NotFound(name.to_string())
        } else {
            NetnsError::Sys {
                name: name.to_string(),
                call: "open /run/netns",
                source: e,
            }
        }
    })?;
    // SAFETY: setns(2) on an fd owned by `file`, open for the call; it
    // affects only the calling thread. EINVAL (not a network namespace
    // file) is reported as an error.
    if unsafe { libc::setns(file.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
        return Err(NetnsError::Sys {
            name: name.to_string(),
            call: "setns",
            source: std::io::Error::last_os_error(),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_slashes_or_dots_are_rejected_before_any_syscall() {
        for bad in ["", ".", "..", "a/b", "../x", "a\0b"] {
            assert!(matches!(enter(bad), Err(NetnsError::BadName(_))), "{bad:?}");
        }
        assert!(check_name("xtune-lab-1").is_ok());
    }

    #[test]
    fn a_missing_namespace_is_not_found() {
        let e = enter("xload-sys-test-no-such-namespace").unwrap_err();
        assert!(matches!(e, NetnsError::NotFound(_)), "{e}");
        assert!(e.to_string().contains("ip netns list"), "{e}");
    }
}
