//! TLS for a listener from Kafka's `ssl.*` settings, served with rustls.
//!
//! Key stores and trust stores are PEM, as Kafka reads them with `ssl.keystore.type=PEM`
//! and `ssl.truststore.type=PEM`: a file (`ssl.keystore.location`: the private key,
//! PKCS#8 and encrypted when `ssl.key.password` is set, followed by the certificate
//! chain; `ssl.truststore.location`: CA certificates) or the same PEM inline
//! (`ssl.keystore.key` with `ssl.keystore.certificate.chain`, `ssl.truststore.certificates`);
//! or PKCS12 files (`ssl.keystore.type=PKCS12` with ssl.keystore.password,
//! `ssl.truststore.type=PKCS12` with ssl.truststore.password). A store of type JKS (Kafka's
//! default) is read when the file is PKCS12, which is what keytool writes since Java 9
//! whatever the file is called, as Java reads it; a file in the old JKS format is refused
//! with the keytool command that converts it.
//!
//! `ssl.client.auth` is `required`, `requested` or `none` (Kafka's default);
//! `ssl.enabled.protocols` chooses among TLSv1.2 and TLSv1.3. When a store's file
//! changes, the next connection is served with the new one (Kafka reloads on
//! kafka-configs; rewriting the files is how certificates are rotated here), and a file
//! that does not load keeps the previous configuration serving, with a warning.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};

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

    fn read_bytes(&self) -> Result<Vec<u8>, String> {
        match self {
            PemSource::Inline(text) => Ok(text.clone().into_bytes()),
            PemSource::File(path) => {
                std::fs::read(path).map_err(|e| format!("cannot read {}: {e}", path.display()))
            }
        }
    }

    fn modified(&self) -> Option<SystemTime> {
        match self {
            PemSource::File(path) => std::fs::metadata(path).and_then(|m| m.modified()).ok(),
            PemSource::Inline(_) => None,
        }
    }
}

/// How a store's bytes are laid out.
#[derive(Clone)]
enum StoreFormat {
    Pem,
    /// PKCS12 (also what a "JKS" store written by keytool since Java 9 holds), opened
    /// with the store's password.
    Pkcs12 {
        password: String,
    },
}

impl std::fmt::Debug for StoreFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoreFormat::Pem => "PEM",
            StoreFormat::Pkcs12 { .. } => "PKCS12",
        })
    }
}

/// The store format a `ssl.keystore.type` / `ssl.truststore.type` names.
fn store_format(
    get: &dyn Fn(&str) -> Option<String>,
    store: &str,
    type_name: &str,
) -> Result<StoreFormat, String> {
    match type_name.trim().to_ascii_uppercase().as_str() {
        "PEM" => Ok(StoreFormat::Pem),
        "PKCS12" | "JKS" => {
            let key = format!("ssl.{store}.password");
            let password = get(&key).ok_or_else(|| {
                format!("ssl.{store}.type={type_name} needs {key} (Strand opens PKCS12 stores with their password)")
            })?;
            Ok(StoreFormat::Pkcs12 { password })
        }
        other => Err(format!(
            "ssl.{store}.type {other} is not supported: Strand reads PEM and PKCS12 stores"
        )),
    }
}

/// The first bytes of a store in the old JKS format.
const JKS_MAGIC: [u8; 4] = [0xFE, 0xED, 0xFE, 0xED];

/// Opens a PKCS12 store, or says how to convert an old-format JKS one.
fn open_pkcs12(
    bytes: &[u8],
    password: &str,
    setting: &str,
) -> Result<p12_keystore::KeyStore, String> {
    if bytes.starts_with(&JKS_MAGIC) {
        return Err(format!(
            "{setting} is in the old JKS format, which Strand does not read: convert it with \
             keytool -importkeystore -srckeystore FILE -destkeystore FILE.p12 -deststoretype PKCS12"
        ));
    }
    p12_keystore::KeyStore::from_pkcs12(bytes, password, p12_keystore::Pkcs12ImportPolicy::Relaxed)
        .map_err(|e| format!("cannot open {setting} as PKCS12 with its password: {e}"))
}

