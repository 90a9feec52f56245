//! A chart source's TLS material, read from a Secret as source-controller reads `certSecretRef`:
//! a CA to trust besides the system's roots (`ca.crt`), and a client certificate to present
//! (`tls.crt` and `tls.key`); the deprecated `caFile`, `certFile` and `keyFile` when the standard
//! key is absent. Checked here, so a bad Secret is a clear message and never a failed handshake;
//! the material itself is never shown, not even in a message.

use reqwest::{Certificate, Identity};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::collections::BTreeMap;

/// A source's TLS material. `Debug` says only what it holds.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SourceTls {
    /// PEM certificates trusted in addition to the system's roots.
    ca: Option<String>,
    /// The PEM certificate chain and then its private key, as `Identity::from_pem` reads them.
    identity: Option<String>,
}

impl std::fmt::Debug for SourceTls {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "SourceTls(ca: {}, client certificate: {})", self.ca.is_some(), self.identity.is_some())
    }
}

/// Why a Secret gives no TLS material.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TlsError {
    /// Keys missing: none at all, or half a client certificate. source-controller ignores this
    /// in a `secretRef` (which may hold basic auth only) and fails on it in a `certSecretRef`.
    #[error("{0}")]
    Incomplete(String),
    /// The keys are there but do not hold what they must.
    #[error("{0}")]
    Invalid(String),
}

/// The standard key and its deprecated name.
const CA: (&str, &str) = ("ca.crt", "caFile");
const CERT: (&str, &str) = ("tls.crt", "certFile");
const KEY: (&str, &str) = ("tls.key", "keyFile");

impl SourceTls {
    /// The material in a Secret's `data`, checked: the CA holds certificates, the client
    /// certificate and key parse and belong together.
    pub fn from_secret_data(data: &BTreeMap<String, String>) -> Result<SourceTls, TlsError> {
        let read = |(key, deprecated): (&'static str, &'static str)| {
            [key, deprecated]
                .into_iter()
                .find_map(|k| data.get(k).filter(|v| !v.trim().is_empty()).map(|v| (k, v.clone())))
        };
        let (ca, cert, key) = (read(CA), read(CERT), read(KEY));
        let identity = match (cert, key) {
            (Some((cert_key, cert)), Some((key_key, key))) => {
                check_identity(&cert, &key, cert_key, key_key)?;
                Some(format!("{}\n{}", cert.trim_end(), key.trim_end()))
            }
            (Some((cert_key, _)), None) => {
                return Err(TlsError::Incomplete(format!("it holds {cert_key} but no tls.key")))
            }
            (None, Some((key_key, _))) => {
                return Err(TlsError::Incomplete(format!("it holds {key_key} but no tls.crt")))
            }
            (None, None) => None,
        };
        if let Some((ca_key, ca)) = &ca {
            check_ca(ca, ca_key)?;
        }
        if ca.is_none() && identity.is_none() {
            return Err(TlsError::Incomplete("it holds neither ca.crt nor tls.crt and tls.key".into()));
        }
        Ok(SourceTls { ca: ca.map(|(_, ca)| ca), identity })
    }

    /// A digest that tells these settings from others (what a failed host is remembered with),
    /// and shows nothing of them.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in [&self.ca, &self.identity] {
            hash.update(part.as_deref().map_or(0, str::len).to_le_bytes());
            hash.update(part.as_deref().unwrap_or("").as_bytes());
        }
        hex::encode(hash.finalize())
    }

    /// Whether it presents a client certificate (a credential: sent only where the operator says).
    pub fn has_identity(&self) -> bool {
        self.identity.is_some()
    }

    /// The certificates to trust besides the system's roots.
    pub(super) fn roots(&self) -> Result<Vec<Certificate>, String> {
        match &self.ca {
            Some(ca) => Certificate::from_pem_bundle(ca.as_bytes())
                .map_err(|_| "its CA certificate (ca.crt) cannot be read".to_string()),
            None => Ok(Vec::new()),
        }
    }

    /// The client certificate to present, when there is one.
    pub(super) fn identity(&self) -> Result<Option<Identity>, String> {
        self.identity
            .as_ref()
            .map(|pem| {
                Identity::from_pem(pem.as_bytes())
                    .map_err(|_| "its client certificate (tls.crt, tls.key) cannot be read".to_string())
            })
            .transpose()
    }
}

