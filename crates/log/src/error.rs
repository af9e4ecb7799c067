//! Errors of the log, each mapped to the Kafka error code a broker sends for it.

use std::io;

use strand_records::RecordsError;
use thiserror::Error;

pub type LogResult<T> = Result<T, LogError>;

/// Kafka error codes the log answers itself (the crate does not depend on the broker's
/// table).
pub(crate) const INVALID_TIMESTAMP: i16 = 32;
pub(crate) const INVALID_RECORD: i16 = 87;

/// One refused record of a produced batch: its index in the batch and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordError {
    pub batch_index: i32,
    pub message: String,
}

#[derive(Debug, Error)]
pub enum LogError {
    /// The batch itself was refused (corrupt, invalid, too large, wrong magic).
    #[error(transparent)]
    Records(#[from] RecordsError),
    /// More than one batch, or none, where exactly one is required.
    #[error("invalid record set: {0}")]
    InvalidRecordSet(String),
    /// Requested offset outside [log start offset, log end offset].
    #[error("offset {offset} is out of range [{log_start_offset}, {log_end_offset}]")]
    OffsetOutOfRange {
        offset: i64,
        log_start_offset: i64,
        log_end_offset: i64,
    },
    /// A follower append whose offsets do not follow the log end offset.
    #[error("follower batch at offset {batch_base_offset} does not follow log end offset {log_end_offset}")]
    NonMonotonicOffset {
        batch_base_offset: i64,
        log_end_offset: i64,
    },
    /// The file system failed. The log refuses writes afterwards until reopened.
    #[error("storage error: {0}")]
    Io(#[from] io::Error),
    /// An earlier I/O failure left this log unable to accept writes.
    #[error("log is offline after a storage failure: {0}")]
    Offline(String),
    /// An idempotent producer's batch is out of sequence, fenced or unknown.
    #[error(transparent)]
    Producer(#[from] crate::producer_state::ProducerError),
    /// Records of the batch broke the topic's rules (a keyless record on a compacted
    /// topic, a timestamp out of range): the whole batch is refused, and each bad record
    /// is named by its index in the batch (KIP-467), so a producer fails only those and
    /// retries the others. `code` is INVALID_TIMESTAMP if any record's timestamp is out
    /// of range, else INVALID_RECORD (Kafka's LogValidator).
    #[error("{message}")]
    RecordErrors {
        code: i16,
        message: String,
        records: Vec<RecordError>,
    },
    /// A file on disk failed a sanity check that recovery cannot repair.
    #[error("corrupt log file {path}: {reason}")]
    CorruptFile { path: String, reason: String },
    /// A stored batch a read was about to send failed its check (CRC, framing): the
    /// disk damaged it after it was written.
    #[error("corrupt batch in {path} at byte {position}: {reason}")]
    CorruptBatch {
        path: String,
        position: u64,
        reason: String,
    },
}

impl LogError {
    /// The Kafka protocol error code for this error.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            LogError::Records(error) => error.kafka_error_code(),
            LogError::InvalidRecordSet(_) => 87, // INVALID_RECORD
            LogError::OffsetOutOfRange { .. } => 1, // OFFSET_OUT_OF_RANGE
            LogError::NonMonotonicOffset { .. } => 87, // INVALID_RECORD
            LogError::Io(_) | LogError::Offline(_) => 56, // KAFKA_STORAGE_ERROR
            LogError::CorruptFile { .. } => 56,  // KAFKA_STORAGE_ERROR
            LogError::CorruptBatch { .. } => 2,  // CORRUPT_MESSAGE
            LogError::Producer(error) => error.kafka_error_code(),
            LogError::RecordErrors { code, .. } => *code,
        }
    }
}
