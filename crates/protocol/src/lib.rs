//! The Kafka wire protocol as Strand speaks it: length-prefixed frames with the size
//! capped before any allocation, request headers v0-v2, the table of API versions Strand
//! advertises, and response framing. Message bodies come from the `kafka-protocol` crate,
//! decoded through `decode_body`, which turns its panics into errors.
//!
//! Trap handled here: `kafka-protocol` allocates `Vec::with_capacity(count)` from counts
//! read off the wire. Frames are capped first, and [`alloc_guard::HugeAllocationGuard`]
//! (install it as the global allocator) serves allocations so large that they can only
//! come from a hostile count with untouched, unreserved address space instead of
//! aborting the process; the decode then fails on the missing bytes.

pub mod alloc_guard;
pub mod api_versions;
pub mod client;
pub mod connection_limits;
pub mod decode;
pub mod fetch_response;
pub mod frame;
pub mod header;
pub mod request_memory;
pub mod response;

pub use api_versions::{supported_versions, SupportedApi, SUPPORTED_APIS};
pub use decode::{decode_body, DecodeError};
pub use fetch_response::{
    encode_fetch_response, FetchPartitionOut, FetchTopicOut, RecordsOut, ResponsePart, SharedFile,
};
pub use frame::{read_frame_size, FrameError, SOCKET_REQUEST_MAX_BYTES_DEFAULT};
pub use header::{parse_request_header, HeaderError, ParsedRequest};
pub use kafka_protocol;
pub use request_memory::{BodyReservation, RequestMemory, UNPOOLED_BYTES_PER_REQUEST};
pub use response::encode_response;
