//! Consumer groups: the classic and KIP-848 state machines, their records in
//! `__consumer_offsets`, and the shard that holds one partition's groups.

pub mod classic;
pub mod consumer;
pub mod consumer_records;
pub mod records;
pub mod shard;
pub mod share;
pub mod share_records;
