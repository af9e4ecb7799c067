//! The leader epoch cache: for each leader epoch, the first offset written in it
//! (KIP-101, KIP-279). Followers truncate by it after a leader change rather than by the
//! high watermark. Checkpointed to `leader-epoch-checkpoint` in the partition directory.
//!
//! Invariant: entries are strictly increasing in both epoch and start offset.

use std::path::{Path, PathBuf};

use crate::checkpoint::{read_checkpoint, write_checkpoint_with, Sync};
use crate::error::{LogError, LogResult};

pub const LEADER_EPOCH_CHECKPOINT_FILE: &str = "leader-epoch-checkpoint";
pub const UNDEFINED_EPOCH: i32 = -1;
pub const UNDEFINED_EPOCH_OFFSET: i64 = -1;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpochEntry {
    pub epoch: i32,
    pub start_offset: i64,
}

#[derive(Debug)]
pub struct LeaderEpochCache {
    path: PathBuf,
    entries: Vec<EpochEntry>,
}

impl LeaderEpochCache {
    /// An empty cache for a new log, checkpointed to `dir` once it has entries.
    pub fn empty(dir: &Path) -> LeaderEpochCache {
        LeaderEpochCache {
            path: dir.join(LEADER_EPOCH_CHECKPOINT_FILE),
            entries: Vec::new(),
        }
    }

    /// Loads the checkpoint in `dir`, or starts empty when there is none.
    pub fn load(dir: &Path) -> LogResult<LeaderEpochCache> {
        let path = dir.join(LEADER_EPOCH_CHECKPOINT_FILE);
        let mut entries = Vec::new();
        if let Some(lines) = read_checkpoint(&path)? {
            for line in lines {
                let mut parts = line.split_whitespace();
                let parsed = (|| {
                    let epoch = parts.next()?.parse().ok()?;
                    let start_offset = parts.next()?.parse().ok()?;
                    Some(EpochEntry {
                        epoch,
                        start_offset,
                    })
                })();
                let entry = parsed.ok_or_else(|| LogError::CorruptFile {
                    path: path.display().to_string(),
                    reason: format!("bad epoch line {line:?}"),
                })?;
                entries.push(entry);
            }
        }
        let mut cache = LeaderEpochCache {
            path,
            entries: Vec::new(),
        };
        for entry in entries {
            cache.assign(entry.epoch, entry.start_offset);
        }
        Ok(cache)
    }

    pub fn entries(&self) -> &[EpochEntry] {
        &self.entries
    }

    pub fn latest(&self) -> Option<EpochEntry> {
        self.entries.last().copied()
    }

    /// Records that `epoch` began at `start_offset`. Ignored unless the epoch is newer than
    /// the latest; an entry whose offset is not above the previous ones replaces them (a
    /// new leader that starts at an offset an older epoch also claimed).
    /// Returns whether the cache changed.
    pub fn assign(&mut self, epoch: i32, start_offset: i64) -> bool {
        if epoch < 0 || start_offset < 0 {
            return false;
        }
        if let Some(latest) = self.entries.last() {
            if epoch <= latest.epoch {
                return false;
            }
        }
        while self
            .entries
            .last()
            .is_some_and(|entry| entry.start_offset >= start_offset)
        {
            self.entries.pop();
        }
        self.entries.push(EpochEntry {
            epoch,
            start_offset,
        });
        true
    }

