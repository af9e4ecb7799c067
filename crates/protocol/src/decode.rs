//! Decoding message bodies with `kafka-protocol`, contained: a decoder error or panic
//! (it can panic on capacity overflow from a hostile count) becomes a `DecodeError`.

use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use kafka_protocol::protocol::Decodable;
use thiserror::Error;

#[derive(Debug, Error)]
#[error("malformed request body: {0}")]
pub struct DecodeError(pub String);

/// Decodes a `T` at `version` from the whole of `body`.
pub fn decode_body<T: Decodable>(body: Bytes, version: i16) -> Result<T, DecodeError> {
    let mut body = body;
    match catch_unwind(AssertUnwindSafe(|| T::decode(&mut body, version))) {
        Ok(Ok(message)) => Ok(message),
        Ok(Err(error)) => Err(DecodeError(error.to_string())),
        Err(_) => Err(DecodeError("decoder panicked".into())),
    }
}
