//! Request headers v0-v2: api key, api version, correlation id, client id (v1+), tagged
//! fields (v2). The first eight bytes are read by hand so that even a request for an
//! unknown API or version can be answered (ApiVersions) or logged with its correlation id.

use bytes::{Buf, Bytes};
use kafka_protocol::messages::{ApiKey, RequestHeader};
use kafka_protocol::protocol::{Decodable, StrBytes};
use thiserror::Error;

#[derive(Debug, Error)]
pub enum HeaderError {
    #[error("request of {0} bytes is too short for a header")]
    TooShort(usize),
    #[error("unknown api key {api_key}")]
    UnknownApiKey {
        api_key: i16,
        api_version: i16,
        correlation_id: i32,
    },
    #[error("malformed request header: {reason}")]
    Malformed {
        api_key: i16,
        api_version: i16,
        correlation_id: i32,
        reason: String,
    },
}

/// A request split into its header and its still-encoded body.
#[derive(Debug, Clone)]
pub struct ParsedRequest {
    pub api_key: ApiKey,
    pub header: RequestHeader,
    pub body: Bytes,
}

impl ParsedRequest {
    /// The client id of the request header (empty when the client sent none).
    pub fn client_id(&self) -> &str {
        self.header.client_id.as_deref().unwrap_or("")
    }

    /// The request without its body and with the header's strings copied out (decoded
    /// strings are slices of the frame): what an answer that waits keeps, so the frame
    /// (up to socket.request.max.bytes) is freed at once.
    pub fn header_only(&self) -> ParsedRequest {
        let owned = |text: &StrBytes| StrBytes::from_string(text.as_str().to_string());
        let mut header = self.header.clone();
        header.client_id = header.client_id.as_ref().map(owned);
        header.unknown_tagged_fields = Default::default();
        ParsedRequest {
            api_key: self.api_key,
            header,
            body: Bytes::new(),
        }
    }
}

pub fn parse_request_header(mut frame: Bytes) -> Result<ParsedRequest, HeaderError> {
    if frame.len() < 8 {
        return Err(HeaderError::TooShort(frame.len()));
    }
    let api_key = i16::from_be_bytes([frame[0], frame[1]]);
    let api_version = i16::from_be_bytes([frame[2], frame[3]]);
    let correlation_id = i32::from_be_bytes([frame[4], frame[5], frame[6], frame[7]]);
    let Ok(key) = ApiKey::try_from(api_key) else {
        return Err(HeaderError::UnknownApiKey {
            api_key,
            api_version,
            correlation_id,
        });
    };
    // Versions outside the crate's schema still get the header version of the nearest
    // known one, so the request can be answered with UNSUPPORTED_VERSION.
    let known = key.valid_versions();
    let header_version = key.request_header_version(api_version.clamp(known.min, known.max));
    let malformed = |reason: String| HeaderError::Malformed {
        api_key,
        api_version,
        correlation_id,
        reason,
    };
    let header = match crate::decode::decode_body::<RequestHeader>(frame.clone(), header_version) {
        Ok(header) => header,
        Err(error) => return Err(malformed(error.0)),
    };
    // The decoder consumed from a clone; skip the same number of bytes here.
    let header_bytes = header_length(&frame, header_version)
        .ok_or_else(|| malformed("truncated header".into()))?;
    frame.advance(header_bytes);
    Ok(ParsedRequest {
        api_key: key,
        header,
        body: frame,
    })
}

/// Bytes taken by the header at `header_version` at the front of `frame`.
fn header_length(frame: &Bytes, header_version: i16) -> Option<usize> {
    let mut cursor = frame.clone();
    RequestHeader::decode(&mut cursor, header_version).ok()?;
    Some(frame.len() - cursor.len())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bytes::BytesMut;
    use kafka_protocol::protocol::{Encodable, StrBytes};

    fn encoded(api_key: i16, version: i16, header_version: i16) -> Bytes {
        let header = RequestHeader::default()
            .with_request_api_key(api_key)
            .with_request_api_version(version)
            .with_correlation_id(42)
            .with_client_id(Some(StrBytes::from_static_str("test-client")));
        let mut out = BytesMut::new();
        header.encode(&mut out, header_version).unwrap();
        out.extend_from_slice(b"body");
        out.freeze()
    }

    #[test]
    fn parses_v1_and_v2_headers_and_leaves_the_body() {
        for (key, version, header_version) in [(18, 2, 1), (3, 12, 2), (0, 9, 2)] {
            let parsed = parse_request_header(encoded(key, version, header_version)).unwrap();
            assert_eq!(parsed.header.correlation_id, 42);
            assert_eq!(parsed.header.client_id.as_deref(), Some("test-client"));
            assert_eq!(&parsed.body[..], b"body", "key {key} v{version}");
        }
    }

    #[test]
    fn unknown_key_and_short_frames_are_errors() {
        assert!(matches!(
            parse_request_header(encoded(999, 0, 1)),
            Err(HeaderError::UnknownApiKey {
                api_key: 999,
                correlation_id: 42,
                ..
            })
        ));
        assert!(matches!(
            parse_request_header(Bytes::from_static(b"abc")),
            Err(HeaderError::TooShort(3))
        ));
    }
}
