//! One partition's side of the remote store: loading what it holds, copying a sealed
//! segment to it, deleting copies. The copy writes the data objects first and the
//! metadata object last; a crash in between leaves objects no metadata names (never
//! read; a later copy of the same segment gets a new id), so a copy is idempotent.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, Ordering};
use std::sync::RwLock;

use bytes::Bytes;
use strand_log::log_manager::TopicPartition;
use strand_log::tiering::SealedSegment;
use uuid::Uuid;

use super::remote_segments::{
    RemoteSegment, RemoteSegments, LOG, METADATA, OFFSET_INDEX, PRODUCER_SNAPSHOT, TIME_INDEX,
};
use super::store::{LocalFile, RemoteStore, StoreResult};
use strand_log::throttle::Throttle;

/// The object holding where DeleteRecords moved the log start, beside the copies.
const LOG_START_OBJECT: &str = "log-start-offset";

#[derive(Debug)]
pub struct RemoteLog {
    pub tp: TopicPartition,
    /// The partition's directory in the store: `<topic>-<topic id>/<partition>`, so a
    /// topic deleted and created again under its name starts empty.
    pub dir: String,
    /// What the store holds; None until first loaded.
    segments: RwLock<Option<RemoteSegments>>,
    /// The leader epoch this broker last loaded the listing in as leader (-1: never).
    pub(super) loaded_as_leader_in: AtomicI32,
    /// A remote read failed: the partition's next read answers KAFKA_STORAGE_ERROR.
    read_failed: AtomicBool,
    /// A follower's fetcher needs a fresh listing (the leader answered
    /// OFFSET_MOVED_TO_TIERED_STORAGE past what this broker knows the store holds).
    listing_wanted: AtomicBool,
    /// The log start DeleteRecords moved to below the local log start (-1: none): kept in
    /// the store (`LOG_START_OBJECT`), so every replica and every restart sees it.
    deleted_below: AtomicI64,
    /// One pass (load, copy, expire) at a time.
    pub(super) busy: tokio::sync::Mutex<()>,
}

impl RemoteLog {
    pub fn new(tp: TopicPartition, topic_id: Uuid) -> RemoteLog {
        let dir = format!("{}-{}/{}", tp.topic, topic_id, tp.partition);
        RemoteLog {
            tp,
            dir,
            segments: RwLock::new(None),
            loaded_as_leader_in: AtomicI32::new(-1),
            read_failed: AtomicBool::new(false),
            listing_wanted: AtomicBool::new(false),
            deleted_below: AtomicI64::new(-1),
            busy: tokio::sync::Mutex::new(()),
        }
    }

    /// `f` of what the store holds, or None before it was loaded.
    pub fn with<R>(&self, f: impl FnOnce(&RemoteSegments) -> R) -> Option<R> {
        self.segments
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(f)
    }

    pub fn is_loaded(&self) -> bool {
        self.with(|_| ()).is_some()
    }

    /// The next pass lists the store again, whatever else it needs.
    pub fn want_listing(&self) {
        self.listing_wanted.store(true, Ordering::Release);
    }

    /// Whether a listing was asked for since the last (and takes the request).
    pub(super) fn take_listing_wanted(&self) -> bool {
        self.listing_wanted.swap(false, Ordering::AcqRel)
    }

    /// The first offset held remotely (None: nothing, or not loaded).
    pub fn start_offset(&self) -> Option<i64> {
        self.with(|s| s.start_offset()).flatten()
    }

    /// The last offset held remotely (None: nothing, or not loaded).
    pub fn end_offset(&self) -> Option<i64> {
        self.with(|s| s.end_offset()).flatten()
    }

    /// The partition's log start: the remote start when something is remote, never below
    /// where DeleteRecords moved it.
    pub fn log_start_offset(&self, local_start: i64) -> i64 {
        let start = self
            .start_offset()
            .map_or(local_start, |remote| remote.min(local_start));
        start.max(self.deleted_below())
    }

    /// Where DeleteRecords moved the log start (-1: never).
    pub fn deleted_below(&self) -> i64 {
        self.deleted_below.load(Ordering::Acquire)
    }

    /// DeleteRecords: records below `offset` are gone (copies wholly below it are deleted
    /// by the next pass). Kept in the store before it takes effect.
    pub async fn delete_below(&self, store: &RemoteStore, offset: i64) -> StoreResult<()> {
        if offset <= self.deleted_below() {
            return Ok(());
        }
        let key = format!("{}/{LOG_START_OBJECT}", self.dir);
        store.put(&key, Bytes::from(offset.to_string())).await?;
        self.deleted_below.fetch_max(offset, Ordering::AcqRel);
        Ok(())
    }

