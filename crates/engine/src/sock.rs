//! Socket helpers shared by both drivers.

use std::io;
use std::mem::MaybeUninit;
use std::net::{IpAddr, SocketAddr};
use std::os::fd::RawFd;

use crate::plan::Plan;

/// A socket address in stable memory for Connect SQEs.
pub(crate) struct Addr {
    pub storage: libc::sockaddr_storage,
    pub len: libc::socklen_t,
    pub family: i32,
}

pub(crate) fn sockaddr(addr: SocketAddr) -> Box<Addr> {
    Box::new(addr_of(addr))
}

/// Where a plan's connections go: its Unix socket (`--unix-socket`), else
/// its address.
pub(crate) fn target_addr(plan: &Plan) -> Box<Addr> {
    match &plan.unix {
        Some(path) => Box::new(unix_addr_of(path)),
        None => sockaddr(plan.addr),
    }
}

/// The longest Unix socket path (`sun_path` less its terminating NUL).
pub const UNIX_PATH_MAX: usize = 107;

/// The C form of a Unix socket path; one longer than [`UNIX_PATH_MAX`] is
/// cut there (callers check it first).
pub(crate) fn unix_addr_of(path: &std::path::Path) -> Addr {
    use std::os::unix::ffi::OsStrExt;
    // SAFETY: sockaddr_storage is plain data; zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    // SAFETY: sockaddr_un fits in sockaddr_storage; both are plain data.
    let sun = unsafe { &mut *(&mut storage as *mut _ as *mut libc::sockaddr_un) };
    sun.sun_family = libc::AF_UNIX as _;
    let bytes = path.as_os_str().as_bytes();
    let n = bytes.len().min(UNIX_PATH_MAX);
    for (d, &b) in sun.sun_path.iter_mut().zip(&bytes[..n]) {
        *d = b as libc::c_char;
    }
    let len = std::mem::offset_of!(libc::sockaddr_un, sun_path) + n + 1;
    Addr {
        storage,
        len: len as libc::socklen_t,
        family: libc::AF_UNIX,
    }
}

/// The C form of a socket address.
pub(crate) fn addr_of(addr: SocketAddr) -> Addr {
    // SAFETY: sockaddr_storage is plain data; zero is a valid value.
    let mut storage: libc::sockaddr_storage = unsafe { MaybeUninit::zeroed().assume_init() };
    let (len, family) = match addr {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as _,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_in fits in sockaddr_storage; both are plain data.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in, sin) };
            (std::mem::size_of::<libc::sockaddr_in>(), libc::AF_INET)
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as _,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_in6 fits in sockaddr_storage; both are plain data.
            unsafe { std::ptr::write(&mut storage as *mut _ as *mut libc::sockaddr_in6, sin6) };
            (std::mem::size_of::<libc::sockaddr_in6>(), libc::AF_INET6)
        }
    };
    Addr {
        storage,
        len: len as libc::socklen_t,
        family,
    }
}

/// The local addresses one worker's connections are bound to (`--source`).
pub(crate) struct Sources {
    addrs: Vec<Addr>,
    workers: usize,
    worker: usize,
}

impl Sources {
    /// Worker `worker`'s view of the plan's sources (none: the kernel picks).
    pub(crate) fn new(plan: &Plan, worker: usize) -> Sources {
        Sources {
            addrs: plan
                .sources
                .iter()
                .map(|&ip| addr_of(SocketAddr::new(ip, 0)))
                .collect(),
            workers: plan.worker_cpus.len().max(1),
            worker,
        }
    }

    /// A new TCP socket for connection `i`, bound to its source address if
    /// there are any. Returns the errno on failure (the socket then closed).
    pub(crate) fn socket(&self, family: i32, nonblocking: bool, i: usize) -> Result<RawFd, i32> {
        let fd = tcp_socket(family, nonblocking)?;
        self.bind(fd, i).map(|()| fd).inspect_err(|_| {
            // SAFETY: our socket, not yet stored anywhere.
            unsafe { libc::close(fd) };
        })
    }

    /// Binds connection `i`'s new socket to its source address, if there
    /// are any (as [`Plan::source_of`] picks it). Returns the errno on failure.
    fn bind(&self, fd: RawFd, i: usize) -> Result<(), i32> {
        self.of(i).map_or(Ok(()), |a| bind_no_port(fd, a))
    }

