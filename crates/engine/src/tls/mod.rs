//! TLS for the client's connections (https://): one session per connection,
//! between the driver's socket I/O and the HTTP codec. Records leave through
//! the driver's send path from [`Session::out`]; received records are opened
//! into [`Session::plain`] and fed to the codec.
//!
//! rustls's unbuffered client runs the handshake; then its traffic keys are
//! taken over ([`records`]): requests are sealed straight into `out` and
//! responses opened in place in the receive buffer, with no copy through
//! rustls's buffers and none of its per-record machinery. What rustls still
//! does after the handshake: take the server's session tickets and compute
//! new keys at a KeyUpdate (its kernel-connection API, the one kTLS uses).

use rustls::client::{ClientConnectionData, UnbufferedClientConnection};
use rustls::kernel::KernelConnection;
use rustls::unbuffered::{ConnectionState, EncodeError, EncodeTlsData, UnbufferedStatus};
use rustls::{HandshakeKind, ProtocolVersion, SupportedCipherSuite};
use xload_stats::{ErrorKind, Recorder};

use crate::plan::TlsClient;

mod records;

use records::{BadRecord, Records, ALERT, APPLICATION_DATA, HANDSHAKE, HEADER};

/// Handshake message types seen after the handshake.
const HELLO_REQUEST: u8 = 0;
const NEW_SESSION_TICKET: u8 = 4;
const KEY_UPDATE: u8 = 24;
/// Longest post-handshake message taken (tickets are a few hundred bytes).
const MAX_HANDSHAKE_MESSAGE: usize = 64 * 1024;
/// Alerts that do not end the connection.
const CLOSE_NOTIFY: u8 = 0;
const USER_CANCELED: u8 = 90;

/// One connection's TLS session and its buffers.
pub(crate) struct Session {
    /// The handshake in progress.
    hs: Option<UnbufferedClientConnection>,
    /// After it: the record keys, and rustls's part (tickets, key updates).
    records: Option<Records>,
    kernel: Option<KernelConnection<ClientConnectionData>>,
    /// Send records under one key at most this many times (TLS 1.3: then a
    /// KeyUpdate; the cipher suite's confidentiality limit).
    tx_limit: u64,
    /// Received bytes not yet used: during the handshake all of them, after
    /// it the start of a record split across receives.
    inbuf: Vec<u8>,
    /// A post-handshake handshake message split across records.
    hs_msg: Vec<u8>,
    /// Plaintext given before the handshake completed, sealed once it has.
    early: Vec<u8>,
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
    /// CPU time in the handshake computation so far (key shares,
    /// certificate and signature checks), ns: the worker thread's CPU clock
    /// around its calls.
    handshake_ns: u64,
    /// What the handshake agreed, for the report.
    version: &'static str,
    cipher: &'static str,
    resumed: bool,
    /// ALPN: the server chose `h2`.
    alpn_h2: bool,
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
    /// ALPN: the server chose `h2` in the handshake that completed.
    pub(crate) fn alpn_h2(&self) -> bool {
        self.alpn_h2
    }

