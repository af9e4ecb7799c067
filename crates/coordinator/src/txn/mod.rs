//! Transactions (#15, in progress): the states of a transactional id and their records in
//! `__transaction_state`, in Kafka's formats. The coordinator's state machine and its
//! shard come next (docs/design/transactions.md is the specification).

pub mod records;
pub mod state;
