//! TLS configuration from the command line: the server's certificate for
//! `xload serve --tls` (given as PEM files, or self-signed at start).

use std::path::Path;
use std::sync::Arc;

use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::ServerConfig;

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
    let names = vec![
        "localhost".to_string(),
        "127.0.0.1".to_string(),
        "::1".to_string(),
    ];
    let ck = rcgen::generate_simple_self_signed(names)
        .map_err(|e| Failure::Run(format!("--tls: cannot make a certificate: {e}")))?;
    let key = PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der());
    Ok((vec![ck.cert.der().clone()], PrivateKeyDer::Pkcs8(key)))
}

/// The certificate chain and key in PEM files.
fn from_pem(
    cert: &Path,
    key: &Path,
) -> Result<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>), Failure> {
    let certs = CertificateDer::pem_file_iter(cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .map_err(|e| Failure::Usage(format!("--cert {}: {e}", cert.display())))?;
    if certs.is_empty() {
        return Err(Failure::Usage(format!(
            "--cert {}: no certificate in the file",
            cert.display()
        )));
    }
    let key = PrivateKeyDer::from_pem_file(key)
        .map_err(|e| Failure::Usage(format!("--key {}: {e}", key.display())))?;
    Ok((certs, key))
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
