//! How this broker connects to its peers' inter-broker listener (follower fetches,
//! transaction markers, verification): as Kafka's brokers do, with the protocol of that
//! listener (inter.broker.listener.name in listener.security.protocol.map). Under SSL and
//! SASL_SSL it trusts the listener's trust store and presents its key store's certificate;
//! under SASL it logs in with sasl.mechanism.inter.broker.protocol and the username and
//! password of the listener's JAAS entry for that mechanism. The whole of a connection's
//! opening (TCP, TLS handshake, SASL exchange) has one deadline.
//!
//! With ACLs on, peers are authorized as the principal they authenticate as: it needs
//! CLUSTER_ACTION on the cluster (or to be in super.users), as on Kafka.

use std::time::Duration;

use anyhow::{bail, Context};
use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_protocol::client::Connection;
use strand_security::jaas;
use strand_security::sasl::client::SaslLogin;
use strand_security::tls::{server_name_of, ReloadingClientConfig, TlsSettings};
use tokio::net::TcpStream;

use crate::config::BrokerConfig;

/// Opening a connection to a peer: TCP, TLS and SASL together.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// A SASL session with a lifetime (connections.max.reauth.ms on the peer) is retired
/// this far into it: the next request reconnects instead of being refused by the peer
/// for an expired session (Kafka's clients re-authenticate at 85 to 95% of it).
const SESSION_RETIRE_FRACTION: f64 = 0.85;

/// The security of a listener from a client's side: the inter-broker listener, as this
/// broker connects to its peers, or any listener (`for_listener`: the web console).
pub struct InterBrokerSecurity {
    tls: Option<ReloadingClientConfig>,
    sasl: Option<SaslLogin>,
}

impl std::fmt::Debug for InterBrokerSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InterBrokerSecurity")
            .field("tls", &self.tls.is_some())
            .field("sasl", &self.sasl)
            .finish()
    }
}

impl InterBrokerSecurity {
    /// From the inter-broker listener's settings (the first of `config.listeners()`).
    pub fn from_config(config: &BrokerConfig) -> Result<InterBrokerSecurity, String> {
        let listeners = config.listeners()?;
        let listener = &listeners[0];
        let name = listener.name.as_str();
        let setting = |key: &str| config.security_setting(name, key);
        let sasl = if listener.protocol.uses_sasl() {
            // Kafka's default is GSSAPI (Kerberos), which Strand does not serve.
            let mechanism = setting("sasl.mechanism.inter.broker.protocol")
                .map(|m| m.trim().to_uppercase())
                .unwrap_or_else(|| "GSSAPI".into());
            let key = format!("{}.sasl.jaas.config", mechanism.to_lowercase());
            let entry = setting(&key).ok_or_else(|| {
                format!(
                    "inter-broker listener {name}: sasl.mechanism.inter.broker.protocol {mechanism} needs listener.name.{}.{key} (with the username and password brokers log in to each other with)",
                    name.to_lowercase()
                )
            })?;
            let module = jaas::parse_single(&entry)?;
            Some(
                SaslLogin::from_login_module(&mechanism, &module)
                    .map_err(|e| format!("inter-broker listener {name}: {e}"))?,
            )
        } else {
            None
        };
        InterBrokerSecurity::for_listener(config, listener, sasl)
    }

    /// A client of listener `listener` of a broker configured as `config`, logging in as
    /// `sasl` when it is a SASL listener (the web console, as the person signed in).
    pub fn for_listener(
        config: &BrokerConfig,
        listener: &crate::config::ListenerSpec,
        sasl: Option<SaslLogin>,
    ) -> Result<InterBrokerSecurity, String> {
        let name = listener.name.as_str();
        let setting = |key: &str| config.security_setting(name, key);
        let tls = if listener.protocol.uses_tls() {
            let settings = TlsSettings::from_config(&setting)
                .and_then(ReloadingClientConfig::client)
                .map_err(|e| format!("listener {name}: {e}"))?;
            Some(settings)
        } else {
            None
        };
        Ok(InterBrokerSecurity { tls, sasl })
    }

