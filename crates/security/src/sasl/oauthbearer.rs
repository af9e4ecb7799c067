//! SASL/OAUTHBEARER (RFC 7628) as Kafka's OAuthBearerSaslServer runs it: the client's
//! first message `n,[a=authzid],\x01auth=Bearer TOKEN\x01[key=value\x01]*\x01` carries a
//! JWT, checked by one of Kafka's two validators:
//!
//! - the unsecured one (Kafka's default, OAuthBearerUnsecuredValidatorCallbackHandler, for
//!   tests): a JWS with `alg` none, its principal claim (unsecuredValidatorPrincipalClaimName,
//!   `sub`) present, `exp` not past and `iat` not in the future beyond
//!   unsecuredValidatorAllowableClockSkewMs, and unsecuredValidatorRequiredScope within its
//!   scope claim;
//! - the secured one (OAuthBearerValidatorCallbackHandler): a JWT signed by a key of the
//!   JWKS file sasl.oauthbearer.jwks.endpoint.url names (read again when it changes), with
//!   `exp`, the principal claim (sasl.oauthbearer.sub.claim.name), an audience among
//!   sasl.oauthbearer.expected.audience and the issuer sasl.oauthbearer.expected.issuer
//!   when those are set, within sasl.oauthbearer.clock.skew.seconds.
//!
//! A token that fails is answered, as Kafka answers it, with the challenge
//! `{"status":"invalid_token"}`; the client's `\x01` reply then fails the exchange with that
//! text. An authorization id other than the token's principal fails at once. The token's
//! expiry bounds the session when re-authentication is on (KIP-368).

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde_json::Value;

use super::{SaslExchange, SaslFailure, SaslStep};
use crate::jaas::LoginModule;

pub const MECHANISM: &str = "OAUTHBEARER";
pub const LOGIN_MODULE: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule";
/// The broker-side callback handler class that turns on signed-token validation.
pub const SECURED_VALIDATOR: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerValidatorCallbackHandler";

/// What a valid token says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ValidToken {
    pub principal: String,
    /// When it expires.
    pub expires: SystemTime,
}

/// How tokens are checked on one listener.
#[derive(Debug)]
pub enum TokenValidator {
    Unsecured {
        principal_claim: String,
        scope_claim: String,
        required_scope: Vec<String>,
        clock_skew: Duration,
    },
    Jwks {
        keys: JwksFile,
        principal_claim: String,
        expected_audience: Vec<String>,
        expected_issuer: Option<String>,
        clock_skew: Duration,
    },
}

/// A JWKS file, read again when its modification time changes.
#[derive(Debug)]
pub struct JwksFile {
    path: PathBuf,
    loaded: Mutex<(Option<SystemTime>, Arc<jsonwebtoken::jwk::JwkSet>)>,
}

impl JwksFile {
    /// From sasl.oauthbearer.jwks.endpoint.url (a `file:` URL).
    pub fn open(url: &str) -> Result<JwksFile, String> {
        let path = url.strip_prefix("file://").or_else(|| url.strip_prefix("file:")).ok_or_else(|| {
            format!("sasl.oauthbearer.jwks.endpoint.url {url}: Strand reads a JWKS from a file: URL (https is not served yet)")
        })?;
        let file = JwksFile {
            path: PathBuf::from(path),
            loaded: Mutex::new((
                None,
                Arc::new(jsonwebtoken::jwk::JwkSet { keys: Vec::new() }),
            )),
        };
        file.current()?;
        Ok(file)
    }

    fn current(&self) -> Result<Arc<jsonwebtoken::jwk::JwkSet>, String> {
        let modified = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .map_err(|e| format!("cannot read the JWKS {}: {e}", self.path.display()))?;
        let mut loaded = self.loaded.lock().unwrap_or_else(|p| p.into_inner());
        if loaded.0 != Some(modified) {
            let text = std::fs::read(&self.path)
                .map_err(|e| format!("cannot read the JWKS {}: {e}", self.path.display()))?;
            let set: jsonwebtoken::jwk::JwkSet = serde_json::from_slice(&text)
                .map_err(|e| format!("the JWKS {} is not a key set: {e}", self.path.display()))?;
            *loaded = (Some(modified), Arc::new(set));
        }
        Ok(loaded.1.clone())
    }
}

