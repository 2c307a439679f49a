//! TLS configuration from the command line: the server's certificate for
//! `xload serve --tls` (given as PEM files, or self-signed at start), and
//! the client's for https:// URLs (roots, versions, resumption, and a check
//! before the run that the server's certificate is trusted).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex};

use rustls::client::{
    ClientSessionMemoryCache, ClientSessionStore, Resumption, Tls12ClientSessionValue,
    Tls13ClientSessionValue,
};
use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::NamedGroup;
use rustls::{ClientConfig, RootCertStore, ServerConfig};
use xload_engine::certs::{AcceptAny, SelfSigned};
use xload_engine::TlsClient;

use crate::args::{TlsArgs, TlsVersionArg};
use crate::Failure;

/// A server configuration and its certificate's SHA-256 fingerprint.
pub(crate) struct ServerTls {
    pub config: Arc<ServerConfig>,
    pub fingerprint: String,
    /// The certificate was generated at start.
    pub self_signed: bool,
}

/// The SHA-256 of a DER certificate as colon-separated hex (openssl's form).
pub(crate) fn fingerprint(der: &[u8]) -> String {
    let d = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: Vec<String> = d.as_ref().iter().map(|b| format!("{b:02X}")).collect();
    hex.join(":")
}

/// A certificate for localhost and 127.0.0.1, made now, and its key.
fn self_signed() -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Failure> {
    let c = SelfSigned::new(&["localhost", "127.0.0.1", "::1"])
        .map_err(|e| Failure::Run(format!("--tls: cannot make a certificate: {e}")))?;
    Ok(c.chain_and_key())
}

