//! Response framing: size, response header (v0: correlation id; v1: plus tagged fields),
//! body. ApiVersions responses always use header v0 so that clients of any version can
//! read an UNSUPPORTED_VERSION answer.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, ResponseHeader};
use kafka_protocol::protocol::Encodable;

/// Encodes a complete response frame (with its size prefix).
pub fn encode_response<B: Encodable>(
    api_key: ApiKey,
    version: i16,
    correlation_id: i32,
    body: &B,
) -> anyhow::Result<Bytes> {
    let header_version = if api_key == ApiKey::ApiVersions {
        0
    } else {
        api_key.response_header_version(version)
    };
    let header = ResponseHeader::default().with_correlation_id(correlation_id);
    let size = header.compute_size(header_version)? + body.compute_size(version)?;
    let mut out = BytesMut::with_capacity(4 + size);
    out.put_i32(size as i32);
    header.encode(&mut out, header_version)?;
    body.encode(&mut out, version)?;
    assert_eq!(out.len(), 4 + size);
    Ok(out.freeze())
}
