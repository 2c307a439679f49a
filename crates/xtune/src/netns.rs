//! Entering a named network namespace (`ip netns add NAME`) for the whole
//! process, the way `ip netns exec` does: `setns` into `/run/netns/NAME`, then
//! a private mount namespace with a fresh sysfs so `/sys/class/net` shows the
//! namespace's devices. `/proc/sys/net` follows the calling task's network
//! namespace on its own.
//!
//! Must be called while the process has one thread (before any thread is
//! spawned): `setns` moves the calling thread only.

use std::ffi::CString;

pub use xload_sys::netns::{check_name, NetnsError};

/// Exit code for a failure to enter: 2 for a bad or unknown name (an
/// argument error), 1 otherwise.
pub fn exit_code(e: &NetnsError) -> i32 {
    match e {
        NetnsError::BadName(_) | NetnsError::NotFound(_) => 2,
        NetnsError::Sys { .. } => 1,
    }
}

/// The cookie of this thread's network namespace (`SO_NETNS_COOKIE`, Linux
/// 5.14+): unique for the life of the system and never reused, unlike the
/// namespace's inode number. None when the kernel has no such option.
pub fn cookie() -> Option<u64> {
    const SO_NETNS_COOKIE: libc::c_int = 71;
    // SAFETY: a socket this function owns and closes; getsockopt writes at
    // most `len` bytes into `v`.
    unsafe {
        let fd = libc::socket(libc::AF_UNIX, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return None;
        }
        let mut v: u64 = 0;
        let mut len = std::mem::size_of::<u64>() as libc::socklen_t;
        let r = libc::getsockopt(
            fd,
            libc::SOL_SOCKET,
            SO_NETNS_COOKIE,
            (&mut v as *mut u64).cast(),
            &mut len,
        );
        libc::close(fd);
        (r == 0 && len as usize == std::mem::size_of::<u64>()).then_some(v)
    }
}

/// Moves this (single-threaded) process into network namespace `name`:
/// `setns` (xload-sys), then a private mount namespace with a fresh sysfs.
pub fn enter(name: &str) -> Result<(), NetnsError> {
    xload_sys::netns::enter(name)?;
    let sys = |call: &'static str| NetnsError::Sys {
        name: name.to_string(),
        call,
        source: std::io::Error::last_os_error(),
    };
    // SAFETY: unshare(2) with a flag constant; affects only this process.
    if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
        return Err(sys("unshare(CLONE_NEWNS)"));
    }
    let root = c"/";
    let sysfs_dir = c"/sys";
    let sysfs = c"sysfs";
    let none = c"none";
    // Keep mounts made here from propagating back to the host's namespace.
    // SAFETY: mount(2) with valid NUL-terminated strings and a null data pointer.
    if unsafe {
        libc::mount(
            none.as_ptr(),
            root.as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(sys("mount --make-rslave /"));
    }
    // SAFETY: umount2(2) on a constant path; EINVAL (not mounted) is tolerated below.
    if unsafe { libc::umount2(sysfs_dir.as_ptr(), libc::MNT_DETACH) } != 0 {
        let e = std::io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::EINVAL) {
            return Err(NetnsError::Sys {
                name: name.to_string(),
                call: "umount /sys",
                source: e,
            });
        }
    }
    let source = CString::new(name).map_err(|_| NetnsError::BadName(name.to_string()))?;
    // SAFETY: mount(2) with valid NUL-terminated strings and a null data pointer.
    if unsafe {
        libc::mount(
            source.as_ptr(),
            sysfs_dir.as_ptr(),
            sysfs.as_ptr(),
            0,
            std::ptr::null(),
        )
    } != 0
    {
        return Err(sys("mount sysfs"));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_with_slashes_or_dots_are_rejected_before_any_syscall() {
        for bad in ["", ".", "..", "a/b", "../x"] {
            assert!(
                matches!(check_name(bad), Err(NetnsError::BadName(_))),
                "{bad:?}"
            );
        }
        assert!(check_name("xtune-lab-1").is_ok());
        assert_eq!(exit_code(&NetnsError::NotFound("x".into())), 2);
    }
}
