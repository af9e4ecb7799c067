pub mod classic;
pub mod consumer;
pub mod coordinator;
pub mod records;

pub use coordinator::GroupCoordinator;
