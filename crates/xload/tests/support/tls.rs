//! TLS for the tests: self-signed certificates (PEM files for `--cert`,
//! `--key`, `--cacert` and nginx), and rustls clients that trust one
//! certificate or any (keeping the last one seen, for its fingerprint).

use std::net::TcpStream;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::ring::default_provider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, ClientConnection, DigitallySignedStruct, RootCertStore, StreamOwned};

use super::nginx::NginxTls;
use super::run::TempDir;

/// A certificate for `names`, signed by its own key.
pub(crate) struct SelfSigned {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: CertificateDer<'static>,
}

impl SelfSigned {
    pub(crate) fn new(names: &[&str]) -> SelfSigned {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let ck = rcgen::generate_simple_self_signed(names).unwrap();
        SelfSigned {
            cert_pem: ck.cert.pem(),
            key_pem: ck.key_pair.serialize_pem(),
            der: ck.cert.der().clone(),
        }
    }

    /// Writes `cert.pem` and `key.pem` into `dir`; their paths.
    pub(crate) fn write(&self, dir: &TempDir) -> (PathBuf, PathBuf) {
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        std::fs::write(&cert, &self.cert_pem).unwrap();
        std::fs::write(&key, &self.key_pem).unwrap();
        (cert, key)
    }

    /// nginx's `ssl_certificate`, `ssl_certificate_key` and `ssl_protocols`.
    pub(crate) fn nginx(&self, protocols: &str) -> NginxTls {
        NginxTls {
            cert_pem: self.cert_pem.clone(),
            key_pem: self.key_pem.clone(),
            protocols: protocols.to_string(),
        }
    }

    /// A client (TLS 1.2 and 1.3) that trusts this certificate only.
    pub(crate) fn trusting_client(&self) -> Arc<ClientConfig> {
        let mut roots = RootCertStore::empty();
        roots.add(self.der.clone()).unwrap();
        let c = ClientConfig::builder_with_provider(Arc::new(default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots)
            .with_no_client_auth();
        Arc::new(c)
    }
}

/// Accepts any certificate and keeps the last one seen (for its fingerprint).
#[derive(Debug, Default)]
pub(crate) struct AnyCert(pub Mutex<Vec<u8>>);

impl ServerCertVerifier for AnyCert {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        *self.0.lock().unwrap() = end_entity.to_vec();
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn verify_tls13_signature(
        &self,
        _: &[u8],
        _: &CertificateDer<'_>,
        _: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }
    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        default_provider()
            .signature_verification_algorithms
            .supported_schemes()
    }
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
    client(rustls::DEFAULT_VERSIONS, Arc::new(AnyCert::default()))
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
