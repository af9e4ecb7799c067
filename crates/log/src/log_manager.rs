//! Every partition log of a broker, over one or more log directories (Kafka's log.dirs):
//! discovery at startup, placement and creation, deletion, each directory's checkpoints
//! (recovery points, log start offsets, high watermarks) and clean-shutdown marker, and
//! each directory's health. Logs share one bounded [`FileCache`], so open files are
//! bounded by the cache, not by the number of partitions; no thread per partition.
//!
//! Layout (Kafka's), in each directory: `<dir>/<topic>-<partition>/<20-digit
//! base>.{log,index,timeindex}`, `<dir>/recovery-point-offset-checkpoint`,
//! `log-start-offset-checkpoint`, `replication-offset-checkpoint`, and
//! `.strand_clean_shutdown` while stopped cleanly. A new partition goes to the online
//! directory holding the fewest (Kafka's rule). A storage failure in one directory takes
//! that directory offline ([`DirHealth`]) and leaves the others serving; a directory
//! other than the first that cannot be opened at start starts offline (the first holds
//! the broker's metadata: without it the broker does not start, as on Kafka).
//!
//! Thread-safety: the map of logs is behind `&mut self` for creation and deletion; each log
//! is an `Arc<Mutex<Log>>` the broker locks per operation.

use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use crate::checkpoint::{read_checkpoint, sync_dir, write_checkpoint};
use crate::clock::{Clock, SystemClock};
use crate::config::LogConfig;
use crate::dir_health::DirHealth;
use crate::error::{LogError, LogResult};
use crate::file_cache::{FileCache, FILE_CACHE_DEFAULT_SEGMENTS};
use crate::log::Log;
use crate::log_loader::{LogOpenState, RecoveryReport};
use crate::log_move::{LogMove, MoveOutcome, MoveProgress, FUTURE_SUFFIX, MOVED_SUFFIX};

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

/// One log directory.
#[derive(Debug)]
struct LogDir {
    path: PathBuf,
    health: Arc<DirHealth>,
    /// Held for the manager's lifetime: one process per directory (None if the directory
    /// could not be opened at start).
    _lock_file: Option<File>,
}

/// What a caller sees of a log directory: its path and its health, which the caller may
/// keep and read without the manager's lock (a directory's health only ever worsens).
#[derive(Debug, Clone)]
pub struct LogDirState {
    pub path: PathBuf,
    pub health: Arc<DirHealth>,
}

impl LogDirState {
    /// Why the directory is offline, if it is.
    pub fn failure(&self) -> Option<&str> {
        self.health.failure()
    }
}

#[derive(Debug)]
struct HostedLog {
    /// Index into the manager's directories.
    dir: usize,
    log: Arc<Mutex<Log>>,
}

/// Why a move between directories is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MoveRefused {
    /// The destination is not one of the log directories (LOG_DIR_NOT_FOUND).
    UnknownDir,
    /// The destination, or the log, is offline (KAFKA_STORAGE_ERROR).
    Offline,
    /// No log of this partition here (yet): it will be created in the destination.
    NotHosted,
}

/// A move to run on a thread of its own ([`MoveJob::run`]), then to report back with
/// [`LogManager::finish_move`].
#[derive(Debug)]
pub struct MoveJob {
    pub log_move: Arc<LogMove>,
    log: Arc<Mutex<Log>>,
    health: Arc<DirHealth>,
}

impl MoveJob {
    pub fn run(&self, bytes_per_second: Option<u64>) -> LogResult<MoveOutcome> {
        self.log_move
            .run(&self.log, self.health.clone(), bytes_per_second)
    }
}

#[derive(Debug)]
pub struct LogManager {
    dirs: Vec<LogDir>,
    options: LogManagerOptions,
    cache: Arc<FileCache>,
    logs: HashMap<TopicPartition, HostedLog>,
    /// Moves between directories under way (queued or running).
    moves: HashMap<TopicPartition, Arc<LogMove>>,
    /// The queued ones, in order: one per partition at most.
    pending: VecDeque<MoveJob>,
    /// Where partitions not here yet go when created (AlterReplicaLogDirs before them).
    preferred: HashMap<TopicPartition, usize>,
    previous_shutdown_clean: bool,
}

