//! Every partition log in one data directory: discovery at startup, creation, deletion,
//! the directory-wide checkpoints (recovery points, log start offsets, high watermarks)
//! and the clean-shutdown marker. Logs share one bounded [`FileCache`], so open files are
//! bounded by the cache, not by the number of partitions; no thread per partition.
//!
//! Layout (Kafka's): `<data>/<topic>-<partition>/<20-digit base>.{log,index,timeindex}`,
//! `<data>/recovery-point-offset-checkpoint`, `log-start-offset-checkpoint`,
//! `replication-offset-checkpoint`, and `.strand_clean_shutdown` while stopped cleanly.
//!
//! Thread-safety: the map of logs is behind `&mut self` for creation and deletion; each log
//! is an `Arc<Mutex<Log>>` the broker locks per operation.

use std::collections::HashMap;
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::checkpoint::{read_checkpoint, sync_dir, write_checkpoint};
use crate::clock::{Clock, SystemClock};
use crate::config::LogConfig;
use crate::error::{LogError, LogResult};
use crate::file_cache::{FileCache, FILE_CACHE_DEFAULT_SEGMENTS};
use crate::log::Log;
use crate::log_loader::{LogOpenState, RecoveryReport};

pub const CLEAN_SHUTDOWN_FILE: &str = ".strand_clean_shutdown";
pub const RECOVERY_POINT_CHECKPOINT_FILE: &str = "recovery-point-offset-checkpoint";
pub const LOG_START_OFFSET_CHECKPOINT_FILE: &str = "log-start-offset-checkpoint";
pub const HIGH_WATERMARK_CHECKPOINT_FILE: &str = "replication-offset-checkpoint";
const LOCK_FILE: &str = ".lock";
const DELETE_SUFFIX: &str = "-delete";

/// Kafka's topic name rule: 1 to 249 of [a-zA-Z0-9._-].
pub const TOPIC_NAME_MAX_CHARS: usize = 249;

#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct TopicPartition {
    pub topic: String,
    pub partition: i32,
}

impl TopicPartition {
    pub fn new(topic: impl Into<String>, partition: i32) -> TopicPartition {
        TopicPartition {
            topic: topic.into(),
            partition,
        }
    }

    /// Parses a directory name `topic-partition`.
    pub fn from_dir_name(name: &str) -> Option<TopicPartition> {
        let (topic, partition) = name.rsplit_once('-')?;
        let partition: i32 = partition.parse().ok()?;
        if partition < 0 || !is_valid_topic_name(topic) {
            return None;
        }
        Some(TopicPartition::new(topic, partition))
    }
}

impl fmt::Display for TopicPartition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}-{}", self.topic, self.partition)
    }
}

pub fn is_valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= TOPIC_NAME_MAX_CHARS
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// How to open a manager.
#[derive(Debug, Clone)]
pub struct LogManagerOptions {
    pub default_config: Arc<LogConfig>,
    pub file_cache_segments: usize,
    pub clock: Arc<dyn Clock>,
}

impl Default for LogManagerOptions {
    fn default() -> Self {
        LogManagerOptions {
            default_config: Arc::new(LogConfig::default()),
            file_cache_segments: FILE_CACHE_DEFAULT_SEGMENTS,
            clock: Arc::new(SystemClock),
        }
    }
}

#[derive(Debug)]
pub struct LogManager {
    data_dir: PathBuf,
    options: LogManagerOptions,
    cache: Arc<FileCache>,
    logs: HashMap<TopicPartition, Arc<Mutex<Log>>>,
    /// Held for the manager's lifetime: one process per data directory.
    _lock_file: File,
    previous_shutdown_clean: bool,
}

