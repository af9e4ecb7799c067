//! Hostile and malformed request bodies: decoding never panics, never aborts on a huge
//! element count, and always ends in an error or a message.

use bytes::{BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    CreateTopicsRequest, FetchRequest, MetadataRequest, ProduceRequest,
};
use proptest::prelude::*;
use strand_protocol::alloc_guard::HugeAllocationGuard;
use strand_protocol::{decode_body, parse_request_header};

#[global_allocator]
static ALLOCATOR: HugeAllocationGuard = HugeAllocationGuard;

#[test]
fn a_two_billion_element_count_is_an_error_not_an_abort() {
    // Produce v3 body: transactional id (null), acks, timeout, then topic count = i32::MAX.
    let mut body = BytesMut::new();
    body.put_i16(-1);
    body.put_i16(1);
    body.put_i32(1000);
    body.put_i32(i32::MAX);
    body.put_slice(&[0u8; 16]);
    assert!(decode_body::<ProduceRequest>(body.freeze(), 3).is_err());

    // Flexible (compact) arrays read counts as unsigned varints: 0xFFFFFFFF - 1 elements.
    let mut body = BytesMut::new();
    body.put_slice(&[0xff, 0xff, 0xff, 0xff, 0x0f]);
    body.put_slice(&[0u8; 16]);
    assert!(decode_body::<MetadataRequest>(body.freeze(), 12).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_bytes_decode_to_an_error_or_a_message_that_round_trips(bytes in proptest::collection::vec(any::<u8>(), 0..512), version in 0i16..18) {
        let bytes = Bytes::from(bytes);
        if let Ok(parsed) = parse_request_header(bytes.clone()) {
            prop_assert!(parsed.body.len() < bytes.len(), "the header takes bytes");
        }
        round_trips::<ProduceRequest>(&bytes, version.clamp(3, 13))?;
        round_trips::<FetchRequest>(&bytes, version.clamp(4, 17))?;
        round_trips::<MetadataRequest>(&bytes, version.clamp(0, 13))?;
        round_trips::<CreateTopicsRequest>(&bytes, version.clamp(2, 7))?;
    }
}

/// If `bytes` decode as `T` at `version`, the message encodes again and decodes to itself:
/// what the broker acts on is what the bytes said, not a half-read value.
fn round_trips<T>(bytes: &Bytes, version: i16) -> Result<(), TestCaseError>
where
    T: kafka_protocol::protocol::Decodable
        + kafka_protocol::protocol::Encodable
        + PartialEq
        + std::fmt::Debug,
{
    let Ok(message) = decode_body::<T>(bytes.clone(), version) else {
        return Ok(());
    };
    let mut encoded = BytesMut::new();
    message
        .encode(&mut encoded, version)
        .map_err(|e| TestCaseError::fail(format!("decoded but cannot encode: {e}")))?;
    let again = decode_body::<T>(encoded.freeze(), version)
        .map_err(|e| TestCaseError::fail(format!("re-encoded bytes do not decode: {e}")))?;
    prop_assert_eq!(again, message);
    Ok(())
}