    /// A session that starts its handshake on a connection that began
    /// connecting at `connect_ns` and connected at `connected_ns`; the
    /// ClientHello is in `out`.
    pub(crate) fn new(
        t: &TlsClient,
        connect_ns: u64,
        connected_ns: u64,
    ) -> Result<Box<Session>, ErrorKind> {
        let mut s = Box::new(Session {
            hs: None,
            records: None,
            kernel: None,
            tx_limit: u64::MAX,
            inbuf: Vec::new(),
            hs_msg: Vec::new(),
            early: Vec::new(),
            out: Vec::with_capacity(512),
            sent: 0,
            flight: Vec::with_capacity(512),
            sending: false,
            plain: Vec::new(),
            heard: false,
            connect_ns,
            connected_ns,
            handshake_ns: 0,
            version: "TLS",
            cipher: "unknown cipher",
            resumed: false,
            alpn_h2: false,
        });
        s.restart(t, connect_ns, connected_ns)?;
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
        self.hs = Some(
            UnbufferedClientConnection::new(t.config.clone(), t.server_name.clone())
                .map_err(|_| ErrorKind::TlsHandshake)?,
        );
        self.records = None;
        self.kernel = None;
        self.inbuf.clear();
        self.hs_msg.clear();
        self.early.clear();
        self.out.clear();
        self.sent = 0;
        self.plain.clear();
        self.heard = false;
        self.connect_ns = connect_ns;
        self.connected_ns = connected_ns;
        self.resumed = false;
        let started = self.handshake();
        self.handshake_ns = thread_cpu_ns().saturating_sub(began);
        started.map(|_| ())
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

    /// Seals `plain` and appends its records to `out` (only once the
    /// handshake is done: requests wait for it).
    #[inline]
    pub(crate) fn seal(&mut self, plain: &[u8]) {
        if self
            .records
            .as_ref()
            .is_some_and(|r| r.sent() >= self.tx_limit)
        {
            // The key has protected all it may: a fresh one (TLS 1.3).
            let _ = self.update_tx_key();
        }
        let Some(r) = self.records.as_mut() else {
            return self.early.extend_from_slice(plain);
        };
        r.seal(
            APPLICATION_DATA,
            plain,
            unsent(&mut self.out, &mut self.sent),
        );
    }

    /// Opens received records (in place: `cipher` is scratch afterwards)
    /// into `plain`, replacing what it held; records the handshake needs
    /// sent go to `out`. The error is the category to count
    /// ([`ErrorKind::Parse`]: a bad record after the handshake).
    pub(crate) fn open(&mut self, cipher: &mut [u8]) -> Result<Opened, ErrorKind> {
        self.plain.clear();
        if self.records.is_some() {
            return self.open_traffic(cipher).map(|closed| Opened {
                established: false,
                closed,
            });
        }
        if !self.heard && !cipher.is_empty() {
            self.heard = true;
            // TLS records start with content type 20..=24; "HTTP/1.1 400" does not.
            if !(0x14..=0x18).contains(&cipher[0]) {
                return Err(ErrorKind::NotTls);
            }
        }
        // Only while handshaking: no clock reads per request on a kept
        // connection (the thread's CPU clock is a syscall, not the vDSO's).
        let began = thread_cpu_ns();
        self.inbuf.extend_from_slice(cipher);
        let established = self.handshake();
        self.handshake_ns += thread_cpu_ns().saturating_sub(began);
        let established = established?;
        let mut closed = false;
        if established && !self.inbuf.is_empty() {
            // Records that came with the handshake's last ones.
            let mut rest = std::mem::take(&mut self.inbuf);
            let used = self.open_whole(&mut rest, &mut closed);
            rest.drain(..used.unwrap_or(rest.len()));
            self.inbuf = rest;
            used.map_err(|_| ErrorKind::Parse)?;
        }
        Ok(Opened {
            established,
            closed,
        })
    }

    /// Runs the handshake over the bytes in `inbuf` (what it used is
    /// dropped from it); what it sends goes to `out`. True when it has
    /// completed: the session then holds the record keys.
    fn handshake(&mut self) -> Result<bool, ErrorKind> {
        let Some(conn) = self.hs.as_mut() else {
            return Ok(self.records.is_some());
        };
        loop {
            let UnbufferedStatus { mut discard, state } = conn.process_tls_records(&mut self.inbuf);
            let step = match state {
                Err(e) => Err(failure(Some(&e), true)),
                Ok(ConnectionState::EncodeTlsData(mut enc)) => {
                    encode(&mut enc, unsent(&mut self.out, &mut self.sent));
                    Ok(None)
                }
                Ok(ConnectionState::TransmitTlsData(t)) => {
                    // Queued in `out`: the driver sends it.
                    t.done();
                    Ok(None)
                }
                Ok(ConnectionState::BlockedHandshake) => Ok(Some(false)),
                Ok(ConnectionState::WriteTraffic(_)) => Ok(Some(true)),
                Ok(ConnectionState::ReadTraffic(mut r)) => {
                    // Data before the handshake is done (a server's 0.5-RTT data).
                    let mut bad = false;
                    while let Some(rec) = r.next_record() {
                        match rec {
                            Ok(rec) => {
                                discard += rec.discard;
                                self.plain.extend_from_slice(rec.payload);
                            }
                            Err(_) => bad = true,
                        }
                    }
                    if bad {
                        Err(ErrorKind::TlsHandshake)
                    } else {
                        Ok(None)
                    }
                }
                Ok(ConnectionState::PeerClosed | ConnectionState::Closed) => {
                    Err(ErrorKind::TlsClosedInHandshake)
                }
                Ok(_) => Err(ErrorKind::TlsHandshake),
            };
            self.inbuf.drain(..discard);
            match step? {
                None => continue,
                Some(false) => return Ok(false),
                Some(true) => break,
            }
        }
        self.take_keys()?;
        Ok(true)
    }

    /// The handshake is done: its keys move to the record layer, rustls
    /// keeps what tickets and key updates need.
    fn take_keys(&mut self) -> Result<(), ErrorKind> {
        let conn = self.hs.take().ok_or(ErrorKind::TlsHandshake)?;
        let tls13 = conn.protocol_version() == Some(ProtocolVersion::TLSv1_3);
        self.version = match conn.protocol_version() {
            Some(ProtocolVersion::TLSv1_3) => "TLS1.3",
            Some(ProtocolVersion::TLSv1_2) => "TLS1.2",
            _ => "TLS",
        };
        let suite = conn.negotiated_cipher_suite();
        self.cipher = suite
            .and_then(|s| s.suite().as_str())
            .unwrap_or("unknown cipher");
        self.tx_limit = match suite {
            Some(SupportedCipherSuite::Tls13(s)) => s.common.confidentiality_limit,
            _ => u64::MAX,
        };
        self.resumed = conn.handshake_kind() == Some(HandshakeKind::Resumed);
        self.alpn_h2 = conn.alpn_protocol() == Some(b"h2");
        let (secrets, kernel) = conn
            .dangerous_into_kernel_connection()
            .map_err(|_| ErrorKind::TlsHandshake)?;
        let mut records = Records::new(tls13, &secrets).map_err(|_| ErrorKind::TlsHandshake)?;
        if !self.early.is_empty() {
            let out = unsent(&mut self.out, &mut self.sent);
            records.seal(APPLICATION_DATA, &self.early, out);
            self.early.clear();
        }
        self.records = Some(records);
        self.kernel = Some(kernel);
        Ok(())
    }

    /// Opens the records in `cipher`, after finishing one split across
    /// receives. True when the peer sent close_notify.
    fn open_traffic(&mut self, cipher: &mut [u8]) -> Result<bool, ErrorKind> {
        let mut closed = false;
        let mut cipher = cipher;
        while !self.inbuf.is_empty() {
            // Only as much as completes the header, then the record.
            let want = Records::record_len(&self.inbuf)
                .map_err(|_| ErrorKind::Parse)?
                .unwrap_or(HEADER);
            let take = (want - self.inbuf.len()).min(cipher.len());
            let (head, rest) = std::mem::take(&mut cipher).split_at_mut(take);
            self.inbuf.extend_from_slice(head);
            cipher = rest;
            if self.inbuf.len() < want {
                return Ok(false);
            }
            if Records::whole(&self.inbuf) == Ok(Some(self.inbuf.len())) {
                let mut rec = std::mem::take(&mut self.inbuf);
                let opened = self.open_record(&mut rec);
                rec.clear();
                self.inbuf = rec;
                closed |= opened.map_err(|_| ErrorKind::Parse)?;
            }
        }
        if closed {
            return Ok(true);
        }
        let used = self
            .open_whole(cipher, &mut closed)
            .map_err(|_| ErrorKind::Parse)?;
        if !closed {
            self.inbuf.extend_from_slice(&cipher[used..]);
        }
        Ok(closed)
    }

    /// Opens the whole records at the front of `buf` (stopping after a
    /// close_notify): how many bytes they took.
    fn open_whole(&mut self, buf: &mut [u8], closed: &mut bool) -> Result<usize, BadRecord> {
        let mut at = 0;
        while !*closed {
            let Some(len) = Records::whole(&buf[at..])? else {
                break;
            };
            *closed = self.open_record(&mut buf[at..at + len])?;
            at += len;
        }
        Ok(at)
    }

    /// Opens one whole record and acts on it. True at close_notify.
    fn open_record(&mut self, rec: &mut [u8]) -> Result<bool, BadRecord> {
        let r = self.records.as_mut().ok_or(BadRecord)?;
        let (typ, body) = r.open(rec)?;
        match typ {
            APPLICATION_DATA => self.plain.extend_from_slice(body),
            ALERT => match body {
                [_, CLOSE_NOTIFY] => return Ok(true),
                [_, USER_CANCELED] => {}
                _ => return Err(BadRecord),
            },
            HANDSHAKE => {
                self.hs_msg.extend_from_slice(body);
                self.post_handshake()?;
            }
            _ => return Err(BadRecord),
        }
        Ok(false)
    }

    /// Acts on the whole handshake messages in `hs_msg`: session tickets go
    /// to rustls's store, a KeyUpdate renews the receive key (and the send
    /// key when the peer asks).
    fn post_handshake(&mut self) -> Result<(), BadRecord> {
        let mut at = 0;
        while self.hs_msg.len() - at >= 4 {
            let m = &self.hs_msg[at..];
            let len = u32::from_be_bytes([0, m[1], m[2], m[3]]) as usize;
            if len > MAX_HANDSHAKE_MESSAGE {
                return Err(BadRecord);
            }
            if m.len() < 4 + len {
                break;
            }
            let (typ, body) = (m[0], &m[4..4 + len]);
            let kernel = self.kernel.as_mut().ok_or(BadRecord)?;
            match typ {
                NEW_SESSION_TICKET => kernel
                    .handle_new_session_ticket(body)
                    .map_err(|_| BadRecord)?,
                KEY_UPDATE if body.len() == 1 && body[0] <= 1 => {
                    let requested = body[0] == 1;
                    let (seq, s) = kernel.update_rx_secret().map_err(|_| BadRecord)?;
                    self.records.as_mut().ok_or(BadRecord)?.rekey_rx(seq, &s)?;
                    if requested {
                        self.update_tx_key()?;
                    }
                }
                // TLS 1.2 renegotiation is not taken up: the request is ignored.
                HELLO_REQUEST if len == 0 => {}
                _ => return Err(BadRecord),
            }
            at += 4 + len;
        }
        self.hs_msg.drain(..at);
        Ok(())
    }

    /// TLS 1.3: sends a KeyUpdate (not asking for one back) under the old
    /// send key, then seals with the new one.
    fn update_tx_key(&mut self) -> Result<(), BadRecord> {
        let (Some(r), Some(kernel)) = (self.records.as_mut(), self.kernel.as_mut()) else {
            return Err(BadRecord);
        };
        let (seq, s) = kernel.update_tx_secret().map_err(|_| BadRecord)?;
        let out = unsent(&mut self.out, &mut self.sent);
        r.seal(HANDSHAKE, &[KEY_UPDATE, 0, 0, 1, 0], out);
        r.rekey_tx(seq, &s)
    }

    /// Records a completed handshake: connect and handshake time, its
    /// computation time, full or resumed, version and cipher.
    pub(crate) fn record_established(&self, rec: &mut Recorder, now_ns: u64) {
        rec.record_tls_handshake(
            self.connected_ns.saturating_sub(self.connect_ns) / 1_000,
            now_ns.saturating_sub(self.connected_ns) / 1_000,
            self.handshake_ns,
            self.resumed,
            self.version,
            self.cipher,
        );
    }
}

/// `out` with what has left dropped, ready for more records.
fn unsent<'a>(out: &'a mut Vec<u8>, sent: &mut usize) -> &'a mut Vec<u8> {
    if *sent >= out.len() {
        out.clear();
        *sent = 0;
    }
    out
}

