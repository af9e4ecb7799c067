//! Group commit for flush-before-ack. Appenders write under the log's lock, then wait here
//! (outside it) until their end offset is durable. The first waiter to find no sync in
//! progress becomes the syncer: it takes every file written so far, fdatasyncs them with
//! no lock held, and wakes everyone its sync covered. Writers arriving meanwhile queue up
//! behind it and are covered by the next sync together, so N concurrent appenders cost
//! far fewer than N syncs.
//!
//! After a failed sync the gate refuses every later wait: the page cache may have dropped
//! the dirty pages (fsyncgate), so nothing written since the last good sync can be
//! promised. The log must be reopened (and recovered) to clear it.
//!
//! Thread-safe (mutex + condvar); blocking, so async callers use a blocking thread.

use std::collections::HashMap;
use std::fs::File;
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::file_cache::{SegmentFiles, SegmentId};

#[derive(Debug)]
pub struct SyncGate {
    state: Mutex<GateState>,
    synced: Condvar,
}

#[derive(Debug)]
struct GateState {
    /// Every offset below this is on stable storage.
    durable_end_offset: i64,
    /// Every offset below this has been written (to the page cache).
    written_end_offset: i64,
    /// Files written since their last sync, with the end offset written to each.
    dirty: HashMap<SegmentId, (Arc<SegmentFiles>, i64)>,
    /// A directory whose entries changed (segment created) since the last sync.
    dirty_dir: Option<PathBuf>,
    sync_in_progress: bool,
    /// Bumped by every truncation, so a sync that straddles one does not publish an end
    /// offset whose bytes were cut and rewritten meanwhile.
    truncations: u64,
    failure: Option<String>,
    syncs_done: u64,
}

impl SyncGate {
    pub fn new(durable_end_offset: i64) -> Arc<SyncGate> {
        Arc::new(SyncGate {
            state: Mutex::new(GateState {
                durable_end_offset,
                written_end_offset: durable_end_offset,
                dirty: HashMap::new(),
                dirty_dir: None,
                sync_in_progress: false,
                truncations: 0,
                failure: None,
                syncs_done: 0,
            }),
            synced: Condvar::new(),
        })
    }

    /// Records that `files` (segment `id`) now hold data up to `end_offset`.
    pub fn note_written(&self, id: SegmentId, files: Arc<SegmentFiles>, end_offset: i64) {
        let mut state = self.lock();
        state.written_end_offset = state.written_end_offset.max(end_offset);
        state.dirty.insert(id, (files, end_offset));
    }

    /// Records that a directory entry was created in `dir` (it must be synced too).
    pub fn note_dir_changed(&self, dir: PathBuf) {
        self.lock().dirty_dir = Some(dir);
    }

    /// The log was truncated to `end_offset`: nothing at or past it is durable any more.
    pub fn note_truncated(&self, end_offset: i64) {
        let mut state = self.lock();
        state.durable_end_offset = state.durable_end_offset.min(end_offset);
        state.written_end_offset = state.written_end_offset.min(end_offset);
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
                return Err(io::Error::other(format!("an earlier sync failed: {failure}")));
            }
            if state.durable_end_offset >= end_offset {
                return Ok(());
            }
            if state.sync_in_progress {
                state = self.synced.wait(state).unwrap_or_else(|poisoned| poisoned.into_inner());
                continue;
            }
            state = self.sync_as_leader(state);
        }
    }

    /// Syncs everything written so far (periodic flush, shutdown).
    pub fn sync_all(&self) -> io::Result<i64> {
        let target = self.lock().written_end_offset;
        self.wait_durable(target)?;
        Ok(target)
    }

    /// Takes the dirty set, syncs it without the lock, publishes the result.
    fn sync_as_leader<'a>(&'a self, mut state: MutexGuard<'a, GateState>) -> MutexGuard<'a, GateState> {
        state.sync_in_progress = true;
        let batch: Vec<(SegmentId, Arc<SegmentFiles>, i64)> =
            state.dirty.iter().map(|(id, (files, end))| (*id, files.clone(), *end)).collect();
        let dir = state.dirty_dir.take();
        let target = state.written_end_offset;
        let truncations = state.truncations;
        drop(state);

        let result = sync_files(&batch, dir.as_ref());

        let mut state = self.lock();
        state.sync_in_progress = false;
        match result {
            Ok(()) => {
                for (id, _, end) in &batch {
                    if state.dirty.get(id).is_some_and(|(_, current_end)| current_end == end) {
                        state.dirty.remove(id);
                    }
                }
                if state.truncations == truncations {
                    state.durable_end_offset = state.durable_end_offset.max(target);
                }
                state.syncs_done += 1;
            }
            Err(error) => {
                if dir.is_some() && state.dirty_dir.is_none() {
                    state.dirty_dir = dir;
                }
                state.failure = Some(error.to_string());
            }
        }
        self.synced.notify_all();
        state
    }

    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

fn sync_files(batch: &[(SegmentId, Arc<SegmentFiles>, i64)], dir: Option<&PathBuf>) -> io::Result<()> {
    for (_, files, _) in batch {
        files.log.sync_data()?;
    }
    if let Some(dir) = dir {
        File::open(dir)?.sync_all()?;
    }
    Ok(())
}
