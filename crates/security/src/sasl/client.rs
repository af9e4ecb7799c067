//! SASL on the client's side, for the connections a broker opens to its peers (follower
//! fetches, transaction markers, verification): the mechanism Kafka's
//! `sasl.mechanism.inter.broker.protocol` names, logging in with the `username` and
//! `password` (or, for OAUTHBEARER, `unsecuredLoginStringClaim_sub`) of the inter-broker
//! listener's JAAS entry for that mechanism, as Kafka's brokers log in to each other.
//!
//! A plain state machine: [`SaslClient::first_token`] is the first SaslAuthenticate's bytes;
//! each server answer goes to [`SaslClient::next_token`], which gives the next bytes to send
//! or `None` once the exchange is complete (for SCRAM, after the server's signature has
//! been checked, so a peer that does not know the credential is not trusted either).

use std::time::{SystemTime, UNIX_EPOCH};

use base64::engine::general_purpose::{STANDARD as BASE64, URL_SAFE_NO_PAD as BASE64_URL};
use base64::Engine;

use super::scram::{server_nonce as random_nonce, ScramMechanism};
use super::{oauthbearer, plain};
use crate::jaas::LoginModule;

/// Lifetime of an unsecured OAUTHBEARER token, as Kafka's unsecuredLoginLifetimeSeconds
/// defaults to.
const UNSECURED_TOKEN_LIFETIME_SECONDS: u64 = 3600;

/// One client-side exchange.
pub enum SaslClient {
    Plain {
        username: String,
        password: String,
        sent: bool,
    },
    Scram(ScramClient),
    /// Kafka's unsecured login (OAuthBearerUnsecuredLoginCallbackHandler): an `alg` none
    /// token naming the principal.
    OAuthBearerUnsecured {
        principal: String,
        sent: bool,
    },
}

/// How a broker logs in to its peers: a mechanism and the credentials its JAAS entry
/// gives. Each connection starts a fresh [`SaslClient`] from it.
#[derive(Clone)]
pub struct SaslLogin {
    pub mechanism: String,
    username: String,
    password: String,
}

impl std::fmt::Debug for SaslLogin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SaslLogin")
            .field("mechanism", &self.mechanism)
            .field("username", &self.username)
            .finish_non_exhaustive()
    }
}

impl SaslLogin {
    /// From the JAAS entry of `mechanism` on the inter-broker listener.
    pub fn from_login_module(mechanism: &str, module: &LoginModule) -> Result<SaslLogin, String> {
        let option = |name: &str| module.options.get(name).cloned();
        let (username, password) = if mechanism == oauthbearer::MECHANISM {
            let principal = option("unsecuredLoginStringClaim_sub").ok_or(
                "inter-broker OAUTHBEARER logs in with Kafka's unsecured tokens: its JAAS entry needs unsecuredLoginStringClaim_sub",
            )?;
            (principal, String::new())
        } else if mechanism == plain::MECHANISM || ScramMechanism::from_name(mechanism).is_some() {
            match (option("username"), option("password")) {
                (Some(username), Some(password)) => (username, password),
                _ => {
                    return Err(format!(
                        "the {mechanism} JAAS entry of the inter-broker listener needs username and password (what this broker logs in to its peers with)"
                    ))
                }
            }
        } else {
            return Err(format!(
                "sasl.mechanism.inter.broker.protocol {mechanism} is not served (Strand's brokers log in to each other with PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 or unsecured OAUTHBEARER)"
            ));
        };
        Ok(SaslLogin {
            mechanism: mechanism.to_string(),
            username,
            password,
        })
    }

    /// A user's login with a password, by PLAIN or a SCRAM mechanism (a person signing in
    /// to the web console with the password they use for Kafka).
    pub fn with_password(
        mechanism: &str,
        username: &str,
        password: &str,
    ) -> Result<SaslLogin, String> {
        if mechanism != plain::MECHANISM && ScramMechanism::from_name(mechanism).is_none() {
            return Err(format!("{mechanism} does not log in with a password"));
        }
        Ok(SaslLogin {
            mechanism: mechanism.to_string(),
            username: username.to_string(),
            password: password.to_string(),
        })
    }

    /// The principal name this login authenticates as.
    pub fn username(&self) -> &str {
        &self.username
    }