/// The certificate chain and key in PEM files.
fn from_pem(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Failure> {
    let certs = CertificateDer::pem_slice_iter(&read_pem("--cert", cert)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::Usage(format!("--cert {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Failure::Usage(format!(
            "--cert {}: no certificate in the file",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_slice(&read_pem("--key", key)?)
        .map_err(|e| Failure::Usage(format!("--key {}: {e}", key.display())))?;
    Ok((certs, key))
}

/// The bytes of the PEM file given with `flag`: a regular file of at most
/// [`xload_sys::input::TEXT_LIMIT`] (a FIFO would block, a device never end).
fn read_pem(flag: &str, path: &Path) -> Result<Vec<u8>, Failure> {
    let what = "a PEM file";
    xload_sys::input::read(path, what, xload_sys::input::TEXT_LIMIT)
        .map_err(|e| Failure::Usage(format!("{flag} {}: {e}", path.display())))
}

/// The server side of `--tls`: TLS 1.2 and 1.3 (ring), ALPN http/1.1.
pub(crate) fn server(cert: Option<&Path>, key: Option<&Path>) -> Result<ServerTls, Failure> {
    let (certs, key, self_signed) = match (cert, key) {
        (Some(c), Some(k)) => {
            let (c, k) = from_pem(c, k)?;
            (c, k, false)
        }
        (None, None) => {
            let (c, k) = self_signed()?;
            (c, k, true)
        }
        _ => {
            return Err(Failure::Usage(
                "--cert and --key go together (or neither: a self-signed certificate)".into(),
            ))
        }
    };
    let fingerprint = fingerprint(&certs[0]);
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_safe_default_protocol_versions()
        .map_err(|e| Failure::Run(format!("--tls: {e}")))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| Failure::Usage(format!("--cert/--key: {e}")))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(ServerTls {
        config: Arc::new(config),
        fingerprint,
        self_signed,
    })
}

/// Where the system's CA bundle usually is (`SSL_CERT_FILE` first).
const SYSTEM_ROOTS: [&str; 3] = [
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The trusted roots: `--cacert`, else the system's bundle (none if absent:
/// every certificate is then untrusted and the message says what to pass).
fn roots(cacert: Option<&Path>) -> Result<RootCertStore, Failure> {
    let mut store = RootCertStore::empty();
    let path = match cacert {
        Some(p) => p.to_path_buf(),
        None => {
            let env = std::env::var_os("SSL_CERT_FILE").map(std::path::PathBuf::from);
            match env
                .into_iter()
                .chain(SYSTEM_ROOTS.iter().map(std::path::PathBuf::from))
                .find(|p| p.is_file())
            {
                Some(p) => p,
                None => return Ok(store),
            }
        }
    };
    let certs = CertificateDer::pem_slice_iter(&read_pem("--cacert", &path)?)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Failure::Usage(format!("--cacert {}: {e}", path.display())))?;
    let (added, _) = store.add_parsable_certificates(certs);
    if added == 0 && cacert.is_some() {
        return Err(Failure::Usage(format!(
            "--cacert {}: no usable certificate in the file",
            path.display()
        )));
    }
    Ok(store)
}

/// Session resumption for one load: rustls's in-memory cache, but with room
/// for `cap` TLS 1.3 tickets instead of its 8 per server. A closed loop's
/// connections tend to reconnect in bursts (-c 100 close at about the same
/// time); with 8 tickets all but 8 of a burst would handshake in full. Each
/// ticket is used once, as rustls's store does.
#[derive(Debug)]
struct TicketStore {
    inner: ClientSessionMemoryCache,
    tls13: Mutex<Vec<(ServerName<'static>, VecDeque<Tls13ClientSessionValue>)>>,
    cap: usize,
}

impl TicketStore {
    fn new(cap: usize) -> TicketStore {
        TicketStore {
            inner: ClientSessionMemoryCache::new(64),
            tls13: Mutex::new(Vec::new()),
            cap: cap.max(8),
        }
    }
}

impl ClientSessionStore for TicketStore {
    fn set_kx_hint(&self, server_name: ServerName<'static>, group: NamedGroup) {
        self.inner.set_kx_hint(server_name, group);
    }

    fn kx_hint(&self, server_name: &ServerName<'_>) -> Option<NamedGroup> {
        self.inner.kx_hint(server_name)
    }

    fn set_tls12_session(&self, server_name: ServerName<'static>, value: Tls12ClientSessionValue) {
        self.inner.set_tls12_session(server_name, value);
    }

    fn tls12_session(&self, server_name: &ServerName<'_>) -> Option<Tls12ClientSessionValue> {
        self.inner.tls12_session(server_name)
    }

    fn remove_tls12_session(&self, server_name: &ServerName<'static>) {
        self.inner.remove_tls12_session(server_name);
    }

    fn insert_tls13_ticket(
        &self,
        server_name: ServerName<'static>,
        value: Tls13ClientSessionValue,
    ) {
        let mut all = self.tls13.lock().unwrap_or_else(|e| e.into_inner());
        let i = match all.iter().position(|(n, _)| *n == server_name) {
            Some(i) => i,
            None => {
                all.push((server_name, VecDeque::new()));
                all.len() - 1
            }
        };
        let q = &mut all[i].1;
        if q.len() >= self.cap {
            q.pop_front();
        }
        q.push_back(value);
    }

    fn take_tls13_ticket(
        &self,
        server_name: &ServerName<'static>,
    ) -> Option<Tls13ClientSessionValue> {
        let mut all = self.tls13.lock().unwrap_or_else(|e| e.into_inner());
        // The newest first: the least likely to have expired.
        all.iter_mut()
            .find(|(n, _)| n == server_name)
            .and_then(|(_, q)| q.pop_back())
    }
}

/// The client side of an https:// URL: ring, TLS 1.2 and 1.3 (or the one
/// `--tls-version` names), ALPN http/1.1, SNI `host`, resumption only with
/// `--tls-resume` (so that every new connection costs a full handshake),
/// then with room for two tickets per connection.
pub(crate) fn client(
    a: &TlsArgs,
    host: &str,
    connections: usize,
    alpn: &[Vec<u8>],
) -> Result<TlsClient, Failure> {
    let provider = Arc::new(provider::default_provider());
    let versions: &[&rustls::SupportedProtocolVersion] = match a.tls_version {
        None => rustls::DEFAULT_VERSIONS,
        Some(TlsVersionArg::V12) => &[&rustls::version::TLS12],
        Some(TlsVersionArg::V13) => &[&rustls::version::TLS13],
    };
    let builder = ClientConfig::builder_with_provider(Arc::clone(&provider))
        .with_protocol_versions(versions)
        .map_err(|e| Failure::Run(format!("https: {e}")))?;
    let builder = if a.insecure {
        builder
            .dangerous()
            // --insecure: any certificate; signatures are still checked.
            .with_custom_certificate_verifier(Arc::new(AcceptAny::new(provider)))
    } else {
        builder.with_root_certificates(roots(a.cacert.as_deref())?)
    };
    let mut config = match (&a.cert, &a.key) {
        (Some(c), Some(k)) => {
            let (certs, key) = from_pem(c, k)?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| Failure::Usage(format!("--cert/--key: {e}")))?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = alpn.to_vec();
    // The engine seals and opens records itself once the handshake is done.
    config.enable_secret_extraction = true;
    config.resumption = if a.tls_resume {
        let cap = connections.saturating_mul(2).min(1 << 16);
        Resumption::store(Arc::new(TicketStore::new(cap)))
    } else {
        Resumption::disabled()
    };
    let server_name = ServerName::try_from(host.to_string())
        .map_err(|e| Failure::Usage(format!("https: {host:?} is no name to verify: {e}")))?;
    Ok(TlsClient {
        config: Arc::new(config),
        server_name,
    })
}

/// Before the run: one handshake on `stream` (already connected). A
/// certificate that is not trusted, no TLS version in common, or no answer
/// within `timeout` ends the run here, naming the cause and what to do
/// about it; other failures are left for the run to count under their
/// category.
pub(crate) fn check_trusted(
    t: &TlsClient,
    mut stream: std::net::TcpStream,
    timeout: std::time::Duration,
    target: &str,
    h2_only: bool,
) -> Result<(), Failure> {
    let Ok(mut conn) = rustls::ClientConnection::new(Arc::clone(&t.config), t.server_name.clone())
    else {
        return Ok(());
    };
    let _ = stream.set_read_timeout(Some(timeout));
    let _ = stream.set_write_timeout(Some(timeout));
    while conn.is_handshaking() {
        if let Err(e) = conn.complete_io(&mut stream) {
            let cause = e
                .get_ref()
                .and_then(|inner| inner.downcast_ref::<rustls::Error>())
                .and_then(|r| handshake_refusal(r, &t.server_name));
            if let Some(why) = cause {
                return Err(Failure::Run(format!("{target}: {why}")));
            }
            if matches!(
                e.kind(),
                std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
            ) {
                return Err(Failure::Run(format!(
                    "{target}: TCP connected but the TLS handshake did not complete within \
                     {timeout:?} (tls_handshake_timeout): the server does not answer the \
                     ClientHello (is it TLS on this port? --handshake-timeout sets the wait)"
                )));
            }
            return Ok(());
        }
    }
    if h2_only && conn.alpn_protocol() != Some(b"h2") {
        let chose = conn.alpn_protocol().map_or("no protocol".to_string(), |p| {
            format!("{:?}", String::from_utf8_lossy(p))
        });
        return Err(Failure::Run(format!(
            "{target}: --http2 offered only h2 in ALPN and the server chose {chose}: enable              HTTP/2 on the server, or let it choose with --alpn h2,http/1.1"
        )));
    }
    Ok(())
}

/// What a handshake error that no retry can cure says to the user: an
/// untrusted certificate (by its cause) or no version in common. None for
/// the others (the run counts them).
fn handshake_refusal(e: &rustls::Error, name: &ServerName<'_>) -> Option<String> {
    use rustls::{AlertDescription, CertificateError as C, PeerIncompatible as P};
    let insecure = "or skip verification with --insecure";
    Some(match e {
        rustls::Error::InvalidCertificate(c) => match c {
            C::Expired | C::ExpiredContext { .. } => format!(
                "the server's certificate has expired ({e}): renew it on the server, {insecure}"
            ),
            C::NotValidYet | C::NotValidYetContext { .. } => format!(
                "the server's certificate is not valid yet ({e}): check the clocks of both \
                 hosts, {insecure}"
            ),
            C::NotValidForName | C::NotValidForNameContext { .. } => format!(
                "the server's certificate is not valid for {} ({e}): use a URL with a name \
                 the certificate holds (--resolve NAME:PORT:ADDR keeps the name and picks the \
                 address), {insecure}",
                name.to_str()
            ),
            C::UnknownIssuer => format!(
                "the server's certificate is not signed by a trusted CA ({e}): pass the CA \
                 that signed it with --cacert FILE (with --cacert, only that file's CAs are \
                 trusted), {insecure}"
            ),
            _ => format!("the server's certificate is not trusted ({e}): {insecure}"),
        },
        rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol) => format!(
            "the server speaks none of the protocols offered in ALPN ({e}): --http2 offers h2 \
             only; enable HTTP/2 on the server, or let it choose with --alpn h2,http/1.1"
        ),
        rustls::Error::PeerIncompatible(P::ServerDoesNotSupportTls12Or13) => format!(
            "the server chose TLS 1.1 or older, and xload speaks only TLS 1.2 and 1.3 ({e}): \
             enable TLS 1.2 or 1.3 on the server"
        ),
        rustls::Error::PeerIncompatible(P::ServerTlsVersionIsDisabledByOurConfig)
        | rustls::Error::AlertReceived(AlertDescription::ProtocolVersion) => format!(
            "no TLS version in common with the server ({e}): xload speaks TLS 1.2 and 1.3, \
             or the one --tls-version names; match the server's protocols"
        ),
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fingerprint_is_sha256_in_colon_hex() {
        // SHA-256 of the empty string.
        let f = fingerprint(b"");
        assert!(f.starts_with("E3:B0:C4:42:98:FC:1C:14"), "{f}");
        assert_eq!(f.len(), 32 * 3 - 1);
    }

    #[test]
    fn a_self_signed_server_config_speaks_http11() {
        let s = server(None, None).expect("self-signed");
        assert!(s.self_signed);
        assert_eq!(s.config.alpn_protocols, vec![b"http/1.1".to_vec()]);
    }

    #[test]
    fn cert_without_key_is_refused() {
        let e = server(Some(Path::new("/nonexistent")), None)
            .err()
            .expect("refused");
        assert!(matches!(e, Failure::Usage(m) if m.contains("--cert and --key")));
    }
}