impl LogManager {
    /// Opens (creating if needed) a data directory and every log in it, recovering logs
    /// if the previous run did not shut down cleanly.
    pub fn open(
        data_dir: &Path,
        options: LogManagerOptions,
    ) -> LogResult<(LogManager, Vec<(TopicPartition, RecoveryReport)>)> {
        fs::create_dir_all(data_dir)?;
        let lock_file = lock_data_dir(data_dir)?;
        let marker = data_dir.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        if clean {
            // From here on a crash must be treated as unclean.
            fs::remove_file(&marker)?;
            sync_dir(data_dir)?;
        }
        let recovery_points = read_offsets(&data_dir.join(RECOVERY_POINT_CHECKPOINT_FILE))?;
        let log_starts = read_offsets(&data_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE))?;
        let high_watermarks = read_offsets(&data_dir.join(HIGH_WATERMARK_CHECKPOINT_FILE))?;
        let cache = FileCache::new(options.file_cache_segments);
        let mut logs = HashMap::new();
        let mut reports = Vec::new();
        for entry in fs::read_dir(data_dir)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with(DELETE_SUFFIX) {
                fs::remove_dir_all(entry.path())?;
                continue;
            }
            let Some(tp) = TopicPartition::from_dir_name(&name) else {
                continue;
            };
            let state = LogOpenState {
                recovery_point: recovery_points.get(&tp).copied().unwrap_or(0),
                log_start_offset: log_starts.get(&tp).copied().unwrap_or(0),
                high_watermark: high_watermarks.get(&tp).copied().unwrap_or(0),
                clean_shutdown: clean,
            };
            let (log, report) = Log::open(
                &entry.path(),
                options.default_config.clone(),
                cache.clone(),
                options.clock.clone(),
                state,
            )?;
            if report != RecoveryReport::default() {
                reports.push((tp.clone(), report));
            }
            logs.insert(tp, Arc::new(Mutex::new(log)));
        }
        let manager = LogManager {
            data_dir: data_dir.to_path_buf(),
            options,
            cache,
            logs,
            _lock_file: lock_file,
            previous_shutdown_clean: clean,
        };
        Ok((manager, reports))
    }

    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    pub fn previous_shutdown_clean(&self) -> bool {
        self.previous_shutdown_clean
    }

    pub fn file_cache(&self) -> &Arc<FileCache> {
        &self.cache
    }

    pub fn len(&self) -> usize {
        self.logs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.logs.is_empty()
    }

    pub fn partitions(&self) -> impl Iterator<Item = &TopicPartition> {
        self.logs.keys()
    }

    pub fn get(&self, tp: &TopicPartition) -> Option<Arc<Mutex<Log>>> {
        self.logs.get(tp).cloned()
    }

    /// The log of `tp`, created empty (with `config`, or the default) if it does not exist.
    pub fn get_or_create(
        &mut self,
        tp: &TopicPartition,
        config: Option<Arc<LogConfig>>,
    ) -> LogResult<Arc<Mutex<Log>>> {
        let log = self.get_or_create_deferred(tp, config)?;
        lock(&log).materialize()?;
        Ok(log)
    }

    /// Like [`LogManager::get_or_create`], but a new log exists only in memory until its
    /// first write or [`Log::materialize`] (see [`Log::create_deferred`]).
    pub fn get_or_create_deferred(
        &mut self,
        tp: &TopicPartition,
        config: Option<Arc<LogConfig>>,
    ) -> LogResult<Arc<Mutex<Log>>> {
        if let Some(log) = self.logs.get(tp) {
            return Ok(log.clone());
        }
        if !is_valid_topic_name(&tp.topic) || tp.partition < 0 {
            return Err(LogError::InvalidRecordSet(format!(
                "invalid topic partition {tp}"
            )));
        }
        let config = config.unwrap_or_else(|| self.options.default_config.clone());
        let dir = self.data_dir.join(tp.to_string());
        let log = Log::create_deferred(
            &dir,
            config,
            self.cache.clone(),
            self.options.clock.clone(),
            0,
        );
        let log = Arc::new(Mutex::new(log));
        self.logs.insert(tp.clone(), log.clone());
        Ok(log)
    }

    /// Removes a partition's log: renamed aside first (so a crash mid-delete finishes the
    /// delete at the next start), then removed.
    pub fn delete(&mut self, tp: &TopicPartition) -> LogResult<bool> {
        let Some(log) = self.logs.remove(tp) else {
            return Ok(false);
        };
        let mut log = lock(&log);
        for segment in log.segments.iter() {
            self.cache.invalidate(segment.id());
        }
        if !log.mark_deleted() {
            return Ok(true); // never written: no directory to remove
        }
        let doomed = self
            .data_dir
            .join(format!("{tp}.{}{DELETE_SUFFIX}", std::process::id()));
        fs::rename(log.dir(), &doomed)?;
        sync_dir(&self.data_dir)?;
        fs::remove_dir_all(&doomed)?;
        Ok(true)
    }

    /// Runs periodic per-log work (producer expiry, flush.ms / flush.messages) and writes
    /// the checkpoints. Each flush's fsyncs run without that log's lock.
    pub fn maintenance(&self) -> LogResult<()> {
        for log in self.logs.values() {
            upkeep(log)?;
        }
        self.checkpoint()
    }

    /// Retention for every log (cleanup.policy=delete). Returns segments deleted.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for (tp, log) in &self.logs {
            match lock(log).apply_retention(now_ms) {
                Ok(outcome) => {
                    if outcome.segments_deleted > 0 {
                        tracing::info!(partition = %tp, segments = outcome.segments_deleted, bytes = outcome.bytes_deleted, "retention deleted segments");
                    }
                    deleted += outcome.segments_deleted;
                }
                Err(error) => tracing::error!(partition = %tp, %error, "retention failed"),
            }
        }
        deleted
    }

    /// Every log, for work done outside the manager's lock (compaction).
    pub fn all_logs(&self) -> Vec<(TopicPartition, Arc<Mutex<Log>>)> {
        self.logs
            .iter()
            .map(|(tp, log)| (tp.clone(), log.clone()))
            .collect()
    }

    /// Flushes every log (advancing recovery points), then writes the checkpoints.
    pub fn flush_all(&self) -> LogResult<()> {
        for log in self.logs.values() {
            lock(log).flush()?;
        }
        self.checkpoint()
    }

    /// Writes the recovery point, log start offset and high watermark checkpoints.
    pub fn checkpoint(&self) -> LogResult<()> {
        let mut recovery = Vec::with_capacity(self.logs.len());
        let mut starts = Vec::with_capacity(self.logs.len());
        let mut high_watermarks = Vec::with_capacity(self.logs.len());
        for (tp, log) in &self.logs {
            let log = lock(log);
            recovery.push(format!(
                "{} {} {}",
                tp.topic,
                tp.partition,
                log.recovery_point()
            ));
            starts.push(format!(
                "{} {} {}",
                tp.topic,
                tp.partition,
                log.log_start_offset()
            ));
            high_watermarks.push(format!(
                "{} {} {}",
                tp.topic,
                tp.partition,
                log.high_watermark()
            ));
        }
        write_checkpoint(
            &self.data_dir.join(RECOVERY_POINT_CHECKPOINT_FILE),
            &recovery,
        )?;
        write_checkpoint(
            &self.data_dir.join(LOG_START_OFFSET_CHECKPOINT_FILE),
            &starts,
        )?;
        write_checkpoint(
            &self.data_dir.join(HIGH_WATERMARK_CHECKPOINT_FILE),
            &high_watermarks,
        )?;
        Ok(())
    }

    /// Clean shutdown: flush and close every log, checkpoint, then write the marker that
    /// lets the next start skip recovery.
    pub fn shutdown(&self) -> LogResult<()> {
        for log in self.logs.values() {
            lock(log).close()?;
        }
        self.checkpoint()?;
        File::create(self.data_dir.join(CLEAN_SHUTDOWN_FILE))?.sync_all()?;
        sync_dir(&self.data_dir)?;
        Ok(())
    }
}