    pub(super) fn note_read_failure(&self) {
        self.read_failed.store(true, Ordering::Release);
    }

    pub fn take_read_failure(&self) -> bool {
        self.read_failed.swap(false, Ordering::AcqRel)
    }

    fn update(&self, f: impl FnOnce(&mut RemoteSegments)) {
        let mut segments = self.segments.write().unwrap_or_else(|p| p.into_inner());
        f(segments.get_or_insert_with(RemoteSegments::default));
    }

    /// Reads the listing again: new metadata objects are fetched, vanished ones dropped,
    /// and where DeleteRecords moved the log start.
    pub async fn refresh(&self, store: &RemoteStore) -> StoreResult<()> {
        let keys = store.list(&self.dir).await?;
        let start_key = format!("{}/{LOG_START_OBJECT}", self.dir);
        if keys.iter().any(|listed| listed.key == start_key) {
            let text = store.get(&start_key).await?;
            let offset = std::str::from_utf8(&text)
                .ok()
                .and_then(|t| t.trim().parse::<i64>().ok());
            match offset {
                Some(offset) => {
                    self.deleted_below.fetch_max(offset, Ordering::AcqRel);
                }
                None => {
                    tracing::warn!(partition = %self.tp, key = start_key, "unreadable log start in the remote store; ignored")
                }
            }
        }
        let listed: HashSet<(i64, Uuid)> = keys
            .iter()
            .filter_map(|listed| RemoteSegment::parse_metadata_key(&listed.key))
            .collect();
        let known: Vec<(i64, Uuid)> = self
            .with(|s| s.iter().map(|s| (s.base_offset, s.id)).collect())
            .unwrap_or_default();
        let mut found = Vec::new();
        for (base, id) in &listed {
            if known.contains(&(*base, *id)) {
                continue;
            }
            let key = format!("{}/{base:020}-{id}.{METADATA}", self.dir);
            let bytes = match store.get(&key).await {
                Ok(bytes) => bytes,
                // Deleted between the listing and now (remote retention elsewhere).
                Err(object_store::Error::NotFound { .. }) => continue,
                Err(error) => return Err(error),
            };
            match serde_json::from_slice::<RemoteSegment>(&bytes) {
                Ok(segment) => found.push(segment),
                Err(error) => {
                    tracing::warn!(partition = %self.tp, key, %error, "unreadable remote segment metadata; ignored")
                }
            }
        }
        self.update(|segments| {
            for (base, id) in known.iter().filter(|k| !listed.contains(k)) {
                segments.remove(*base, *id);
            }
            for segment in found {
                segments.insert(segment);
            }
        });
        Ok(())
    }

