//! SCRAM-SHA-256 and SCRAM-SHA-512 (RFC 5802, RFC 7677) as Kafka's ScramSaslServer runs
//! them: the client's first message names the user and its nonce; the server answers
//! with its nonce, the user's salt and iterations; the client proves it knows the salted
//! password; the server checks the proof against the stored key and signs the exchange
//! with the server key. Only the stored and server keys are kept, never the password.
//!
//! Failures carry the message Kafka sends: a failed proof or an unknown user is
//! "Authentication failed during authentication due to invalid credentials with SASL
//! mechanism SCRAM-SHA-256" (Kafka does not tell which, so a client cannot probe for
//! users); malformed messages say what was wrong.

use std::sync::Arc;

use base64::engine::general_purpose::STANDARD as BASE64;
use base64::Engine;
use ring::{digest, hmac, pbkdf2, rand::SecureRandom};

use super::{constant_time_eq, SaslExchange, SaslFailure, SaslStep};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ScramMechanism {
    Sha256,
    Sha512,
}

impl ScramMechanism {
    pub const ALL: [ScramMechanism; 2] = [ScramMechanism::Sha256, ScramMechanism::Sha512];
    /// Kafka's bounds on a credential's iterations (ScramMechanism.minIterations/max).
    pub const MIN_ITERATIONS: i32 = 4096;
    pub const MAX_ITERATIONS: i32 = 16384;

    pub fn name(self) -> &'static str {
        match self {
            ScramMechanism::Sha256 => "SCRAM-SHA-256",
            ScramMechanism::Sha512 => "SCRAM-SHA-512",
        }
    }

    pub fn from_name(name: &str) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.name() == name)
    }

    /// The wire code of AlterUserScramCredentials / DescribeUserScramCredentials (0 is
    /// UNKNOWN).
    pub fn code(self) -> i8 {
        match self {
            ScramMechanism::Sha256 => 1,
            ScramMechanism::Sha512 => 2,
        }
    }

    pub fn from_code(code: i8) -> Option<ScramMechanism> {
        ScramMechanism::ALL.into_iter().find(|m| m.code() == code)
    }

    fn hmac_algorithm(self) -> hmac::Algorithm {
        match self {
            ScramMechanism::Sha256 => hmac::HMAC_SHA256,
            ScramMechanism::Sha512 => hmac::HMAC_SHA512,
        }
    }

    fn digest_algorithm(self) -> &'static digest::Algorithm {
        match self {
            ScramMechanism::Sha256 => &digest::SHA256,
            ScramMechanism::Sha512 => &digest::SHA512,
        }
    }

    fn pbkdf2_algorithm(self) -> pbkdf2::Algorithm {
        match self {
            ScramMechanism::Sha256 => pbkdf2::PBKDF2_HMAC_SHA256,
            ScramMechanism::Sha512 => pbkdf2::PBKDF2_HMAC_SHA512,
        }
    }

    pub(crate) fn hmac(self, key: &[u8], data: &[u8]) -> Vec<u8> {
        let key = hmac::Key::new(self.hmac_algorithm(), key);
        hmac::sign(&key, data).as_ref().to_vec()
    }

    pub(crate) fn hash(self, data: &[u8]) -> Vec<u8> {
        digest::digest(self.digest_algorithm(), data)
            .as_ref()
            .to_vec()
    }

    /// Hi(password, salt, iterations) of RFC 5802: the salted password.
    pub fn salted_password(self, password: &str, salt: &[u8], iterations: u32) -> Vec<u8> {
        let mut out = vec![0u8; self.digest_algorithm().output_len()];
        let iterations = std::num::NonZeroU32::new(iterations.max(1)).expect("at least 1");
        pbkdf2::derive(
            self.pbkdf2_algorithm(),
            iterations,
            salt,
            password.as_bytes(),
            &mut out,
        );
        out
    }
}

