//! Why a batch was refused. The broker maps each variant to one Kafka error code
//! (see `kafka_error_code`), so the mapping lives here, in one place.

use thiserror::Error;

#[derive(Debug, Error, Clone, PartialEq, Eq)]
pub enum RecordsError {
    /// Truncated bytes, a length field that disagrees with the bytes present, or a CRC
    /// mismatch: the bytes are damaged. Kafka: CORRUPT_MESSAGE (2).
    #[error("corrupt record batch: {0}")]
    Corrupt(String),
    /// The batch is readable but its contents break the format's rules (record count,
    /// record lengths, offset deltas). Kafka: INVALID_RECORD (87).
    #[error("invalid record batch: {0}")]
    InvalidRecord(String),
    /// Magic byte other than 2. Kafka answers a produce with it INVALID_RECORD (87).
    #[error("unsupported record batch magic {0}")]
    UnsupportedMagic(i8),
    /// Batch larger than the topic's max.message.bytes. Kafka: MESSAGE_TOO_LARGE (10).
    #[error("record batch of {size_bytes} bytes exceeds the limit of {limit_bytes} bytes")]
    TooLarge {
        size_bytes: usize,
        limit_bytes: usize,
    },
    /// Compression codec id not in 0..=4. Kafka: CORRUPT_MESSAGE on produce.
    #[error("unknown compression codec {0}")]
    UnknownCompression(u8),
    /// Decompressed contents exceed the walker's bound (zip-bomb guard).
    #[error("decompressed batch exceeds the bound of {limit_bytes} bytes")]
    DecompressedTooLarge { limit_bytes: usize },
}

impl RecordsError {
    /// The Kafka protocol error code a Kafka 4.x broker sends for this case.
    pub fn kafka_error_code(&self) -> i16 {
        match self {
            RecordsError::Corrupt(_) => 2,
            RecordsError::InvalidRecord(_) => 87,
            // Kafka's Produce v3+ answers INVALID_RECORD for any magic but 2 (its
            // ProduceRequest.validateRecords); 43 is for down-conversion, gone in 4.x.
            RecordsError::UnsupportedMagic(_) => 87,
            RecordsError::TooLarge { .. } => 10,
            RecordsError::UnknownCompression(_) => 2,
            RecordsError::DecompressedTooLarge { .. } => 87,
        }
    }
}
