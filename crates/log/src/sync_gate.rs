//! Group commit for flush-before-ack. Appenders write under the log's lock, then wait here
//! (outside it) until their end offset is durable. The first waiter to find no sync in
//! progress becomes the syncer: it takes every file written so far, fdatasyncs them with
//! no lock held, and wakes everyone its sync covered. Writers arriving meanwhile queue up
//! behind it and are covered by the next sync together, so N concurrent appenders cost
//! far fewer than N syncs.
//!
//! After a failed sync the gate refuses every later wait: the page cache may have dropped
//! the dirty pages (fsyncgate), so nothing written since the last good sync can be
//! promised. The log must be reopened (and recovered) to clear it. The failure takes the
//! log's directory offline too ([`DirHealth`]), as any failed fsync there does.
//!
//! The gate remembers dirty segments by id and base offset, not by open file: holding
//! descriptors here would let a busy page-cache-mode broker exceed the file cache's bound.
//! A sync reopens through the cache if needed; on Linux fsync flushes the file's dirty
//! pages whichever descriptor wrote them.
//!
//! Thread-safe (mutex + condvar). Two ways to wait: `wait_durable` blocks the calling
//! thread; `poll_durable` never does, so an async caller waits without holding a thread:
//! it is either told it is durable, parked with its waker, or handed the sync to run
//! (a `SyncTicket`, run on a blocking thread). A gate has at most one sync running, so
//! async waiters on a partition cost the blocking pool one thread at most, however many
//! there are.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::task::Waker;

use crate::dir_health::DirHealth;
use crate::file_cache::{FileCache, SegmentId, SegmentPaths};

#[derive(Debug)]
pub struct SyncGate {
    dir: PathBuf,
    cache: Arc<FileCache>,
    state: Mutex<GateState>,
    synced: Condvar,
}

#[derive(Debug)]
struct GateState {
    /// Every offset below this is on stable storage.
    durable_end_offset: i64,
    /// Every offset below this has been written (to the page cache).
    written_end_offset: i64,
    /// Segments written since their last sync: id -> (base offset, end offset written).
    dirty: HashMap<SegmentId, (i64, i64)>,
    /// The directory's entries changed (segment created) since the last sync.
    dirty_dir: bool,
    /// The directory itself is new and its entry in the data directory not yet synced.
    new_dir: bool,
    sync_in_progress: bool,
    /// Bumped by every truncation, so a sync that straddles one does not publish an end
    /// offset whose bytes were cut and rewritten meanwhile.
    truncations: u64,
    failure: Option<String>,
    /// The health of the log directory the log lives in (set by its manager).
    dir_health: Option<Arc<DirHealth>>,
    syncs_done: u64,
    /// Async waiters parked until the running sync finishes (one entry per poll; all
    /// woken, and the list emptied, by every sync).
    wakers: Vec<Waker>,
}

/// What `poll_durable` found.
#[derive(Debug)]
pub enum DurableState {
    /// Durable (or never will be: an earlier sync failed).
    Ready(io::Result<()>),
    /// A sync is running; the waker is called when it ends.
    Pending,
    /// No sync is running: the caller must run this one (blocking), then poll again.
    SyncNow(SyncTicket),
}

/// The files one sync covers, taken under the lock and synced without it.
#[derive(Debug)]
struct SyncBatch {
    segments: Vec<(SegmentId, i64, i64)>,
    dir_changed: bool,
    new_dir: bool,
    target: i64,
    truncations: u64,
}

/// A sync handed to an async waiter: blocking, so it belongs on a blocking thread.
/// Dropping it unrun would leave the gate's sync marked as running: `Drop` runs it.
#[derive(Debug)]
pub struct SyncTicket {
    gate: Arc<SyncGate>,
    batch: Option<SyncBatch>,
}

impl SyncTicket {
    /// Syncs the files and wakes every waiter.
    pub fn run(mut self) {
        if let Some(batch) = self.batch.take() {
            drop(self.gate.finish_sync(batch));
        }
    }
}

