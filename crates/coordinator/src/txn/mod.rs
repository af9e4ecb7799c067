//! Transactions: the states of a transactional id, their records in
//! `__transaction_state` in Kafka's formats, and the coordinator's state machine for one
//! partition (docs/design/transactions.md is the specification).

pub mod records;
pub mod shard;
pub mod state;
