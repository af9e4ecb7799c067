//! The SASL gate of a SASL_PLAINTEXT or SASL_SSL connection, as Kafka's
//! SaslServerAuthenticator runs it: a plain state machine fed each frame the client
//! sends, which either hands the request on to the router or answers it itself.
//!
//! - Before authentication only ApiVersions (answered by the router) and SaslHandshake
//!   are accepted; anything else closes the connection, as Kafka does.
//! - SaslHandshake v1 names the mechanism; the exchange then runs in SaslAuthenticate
//!   requests (v0-2). SaslHandshake v0 is the older framing: the tokens then travel as
//!   bare size-prefixed frames with no request header.
//! - A mechanism the listener does not enable gets UNSUPPORTED_SASL_MECHANISM with the
//!   list it does enable, and the connection closes.
//! - A failed exchange answers SASL_AUTHENTICATION_FAILED with the mechanism's message
//!   at once and closes the connection connection.failed.authentication.delay.ms later.
//! - With connections.max.reauth.ms the client is told its session lifetime
//!   (SaslAuthenticate v1+); it re-authenticates with a new SaslHandshake on the same
//!   connection (KIP-368), as the same principal with the same mechanism. A request after
//!   the session expired closes the connection.

use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_protocol::{parse_request_header, ParsedRequest};
use strand_security::sasl::scram::ScramCredentials;
use strand_security::sasl::{SaslExchange, SaslStep};
use strand_security::KafkaPrincipal;

use super::listener::SaslSettings;
use crate::error_code;
use crate::router::{decode, respond, Outcome};

/// What to do with one frame.
pub enum Gate {
    /// An ordinary request of an authenticated connection (or a pre-authentication
    /// ApiVersions): the router answers it.
    Route(ParsedRequest),
    /// The authenticator's own answer.
    Answer(Outcome),
}

enum State {
    /// Waiting for SaslHandshake (ApiVersions may come first).
    Handshake,
    /// A mechanism's exchange is under way.
    Exchanging {
        exchange: Box<dyn SaslExchange>,
        mechanism: String,
        /// Tokens travel as bare frames (SaslHandshake v0).
        bare_tokens: bool,
    },
    Authenticated,
    /// Authentication failed: the answer goes out and the connection closes.
    Failed,
}

pub struct Authenticator {
    settings: Arc<SaslSettings>,
    scram: Arc<dyn ScramCredentials>,
    state: State,
    /// Who the connection is, once authenticated, and with which mechanism.
    session: Option<Session>,
}

#[derive(Clone)]
struct Session {
    principal: KafkaPrincipal,
    mechanism: String,
    /// When the client must have re-authenticated (connections.max.reauth.ms).
    expires: Option<Instant>,
}

impl Authenticator {
    pub fn new(settings: Arc<SaslSettings>, scram: Arc<dyn ScramCredentials>) -> Authenticator {
        Authenticator {
            settings,
            scram,
            state: State::Handshake,
            session: None,
        }
    }

    /// The authenticated principal, once there is one.
    pub fn principal(&self) -> Option<&KafkaPrincipal> {
        self.session.as_ref().map(|session| &session.principal)
    }

    /// Authentication failed: read nothing more, close once the answer is out.
    pub fn failed(&self) -> bool {
        matches!(self.state, State::Failed)
    }

    /// The answer to one frame received at `now`.
    pub fn on_frame(&mut self, frame: Bytes, now: Instant) -> Gate {
        if let State::Exchanging {
            bare_tokens: true, ..
        } = self.state
        {
            return Gate::Answer(self.bare_token(&frame, now));
        }
        let request = match parse_request_header(frame) {
            Ok(request) => request,
            Err(error) => return Gate::Answer(Outcome::Close(error.to_string())),
        };
        match (&self.state, request.api_key) {
            (State::Handshake, ApiKey::ApiVersions) => Gate::Route(request),
            (State::Handshake, ApiKey::SaslHandshake) => Gate::Answer(self.handshake(&request)),
            (State::Exchanging { .. }, ApiKey::SaslAuthenticate) => {
                Gate::Answer(self.authenticate(&request, now))
            }
            (State::Authenticated, ApiKey::SaslHandshake) => Gate::Answer(self.handshake(&request)),
            (State::Authenticated, _) => {
                let expired = self
                    .session
                    .as_ref()
                    .and_then(|session| session.expires)
                    .is_some_and(|expires| now >= expires);
                if expired {
                    Gate::Answer(Outcome::Close(
                        "the SASL session expired without re-authentication (connections.max.reauth.ms)".into(),
                    ))
                } else {
                    Gate::Route(request)
                }
            }
            (_, other) => Gate::Answer(Outcome::Close(format!(
                "Unexpected Kafka request of type {other:?} during SASL handshake."
            ))),
        }
    }

