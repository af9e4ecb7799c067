//! The Raft log on disk: `raft-log` holds entries as frames `[u32 length][u32 crc32c][JSON
//! entry]`, appended and fdatasynced before Raft is told they are durable; `vote.json` and
//! `purged.json` are replaced atomically. Entries are also kept in memory (the metadata log
//! is small and snapshots purge it). A torn or corrupt frame at the tail (a crash during
//! an append) is cut off on open; anything after it was never acknowledged. A frame whose
//! checksum holds but whose entry does not decode was written whole, by a newer Strand or
//! a bug: the open fails and the file stays as it is, since cutting it could drop
//! committed entries.
//!
//! Not shared: openraft owns the store; readers get a clone of the in-memory entries.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::ops::RangeBounds;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{LogFlushed, LogState, RaftLogStorage};
use openraft::{Entry, ErrorSubject, ErrorVerb, LogId, RaftLogId, RaftLogReader, Vote};

use crate::{io_error, MetadataRaft, NodeId, StorageError, TypeConfig};

const LOG_FILE: &str = "raft-log";
const VOTE_FILE: &str = "vote.json";
const PURGED_FILE: &str = "purged.json";
const COMMITTED_FILE: &str = "committed.json";
/// Largest entry accepted when reading the file back (a CreateTopics of 100k partitions
/// is a few MiB of JSON); anything larger is treated as corruption.
const ENTRY_MAX_BYTES: u32 = 256 * 1024 * 1024;
/// Rewrite the file without purged entries once this many are dead in it.
const PURGED_REWRITE_MIN: usize = 4096;

#[derive(Debug)]
struct Entries<C: MetadataRaft> {
    /// index -> (entry, byte position of its frame in the file)
    by_index: BTreeMap<u64, (Entry<C>, u64)>,
    last_purged: Option<LogId<NodeId>>,
    /// Frames in the file belonging to purged entries.
    dead_frames: usize,
}

impl<C: MetadataRaft> Default for Entries<C> {
    fn default() -> Self {
        Entries {
            by_index: BTreeMap::new(),
            last_purged: None,
            dead_frames: 0,
        }
    }
}

/// `C`: the runtime's Raft types (`MetadataRaft`); production's by default.
#[derive(Debug)]
pub struct LogStore<C: MetadataRaft = TypeConfig> {
    dir: PathBuf,
    entries: Arc<Mutex<Entries<C>>>,
    file: Arc<Mutex<File>>,
}

impl<C: MetadataRaft> Clone for LogStore<C> {
    fn clone(&self) -> Self {
        LogStore {
            dir: self.dir.clone(),
            entries: self.entries.clone(),
            file: self.file.clone(),
        }
    }
}

fn read_json<T: serde::de::DeserializeOwned>(path: &Path) -> anyhow::Result<Option<T>> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(error) => Err(error.into()),
    }
}

