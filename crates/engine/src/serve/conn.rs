//! One responder connection: what it owes in request order, its send in
//! flight, and what its timeouts decide.

use std::collections::VecDeque;
use std::os::fd::RawFd;

use xload_http::RequestScanner;

use super::config::Timeouts;
use super::h2::H2State;
use super::tls::Tls;

/// What a connection owes, in request order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Owed {
    /// `n` plain answers, of which `ready` may go now (the rest are delayed).
    Ok { n: u32, ready: u32 },
    /// The last answer: says Connection: close, then the connection ends.
    OkClose { ready: bool },
    /// `100 Continue` for a request that asked before sending its body.
    Continue,
    /// The answer to a HEAD: the plain answer's head only; `close` when it
    /// is the last one.
    Head { ready: bool, close: bool },
    /// `/stats`: its head only for HEAD (the same fields as for GET), and
    /// `Connection: close` when the request said so.
    Stats { head: bool, close: bool },
    /// 400, then close.
    Bad,
    /// `--files`: the file numbered `file` of the set, or 404 for
    /// [`NOT_FOUND`]; its head only for `head`; the last answer for `close`.
    File {
        file: u32,
        ready: bool,
        head: bool,
        close: bool,
    },
}

/// [`Owed::File`] of a path the set does not have.
pub(super) const NOT_FOUND: u32 = u32::MAX;

impl Owed {
    /// Answers of this entry still held (or queued) and not sendable.
    pub(super) fn held_answers(&self) -> u64 {
        match *self {
            Owed::Ok { n, ready } => u64::from(n - ready.min(n)),
            Owed::OkClose { ready: false }
            | Owed::Head { ready: false, .. }
            | Owed::File { ready: false, .. } => 1,
            _ => 0,
        }
    }

    /// An answer still held by --delay (or queued for a --pool slot).
    pub(super) fn is_held(&self) -> bool {
        matches!(
            self,
            Owed::Ok { ready: 0, .. }
                | Owed::OkClose { ready: false }
                | Owed::Head { ready: false, .. }
                | Owed::File { ready: false, .. }
        )
    }

    /// A held answer's time has come: marks the oldest answer of `owed`
    /// not yet ready ready to go.
    pub(super) fn release_oldest(owed: &mut VecDeque<Owed>) {
        for o in owed.iter_mut() {
            match o {
                Owed::Ok { n, ready } if *ready < *n => {
                    *ready += 1;
                    break;
                }
                Owed::OkClose { ready } | Owed::Head { ready, .. } | Owed::File { ready, .. }
                    if !*ready =>
                {
                    *ready = true;
                    break;
                }
                _ => {}
            }
        }
    }
}

pub(super) struct SConn {
    pub fd: RawFd,
    pub gen: u32,
    pub live: bool,
    pub recv_armed: bool,
    pub sending: bool,
    /// No more reading: close once everything owed is sent.
    pub closing: bool,
    pub scanner: RequestScanner,
    pub owed: VecDeque<Owed>,
    /// Bytes of a mixed answer (stats, 400, close) being sent.
    pub out: Vec<u8>,
    /// Plain answers in the send in flight.
    pub sending_ok: u32,
    /// The send in flight reads the prebuilt answers of this copy.
    pub send_copy: Option<usize>,
    /// The client asked for keep-alive explicitly (HTTP/1.0): answers say it too.
    pub says_keep_alive: bool,
    /// The socket sits in the registered file table at this connection's index.
    pub fixed: bool,
    /// When it was accepted or last sent bytes or was last written to.
    pub last_ns: u64,
    /// When the first bytes of a request head still incomplete came (0: none).
    pub head_since: u64,
    /// When the send in flight was queued, and whether the send timeout has
    /// shut the socket under it already.
    pub send_since: u64,
    pub send_killed: bool,
    /// The bytes the client had acknowledged when the send timeout last
    /// looked: a send the client is still draining (a large body to a slow
    /// reader) is not timed out, as nginx's send_timeout runs between two
    /// writes, not over the whole answer.
    pub send_acked: Option<u64>,
    /// Bytes of the send in flight.
    pub send_len: u32,
    /// `--tls`: the session between the socket's bytes and the scanner.
    pub tls: Option<Box<Tls>>,
    /// `--files`: the vector send of a head and a file's body (made at the
    /// first such answer, reused; boxed so the kernel's pointers stay put).
    pub vectored: Option<Box<Vectored>>,
    /// `--h2`: the connection speaks HTTP/2 (the scanner is not used).
    pub h2: Option<Box<H2State>>,
    /// Whether it speaks HTTP/2 is known (false until a TLS handshake has
    /// said what ALPN chose).
    pub proto_known: bool,
}