fn lock(log: &Mutex<Log>) -> MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn read_offsets(path: &Path) -> LogResult<HashMap<TopicPartition, i64>> {
    let mut offsets = HashMap::new();
    for line in read_checkpoint(path)?.unwrap_or_default() {
        let mut parts = line.split_whitespace();
        let parsed = (|| {
            let topic = parts.next()?;
            let partition = parts.next()?.parse().ok()?;
            let offset = parts.next()?.parse().ok()?;
            Some((TopicPartition::new(topic, partition), offset))
        })();
        let (tp, offset) = parsed.ok_or_else(|| LogError::CorruptFile {
            path: path.display().to_string(),
            reason: format!("bad line {line:?}"),
        })?;
        offsets.insert(tp, offset);
    }
    Ok(offsets)
}

/// Takes an exclusive advisory lock on `<data>/.lock`, failing if another process holds it.
fn lock_data_dir(data_dir: &Path) -> LogResult<File> {
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(data_dir.join(LOCK_FILE))?;
    // SAFETY: flock on a descriptor we own; no memory is shared with the kernel.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked != 0 {
        return Err(LogError::Io(io::Error::new(
            io::ErrorKind::WouldBlock,
            format!(
                "data directory {} is in use by another process",
                data_dir.display()
            ),
        )));
    }
    Ok(file)
}