    /// Connection `i`'s source address (None: the kernel picks).
    pub(crate) fn of(&self, i: usize) -> Option<&Addr> {
        if self.addrs.is_empty() {
            return None;
        }
        Some(&self.addrs[(i * self.workers + self.worker) % self.addrs.len()])
    }
}

/// Binds `fd` to `src` (port 0) with IP_BIND_ADDRESS_NO_PORT: the port is
/// picked at connect time for the whole 4-tuple, so each source address has
/// the full ephemeral range toward each destination (a plain bind would
/// reserve a port for every destination at once). Returns the errno on failure.
pub(crate) fn bind_no_port(fd: RawFd, src: &Addr) -> Result<(), i32> {
    set_int_opt(fd, libc::IPPROTO_IP, libc::IP_BIND_ADDRESS_NO_PORT, 1)?;
    // SAFETY: the address is valid for `len` bytes for the call's duration.
    let rc = unsafe {
        libc::bind(
            fd,
            &src.storage as *const _ as *const libc::sockaddr,
            src.len,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

/// Checks that `ip` is an address of this host that connections can be
/// bound to (for `--source`), by binding a socket to it.
pub fn check_source(ip: IpAddr) -> io::Result<()> {
    let a = addr_of(SocketAddr::new(ip, 0));
    let fd = tcp_socket(a.family, false).map_err(io::Error::from_raw_os_error)?;
    let r = bind_no_port(fd, &a).map_err(io::Error::from_raw_os_error);
    // SAFETY: our own socket, closed once.
    unsafe { libc::close(fd) };
    r
}

/// Opens a non-connected TCP socket with TCP_NODELAY. Returns the errno on failure.
pub(crate) fn tcp_socket(family: i32, nonblocking: bool) -> Result<RawFd, i32> {
    let mut ty = libc::SOCK_STREAM | libc::SOCK_CLOEXEC;
    if nonblocking {
        ty |= libc::SOCK_NONBLOCK;
    }
    // SAFETY: plain socket(2) call.
    let fd = unsafe { libc::socket(family, ty, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO));
    }
    if family != libc::AF_UNIX {
        let _ = set_int_opt(fd, libc::IPPROTO_TCP, libc::TCP_NODELAY, 1);
    }
    Ok(fd)
}

/// setsockopt with an int value; returns the errno on failure.
pub(crate) fn set_int_opt(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    value: libc::c_int,
) -> Result<(), i32> {
    // SAFETY: the option value is a valid c_int for the call's duration; a bad
    // fd is reported by the kernel, not undefined.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error()
            .raw_os_error()
            .unwrap_or(libc::EIO))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    #[test]
    fn connections_leave_from_their_source_address_in_turn() {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut plan = crate::plan::tests::plan(2, 4, None);
        plan.sources = vec![[127, 0, 0, 2].into(), [127, 0, 0, 3].into()];
        let target = addr_of(l.local_addr().unwrap());
        let mut peers = Vec::new();
        for w in 0..2 {
            let s = Sources::new(&plan, w);
            for i in 0..2 {
                let fd = tcp_socket(target.family, false).unwrap();
                s.bind(fd, i).unwrap();
                // SAFETY: the address is valid for `len` bytes.
                let rc = unsafe {
                    libc::connect(
                        fd,
                        &target.storage as *const _ as *const libc::sockaddr,
                        target.len,
                    )
                };
                assert_eq!(rc, 0, "{}", io::Error::last_os_error());
                let (_, peer) = l.accept().unwrap();
                assert_eq!(Some(peer.ip()), plan.source_of(w, i));
                peers.push(peer.ip());
                // SAFETY: our socket, closed once.
                unsafe { libc::close(fd) };
            }
        }
        peers.sort();
        peers.dedup();
        assert_eq!(peers.len(), 2);
    }

    #[test]
    fn a_source_that_is_not_local_is_refused() {
        assert!(check_source([127, 0, 0, 2].into()).is_ok());
        // TEST-NET-1 (RFC 5737): never an address of this host.
        let e = check_source([192, 0, 2, 1].into()).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(libc::EADDRNOTAVAIL));
    }
}
