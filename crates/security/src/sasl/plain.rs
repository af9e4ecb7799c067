//! SASL/PLAIN (RFC 4616) as Kafka's PlainSaslServer checks it: one token
//! `authzid NUL user NUL password`, checked against the `user_NAME="password"` entries of
//! the listener's PlainLoginModule, with Kafka's failure messages.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{constant_time_eq, SaslExchange, SaslFailure, SaslStep};
use crate::jaas::LoginModule;

pub const MECHANISM: &str = "PLAIN";
pub const LOGIN_MODULE: &str = "org.apache.kafka.common.security.plain.PlainLoginModule";

/// The users PLAIN accepts on one listener.
#[derive(Clone, Default)]
pub struct PlainUsers {
    passwords: BTreeMap<String, String>,
}

impl std::fmt::Debug for PlainUsers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the passwords.
        f.debug_struct("PlainUsers")
            .field("users", &self.passwords.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl PlainUsers {
    /// From a PlainLoginModule entry: every `user_NAME` option is a user.
    pub fn from_login_module(module: &LoginModule) -> Result<PlainUsers, String> {
        if module.class_name != LOGIN_MODULE {
            return Err(format!(
                "the PLAIN mechanism needs {LOGIN_MODULE}, not {}",
                module.class_name
            ));
        }
        let passwords = module
            .options
            .iter()
            .filter_map(|(key, value)| {
                Some((key.strip_prefix("user_")?.to_string(), value.clone()))
            })
            .collect();
        Ok(PlainUsers { passwords })
    }

    pub fn from_pairs<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> PlainUsers {
        PlainUsers {
            passwords: pairs
                .into_iter()
                .map(|(u, p)| (u.to_string(), p.to_string()))
                .collect(),
        }
    }

    fn verify(&self, user: &str, password: &str) -> bool {
        // Compared even for an unknown user, so timing does not tell which users exist.
        let expected = self.passwords.get(user);
        let matches = constant_time_eq(
            expected.map_or(b"\0unknown".as_slice(), |p| p.as_bytes()),
            password.as_bytes(),
        );
        matches && expected.is_some()
    }
}

/// One PLAIN exchange.
pub struct PlainExchange {
    users: Arc<PlainUsers>,
}

impl PlainExchange {
    pub fn new(users: Arc<PlainUsers>) -> PlainExchange {
        PlainExchange { users }
    }
}

impl SaslExchange for PlainExchange {
    fn evaluate(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure> {
        let text = String::from_utf8_lossy(token);
        let parts: Vec<&str> = text.split('\0').collect();
        if parts.len() != 3 {
            return Err(SaslFailure::new(format!(
                "Invalid SASL/PLAIN response: expected 3 tokens, got {}",
                parts.len()
            )));
        }
        let (authorization_id, user, password) = (parts[0], parts[1], parts[2]);
        if user.is_empty() {
            return Err(SaslFailure::new(
                "Authentication failed: username not specified",
            ));
        }
        if password.is_empty() {
            return Err(SaslFailure::new(
                "Authentication failed: password not specified",
            ));
        }
        if !self.users.verify(user, password) {
            return Err(SaslFailure::new(
                "Authentication failed: Invalid username or password",
            ));
        }
        if !authorization_id.is_empty() && authorization_id != user {
            return Err(SaslFailure::new(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        Ok(SaslStep::Complete {
            user: user.to_string(),
            final_message: Vec::new(),
            expires: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::jaas;

    fn exchange() -> PlainExchange {
        let module = jaas::parse_single(&format!(
            r#"{LOGIN_MODULE} required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#
        ))
        .unwrap();
        PlainExchange::new(Arc::new(PlainUsers::from_login_module(&module).unwrap()))
    }

    fn complete(user: &str) -> Result<SaslStep, SaslFailure> {
        Ok(SaslStep::Complete {
            user: user.into(),
            final_message: vec![],
            expires: None,
        })
    }

    #[test]
    fn accepts_known_users_with_their_password() {
        assert_eq!(
            exchange().evaluate(b"\0alice\0alice-secret"),
            complete("alice")
        );
        assert_eq!(
            exchange().evaluate(b"admin\0admin\0admin-secret"),
            complete("admin")
        );
    }

    #[test]
    fn refuses_with_kafkas_messages() {
        let failure = |token: &[u8]| exchange().evaluate(token).unwrap_err().message;
        assert_eq!(
            failure(b"\0alice\0wrong"),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            failure(b"\0mallory\0alice-secret"),
            "Authentication failed: Invalid username or password"
        );
        assert_eq!(
            failure(b"\0\0x"),
            "Authentication failed: username not specified"
        );
        assert_eq!(
            failure(b"\0alice\0"),
            "Authentication failed: password not specified"
        );
        assert_eq!(
            failure(b"alice"),
            "Invalid SASL/PLAIN response: expected 3 tokens, got 1"
        );
        assert_eq!(
            failure(b"admin\0alice\0alice-secret"),
            "Authentication failed: Client requested an authorization id that is different from username"
        );
    }

    #[test]
    fn the_username_option_is_not_a_user() {
        // username/password are the broker's own client credentials, not an entry.
        let module = jaas::parse_single(&format!(
            r#"{LOGIN_MODULE} required username="admin" password="admin-secret";"#
        ))
        .unwrap();
        let mut plain =
            PlainExchange::new(Arc::new(PlainUsers::from_login_module(&module).unwrap()));
        assert!(plain.evaluate(b"\0admin\0admin-secret").is_err());
    }
}
