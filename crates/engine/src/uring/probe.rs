//! Whether io_uring can run this driver here: a ring, a provided buffer ring
//! and a multishot receive, tried for real on a socket pair.

use std::io;

use io_uring::{cqueue, opcode, squeue, types, IoUring};

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

/// Whether connections can be set up without the file table, tried for
/// real on slot 0 of `ring`'s registered table (empty, nothing queued yet):
/// a socket created into the slot (`IORING_OP_SOCKET`, Linux 5.19+),
/// TCP_NODELAY set on it through the ring (`SOCKET_URING_OP_SETSOCKOPT`,
/// 6.7+) and the slot closed (`IORING_OP_CLOSE` on a fixed file, 5.15+).
/// `family` is the target's address family (TCP_NODELAY only for IP).
pub(crate) fn direct_sockets(ring: &mut IoUring, family: i32) -> Result<(), String> {
    let slot = types::DestinationSlot::try_from_slot_target(0).map_err(|_| "no slot 0")?;
    let mut ops = vec![(
        "socket",
        opcode::Socket::new(family, libc::SOCK_STREAM, 0)
            .file_index(Some(slot))
            .build()
            .flags(squeue::Flags::IO_LINK),
    )];
    if family != libc::AF_UNIX {
        ops.push((
            "setsockopt",
            turn_on(0, libc::IPPROTO_TCP, libc::TCP_NODELAY)
                // Hard: the close runs even if this fails.
                .flags(squeue::Flags::IO_HARDLINK),
        ));
    }
    ops.push(("close", opcode::Close::new(types::Fixed(0)).build()));
    for (n, (_, e)) in ops.iter().enumerate() {
        // SAFETY: the entries point only to the static `ONE`.
        unsafe { ring.submission().push(&e.clone().user_data(n as u64)) }
            .map_err(|_| "submission queue full".to_string())?;
    }
    ring.submit_and_wait(ops.len())
        .map_err(|e| format!("io_uring_enter: {e}"))?;
    let mut failed = None;
    for cqe in ring.completion() {
        let what = ops.get(cqe.user_data() as usize).map_or("?", |o| o.0);
        if cqe.result() < 0 && failed.is_none() {
            let e = io::Error::from_raw_os_error(-cqe.result());
            failed = Some(format!("{what} through the ring: {e}"));
        }
    }
    failed.map_or(Ok(()), Err)
}

/// Whether `ring`'s kernel has the operation `code` (false if it cannot say).
pub(crate) fn supports(ring: &IoUring, code: u8) -> bool {
    let mut p = io_uring::Probe::new();
    ring.submitter().register_probe(&mut p).is_ok() && p.is_supported(code)
}

/// The value of a boolean socket option that is on.
static ONE: libc::c_int = 1;

/// An SQE that turns the boolean socket option `level`/`name` on for the
/// socket in slot `slot` (`SOCKET_URING_OP_SETSOCKOPT`, Linux 6.7+).
pub(crate) fn turn_on(slot: u32, level: i32, name: i32) -> squeue::Entry {
    opcode::SetSockOpt::new(
        types::Fixed(slot),
        level as u32,
        name as u32,
        (&ONE as *const libc::c_int).cast(),
        std::mem::size_of::<libc::c_int>() as u32,
    )
    .build()
}
