//! One listener as the broker serves it: its address and protocol, and what its
//! protocol needs, loaded once at start so a broker never starts with a listener it
//! cannot serve: the TLS configuration (SSL, SASL_SSL) and the SASL mechanisms with
//! their users (SASL_PLAINTEXT, SASL_SSL): PLAIN's from the listener's JAAS entry,
//! SCRAM's from the credentials AlterUserScramCredentials stores.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strand_security::jaas;
use strand_security::sasl::oauthbearer::{
    self, JwksFile, OAuthBearerExchange, TokenValidator, SECURED_VALIDATOR,
};
use strand_security::sasl::plain::{self, PlainExchange, PlainUsers};
use strand_security::sasl::scram::{ScramCredentials, ScramExchange, ScramMechanism};
use strand_security::sasl::SaslExchange;
use strand_security::tls::{ReloadingServerConfig, TlsSettings};
use strand_security::SecurityProtocol;

use crate::config::{BrokerConfig, ListenerSpec};

pub struct Listener {
    pub spec: ListenerSpec,
    pub tls: Option<ReloadingServerConfig>,
    pub sasl: Option<Arc<SaslSettings>>,
    /// Connections being served (socket-server-metrics connection-count).
    connections: Arc<AtomicUsize>,
}

/// Counts one connection of a listener while it lives.
pub struct ListenerConnection(Arc<AtomicUsize>);

impl Drop for ListenerConnection {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The SASL side of a listener.
pub struct SaslSettings {
    /// sasl.enabled.mechanisms, in the order given.
    pub mechanisms: Vec<String>,
    plain_users: Option<Arc<PlainUsers>>,
    oauthbearer: Option<Arc<TokenValidator>>,
    /// connections.max.reauth.ms: the session lifetime told to clients (None: sessions
    /// do not expire, Kafka's default 0).
    pub reauthentication: Option<Duration>,
    /// connection.failed.authentication.delay.ms: how long a connection that failed to
    /// authenticate stays open before it is closed, slowing password guessing.
    pub failed_authentication_delay: Duration,
    /// sasl.server.max.receive.size: the largest frame a client may send before it has
    /// authenticated.
    pub max_receive_size: usize,
}

impl SaslSettings {
    /// A new exchange for `mechanism`, if this listener enables it; SCRAM reads the
    /// users' credentials from `scram`.
    pub fn exchange(
        &self,
        mechanism: &str,
        scram: &Arc<dyn ScramCredentials>,
        reauthentication: bool,
    ) -> Option<Box<dyn SaslExchange>> {
        if !self.mechanisms.iter().any(|m| m == mechanism) {
            return None;
        }
        if let Some(scram_mechanism) = ScramMechanism::from_name(mechanism) {
            return Some(Box::new(ScramExchange::new(
                scram_mechanism,
                scram.clone(),
                reauthentication,
            )));
        }
        match mechanism {
            plain::MECHANISM => self
                .plain_users
                .clone()
                .map(|users| Box::new(PlainExchange::new(users)) as Box<dyn SaslExchange>),
            oauthbearer::MECHANISM => self.oauthbearer.clone().map(|validator| {
                Box::new(OAuthBearerExchange::new(validator)) as Box<dyn SaslExchange>
            }),
            _ => None,
        }
    }
}

/// Mechanisms Strand can serve.
const SERVED_MECHANISMS: &[&str] = &[
    plain::MECHANISM,
    "SCRAM-SHA-256",
    "SCRAM-SHA-512",
    oauthbearer::MECHANISM,
];

impl Listener {
    pub fn from_config(config: &BrokerConfig, spec: ListenerSpec) -> Result<Listener, String> {
        let name = spec.name.clone();
        let setting = |key: &str| config.security_setting(&name, key);
        let tls = if spec.protocol.uses_tls() {
            let settings =
                TlsSettings::from_config(&setting).map_err(|e| format!("listener {name}: {e}"))?;
            Some(
                ReloadingServerConfig::new(settings)
                    .map_err(|e| format!("listener {name}: {e}"))?,
            )
        } else {
            None
        };
        let sasl = if spec.protocol.uses_sasl() {
            Some(Arc::new(
                sasl_settings(config, &name).map_err(|e| format!("listener {name}: {e}"))?,
            ))
        } else {
            None
        };
        Ok(Listener {
            spec,
            tls,
            sasl,
            connections: Arc::default(),
        })
    }

    /// A connection is served from now until the guard is dropped.
    pub fn connected(&self) -> ListenerConnection {
        self.connections.fetch_add(1, Ordering::Relaxed);
        ListenerConnection(self.connections.clone())
    }

    pub fn connection_count(&self) -> usize {
        self.connections.load(Ordering::Relaxed)
    }

    /// Every listener of `config`, the inter-broker one first.
    pub fn all_from_config(config: &BrokerConfig) -> Result<Vec<Arc<Listener>>, String> {
        config
            .listeners()?
            .into_iter()
            .map(|spec| Listener::from_config(config, spec).map(Arc::new))
            .collect()
    }

