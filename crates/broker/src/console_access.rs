//! How the web console, a Kafka client inside the broker's process, reaches its broker
//! and as whom: the HTTP port uses the Kafka listeners' users.
//!
//! - A broker with a PLAINTEXT listener: the console connects there with no login and
//!   acts as User:ANONYMOUS, as any client of that listener could.
//! - A broker whose every listener needs a login: people sign in to the console (HTTP
//!   Basic) with the username and password they use for Kafka, checked by logging in to
//!   the first SASL listener that takes passwords (SCRAM or PLAIN); the console then acts
//!   as them, so their ACLs apply. Its sampler connects as the broker connects to its
//!   peers (the inter-broker listener's login).
//! - Otherwise (client certificates only) there is no console.

use std::net::SocketAddr;

use strand_security::sasl::client::SaslLogin;
use strand_security::SecurityProtocol;

use crate::cluster::inter_broker::InterBrokerSecurity;
use crate::config::{BrokerConfig, ListenerSpec};

/// Mechanisms a person signs in with, the strongest first.
const PASSWORD_MECHANISMS: [&str; 3] = ["SCRAM-SHA-512", "SCRAM-SHA-256", "PLAIN"];

pub enum ConsoleAccess {
    Open(SocketAddr),
    Login(Box<LoginAccess>),
}

pub struct LoginAccess {
    config: BrokerConfig,
    listener: ListenerSpec,
    /// The listener's password mechanisms, in the order tried.
    pub mechanisms: Vec<String>,
}

impl ConsoleAccess {
    /// How the console of a broker configured as `config` (its listeners bound) reaches
    /// it; why there can be no console otherwise.
    pub fn of(config: &BrokerConfig) -> Result<ConsoleAccess, String> {
        let listeners = config.listeners()?;
        if let Some(open) = listeners
            .iter()
            .find(|l| l.protocol == SecurityProtocol::Plaintext)
        {
            return Ok(ConsoleAccess::Open(loopback_if_unspecified(open.listen)));
        }
        for listener in listeners.iter().filter(|l| l.protocol.uses_sasl()) {
            let enabled: Vec<String> = config
                .security_setting(&listener.name, "sasl.enabled.mechanisms")
                .unwrap_or_default()
                .split(',')
                .map(|m| m.trim().to_uppercase())
                .collect();
            let mechanisms: Vec<String> = PASSWORD_MECHANISMS
                .iter()
                .filter(|m| enabled.iter().any(|e| e == *m))
                .map(|m| m.to_string())
                .collect();
            if !mechanisms.is_empty() {
                return Ok(ConsoleAccess::Login(Box::new(LoginAccess {
                    config: config.clone(),
                    listener: listener.clone(),
                    mechanisms,
                })));
            }
        }
        Err("the console needs a PLAINTEXT listener, or a SASL listener with SCRAM or PLAIN to sign people in with".into())
    }
}

impl LoginAccess {
    /// The listener people's logins are checked on.
    pub fn address(&self) -> SocketAddr {
        loopback_if_unspecified(self.listener.listen)
    }

    /// A client of that listener logging in as `username` by `mechanism`.
    pub fn as_user(
        &self,
        mechanism: &str,
        username: &str,
        password: &str,
    ) -> Result<InterBrokerSecurity, String> {
        let login = SaslLogin::with_password(mechanism, username, password)?;
        InterBrokerSecurity::for_listener(&self.config, &self.listener, Some(login))
    }

    /// Where and how the broker's own tasks connect: its inter-broker listener, with its
    /// login.
    pub fn service(&self) -> Result<(SocketAddr, InterBrokerSecurity), String> {
        let inter_broker = self.config.listeners()?.remove(0);
        Ok((
            loopback_if_unspecified(inter_broker.listen),
            InterBrokerSecurity::from_config(&self.config)?,
        ))
    }
}

/// A listener on every address is reached on loopback.
fn loopback_if_unspecified(mut address: SocketAddr) -> SocketAddr {
    if address.ip().is_unspecified() {
        address.set_ip(match address {
            SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
            SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
        });
    }
    address
}
