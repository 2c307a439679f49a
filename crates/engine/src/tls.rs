//! TLS for the client's connections (https://): one rustls session per
//! connection, between the driver's socket I/O and the HTTP codec. Records
//! leave through the driver's send path from [`Session::out`]; received
//! records are opened into [`Session::plain`] and fed to the codec.
//!
//! rustls's buffered `ClientConnection`, not the unbuffered API: in rustls
//! 0.23 both copy each record through a `Vec` of their own (the unbuffered
//! `ReadTraffic` pops a decrypted chunk, `encrypt` builds the record before
//! copying it out), so the unbuffered API would save no allocation per
//! record and cost a state machine of our own. Our two buffers are per
//! connection and keep their capacity across requests and reconnects.

use std::io::{Read, Write};

use rustls::{ClientConnection, HandshakeKind, ProtocolVersion};
use xload_stats::{ErrorKind, Recorder};

use crate::plan::TlsClient;

/// One connection's TLS session and its buffers.
pub(crate) struct Session {
    conn: ClientConnection,
    /// Sealed records to send, of which the first `sent` bytes have left
    /// (the driver advances `sent`); emptied when all have, before more
    /// records are appended.
    pub out: Vec<u8>,
    pub sent: usize,
    /// io_uring: the records of the send in flight (untouched until its
    /// completion: the kernel reads them), and whether one is.
    flight: Vec<u8>,
    sending: bool,
    /// Plaintext opened by the last [`Session::open`].
    pub plain: Vec<u8>,
    /// A byte has arrived (the first tells TLS from plain HTTP).
    heard: bool,
    /// When the TCP connect began and when it completed, ns.
    pub connect_ns: u64,
    pub connected_ns: u64,
    /// CPU time in rustls's handshake computation so far (key shares,
    /// certificate and signature checks), ns: the worker thread's CPU clock
    /// around its calls.
    handshake_ns: u64,
}

/// What opening received records led to (their plaintext is in `plain`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Opened {
    /// The handshake completed with these records.
    pub established: bool,
    /// The peer sent close_notify: the stream ends after `plain`.
    pub closed: bool,
}

impl Session {
    /// A session that starts its handshake on a connection that began
    /// connecting at `connect_ns` and connected at `connected_ns`; the
    /// ClientHello is in `out`.
    pub(crate) fn new(
        t: &TlsClient,
        connect_ns: u64,
        connected_ns: u64,
    ) -> Result<Box<Session>, ErrorKind> {
        let began = thread_cpu_ns();
        let mut s = Box::new(Session {
            conn: client(t)?,
            out: Vec::with_capacity(4096),
            sent: 0,
            flight: Vec::with_capacity(4096),
            sending: false,
            plain: Vec::with_capacity(16 * 1024),
            heard: false,
            connect_ns,
            connected_ns,
            handshake_ns: 0,
        });
        s.queue_records();
        s.handshake_ns = thread_cpu_ns().saturating_sub(began);
        Ok(s)
    }

    /// The same for a new connection, reusing the buffers.
    pub(crate) fn restart(
        &mut self,
        t: &TlsClient,
        connect_ns: u64,
        connected_ns: u64,
    ) -> Result<(), ErrorKind> {
        let began = thread_cpu_ns();
        self.conn = client(t)?;
        self.out.clear();
        self.sent = 0;
        self.plain.clear();
        self.heard = false;
        self.connect_ns = connect_ns;
        self.connected_ns = connected_ns;
        self.queue_records();
        self.handshake_ns = thread_cpu_ns().saturating_sub(began);
        Ok(())
    }

    /// io_uring: moves the queued records to the in-flight buffer and
    /// returns it; None while a send is in flight or nothing is queued.
    /// The buffer stays put until [`Session::send_done`] (a restart for a
    /// new connection leaves it alone too).
    pub(crate) fn take_flight(&mut self) -> Option<(*const u8, usize)> {
        if self.sending || self.out.is_empty() {
            return None;
        }
        std::mem::swap(&mut self.out, &mut self.flight);
        self.out.clear();
        self.sending = true;
        Some((self.flight.as_ptr(), self.flight.len()))
    }

    /// io_uring: bytes of the send in flight.
    pub(crate) fn flight_len(&self) -> usize {
        self.flight.len()
    }

    /// io_uring: the send of the in-flight buffer completed.
    pub(crate) fn send_done(&mut self) {
        self.sending = false;
        self.flight.clear();
    }

    /// Appends the records rustls has queued (handshake, alerts) to `out`.
    pub(crate) fn queue_records(&mut self) {
        if self.sent >= self.out.len() {
            self.out.clear();
            self.sent = 0;
        }
        while self.conn.wants_write() {
            if self.conn.write_tls(&mut self.out).is_err() {
                break;
            }
        }
    }

    /// Seals `plain` and appends its records to `out`.
    #[inline]
    pub(crate) fn seal(&mut self, plain: &[u8]) {
        // No buffer limit (see `client`): the whole slice is taken.
        let _ = self.conn.writer().write_all(plain);
        self.queue_records();
    }

    /// Opens received records into `plain` (replacing what it held); records
    /// the handshake needs sent go to `out`. The error is the category to
    /// count ([`ErrorKind::Parse`]: a bad record after the handshake).
    pub(crate) fn open(&mut self, cipher: &[u8]) -> Result<Opened, ErrorKind> {
        if !self.conn.is_handshaking() {
            return self.open_records(cipher);
        }
        // Only while handshaking: no clock reads per request on a kept
        // connection (the thread's CPU clock is a syscall, not the vDSO's).
        let began = thread_cpu_ns();
        let opened = self.open_records(cipher);
        self.handshake_ns += thread_cpu_ns().saturating_sub(began);
        opened
    }

