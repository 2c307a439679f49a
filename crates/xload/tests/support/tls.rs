//! TLS for the tests: self-signed certificates (PEM files for `--cert`,
//! `--key`, `--cacert` and nginx), and rustls clients that trust one
//! certificate or any (keeping the last one seen, for its fingerprint).

use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::danger::ServerCertVerifier;
use rustls::crypto::ring::default_provider;
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, ClientConnection, RootCertStore, StreamOwned};
use xload_engine::certs::{self, AcceptAny};

use super::nginx::NginxTls;
use super::run::TempDir;

/// A certificate for `names`, signed by its own key (the binary's own
/// [`xload_engine::certs::SelfSigned`]), with the tests' uses of it.
pub(crate) struct SelfSigned(pub certs::SelfSigned);

impl SelfSigned {
    pub(crate) fn new(names: &[&str]) -> SelfSigned {
        SelfSigned(certs::SelfSigned::new(names).unwrap())
    }

    /// A certificate for `names` that expired in 2001.
    pub(crate) fn expired(names: &[&str]) -> SelfSigned {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params.not_before = rcgen::date_time_ymd(2000, 1, 1);
        params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        SelfSigned(certs::SelfSigned {
            der: cert.der().clone(),
            key: rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der()),
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }

    /// Writes `cert.pem` and `key.pem` into `dir`; their paths.
    pub(crate) fn write(&self, dir: &TempDir) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &self.0.cert_pem).unwrap();
        std::fs::write(&key, &self.0.key_pem).unwrap();
        (cert, key)
    }

    /// nginx's `ssl_certificate`, `ssl_certificate_key` and `ssl_protocols`.
    pub(crate) fn nginx(&self, protocols: &str) -> NginxTls {
        NginxTls {
            cert_pem: self.0.cert_pem.clone(),
            key_pem: self.0.key_pem.clone(),
            protocols: protocols.to_string(),
        }
    }

    /// A client (TLS 1.2 and 1.3) that trusts this certificate only.
    pub(crate) fn trusting_client(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.0.der.clone()).unwrap();
        let c = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(c)
    }
}

/// Accepts any certificate (signatures checked) and keeps the last one seen
/// (for its fingerprint).
pub(crate) fn any_cert() -> AcceptAny {
    AcceptAny::recording(Arc::new(default_provider()))
}

/// A client of these versions with this verifier, ALPN http/1.1.
pub(crate) fn client(
    versions: &[&'static rustls::SupportedProtocolVersion],
    verifier: Arc<dyn ServerCertVerifier>,
) -> Arc<ClientConfig> {
    let mut c = ClientConfig::builder_with_provider(Arc::new(default_provider()))
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    c.alpn_protocols = vec![b"http/1.1".to_vec()];
    Arc::new(c)
}

/// A client of TLS 1.2 and 1.3 that accepts any certificate.
pub(crate) fn any_cert_client() -> Arc<ClientConfig> {
    client(rustls::DEFAULT_VERSIONS, Arc::new(any_cert()))
}

/// A TLS stream over `tcp` to "localhost" with `cfg`.
pub(crate) fn stream(
    tcp: TcpStream,
    cfg: &Arc<ClientConfig>,
) -> StreamOwned<ClientConnection, TcpStream> {
    let name = ServerName::try_from("localhost").unwrap();
    let c = ClientConnection::new(Arc::clone(cfg), name).expect("client");
    StreamOwned::new(c, tcp)
}