    /// Kafka's `endOffsetFor`: the largest epoch <= `requested` and the offset where the
    /// next epoch starts (the log end offset when it is the latest epoch).
    pub fn end_offset_for(&self, requested: i32, log_end_offset: i64) -> (i32, i64) {
        if requested == UNDEFINED_EPOCH {
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET);
        }
        match self.entries.last() {
            None => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
            Some(latest) if latest.epoch == requested => (requested, log_end_offset),
            Some(_) => {
                let higher = self.entries.iter().find(|entry| entry.epoch > requested);
                let floor = self
                    .entries
                    .iter()
                    .rev()
                    .find(|entry| entry.epoch <= requested);
                match (floor, higher) {
                    (_, None) => (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET),
                    (None, Some(higher)) => (requested, higher.start_offset),
                    (Some(floor), Some(higher)) => (floor.epoch, higher.start_offset),
                }
            }
        }
    }

    /// Removes every entry starting at or after `end_offset` (log truncated to it).
    pub fn truncate_from_end(&mut self, end_offset: i64) -> bool {
        let before = self.entries.len();
        self.entries.retain(|entry| entry.start_offset < end_offset);
        self.entries.len() != before
    }

    /// Drops entries wholly below `start_offset`; the one spanning it now starts there.
    pub fn truncate_from_start(&mut self, start_offset: i64) -> bool {
        let spanning = self
            .entries
            .iter()
            .rposition(|entry| entry.start_offset <= start_offset);
        match spanning {
            Some(index) if index > 0 || self.entries[0].start_offset < start_offset => {
                self.entries.drain(..index);
                self.entries[0].start_offset = start_offset;
                true
            }
            _ => false,
        }
    }

    pub fn clear(&mut self) {
        self.entries.clear();
    }

    pub fn checkpoint(&self) -> LogResult<()> {
        self.checkpoint_with(Sync::Now)
    }

    /// The checkpoint, synced now or by the log's next flush (`path()`).
    pub fn checkpoint_with(&self, sync: Sync) -> LogResult<()> {
        let lines: Vec<String> = self
            .entries
            .iter()
            .map(|entry| format!("{} {}", entry.epoch, entry.start_offset))
            .collect();
        write_checkpoint_with(&self.path, &lines, sync)?;
        Ok(())
    }

    /// The checkpoint file.
    pub fn path(&self) -> &std::path::Path {
        &self.path
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cache_with(entries: &[(i32, i64)]) -> (tempfile::TempDir, LeaderEpochCache) {
        let dir = tempfile::tempdir().unwrap();
        let mut cache = LeaderEpochCache::load(dir.path()).unwrap();
        for (epoch, offset) in entries {
            cache.assign(*epoch, *offset);
        }
        (dir, cache)
    }

    #[test]
    fn end_offset_for_follows_kafka() {
        let (_dir, cache) = cache_with(&[(1, 0), (3, 10), (5, 20)]);
        assert_eq!(cache.end_offset_for(5, 30), (5, 30));
        assert_eq!(cache.end_offset_for(3, 30), (3, 20));
        assert_eq!(
            cache.end_offset_for(4, 30),
            (3, 20),
            "unknown epoch maps to floor"
        );
        assert_eq!(cache.end_offset_for(0, 30), (0, 0), "below the first epoch");
        assert_eq!(cache.end_offset_for(6, 30), (-1, -1), "above the latest");
        assert_eq!(cache.end_offset_for(-1, 30), (-1, -1));
    }

    #[test]
    fn stale_epochs_are_ignored_and_overlaps_replaced() {
        let (_dir, mut cache) = cache_with(&[(1, 0), (2, 10)]);
        assert!(!cache.assign(2, 15));
        assert!(!cache.assign(1, 20));
        assert!(cache.assign(4, 10));
        assert_eq!(
            cache.entries(),
            &[
                EpochEntry {
                    epoch: 1,
                    start_offset: 0
                },
                EpochEntry {
                    epoch: 4,
                    start_offset: 10
                }
            ]
        );
    }

    #[test]
    fn truncation_from_both_ends() {
        let (_dir, mut cache) = cache_with(&[(1, 0), (3, 10), (5, 20)]);
        cache.truncate_from_end(20);
        assert_eq!(
            cache.latest(),
            Some(EpochEntry {
                epoch: 3,
                start_offset: 10
            })
        );
        cache.truncate_from_start(15);
        assert_eq!(
            cache.entries(),
            &[EpochEntry {
                epoch: 3,
                start_offset: 15
            }]
        );
    }

    #[test]
    fn checkpoint_round_trip() {
        let (dir, cache) = cache_with(&[(1, 0), (3, 10)]);
        cache.checkpoint().unwrap();
        let loaded = LeaderEpochCache::load(dir.path()).unwrap();
        assert_eq!(loaded.entries(), cache.entries());
    }
}