/// One compaction pass over every log with cleanup.policy=compact; each log is locked
/// for its own pass only.
pub fn clean_logs(
    logs: &[(TopicPartition, Arc<Mutex<Log>>)],
    now_ms: i64,
    limits: crate::cleaner::CleanerLimits,
) -> crate::cleaner::CleanOutcome {
    let mut total = crate::cleaner::CleanOutcome::default();
    for (tp, log) in logs {
        let mut log = lock(log);
        if !log.config().cleanup_compact {
            continue;
        }
        match log.clean(now_ms, limits, None) {
            Ok(outcome) => {
                if outcome.segments_rewritten > 0 {
                    tracing::info!(partition = %tp, segments = outcome.segments_rewritten, before = outcome.bytes_before, after = outcome.bytes_after, "compacted");
                }
                total.segments_rewritten += outcome.segments_rewritten;
                total.bytes_read += outcome.bytes_read;
                total.bytes_before += outcome.bytes_before;
                total.bytes_after += outcome.bytes_after;
                total.records_removed += outcome.records_removed;
            }
            Err(error) => tracing::error!(partition = %tp, %error, "compaction failed"),
        }
    }
    total
}

/// Flushes `log` if flush.ms or flush.messages asks, holding its lock only to plan and to
/// complete the flush, not across the fsyncs. Returns whether a flush ran (not when it
/// was not due, or one was already running on another thread: a stalled disk under one
/// log then holds up no other's flush, and the request waits for the next append or the
/// next maintenance).
pub fn flush_if_due(log: &Mutex<Log>) -> LogResult<bool> {
    let plan = {
        let mut log = lock(log);
        if !log.flush_due() || log.flush_running() {
            return Ok(false);
        }
        log.begin_flush()?
    };
    if let Some(plan) = plan {
        let synced = plan.run();
        lock(log).finish_flush(plan, synced)?;
    }
    Ok(true)
}

/// Removes the files of `log`'s retired segments, without holding its lock.
fn remove_doomed(log: &Mutex<Log>) {
    let doomed = lock(log).take_doomed();
    for path in doomed {
        match fs::remove_file(&path) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => {
                tracing::warn!(path = %path.display(), %error, "removing a deleted segment's file failed");
            }
            _ => {}
        }
    }
}

/// One log's periodic work, its lock held only briefly: a due flush, then the removal of
/// retired segments' files.
pub fn upkeep(log: &Mutex<Log>) -> LogResult<()> {
    let flushed = flush_if_due(log).map(|_| ());
    remove_doomed(log);
    flushed
}
