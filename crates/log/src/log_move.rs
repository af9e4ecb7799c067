//! Moving a partition's log to another log directory of the same broker
//! (AlterReplicaLogDirs), while the partition keeps serving.
//!
//! Kafka builds a "future" log in the destination and fills it with a fetcher thread from
//! the current one. Strand copies the files instead (they are Kafka's format either way):
//!
//! 1. Without the log's lock, the sealed segments (immutable until retention or compaction
//!    replaces them) and the active segment's bytes so far are copied into
//!    `<dest>/<topic>-<partition>.<tag>-future`, under the byte rate of
//!    replica.alter.log.dirs.io.max.bytes.per.second.
//! 2. Under the lock, the log is closed as for a clean shutdown (flushed, its producer
//!    snapshot and epoch checkpoint written), and what changed since is copied: the
//!    active segment's new bytes, segments rolled, retained or compacted meanwhile, the
//!    small files. Everything is fsynced, then the directories are swapped by renames, the
//!    log is opened again from its new place, and it replaces the old one in its mutex: a
//!    reader or writer waiting on the lock finds it there. Only the tail is copied under
//!    the lock, so the pause is short.
//!
//! A crash at any point loses nothing: the copy is renamed `-moved` only once complete and
//! durable; at start, a `-future` directory is deleted and its move queued again from the
//! start (as Kafka resumes a future replica), a `-moved` one is deleted if the partition is
//! still in its old directory and takes its place if not (the old one had already been
//! renamed `-delete`). A cancelled or failed move leaves the log where it was, and no
//! `-future` directory behind.

use std::collections::HashMap;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use crate::checkpoint::sync_dir;
use crate::dir_health::DirHealth;
use crate::error::{LogError, LogResult};
use crate::file_cache::{SegmentId, SegmentPaths};
use crate::log::Log;
use crate::log_loader::LogOpenState;
use crate::log_manager::TopicPartition;
use crate::throttle::Throttle;

/// Suffix of a copy being made.
pub const FUTURE_SUFFIX: &str = "-future";
/// Suffix of a complete, durable copy not yet in place.
pub const MOVED_SUFFIX: &str = "-moved";

const COPY_CHUNK_BYTES: u64 = 1 << 20;

/// How far a move has got, for DescribeLogDirs' future replica.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MoveProgress {
    /// Bytes copied so far.
    pub bytes: u64,
    /// Offsets below this are in the copy.
    pub end_offset: i64,
}

/// What a move ended with.
#[derive(Debug, PartialEq, Eq)]
pub enum MoveOutcome {
    Moved,
    Cancelled,
}

/// One running move.
#[derive(Debug)]
pub struct LogMove {
    pub tp: TopicPartition,
    /// The log directory the log goes to.
    pub destination: PathBuf,
    /// `<destination>/<topic>-<partition>.<tag>-future`: made when the move is asked for
    /// (as Kafka makes its future replica), so a stop before the move ran leaves it
    /// behind and the next start queues the move again; the copy is made in it.
    future: PathBuf,
    /// Its `<tag>`, also naming the `-moved` copy.
    tag: String,
    cancelled: AtomicBool,
    progress: Mutex<MoveProgress>,
}

/// A segment as phase 1 saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct SegmentSeen {
    id: SegmentId,
    size: u64,
}

impl LogMove {
    pub fn new(tp: TopicPartition, destination: PathBuf) -> Arc<LogMove> {
        // No '.' or '-' in the tag: the partition is what precedes its '.'.
        let tag = format!("{}x{}", std::process::id(), unique_tag());
        let future = destination.join(format!("{tp}.{tag}{FUTURE_SUFFIX}"));
        Arc::new(LogMove {
            tp,
            destination,
            future,
            tag,
            cancelled: AtomicBool::new(false),
            progress: Mutex::new(MoveProgress::default()),
        })
    }

    /// Makes the `-future` directory that stands for the move until it has run.
    pub fn mark_future(&self) -> std::io::Result<()> {
        fs::create_dir_all(&self.future)
    }

