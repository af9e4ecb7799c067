//! What every Strand crate names the same way. Today: Kafka's error codes (one table).

pub mod error_code;
