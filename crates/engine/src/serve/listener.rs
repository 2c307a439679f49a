//! Each worker's listening socket: bound with SO_REUSEPORT on one port so
//! that the kernel spreads connections over the workers; or one Unix socket
//! (`--unix-socket`), whose listener every worker accepts from.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;

use crate::sock::{set_int_opt, sockaddr};

/// The listen() backlog asked for; the kernel caps it at net.core.somaxconn.
const LISTEN_BACKLOG: libc::c_int = 65535;

/// SO_REUSEPORT lets any process of the same user join a listening group:
/// a second `xload serve` on a busy port would silently share its
/// connections. A plain bind first finds the port taken.
pub(super) fn port_is_free(addr: SocketAddr) -> io::Result<()> {
    let probe = std::net::TcpListener::bind(addr);
    match probe {
        Ok(l) => {
            drop(l);
            Ok(())
        }
        Err(e) if e.kind() == io::ErrorKind::AddrInUse => Err(io::Error::new(
            e.kind(),
            format!("bind {addr}: address already in use (another process listens there)"),
        )),
        Err(e) => Err(io::Error::new(e.kind(), format!("bind {addr}: {e}"))),
    }
}

/// A listening socket on `addr`, bound with SO_REUSEPORT so that every
/// worker's listener shares the port.
pub(super) fn reuseport_listener(addr: SocketAddr) -> io::Result<TcpListener> {
    let family = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: plain socket(2).
    let fd = unsafe { libc::socket(family, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a fresh socket we own; TcpListener takes ownership.
    let l = unsafe { TcpListener::from_raw_fd(fd) };
    for opt in [libc::SO_REUSEADDR, libc::SO_REUSEPORT] {
        set_int_opt(fd, libc::SOL_SOCKET, opt, 1).map_err(io::Error::from_raw_os_error)?;
    }
    let sa = sockaddr(addr);
    // SAFETY: the address is valid for `len` bytes.
    if unsafe { libc::bind(fd, &sa.storage as *const _ as *const libc::sockaddr, sa.len) } != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(e.kind(), format!("bind {addr}: {e}")));
    }
    // SAFETY: valid fd.
    if unsafe { libc::listen(fd, LISTEN_BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(l)
}

/// `n` handles of one listening Unix socket at `path` (one per worker,
/// sharing its accept queue). A socket file left by a server gone (nobody
/// accepts on it) is replaced; a live one, or a file that is no socket, is
/// refused.
pub(super) fn unix_listeners(path: &Path, n: usize) -> io::Result<Vec<OwnedFd>> {
    let named = |e: io::Error, what: &str| {
        io::Error::new(e.kind(), format!("{}: {what}{e}", path.display()))
    };
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(named(e, "")),
        Ok(m) if !m.file_type().is_socket() => {
            return Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!("{}: exists and is not a socket", path.display()),
            ))
        }
        Ok(_) => match UnixStream::connect(path) {
            Ok(_) => {
                return Err(io::Error::new(
                    io::ErrorKind::AddrInUse,
                    format!("{}: another process listens there", path.display()),
                ))
            }
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => {
                std::fs::remove_file(path).map_err(|e| named(e, "remove a stale socket: "))?;
            }
            Err(e) => return Err(named(e, "")),
        },
    }
    let l = UnixListener::bind(path).map_err(|e| named(e, "bind: "))?;
    // std listens with a backlog of 128; ask for as much as for TCP.
    // SAFETY: a valid listening socket of ours.
    if unsafe { libc::listen(l.as_raw_fd(), LISTEN_BACKLOG) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let mut fds = Vec::with_capacity(n);
    for _ in 1..n.max(1) {
        fds.push(OwnedFd::from(l.try_clone()?));
    }
    fds.push(OwnedFd::from(l));
    Ok(fds)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_share_one_port_and_a_busy_port_is_refused() {
        let first = reuseport_listener("127.0.0.1:0".parse().unwrap()).unwrap();
        let addr = first.local_addr().unwrap();
        // Another worker of the same responder joins the port.
        let second = reuseport_listener(addr).unwrap();
        assert_eq!(second.local_addr().unwrap(), addr);
        // A second responder finds it taken.
        let e = port_is_free(addr).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::AddrInUse);
        assert!(e.to_string().contains("already in use"), "{e}");
        drop((first, second));
        assert!(port_is_free(addr).is_ok());
    }
}
