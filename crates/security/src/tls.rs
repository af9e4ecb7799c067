//! TLS for a listener from Kafka's `ssl.*` settings, served with rustls.
//!
//! Key stores and trust stores are PEM, as Kafka reads them with `ssl.keystore.type=PEM`
//! and `ssl.truststore.type=PEM`: a file (`ssl.keystore.location`: the private key,
//! PKCS#8 and encrypted when `ssl.key.password` is set, followed by the certificate
//! chain; `ssl.truststore.location`: CA certificates) or the same PEM inline
//! (`ssl.keystore.key` with `ssl.keystore.certificate.chain`, `ssl.truststore.certificates`).
//! JKS and PKCS12 stores are refused at start with a message saying so.
//!
//! `ssl.client.auth` is `required`, `requested` or `none` (Kafka's default);
//! `ssl.enabled.protocols` chooses among TLSv1.2 and TLSv1.3. When a store's file
//! changes, the next connection is served with the new one (Kafka reloads on
//! kafka-configs; rewriting the files is how certificates are rotated here), and a file
//! that does not load keeps the previous configuration serving, with a warning.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};

use crate::distinguished_name::subject_of;
use crate::principal::KafkaPrincipal;
use crate::principal_mapping::PrincipalMapper;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientAuth {
    Required,
    Requested,
    None,
}

#[derive(Debug, Clone)]
enum PemSource {
    File(PathBuf),
    Inline(String),
}

impl PemSource {
    fn read(&self) -> Result<String, String> {
        match self {
            PemSource::Inline(text) => Ok(text.clone()),
            PemSource::File(path) => std::fs::read_to_string(path)
                .map_err(|e| format!("cannot read {}: {e}", path.display())),
        }
    }

    fn modified(&self) -> Option<SystemTime> {
        match self {
            PemSource::File(path) => std::fs::metadata(path).and_then(|m| m.modified()).ok(),
            PemSource::Inline(_) => None,
        }
    }
}

/// The TLS settings of one listener.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Key (first) and certificate chain; for inline settings the two texts joined.
    keystore: PemSource,
    key_password: Option<String>,
    truststore: Option<PemSource>,
    pub client_auth: ClientAuth,
    tls12: bool,
    tls13: bool,
    pub principal_mapper: PrincipalMapper,
}

impl TlsSettings {
    /// Reads one listener's settings; `get` answers a name with its listener-prefixed
    /// value first (listener.name.NAME.ssl.keystore.location), as Kafka resolves them.
    pub fn from_config(get: &dyn Fn(&str) -> Option<String>) -> Result<TlsSettings, String> {
        let keystore_type = get("ssl.keystore.type").unwrap_or_else(|| "JKS".into());
        let keystore = match (
            get("ssl.keystore.location"),
            get("ssl.keystore.key"),
            get("ssl.keystore.certificate.chain"),
        ) {
            (_, Some(key), Some(chain)) => PemSource::Inline(format!("{key}\n{chain}")),
            (_, Some(_), None) | (_, None, Some(_)) => {
                return Err("ssl.keystore.key and ssl.keystore.certificate.chain go together".into())
            }
            (Some(location), None, None) => {
                if !keystore_type.eq_ignore_ascii_case("PEM") {
                    return Err(format!(
                        "ssl.keystore.type {keystore_type} is not supported: Strand reads PEM key stores (ssl.keystore.type=PEM)"
                    ));
                }
                PemSource::File(PathBuf::from(location))
            }
            (None, None, None) => {
                return Err("a TLS listener needs ssl.keystore.location (PEM) or ssl.keystore.key with ssl.keystore.certificate.chain".into())
            }
        };
        let truststore_type = get("ssl.truststore.type").unwrap_or_else(|| "JKS".into());
        let truststore = match (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        ) {
            (_, Some(inline)) => Some(PemSource::Inline(inline)),
            (Some(location), None) => {
                if !truststore_type.eq_ignore_ascii_case("PEM") {
                    return Err(format!(
                        "ssl.truststore.type {truststore_type} is not supported: Strand reads PEM trust stores (ssl.truststore.type=PEM)"
                    ));
                }
                Some(PemSource::File(PathBuf::from(location)))
            }
            (None, None) => None,
        };
        let client_auth = match get("ssl.client.auth").as_deref().map(str::trim) {
            None | Some("none") => ClientAuth::None,
            Some("required") => ClientAuth::Required,
            Some("requested") => ClientAuth::Requested,
            Some(other) => {
                return Err(format!(
                    "Invalid value {other} for configuration ssl.client.auth: String must be one of: required, requested, none"
                ))
            }
        };
        if client_auth != ClientAuth::None && truststore.is_none() {
            return Err(format!(
                "ssl.client.auth={} needs a trust store (ssl.truststore.location, PEM) to check client certificates against",
                if client_auth == ClientAuth::Required { "required" } else { "requested" }
            ));
        }
        let protocols = get("ssl.enabled.protocols").unwrap_or_else(|| "TLSv1.2,TLSv1.3".into());
        let protocols: Vec<&str> = protocols
            .split(',')
            .map(str::trim)
            .filter(|p| !p.is_empty())
            .collect();
        let (tls12, tls13) = (
            protocols.contains(&"TLSv1.2"),
            protocols.contains(&"TLSv1.3"),
        );
        if !tls12 && !tls13 {
            return Err(format!(
                "ssl.enabled.protocols {}: Strand serves TLSv1.2 and TLSv1.3",
                protocols.join(",")
            ));
        }
        let principal_mapper = match get("ssl.principal.mapping.rules") {
            Some(rules) => PrincipalMapper::parse(&rules)?,
            None => PrincipalMapper::default(),
        };
        Ok(TlsSettings {
            keystore,
            key_password: get("ssl.key.password").filter(|p| !p.is_empty()),
            truststore,
            client_auth,
            tls12,
            tls13,
            principal_mapper,
        })
    }

