//! The partition log on disk.
//!
//! Ownership, bottom up (Kafka's layering, without its god files):
//! - [`offset_index`], [`time_index`]: sparse index files of one segment, read by `pread`
//!   (no mmap, so idle partitions cost no address space).
//! - [`segment`]: one `.log` file with its two indexes; append, locate, scan, truncate, recover.
//! - [`file_cache`]: a bounded LRU of open segment files shared by every log of a manager;
//!   idle partitions hold no file descriptors.
//! - [`sync_gate`]: group commit: concurrent appenders waiting for durability share one
//!   `fdatasync`.
//! - [`leader_epoch`]: epoch -> start offset cache and its checkpoint.
//! - [`log`]: one partition: segments, offsets, roll, read, truncate, delete_before, recovery.
//! - [`dir_health`]: one log directory's health, shared by its logs (a failure in one
//!   takes the directory offline).
//! - [`log_move`]: moving a log to another of the directories while it serves.
//! - [`log_manager`]: many partitions over one or more log directories (Kafka's
//!   log.dirs), each with its checkpoints and clean-shutdown marker.
//!
//! Thread-safety: `Log` is a plain struct (`&mut self` to change it); callers wrap it in
//! their own lock. `FileCache` and `SyncGate` are internally synchronised and shared.
//! No async runtime appears in this crate's API.

pub mod batch_scan;
pub mod checkpoint;
pub mod cleaner;
pub mod clock;
pub mod config;
pub mod dir_health;
pub mod error;
pub mod fault_injection;
pub mod file_cache;
pub mod leader_epoch;
pub mod log;
pub mod log_loader;
pub mod log_manager;
pub mod log_move;
pub mod offset_index;
pub mod preallocation;
pub mod producer_state;
pub mod read_mode;
pub mod read_verification;
pub mod retention;
pub mod segment;
pub mod segment_list;
pub mod sparse_index;
pub mod sync_gate;
pub mod throttle;
pub mod tiering;
pub mod time_index;

pub use cleaner::{CleanOutcome, CleanerLimits, CleanerStep};
pub use clock::{Clock, ManualClock, SystemClock};
pub use config::{Durability, LogConfig, MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT};
pub use dir_health::DirHealth;
pub use error::{LogError, LogResult, RecordError};
pub use file_cache::FileCache;
pub use leader_epoch::{EpochEntry, LeaderEpochCache};
pub use log::{
    append_durably, first_record_in_batch, AppendInfo, FileSlice, FlushPlan, Log, ReadResult,
    TimestampOffset,
};
pub use log_loader::{LogOpenState, RecoveryReport};
pub use log_manager::{
    flush_if_due, remove_doomed, upkeep, LogManager, LogManagerOptions, TopicPartition,
};
pub use producer_state::{
    AbortedTxn, CompletedTxn, Origin, ProducerCheck, ProducerError, ProducerStateManager,
};
pub use sync_gate::{DurableState, SyncGate, SyncTicket};
