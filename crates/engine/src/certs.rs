//! Certificates without a CA: a self-signed certificate made now (for
//! `xload serve --tls` without `--cert`, and for the tests), and a verifier
//! that accepts any server certificate (`--insecure`, and the tests).

use std::sync::{Arc, Mutex};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{DigitallySignedStruct, SignatureScheme};

/// A certificate signed by its own key, in DER and PEM.
pub struct SelfSigned {
    pub der: CertificateDer<'static>,
    pub key: PrivatePkcs8KeyDer<'static>,
    pub cert_pem: String,
    pub key_pem: String,
}

impl SelfSigned {
    /// A certificate for `names` (DNS names or IP addresses), made now.
    pub fn new(names: &[&str]) -> Result<SelfSigned, rcgen::Error> {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let ck = rcgen::generate_simple_self_signed(names)?;
        Ok(SelfSigned {
            der: ck.cert.der().clone(),
            key: PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()),
            cert_pem: ck.cert.pem(),
            key_pem: ck.key_pair.serialize_pem(),
        })
    }

    /// The chain (this one certificate) and key, as rustls takes them.
    pub fn chain_and_key(&self) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        (
            vec![self.der.clone()],
            PrivateKeyDer::Pkcs8(self.key.clone_key()),
        )
    }
}

/// Accepts any server certificate; signatures are still checked (the
/// handshake costs what a verified one does, less the chain). When made
/// with [`AcceptAny::recording`] it keeps the last certificate it saw.
#[derive(Debug)]
pub struct AcceptAny {
    provider: Arc<CryptoProvider>,
    last: Option<Mutex<Vec<u8>>>,
}

impl AcceptAny {
    /// Checks signatures with `provider`'s algorithms, records nothing.
    pub fn new(provider: Arc<CryptoProvider>) -> AcceptAny {
        AcceptAny {
            provider,
            last: None,
        }
    }

    /// As [`AcceptAny::new`], and keeps the last certificate seen.
    pub fn recording(provider: Arc<CryptoProvider>) -> AcceptAny {
        AcceptAny {
            provider,
            last: Some(Mutex::new(Vec::new())),
        }
    }

    /// The last certificate seen (DER; empty if none or not recording).
    pub fn last(&self) -> Vec<u8> {
        self.last.as_ref().map_or_else(Vec::new, |m| {
            m.lock().unwrap_or_else(|e| e.into_inner()).clone()
        })
    }
}

impl ServerCertVerifier for AcceptAny {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        if let Some(m) = &self.last {
            *m.lock().unwrap_or_else(|e| e.into_inner()) = end_entity.to_vec();
        }
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        let algs = &self.provider.signature_verification_algorithms;
        verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_certificate_loads_into_a_server_config() {
        let c = SelfSigned::new(&["localhost", "127.0.0.1"]).expect("certificate");
        assert!(c.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        assert!(c.key_pem.contains("PRIVATE KEY"));
        let (chain, key) = c.chain_and_key();
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(chain, key)
            .expect("a usable certificate and key");
    }

    #[test]
    fn only_a_recording_verifier_keeps_the_certificate() {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let der = CertificateDer::from(vec![1u8, 2, 3]);
        let name = ServerName::try_from("localhost").unwrap();
        for (v, want) in [
            (AcceptAny::new(provider.clone()), vec![]),
            (AcceptAny::recording(provider), vec![1u8, 2, 3]),
        ] {
            v.verify_server_cert(&der, &[], &name, &[], UnixTime::now())
                .expect("accepted");
            assert_eq!(v.last(), want);
        }
    }
}