    /// Copies one sealed segment: its log, indexes and producer snapshot, then its
    /// metadata, which makes it visible.
    pub async fn copy(
        &self,
        store: &RemoteStore,
        sealed: &SealedSegment,
        copied_by: i32,
        copied_in_epoch: i32,
        now_ms: i64,
        throttle: &std::sync::Mutex<Throttle>,
    ) -> StoreResult<RemoteSegment> {
        let segment = RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: sealed.base_offset,
            end_offset: sealed.next_offset - 1,
            max_timestamp: sealed.max_timestamp,
            size_bytes: sealed.size_bytes,
            offset_index_bytes: sealed.offset_index_bytes,
            time_index_bytes: sealed.time_index_bytes,
            producer_snapshot: sealed.producer_snapshot.is_some(),
            leader_epochs: sealed.leader_epochs.clone(),
            aborted: sealed
                .aborted
                .iter()
                .map(|t| (t.producer_id, t.first_offset, t.last_offset))
                .collect(),
            copied_by,
            copied_in_epoch,
            copied_at_ms: now_ms,
        };
        let file = |pick: fn(&strand_log::file_cache::SegmentFiles) -> &std::fs::File| LocalFile {
            files: sealed.files.clone(),
            pick,
        };
        store
            .put_file(
                &segment.key(&self.dir, LOG),
                &file(|f| &f.log),
                sealed.size_bytes,
                throttle,
            )
            .await?;
        store
            .put_file(
                &segment.key(&self.dir, OFFSET_INDEX),
                &file(|f| &f.offset_index),
                sealed.offset_index_bytes,
                throttle,
            )
            .await?;
        store
            .put_file(
                &segment.key(&self.dir, TIME_INDEX),
                &file(|f| &f.time_index),
                sealed.time_index_bytes,
                throttle,
            )
            .await?;
        if let Some(path) = &sealed.producer_snapshot {
            // Gone meanwhile (a newer roll pruned it): the copy goes without it.
            if let Ok(bytes) = std::fs::read(path) {
                store
                    .put(
                        &segment.key(&self.dir, PRODUCER_SNAPSHOT),
                        Bytes::from(bytes),
                    )
                    .await?;
            }
        }
        let metadata = serde_json::to_vec(&segment).expect("serializable");
        store
            .put(&segment.key(&self.dir, METADATA), Bytes::from(metadata))
            .await?;
        self.update(|segments| segments.insert(segment.clone()));
        Ok(segment)
    }

    /// Deletes a copy: its metadata first (readers stop finding it), then its data.
    pub async fn delete(&self, store: &RemoteStore, segment: &RemoteSegment) -> StoreResult<()> {
        store.delete(&segment.key(&self.dir, METADATA)).await?;
        self.update(|segments| {
            segments.remove(segment.base_offset, segment.id);
        });
        for suffix in [LOG, OFFSET_INDEX, TIME_INDEX, PRODUCER_SNAPSHOT] {
            store.delete(&segment.key(&self.dir, suffix)).await?;
        }
        Ok(())
    }

    /// Deletes the objects of copies that never got their metadata (a crash mid-copy) and
    /// were last written before `older_than_ms`: old enough that no copy still under way
    /// (by this leader or a deposed one) writes them. Returns how many went.
    pub async fn collect_orphans(
        &self,
        store: &RemoteStore,
        older_than_ms: i64,
    ) -> StoreResult<usize> {
        let keys = store.list(&self.dir).await?;
        let stem = |key: &str| key.rsplit_once('.').map(|(stem, _)| stem.to_string());
        let named: HashSet<String> = keys
            .iter()
            .filter(|l| l.key.ends_with(&format!(".{METADATA}")))
            .filter_map(|l| stem(&l.key))
            .collect();
        let start_key = format!("{}/{LOG_START_OBJECT}", self.dir);
        let mut deleted = 0;
        for listed in &keys {
            let orphan = listed.key != start_key
                && !listed.key.ends_with(&format!(".{METADATA}"))
                && listed.modified_ms < older_than_ms
                && stem(&listed.key).is_some_and(|stem| !named.contains(&stem));
            if orphan {
                store.delete(&listed.key).await?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// Deletes every object of the partition (topic deletion, tiering turned off with
    /// remote.log.delete.on.disable): what a crashed copy left included.
    pub async fn delete_all(&self, store: &RemoteStore) -> StoreResult<()> {
        let keys = store.list(&self.dir).await?;
        // Metadata first, so no reader finds a copy whose data is going.
        let (metadata, data): (Vec<_>, Vec<_>) = keys
            .into_iter()
            .partition(|listed| listed.key.ends_with(&format!(".{METADATA}")));
        for listed in metadata.iter().chain(&data) {
            store.delete(&listed.key).await?;
        }
        self.update(|segments| *segments = RemoteSegments::default());
        self.deleted_below.store(-1, Ordering::Release);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn only_old_objects_of_copies_without_metadata_are_collected() {
        let store = RemoteStore::open("memory://").unwrap();
        let remote = RemoteLog::new(TopicPartition::new("t", 0), Uuid::nil());
        let dir = remote.dir.clone();
        let put = |key: String| {
            let store = store.clone();
            async move { store.put(&key, Bytes::from_static(b"x")).await.unwrap() }
        };
        let whole = Uuid::new_v4();
        let crashed = Uuid::new_v4();
        for suffix in [LOG, OFFSET_INDEX, TIME_INDEX, METADATA] {
            put(format!("{dir}/{:020}-{whole}.{suffix}", 0)).await;
        }
        for suffix in [LOG, OFFSET_INDEX] {
            put(format!("{dir}/{:020}-{crashed}.{suffix}", 10)).await;
        }
        put(format!("{dir}/{LOG_START_OBJECT}")).await;
        let before = store.list(&dir).await.unwrap().len();
        // Too young: a copy may still be writing them.
        let now = now_ms_for_test();
        assert_eq!(
            remote.collect_orphans(&store, now - 60_000).await.unwrap(),
            0
        );
        assert_eq!(store.list(&dir).await.unwrap().len(), before);
        // Old enough: the crashed copy's two objects go, nothing else.
        assert_eq!(
            remote.collect_orphans(&store, now + 60_000).await.unwrap(),
            2
        );
        let left: Vec<String> = store
            .list(&dir)
            .await
            .unwrap()
            .into_iter()
            .map(|l| l.key)
            .collect();
        assert_eq!(left.len(), before - 2);
        assert!(left.iter().all(|key| !key.contains(&crashed.to_string())));
    }

    fn now_ms_for_test() -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as i64
    }
}