impl LogManager {
    /// Opens (creating if needed) the log directories and every log in them, recovering
    /// a directory's logs if the previous run did not shut it down cleanly. `dirs` must
    /// not be empty; the first must open (it holds the broker's metadata), the others
    /// start offline if they cannot be read.
    pub fn open<P: AsRef<Path>>(
        dirs: &[P],
        options: LogManagerOptions,
    ) -> LogResult<(LogManager, Vec<(TopicPartition, RecoveryReport)>)> {
        if dirs.is_empty() {
            return Err(LogError::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no log directory given",
            )));
        }
        let cache = FileCache::new(options.file_cache_segments);
        let mut manager = LogManager {
            dirs: Vec::new(),
            options,
            cache,
            logs: HashMap::new(),
            moves: HashMap::new(),
            pending: VecDeque::new(),
            preferred: HashMap::new(),
            previous_shutdown_clean: true,
        };
        let mut reports = Vec::new();
        let mut copies = Vec::new();
        let mut interrupted = Vec::new();
        for (index, path) in dirs.iter().enumerate() {
            let path = path.as_ref();
            if manager.dirs.iter().any(|dir| same_dir(&dir.path, path)) {
                return Err(LogError::Io(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("log directory {} is listed twice", path.display()),
                )));
            }
            match manager.open_dir(index, path, &mut reports, &mut copies, &mut interrupted) {
                Ok(()) => {}
                // Another process, duplicate partitions, damaged data: not a failed disk.
                Err(error) if index == 0 || !is_disk_failure(&error) => return Err(error),
                Err(error) => {
                    tracing::error!(log_dir = %path.display(), %error, "log directory cannot be opened; it stays offline");
                    let health = Arc::new(DirHealth::default());
                    health.fail(format!("cannot be opened: {error}"));
                    manager.logs.retain(|_, hosted| hosted.dir != index);
                    reports.retain(|(tp, _)| manager.logs.contains_key(tp));
                    manager.dirs.push(LogDir {
                        path: path.to_path_buf(),
                        health,
                        _lock_file: None,
                    });
                }
            }
        }
        manager.settle_moves(copies, &mut reports)?;
        manager.resume_moves(interrupted);
        Ok((manager, reports))
    }

    /// Moves a stop interrupted, queued or copying (their `-future` directory was left
    /// behind, and dropped): queued again from the start, as Kafka resumes a future
    /// replica.
    fn resume_moves(&mut self, interrupted: Vec<(usize, TopicPartition)>) {
        for (index, tp) in interrupted {
            let destination = self.dirs[index].path.clone();
            match self.begin_move(&tp, &destination) {
                Ok(true) => {
                    tracing::info!(partition = %tp, log_dir = %destination.display(), "resuming a log move a stop interrupted")
                }
                Ok(false) => {}
                Err(refused) => {
                    tracing::warn!(partition = %tp, log_dir = %destination.display(), ?refused, "a log move a stop interrupted cannot resume")
                }
            }
        }
    }

    /// Whether moves wait for the mover (resumed at open, or asked for).
    pub fn has_queued_moves(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Complete copies of moves a crash interrupted (see [`crate::log_move`]): dropped if
    /// the partition is still in its old directory, put in place if not.
    fn settle_moves(
        &mut self,
        copies: Vec<(usize, TopicPartition, PathBuf)>,
        reports: &mut Vec<(TopicPartition, RecoveryReport)>,
    ) -> LogResult<()> {
        for (index, tp, copy) in copies {
            if self.logs.contains_key(&tp) || !self.dirs[index].health.is_online() {
                fs::remove_dir_all(&copy)?;
                continue;
            }
            let target = self.dirs[index].path.join(tp.to_string());
            fs::rename(&copy, &target)?;
            sync_dir(&self.dirs[index].path)?;
            tracing::info!(partition = %tp, log_dir = %self.dirs[index].path.display(), "finished a log move interrupted by a crash");
            let (mut log, report) = Log::open(
                &target,
                self.options.default_config.clone(),
                self.cache.clone(),
                self.options.clock.clone(),
                LogOpenState {
                    recovery_point: 0,
                    log_start_offset: 0,
                    high_watermark: 0,
                    clean_shutdown: true,
                },
            )?;
            log.set_dir_health(self.dirs[index].health.clone());
            reports.push((tp.clone(), report));
            let log = Arc::new(Mutex::new(log));
            self.logs.insert(tp, HostedLog { dir: index, log });
        }
        Ok(())
    }

    /// Opens one directory (pushed as `self.dirs[index]`) and the logs in it.
    fn open_dir(
        &mut self,
        index: usize,
        path: &Path,
        reports: &mut Vec<(TopicPartition, RecoveryReport)>,
        copies: &mut Vec<(usize, TopicPartition, PathBuf)>,
        interrupted: &mut Vec<(usize, TopicPartition)>,
    ) -> LogResult<()> {
        fs::create_dir_all(path)?;
        let lock_file = lock_data_dir(path)?;
        let marker = path.join(CLEAN_SHUTDOWN_FILE);
        let clean = marker.exists();
        if clean {
            // From here on a crash must be treated as unclean.
            fs::remove_file(&marker)?;
            sync_dir(path)?;
        }
        self.previous_shutdown_clean &= clean;
        let recovery_points = read_offsets(&path.join(RECOVERY_POINT_CHECKPOINT_FILE))?;
        let log_starts = read_offsets(&path.join(LOG_START_OFFSET_CHECKPOINT_FILE))?;
        let high_watermarks = read_offsets(&path.join(HIGH_WATERMARK_CHECKPOINT_FILE))?;
        let health = Arc::new(DirHealth::default());
        for entry in fs::read_dir(path)? {
            let entry = entry?;
            if !entry.file_type()?.is_dir() {
                continue;
            }
            let name = entry.file_name().to_string_lossy().into_owned();
            if let Some(future) = name.strip_suffix(FUTURE_SUFFIX) {
                // `<topic>-<partition>.<tag>-future`: a copy a stop interrupted.
                if let Some(tp) = future
                    .rsplit_once('.')
                    .and_then(|(tp, _)| TopicPartition::from_dir_name(tp))
                {
                    interrupted.push((index, tp));
                }
                fs::remove_dir_all(entry.path())?;
                continue;
            }
            if name.ends_with(DELETE_SUFFIX) {
                fs::remove_dir_all(entry.path())?;
                continue;
            }
            if let Some(moved) = name.strip_suffix(MOVED_SUFFIX) {
                // `<topic>-<partition>.<tag>-moved`
                if let Some(tp) = moved
                    .rsplit_once('.')
                    .and_then(|(tp, _)| TopicPartition::from_dir_name(tp))
                {
                    copies.push((index, tp, entry.path()));
                }
                continue;
            }
            let Some(tp) = TopicPartition::from_dir_name(&name) else {
                continue;
            };
            if let Some(other) = self.logs.get(&tp) {
                // Kafka refuses to start too: which copy is the partition's is unknown.
                return Err(LogError::CorruptFile {
                    path: entry.path().display().to_string(),
                    reason: format!(
                        "partition {tp} is also in {}",
                        self.dir_path(other.dir).display()
                    ),
                });
            }
            let state = LogOpenState {
                recovery_point: recovery_points.get(&tp).copied().unwrap_or(0),
                log_start_offset: log_starts.get(&tp).copied().unwrap_or(0),
                high_watermark: high_watermarks.get(&tp).copied().unwrap_or(0),
                clean_shutdown: clean,
            };
            let (mut log, report) = Log::open(
                &entry.path(),
                self.options.default_config.clone(),
                self.cache.clone(),
                self.options.clock.clone(),
                state,
            )?;
            log.set_dir_health(health.clone());
            if report != RecoveryReport::default() {
                reports.push((tp.clone(), report));
            }
            let log = Arc::new(Mutex::new(log));
            self.logs.insert(tp, HostedLog { dir: index, log });
        }
        self.dirs.push(LogDir {
            path: path.to_path_buf(),
            health,
            _lock_file: Some(lock_file),
        });
        Ok(())
    }

    fn dir_path(&self, index: usize) -> &Path {
        // While a directory is being opened its logs point past the list.
        self.dirs
            .get(index)
            .map_or(Path::new("(being opened)"), |dir| &dir.path)
    }

    /// Every log directory, in the order given, with its health.
    pub fn dirs(&self) -> Vec<LogDirState> {
        self.dirs
            .iter()
            .map(|dir| LogDirState {
                path: dir.path.clone(),
                health: dir.health.clone(),
            })
            .collect()
    }

    /// The directory `tp`'s log lives in.
    pub fn dir_of(&self, tp: &TopicPartition) -> Option<&Path> {
        self.logs.get(tp).map(|hosted| self.dir_path(hosted.dir))
    }

    /// Takes a directory offline (a failure found outside its logs, e.g. writing a file
    /// of the broker's own there). False if `path` is not one of the directories.
    pub fn fail_dir(&self, path: &Path, reason: &str) -> bool {
        match self.dirs.iter().find(|dir| dir.path == path) {
            Some(dir) => {
                if dir.health.fail(reason) {
                    tracing::error!(log_dir = %path.display(), reason, "log directory offline");
                }
                true
            }
            None => false,
        }
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
        self.logs.get(tp).map(|hosted| hosted.log.clone())
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
    /// first write or [`Log::materialize`] (see [`Log::create_deferred`]). A new log goes
    /// to the online directory with the fewest logs; with none online it is refused.
    pub fn get_or_create_deferred(
        &mut self,
        tp: &TopicPartition,
        config: Option<Arc<LogConfig>>,
    ) -> LogResult<Arc<Mutex<Log>>> {
        if let Some(hosted) = self.logs.get(tp) {
            return Ok(hosted.log.clone());
        }
        if !is_valid_topic_name(&tp.topic) || tp.partition < 0 {
            return Err(LogError::InvalidRecordSet(format!(
                "invalid topic partition {tp}"
            )));
        }
        let preferred = self
            .preferred
            .remove(tp)
            .filter(|&index| self.dirs[index].health.is_online());
        let Some(index) = preferred.or_else(|| self.placement()) else {
            return Err(LogError::Offline(
                "every log directory is offline".to_string(),
            ));
        };
        let config = config.unwrap_or_else(|| self.options.default_config.clone());
        let dir = &self.dirs[index];
        let mut log = Log::create_deferred(
            &dir.path.join(tp.to_string()),
            config,
            self.cache.clone(),
            self.options.clock.clone(),
            0,
        );
        log.set_dir_health(dir.health.clone());
        let log = Arc::new(Mutex::new(log));
        self.logs.insert(
            tp.clone(),
            HostedLog {
                dir: index,
                log: log.clone(),
            },
        );
        Ok(log)
    }

    /// Starts moving `tp`'s log to the log directory `destination` (AlterReplicaLogDirs):
    /// true if a move was queued ([`LogManager::next_move`] hands it out); false if the log
    /// is there already (a move elsewhere under way is cancelled, as Kafka does) or on its
    /// way there.
    pub fn begin_move(
        &mut self,
        tp: &TopicPartition,
        destination: &Path,
    ) -> Result<bool, MoveRefused> {
        let index = self.dir_index(destination)?;
        let dir = &self.dirs[index];
        let hosted = self.logs.get(tp).ok_or(MoveRefused::NotHosted)?;
        if lock(&hosted.log).is_offline() {
            return Err(MoveRefused::Offline);
        }
        if let Some(running) = self.moves.get(tp) {
            if running.destination == dir.path {
                return Ok(false);
            }
            self.cancel_move(tp);
        }
        let hosted = &self.logs[tp];
        let dir = &self.dirs[index];
        if hosted.dir == index {
            return Ok(false);
        }
        let log_move = LogMove::new(tp.clone(), dir.path.clone());
        if let Err(error) = log_move.mark_future() {
            // The move still runs; only a stop before it would forget it.
            tracing::warn!(partition = %tp, log_dir = %dir.path.display(), %error, "cannot mark a queued log move on disk");
        }
        self.moves.insert(tp.clone(), log_move.clone());
        self.pending.push_back(MoveJob {
            log_move,
            log: hosted.log.clone(),
            health: dir.health.clone(),
        });
        Ok(true)
    }

    /// The next queued move, for the thread that runs them. At most one per partition is
    /// queued: a cancelled move leaves the queue with its cancel.
    pub fn next_move(&mut self) -> Option<MoveJob> {
        self.pending.pop_front()
    }

    /// Remembers `destination` for `tp`, not here yet: created here later, it goes there
    /// (AlterReplicaLogDirs before the replica exists). The caller remembers only
    /// partitions of known topics, so this stays bounded by the cluster's partitions.
    pub fn prefer_dir(
        &mut self,
        tp: &TopicPartition,
        destination: &Path,
    ) -> Result<(), MoveRefused> {
        let index = self.dir_index(destination)?;
        self.preferred.insert(tp.clone(), index);
        Ok(())
    }

    /// The online log directory `path` names (as configured, or the same directory).
    fn dir_index(&self, path: &Path) -> Result<usize, MoveRefused> {
        let index = self
            .dirs
            .iter()
            .position(|dir| dir.path == path || same_dir(&dir.path, path))
            .ok_or(MoveRefused::UnknownDir)?;
        if self.dirs[index].health.is_online() {
            Ok(index)
        } else {
            Err(MoveRefused::Offline)
        }
    }

    /// Stops `tp`'s move, queued or running.
    fn cancel_move(&mut self, tp: &TopicPartition) {
        if let Some(running) = self.moves.remove(tp) {
            running.cancel();
            let queued = self.pending.len();
            self.pending
                .retain(|job| !Arc::ptr_eq(&job.log_move, &running));
            if self.pending.len() < queued {
                // Never started: nothing else will remove its mark.
                running.forget_future();
            }
        }
    }

    /// Records how a move's job ended: a moved log now counts in its new directory.
    pub fn finish_move(&mut self, job: &MoveJob, outcome: &LogResult<MoveOutcome>) {
        let log_move = &job.log_move;
        if self
            .moves
            .get(&log_move.tp)
            .is_some_and(|running| Arc::ptr_eq(running, log_move))
        {
            self.moves.remove(&log_move.tp);
        }
        let index = self
            .dirs
            .iter()
            .position(|d| d.path == log_move.destination);
        if let (Ok(MoveOutcome::Moved), Some(index), Some(hosted)) =
            (outcome, index, self.logs.get_mut(&log_move.tp))
        {
            if Arc::ptr_eq(&hosted.log, &job.log) {
                hosted.dir = index;
            }
        }
    }

    /// The moves under way: (partition, destination directory, progress).
    pub fn moves(&self) -> Vec<(TopicPartition, PathBuf, MoveProgress)> {
        self.moves
            .values()
            .map(|m| (m.tp.clone(), m.destination.clone(), m.progress()))
            .collect()
    }

    /// The online directory holding the fewest logs (the first of those tied).
    fn placement(&self) -> Option<usize> {
        let mut counts = vec![0usize; self.dirs.len()];
        for hosted in self.logs.values() {
            counts[hosted.dir] += 1;
        }
        (0..self.dirs.len())
            .filter(|&index| self.dirs[index].health.is_online())
            .min_by_key(|&index| (counts[index], index))
    }

    /// Removes a partition's log: renamed aside first (so a crash mid-delete finishes the
    /// delete at the next start), then removed. In an offline directory the files stay
    /// (the next start finds them belonging to no topic).
    pub fn delete(&mut self, tp: &TopicPartition) -> LogResult<bool> {
        self.preferred.remove(tp);
        self.cancel_move(tp);
        let Some(hosted) = self.logs.remove(tp) else {
            return Ok(false);
        };
        let parent = self.dirs[hosted.dir].path.clone();
        let mut log = lock(&hosted.log);
        for segment in log.segments.iter() {
            self.cache.invalidate(segment.id());
        }
        if !log.mark_deleted() {
            return Ok(true); // never written: no directory to remove
        }
        if let Some(failure) = self.dirs[hosted.dir].health.failure() {
            return Err(LogError::Offline(failure.to_string()));
        }
        let doomed = parent.join(format!("{tp}.{}{DELETE_SUFFIX}", std::process::id()));
        fs::rename(log.dir(), &doomed)?;
        sync_dir(&parent)?;
        fs::remove_dir_all(&doomed)?;
        Ok(true)
    }

    /// Runs periodic per-log work (producer expiry, flush.ms / flush.messages) and writes
    /// the checkpoints. Each flush's fsyncs run without that log's lock.
    pub fn maintenance(&self) -> LogResult<()> {
        let mut first_error = None;
        for hosted in self.logs.values() {
            if let Err(error) = upkeep(&hosted.log) {
                first_error.get_or_insert(error);
            }
        }
        self.checkpoint()?;
        first_error.map_or(Ok(()), Err)
    }

    /// Retention for every log (cleanup.policy=delete). Returns segments deleted.
    pub fn apply_retention(&self, now_ms: i64) -> usize {
        let mut deleted = 0;
        for (tp, hosted) in &self.logs {
            match lock(&hosted.log).apply_retention(now_ms) {
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
            .map(|(tp, hosted)| (tp.clone(), hosted.log.clone()))
            .collect()
    }

    /// Flushes every log of the online directories (advancing recovery points), then
    /// writes the checkpoints.
    pub fn flush_all(&self) -> LogResult<()> {
        for hosted in self.online_logs() {
            lock(&hosted.log).flush()?;
        }
        self.checkpoint()
    }

    fn online_logs(&self) -> impl Iterator<Item = &HostedLog> {
        self.logs
            .values()
            .filter(|hosted| self.dirs[hosted.dir].health.is_online())
    }

    /// Writes each online directory's recovery point, log start offset and high watermark
    /// checkpoints. A directory whose checkpoint cannot be written goes offline (Kafka's
    /// rule); the others are still written, and the first failure is returned.
    pub fn checkpoint(&self) -> LogResult<()> {
        let mut first_error = None;
        for (index, dir) in self.dirs.iter().enumerate() {
            if !dir.health.is_online() {
                continue;
            }
            if let Err(error) = self.checkpoint_dir(index) {
                // A full disk is not a failed one: the next checkpoint tries again once
                // space is freed, as every write does.
                if let LogError::Io(io_error) = &error {
                    if io_error.kind() != io::ErrorKind::StorageFull {
                        self.fail_dir(&dir.path, &format!("writing a checkpoint: {io_error}"));
                    }
                }
                first_error.get_or_insert(error);
            }
        }
        first_error.map_or(Ok(()), Err)
    }

    fn checkpoint_dir(&self, index: usize) -> LogResult<()> {
        let mut recovery = Vec::new();
        let mut starts = Vec::new();
        let mut high_watermarks = Vec::new();
        for (tp, hosted) in self.logs.iter().filter(|(_, h)| h.dir == index) {
            let log = lock(&hosted.log);
            let line = |offset: i64| format!("{} {} {}", tp.topic, tp.partition, offset);
            recovery.push(line(log.recovery_point()));
            starts.push(line(log.log_start_offset()));
            high_watermarks.push(line(log.high_watermark()));
        }
        let path = &self.dirs[index].path;
        write_checkpoint(&path.join(RECOVERY_POINT_CHECKPOINT_FILE), &recovery)?;
        write_checkpoint(&path.join(LOG_START_OFFSET_CHECKPOINT_FILE), &starts)?;
        write_checkpoint(&path.join(HIGH_WATERMARK_CHECKPOINT_FILE), &high_watermarks)?;
        Ok(())
    }

    /// Clean shutdown: flush and close every log, checkpoint, then write the marker that
    /// lets the next start skip recovery, in each online directory. An offline directory
    /// gets no marker: the next start recovers it.
    pub fn shutdown(&self) -> LogResult<()> {
        for running in self.moves.values() {
            running.cancel();
        }
        // Shutdown takes `&self`: the queued jobs stay, cancelled, and do nothing if run.
        for hosted in self.online_logs() {
            lock(&hosted.log).close()?;
        }
        self.checkpoint()?;
        for dir in self.dirs.iter().filter(|dir| dir.health.is_online()) {
            File::create(dir.path.join(CLEAN_SHUTDOWN_FILE))?.sync_all()?;
            sync_dir(&dir.path)?;
        }
        Ok(())
    }
}

/// Whether two paths name the same directory (compared as given when one does not exist
/// yet).
fn same_dir(a: &Path, b: &Path) -> bool {
    match (fs::canonicalize(a), fs::canonicalize(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => a == b,
    }
}

/// An error that says the disk failed (the directory cannot be made, read or locked),
/// rather than that its contents are wrong or another process holds it.
fn is_disk_failure(error: &LogError) -> bool {
    matches!(error, LogError::Io(io_error) if io_error.kind() != io::ErrorKind::WouldBlock)
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
pub fn remove_doomed(log: &Mutex<Log>) {
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