    pub fn plaintext(name: &str, address: SocketAddr) -> Listener {
        Listener {
            spec: ListenerSpec {
                name: name.to_string(),
                protocol: SecurityProtocol::Plaintext,
                listen: address,
                advertised_host: address.ip().to_string(),
                advertised_port: address.port(),
            },
            tls: None,
            sasl: None,
            connections: Arc::default(),
        }
    }
}

fn sasl_settings(config: &BrokerConfig, listener: &str) -> Result<SaslSettings, String> {
    let setting = |key: &str| config.security_setting(listener, key);
    // Kafka's default is GSSAPI (Kerberos), which Strand does not serve.
    let mechanisms: Vec<String> = setting("sasl.enabled.mechanisms")
        .unwrap_or_else(|| "GSSAPI".into())
        .split(',')
        .map(|m| m.trim().to_uppercase())
        .filter(|m| !m.is_empty())
        .collect();
    if mechanisms.is_empty() {
        return Err("sasl.enabled.mechanisms is empty".into());
    }
    if let Some(unserved) = mechanisms
        .iter()
        .find(|m| !SERVED_MECHANISMS.contains(&m.as_str()))
    {
        return Err(format!(
            "sasl.enabled.mechanisms: {unserved} is not served (Strand serves {})",
            SERVED_MECHANISMS.join(", ")
        ));
    }
    let mut plain_users = None;
    if mechanisms.iter().any(|m| m == plain::MECHANISM) {
        let key = format!("{}.sasl.jaas.config", plain::MECHANISM.to_lowercase());
        let entry = setting(&key).ok_or_else(|| {
            format!(
                "PLAIN needs listener.name.{}.{key} (with user_NAME=\"password\" entries; Strand reads no JAAS file)",
                listener.to_lowercase()
            )
        })?;
        let module = jaas::parse_single(&entry)?;
        plain_users = Some(Arc::new(PlainUsers::from_login_module(&module)?));
    }
    let oauthbearer = if mechanisms.iter().any(|m| m == oauthbearer::MECHANISM) {
        Some(Arc::new(oauthbearer_validator(config, listener)?))
    } else {
        None
    };
    let millis = |key: &str, default: i64| -> Result<i64, String> {
        match setting(key) {
            None => Ok(default),
            Some(value) => value.trim().parse::<i64>().map_err(|_| {
                format!("Invalid value {value} for configuration {key}: Not a number of type LONG")
            }),
        }
    };
    let reauth = millis("connections.max.reauth.ms", 0)?;
    let max_receive_size = millis("sasl.server.max.receive.size", 524_288)?;
    if max_receive_size <= 0 || max_receive_size > i32::MAX as i64 {
        return Err(format!(
            "Invalid value {max_receive_size} for configuration sasl.server.max.receive.size"
        ));
    }
    let delay = millis("connection.failed.authentication.delay.ms", 100)?;
    Ok(SaslSettings {
        mechanisms,
        plain_users,
        oauthbearer,
        reauthentication: (reauth > 0).then(|| Duration::from_millis(reauth as u64)),
        failed_authentication_delay: Duration::from_millis(delay.max(0) as u64),
        max_receive_size: max_receive_size as usize,
    })
}

/// OAUTHBEARER's validator on `listener`: Kafka's unsecured one (its default, with the
/// options of the listener's OAuthBearerLoginModule), or with
/// `oauthbearer.sasl.server.callback.handler.class` naming OAuthBearerValidatorCallbackHandler
/// the signed-JWT one over sasl.oauthbearer.jwks.endpoint.url. Settings are looked up as
/// Kafka does: `listener.name.<l>.oauthbearer.<name>`, `listener.name.<l>.<name>`, `<name>`.
fn oauthbearer_validator(config: &BrokerConfig, listener: &str) -> Result<TokenValidator, String> {
    let setting = |key: &str| {
        config
            .security_setting(listener, &format!("oauthbearer.{key}"))
            .or_else(|| config.security_setting(listener, key))
            .map(|v| v.trim().to_string())
    };
    let entry = config
        .security_setting(listener, "oauthbearer.sasl.jaas.config")
        .ok_or_else(|| {
            format!(
                "OAUTHBEARER needs listener.name.{}.oauthbearer.sasl.jaas.config ({}; Strand reads no JAAS file)",
                listener.to_lowercase(),
                oauthbearer::LOGIN_MODULE
            )
        })?;
    let module = jaas::parse_single(&entry)?;
    let handler = setting("sasl.server.callback.handler.class");
    match handler.as_deref() {
        None | Some("") => TokenValidator::unsecured(&module),
        Some(SECURED_VALIDATOR) => {
            let url = setting("sasl.oauthbearer.jwks.endpoint.url").ok_or(
                "OAuthBearerValidatorCallbackHandler needs sasl.oauthbearer.jwks.endpoint.url",
            )?;
            let skew = match setting("sasl.oauthbearer.clock.skew.seconds") {
                None => 30,
                Some(value) => value.parse::<u64>().map_err(|_| {
                    format!("Invalid value {value} for configuration sasl.oauthbearer.clock.skew.seconds: Not a number of type INT")
                })?,
            };
            Ok(TokenValidator::Jwks {
                keys: JwksFile::open(&url)?,
                principal_claim: setting("sasl.oauthbearer.sub.claim.name")
                    .unwrap_or_else(|| "sub".into()),
                expected_audience: setting("sasl.oauthbearer.expected.audience")
                    .map(|list| {
                        list.split(',')
                            .map(str::trim)
                            .filter(|a| !a.is_empty())
                            .map(str::to_string)
                            .collect()
                    })
                    .unwrap_or_default(),
                expected_issuer: setting("sasl.oauthbearer.expected.issuer"),
                clock_skew: std::time::Duration::from_secs(skew),
            })
        }
        Some(other) => Err(format!(
            "oauthbearer.sasl.server.callback.handler.class {other} is not served (Strand serves Kafka's default unsecured validator and {SECURED_VALIDATOR})"
        )),
    }
}
