//! TLS for PostgreSQL connections per `sslmode` (config.md CFG-40), with rustls and the `ring`
//! provider: `prefer` and `require` encrypt without checking the certificate, as libpq does;
//! `verify-ca` checks the chain; `verify-full` checks the chain and the host name. Trusted roots
//! for the `verify-*` modes are the system's plus the `sslrootcert` file.

use std::sync::Arc;

use queuebox_core::database::PgSslMode;
use queuebox_store::StoreError;
use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{CryptoProvider, WebPkiSupportedAlgorithms};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

/// The connector for a mode; `None` for `disable`.
pub(crate) fn connector(
    mode: PgSslMode,
    sslrootcert: Option<&str>,
) -> Result<Option<MakeRustlsConnect>, StoreError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = || {
        ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(|e| bad(format!("TLS cannot be set up: {e}")))
    };
    let config = match mode {
        PgSslMode::Disable => return Ok(None),
        PgSslMode::Prefer | PgSslMode::Require => builder()?
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate {
                algorithms: provider.signature_verification_algorithms,
            }))
            .with_no_client_auth(),
        PgSslMode::VerifyCa => {
            let inner = webpki_verifier(sslrootcert, provider.clone())?;
            builder()?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly { inner }))
                .with_no_client_auth()
        }
        PgSslMode::VerifyFull => builder()?
            .with_webpki_verifier(webpki_verifier(sslrootcert, provider.clone())?)
            .with_no_client_auth(),
    };
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn bad(reason: String) -> StoreError {
    StoreError::BadTarget { reason }
}

fn webpki_verifier(
    sslrootcert: Option<&str>,
    provider: Arc<CryptoProvider>,
) -> Result<Arc<WebPkiServerVerifier>, StoreError> {
    let mut roots = RootCertStore::empty();
    // Unreadable system certificates are not fatal: sslrootcert may be all that is needed.
    let system = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(system.certs);
    if let Some(path) = sslrootcert {
        let unreadable = |e: &dyn std::fmt::Display| {
            bad(format!("the sslrootcert file {path} cannot be read: {e}"))
        };
        let certs = CertificateDer::pem_file_iter(path).map_err(|e| unreadable(&e))?;
        let mut found = 0;
        for cert in certs {
            let cert = cert.map_err(|e| unreadable(&e))?;
            roots.add(cert).map_err(|e| unreadable(&e))?;
            found += 1;
        }
        if found == 0 {
            return Err(bad(format!(
                "the sslrootcert file {path} holds no PEM certificate"
            )));
        }
    }
    WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
        .build()
        .map_err(|e| bad(format!("TLS certificate checks cannot be set up: {e}")))
}

/// `prefer` / `require`: encryption without authentication, as libpq does. The handshake
/// signatures are still checked, so the peer must hold the key of the certificate it sends.
#[derive(Debug)]
struct AnyCertificate {
    algorithms: WebPkiSupportedAlgorithms,
}

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(message, cert, dss, &self.algorithms)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(message, cert, dss, &self.algorithms)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.algorithms.supported_schemes()
    }
}

/// `verify-ca`: the full web-PKI check, except that a certificate for another host name passes.
/// webpki checks the chain before the name, so a name error means the chain was good.
#[derive(Debug)]
struct ChainOnly {
    inner: Arc<WebPkiServerVerifier>,
}

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .inner
            .verify_server_cert(end_entity, intermediates, server_name, ocsp, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.inner.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.inner.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cfg_40_disable_has_no_connector_and_other_modes_build() {
        assert!(matches!(connector(PgSslMode::Disable, None), Ok(None)));
        for mode in [PgSslMode::Prefer, PgSslMode::Require] {
            assert!(matches!(connector(mode, None), Ok(Some(_))));
        }
    }

    #[test]
    fn cfg_40_unreadable_sslrootcert_is_a_clear_reason() {
        let err = connector(PgSslMode::VerifyFull, Some("/nonexistent/root.crt"))
            .err()
            .expect("must fail");
        assert!(
            err.to_string()
                .starts_with("the sslrootcert file /nonexistent/root.crt cannot be read: "),
            "{err}"
        );
    }
}