    /// A new exchange.
    pub fn start(&self) -> SaslClient {
        match ScramMechanism::from_name(&self.mechanism) {
            Some(mechanism) => {
                SaslClient::Scram(ScramClient::new(mechanism, &self.username, &self.password))
            }
            None if self.mechanism == oauthbearer::MECHANISM => SaslClient::OAuthBearerUnsecured {
                principal: self.username.clone(),
                sent: false,
            },
            None => SaslClient::Plain {
                username: self.username.clone(),
                password: self.password.clone(),
                sent: false,
            },
        }
    }
}

impl SaslClient {
    /// The bytes of the first SaslAuthenticate.
    pub fn first_token(&mut self) -> Vec<u8> {
        match self {
            SaslClient::Plain {
                username,
                password,
                sent,
            } => {
                *sent = true;
                format!("\0{username}\0{password}").into_bytes()
            }
            SaslClient::Scram(scram) => scram.client_first(),
            SaslClient::OAuthBearerUnsecured { principal, sent } => {
                *sent = true;
                let token = unsecured_token(principal, SystemTime::now());
                format!("n,,\x01auth=Bearer {token}\x01\x01").into_bytes()
            }
        }
    }

    /// The server answered `challenge`: the next bytes to send, or `None` when the
    /// exchange is complete.
    pub fn next_token(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        match self {
            SaslClient::Plain { sent, .. } | SaslClient::OAuthBearerUnsecured { sent, .. } => {
                if !*sent {
                    return Err("the exchange has not started".into());
                }
                if !challenge.is_empty() {
                    // OAUTHBEARER's error challenge (`{"status":...}`) ends the exchange.
                    return Err(format!(
                        "the server refused the login: {}",
                        String::from_utf8_lossy(challenge)
                    ));
                }
                Ok(None)
            }
            SaslClient::Scram(scram) => scram.next(challenge),
        }
    }
}

/// `header.claims.` with `alg` none: what Kafka's unsecured login module makes.
fn unsecured_token(principal: &str, now: SystemTime) -> String {
    let issued = now.duration_since(UNIX_EPOCH).unwrap_or_default();
    let header = serde_json::json!({"alg": "none"});
    let claims = serde_json::json!({
        "sub": principal,
        "iat": issued.as_secs_f64(),
        "exp": issued.as_secs() + UNSECURED_TOKEN_LIFETIME_SECONDS,
    });
    format!(
        "{}.{}.",
        BASE64_URL.encode(header.to_string()),
        BASE64_URL.encode(claims.to_string())
    )
}

enum ScramState {
    Start,
    /// Sent client-first; waiting for server-first.
    SentFirst {
        nonce: String,
        bare: String,
    },
    /// Sent client-final; waiting for the server's signature over `auth_message`.
    SentFinal {
        server_key: Vec<u8>,
        auth_message: String,
    },
    Done,
}

/// The client side of SCRAM (RFC 5802), as Kafka's ScramSaslClient runs it.
pub struct ScramClient {
    mechanism: ScramMechanism,
    username: String,
    password: String,
    state: ScramState,
}

impl ScramClient {
    pub fn new(mechanism: ScramMechanism, username: &str, password: &str) -> ScramClient {
        ScramClient {
            mechanism,
            username: username.to_string(),
            password: password.to_string(),
            state: ScramState::Start,
        }
    }

    fn client_first(&mut self) -> Vec<u8> {
        let nonce = random_nonce();
        let name = self.username.replace('=', "=3D").replace(',', "=2C");
        let bare = format!("n={name},r={nonce}");
        let message = format!("n,,{bare}");
        self.state = ScramState::SentFirst { nonce, bare };
        message.into_bytes()
    }

    fn next(&mut self, challenge: &[u8]) -> Result<Option<Vec<u8>>, String> {
        let text = std::str::from_utf8(challenge)
            .map_err(|_| "the server's SCRAM message is not UTF-8".to_string())?;
        match std::mem::replace(&mut self.state, ScramState::Done) {
            ScramState::SentFirst { nonce, bare } => {
                self.client_final(&nonce, &bare, text).map(Some)
            }
            ScramState::SentFinal {
                server_key,
                auth_message,
            } => {
                if let Some(error) = text.strip_prefix("e=") {
                    return Err(format!("the server refused the SCRAM proof: {error}"));
                }
                let signature = text
                    .strip_prefix("v=")
                    .and_then(|v| BASE64.decode(v).ok())
                    .ok_or("the server's final SCRAM message has no signature")?;
                let expected = self.mechanism.hmac(&server_key, auth_message.as_bytes());
                if !super::constant_time_eq(&signature, &expected) {
                    return Err(
                        "the server's SCRAM signature is wrong: it does not know this credential"
                            .into(),
                    );
                }
                Ok(None)
            }
            ScramState::Start | ScramState::Done => Err("SCRAM message out of turn".to_string()),
        }
    }