    /// Opens an authenticated connection to a peer's inter-broker listener at `address`
    /// (host:port), naming itself `client_id`.
    pub async fn connect(
        &self,
        address: &str,
        in_flight_max: usize,
        client_id: &'static str,
    ) -> anyhow::Result<Connection> {
        tokio::time::timeout(
            CONNECT_TIMEOUT,
            self.open(address, in_flight_max, client_id),
        )
        .await
        .with_context(|| format!("connecting to {address} took over {CONNECT_TIMEOUT:?}"))?
    }

    async fn open(
        &self,
        address: &str,
        in_flight_max: usize,
        client_id: &'static str,
    ) -> anyhow::Result<Connection> {
        let Some(tls) = &self.tls else {
            let connection = Connection::connect_as(address, in_flight_max, client_id).await?;
            return self.authenticate(connection).await;
        };
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        let server_name = server_name_of(address).map_err(anyhow::Error::msg)?;
        let stream = tokio_rustls::TlsConnector::from(tls.current())
            .connect(server_name, stream)
            .await
            .with_context(|| format!("TLS handshake with {address}"))?;
        let (reader, writer) = tokio::io::split(stream);
        let connection =
            Connection::over(Box::pin(reader), Box::pin(writer), in_flight_max, client_id);
        self.authenticate(connection).await
    }

    /// Runs the SASL exchange on a fresh connection (nothing to do without SASL).
    async fn authenticate(&self, connection: Connection) -> anyhow::Result<Connection> {
        let Some(login) = &self.sasl else {
            return Ok(connection);
        };
        let handshake: SaslHandshakeResponse = connection
            .call(
                ApiKey::SaslHandshake,
                1,
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_string(login.mechanism.clone())),
            )
            .await?;
        if handshake.error_code != 0 {
            bail!(
                "the peer does not enable SASL mechanism {} (error {}; it enables {:?})",
                login.mechanism,
                handshake.error_code,
                handshake
                    .mechanisms
                    .iter()
                    .map(|m| m.as_str())
                    .collect::<Vec<_>>()
            );
        }
        let mut exchange = login.start();
        let mut token = exchange.first_token();
        loop {
            let answer: SaslAuthenticateResponse = connection
                .call(
                    ApiKey::SaslAuthenticate,
                    2,
                    &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                )
                .await?;
            if answer.error_code != 0 {
                bail!(
                    "the peer refused the {} login as {}: {}",
                    login.mechanism,
                    login.username(),
                    answer.error_message.as_deref().unwrap_or("no message")
                );
            }
            match exchange
                .next_token(&answer.auth_bytes)
                .map_err(|e| anyhow::anyhow!("{} login: {e}", login.mechanism))?
            {
                Some(next) => token = next,
                None => {
                    if answer.session_lifetime_ms > 0 {
                        let lifetime = Duration::from_millis(answer.session_lifetime_ms as u64);
                        connection.retire_after(lifetime.mul_f64(SESSION_RETIRE_FRACTION));
                    }
                    return Ok(connection);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sasl_inter_broker_listener_needs_a_mechanism_strand_logs_in_with() {
        let config = |pairs: &[(&str, &str)]| BrokerConfig {
            listener_name: "INTERNAL".into(),
            listener_security_protocol_map: Some("INTERNAL:SASL_PLAINTEXT".into()),
            security: pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            ..BrokerConfig::default()
        };
        let error = InterBrokerSecurity::from_config(&config(&[])).unwrap_err();
        assert!(error.contains("GSSAPI"), "{error}");
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="secret" user_broker="secret";"#;
        let security = InterBrokerSecurity::from_config(&config(&[
            ("sasl.mechanism.inter.broker.protocol", "PLAIN"),
            ("listener.name.internal.plain.sasl.jaas.config", jaas),
        ]))
        .unwrap();
        assert_eq!(security.sasl.unwrap().username(), "broker");
        assert!(security.tls.is_none());
    }
}