impl TokenValidator {
    /// The unsecured validator with the options of the listener's OAuthBearerLoginModule.
    pub fn unsecured(module: &LoginModule) -> Result<TokenValidator, String> {
        if module.class_name != LOGIN_MODULE {
            return Err(format!(
                "the OAUTHBEARER mechanism needs {LOGIN_MODULE}, not {}",
                module.class_name
            ));
        }
        let option = |name: &str| module.options.get(name).map(|v| v.trim().to_string());
        let skew_ms = match option("unsecuredValidatorAllowableClockSkewMs") {
            None => 0,
            Some(value) => value.parse::<u64>().map_err(|_| {
                format!("unsecuredValidatorAllowableClockSkewMs: not a number: {value}")
            })?,
        };
        Ok(TokenValidator::Unsecured {
            principal_claim: option("unsecuredValidatorPrincipalClaimName")
                .unwrap_or_else(|| "sub".into()),
            scope_claim: option("unsecuredValidatorScopeClaimName")
                .unwrap_or_else(|| "scope".into()),
            required_scope: option("unsecuredValidatorRequiredScope")
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            clock_skew: Duration::from_millis(skew_ms),
        })
    }

    /// Checks `token` at `now`: what it says, or why it is refused (for the log; the
    /// client is told `invalid_token`).
    pub fn validate(&self, token: &str, now: SystemTime) -> Result<ValidToken, String> {
        match self {
            TokenValidator::Unsecured {
                principal_claim,
                scope_claim,
                required_scope,
                clock_skew,
            } => {
                let claims = unsecured_claims(token)?;
                let principal = string_claim(&claims, principal_claim)?;
                let expires = time_claim(&claims, "exp")?.ok_or("the token has no exp claim")?;
                if expires + *clock_skew <= now {
                    return Err("the token has expired".into());
                }
                if let Some(issued) = time_claim(&claims, "iat")? {
                    if issued > now + *clock_skew {
                        return Err("the token was issued in the future".into());
                    }
                }
                let scope = scopes(&claims, scope_claim);
                if let Some(missing) = required_scope.iter().find(|s| !scope.contains(s)) {
                    return Err(format!("the token's scope lacks {missing}"));
                }
                Ok(ValidToken { principal, expires })
            }
            TokenValidator::Jwks {
                keys,
                principal_claim,
                expected_audience,
                expected_issuer,
                clock_skew,
            } => {
                let header =
                    jsonwebtoken::decode_header(token).map_err(|e| format!("not a JWT: {e}"))?;
                let keys = keys.current()?;
                let key = match &header.kid {
                    Some(kid) => keys
                        .find(kid)
                        .ok_or_else(|| format!("no key {kid} in the JWKS"))?,
                    None if keys.keys.len() == 1 => &keys.keys[0],
                    None => {
                        return Err("the token names no key (kid) and the JWKS has several".into())
                    }
                };
                let key = jsonwebtoken::DecodingKey::from_jwk(key)
                    .map_err(|e| format!("unusable key: {e}"))?;
                let mut validation = jsonwebtoken::Validation::new(header.alg);
                validation.leeway = clock_skew.as_secs();
                validation.set_required_spec_claims(&["exp"]);
                if expected_audience.is_empty() {
                    validation.validate_aud = false;
                } else {
                    validation.set_audience(expected_audience);
                }
                if let Some(issuer) = expected_issuer {
                    validation.set_issuer(&[issuer]);
                }
                let data = jsonwebtoken::decode::<serde_json::Map<String, Value>>(
                    token,
                    &key,
                    &validation,
                )
                .map_err(|e| format!("the token is not valid: {e}"))?;
                let principal = string_claim(&data.claims, principal_claim)?;
                let expires =
                    time_claim(&data.claims, "exp")?.ok_or("the token has no exp claim")?;
                Ok(ValidToken { principal, expires })
            }
        }
    }
}

/// The claims of an unsecured JWS (`alg` none, nothing after the second dot).
fn unsecured_claims(token: &str) -> Result<serde_json::Map<String, Value>, String> {
    let parts: Vec<&str> = token.split('.').collect();
    if parts.len() != 3 {
        return Err("an unsecured JWS has three dot-separated parts".into());
    }
    let decode = |part: &str| -> Result<serde_json::Map<String, Value>, String> {
        let bytes = base64::engine::general_purpose::URL_SAFE_NO_PAD
            .decode(part.trim_end_matches('='))
            .map_err(|e| format!("not base64url: {e}"))?;
        serde_json::from_slice(&bytes).map_err(|e| format!("not a JSON object: {e}"))
    };
    let header = decode(parts[0])?;
    if header.get("alg").and_then(Value::as_str) != Some("none") {
        return Err("an unsecured JWS must have alg none".into());
    }
    decode(parts[1])
}

fn string_claim(claims: &serde_json::Map<String, Value>, name: &str) -> Result<String, String> {
    match claims.get(name).and_then(Value::as_str) {
        Some(value) if !value.trim().is_empty() => Ok(value.to_string()),
        _ => Err(format!("the token has no {name} claim")),
    }
}