    fn files_modified(&self) -> Vec<Option<SystemTime>> {
        let mut stamps = vec![self.keystore.modified()];
        if let Some(truststore) = &self.truststore {
            stamps.push(truststore.modified());
        }
        stamps
    }

    /// A rustls server configuration from the stores as they are now.
    pub fn build(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let keystore = self.keystore.read()?;
        let key = private_key(&keystore, self.key_password.as_deref())?;
        let chain: Vec<CertificateDer<'static>> =
            CertificateDer::pem_slice_iter(keystore.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("cannot read the key store's certificates: {e}"))?;
        if chain.is_empty() {
            return Err("the key store holds no certificate".into());
        }
        let mut versions = Vec::new();
        if self.tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            versions.push(&rustls::version::TLS12);
        }
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS protocol versions: {e}"))?;
        let builder = match (&self.truststore, self.client_auth) {
            (Some(truststore), ClientAuth::Required | ClientAuth::Requested) => {
                let roots = Arc::new(trust_roots(&truststore.read()?)?);
                let verifier = WebPkiClientVerifier::builder_with_provider(roots, provider);
                let verifier = if self.client_auth == ClientAuth::Requested {
                    verifier.allow_unauthenticated()
                } else {
                    verifier
                };
                builder.with_client_cert_verifier(
                    verifier
                        .build()
                        .map_err(|e| format!("cannot check client certificates: {e}"))?,
                )
            }
            _ => builder.with_no_client_auth(),
        };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("the key store's key and certificate do not go together: {e}"))?;
        Ok(Arc::new(config))
    }

    /// The principal of a peer that finished the handshake: its certificate's subject
    /// through the mapping rules, ANONYMOUS without one (or when none was asked for).
    pub fn principal_of(
        &self,
        peer_certificates: Option<&[CertificateDer<'_>]>,
    ) -> Result<KafkaPrincipal, String> {
        let Some(first) = peer_certificates.and_then(|c| c.first()) else {
            return Ok(KafkaPrincipal::anonymous());
        };
        if self.client_auth == ClientAuth::None {
            return Ok(KafkaPrincipal::anonymous());
        }
        let subject = subject_of(first.as_ref())?;
        Ok(KafkaPrincipal::user(
            self.principal_mapper.name_for(&subject)?,
        ))
    }
}

fn private_key(pem: &str, password: Option<&str>) -> Result<PrivateKeyDer<'static>, String> {
    const ENCRYPTED: &str = "-----BEGIN ENCRYPTED PRIVATE KEY-----";
    if let Some(start) = pem.find(ENCRYPTED) {
        let password =
            password.ok_or("the key store's private key is encrypted: give ssl.key.password")?;
        const END: &str = "-----END ENCRYPTED PRIVATE KEY-----";
        let end = pem[start..]
            .find(END)
            .ok_or("the key store's encrypted private key has no end")?
            + start
            + END.len();
        let (_, der) = pkcs8::der::pem::decode_vec(&pem.as_bytes()[start..end])
            .map_err(|e| format!("cannot read the encrypted private key: {e}"))?;
        let encrypted = pkcs8::EncryptedPrivateKeyInfo::try_from(der.as_slice())
            .map_err(|e| format!("cannot read the encrypted private key: {e}"))?;
        let decrypted = encrypted
            .decrypt(password)
            .map_err(|_| "cannot decrypt the private key with ssl.key.password".to_string())?;
        return Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
            decrypted.as_bytes().to_vec(),
        )));
    }
    PrivateKeyDer::from_pem_slice(pem.as_bytes())
        .map_err(|e| format!("the key store holds no private key the broker can read: {e}"))
}