fn check_ca(pem: &str, key: &str) -> Result<(), TlsError> {
    let certificates = certificates(pem, key)?;
    let mut store = rustls::RootCertStore::empty();
    let (_, unusable) = store.add_parsable_certificates(certificates);
    if unusable > 0 {
        return Err(TlsError::Invalid(format!(
            "{key} holds a certificate that is not a valid X.509 CA certificate"
        )));
    }
    Ok(())
}

fn check_identity(cert: &str, key: &str, cert_key: &str, key_key: &str) -> Result<(), TlsError> {
    let chain = certificates(cert, cert_key)?;
    let private_key = PrivateKeyDer::from_pem_slice(key.as_bytes()).map_err(|_| {
        TlsError::Invalid(format!("{key_key} holds no PEM private key (PKCS#8, PKCS#1 or SEC1)"))
    })?;
    let provider = rustls::crypto::aws_lc_rs::default_provider();
    // rustls's message names what is wrong (a key mismatch, a bad encoding), never the material.
    rustls::sign::CertifiedKey::from_der(chain, private_key, &provider).map_err(|e| {
        TlsError::Invalid(format!("{cert_key} and {key_key} are not a usable certificate and key: {e}"))
    })?;
    Ok(())
}

/// The PEM certificates in `pem`: at least one, every block readable.
fn certificates(pem: &str, key: &str) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certificates = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|_| TlsError::Invalid(format!("{key} is not valid PEM")))?;
    if certificates.is_empty() {
        return Err(TlsError::Invalid(format!("{key} holds no PEM certificate")));
    }
    Ok(certificates)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    const NOT_PEM: &str =
        "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n";

    #[test]
    fn half_a_client_certificate_or_nothing_is_incomplete() {
        for (pairs, expected) in [
            (&[("tls.crt", "x")][..], "holds tls.crt but no tls.key"),
            (&[("keyFile", "x")][..], "holds keyFile but no tls.crt"),
            (&[("username", "u")][..], "neither ca.crt nor tls.crt"),
        ] {
            match SourceTls::from_secret_data(&data(pairs)) {
                Err(TlsError::Incomplete(message)) => assert!(message.contains(expected), "{message}"),
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn invalid_pem_is_a_clear_error_that_quotes_nothing() {
        let secret_text = "hunter2-not-a-certificate";
        for (pairs, expected) in [
            (vec![("ca.crt", secret_text)], "ca.crt holds no PEM certificate"),
            (vec![("caFile", NOT_PEM)], "caFile holds a certificate that is not a valid X.509"),
            (vec![("tls.crt", NOT_PEM), ("tls.key", secret_text)], "tls.key holds no PEM private key"),
            (vec![("tls.crt", secret_text), ("tls.key", secret_text)], "tls.crt holds no PEM certificate"),
            (
                vec![
                    ("tls.crt", "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"),
                    ("tls.key", "k"),
                ],
                "tls.crt is not valid PEM",
            ),
        ] {
            match SourceTls::from_secret_data(&data(&pairs)) {
                Err(TlsError::Invalid(message)) => {
                    assert!(message.contains(expected), "{message}");
                    assert!(!message.contains("hunter2") && !message.contains("bm90"), "{message}");
                }
                other => panic!("{pairs:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn debug_says_what_it_holds_never_the_material() {
        let tls = SourceTls { ca: Some("secret-ca".into()), identity: None };
        let shown = format!("{tls:?}");
        assert!(!shown.contains("secret-ca") && shown.contains("ca: true"), "{shown}");
    }
}