/// A NumericDate claim (seconds, maybe fractional) as a time.
fn time_claim(
    claims: &serde_json::Map<String, Value>,
    name: &str,
) -> Result<Option<SystemTime>, String> {
    match claims.get(name) {
        None => Ok(None),
        Some(value) => {
            let seconds = value
                .as_f64()
                .filter(|s| s.is_finite() && *s >= 0.0)
                .ok_or_else(|| format!("the {name} claim is not a time"))?;
            Ok(Some(UNIX_EPOCH + Duration::from_secs_f64(seconds)))
        }
    }
}

/// A scope claim: a space-separated string or a list of strings.
fn scopes(claims: &serde_json::Map<String, Value>, name: &str) -> Vec<String> {
    match claims.get(name) {
        Some(Value::String(scope)) => scope.split_whitespace().map(str::to_string).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => Vec::new(),
    }
}

/// Kafka's challenge for a refused token.
const INVALID_TOKEN: &str = r#"{"status":"invalid_token"}"#;

/// One OAUTHBEARER exchange.
pub struct OAuthBearerExchange {
    validator: Arc<TokenValidator>,
    /// The challenge sent for a refused token, awaiting the client's `\x01`.
    refused: Option<String>,
}

impl OAuthBearerExchange {
    pub fn new(validator: Arc<TokenValidator>) -> OAuthBearerExchange {
        OAuthBearerExchange {
            validator,
            refused: None,
        }
    }
}

/// The client's first message: (authorization id, token).
fn parse_initial_response(message: &[u8]) -> Result<(String, String), SaslFailure> {
    let invalid = || {
        SaslFailure::new(
            "Authentication failed during authentication due to invalid credentials with SASL mechanism OAUTHBEARER",
        )
    };
    let text = std::str::from_utf8(message).map_err(|_| invalid())?;
    let rest = text.strip_prefix("n,").ok_or_else(invalid)?;
    let (authzid, rest) = rest.split_once(',').ok_or_else(invalid)?;
    let authzid = match authzid {
        "" => String::new(),
        named => named.strip_prefix("a=").ok_or_else(invalid)?.to_string(),
    };
    let pairs = rest
        .strip_prefix('\u{1}')
        .and_then(|r| r.strip_suffix("\u{1}\u{1}"))
        .ok_or_else(invalid)?;
    let auth = pairs
        .split('\u{1}')
        .find_map(|pair| pair.strip_prefix("auth="))
        .ok_or_else(invalid)?;
    let (scheme, token) = auth.split_once(' ').ok_or_else(invalid)?;
    if !scheme.eq_ignore_ascii_case("bearer") || token.trim().is_empty() {
        return Err(invalid());
    }
    Ok((authzid, token.trim().to_string()))
}