/// The TLS settings of one listener.
#[derive(Debug, Clone)]
pub struct TlsSettings {
    /// Key (first) and certificate chain; for inline settings the two texts joined.
    keystore: PemSource,
    keystore_format: StoreFormat,
    key_password: Option<String>,
    truststore: Option<PemSource>,
    truststore_format: StoreFormat,
    pub client_auth: ClientAuth,
    tls12: bool,
    tls13: bool,
    pub principal_mapper: PrincipalMapper,
    /// ssl.endpoint.identification.algorithm: `https` (Kafka's default) checks, as a
    /// client, that the server's certificate names the host connected to; empty does not.
    verify_hostname: bool,
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
            (Some(location), None, None) => PemSource::File(PathBuf::from(location)),
            (None, None, None) => {
                return Err("a TLS listener needs ssl.keystore.location or ssl.keystore.key with ssl.keystore.certificate.chain".into())
            }
        };
        let keystore_format = match keystore {
            PemSource::Inline(_) => StoreFormat::Pem,
            PemSource::File(_) => store_format(get, "keystore", &keystore_type)?,
        };
        let truststore_type = get("ssl.truststore.type").unwrap_or_else(|| "JKS".into());
        let truststore = match (
            get("ssl.truststore.location"),
            get("ssl.truststore.certificates"),
        ) {
            (_, Some(inline)) => Some(PemSource::Inline(inline)),
            (Some(location), None) => Some(PemSource::File(PathBuf::from(location))),
            (None, None) => None,
        };
        let truststore_format = match truststore {
            Some(PemSource::File(_)) => store_format(get, "truststore", &truststore_type)?,
            _ => StoreFormat::Pem,
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
                "ssl.client.auth={} needs a trust store (ssl.truststore.location) to check client certificates against",
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
        let verify_hostname = match get("ssl.endpoint.identification.algorithm")
            .as_deref()
            .map(str::trim)
        {
            None => true,
            Some(algorithm) if algorithm.eq_ignore_ascii_case("https") => true,
            Some("") => false,
            Some(other) => {
                return Err(format!(
                    "ssl.endpoint.identification.algorithm {other} is not served (https or empty)"
                ))
            }
        };
        Ok(TlsSettings {
            verify_hostname,
            keystore,
            keystore_format,
            key_password: get("ssl.key.password").filter(|p| !p.is_empty()),
            truststore,
            truststore_format,
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

    /// The protocol versions ssl.enabled.protocols allows.
    fn versions(&self) -> Vec<&'static rustls::SupportedProtocolVersion> {
        let mut versions = Vec::new();
        if self.tls13 {
            versions.push(&rustls::version::TLS13);
        }
        if self.tls12 {
            versions.push(&rustls::version::TLS12);
        }
        versions
    }

    /// A rustls server configuration from the stores as they are now.
    pub fn build(&self) -> Result<Arc<ServerConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let (key, chain) = self.key_and_chain()?;
        if chain.is_empty() {
            return Err("the key store holds no certificate".into());
        }
        let versions = self.versions();
        let builder = ServerConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&versions)
            .map_err(|e| format!("TLS protocol versions: {e}"))?;
        let builder =
            match (&self.truststore, self.client_auth) {
                (Some(truststore), ClientAuth::Required | ClientAuth::Requested) => {
                    let roots = Arc::new(self.trust_roots(truststore)?);
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
                (None, ClientAuth::Required | ClientAuth::Requested) => return Err(
                    "checking client certificates needs a trust store (ssl.truststore.location)"
                        .into(),
                ),
                (_, ClientAuth::None) => builder.with_no_client_auth(),
            };
        let config = builder
            .with_single_cert(chain, key)
            .map_err(|e| format!("the key store's key and certificate do not go together: {e}"))?;
        Ok(Arc::new(config))
    }

    /// A rustls client configuration for this listener's peers (a broker connecting to
    /// another broker's inter-broker listener, or a node to the quorum): it trusts the
    /// trust store's certificates, presents the key store's, and checks the server's name
    /// unless ssl.endpoint.identification.algorithm is empty.
    pub fn build_client(&self) -> Result<Arc<ClientConfig>, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let truststore = self.truststore.as_ref().ok_or(
            "connecting to peers needs a trust store (ssl.truststore.location) to check their certificates against",
        )?;
        let roots = Arc::new(self.trust_roots(truststore)?);
        let builder = ClientConfig::builder_with_provider(provider.clone())
            .with_protocol_versions(&self.versions())
            .map_err(|e| format!("TLS protocol versions: {e}"))?;
        let builder = if self.verify_hostname {
            builder.with_root_certificates(roots)
        } else {
            let verifier = WebPkiServerVerifier::builder_with_provider(roots, provider)
                .build()
                .map_err(|e| format!("cannot check server certificates: {e}"))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyNameVerifier(verifier)))
        };
        let (key, chain) = self.key_and_chain()?;
        let config = builder
            .with_client_auth_cert(chain, key)
            .map_err(|e| format!("the key store's key and certificate do not go together: {e}"))?;
        Ok(Arc::new(config))
    }

    /// The key store's private key and certificate chain.
    fn key_and_chain(
        &self,
    ) -> Result<(PrivateKeyDer<'static>, Vec<CertificateDer<'static>>), String> {
        match &self.keystore_format {
            StoreFormat::Pem => {
                let keystore = self.keystore.read()?;
                let key = private_key(&keystore, self.key_password.as_deref())?;
                let chain = CertificateDer::pem_slice_iter(keystore.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(|e| format!("cannot read the key store's certificates: {e}"))?;
                Ok((key, chain))
            }
            StoreFormat::Pkcs12 { password } => {
                let store = open_pkcs12(
                    &self.keystore.read_bytes()?,
                    password,
                    "ssl.keystore.location",
                )?;
                let (_, chain) = store
                    .private_key_chain()
                    .ok_or("the key store (PKCS12) holds no private key")?;
                let key =
                    PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(chain.key().as_der().to_vec()));
                let certificates = chain
                    .certs()
                    .iter()
                    .map(|c| CertificateDer::from(c.as_der().to_vec()))
                    .collect();
                Ok((key, certificates))
            }
        }
    }

    /// The certificates client certificates are checked against.
    fn trust_roots(&self, truststore: &PemSource) -> Result<RootCertStore, String> {
        let certificates: Vec<CertificateDer<'static>> = match &self.truststore_format {
            StoreFormat::Pem => CertificateDer::pem_slice_iter(truststore.read()?.as_bytes())
                .collect::<Result<_, _>>()
                .map_err(|e| format!("cannot read the trust store: {e}"))?,
            StoreFormat::Pkcs12 { password } => {
                let store = open_pkcs12(
                    &truststore.read_bytes()?,
                    password,
                    "ssl.truststore.location",
                )?;
                store
                    .entries()
                    .flat_map(|(_, entry)| match entry {
                        p12_keystore::KeyStoreEntry::Certificate(c) => vec![c.as_der().to_vec()],
                        p12_keystore::KeyStoreEntry::PrivateKeyChain(chain) => {
                            chain.certs().iter().map(|c| c.as_der().to_vec()).collect()
                        }
                        _ => Vec::new(),
                    })
                    .map(CertificateDer::from)
                    .collect()
            }
        };
        let mut roots = RootCertStore::empty();
        for certificate in certificates {
            roots
                .add(certificate)
                .map_err(|e| format!("cannot trust a trust store certificate: {e}"))?;
        }
        if roots.is_empty() {
            return Err("the trust store holds no certificate".into());
        }
        Ok(roots)
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