fn frame<C: MetadataRaft>(entry: &Entry<C>) -> Vec<u8> {
    let body = serde_json::to_vec(entry).expect("entries serialise");
    let mut out = Vec::with_capacity(body.len() + 8);
    out.extend_from_slice(&(body.len() as u32).to_be_bytes());
    out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

impl<C: MetadataRaft> LogStore<C> {
    /// Opens (creating) the log in `dir`, cutting a torn tail.
    pub fn open(dir: &Path) -> anyhow::Result<LogStore<C>> {
        std::fs::create_dir_all(dir)?;
        let path = dir.join(LOG_FILE);
        // A rewrite cut short before its rename: the log itself is whole.
        match std::fs::remove_file(path.with_extension("tmp")) {
            Err(error) if error.kind() != std::io::ErrorKind::NotFound => return Err(error.into()),
            _ => {}
        }
        let mut file = OpenOptions::new()
            .read(true)
            .append(true)
            .create(true)
            .open(&path)?;
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)?;
        let last_purged: Option<LogId<NodeId>> = read_json(&dir.join(PURGED_FILE))?;
        let mut entries = Entries {
            last_purged,
            ..Entries::default()
        };
        let mut position = 0usize;
        while bytes.len() - position >= 8 {
            let length = u32::from_be_bytes(bytes[position..position + 4].try_into()?);
            let crc = u32::from_be_bytes(bytes[position + 4..position + 8].try_into()?);
            let end = position + 8 + length as usize;
            // Length 0 never comes from `frame` (an entry is JSON); zeroed blocks at the
            // tail (crc32c of nothing is 0) would otherwise pass as an intact frame.
            if length == 0 || length > ENTRY_MAX_BYTES || end > bytes.len() {
                break;
            }
            let body = &bytes[position + 8..end];
            if crc32c::crc32c(body) != crc {
                break;
            }
            let entry = serde_json::from_slice::<Entry<C>>(body).map_err(|error| {
                anyhow::anyhow!(
                    "raft log {}: the entry at byte {position} is intact but does not decode \
                     (written by a newer Strand?): {error}",
                    path.display()
                )
            })?;
            let index = entry.get_log_id().index;
            if last_purged.is_some_and(|purged| index <= purged.index) {
                entries.dead_frames += 1;
            } else {
                // A rewrite after truncation may leave a later duplicate; the later wins.
                entries.by_index.split_off(&index);
                entries.by_index.insert(index, (entry, position as u64));
            }
            position = end;
        }
        if position < bytes.len() {
            tracing::warn!(
                file = %path.display(),
                kept_bytes = position,
                dropped_bytes = bytes.len() - position,
                "raft log: cut a torn or corrupt tail"
            );
            file.set_len(position as u64)?;
            strand_log::fault_injection::before_sync(&path)?;
            file.sync_all()?;
        }
        Ok(LogStore {
            dir: dir.to_path_buf(),
            entries: Arc::new(Mutex::new(entries)),
            file: Arc::new(Mutex::new(file)),
        })
    }

    fn entries(&self) -> std::sync::MutexGuard<'_, Entries<C>> {
        self.entries.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> std::io::Result<()> {
        let bytes = serde_json::to_vec(value).map_err(std::io::Error::other)?;
        strand_log::checkpoint::write_atomically(&self.dir.join(name), &bytes)
    }

    /// Appends entries' frames and fdatasyncs them (blocking: run off the runtime), then
    /// makes them readable.
    fn write_entries(&self, new: Vec<Entry<C>>) -> std::io::Result<()> {
        let file = self.file.lock().unwrap_or_else(|p| p.into_inner());
        let position = file.metadata()?.len();
        let mut bytes = Vec::new();
        let mut framed = Vec::new();
        for entry in new {
            let one = frame(&entry);
            framed.push((entry, position + bytes.len() as u64));
            bytes.extend_from_slice(&one);
        }
        (&*file).write_all(&bytes)?;
        strand_log::fault_injection::before_sync(&self.dir.join(LOG_FILE))?;
        file.sync_data()?;
        let mut entries = self.entries();
        for (entry, at) in framed {
            let index = entry.get_log_id().index;
            entries.by_index.insert(index, (entry, at));
        }
        Ok(())
    }

    /// Rewrites the file with the live entries only (after enough purging).
    fn rewrite(&self, entries: &mut Entries<C>) -> std::io::Result<()> {
        let path = self.dir.join(LOG_FILE);
        // The temp name checkpoints use (`with_extension("tmp")`): fault injection's
        // simulated disk takes a sync of `path` to cover that file about to replace it.
        let temp = path.with_extension("tmp");
        let mut out = File::create(&temp)?;
        let mut position = 0u64;
        for (entry, at) in entries.by_index.values_mut() {
            let bytes = frame(entry);
            out.write_all(&bytes)?;
            *at = position;
            position += bytes.len() as u64;
        }
        strand_log::fault_injection::before_sync(&path)?;
        out.sync_all()?;
        std::fs::rename(&temp, &path)?;
        strand_log::checkpoint::sync_dir(&self.dir)?;
        *self.file.lock().unwrap_or_else(|p| p.into_inner()) =
            OpenOptions::new().read(true).append(true).open(&path)?;
        entries.dead_frames = 0;
        Ok(())
    }
}

/// Runs the store's file work (writes, fsyncs) on a blocking thread, so a slow disk under
/// the metadata log stalls Raft, not a runtime worker serving clients. openraft awaits
/// each storage call before the next, so the order of writes is kept. Outside a tokio
/// runtime (the simulator's executor) the work runs inline, in the order the seed gave.
async fn off_runtime(
    work: impl FnOnce() -> std::io::Result<()> + Send + 'static,
) -> std::io::Result<()> {
    match tokio::runtime::Handle::try_current() {
        Ok(runtime) => runtime
            .spawn_blocking(work)
            .await
            .unwrap_or_else(|error| Err(std::io::Error::other(error))),
        Err(_) => work(),
    }
}

impl<C: MetadataRaft> RaftLogReader<C> for LogStore<C> {
    async fn try_get_log_entries<RB: RangeBounds<u64> + Clone + Debug + Send>(
        &mut self,
        range: RB,
    ) -> Result<Vec<Entry<C>>, StorageError> {
        Ok(self
            .entries()
            .by_index
            .range(range)
            .map(|(_, (entry, _))| entry.clone())
            .collect())
    }
}

impl<C: MetadataRaft> RaftLogStorage<C> for LogStore<C> {
    type LogReader = LogStore<C>;

