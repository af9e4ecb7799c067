pub mod classic;
pub mod coordinator;
pub mod records;

pub use coordinator::GroupCoordinator;