fn trust_roots(pem: &str) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    for certificate in CertificateDer::pem_slice_iter(pem.as_bytes()) {
        let certificate = certificate.map_err(|e| format!("cannot read the trust store: {e}"))?;
        roots
            .add(certificate)
            .map_err(|e| format!("cannot trust a trust store certificate: {e}"))?;
    }
    if roots.is_empty() {
        return Err("the trust store holds no certificate".into());
    }
    Ok(roots)
}

/// How often a connection may trigger a look at the stores' files.
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

struct Loaded {
    config: Arc<ServerConfig>,
    modified: Vec<Option<SystemTime>>,
    checked_at: Instant,
}

/// A listener's TLS configuration, rebuilt when its store files change.
pub struct ReloadingServerConfig {
    settings: TlsSettings,
    loaded: Mutex<Loaded>,
}

impl ReloadingServerConfig {
    /// Loads the stores now: a broker does not start with a listener it cannot serve.
    pub fn new(settings: TlsSettings) -> Result<ReloadingServerConfig, String> {
        let modified = settings.files_modified();
        let config = settings.build()?;
        Ok(ReloadingServerConfig {
            settings,
            loaded: Mutex::new(Loaded {
                config,
                modified,
                checked_at: Instant::now(),
            }),
        })
    }

    pub fn settings(&self) -> &TlsSettings {
        &self.settings
    }

    /// The configuration for a new connection.
    pub fn current(&self) -> Arc<ServerConfig> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.checked_at.elapsed() >= RELOAD_CHECK_INTERVAL {
            loaded.checked_at = Instant::now();
            let modified = self.settings.files_modified();
            if modified != loaded.modified {
                match self.settings.build() {
                    Ok(config) => {
                        tracing::info!(
                            "TLS key or trust store changed: serving new connections with it"
                        );
                        loaded.config = config;
                        loaded.modified = modified;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "TLS key or trust store changed but does not load; still serving the previous one")
                    }
                }
            }
        }
        loaded.config.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<TlsSettings, String> {
        let map: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        TlsSettings::from_config(&|name| map.get(name).cloned())
    }

    fn self_signed(name: &str) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec![name.into()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        (key.serialize_pem(), cert.pem())
    }

    #[test]
    fn builds_from_a_pem_key_store_file_and_inline_pem() {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = self_signed("localhost");
        let path = dir.path().join("server.pem");
        std::fs::write(&path, format!("{key}{cert}")).unwrap();
        let from_file = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", path.to_str().unwrap()),
        ])
        .unwrap();
        from_file.build().unwrap();
        let inline = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.key", &key),
            ("ssl.keystore.certificate.chain", &cert),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.certificates", &cert),
            ("ssl.client.auth", "required"),
        ])
        .unwrap();
        inline.build().unwrap();
    }

    #[test]
    fn refuses_what_it_cannot_serve_with_the_setting_named() {
        let error = settings(&[("ssl.keystore.location", "/x.jks")]).unwrap_err();
        assert!(error.contains("ssl.keystore.type JKS"), "{error}");
        let error = settings(&[]).unwrap_err();
        assert!(error.contains("ssl.keystore.location"), "{error}");
        let error = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/x.pem"),
            ("ssl.client.auth", "required"),
        ])
        .unwrap_err();
        assert!(error.contains("trust store"), "{error}");
        let error = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/x.pem"),
            ("ssl.client.auth", "sometimes"),
        ])
        .unwrap_err();
        assert!(error.contains("ssl.client.auth"), "{error}");
        let error = settings(&[
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", "/x.pem"),
            ("ssl.enabled.protocols", "TLSv1.1"),
        ])
        .unwrap_err();
        assert!(error.contains("TLSv1.2"), "{error}");
    }

    #[test]
    fn reads_an_encrypted_pkcs8_key_with_the_key_password() {
        let dir = tempfile::tempdir().unwrap();
        let (key, cert) = self_signed("localhost");
        std::fs::write(dir.path().join("plain.pem"), &key).unwrap();
        let status = std::process::Command::new("openssl")
            .args([
                "pkcs8",
                "-topk8",
                "-v2",
                "aes-256-cbc",
                "-passout",
                "pass:s3cret",
                "-in",
            ])
            .arg(dir.path().join("plain.pem"))
            .arg("-out")
            .arg(dir.path().join("encrypted.pem"))
            .status();
        let Ok(status) = status else {
            eprintln!("no openssl here: skipped");
            return;
        };
        assert!(status.success());
        let encrypted = std::fs::read_to_string(dir.path().join("encrypted.pem")).unwrap();
        let pem = format!("{encrypted}{cert}");
        assert!(private_key(&pem, Some("s3cret")).is_ok());
        assert!(private_key(&pem, Some("wrong")).is_err());
        assert!(private_key(&pem, None)
            .unwrap_err()
            .contains("ssl.key.password"));
    }
}