    /// Removes the `-future` directory (the move ran, or will not).
    pub fn forget_future(&self) {
        if self.future.exists() {
            let _ = fs::remove_dir_all(&self.future);
        }
    }

    /// Stops the move at its next step; the log stays where it was.
    pub fn cancel(&self) {
        self.cancelled.store(true, Ordering::SeqCst);
    }

    pub fn is_cancelled(&self) -> bool {
        self.cancelled.load(Ordering::SeqCst)
    }

    pub fn progress(&self) -> MoveProgress {
        *self.progress.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, bytes: u64, end_offset: Option<i64>) {
        let mut progress = self.progress.lock().unwrap_or_else(|p| p.into_inner());
        progress.bytes += bytes;
        if let Some(end) = end_offset {
            progress.end_offset = progress.end_offset.max(end);
        }
    }

    /// Moves `log` into the destination (blocking: run it on a thread of its own).
    /// `health` is the destination directory's. On success the log in the mutex lives
    /// there; otherwise it is where it was.
    pub fn run(
        &self,
        log: &Mutex<Log>,
        health: Arc<DirHealth>,
        bytes_per_second: Option<u64>,
    ) -> LogResult<MoveOutcome> {
        let result = if self.is_cancelled() {
            Ok(MoveOutcome::Cancelled)
        } else {
            self.copy_and_swap(log, &health, &self.future, &self.tag, bytes_per_second)
        };
        self.forget_future();
        result
    }

    fn copy_and_swap(
        &self,
        log: &Mutex<Log>,
        health: &Arc<DirHealth>,
        future: &Path,
        tag: &str,
        bytes_per_second: Option<u64>,
    ) -> LogResult<MoveOutcome> {
        let target = self.destination.join(self.tp.to_string());
        // What to copy without the lock.
        let (source, sealed, active, truncations) = {
            let mut guard = lock(log);
            if let Some(reason) = guard.offline_reason() {
                return Err(LogError::Offline(reason));
            }
            if !guard.on_disk {
                // Nothing written yet: the log is made again, empty, in its new place.
                let mut moved = Log::create_deferred(
                    &target,
                    guard.config.clone(),
                    guard.cache.clone(),
                    guard.clock.clone(),
                    guard.log_start_offset,
                );
                moved.set_dir_health(health.clone());
                *guard = moved;
                return Ok(MoveOutcome::Moved);
            }
            let segments: Vec<(i64, SegmentSeen, i64)> = guard
                .segments
                .iter()
                .map(|s| {
                    let seen = SegmentSeen {
                        id: s.id(),
                        size: s.size_bytes(),
                    };
                    (s.base_offset(), seen, s.next_offset())
                })
                .collect();
            let (active, sealed) = segments.split_last().expect("a log has a segment");
            (
                guard.dir.clone(),
                sealed.to_vec(),
                *active,
                guard.upkeep.truncations,
            )
        };
        fs::create_dir_all(future)?;
        let mut throttle = Throttle::new(bytes_per_second);

        // Phase 1: the bulk, without the lock.
        let mut copied: HashMap<i64, SegmentSeen> = HashMap::new();
        for (base, seen, next_offset) in &sealed {
            if self.is_cancelled() {
                return Ok(MoveOutcome::Cancelled);
            }
            match copy_segment(&source, future, *base, &mut throttle) {
                Ok(bytes) => {
                    copied.insert(*base, *seen);
                    self.note(bytes, Some(*next_offset));
                }
                // Retention or compaction got there first: phase 2 sees what is left.
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error.into()),
            }
        }
        let (active_base, active_seen, _) = active;
        let active_paths = SegmentPaths::new(&source, active_base);
        let future_active = SegmentPaths::new(future, active_base);
        let active_copied = copy_range(
            &active_paths.log,
            &future_active.log,
            0,
            active_seen.size,
            &mut throttle,
        )?;
        self.note(active_copied, None);