#[cfg(feature = "fault-injection")]
impl SyncTicket {
    /// The process died with this sync queued or running: nothing reaches the disk and
    /// no one is woken (the gate dies with the process). Dropping it would run it.
    pub fn abandon(mut self) {
        self.batch = None;
    }
}

impl Drop for SyncTicket {
    fn drop(&mut self) {
        if let Some(batch) = self.batch.take() {
            drop(self.gate.finish_sync(batch));
        }
    }
}

impl SyncGate {
    pub fn new(dir: PathBuf, cache: Arc<FileCache>, durable_end_offset: i64) -> Arc<SyncGate> {
        Arc::new(SyncGate {
            dir,
            cache,
            state: Mutex::new(GateState {
                durable_end_offset,
                written_end_offset: durable_end_offset,
                dirty: HashMap::new(),
                dirty_dir: false,
                new_dir: false,
                sync_in_progress: false,
                truncations: 0,
                failure: None,
                dir_health: None,
                syncs_done: 0,
                wakers: Vec::new(),
            }),
            synced: Condvar::new(),
        })
    }

    /// The log directory whose health a failed sync here takes down.
    pub fn set_dir_health(&self, health: Arc<DirHealth>) {
        self.lock().dir_health = Some(health);
    }

    /// Records that segment `id` (at `base_offset`) now holds data up to `end_offset`.
    pub fn note_written(&self, id: SegmentId, base_offset: i64, end_offset: i64) {
        let mut state = self.lock();
        state.written_end_offset = state.written_end_offset.max(end_offset);
        state.dirty.insert(id, (base_offset, end_offset));
    }

    /// A gate for a log whose directory was just created and not synced: the first sync
    /// makes the directory, its files and its entry in the parent durable. Creating a
    /// partition costs no fsync; an empty partition lost to a crash is recreated from
    /// the topic metadata, and one that holds acknowledged data was synced first.
    pub fn for_new_dir(
        dir: PathBuf,
        cache: Arc<FileCache>,
        durable_end_offset: i64,
    ) -> Arc<SyncGate> {
        let gate = SyncGate::new(dir, cache, durable_end_offset);
        {
            let mut state = gate.lock();
            state.dirty_dir = true;
            state.new_dir = true;
        }
        gate
    }

    /// Records that a segment file was created in the log's directory.
    pub fn note_dir_changed(&self) {
        self.lock().dirty_dir = true;
    }

    /// The log was truncated to `end_offset`: nothing at or past it is durable any more.
    pub fn note_truncated(&self, end_offset: i64) {
        let mut state = self.lock();
        state.durable_end_offset = state.durable_end_offset.min(end_offset);
        state.written_end_offset = state.written_end_offset.min(end_offset);
        state.truncations += 1;
    }

    /// The log was emptied and starts again at `offset` (a follower reset to its
    /// leader's log start, or to where the remote store ends): nothing below it exists
    /// to sync, so everything below it counts as durable (its directory synced by the
    /// caller); a sync running meanwhile publishes nothing.
    pub fn note_restarted_at(&self, offset: i64) {
        let mut state = self.lock();
        state.durable_end_offset = offset;
        state.written_end_offset = offset;
        state.dirty.clear();
        state.truncations += 1;
    }

    pub fn durable_end_offset(&self) -> i64 {
        self.lock().durable_end_offset
    }

    /// Syncs performed so far (for tests and metrics).
    pub fn syncs_done(&self) -> u64 {
        self.lock().syncs_done
    }