impl std::fmt::Display for ScramMechanism {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What the broker keeps of a user's password for one mechanism.
#[derive(Clone, PartialEq, Eq)]
pub struct ScramCredential {
    pub salt: Vec<u8>,
    pub stored_key: Vec<u8>,
    pub server_key: Vec<u8>,
    pub iterations: i32,
}

impl std::fmt::Debug for ScramCredential {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The keys are as good as the password for this broker: never logged.
        f.debug_struct("ScramCredential")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl ScramCredential {
    /// From the salted password AlterUserScramCredentials carries (the client salts it,
    /// so the password itself never reaches the broker).
    pub fn from_salted_password(
        mechanism: ScramMechanism,
        salt: Vec<u8>,
        salted_password: &[u8],
        iterations: i32,
    ) -> ScramCredential {
        let client_key = mechanism.hmac(salted_password, b"Client Key");
        ScramCredential {
            stored_key: mechanism.hash(&client_key),
            server_key: mechanism.hmac(salted_password, b"Server Key"),
            salt,
            iterations,
        }
    }

    pub fn from_password(
        mechanism: ScramMechanism,
        password: &str,
        salt: Vec<u8>,
        iterations: i32,
    ) -> ScramCredential {
        let salted = mechanism.salted_password(password, &salt, iterations.max(1) as u32);
        ScramCredential::from_salted_password(mechanism, salt, &salted, iterations)
    }
}

/// Where an exchange finds a user's credential.
pub trait ScramCredentials: Send + Sync {
    fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential>;
}

enum State {
    ClientFirst,
    ClientFinal {
        user: String,
        credential: ScramCredential,
        client_first_bare: String,
        server_first: String,
        nonce: String,
    },
    Done,
}

/// One SCRAM exchange.
pub struct ScramExchange {
    mechanism: ScramMechanism,
    credentials: Arc<dyn ScramCredentials>,
    state: State,
    /// "authentication" or "re-authentication", as Kafka's failure message says.
    phase: &'static str,
}

impl ScramExchange {
    pub fn new(
        mechanism: ScramMechanism,
        credentials: Arc<dyn ScramCredentials>,
        reauthentication: bool,
    ) -> ScramExchange {
        ScramExchange {
            mechanism,
            credentials,
            state: State::ClientFirst,
            phase: if reauthentication {
                "re-authentication"
            } else {
                "authentication"
            },
        }
    }

    /// Kafka's answer to a wrong proof or an unknown user: the same for both.
    fn invalid_credentials(&self) -> SaslFailure {
        SaslFailure::new(format!(
            "Authentication failed during {} due to invalid credentials with SASL mechanism {}",
            self.phase, self.mechanism
        ))
    }

