//! Kafka RecordBatch (magic v2) as bytes: a zero-copy view of the 61-byte header, CRC32C
//! verification, the in-place rewrites a broker is allowed to make (base offset, partition
//! leader epoch, LogAppendTime), a bounded walk over the records inside a batch (plain or
//! compressed), transaction markers (control records), and a builder used by tests,
//! benchmarks and internal topics.
//!
//! This crate does no I/O and allocates only what a caller-given bound allows.

mod batch;
mod builder;
mod compression;
mod control;
mod error;
mod record_walk;
mod varint;

pub use batch::{
    refresh_crc, set_base_offset, set_log_append_time, set_partition_leader_epoch, Attributes,
    BatchHeader, BatchView, TimestampType, BATCH_HEADER_BYTES, BATCH_LENGTH_OFFSET,
    LOG_OVERHEAD_BYTES, MAGIC_V2, NO_PARTITION_LEADER_EPOCH, NO_PRODUCER_EPOCH, NO_PRODUCER_ID,
    NO_SEQUENCE, NO_TIMESTAMP,
};
pub use builder::{rebuild_batch, BatchBuilder, Header, KeptRecord, Record};
pub use compression::{compress, Compression};
pub use control::{read_end_txn_marker, EndTxnMarker, TxnResult};
pub use error::RecordsError;
pub use record_walk::{walk_records, walk_stored_records, RecordSummary, WalkLimits, WalkedRecord};