        // Phase 2: the rest, under the lock.
        let mut guard = lock(log);
        if self.is_cancelled() {
            return Ok(MoveOutcome::Cancelled);
        }
        if let Some(reason) = guard.offline_reason() {
            return Err(LogError::Offline(reason));
        }
        guard.close()?;
        let finished = self.finish_copy(
            &guard,
            future,
            &copied,
            (active_base, active_seen, active_copied),
            truncations,
        );
        if let Err(error) = finished {
            reopen_in_place(&mut guard)?;
            return Err(error.into());
        }
        let old_ids: Vec<SegmentId> = guard.segments.iter().map(|s| s.id()).collect();
        let state = LogOpenState {
            recovery_point: guard.log_end_offset(),
            log_start_offset: guard.log_start_offset,
            high_watermark: guard.high_watermark,
            clean_shutdown: true,
        };
        let parent = source.parent().unwrap_or(Path::new(".")).to_path_buf();
        let moved = self
            .destination
            .join(format!("{}.{tag}{MOVED_SUFFIX}", self.tp));
        let doomed = parent.join(format!("{}.{tag}-delete", self.tp));
        let swapped = (|| -> io::Result<()> {
            fs::rename(future, &moved)?;
            sync_dir(&self.destination)?;
            fs::rename(&source, &doomed)?;
            sync_dir(&parent)?;
            Ok(())
        })();
        if let Err(error) = swapped {
            if doomed.exists() && !source.exists() {
                fs::rename(&doomed, &source)?;
            }
            let _ = fs::remove_dir_all(&moved);
            reopen_in_place(&mut guard)?;
            return Err(error.into());
        }
        // From here the copy is the log: a crash now promotes it at the next start.
        fs::rename(&moved, &target)?;
        sync_dir(&self.destination)?;
        let (mut reopened, _) = Log::open(
            &target,
            guard.config.clone(),
            guard.cache.clone(),
            guard.clock.clone(),
            state,
        )?;
        reopened.set_dir_health(health.clone());
        for id in old_ids {
            guard.cache.invalidate(id);
        }
        *guard = reopened;
        drop(guard);
        if let Err(error) = fs::remove_dir_all(&doomed) {
            tracing::warn!(path = %doomed.display(), %error, "removing a moved log's old directory failed");
        }
        Ok(MoveOutcome::Moved)
    }

    /// Under the lock, the log closed: brings the copy up to date and makes it durable.
    fn finish_copy(
        &self,
        log: &Log,
        future: &Path,
        copied: &HashMap<i64, SegmentSeen>,
        active: (i64, SegmentSeen, u64),
        truncations: u64,
    ) -> io::Result<()> {
        let source = log.dir.clone();
        let mut unthrottled = Throttle::new(None);
        let (active_base, active_seen, active_copied) = active;
        let count = log.segments.len();
        let mut kept = Vec::with_capacity(count);
        for (index, segment) in log.segments.iter().enumerate() {
            let base = segment.base_offset();
            kept.push(base);
            let seen = SegmentSeen {
                id: segment.id(),
                size: segment.size_bytes(),
            };
            let is_active = index + 1 == count;
            let (from, paths) = (
                SegmentPaths::new(&source, base),
                SegmentPaths::new(future, base),
            );
            if !is_active && copied.get(&base) == Some(&seen) {
                continue; // copied in phase 1, unchanged
            }
            let grown = base == active_base
                && seen.id == active_seen.id
                && log.upkeep.truncations == truncations
                && seen.size >= active_copied;
            if grown {
                let bytes = copy_range(
                    &from.log,
                    &paths.log,
                    active_copied,
                    seen.size - active_copied,
                    &mut unthrottled,
                )?;
                fs::copy(&from.offset_index, &paths.offset_index)?;
                fs::copy(&from.time_index, &paths.time_index)?;
                self.note(bytes, None);
            } else {
                let bytes = copy_segment(&source, future, base, &mut unthrottled)?;
                self.note(bytes, None);
            }
        }
        // Segments gone since phase 1 (retention, compaction), and the other files.
        for entry in fs::read_dir(future)? {
            let path = entry?.path();
            if let Some(base) = segment_base(&path) {
                if !kept.contains(&base) {
                    fs::remove_file(&path)?;
                }
            }
        }
        for entry in fs::read_dir(&source)? {
            let entry = entry?;
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let transient = [".deleted", ".cleaned", ".swap", ".tmp"]
                .iter()
                .any(|suffix| name.ends_with(suffix));
            if entry.file_type()?.is_file() && segment_base(&path).is_none() && !transient {
                fs::copy(&path, future.join(&name))?;
            }
        }
        for entry in fs::read_dir(future)? {
            let path = entry?.path();
            crate::fault_injection::before_sync(&path)?;
            File::open(&path)?.sync_all()?;
        }
        sync_dir(future)?;
        self.note(0, Some(log.log_end_offset()));
        Ok(())
    }
}

