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

/// A Metadata, Fetch or CreateTopics request with arbitrary names and numbers, encoded
/// at an arbitrary version its fields allow: (which, version, bytes).
fn valid_request() -> impl Strategy<Value = (u8, i16, Bytes)> {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
    use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::protocol::{Encodable, StrBytes};
    let name = "[a-zA-Z0-9._-]{1,40}".prop_map(|n| TopicName(StrBytes::from_string(n)));
    let names = proptest::collection::vec(name, 0..6);
    (0u8..3, names, any::<i32>(), any::<i64>(), 0i16..20).prop_map(
        |(which, names, number, offset, version)| {
            let mut out = BytesMut::new();
            let version = match which {
                0 => {
                    let version = version.clamp(1, 12);
                    let topics = names
                        .iter()
                        .map(|n| MetadataRequestTopic::default().with_name(Some(n.clone())))
                        .collect();
                    MetadataRequest::default()
                        .with_topics(Some(topics))
                        .encode(&mut out, version)
                        .unwrap();
                    version
                }
                1 => {
                    let version = version.clamp(4, 12);
                    let topics = names
                        .iter()
                        .map(|n| {
                            FetchTopic::default()
                                .with_topic(n.clone())
                                .with_partitions(vec![FetchPartition::default()
                                    .with_partition(number)
                                    .with_fetch_offset(offset)
                                    .with_partition_max_bytes(number)])
                        })
                        .collect();
                    FetchRequest::default()
                        .with_max_wait_ms(number)
                        .with_topics(topics)
                        .encode(&mut out, version)
                        .unwrap();
                    version
                }
                _ => {
                    let version = version.clamp(2, 7);
                    let topics = names
                        .iter()
                        .map(|n| {
                            CreatableTopic::default()
                                .with_name(n.clone())
                                .with_num_partitions(number)
                        })
                        .collect();
                    CreateTopicsRequest::default()
                        .with_topics(topics)
                        .with_timeout_ms(number)
                        .encode(&mut out, version)
                        .unwrap();
                    version
                }
            };
            (which, version, out.freeze())
        },
    )
}

/// Real requests with a few bytes changed, cut or added: unlike random bytes they mostly
/// still decode, so the round-trip check runs on realistic messages. Counted, so the test
/// fails if the mutations stop producing decodable messages.
#[test]
fn mutated_real_requests_decode_to_an_error_or_a_message_that_round_trips() {
    use proptest::test_runner::{Config, TestRunner};
    let mutation =
        proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>(), 0u8..3), 1..4);
    let mut runner = TestRunner::new(Config {
        cases: 3_000,
        ..Config::default()
    });
    let decoded = std::cell::Cell::new(0usize);
    runner
        .run(
            &(valid_request(), mutation),
            |((which, version, bytes), mutations)| {
                let mut bytes = bytes.to_vec();
                for (at, value, kind) in mutations {
                    if bytes.is_empty() {
                        break;
                    }
                    let at = at.index(bytes.len());
                    match kind {
                        0 => bytes[at] = value,
                        1 => bytes.truncate(at),
                        _ => bytes.insert(at, value),
                    }
                }
                let bytes = Bytes::from(bytes);
                let ok = match which {
                    0 => round_trips::<MetadataRequest>(&bytes, version)?,
                    1 => round_trips::<FetchRequest>(&bytes, version)?,
                    _ => round_trips::<CreateTopicsRequest>(&bytes, version)?,
                };
                decoded.set(decoded.get() + ok as usize);
                Ok(())
            },
        )
        .unwrap();
    eprintln!(
        "{} of 3,000 mutated requests decoded and round-tripped",
        decoded.get()
    );
    assert!(
        decoded.get() > 150,
        "only {} of 3,000 mutated requests decoded: the round trip was hardly checked",
        decoded.get()
    );
}

/// If `bytes` decode as `T` at `version`, the message encodes again and decodes to itself:
/// what the broker acts on is what the bytes said, not a half-read value.
/// Returns whether they decoded.
fn round_trips<T>(bytes: &Bytes, version: i16) -> Result<bool, TestCaseError>
where
    T: kafka_protocol::protocol::Decodable
        + kafka_protocol::protocol::Encodable
        + PartialEq
        + std::fmt::Debug,
{
    let Ok(message) = decode_body::<T>(bytes.clone(), version) else {
        return Ok(false);
    };
    let mut encoded = BytesMut::new();
    message
        .encode(&mut encoded, version)
        .map_err(|e| TestCaseError::fail(format!("decoded but cannot encode: {e}")))?;
    let again = decode_body::<T>(encoded.freeze(), version)
        .map_err(|e| TestCaseError::fail(format!("re-encoded bytes do not decode: {e}")))?;
    prop_assert_eq!(again, message);
    Ok(true)
}
