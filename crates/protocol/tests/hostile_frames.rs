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
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512), version in 0i16..18) {
        let bytes = Bytes::from(bytes);
        let _ = parse_request_header(bytes.clone());
        let _ = decode_body::<ProduceRequest>(bytes.clone(), version.clamp(3, 13));
        let _ = decode_body::<FetchRequest>(bytes.clone(), version.clamp(4, 17));
        let _ = decode_body::<MetadataRequest>(bytes.clone(), version.clamp(0, 13));
        let _ = decode_body::<CreateTopicsRequest>(bytes, version.clamp(2, 7));
    }
}