/// Encodes a handshake record rustls has ready, appended to `out`.
fn encode(enc: &mut EncodeTlsData<'_, ClientConnectionData>, out: &mut Vec<u8>) {
    let at = out.len();
    out.resize(at + 2048, 0);
    match enc.encode(&mut out[at..]) {
        Ok(n) => out.truncate(at + n),
        Err(EncodeError::InsufficientSize(s)) => {
            out.resize(at + s.required_size, 0);
            let n = enc.encode(&mut out[at..]).unwrap_or(0);
            out.truncate(at + n);
        }
        Err(_) => out.truncate(at),
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

    use std::io::{Read, Write};
    use std::sync::Arc;

    use rustls::crypto::ring::{cipher_suite as cs, default_provider};
    use rustls::{
        ClientConfig, RootCertStore, ServerConfig, ServerConnection, SupportedCipherSuite,
    };

    /// A client session and an in-memory rustls server, wired by hand.
    struct Pair {
        client: Box<Session>,
        server: ServerConnection,
        /// Received records are fed to the client in pieces this long.
        split: usize,
    }

    struct Certs {
        server: Arc<ServerConfig>,
        client: Arc<ClientConfig>,
        roots: Arc<RootCertStore>,
    }

    fn certs(suite: SupportedCipherSuite, resume: bool) -> Certs {
        let ck = rcgen::generate_simple_self_signed(vec!["xload.test".to_string()]).unwrap();
        let der = ck.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::try_from(ck.key_pair.serialize_der()).unwrap();
        let mut provider = default_provider();
        provider.cipher_suites = vec![suite];
        let provider = Arc::new(provider);
        let version = match suite {
            SupportedCipherSuite::Tls13(_) => &rustls::version::TLS13,
            _ => &rustls::version::TLS12,
        };
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&[version])
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![der.clone()], key)
            .unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(der).unwrap();
        let roots = Arc::new(roots);
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_protocol_versions(&[version])
            .unwrap()
            .with_root_certificates(roots.clone())
            .with_no_client_auth();
        client.enable_secret_extraction = true;
        if !resume {
            client.resumption = rustls::client::Resumption::disabled();
        }
        Certs {
            server: Arc::new(server),
            client: Arc::new(client),
            roots,
        }
    }

    fn tls_client(c: &Certs) -> TlsClient {
        TlsClient {
            config: c.client.clone(),
            server_name: "xload.test".try_into().unwrap(),
        }
    }

    impl Pair {
        /// The client's ClientHello queued, nothing delivered yet.
        fn new(c: &Certs, split: usize) -> Pair {
            Pair {
                client: Session::new(&tls_client(c), 0, 0).unwrap(),
                server: ServerConnection::new(c.server.clone()).unwrap(),
                split,
            }
        }

        fn connect(c: &Certs, split: usize) -> Pair {
            let mut p = Pair::new(c, split);
            let mut established = false;
            for _ in 0..10 {
                p.deliver_to_server();
                let opened = p.deliver_to_client().unwrap();
                established |= opened.established;
                if established && !p.server.is_handshaking() {
                    return p;
                }
            }
            panic!("no handshake");
        }

        /// Delivers what the client queued; the plaintext the server read.
        fn deliver_to_server(&mut self) -> Vec<u8> {
            let mut wire = &self.client.out[self.client.sent..];
            let mut plain = Vec::new();
            while !wire.is_empty() {
                self.server.read_tls(&mut wire).unwrap();
                self.server.process_new_packets().unwrap();
                let _ = self.server.reader().read_to_end(&mut plain);
            }
            self.client.sent = self.client.out.len();
            plain
        }

        /// Delivers what the server queued in `split`-byte receives; what
        /// they opened (plaintext concatenated).
        fn deliver_to_client(&mut self) -> Result<Opened, ErrorKind> {
            let mut wire = Vec::new();
            while self.server.wants_write() {
                self.server.write_tls(&mut wire).unwrap();
            }
            let mut all = Opened::default();
            let mut plain = Vec::new();
            for piece in wire.chunks(self.split) {
                let mut buf = piece.to_vec();
                let o = self.client.open(&mut buf)?;
                plain.extend_from_slice(&self.client.plain);
                all.established |= o.established;
                all.closed |= o.closed;
            }
            self.client.plain = plain;
            Ok(all)
        }

        /// One request and response through the record layer.
        fn exchange(&mut self, n: usize) {
            let req = format!("GET /{n} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes();
            self.client.seal(&req);
            assert_eq!(self.deliver_to_server(), req, "request {n}");
            let resp = format!("HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n{}", n % 10);
            self.server.writer().write_all(resp.as_bytes()).unwrap();
            let o = self.deliver_to_client().unwrap();
            assert!(!o.closed);
            assert_eq!(self.client.plain, resp.as_bytes(), "response {n}");
        }
    }

    const SUITES: [SupportedCipherSuite; 6] = [
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS13_AES_256_GCM_SHA384,
        cs::TLS13_CHACHA20_POLY1305_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
        cs::TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
    ];

    /// One suite of TLS 1.3 and one of TLS 1.2.
    const ONE_PER_VERSION: [SupportedCipherSuite; 2] = [
        cs::TLS13_AES_128_GCM_SHA256,
        cs::TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
    ];

    #[test]
    fn records_both_ways_every_suite_and_split() {
        for suite in SUITES {
            let c = certs(suite, false);
            for split in [1, 3, 64, 1 << 20] {
                let mut p = Pair::connect(&c, split);
                assert_eq!(p.client.cipher, suite.suite().as_str().unwrap());
                for n in 0..5 {
                    p.exchange(n);
                }
                // Several records in one receive, and one larger than a record.
                let big = vec![b'x'; 40_000];
                p.server.writer().write_all(b"a").unwrap();
                p.server.writer().write_all(b"b").unwrap();
                p.server.writer().write_all(&big).unwrap();
                p.deliver_to_client().unwrap();
                assert_eq!(p.client.plain.len(), 40_002, "{suite:?} split {split}");
                p.client.seal(&big);
                assert_eq!(p.deliver_to_server().len(), 40_000);
            }
        }
    }

    #[test]
    fn tickets_reach_the_store_and_resume() {
        for suite in ONE_PER_VERSION {
            let c = certs(suite, true);
            let mut first = Pair::connect(&c, 1 << 20);
            assert!(!first.client.resumed);
            // TLS 1.3 tickets come after the handshake, with the first response.
            first.exchange(0);
            let mut second = Pair::connect(&c, 1 << 20);
            assert!(second.client.resumed, "{suite:?}");
            second.exchange(1);
        }
    }

    #[test]
    fn key_updates_both_ways() {
        let c = certs(cs::TLS13_AES_256_GCM_SHA384, false);
        let mut p = Pair::connect(&c, 7);
        p.exchange(0);
        // The server renews its key and asks for ours to be renewed: the
        // response opens under its new key, the server reads our requests
        // under our new one.
        p.server.refresh_traffic_keys().unwrap();
        p.exchange(1);
        p.exchange(2);
        // Our KeyUpdate went under the old key, request 2 under the new.
        assert_eq!(p.client.records.as_ref().unwrap().sent(), 1);
        // Our key reaches its limit: a KeyUpdate goes first.
        p.client.tx_limit = p.client.records.as_ref().unwrap().sent() + 2;
        for n in 3..8 {
            p.exchange(n);
        }
        assert_eq!(
            p.client.records.as_ref().unwrap().sent(),
            3,
            "renewed before request 5"
        );
    }

    #[test]
    fn a_client_certificate_is_presented() {
        let ck = rcgen::generate_simple_self_signed(vec!["client.test".to_string()]).unwrap();
        let der = ck.cert.der().clone();
        let key = rustls::pki_types::PrivateKeyDer::try_from(ck.key_pair.serialize_der()).unwrap();
        let mut roots = RootCertStore::empty();
        roots.add(der.clone()).unwrap();
        let provider = Arc::new(default_provider());
        let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
            Arc::new(roots),
            provider.clone(),
        )
        .build()
        .unwrap();
        let base = certs(cs::TLS13_AES_128_GCM_SHA256, false);
        let server = ServerConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(base.server.cert_resolver.clone());
        let mut client = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(base.roots.clone())
            .with_client_auth_cert(vec![der], key)
            .unwrap();
        client.enable_secret_extraction = true;
        let c = Certs {
            server: Arc::new(server),
            client: Arc::new(client),
            roots: base.roots,
        };
        let mut p = Pair::connect(&c, 1 << 20);
        assert!(p.server.peer_certificates().is_some());
        p.exchange(0);
    }

    #[test]
    fn a_request_before_the_handshake_waits_for_it() {
        let c = certs(cs::TLS13_AES_128_GCM_SHA256, false);
        let mut p = Pair::new(&c, 1 << 20);
        p.client.seal(b"early");
        let mut got = Vec::new();
        for _ in 0..4 {
            got.extend(p.deliver_to_server());
            p.deliver_to_client().unwrap();
        }
        assert_eq!(got, b"early");
    }

    #[test]
    fn close_notify_ends_the_stream_after_its_data() {
        let c = certs(cs::TLS13_AES_128_GCM_SHA256, false);
        let mut p = Pair::connect(&c, 1 << 20);
        p.server.writer().write_all(b"last").unwrap();
        p.server.send_close_notify();
        let o = p.deliver_to_client().unwrap();
        assert!(o.closed);
        assert_eq!(p.client.plain, b"last");
    }

    #[test]
    fn a_forged_record_is_a_parse_error() {
        for suite in ONE_PER_VERSION {
            let c = certs(suite, false);
            let mut p = Pair::connect(&c, 1 << 20);
            p.server.writer().write_all(b"response").unwrap();
            let mut wire = Vec::new();
            p.server.write_tls(&mut wire).unwrap();
            let last = wire.len() - 1;
            wire[last] ^= 1;
            assert_eq!(p.client.open(&mut wire), Err(ErrorKind::Parse));
            // An oversized record header too.
            let mut huge = vec![23, 3, 3, 0xff, 0xff];
            let mut p = Pair::connect(&c, 1 << 20);
            assert_eq!(p.client.open(&mut huge), Err(ErrorKind::Parse));
        }
    }

    #[test]
    fn plain_http_is_not_tls() {
        let c = certs(cs::TLS13_AES_128_GCM_SHA256, false);
        let mut s = Session::new(&tls_client(&c), 0, 0).unwrap();
        assert!(!s.out.is_empty(), "a ClientHello is queued");
        let mut http = b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec();
        assert_eq!(s.open(&mut http), Err(ErrorKind::NotTls));
    }
}