    async fn get_log_state(&mut self) -> Result<LogState<C>, StorageError> {
        let entries = self.entries();
        let last = entries
            .by_index
            .values()
            .next_back()
            .map(|(entry, _)| *entry.get_log_id());
        Ok(LogState {
            last_purged_log_id: entries.last_purged,
            last_log_id: last.or(entries.last_purged),
        })
    }

    async fn get_log_reader(&mut self) -> Self::LogReader {
        self.clone()
    }

    async fn save_vote(&mut self, vote: &Vote<NodeId>) -> Result<(), StorageError> {
        let (store, vote) = (self.clone(), *vote);
        off_runtime(move || store.write_json(VOTE_FILE, &vote))
            .await
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Write, e))
    }

    async fn read_vote(&mut self) -> Result<Option<Vote<NodeId>>, StorageError> {
        read_json(&self.dir.join(VOTE_FILE))
            .map_err(|e| io_error(ErrorSubject::Vote, ErrorVerb::Read, e))
    }

    /// The commit point is a hint for replaying the log at startup (without it, replay
    /// waits for a leader); it is written without fsync because losing it loses nothing.
    async fn save_committed(
        &mut self,
        committed: Option<LogId<NodeId>>,
    ) -> Result<(), StorageError> {
        let path = self.dir.join(COMMITTED_FILE);
        let temp = self.dir.join(format!("{COMMITTED_FILE}.tmp"));
        let bytes = serde_json::to_vec(&committed).expect("log ids serialise");
        std::fs::write(&temp, bytes)
            .and_then(|()| std::fs::rename(&temp, &path))
            .map_err(|e| io_error(ErrorSubject::Store, ErrorVerb::Write, e))
    }

    async fn read_committed(&mut self) -> Result<Option<LogId<NodeId>>, StorageError> {
        // Written without fsync, so a power cut can leave it empty or torn (its rename
        // reached the disk, its data did not): then there is no hint, not a node that
        // cannot start.
        let path = self.dir.join(COMMITTED_FILE);
        let committed: Option<Option<LogId<NodeId>>> = read_json(&path).unwrap_or_else(|error| {
            tracing::warn!(
                file = %path.display(),
                %error,
                "raft: the commit point hint is unreadable (a power cut after its write?); \
                 replaying the log waits for a leader instead"
            );
            None
        });
        // Never claim more than the log holds (the hint may outlive a torn tail).
        let last = self.get_log_state().await?.last_log_id;
        Ok(committed
            .flatten()
            .filter(|c| last.is_some_and(|l| c.index <= l.index)))
    }

    async fn append<I>(&mut self, new: I, callback: LogFlushed<C>) -> Result<(), StorageError>
    where
        I: IntoIterator<Item = Entry<C>> + Send,
        I::IntoIter: Send,
    {
        let new: Vec<Entry<C>> = new.into_iter().collect();
        let store = self.clone();
        let result = off_runtime(move || store.write_entries(new)).await;
        let failed = result.as_ref().err().map(|e| e.to_string());
        callback.log_io_completed(result);
        match failed {
            Some(error) => Err(io_error(ErrorSubject::Logs, ErrorVerb::Write, error)),
            None => Ok(()),
        }
    }

    async fn truncate(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        let store = self.clone();
        off_runtime(move || {
            // The entries' lock only for the split: readers never wait for the fsync.
            let cut = {
                let mut entries = store.entries();
                let removed = entries.by_index.split_off(&log_id.index);
                removed.values().next().map(|(_, position)| *position)
            };
            if let Some(position) = cut {
                let file = store.file.lock().unwrap_or_else(|p| p.into_inner());
                file.set_len(position)?;
                strand_log::fault_injection::before_sync(&store.dir.join(LOG_FILE))?;
                file.sync_all()?;
            }
            Ok(())
        })
        .await
        .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }

    async fn purge(&mut self, log_id: LogId<NodeId>) -> Result<(), StorageError> {
        let store = self.clone();
        off_runtime(move || {
            store.write_json(PURGED_FILE, &log_id)?;
            let mut entries = store.entries();
            let kept = entries.by_index.split_off(&(log_id.index + 1));
            entries.dead_frames += entries.by_index.len();
            entries.by_index = kept;
            entries.last_purged = Some(log_id);
            if entries.dead_frames >= PURGED_REWRITE_MIN
                && entries.dead_frames > entries.by_index.len()
            {
                store.rewrite(&mut entries)?;
            }
            Ok(())
        })
        .await
        .map_err(|e| io_error(ErrorSubject::Logs, ErrorVerb::Delete, e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::{CommittedLeaderId, EntryPayload};

    fn entry(index: u64) -> Entry<TypeConfig> {
        Entry {
            log_id: LogId::new(CommittedLeaderId::new(1, 1), index),
            payload: EntryPayload::Blank,
        }
    }

    #[tokio::test]
    async fn a_torn_or_corrupt_tail_is_cut_on_open() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = Vec::new();
        for index in 1..=3 {
            bytes.extend_from_slice(&frame(&entry(index)));
        }
        let good = bytes.len();
        let mut fourth = frame(&entry(4));
        let last = fourth.len() - 1;
        fourth[last] ^= 0xff; // checksum no longer matches
        bytes.extend_from_slice(&fourth);
        bytes.extend_from_slice(&frame(&entry(5))[..7]); // torn frame header
        bytes.extend_from_slice(&[0u8; 4096]); // zeroed blocks past it
        std::fs::write(dir.path().join(LOG_FILE), &bytes).unwrap();

        let mut store = LogStore::<TypeConfig>::open(dir.path()).unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_log_id.unwrap().index, 3);
        assert_eq!(
            std::fs::metadata(dir.path().join(LOG_FILE)).unwrap().len(),
            good as u64
        );
        let entries = store.try_get_log_entries(1..).await.unwrap();
        assert_eq!(entries.len(), 3);

        store
            .truncate(LogId::new(CommittedLeaderId::new(1, 1), 2))
            .await
            .unwrap();
        drop(store);
        let mut store = LogStore::<TypeConfig>::open(dir.path()).unwrap();
        assert_eq!(
            store
                .get_log_state()
                .await
                .unwrap()
                .last_log_id
                .unwrap()
                .index,
            1
        );
        store
            .purge(LogId::new(CommittedLeaderId::new(1, 1), 1))
            .await
            .unwrap();
        drop(store);
        let mut store = LogStore::<TypeConfig>::open(dir.path()).unwrap();
        let state = store.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id.unwrap().index, 1);
        assert_eq!(state.last_log_id.unwrap().index, 1);
        assert!(store.try_get_log_entries(0..).await.unwrap().is_empty());
    }

    /// What a power cut leaves of a file renamed into place without fsync: the name
    /// with no data (found by the nemesis' power-loss fault: the node could not start).
    #[tokio::test]
    async fn an_empty_or_torn_commit_point_hint_is_no_hint() {
        for damaged in [&b""[..], &b"{\"leader_id\":{\"te"[..]] {
            let dir = tempfile::tempdir().unwrap();
            std::fs::write(dir.path().join(LOG_FILE), frame(&entry(1))).unwrap();
            std::fs::write(dir.path().join(COMMITTED_FILE), damaged).unwrap();
            let mut store = LogStore::<TypeConfig>::open(dir.path()).unwrap();
            assert_eq!(store.read_committed().await.unwrap(), None);
            store
                .save_committed(Some(LogId::new(CommittedLeaderId::new(1, 1), 1)))
                .await
                .unwrap();
            assert_eq!(store.read_committed().await.unwrap().unwrap().index, 1);
        }
    }

    #[test]
    fn an_intact_entry_that_does_not_decode_fails_the_open_and_keeps_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let mut bytes = frame(&entry(1));
        // A whole frame, checksum and all, of an entry this build cannot read: as a newer
        // Strand would write one with a record kind added.
        let body = br#"{"log_id":{"leader_id":{"term":1,"node_id":1},"index":2},"payload":{"Normal":{"version":2,"id":{"term":1,"seq":0},"follows":null,"records":[{"NewKind":{}}]}}}"#;
        bytes.extend_from_slice(&(body.len() as u32).to_be_bytes());
        bytes.extend_from_slice(&crc32c::crc32c(body).to_be_bytes());
        bytes.extend_from_slice(body);
        bytes.extend_from_slice(&frame(&entry(3)));
        std::fs::write(dir.path().join(LOG_FILE), &bytes).unwrap();

        let error = LogStore::<TypeConfig>::open(dir.path())
            .unwrap_err()
            .to_string();
        assert!(error.contains("does not decode"), "{error}");
        assert_eq!(std::fs::read(dir.path().join(LOG_FILE)).unwrap(), bytes);
    }

    #[test]
    fn entries_written_when_the_log_held_commands_still_read() {
        let legacy = r#"{"log_id":{"leader_id":{"term":1,"node_id":1},"index":7},"payload":{"Normal":{"DeleteTopics":{"names":["t"]}}}}"#;
        let entry: Entry<TypeConfig> = serde_json::from_str(legacy).unwrap();
        assert!(matches!(
            entry.payload,
            EntryPayload::Normal(strand_metadata::MetadataEntry::Command(
                strand_metadata::ControllerCommand::DeleteTopics { .. }
            ))
        ));
    }
}