/// The name a client checks a server's certificate against: the host of `host:port` (an
/// IPv6 address without its brackets).
pub fn server_name_of(address: &str) -> Result<ServerName<'static>, String> {
    let host = address.rsplit_once(':').map_or(address, |(host, _)| host);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    ServerName::try_from(host.to_string())
        .map_err(|e| format!("{host} is not a host name or address: {e}"))
}

/// Checks a server's certificate chain as WebPKI does but accepts it whatever host it
/// names (ssl.endpoint.identification.algorithm empty).
#[derive(Debug)]
struct AnyNameVerifier(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyNameVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                rustls::CertificateError::NotValidForName
                | rustls::CertificateError::NotValidForNameContext { .. },
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
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
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
        let encrypted = pkcs8::EncryptedPrivateKeyInfoRef::try_from(der.as_slice())
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

/// How often a connection may trigger a look at the stores' files.
const RELOAD_CHECK_INTERVAL: Duration = Duration::from_secs(1);

struct Loaded<C> {
    config: Arc<C>,
    modified: Vec<Option<SystemTime>>,
    checked_at: Instant,
}

/// A TLS configuration (a listener's server side, or the client side its peers are
/// reached with), rebuilt when its store files change.
pub struct Reloading<C> {
    settings: TlsSettings,
    build: fn(&TlsSettings) -> Result<Arc<C>, String>,
    loaded: Mutex<Loaded<C>>,
}

/// A listener's server side.
pub type ReloadingServerConfig = Reloading<ServerConfig>;
/// The client side of connections to a listener's peers.
pub type ReloadingClientConfig = Reloading<ClientConfig>;

impl Reloading<ServerConfig> {
    /// Loads the stores now: a broker does not start with a listener it cannot serve.
    pub fn new(settings: TlsSettings) -> Result<ReloadingServerConfig, String> {
        Reloading::load(settings, TlsSettings::build)
    }
}

impl Reloading<ClientConfig> {
    /// Loads the stores now: a broker does not start unable to reach its peers.
    pub fn client(settings: TlsSettings) -> Result<ReloadingClientConfig, String> {
        Reloading::load(settings, TlsSettings::build_client)
    }
}

impl<C> Reloading<C> {
    fn load(
        settings: TlsSettings,
        build: fn(&TlsSettings) -> Result<Arc<C>, String>,
    ) -> Result<Reloading<C>, String> {
        let modified = settings.files_modified();
        let config = build(&settings)?;
        Ok(Reloading {
            settings,
            build,
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
    pub fn current(&self) -> Arc<C> {
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.checked_at.elapsed() >= RELOAD_CHECK_INTERVAL {
            loaded.checked_at = Instant::now();
            let modified = self.settings.files_modified();
            if modified != loaded.modified {
                match (self.build)(&self.settings) {
                    Ok(config) => {
                        tracing::info!(
                            "TLS key or trust store changed: using it for new connections"
                        );
                        loaded.config = config;
                        loaded.modified = modified;
                    }
                    Err(error) => {
                        tracing::warn!(%error, "TLS key or trust store changed but does not load; still using the previous one")
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
        assert!(
            error.contains("ssl.keystore.type=JKS needs ssl.keystore.password"),
            "{error}"
        );
        let error = settings(&[
            ("ssl.keystore.type", "BCFKS"),
            ("ssl.keystore.location", "/x.bcfks"),
        ])
        .unwrap_err();
        assert!(
            error.contains("ssl.keystore.type BCFKS is not supported"),
            "{error}"
        );
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

    /// A PKCS12 store holding a key with its certificate, and one holding only the
    /// certificate as a trusted entry, as keytool writes them.
    fn pkcs12_stores(password: &str) -> (Vec<u8>, Vec<u8>) {
        let key = rcgen::KeyPair::generate().unwrap();
        let params = rcgen::CertificateParams::new(vec!["localhost".into()]).unwrap();
        let cert = params.self_signed(&key).unwrap();
        let certificate = p12_keystore::Certificate::from_der(cert.der()).unwrap();
        let private_key = p12_keystore::PrivateKey::from_der(&key.serialize_der()).unwrap();
        let mut keystore = p12_keystore::KeyStore::new();
        keystore.add_entry(
            "broker",
            p12_keystore::KeyStoreEntry::PrivateKeyChain(p12_keystore::PrivateKeyChain::new(
                b"id".to_vec(),
                private_key,
                [certificate.clone()],
            )),
        );
        let mut truststore = p12_keystore::KeyStore::new();
        truststore.add_entry("ca", p12_keystore::KeyStoreEntry::Certificate(certificate));
        (
            keystore.writer(password).write().unwrap(),
            truststore.writer(password).write().unwrap(),
        )
    }

    #[test]
    fn pkcs12_stores_and_keytools_jks_named_ones_load() {
        let dir = tempfile::tempdir().unwrap();
        let (keystore, truststore) = pkcs12_stores("store-secret");
        let keystore_path = dir.path().join("broker.keystore.jks");
        let truststore_path = dir.path().join("broker.truststore.p12");
        std::fs::write(&keystore_path, keystore).unwrap();
        std::fs::write(&truststore_path, truststore).unwrap();
        for store_type in ["PKCS12", "JKS"] {
            settings(&[
                ("ssl.keystore.type", store_type),
                ("ssl.keystore.location", keystore_path.to_str().unwrap()),
                ("ssl.keystore.password", "store-secret"),
                ("ssl.truststore.type", "PKCS12"),
                ("ssl.truststore.location", truststore_path.to_str().unwrap()),
                ("ssl.truststore.password", "store-secret"),
                ("ssl.client.auth", "required"),
            ])
            .unwrap()
            .build()
            .unwrap_or_else(|e| panic!("{store_type}: {e}"));
        }
        let wrong = settings(&[
            ("ssl.keystore.type", "PKCS12"),
            ("ssl.keystore.location", keystore_path.to_str().unwrap()),
            ("ssl.keystore.password", "guess"),
        ])
        .unwrap()
        .build()
        .unwrap_err();
        assert!(
            wrong.contains("cannot open ssl.keystore.location as PKCS12"),
            "{wrong}"
        );
        let missing = settings(&[
            ("ssl.keystore.type", "PKCS12"),
            ("ssl.keystore.location", keystore_path.to_str().unwrap()),
        ])
        .unwrap_err();
        assert!(missing.contains("needs ssl.keystore.password"), "{missing}");
        // A store in the old JKS format: refused with the way out.
        let old = dir.path().join("old.jks");
        std::fs::write(&old, [0xFE, 0xED, 0xFE, 0xED, 0, 0, 0, 2]).unwrap();
        let refused = settings(&[
            ("ssl.keystore.location", old.to_str().unwrap()),
            ("ssl.keystore.password", "store-secret"),
        ])
        .unwrap()
        .build()
        .unwrap_err();
        assert!(
            refused.contains("old JKS format") && refused.contains("keytool -importkeystore"),
            "{refused}"
        );
    }

    /// A CA and a function signing leaf certificates for `names` with it, as PEM
    /// (key, certificate).
    fn authority() -> (String, impl Fn(&str) -> (String, String)) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap();
        let pem = ca.pem();
        let sign = move |name: &str| {
            let leaf_key = rcgen::KeyPair::generate().unwrap();
            let leaf = rcgen::CertificateParams::new(vec![name.to_string()])
                .unwrap()
                .signed_by(&leaf_key, &ca, &key)
                .unwrap();
            (leaf_key.serialize_pem(), leaf.pem())
        };
        (pem, sign)
    }

    fn node_settings(
        ca: &str,
        (key, cert): &(String, String),
        extra: &[(&str, &str)],
    ) -> TlsSettings {
        let mut pairs = vec![
            ("ssl.keystore.key", key.as_str()),
            ("ssl.keystore.certificate.chain", cert.as_str()),
            ("ssl.truststore.certificates", ca),
            ("ssl.client.auth", "required"),
        ];
        pairs.extend_from_slice(extra);
        settings(&pairs).unwrap()
    }

    /// Runs a TLS handshake in memory.
    fn handshake(
        client: Arc<ClientConfig>,
        server: Arc<ServerConfig>,
        host: &str,
    ) -> Result<(), rustls::Error> {
        let name = ServerName::try_from(host.to_string()).unwrap();
        let mut client = rustls::ClientConnection::new(client, name)?;
        let mut server = rustls::ServerConnection::new(server)?;
        for _ in 0..10 {
            let mut bytes = Vec::new();
            while client.wants_write() {
                client.write_tls(&mut bytes).unwrap();
            }
            server.read_tls(&mut bytes.as_slice()).unwrap();
            server.process_new_packets()?;
            let mut bytes = Vec::new();
            while server.wants_write() {
                server.write_tls(&mut bytes).unwrap();
            }
            client.read_tls(&mut bytes.as_slice()).unwrap();
            client.process_new_packets()?;
            if !client.is_handshaking() && !server.is_handshaking() {
                return Ok(());
            }
        }
        Err(rustls::Error::General(
            "the handshake did not finish".into(),
        ))
    }

    #[test]
    fn peers_authenticate_each_other_with_the_stores_of_their_listener() {
        let (ca, sign) = authority();
        let node = node_settings(&ca, &sign("localhost"), &[]);
        let server = node.build().unwrap();
        let client = node.build_client().unwrap();
        handshake(client.clone(), server.clone(), "localhost").unwrap();
        // The certificate names localhost, not this host: refused unless the name check
        // is off (ssl.endpoint.identification.algorithm empty).
        assert!(handshake(client, server.clone(), "broker-7.example").is_err());
        let lax = node_settings(
            &ca,
            &sign("localhost"),
            &[("ssl.endpoint.identification.algorithm", "")],
        );
        handshake(
            lax.build_client().unwrap(),
            server.clone(),
            "broker-7.example",
        )
        .unwrap();
        // A node whose certificate another CA signed is refused by the server, and
        // refuses the server in turn.
        let (other_ca, other_sign) = authority();
        let stranger = node_settings(&other_ca, &other_sign("localhost"), &[]);
        assert!(handshake(stranger.build_client().unwrap(), server, "localhost").is_err());
        assert!(handshake(
            node.build_client().unwrap(),
            stranger.build().unwrap(),
            "localhost"
        )
        .is_err());
    }

    #[test]
    fn server_names_of_addresses() {
        let name = |address: &str| server_name_of(address).unwrap().to_str().into_owned();
        assert_eq!(name("127.0.0.1:9092"), "127.0.0.1");
        assert_eq!(name("broker-1.example:9092"), "broker-1.example");
        assert_eq!(name("[::1]:9092"), "::1");
        assert!(server_name_of("bad host!:9092").is_err());
    }

    #[test]
    fn a_client_needs_a_trust_store_and_a_known_name_check() {
        let (key, cert) = self_signed("localhost");
        let no_trust = settings(&[
            ("ssl.keystore.key", &key),
            ("ssl.keystore.certificate.chain", &cert),
        ])
        .unwrap();
        let error = no_trust.build_client().unwrap_err();
        assert!(error.contains("ssl.truststore.location"), "{error}");
        let error = settings(&[
            ("ssl.keystore.key", &key),
            ("ssl.keystore.certificate.chain", &cert),
            ("ssl.endpoint.identification.algorithm", "dns"),
        ])
        .unwrap_err();
        assert!(
            error.contains("ssl.endpoint.identification.algorithm dns"),
            "{error}"
        );
    }
}
