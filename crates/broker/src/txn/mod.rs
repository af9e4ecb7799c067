//! Transactions: the coordinator's state machine lives in `strand_coordinator::txn`; this
//! is the service that reaches its shards from the API handlers, and the writing of
//! transaction markers to the partitions of a transaction.

pub mod coordinator;
pub mod markers;
pub mod verification;

pub use coordinator::TxnCoordinator;
pub use strand_coordinator::txn::records::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};