/// A `sendmsg` of two pieces: a head in the connection's own buffer and a
/// body in the file set, which outlives every connection.
pub(super) struct Vectored {
    pub iov: [libc::iovec; 2],
    pub msg: libc::msghdr,
}

impl Vectored {
    pub(super) fn new() -> Box<Vectored> {
        // SAFETY: all-zero is a valid iovec and msghdr (null pointers, zero lengths).
        let mut v: Box<Vectored> = Box::new(unsafe { std::mem::zeroed() });
        v.msg.msg_iov = v.iov.as_mut_ptr();
        v.msg.msg_iovlen = 2;
        v
    }

    /// Points the pieces at `head` and `body`; the message to send.
    pub(super) fn set(&mut self, head: &[u8], body: &[u8]) -> *const libc::msghdr {
        self.iov[0] = libc::iovec {
            iov_base: head.as_ptr() as *mut libc::c_void,
            iov_len: head.len(),
        };
        self.iov[1] = libc::iovec {
            iov_base: body.as_ptr() as *mut libc::c_void,
            iov_len: body.len(),
        };
        &self.msg
    }
}

/// Why the timeout sweep closes a connection with nothing owed to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Expired {
    /// It sent nothing for the idle timeout.
    Idle,
    /// A request head did not come whole within the header timeout.
    Header,
}

/// What the send timeout decides at a look at a send that has been in
/// flight for the timeout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum SendLook {
    /// First look: the client's acknowledged bytes are noted, the next look
    /// decides.
    Measure(u64),
    /// The client took more since the last look: a full timeout more.
    Progress(u64),
    /// Nothing taken since the last look (or the kernel does not say).
    TimedOut,
}

impl SendLook {
    /// From the acknowledged bytes at the last look and now.
    pub(super) fn of(last: Option<u64>, acked: Option<u64>) -> SendLook {
        match (last, acked) {
            (_, None) => SendLook::TimedOut,
            (None, Some(b)) => SendLook::Measure(b),
            (Some(prev), Some(b)) if b > prev => SendLook::Progress(b),
            (Some(_), Some(_)) => SendLook::TimedOut,
        }
    }
}

impl SConn {
    /// A slot not in use yet; with `files`, requests' paths are looked up in it.
    pub(super) fn new(files: Option<&std::sync::Arc<xload_files::FileSet>>) -> SConn {
        // `/stats` answers the responder's own counters.
        let mut scanner = RequestScanner::new(b"/stats");
        if let Some(f) = files {
            scanner = scanner.with_paths(f.clone());
        }
        SConn {
            fd: -1,
            gen: 0,
            live: false,
            recv_armed: false,
            sending: false,
            closing: false,
            scanner,
            owed: VecDeque::with_capacity(8),
            out: Vec::new(),
            sending_ok: 0,
            send_copy: None,
            says_keep_alive: false,
            fixed: false,
            last_ns: 0,
            head_since: 0,
            send_since: 0,
            send_killed: false,
            send_acked: None,
            send_len: 0,
            tls: None,
            vectored: None,
            h2: None,
            proto_known: true,
        }
    }

