//! Coordinators: the runtime (one ordered event loop per coordinator partition, a reply
//! sent once its records commit) and the state machines on it. No network, no files:
//! the broker gives each shard its partition through `runtime::ShardLog`.

pub mod codec;
pub mod group;
pub mod runtime;
pub mod share;
pub mod txn;