    /// Blocks until every offset below `end_offset` is durable.
    pub fn wait_durable(&self, end_offset: i64) -> io::Result<()> {
        let mut state = self.lock();
        loop {
            if let Some(failure) = &state.failure {
                return Err(io::Error::other(format!(
                    "an earlier sync failed: {failure}"
                )));
            }
            if state.durable_end_offset >= end_offset {
                return Ok(());
            }
            if state.sync_in_progress {
                state = self
                    .synced
                    .wait(state)
                    .unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            state = self.sync_as_leader(state);
        }
    }

    /// Without blocking: durable, parked (the waker is called when the running sync
    /// ends), or the sync the caller must now run.
    pub fn poll_durable(self: &Arc<Self>, end_offset: i64, waker: &Waker) -> DurableState {
        let mut state = self.lock();
        if let Some(failure) = &state.failure {
            return DurableState::Ready(Err(io::Error::other(format!(
                "an earlier sync failed: {failure}"
            ))));
        }
        if state.durable_end_offset >= end_offset {
            return DurableState::Ready(Ok(()));
        }
        if state.written_end_offset < end_offset {
            // Truncated below it (a demoted leader's tail): it will never be durable.
            return DurableState::Ready(Err(io::Error::other(format!(
                "offsets up to {end_offset} were truncated before they were synced"
            ))));
        }
        if state.sync_in_progress {
            if !state.wakers.iter().any(|w| w.will_wake(waker)) {
                state.wakers.push(waker.clone());
            }
            return DurableState::Pending;
        }
        let batch = Self::start_sync(&mut state);
        DurableState::SyncNow(SyncTicket {
            gate: self.clone(),
            batch: Some(batch),
        })
    }

    /// Syncs everything written so far (periodic flush, shutdown).
    pub fn sync_all(&self) -> io::Result<i64> {
        let target = self.lock().written_end_offset;
        self.wait_durable(target)?;
        Ok(target)
    }

    /// Takes the dirty set, syncs it without the lock, publishes the result.
    fn sync_as_leader<'a>(
        &'a self,
        mut state: MutexGuard<'a, GateState>,
    ) -> MutexGuard<'a, GateState> {
        let batch = Self::start_sync(&mut state);
        drop(state);
        self.finish_sync(batch)
    }

    /// Marks a sync running and takes what it covers.
    fn start_sync(state: &mut GateState) -> SyncBatch {
        state.sync_in_progress = true;
        SyncBatch {
            segments: state
                .dirty
                .iter()
                .map(|(id, (base, end))| (*id, *base, *end))
                .collect(),
            dir_changed: std::mem::take(&mut state.dirty_dir),
            new_dir: std::mem::take(&mut state.new_dir),
            target: state.written_end_offset,
            truncations: state.truncations,
        }
    }

    /// Syncs a batch with no lock held, then publishes it and wakes every waiter.
    fn finish_sync(&self, batch: SyncBatch) -> MutexGuard<'_, GateState> {
        let result = self.sync_files(&batch.segments, batch.dir_changed, batch.new_dir);
        let mut state = self.lock();
        state.sync_in_progress = false;
        match result {
            Ok(()) => {
                for (id, _, end) in &batch.segments {
                    if state
                        .dirty
                        .get(id)
                        .is_some_and(|(_, current_end)| current_end == end)
                    {
                        state.dirty.remove(id);
                    }
                }
                if state.truncations == batch.truncations {
                    state.durable_end_offset = state.durable_end_offset.max(batch.target);
                }
                state.syncs_done += 1;
            }
            Err(error) => {
                state.dirty_dir |= batch.dir_changed;
                state.new_dir |= batch.new_dir;
                state.failure = Some(error.to_string());
                if let Some(health) = &state.dir_health {
                    health.fail(format!("{}: {error}", self.dir.display()));
                }
            }
        }
        self.synced.notify_all();
        for waker in state.wakers.drain(..) {
            waker.wake();
        }
        state
    }

    fn sync_files(
        &self,
        batch: &[(SegmentId, i64, i64)],
        dir_changed: bool,
        new_dir: bool,
    ) -> io::Result<()> {
        crate::fault_injection::before_sync(&self.dir)?;
        for (id, base_offset, _) in batch {
            match self
                .cache
                .get(*id, &SegmentPaths::new(&self.dir, *base_offset))
            {
                Ok(files) => files.log.sync_data()?,
                // Deleted by a truncation or retention since it was written: nothing to keep.
                Err(error) if error.kind() == io::ErrorKind::NotFound => {}
                Err(error) => return Err(error),
            }
        }
        if dir_changed {
            File::open(&self.dir)?.sync_all()?;
        }
        if new_dir {
            if let Some(parent) = self.dir.parent() {
                File::open(parent)?.sync_all()?;
            }
        }
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