    /// The slot takes the accepted socket `fd` at `now`; `fixed`: it goes in
    /// the registered file table.
    pub(super) fn accept(&mut self, fd: RawFd, now: u64, fixed: bool) {
        self.fd = fd;
        self.live = true;
        self.last_ns = now;
        self.head_since = 0;
        self.send_killed = false;
        self.closing = false;
        self.sending = false;
        self.sending_ok = 0;
        self.says_keep_alive = false;
        self.scanner.reset();
        self.owed.clear();
        self.fixed = fixed;
    }

    /// This connection's slot in the registered file table, if it has one.
    #[inline]
    pub(super) fn slot(&self, i: usize) -> Option<u32> {
        self.fixed.then_some(i as u32)
    }

    /// Its send in flight has lasted the send timeout (and has not been
    /// ended by it yet).
    pub(super) fn send_overdue(&self, now: u64, timeouts: &Timeouts) -> bool {
        self.live
            && self.sending
            && !self.send_killed
            && timeouts
                .send
                .is_some_and(|t| now.saturating_sub(self.send_since) >= t)
    }

    /// Whether the idle or header timeout closes it at `now`: only a
    /// connection with nothing owed to it (an answer held by --delay is
    /// owed) and nothing being sent; a client sending its head a byte at a
    /// time is not idle, but its head is late.
    pub(super) fn expired(&self, now: u64, timeouts: &Timeouts) -> Option<Expired> {
        if !self.live || self.closing || self.sending || !self.owed.is_empty() {
            return None;
        }
        if self
            .h2
            .as_ref()
            .is_some_and(|h| h.owes() || h.conn.active() > 0)
        {
            return None;
        }
        let idle = timeouts
            .idle
            .is_some_and(|t| now.saturating_sub(self.last_ns) >= t);
        let slow_head = self.head_since != 0
            && timeouts
                .header
                .is_some_and(|t| now.saturating_sub(self.head_since) >= t);
        if idle {
            Some(Expired::Idle)
        } else if slow_head {
            Some(Expired::Header)
        } else {
            None
        }
    }
}

