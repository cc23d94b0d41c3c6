//! TLS set-ups (rustls with the `ring` provider): a server's from PEM files or from a
//! certificate made on the spot, a client's trusting the system's roots plus any CA file the
//! user names. ALPN offers `h2` then `http/1.1`, as browsers and the responsiveness test's
//! clients do.

use crate::Error;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::sync::Arc;

/// The protocols offered in ALPN, most preferred first.
pub const ALPN: [&[u8]; 2] = [b"h2", b"http/1.1"];

/// A certificate and its key, PEM.
#[derive(Debug, Clone)]
pub struct Identity {
    /// The certificate chain, PEM.
    pub cert_pem: String,
    /// The private key, PEM.
    pub key_pem: String,
}

impl Identity {
    /// A self-signed certificate for these names (DNS names or IP addresses), made now. A
    /// client trusts it when given its certificate as a CA file (`--ca`).
    pub fn self_signed(names: &[String]) -> Result<Identity, Error> {
        let made = rcgen::generate_simple_self_signed(names.to_vec()).map_err(|e| tls_error(&e))?;
        Ok(Identity {
            cert_pem: made.cert.pem(),
            key_pem: made.signing_key.serialize_pem(),
        })
    }

    /// Read a certificate chain and a key from PEM files.
    pub fn from_files(cert: &std::path::Path, key: &std::path::Path) -> Result<Identity, Error> {
        let read = |p: &std::path::Path| {
            std::fs::read_to_string(p).map_err(|e| {
                Error::Io(std::io::Error::new(
                    e.kind(),
                    format!("{}: {e}", p.display()),
                ))
            })
        };
        Ok(Identity {
            cert_pem: read(cert)?,
            key_pem: read(key)?,
        })
    }
}

fn tls_error(e: &dyn std::fmt::Display) -> Error {
    Error::Tls(e.to_string())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// Certificates from PEM text; an error names what did not parse.
fn certs(pem: &str, what: &str) -> Result<Vec<CertificateDer<'static>>, Error> {
    let v = CertificateDer::pem_slice_iter(pem.as_bytes())
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| Error::Tls(format!("{what}: {e}")))?;
    if v.is_empty() {
        return Err(Error::Tls(format!(
            "{what}: no CERTIFICATE block (expected PEM, -----BEGIN CERTIFICATE-----)"
        )));
    }
    Ok(v)
}

/// A server set-up for this identity, offering `alpn`.
pub fn server(id: &Identity, alpn: &[&[u8]]) -> Result<Arc<rustls::ServerConfig>, Error> {
    let chain = certs(&id.cert_pem, "certificate")?;
    let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
        .map_err(|e| Error::Tls(format!("key: {e}")))?;
    let mut c = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(&e))?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .map_err(|e| tls_error(&e))?;
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(c))
}

/// A client set-up trusting the system's roots (or `SSL_CERT_FILE`/`SSL_CERT_DIR`) and the
/// certificates of `extra_ca` (PEM text), offering `alpn`.
pub fn client(extra_ca: Option<&str>, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, Error> {
    let mut roots = rustls::RootCertStore::empty();
    // A system without a store is fine when a CA is given; errors of single files are skipped
    // as browsers skip them.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(pem) = extra_ca {
        for c in certs(pem, "CA file")? {
            roots.add(c).map_err(|e| tls_error(&e))?;
        }
    }
    if roots.is_empty() {
        return Err(Error::Tls(
            "no trusted certificates: install ca-certificates, or give the server's with --ca FILE"
                .into(),
        ));
    }
    let mut c = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| tls_error(&e))?
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(c))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_identity_makes_both_ends_and_junk_is_named() {
        let id = Identity::self_signed(&["localhost".into(), "198.18.0.1".into()]).unwrap();
        assert!(id.cert_pem.starts_with("-----BEGIN CERTIFICATE-----"));
        server(&id, &ALPN).unwrap();
        client(Some(&id.cert_pem), &ALPN).unwrap();
        let bad = Identity {
            cert_pem: "hello".into(),
            key_pem: id.key_pem.clone(),
        };
        let e = server(&bad, &ALPN).expect_err("junk is refused");
        assert!(e.to_string().contains("no CERTIFICATE block"), "{e}");
    }
}
