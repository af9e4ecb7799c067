//! SaslHandshake (17) and SaslAuthenticate (36) where no exchange can happen: on a
//! PLAINTEXT or SSL listener, or a SaslAuthenticate after a SASL connection
//! authenticated. Kafka answers both with ILLEGAL_SASL_STATE; the exchange itself lives
//! in `net::authenticator`, ahead of the router.

use kafka_protocol::messages::{SaslAuthenticateResponse, SaslHandshakeResponse};
use kafka_protocol::protocol::StrBytes;
use strand_protocol::ParsedRequest;

use crate::error_code;
use crate::router::{respond, Outcome};

pub fn handshake_out_of_place(request: ParsedRequest) -> Outcome {
    respond(
        &request,
        &SaslHandshakeResponse::default().with_error_code(error_code::ILLEGAL_SASL_STATE),
    )
}

pub fn authenticate_out_of_place(request: ParsedRequest) -> Outcome {
    respond(
        &request,
        &SaslAuthenticateResponse::default()
            .with_error_code(error_code::ILLEGAL_SASL_STATE)
            .with_error_message(Some(StrBytes::from_static_str(
                "SaslAuthenticate request received after successful authentication",
            ))),
    )
}