/// The bytes a TCP socket's peer has acknowledged (`tcpi_bytes_acked`,
/// Linux 4.1+; it grows only as the peer's receive window lets data in, so
/// as the client reads); None if the kernel does not say.
pub(super) fn bytes_acked(fd: RawFd) -> Option<u64> {
    // SAFETY: tcp_info is plain integers; all zeroes is a valid value.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `info`.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    let need = std::mem::offset_of!(libc::tcp_info, tcpi_bytes_acked) + 8;
    (rc == 0 && len as usize >= need).then_some(info.tcpi_bytes_acked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_answers_are_those_not_ready() {
        assert_eq!(Owed::Ok { n: 5, ready: 2 }.held_answers(), 3);
        assert_eq!(Owed::Ok { n: 5, ready: 5 }.held_answers(), 0);
        assert_eq!(Owed::OkClose { ready: false }.held_answers(), 1);
        assert_eq!(
            Owed::Head {
                ready: false,
                close: true
            }
            .held_answers(),
            1
        );
        for o in [
            Owed::OkClose { ready: true },
            Owed::Continue,
            Owed::Stats {
                head: false,
                close: false,
            },
            Owed::Bad,
        ] {
            assert_eq!(o.held_answers(), 0, "{o:?}");
            assert!(!o.is_held(), "{o:?}");
        }
        // Held: nothing of the entry may go now.
        assert!(Owed::Ok { n: 3, ready: 0 }.is_held());
        assert!(!Owed::Ok { n: 3, ready: 1 }.is_held());
        assert!(Owed::OkClose { ready: false }.is_held());
    }

    #[test]
    fn releases_go_to_the_oldest_held_answer_in_order() {
        let mut owed = VecDeque::from([
            Owed::Continue,
            Owed::Ok { n: 2, ready: 0 },
            Owed::Head {
                ready: false,
                close: false,
            },
            Owed::OkClose { ready: false },
        ]);
        let mut seen = Vec::new();
        for _ in 0..5 {
            Owed::release_oldest(&mut owed);
            seen.push(owed.iter().map(Owed::held_answers).sum::<u64>());
        }
        assert_eq!(seen, [3, 2, 1, 0, 0]);
        assert_eq!(
            owed,
            [
                Owed::Continue,
                Owed::Ok { n: 2, ready: 2 },
                Owed::Head {
                    ready: true,
                    close: false
                },
                Owed::OkClose { ready: true },
            ]
        );
    }

    #[test]
    fn send_timeout_waits_for_a_client_that_reads() {
        assert_eq!(SendLook::of(None, Some(10)), SendLook::Measure(10));
        assert_eq!(SendLook::of(Some(10), Some(11)), SendLook::Progress(11));
        assert_eq!(SendLook::of(Some(10), Some(10)), SendLook::TimedOut);
        // The kernel does not say: no way to see progress.
        assert_eq!(SendLook::of(None, None), SendLook::TimedOut);
        assert_eq!(SendLook::of(Some(10), None), SendLook::TimedOut);
    }

    fn timeouts(idle: Option<u64>, header: Option<u64>, send: Option<u64>) -> Timeouts {
        Timeouts {
            idle,
            header,
            send,
            sweep_every: Some(1),
        }
    }

    #[test]
    fn idle_and_header_timeouts_spare_a_connection_that_is_owed() {
        let t = timeouts(Some(100), Some(50), None);
        let mut c = SConn::new(None);
        c.accept(7, 1_000, false);
        assert_eq!(c.expired(1_099, &t), None);
        assert_eq!(c.expired(1_100, &t), Some(Expired::Idle));
        // A head that started: the header timeout counts from its first bytes.
        c.last_ns = 1_040;
        c.head_since = 1_040;
        assert_eq!(c.expired(1_089, &t), None);
        assert_eq!(c.expired(1_090, &t), Some(Expired::Header));
        // Owed an answer (held by --delay), sending, or closing already: spared.
        c.owed.push_back(Owed::Ok { n: 1, ready: 0 });
        assert_eq!(c.expired(9_999, &t), None);
        c.owed.clear();
        c.sending = true;
        assert_eq!(c.expired(9_999, &t), None);
        c.sending = false;
        c.closing = true;
        assert_eq!(c.expired(9_999, &t), None);
        // No timeouts: never.
        c.closing = false;
        assert_eq!(c.expired(u64::MAX, &timeouts(None, None, None)), None);
    }

    #[test]
    fn a_send_is_overdue_once_after_the_send_timeout() {
        let t = timeouts(None, None, Some(100));
        let mut c = SConn::new(None);
        c.accept(7, 0, false);
        c.sending = true;
        c.send_since = 500;
        assert!(!c.send_overdue(599, &t));
        assert!(c.send_overdue(600, &t));
        c.send_killed = true;
        assert!(!c.send_overdue(700, &t));
        assert!(!c.send_overdue(700, &timeouts(None, None, None)));
    }

    #[test]
    fn accept_starts_a_clean_connection() {
        let mut c = SConn::new(None);
        c.accept(3, 10, true);
        c.owed.push_back(Owed::Bad);
        c.closing = true;
        c.says_keep_alive = true;
        c.sending_ok = 4;
        c.accept(4, 20, false);
        assert_eq!((c.fd, c.live, c.last_ns, c.fixed), (4, true, 20, false));
        assert!(c.owed.is_empty() && !c.closing && !c.says_keep_alive);
        assert_eq!(c.sending_ok, 0);
        assert_eq!(c.slot(9), None);
        c.fixed = true;
        assert_eq!(c.slot(9), Some(9));
    }
}
