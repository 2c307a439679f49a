//! Whether io_uring can run this driver here: a ring, a provided buffer ring
//! and a multishot receive, tried for real on a socket pair.

use std::io;

use io_uring::{cqueue, opcode, types};

use crate::ring::{build_ring, BufRing};

/// Tries the features this driver needs, for real, and names the ring mode.
pub(crate) fn probe() -> Result<&'static str, String> {
    if let Ok(v) = std::fs::read_to_string("/proc/sys/kernel/io_uring_disabled") {
        if v.trim() == "2" {
            return Err("kernel.io_uring_disabled=2".into());
        }
    }
    let (ring, mode) = build_ring(8, 16).map_err(|e| format!("io_uring_setup: {e}"))?;
    let bufs = BufRing::new(4, 256, 0).map_err(|e| e.to_string())?;
    bufs.register(&ring)
        .map_err(|e| format!("provided buffer ring (needs Linux 5.19+): {e}"))?;
    let mut ring = ring;
    let mut fds = [0i32; 2];
    // SAFETY: fds is a valid out-array of two ints.
    if unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_STREAM | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    } != 0
    {
        return Err(format!("socketpair: {}", io::Error::last_os_error()));
    }
    let result = (|| {
        let e = opcode::RecvMulti::new(types::Fd(fds[0]), 0)
            .build()
            .user_data(1);
        // SAFETY: the SQE references only the socket and buffer group 0 (owned by `bufs`, alive below).
        unsafe { ring.submission().push(&e) }.map_err(|_| "submission queue full".to_string())?;
        // SAFETY: writing one byte from a static buffer to our own socket.
        unsafe { libc::write(fds[1], b"x".as_ptr().cast(), 1) };
        let ts = types::Timespec::from(std::time::Duration::from_millis(500));
        let args = types::SubmitArgs::new().timespec(&ts);
        match ring.submitter().submit_with_args(1, &args) {
            Ok(_) => {}
            Err(e) if e.raw_os_error() == Some(libc::ETIME) => {
                return Err("multishot recv did not complete".into())
            }
            Err(e) => return Err(format!("io_uring_enter: {e}")),
        }
        let cqe = ring
            .completion()
            .next()
            .ok_or("no completion from multishot recv")?;
        if cqe.result() != 1 {
            return Err(format!(
                "multishot recv (needs Linux 6.0+) returned {}",
                cqe.result()
            ));
        }
        if !cqueue::more(cqe.flags()) {
            return Err("multishot recv not supported (needs Linux 6.0+)".into());
        }
        Ok(mode)
    })();
    // SAFETY: closing our own socketpair; this ends the multishot recv.
    unsafe {
        libc::close(fds[0]);
        libc::close(fds[1]);
    }
    // Tear down the ring before the buffer memory.
    drop(ring);
    result
}
