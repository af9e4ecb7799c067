//! Groups: the classic, KIP-848 consumer, KIP-932 share and KIP-1071 streams state
//! machines, their records in `__consumer_offsets`, and the shard that holds one
//! partition's groups.

pub mod classic;
pub mod consumer;
pub mod consumer_records;
pub mod records;
pub mod shard;
pub mod share;
pub mod share_records;
pub mod streams;
pub mod streams_assignor;
pub mod streams_persist;
pub mod streams_records;
pub mod streams_topology;