/// Copies a segment's three files; returns the bytes copied.
fn copy_segment(
    source: &Path,
    target: &Path,
    base: i64,
    throttle: &mut Throttle,
) -> io::Result<u64> {
    let (from, to) = (
        SegmentPaths::new(source, base),
        SegmentPaths::new(target, base),
    );
    let mut bytes = 0;
    for (from, to) in [
        (&from.log, &to.log),
        (&from.offset_index, &to.offset_index),
        (&from.time_index, &to.time_index),
    ] {
        let len = fs::metadata(from)?.len();
        bytes += copy_range(from, to, 0, len, throttle)?;
    }
    Ok(bytes)
}

/// Copies `len` bytes of `from` at `offset` to the same place in `to` (created if need
/// be), in chunks under the throttle; returns the bytes copied (fewer if `from` is
/// shorter).
fn copy_range(
    from: &Path,
    to: &Path,
    offset: u64,
    len: u64,
    throttle: &mut Throttle,
) -> io::Result<u64> {
    let mut source = File::open(from)?;
    source.seek(SeekFrom::Start(offset))?;
    let mut target = OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(false)
        .open(to)?;
    target.set_len(offset)?;
    target.seek(SeekFrom::Start(offset))?;
    let mut done = 0;
    while done < len {
        let chunk = (len - done).min(COPY_CHUNK_BYTES);
        let copied = io::copy(&mut (&mut source).take(chunk), &mut target)?;
        if copied == 0 {
            break;
        }
        done += copied;
        throttle.consumed(copied);
    }
    target.flush()?;
    Ok(done)
}

/// The base offset of a segment file (`<20 digits>.log|index|timeindex`).
fn segment_base(path: &Path) -> Option<i64> {
    let name = path.file_name()?.to_str()?;
    let (stem, extension) = name.split_once('.')?;
    if !matches!(extension, "log" | "index" | "timeindex") || stem.len() != 20 {
        return None;
    }
    stem.parse().ok()
}

/// After a failed move: the log, closed for it, is opened again where it is.
fn reopen_in_place(guard: &mut Log) -> LogResult<()> {
    let state = LogOpenState {
        recovery_point: guard.log_end_offset(),
        log_start_offset: guard.log_start_offset,
        high_watermark: guard.high_watermark,
        clean_shutdown: true,
    };
    let ids: Vec<SegmentId> = guard.segments.iter().map(|s| s.id()).collect();
    let (mut reopened, _) = Log::open(
        &guard.dir,
        guard.config.clone(),
        guard.cache.clone(),
        guard.clock.clone(),
        state,
    )?;
    reopened.set_dir_health(guard.dir_health.clone());
    for id in ids {
        guard.cache.invalidate(id);
    }
    *guard = reopened;
    Ok(())
}

fn unique_tag() -> String {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos());
    format!("{nanos:x}{}", NEXT.fetch_add(1, Ordering::Relaxed))
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
