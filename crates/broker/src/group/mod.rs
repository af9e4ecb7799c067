//! Consumer groups: the state machines and the coordinator runtime live in
//! `strand_coordinator`; this is the service that reaches them from the API handlers.

pub use strand_coordinator::group::{classic, consumer, records};

pub mod coordinator;
pub mod streams_topics;

pub use coordinator::GroupCoordinator;