    fn client_first(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure> {
        let text = std::str::from_utf8(token).map_err(|_| self.invalid_credentials())?;
        let first = ClientFirst::parse(text).ok_or_else(|| self.invalid_credentials())?;
        if first.token_authentication {
            // Delegation tokens are not served (yet): as an unknown user.
            return Err(self.invalid_credentials());
        }
        let user = first.user;
        let Some(credential) = self.credentials.credential(&user, self.mechanism) else {
            return Err(self.invalid_credentials());
        };
        if !first.authorization_id.is_empty() && first.authorization_id != user {
            return Err(SaslFailure::new(
                "Authentication failed: Client requested an authorization id that is different from username",
            ));
        }
        if credential.iterations < ScramMechanism::MIN_ITERATIONS {
            return Err(self.invalid_credentials());
        }
        let nonce = format!("{}{}", first.nonce, server_nonce());
        let server_first = format!(
            "r={nonce},s={},i={}",
            BASE64.encode(&credential.salt),
            credential.iterations
        );
        self.state = State::ClientFinal {
            user,
            credential,
            client_first_bare: first.bare.to_string(),
            server_first: server_first.clone(),
            nonce,
        };
        Ok(SaslStep::Challenge(server_first.into_bytes()))
    }

    fn client_final(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure> {
        let State::ClientFinal {
            user,
            credential,
            client_first_bare,
            server_first,
            nonce,
        } = std::mem::replace(&mut self.state, State::Done)
        else {
            return Err(SaslFailure::new(
                "Authentication exchange has not completed",
            ));
        };
        let text = std::str::from_utf8(token).map_err(|_| self.invalid_credentials())?;
        let (without_proof, proof) = text
            .rsplit_once(",p=")
            .ok_or_else(|| self.invalid_credentials())?;
        let proof = BASE64
            .decode(proof)
            .map_err(|_| self.invalid_credentials())?;
        let client_nonce = without_proof
            .split(',')
            .find_map(|field| field.strip_prefix("r="))
            .ok_or_else(|| self.invalid_credentials())?;
        if client_nonce != nonce {
            return Err(self.invalid_credentials());
        }
        let auth_message = format!("{client_first_bare},{server_first},{without_proof}");
        let mechanism = self.mechanism;
        let client_signature = mechanism.hmac(&credential.stored_key, auth_message.as_bytes());
        if proof.len() != client_signature.len() {
            return Err(self.invalid_credentials());
        }
        let client_key: Vec<u8> = proof
            .iter()
            .zip(&client_signature)
            .map(|(p, s)| p ^ s)
            .collect();
        if !constant_time_eq(&mechanism.hash(&client_key), &credential.stored_key) {
            return Err(self.invalid_credentials());
        }
        let server_signature = mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        Ok(SaslStep::Complete {
            user,
            final_message: format!("v={}", BASE64.encode(server_signature)).into_bytes(),
            expires: None,
        })
    }
}

impl SaslExchange for ScramExchange {
    fn evaluate(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure> {
        match self.state {
            State::ClientFirst => self.client_first(token),
            State::ClientFinal { .. } => self.client_final(token),
            State::Done => Err(SaslFailure::new(
                "Authentication exchange has not completed",
            )),
        }
    }
}

/// A nonce of 32 random bytes, printable (base64 has no comma).
pub(crate) fn server_nonce() -> String {
    let mut bytes = [0u8; 24];
    ring::rand::SystemRandom::new()
        .fill(&mut bytes)
        .expect("the system's random source works");
    BASE64.encode(bytes)
}

/// The client's first message: `gs2-header client-first-bare` where the header is
/// `n,[a=authzid],` (no channel binding: Kafka offers none) and the bare part
/// `n=saslname,r=nonce[,extensions]`.
struct ClientFirst<'a> {
    authorization_id: String,
    user: String,
    nonce: &'a str,
    bare: &'a str,
    /// `tokenauth=true`: a delegation token in place of a user.
    token_authentication: bool,
}

impl<'a> ClientFirst<'a> {
    fn parse(text: &'a str) -> Option<ClientFirst<'a>> {
        let rest = text.strip_prefix("n,")?;
        let (authorization, bare) = rest.split_once(',')?;
        let authorization_id = match authorization {
            "" => String::new(),
            a => unescape(a.strip_prefix("a=")?)?,
        };
        let mut fields = bare.split(',');
        let user = unescape(fields.next()?.strip_prefix("n=")?)?;
        let nonce = fields.next()?.strip_prefix("r=")?;
        if user.is_empty() || nonce.is_empty() {
            return None;
        }
        let token_authentication = fields.any(|extension| extension == "tokenauth=true");
        Some(ClientFirst {
            authorization_id,
            user,
            nonce,
            bare,
            token_authentication,
        })
    }
}

/// A saslname: `=2C` stands for `,` and `=3D` for `=`; any other `=` is malformed.
fn unescape(name: &str) -> Option<String> {
    let mut out = String::with_capacity(name.len());
    let mut rest = name;
    while let Some(at) = rest.find('=') {
        out.push_str(&rest[..at]);
        let code = rest.get(at + 1..at + 3)?;
        out.push(match code {
            "2C" => ',',
            "3D" => '=',
            _ => return None,
        });
        rest = &rest[at + 3..];
    }
    out.push_str(rest);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    struct Users(BTreeMap<(String, ScramMechanism), ScramCredential>);

    impl ScramCredentials for Users {
        fn credential(&self, user: &str, mechanism: ScramMechanism) -> Option<ScramCredential> {
            self.0.get(&(user.to_string(), mechanism)).cloned()
        }
    }

    fn users(mechanism: ScramMechanism, iterations: i32) -> Arc<Users> {
        let credential = ScramCredential::from_password(
            mechanism,
            "alice-secret",
            b"salty".to_vec(),
            iterations,
        );
        Arc::new(Users(BTreeMap::from([(
            ("alice".to_string(), mechanism),
            credential,
        )])))
    }

    /// An exchange with the client side (`sasl::client`), which checks that the server
    /// extends its nonce and signs the exchange with the server key.
    fn run(
        mechanism: ScramMechanism,
        stored_iterations: i32,
        user: &str,
        password: &str,
    ) -> Result<SaslStep, SaslFailure> {
        use crate::sasl::client::{SaslClient, ScramClient};
        let mut exchange =
            ScramExchange::new(mechanism, users(mechanism, stored_iterations), false);
        let mut client = SaslClient::Scram(ScramClient::new(mechanism, user, password));
        let SaslStep::Challenge(server_first) = exchange.evaluate(&client.first_token())? else {
            panic!("a challenge first");
        };
        let final_message = client
            .next_token(&server_first)
            .expect("the server's first message extends the client's nonce")
            .expect("a final message");
        let step = exchange.evaluate(&final_message)?;
        if let SaslStep::Complete { final_message, .. } = &step {
            assert_eq!(
                client.next_token(final_message),
                Ok(None),
                "the server proves it knows the server key"
            );
        }
        Ok(step)
    }

    #[test]
    fn both_mechanisms_authenticate_the_right_password_only() {
        for mechanism in ScramMechanism::ALL {
            let step = run(mechanism, 4096, "alice", "alice-secret").unwrap();
            assert!(matches!(step, SaslStep::Complete { ref user, .. } if user == "alice"));
            let wrong = run(mechanism, 4096, "alice", "guess").unwrap_err();
            let expected = format!(
                "Authentication failed during authentication due to invalid credentials with SASL mechanism {mechanism}"
            );
            assert_eq!(wrong.message, expected);
            // An unknown user fails exactly as a wrong password does.
            assert_eq!(
                run(mechanism, 4096, "bob", "x").unwrap_err().message,
                expected
            );
        }
    }

    #[test]
    fn credentials_below_kafkas_minimum_iterations_do_not_authenticate() {
        assert!(run(ScramMechanism::Sha256, 1000, "alice", "alice-secret").is_err());
    }

    #[test]
    fn malformed_and_out_of_place_messages_fail() {
        let mechanism = ScramMechanism::Sha256;
        for first in [
            "",
            "y,,n=alice,r=x",
            "n,,n=alice",
            "n,,r=x,n=alice",
            "n,,n=al=ice,r=x",
            "p=tls,,n=alice,r=x",
        ] {
            let mut exchange = ScramExchange::new(mechanism, users(mechanism, 4096), false);
            assert!(exchange.evaluate(first.as_bytes()).is_err(), "{first:?}");
        }
        let mut exchange = ScramExchange::new(mechanism, users(mechanism, 4096), false);
        exchange.evaluate(b"n,,n=alice,r=abc").unwrap();
        // A final message that does not carry the combined nonce.
        assert!(exchange.evaluate(b"c=biws,r=abc,p=AAAA").is_err());
        // Nothing after the exchange ended.
        assert!(exchange.evaluate(b"n,,n=alice,r=abc").is_err());
    }

    #[test]
    fn escaped_names_and_authorization_ids() {
        assert_eq!(unescape("a=2Cb=3Dc").as_deref(), Some("a,b=c"));
        assert_eq!(unescape("a=2"), None);
        let mechanism = ScramMechanism::Sha512;
        let mut exchange = ScramExchange::new(mechanism, users(mechanism, 4096), false);
        let refused = exchange.evaluate(b"n,a=bob,n=alice,r=abc").unwrap_err();
        assert_eq!(
            refused.message,
            "Authentication failed: Client requested an authorization id that is different from username"
        );
        let mut exchange = ScramExchange::new(mechanism, users(mechanism, 4096), true);
        let refused = exchange
            .evaluate(b"n,,n=alice,r=abc,tokenauth=true")
            .unwrap_err();
        assert!(
            refused.message.contains("during re-authentication"),
            "{}",
            refused.message
        );
    }

    #[test]
    fn the_credential_from_a_salted_password_is_the_one_from_the_password() {
        let mechanism = ScramMechanism::Sha256;
        let salted = mechanism.salted_password("pw", b"salt", 4096);
        assert_eq!(
            ScramCredential::from_salted_password(mechanism, b"salt".to_vec(), &salted, 4096),
            ScramCredential::from_password(mechanism, "pw", b"salt".to_vec(), 4096)
        );
        // RFC 7677's test vector: SCRAM-SHA-256, user "user", password "pencil".
        let salt = BASE64.decode("W22ZaJ0SNY7soEsUEjb6gQ==").unwrap();
        let credential = ScramCredential::from_password(mechanism, "pencil", salt, 4096);
        let bare = "n=user,r=rOprNGfwEbeRWgbNEkqO";
        let server_first = "r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096";
        let without_proof = "c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0";
        let auth_message = format!("{bare},{server_first},{without_proof}");
        let server_signature = mechanism.hmac(&credential.server_key, auth_message.as_bytes());
        assert_eq!(
            BASE64.encode(server_signature),
            "6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
        );
    }
}