impl SaslExchange for OAuthBearerExchange {
    fn evaluate(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure> {
        if let Some(refused) = self.refused.take() {
            if token == [1u8] {
                return Err(SaslFailure::new(refused));
            }
        }
        let (authzid, jwt) = parse_initial_response(token)?;
        let valid = match self.validator.validate(&jwt, SystemTime::now()) {
            Ok(valid) => valid,
            Err(why) => {
                tracing::info!(%why, "OAUTHBEARER token refused");
                self.refused = Some(INVALID_TOKEN.to_string());
                return Ok(SaslStep::Challenge(INVALID_TOKEN.as_bytes().to_vec()));
            }
        };
        if !authzid.is_empty() && authzid != valid.principal {
            return Err(SaslFailure::new(format!(
                "Authentication failed: Client requested an authorization id ({authzid}) that is different from the token's principal name ({})",
                valid.principal
            )));
        }
        Ok(SaslStep::Complete {
            user: valid.principal,
            final_message: Vec::new(),
            expires: Some(valid.expires),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unsecured_token(claims: Value) -> String {
        let encode =
            |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
        format!(
            "{}.{}.",
            encode(&serde_json::json!({"alg": "none"})),
            encode(&claims)
        )
    }

    fn now_secs() -> f64 {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_secs_f64()
    }

    fn first_message(token: &str) -> Vec<u8> {
        format!("n,,\u{1}auth=Bearer {token}\u{1}\u{1}").into_bytes()
    }

    fn unsecured(required_scope: &str) -> Arc<TokenValidator> {
        let module = crate::jaas::parse_single(&format!(
            "{LOGIN_MODULE} required unsecuredValidatorRequiredScope=\"{required_scope}\";"
        ))
        .unwrap();
        Arc::new(TokenValidator::unsecured(&module).unwrap())
    }

    #[test]
    fn an_unsecured_token_authenticates_its_subject() {
        let token = unsecured_token(
            serde_json::json!({"sub": "alice", "exp": now_secs() + 60.0, "iat": now_secs()}),
        );
        let mut exchange = OAuthBearerExchange::new(unsecured(""));
        match exchange.evaluate(&first_message(&token)).unwrap() {
            SaslStep::Complete { user, expires, .. } => {
                assert_eq!(user, "alice");
                assert!(expires.unwrap() > SystemTime::now());
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_refused_token_is_challenged_then_fails_as_on_kafka() {
        let expired =
            unsecured_token(serde_json::json!({"sub": "alice", "exp": now_secs() - 60.0}));
        let no_sub = unsecured_token(serde_json::json!({"exp": now_secs() + 60.0}));
        let unscoped = unsecured_token(
            serde_json::json!({"sub": "a", "exp": now_secs() + 60.0, "scope": "read"}),
        );
        for (token, validator) in [
            (expired, unsecured("")),
            (no_sub, unsecured("")),
            (unscoped, unsecured("write")),
        ] {
            let mut exchange = OAuthBearerExchange::new(validator);
            assert_eq!(
                exchange.evaluate(&first_message(&token)).unwrap(),
                SaslStep::Challenge(INVALID_TOKEN.as_bytes().to_vec())
            );
            assert_eq!(exchange.evaluate(&[1]).unwrap_err().message, INVALID_TOKEN);
        }
        let token = unsecured_token(serde_json::json!({"sub": "alice", "exp": now_secs() + 60.0}));
        let mut exchange = OAuthBearerExchange::new(unsecured(""));
        let other = format!("n,a=bob,\u{1}auth=Bearer {token}\u{1}\u{1}");
        assert!(exchange.evaluate(other.as_bytes()).unwrap_err().message.contains(
            "Client requested an authorization id (bob) that is different from the token's principal name (alice)"
        ));
        let mut exchange = OAuthBearerExchange::new(unsecured(""));
        assert!(
            exchange.evaluate(b"n,,\x01host=x\x01\x01").is_err(),
            "no auth"
        );
    }

    #[test]
    fn a_signed_token_is_checked_against_the_jwks_file() {
        use jsonwebtoken::{Algorithm, EncodingKey, Header};
        let key = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let public = key.public_key_raw(); // 0x04 || x || y
        let b64 = |bytes: &[u8]| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes);
        let jwks = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "use": "sig", "alg": "ES256",
            "x": b64(&public[1..33]), "y": b64(&public[33..65]),
        }]});
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("jwks.json");
        std::fs::write(&path, jwks.to_string()).unwrap();
        let validator = TokenValidator::Jwks {
            keys: JwksFile::open(&format!("file://{}", path.display())).unwrap(),
            principal_claim: "sub".into(),
            expected_audience: vec!["kafka".into()],
            expected_issuer: Some("https://issuer".into()),
            clock_skew: Duration::from_secs(30),
        };
        let signing = EncodingKey::from_ec_der(&key.serialize_der());
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some("k1".into());
        let sign = |claims: Value| jsonwebtoken::encode(&header, &claims, &signing).unwrap();
        let good = serde_json::json!({"sub": "alice", "exp": now_secs() as u64 + 60, "aud": "kafka", "iss": "https://issuer"});
        assert_eq!(
            validator
                .validate(&sign(good.clone()), SystemTime::now())
                .unwrap()
                .principal,
            "alice"
        );
        let mut wrong_audience = good.clone();
        wrong_audience["aud"] = "other".into();
        assert!(validator
            .validate(&sign(wrong_audience), SystemTime::now())
            .is_err());
        let mut expired = good.clone();
        expired["exp"] = (now_secs() as u64 - 120).into();
        assert!(validator
            .validate(&sign(expired), SystemTime::now())
            .is_err());
        let unsigned = unsecured_token(good);
        assert!(
            validator.validate(&unsigned, SystemTime::now()).is_err(),
            "alg none is refused"
        );
        // Another key in the file (rotation): tokens of the old key are refused.
        let other = rcgen::KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap();
        let public = other.public_key_raw();
        let rotated = serde_json::json!({"keys": [{
            "kty": "EC", "crv": "P-256", "kid": "k1", "alg": "ES256",
            "x": b64(&public[1..33]), "y": b64(&public[33..65]),
        }]});
        std::thread::sleep(Duration::from_millis(20));
        std::fs::write(&path, rotated.to_string()).unwrap();
        let later = SystemTime::now() + Duration::from_secs(1);
        filetime_touch(&path, later);
        let token = sign(
            serde_json::json!({"sub": "alice", "exp": now_secs() as u64 + 60, "aud": "kafka", "iss": "https://issuer"}),
        );
        assert!(validator.validate(&token, SystemTime::now()).is_err());
    }

    /// Sets a file's modification time (a rewrite within the same clock tick keeps it).
    fn filetime_touch(path: &std::path::Path, time: SystemTime) {
        let file = std::fs::File::options().write(true).open(path).unwrap();
        file.set_modified(time).unwrap();
    }
}
