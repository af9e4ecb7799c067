//! SASL mechanisms on the broker's side: each exchange is a plain state machine fed the
//! client's tokens (the bytes of SaslAuthenticate requests), answering a challenge, a
//! success with the authenticated user, or a failure with the message Kafka sends.

pub mod client;
pub mod oauthbearer;
pub mod plain;
pub mod scram;

/// What one client token leads to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SaslStep {
    /// Send these bytes and wait for the client's next token.
    Challenge(Vec<u8>),
    /// Authenticated as `user`; `final_message` goes back to the client (empty for PLAIN).
    /// `expires`: when the credential does (an OAUTHBEARER token), which bounds the
    /// session under re-authentication.
    Complete {
        user: String,
        final_message: Vec<u8>,
        expires: Option<std::time::SystemTime>,
    },
}

/// Authentication failed: `message` is what Kafka puts in SaslAuthenticate's
/// error_message (with SASL_AUTHENTICATION_FAILED).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SaslFailure {
    pub message: String,
}

impl SaslFailure {
    pub fn new(message: impl Into<String>) -> SaslFailure {
        SaslFailure {
            message: message.into(),
        }
    }
}

/// One authentication exchange of one mechanism.
pub trait SaslExchange: Send {
    fn evaluate(&mut self, token: &[u8]) -> Result<SaslStep, SaslFailure>;
}

/// Compares secrets in time independent of where they differ.
pub(crate) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