    /// Answers server-first (`r=nonce,s=salt,i=iterations`) with the proof.
    fn client_final(
        &mut self,
        nonce: &str,
        bare: &str,
        server_first: &str,
    ) -> Result<Vec<u8>, String> {
        let mut combined = None;
        let mut salt = None;
        let mut iterations = None;
        for field in server_first.split(',') {
            match field.split_at_checked(2) {
                Some(("r=", value)) => combined = Some(value),
                Some(("s=", value)) => salt = BASE64.decode(value).ok(),
                Some(("i=", value)) => iterations = value.parse::<u32>().ok(),
                _ => {}
            }
        }
        let (Some(combined), Some(salt), Some(iterations)) = (combined, salt, iterations) else {
            return Err(format!(
                "malformed SCRAM server-first message {server_first:?}"
            ));
        };
        if !combined.starts_with(nonce) || combined.len() == nonce.len() {
            return Err("the server's SCRAM nonce does not extend this client's".into());
        }
        // Below Kafka's minimum is weak; above its maximum (what no Kafka server asks for)
        // a hostile peer would keep this thread hashing.
        let allowed = ScramMechanism::MIN_ITERATIONS as u32..=ScramMechanism::MAX_ITERATIONS as u32;
        if !allowed.contains(&iterations) {
            return Err(format!(
                "the server asks for {iterations} SCRAM iterations, outside {}-{}",
                allowed.start(),
                allowed.end()
            ));
        }
        let mechanism = self.mechanism;
        let salted = mechanism.salted_password(&self.password, &salt, iterations);
        let client_key = mechanism.hmac(&salted, b"Client Key");
        let stored_key = mechanism.hash(&client_key);
        let without_proof = format!("c=biws,r={combined}");
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let client_signature = mechanism.hmac(&stored_key, auth_message.as_bytes());
        let proof: Vec<u8> = client_key
            .iter()
            .zip(&client_signature)
            .map(|(k, s)| k ^ s)
            .collect();
        self.state = ScramState::SentFinal {
            server_key: mechanism.hmac(&salted, b"Server Key"),
            auth_message,
        };
        Ok(format!("{without_proof},p={}", BASE64.encode(proof)).into_bytes())
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::sync::Arc;

    use super::*;
    use crate::sasl::oauthbearer::{OAuthBearerExchange, TokenValidator};
    use crate::sasl::plain::{PlainExchange, PlainUsers};
    use crate::sasl::scram::{ScramCredential, ScramCredentials, ScramExchange};
    use crate::sasl::{SaslExchange, SaslStep};

    struct Stored(HashMap<String, ScramCredential>);

    impl ScramCredentials for Stored {
        fn credential(&self, user: &str, _: ScramMechanism) -> Option<ScramCredential> {
            self.0.get(user).cloned()
        }
    }

    /// Runs a client against a server exchange: the user the server authenticated.
    fn run(mut client: SaslClient, server: &mut dyn SaslExchange) -> Result<String, String> {
        let mut token = client.first_token();
        loop {
            match server.evaluate(&token).map_err(|f| f.message)? {
                SaslStep::Challenge(challenge) => {
                    token = client
                        .next_token(&challenge)?
                        .ok_or("the client stopped before the server")?;
                }
                SaslStep::Complete {
                    user,
                    final_message,
                    ..
                } => {
                    if client.next_token(&final_message)?.is_some() {
                        return Err("the client wants to go on".into());
                    }
                    return Ok(user);
                }
            }
        }
    }

    fn login(mechanism: &str, jaas: &str) -> SaslLogin {
        SaslLogin::from_login_module(mechanism, &crate::jaas::parse_single(jaas).unwrap()).unwrap()
    }

    fn scram_server(mechanism: ScramMechanism, password: &str) -> ScramExchange {
        let credential =
            ScramCredential::from_password(mechanism, password, b"salt".to_vec(), 4096);
        let stored = Stored(HashMap::from([("broker,1=".to_string(), credential)]));
        ScramExchange::new(mechanism, Arc::new(stored), false)
    }

    #[test]
    fn scram_logs_in_to_the_server_side_and_checks_its_signature() {
        for mechanism in ScramMechanism::ALL {
            let jaas = r#"org.apache.kafka.common.security.scram.ScramLoginModule required username="broker,1=" password="secret";"#;
            let mut server = scram_server(mechanism, "secret");
            assert_eq!(
                run(login(mechanism.name(), jaas).start(), &mut server).as_deref(),
                Ok("broker,1=")
            );
            let mut wrong = scram_server(mechanism, "other");
            let error = run(login(mechanism.name(), jaas).start(), &mut wrong).unwrap_err();
            assert!(error.contains("invalid credentials"), "{error}");
        }
    }

    #[test]
    fn scram_refuses_a_server_that_does_not_know_the_credential() {
        let mut client = ScramClient::new(ScramMechanism::Sha256, "broker", "secret");
        let first = String::from_utf8(client.client_first()).unwrap();
        let nonce = first.split("r=").nth(1).unwrap();
        let server_first = format!("r={nonce}xyz,s={},i=4096", BASE64.encode(b"salt"));
        assert!(client.next(server_first.as_bytes()).unwrap().is_some());
        let forged = format!("v={}", BASE64.encode([0u8; 32]));
        let error = client.next(forged.as_bytes()).unwrap_err();
        assert!(error.contains("signature is wrong"), "{error}");
    }

    #[test]
    fn scram_refuses_iterations_out_of_kafkas_bounds_and_a_nonce_it_did_not_start() {
        let mut client = ScramClient::new(ScramMechanism::Sha256, "broker", "secret");
        let first = String::from_utf8(client.client_first()).unwrap();
        let nonce = first.split("r=").nth(1).unwrap().to_string();
        let few = format!("r={nonce}x,s={},i=1024", BASE64.encode(b"salt"));
        assert!(client.next(few.as_bytes()).unwrap_err().contains("1024"));
        let mut client = ScramClient::new(ScramMechanism::Sha256, "broker", "secret");
        let first = String::from_utf8(client.client_first()).unwrap();
        let nonce = first.split("r=").nth(1).unwrap().to_string();
        let many = format!("r={nonce}x,s={},i=4294967295", BASE64.encode(b"salt"));
        assert!(client
            .next(many.as_bytes())
            .unwrap_err()
            .contains("4294967295"));
        let mut client = ScramClient::new(ScramMechanism::Sha256, "broker", "secret");
        client.client_first();
        let other = format!("r=someone-else,s={},i=4096", BASE64.encode(b"salt"));
        assert!(client.next(other.as_bytes()).unwrap_err().contains("nonce"));
    }

    #[test]
    fn plain_logs_in_and_fails_with_the_servers_words() {
        let jaas = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="broker" password="broker-secret" user_broker="broker-secret";"#;
        let users = PlainUsers::from_pairs([("broker", "broker-secret")]);
        let mut server = PlainExchange::new(Arc::new(users));
        assert_eq!(
            run(login("PLAIN", jaas).start(), &mut server).as_deref(),
            Ok("broker")
        );
        let mut strict = PlainExchange::new(Arc::new(PlainUsers::from_pairs([("broker", "x")])));
        let error = run(login("PLAIN", jaas).start(), &mut strict).unwrap_err();
        assert!(error.contains("Invalid username or password"), "{error}");
    }

    #[test]
    fn unsecured_oauthbearer_logs_in_to_the_unsecured_validator() {
        let jaas = r#"org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required unsecuredLoginStringClaim_sub="broker";"#;
        let module = crate::jaas::parse_single(jaas).unwrap();
        let validator = TokenValidator::unsecured(&module).unwrap();
        let mut server = OAuthBearerExchange::new(Arc::new(validator));
        assert_eq!(
            run(login("OAUTHBEARER", jaas).start(), &mut server).as_deref(),
            Ok("broker")
        );
    }

    #[test]
    fn a_login_needs_the_credentials_of_its_mechanism() {
        let module = crate::jaas::parse_single(
            r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_admin="x";"#,
        )
        .unwrap();
        let error = SaslLogin::from_login_module("PLAIN", &module).unwrap_err();
        assert!(error.contains("username and password"), "{error}");
        let error = SaslLogin::from_login_module("GSSAPI", &module).unwrap_err();
        assert!(error.contains("GSSAPI is not served"), "{error}");
        let error = SaslLogin::from_login_module("OAUTHBEARER", &module).unwrap_err();
        assert!(error.contains("unsecuredLoginStringClaim_sub"), "{error}");
    }
}