    fn handshake(&mut self, request: &ParsedRequest) -> Outcome {
        let version = request.header.request_api_version;
        if !(0..=1).contains(&version) {
            return Outcome::Close(format!("unsupported version {version} of SaslHandshake"));
        }
        let body: SaslHandshakeRequest = match decode(request) {
            Ok(body) => body,
            Err(outcome) => return outcome,
        };
        let mechanism = body.mechanism.as_str().to_string();
        let enabled = self
            .settings
            .mechanisms
            .iter()
            .map(|m| StrBytes::from_string(m.clone()))
            .collect::<Vec<_>>();
        let reauthenticating = self.session.is_some();
        if reauthenticating {
            // KIP-368: re-authentication speaks v1 and keeps its mechanism.
            let same = self
                .session
                .as_ref()
                .is_some_and(|session| session.mechanism == mechanism);
            if version == 0 || !same {
                return Outcome::Close(format!(
                    "re-authentication with SaslHandshake v{version} and mechanism {mechanism} on a connection authenticated with {}",
                    self.session.as_ref().map(|s| s.mechanism.as_str()).unwrap_or("?")
                ));
            }
        }
        let Some(exchange) = self
            .settings
            .exchange(&mechanism, &self.scram, reauthenticating)
        else {
            self.state = State::Failed;
            let answer = respond(
                request,
                &SaslHandshakeResponse::default()
                    .with_error_code(error_code::UNSUPPORTED_SASL_MECHANISM)
                    .with_mechanisms(enabled),
            );
            return respond_and_close(answer, self.settings.failed_authentication_delay);
        };
        self.state = State::Exchanging {
            exchange,
            mechanism,
            bare_tokens: version == 0,
        };
        respond(
            request,
            &SaslHandshakeResponse::default()
                .with_error_code(error_code::NONE)
                .with_mechanisms(enabled),
        )
    }

    fn authenticate(&mut self, request: &ParsedRequest, now: Instant) -> Outcome {
        let version = request.header.request_api_version;
        if !(0..=2).contains(&version) {
            return Outcome::Close(format!("unsupported version {version} of SaslAuthenticate"));
        }
        let body: SaslAuthenticateRequest = match decode(request) {
            Ok(body) => body,
            Err(outcome) => return outcome,
        };
        match self.evaluate(&body.auth_bytes, now) {
            Ok(Evaluated::Challenge(bytes)) => respond(
                request,
                &SaslAuthenticateResponse::default().with_auth_bytes(Bytes::from(bytes)),
            ),
            Ok(Evaluated::Complete {
                final_message,
                session_lifetime,
            }) => respond(
                request,
                &SaslAuthenticateResponse::default()
                    .with_auth_bytes(Bytes::from(final_message))
                    .with_session_lifetime_ms(session_lifetime),
            ),
            Err(message) => {
                let answer = respond(
                    request,
                    &SaslAuthenticateResponse::default()
                        .with_error_code(error_code::SASL_AUTHENTICATION_FAILED)
                        .with_error_message(Some(StrBytes::from_string(message))),
                );
                respond_and_close(answer, self.settings.failed_authentication_delay)
            }
        }
    }

    /// A token of the SaslHandshake v0 framing: a bare frame in, a bare frame out; a
    /// failure closes the connection with nothing sent, as Kafka does.
    fn bare_token(&mut self, token: &[u8], now: Instant) -> Outcome {
        match self.evaluate(token, now) {
            Ok(Evaluated::Challenge(bytes))
            | Ok(Evaluated::Complete {
                final_message: bytes,
                ..
            }) => {
                let mut frame = BytesMut::with_capacity(4 + bytes.len());
                frame.put_u32(bytes.len() as u32);
                frame.put_slice(&bytes);
                Outcome::Respond(frame.freeze())
            }
            Err(message) => {
                let delay = self.settings.failed_authentication_delay;
                Outcome::Deferred(Box::pin(async move {
                    tokio::time::sleep(delay).await;
                    Outcome::Close(format!("SASL authentication failed: {message}"))
                }))
            }
        }
    }

    /// Feeds a token to the exchange under way; on success the connection is
    /// authenticated (or re-authenticated, as the same principal).
    fn evaluate(&mut self, token: &[u8], now: Instant) -> Result<Evaluated, String> {
        let State::Exchanging {
            exchange,
            mechanism,
            ..
        } = &mut self.state
        else {
            return Err("no SASL exchange under way".into());
        };
        let step = exchange.evaluate(token).map_err(|failure| failure.message);
        let (user, final_message, credential_expires) = match step {
            Ok(SaslStep::Challenge(bytes)) => return Ok(Evaluated::Challenge(bytes)),
            Ok(SaslStep::Complete {
                user,
                final_message,
                expires,
            }) => (user, final_message, expires),
            Err(message) => {
                self.state = State::Failed;
                return Err(message);
            }
        };
        let principal = KafkaPrincipal::user(user);
        if let Some(previous) = &self.session {
            if previous.principal != principal {
                self.state = State::Failed;
                return Err(format!(
                    "Cannot change principals during re-authentication from {}: {}",
                    previous.principal, principal
                ));
            }
        }
        // KIP-368: with re-authentication on, a credential that expires (an OAUTHBEARER
        // token) ends the session no later than itself, as on Kafka.
        let lifetime = self.settings.reauthentication.map(|lifetime| {
            let left = credential_expires
                .map(|expires| {
                    expires
                        .duration_since(std::time::SystemTime::now())
                        .unwrap_or_default()
                })
                .unwrap_or(lifetime);
            lifetime.min(left)
        });
        self.session = Some(Session {
            principal,
            mechanism: mechanism.clone(),
            expires: lifetime.map(|lifetime| now + lifetime),
        });
        self.state = State::Authenticated;
        Ok(Evaluated::Complete {
            final_message,
            session_lifetime: lifetime.map_or(0, |l| l.as_millis() as i64),
        })
    }
}

enum Evaluated {
    Challenge(Vec<u8>),
    Complete {
        final_message: Vec<u8>,
        session_lifetime: i64,
    },
}

/// Sends `answer` at once and closes the connection `delay` later, as Kafka does.
fn respond_and_close(answer: Outcome, delay: Duration) -> Outcome {
    match answer {
        Outcome::Respond(bytes) => Outcome::RespondAndClose(bytes, delay),
        other => other,
    }
}
