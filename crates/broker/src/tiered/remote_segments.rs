//! What the remote store holds of one partition: its copied segments' metadata, and the
//! questions asked of it (where an offset is, how far the copy reaches, what retention
//! removes). Plain data, no I/O.
//!
//! Each copy of a segment is one `RemoteSegment`, stored as a small JSON object next to
//! its data objects and written after them: a segment exists remotely exactly when its
//! metadata object does. Copies may overlap (two leaders copying around a leadership
//! change cut segments at different offsets); the data below the high watermark is the
//! same on every replica, so any copy holding an offset serves it.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// One copied segment.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteSegment {
    /// This copy's id (a new one for every copy, so no copy overwrites another).
    pub id: Uuid,
    pub base_offset: i64,
    /// Its last offset.
    pub end_offset: i64,
    pub max_timestamp: i64,
    pub size_bytes: u64,
    pub offset_index_bytes: u64,
    pub time_index_bytes: u64,
    /// Whether the producer snapshot as of `end_offset + 1` was copied with it.
    pub producer_snapshot: bool,
    /// (epoch, start offset) of the leader epochs of its batches.
    pub leader_epochs: Vec<(i32, i64)>,
    /// Aborted transactions a read_committed reader of it is told about:
    /// (producer id, first offset, abort marker's offset).
    pub aborted: Vec<(i64, i64, i64)>,
    /// Who copied it, in which leader epoch, when (ms since the epoch).
    pub copied_by: i32,
    pub copied_in_epoch: i32,
    pub copied_at_ms: i64,
}

impl RemoteSegment {
    /// The key (under the partition's directory) of one of its objects.
    pub fn key(&self, dir: &str, suffix: &str) -> String {
        format!("{dir}/{:020}-{}.{suffix}", self.base_offset, self.id)
    }

    /// Parses a metadata object's key into (base offset, id).
    pub fn parse_metadata_key(name: &str) -> Option<(i64, Uuid)> {
        let stem = name
            .rsplit('/')
            .next()?
            .strip_suffix(&format!(".{METADATA}"))?;
        let (base, id) = stem.split_once('-')?;
        Some((base.parse().ok()?, id.parse().ok()?))
    }
}

/// Suffixes of a copied segment's objects; the metadata object is written last.
pub const LOG: &str = "log";
pub const OFFSET_INDEX: &str = "index";
pub const TIME_INDEX: &str = "timeindex";
pub const PRODUCER_SNAPSHOT: &str = "snapshot";
pub const METADATA: &str = "json";

/// A partition's copied segments, by (base offset, id).
#[derive(Debug, Clone, Default)]
pub struct RemoteSegments {
    by_base: BTreeMap<(i64, Uuid), Arc<RemoteSegment>>,
}

impl RemoteSegments {
    pub fn insert(&mut self, segment: RemoteSegment) {
        self.by_base
            .insert((segment.base_offset, segment.id), Arc::new(segment));
    }

    pub fn remove(&mut self, base_offset: i64, id: Uuid) -> Option<Arc<RemoteSegment>> {
        self.by_base.remove(&(base_offset, id))
    }

    pub fn contains(&self, base_offset: i64, id: Uuid) -> bool {
        self.by_base.contains_key(&(base_offset, id))
    }

    pub fn is_empty(&self) -> bool {
        self.by_base.is_empty()
    }

    pub fn len(&self) -> usize {
        self.by_base.len()
    }

    pub fn iter(&self) -> impl Iterator<Item = &Arc<RemoteSegment>> {
        self.by_base.values()
    }

    /// The first offset held remotely.
    pub fn start_offset(&self) -> Option<i64> {
        self.by_base.keys().next().map(|(base, _)| *base)
    }

    /// The last offset held remotely (Kafka's highest offset in remote storage).
    pub fn end_offset(&self) -> Option<i64> {
        self.by_base.values().map(|s| s.end_offset).max()
    }

    /// Bytes held remotely (overlapping copies each counted: each costs its bytes).
    pub fn size_bytes(&self) -> u64 {
        self.by_base.values().map(|s| s.size_bytes).sum()
    }

    /// A copy holding `offset`: the one starting nearest below it. Falls to a later copy
    /// when `offset` is in a gap (none should exist; a reader then gets what follows).
    pub fn find(&self, offset: i64) -> Option<Arc<RemoteSegment>> {
        let holding = self
            .by_base
            .range(..=(offset, Uuid::max()))
            .rev()
            .map(|(_, s)| s)
            .find(|s| s.end_offset >= offset);
        holding
            .or_else(|| {
                self.by_base
                    .range((offset, Uuid::nil())..)
                    .map(|(_, s)| s)
                    .next()
            })
            .cloned()
    }

