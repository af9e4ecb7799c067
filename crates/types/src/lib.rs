//! What every Strand crate names the same way: Kafka's error codes (one table) and
//! Kafka's text form of a uuid.

pub mod error_code;
pub mod kafka_uuid;