    fn open_records(&mut self, mut cipher: &[u8]) -> Result<Opened, ErrorKind> {
        let was_handshaking = self.conn.is_handshaking();
        if !self.heard && !cipher.is_empty() {
            self.heard = true;
            // TLS records start with content type 20..=24; "HTTP/1.1 400" does not.
            if !(0x14..=0x18).contains(&cipher[0]) {
                return Err(ErrorKind::NotTls);
            }
        }
        self.plain.clear();
        let mut closed = false;
        while !cipher.is_empty() {
            match self.conn.read_tls(&mut cipher) {
                Ok(0) => break,
                Ok(_) => {}
                Err(_) => return Err(failure(None, was_handshaking)),
            }
            let st = match self.conn.process_new_packets() {
                Ok(st) => st,
                Err(e) => {
                    // The alert for the peer, if it gets a chance to leave.
                    self.queue_records();
                    return Err(failure(Some(&e), was_handshaking));
                }
            };
            let want = st.plaintext_bytes_to_read();
            if want > 0 {
                let at = self.plain.len();
                self.plain.resize(at + want, 0);
                let n = self.conn.reader().read(&mut self.plain[at..]).unwrap_or(0);
                self.plain.truncate(at + n);
            }
            closed |= st.peer_has_closed();
        }
        self.queue_records();
        Ok(Opened {
            established: was_handshaking && !self.conn.is_handshaking(),
            closed,
        })
    }

    /// Records a completed handshake: connect and handshake time, its
    /// computation time, full or resumed, version and cipher.
    pub(crate) fn record_established(&self, rec: &mut Recorder, now_ns: u64) {
        let version = match self.conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLS1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLS1.2",
            _ => "TLS",
        };
        let cipher = self
            .conn
            .negotiated_cipher_suite()
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown cipher");
        rec.record_tls_handshake(
            self.connected_ns.saturating_sub(self.connect_ns) / 1_000,
            now_ns.saturating_sub(self.connected_ns) / 1_000,
            self.handshake_ns,
            self.conn.handshake_kind() == Some(HandshakeKind::Resumed),
            version,
            cipher,
        );
    }
}

/// This thread's CPU time, ns: a wall clock would count the time the
/// thread was preempted on a shared CPU as computation.
fn thread_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes the timespec we own.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn client(t: &TlsClient) -> Result<ClientConnection, ErrorKind> {
    let mut c = ClientConnection::new(t.config.clone(), t.server_name.clone())
        .map_err(|_| ErrorKind::TlsHandshake)?;
    // A pipelined batch is sealed whole (it can exceed rustls's default limit).
    c.set_buffer_limit(None);
    Ok(c)
}

/// The category of a TLS failure.
fn failure(e: Option<&rustls::Error>, handshaking: bool) -> ErrorKind {
    match e {
        Some(rustls::Error::InvalidCertificate(_)) => ErrorKind::TlsUntrusted,
        _ if handshaking => ErrorKind::TlsHandshake,
        _ => ErrorKind::Parse,
    }
}

/// Counts a TLS failure: a bad record after the handshake is a parse error
/// of cause `tls_record`.
pub(crate) fn record_failure(rec: &mut Recorder, kind: ErrorKind) {
    if kind == ErrorKind::Parse {
        rec.record_parse_error("tls_record");
    } else {
        rec.record_error(kind);
    }
}

/// Why records are not handed to the kernel (kTLS): this xload seals and
/// opens them in user space. Says whether the kernel could have: no `tls`
/// upper-layer protocol (not in `tcp_available_ulp`, and TCP_ULP "tls"
/// answers ENOENT: no module to load either).
pub fn ktls_unavailable() -> String {
    let listed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
        .map(|s| s.split_whitespace().any(|u| u == "tls"))
        .unwrap_or(false);
    if listed || ulp_loadable() {
        "the kernel has a tls ULP but xload does not hand sessions to it yet".to_string()
    } else {
        "no tls ULP in this kernel".to_string()
    }
}

/// TCP_ULP "tls" on an unconnected socket: ENOTCONN when the ULP exists
/// (it is loaded on demand first), ENOENT when it does not.
fn ulp_loadable() -> bool {
    // SAFETY: plain socket/setsockopt/close on a socket we own.
    unsafe {
        let fd = libc::socket(libc::AF_INET, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0);
        if fd < 0 {
            return false;
        }
        let name = b"tls";
        let rc = libc::setsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        );
        let err = std::io::Error::last_os_error().raw_os_error();
        libc::close(fd);
        rc == 0 || err != Some(libc::ENOENT)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_kernel_has_no_tls_ulp() {
        // The development machine's kernel is built without CONFIG_TLS.
        let listed = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_ulp")
            .unwrap_or_default()
            .split_whitespace()
            .any(|u| u == "tls");
        if !listed && !ulp_loadable() {
            assert_eq!(ktls_unavailable(), "no tls ULP in this kernel");
        }
    }

    #[test]
    fn failures_are_named_by_phase() {
        let cert = rustls::Error::InvalidCertificate(rustls::CertificateError::UnknownIssuer);
        assert_eq!(failure(Some(&cert), true), ErrorKind::TlsUntrusted);
        let alert = rustls::Error::AlertReceived(rustls::AlertDescription::ProtocolVersion);
        assert_eq!(failure(Some(&alert), true), ErrorKind::TlsHandshake);
        assert_eq!(failure(Some(&alert), false), ErrorKind::Parse);
    }
}