    /// What retention removes: copies whose every record is older than `retention_ms`
    /// (by their largest timestamp), and the oldest copies while the partition's total
    /// (these plus `local_only_bytes`, the local segments not copied) exceeds
    /// `retention_bytes` by at least their size. Oldest first, stopping at the first kept
    /// one, as Kafka's remote retention does.
    pub fn expired(
        &self,
        now_ms: i64,
        retention_ms: Option<i64>,
        retention_bytes: Option<u64>,
        local_only_bytes: u64,
    ) -> Vec<Arc<RemoteSegment>> {
        let mut excess = retention_bytes
            .map(|limit| (self.size_bytes() + local_only_bytes).saturating_sub(limit));
        let mut out = Vec::new();
        for segment in self.by_base.values() {
            let by_time =
                retention_ms.is_some_and(|ms| segment.max_timestamp < now_ms.saturating_sub(ms));
            let by_size = excess.is_some_and(|excess| segment.size_bytes <= excess);
            if !(by_time || by_size) {
                break;
            }
            if let Some(excess) = excess.as_mut() {
                *excess = excess.saturating_sub(segment.size_bytes);
            }
            out.push(segment.clone());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn segment(base: i64, end: i64, max_timestamp: i64, size: u64) -> RemoteSegment {
        RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: base,
            end_offset: end,
            max_timestamp,
            size_bytes: size,
            offset_index_bytes: 0,
            time_index_bytes: 0,
            producer_snapshot: false,
            leader_epochs: vec![(0, base)],
            aborted: Vec::new(),
            copied_by: 1,
            copied_in_epoch: 0,
            copied_at_ms: 0,
        }
    }

    #[test]
    fn offsets_are_found_in_the_copy_that_holds_them_even_when_copies_overlap() {
        let mut segments = RemoteSegments::default();
        assert_eq!(segments.find(0), None);
        segments.insert(segment(0, 99, 10, 100));
        segments.insert(segment(100, 199, 20, 100));
        // A second leader cut its segment elsewhere: 150..=249 overlaps.
        segments.insert(segment(150, 249, 30, 100));
        assert_eq!(segments.start_offset(), Some(0));
        assert_eq!(segments.end_offset(), Some(249));
        assert_eq!(segments.find(0).unwrap().base_offset, 0);
        assert_eq!(segments.find(99).unwrap().base_offset, 0);
        assert_eq!(segments.find(120).unwrap().base_offset, 100);
        let at_160 = segments.find(160).unwrap();
        assert!(at_160.base_offset <= 160 && at_160.end_offset >= 160);
        assert_eq!(segments.find(230).unwrap().base_offset, 150);
        assert_eq!(segments.find(250), None, "beyond the copy");
    }

    #[test]
    fn retention_removes_the_oldest_copies_by_time_and_by_size() {
        let mut segments = RemoteSegments::default();
        segments.insert(segment(0, 99, 1_000, 100));
        segments.insert(segment(100, 199, 2_000, 100));
        segments.insert(segment(200, 299, 3_000, 100));
        let bases =
            |v: Vec<Arc<RemoteSegment>>| v.iter().map(|s| s.base_offset).collect::<Vec<_>>();
        assert_eq!(
            bases(segments.expired(2_500, Some(1_000), None, 0)),
            vec![0]
        );
        assert_eq!(
            bases(segments.expired(10_000, Some(1_000), None, 0)),
            vec![0, 100, 200]
        );
        // 300 remote + 50 local only, limit 200: 150 too many, one copy of 100 goes.
        assert_eq!(bases(segments.expired(0, None, Some(200), 50)), vec![0]);
        assert_eq!(
            bases(segments.expired(0, None, Some(1_000), 50)),
            Vec::<i64>::new()
        );
        assert_eq!(bases(segments.expired(0, None, None, 0)), Vec::<i64>::new());
    }

    #[test]
    fn metadata_keys_name_the_base_offset_and_the_copy() {
        let s = segment(42, 99, 0, 1);
        let key = s.key("t-abc/0", METADATA);
        assert!(key.starts_with("t-abc/0/00000000000000000042-"));
        assert_eq!(RemoteSegment::parse_metadata_key(&key), Some((42, s.id)));
        assert_eq!(
            RemoteSegment::parse_metadata_key(&s.key("t-abc/0", LOG)),
            None
        );
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(serde_json::from_str::<RemoteSegment>(&json).unwrap(), s);
    }
}
