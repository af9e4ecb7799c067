//! The share coordinator's state (KIP-932): for each share-partition (group, topic id,
//! partition) the state its leader needs to go on after a restart or a leadership
//! change: the start offset, the state epoch, the leader epoch that last wrote it, and
//! the in-flight records that are settled or were delivered before. Kept in
//! `__share_group_state` as one snapshot record per share-partition (the latest wins, so
//! compaction keeps the topic small), in the layout of Kafka's ShareSnapshot records.
//!
//! A shard holds one partition of the topic; its operations are Kafka's
//! Initialize/Read/Write/Delete/ReadSummary ShareGroupState with their epoch checks: a
//! write from an older leader epoch is FENCED_LEADER_EPOCH, a write under another state
//! epoch (the group's offsets were reset or deleted meanwhile) FENCED_STATE_EPOCH.

use std::collections::{BTreeMap, HashMap};

use bytes::{BufMut, BytesMut};
use strand_types::{error_code, kafka_uuid};
use uuid::Uuid;

use crate::codec::{put_compact_len, put_no_tags, put_string, Reader};
use crate::runtime::Records;

pub const SHARE_STATE_TOPIC: &str = "__share_group_state";
/// share.coordinator.state.topic.num.partitions
pub const SHARE_STATE_PARTITIONS: i32 = 50;

/// Kafka's record type of a ShareSnapshot key.
const SNAPSHOT_KEY_TYPE: i16 = 0;
const SNAPSHOT_VALUE_VERSION: i16 = 0;

/// (group id, topic id, partition)
pub type ShareStateKey = (String, Uuid, i32);

/// The coordinator's key string of a share-partition: "group:topicId:partition", which
/// FindCoordinator (key type 2) and the partitioning use.
pub fn coordinator_key(key: &ShareStateKey) -> String {
    format!("{}:{}:{}", key.0, kafka_uuid::to_text(&key.1), key.2)
}

/// One run of records: `first..=last` in `state` (Kafka's ids: 0 available, 2
/// acknowledged, 4 archived), delivered `delivery_count` times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first_offset: i64,
    pub last_offset: i64,
    pub delivery_state: i8,
    pub delivery_count: i16,
}

#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Snapshot {
    pub snapshot_epoch: i32,
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    pub create_timestamp: i64,
    pub write_timestamp: i64,
    pub batches: Vec<StateBatch>,
}

pub fn key(key: &ShareStateKey) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(SNAPSHOT_KEY_TYPE);
    put_string(&mut out, &key.0);
    out.put_slice(key.1.as_bytes());
    out.put_i32(key.2);
    out.to_vec()
}

pub fn value(snapshot: &Snapshot) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(SNAPSHOT_VALUE_VERSION);
    out.put_i32(snapshot.snapshot_epoch);
    out.put_i32(snapshot.state_epoch);
    out.put_i32(snapshot.leader_epoch);
    out.put_i64(snapshot.start_offset);
    out.put_i64(snapshot.create_timestamp);
    out.put_i64(snapshot.write_timestamp);
    put_compact_len(&mut out, snapshot.batches.len());
    for batch in &snapshot.batches {
        out.put_i64(batch.first_offset);
        out.put_i64(batch.last_offset);
        out.put_i8(batch.delivery_state);
        out.put_i16(batch.delivery_count);
        put_no_tags(&mut out);
    }
    put_no_tags(&mut out);
    out.to_vec()
}

fn decode_key(bytes: &[u8]) -> Option<ShareStateKey> {
    let mut reader = Reader::new(bytes);
    if reader.i16()? != SNAPSHOT_KEY_TYPE {
        return None;
    }
    let group = reader.string()?;
    let topic = reader.uuid()?;
    let partition = reader.i32()?;
    Some((group, topic, partition))
}

fn decode_value(bytes: &[u8]) -> Option<Snapshot> {
    let mut reader = Reader::new(bytes);
    if reader.i16()? != SNAPSHOT_VALUE_VERSION {
        return None;
    }
    let mut snapshot = Snapshot {
        snapshot_epoch: reader.i32()?,
        state_epoch: reader.i32()?,
        leader_epoch: reader.i32()?,
        start_offset: reader.i64()?,
        create_timestamp: reader.i64()?,
        write_timestamp: reader.i64()?,
        batches: Vec::new(),
    };
    for _ in 0..reader.compact_len()? {
        snapshot.batches.push(StateBatch {
            first_offset: reader.i64()?,
            last_offset: reader.i64()?,
            delivery_state: reader.i8()?,
            delivery_count: reader.i16()?,
        });
        reader.skip_tags()?;
    }
    reader.skip_tags()?;
    Some(snapshot)
}

/// What a share-partition's state says in summary (ReadShareGroupStateSummary).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Summary {
    pub state_epoch: i32,
    pub leader_epoch: i32,
    pub start_offset: i64,
    /// Records at or after the start offset already settled (acknowledged or archived):
    /// KIP-1226's DeliveryCompleteCount, which the lag leaves out.
    pub delivery_complete_count: i32,
}

/// The share-partitions of one `__share_group_state` partition.
#[derive(Debug, Default)]
pub struct ShareStateShard {
    /// Settled: on every in-sync replica.
    snapshots: HashMap<ShareStateKey, Snapshot>,
    /// Written and not settled yet, per key by the write's number (None: a tombstone).
    /// The runtime takes the next request while a write waits for the replicas, and
    /// that request must be checked against it, as Kafka's coordinator sees its own
    /// uncommitted records: else a new leader's read, still on its way, let the old
    /// leader write acknowledgements (answered to the member) that the read's older
    /// snapshot then overwrote, and the new leader delivered acknowledged records
    /// again. Every unsettled write is kept, not only the latest: a refused append
    /// settles at once, ahead of the writes before it, and must uncover those, not
    /// the settled state.
    pending: HashMap<ShareStateKey, BTreeMap<u64, Option<Snapshot>>>,
    writes: u64,
}

/// What runs once a write settled.
pub type Answer<R> = Box<dyn FnOnce(&mut ShareStateShard, Result<(), i16>) -> R + Send>;

fn now<R: Send + 'static>(reply: R) -> (Records, Answer<R>) {
    (Vec::new(), Box::new(move |_, _| reply))
}

/// An answer that writes nothing but was drawn from `relied`, the key's latest state,
/// perhaps not settled. It leaves once every write before it has settled; if the key's
/// settled state is then not what it relied on (one of those writes failed), the
/// caller is told to retry (COORDINATOR_NOT_AVAILABLE) rather than act on a state the
/// log may not hold.
fn when_settled<T: Send + 'static>(
    key: ShareStateKey,
    relied: Option<Snapshot>,
    reply: T,
) -> (Records, Answer<Result<T, i16>>) {
    (
        Vec::new(),
        Box::new(
            move |shard, _| match shard.snapshots.get(&key) == relied.as_ref() {
                true => Ok(reply),
                false => Err(error_code::COORDINATOR_NOT_AVAILABLE),
            },
        ),
    )
}

impl ShareStateShard {
    /// Replays one record at load (the latest for a key wins; a tombstone removes it).
    /// False for a record that is not a share snapshot.
    pub fn replay(&mut self, key: &[u8], value: Option<&[u8]>) -> bool {
        let Some(key) = decode_key(key) else {
            return false;
        };
        match value {
            None => {
                self.snapshots.remove(&key);
                true
            }
            Some(value) => match decode_value(value) {
                Some(snapshot) => {
                    self.snapshots.insert(key, snapshot);
                    true
                }
                None => false,
            },
        }
    }

    /// The key's state as the next request must see it: its latest write, settled or
    /// not.
    fn latest(&self, key: &ShareStateKey) -> Option<&Snapshot> {
        match self
            .pending
            .get(key)
            .and_then(|writes| writes.last_key_value())
        {
            Some((_, pending)) => pending.as_ref(),
            None => self.snapshots.get(key),
        }
    }

    /// Writes the key's new state (None: its tombstone), seen at once by the requests
    /// after it and kept once settled; a failed write leaves what was there.
    fn put(
        &mut self,
        key: ShareStateKey,
        snapshot: Option<Snapshot>,
    ) -> (Records, Answer<Result<(), i16>>) {
        let records = vec![(self::key(&key), snapshot.as_ref().map(value))];
        self.writes += 1;
        let write = self.writes;
        let unsettled = self.pending.entry(key.clone()).or_default();
        unsettled.insert(write, snapshot.clone());
        (
            records,
            Box::new(move |shard, written| {
                if let Some(unsettled) = shard.pending.get_mut(&key) {
                    unsettled.remove(&write);
                    if unsettled.is_empty() {
                        shard.pending.remove(&key);
                    }
                }
                written.map_err(coordinator_error)?;
                match snapshot {
                    Some(snapshot) => shard.snapshots.insert(key, snapshot),
                    None => shard.snapshots.remove(&key),
                };
                Ok(())
            }),
        )
    }

    /// InitializeShareGroupState: a share-partition's first state (or a reset of its
    /// start offset under a new state epoch). An older state epoch is fenced. The same
    /// state epoch onto a state that has a start offset changes nothing: two leaders
    /// loading a new share-partition at once both initialize it, and the second (its
    /// start from its own high watermark, or the first's start moved on since) must not
    /// wipe what the first has written. Kafka makes only a repeat of the same start a
    /// no-op, and rewrites otherwise; a deliberate difference (Strand's admin resets
    /// always take a newer state epoch, so none relies on a same-epoch rewrite).
    pub fn initialize(
        &mut self,
        key: ShareStateKey,
        state_epoch: i32,
        start_offset: i64,
        now_ms: i64,
    ) -> (Records, Answer<Result<(), i16>>) {
        if let Some(current) = self.latest(&key) {
            if state_epoch < current.state_epoch {
                return now(Err(error_code::FENCED_STATE_EPOCH));
            }
            if state_epoch == current.state_epoch && current.start_offset >= 0 {
                let relied = Some(current.clone());
                return when_settled(key, relied, ());
            }
        }
        let snapshot = Snapshot {
            snapshot_epoch: 0,
            state_epoch,
            leader_epoch: -1,
            start_offset,
            create_timestamp: now_ms,
            write_timestamp: now_ms,
            batches: Vec::new(),
        };
        self.put(key, Some(snapshot))
    }

    /// ReadShareGroupState by the leader in `leader_epoch`: the state, or None if the
    /// share-partition has none. A read from an older leader epoch is fenced; a newer one
    /// is recorded, so the leader it replaced can no longer write.
    pub fn read(
        &mut self,
        key: ShareStateKey,
        leader_epoch: i32,
        now_ms: i64,
    ) -> (Records, Answer<Result<Option<Snapshot>, i16>>) {
        let Some(current) = self.latest(&key).cloned() else {
            return when_settled(key, None, None);
        };
        if leader_epoch < current.leader_epoch {
            return now(Err(error_code::FENCED_LEADER_EPOCH));
        }
        if leader_epoch == current.leader_epoch {
            return when_settled(key, Some(current.clone()), Some(current));
        }
        let snapshot = Snapshot {
            leader_epoch,
            snapshot_epoch: current.snapshot_epoch + 1,
            write_timestamp: now_ms,
            ..current
        };
        let (records, answer) = self.put(key, Some(snapshot.clone()));
        (
            records,
            Box::new(move |shard, written| answer(shard, written).map(|()| Some(snapshot))),
        )
    }

    /// WriteShareGroupState: the leader's new state of the share-partition.
    pub fn write(
        &mut self,
        key: ShareStateKey,
        state_epoch: i32,
        leader_epoch: i32,
        start_offset: i64,
        batches: Vec<StateBatch>,
        now_ms: i64,
    ) -> (Records, Answer<Result<(), i16>>) {
        // Kafka: "Write operation on uninitialized share partition not allowed." (a
        // leader still holding a share-partition whose state was deleted must not bring
        // it back).
        let Some(current) = self.latest(&key).cloned() else {
            return now(Err(error_code::INVALID_REQUEST));
        };
        if leader_epoch < current.leader_epoch {
            return now(Err(error_code::FENCED_LEADER_EPOCH));
        }
        if state_epoch != current.state_epoch {
            return now(Err(error_code::FENCED_STATE_EPOCH));
        }
        let current = Some(current);
        let snapshot = Snapshot {
            snapshot_epoch: current.as_ref().map_or(0, |c| c.snapshot_epoch + 1),
            state_epoch,
            leader_epoch,
            start_offset,
            create_timestamp: current.as_ref().map_or(now_ms, |c| c.create_timestamp),
            write_timestamp: now_ms,
            batches,
        };
        self.put(key, Some(snapshot))
    }

    /// DeleteShareGroupState: the share-partition's state goes (a tombstone).
    pub fn delete(&mut self, key: ShareStateKey) -> (Records, Answer<Result<(), i16>>) {
        if self.latest(&key).is_none() {
            return when_settled(key, None, ());
        }
        self.put(key, None)
    }

    /// ReadShareGroupStateSummary: without moving the leader epoch.
    pub fn summary(&self, key: &ShareStateKey) -> Option<Summary> {
        self.snapshots.get(key).map(|s| Summary {
            state_epoch: s.state_epoch,
            leader_epoch: s.leader_epoch,
            start_offset: s.start_offset,
            delivery_complete_count: s
                .batches
                .iter()
                .filter(|b| matches!(b.delivery_state, 2 | 4))
                // Batches come from the wire (WriteShareGroupState): no overflow.
                .map(|b| {
                    b.last_offset
                        .saturating_sub(b.first_offset.max(s.start_offset))
                        .saturating_add(1)
                        .max(0)
                })
                .fold(0i64, i64::saturating_add)
                .min(i32::MAX as i64) as i32,
        })
    }
}

/// A failed write of the share state, as the leader is told: retriable.
fn coordinator_error(code: i16) -> i16 {
    match code {
        error_code::NOT_LEADER_OR_FOLLOWER | error_code::NOT_COORDINATOR => {
            error_code::NOT_COORDINATOR
        }
        _ => error_code::COORDINATOR_NOT_AVAILABLE,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k() -> ShareStateKey {
        ("g".into(), Uuid::from_u128(9), 3)
    }

    /// A share-partition initialized at offset 10 and read by the leader of `epoch`,
    /// settled.
    fn loaded_by(epoch: i32) -> ShareStateShard {
        let mut shard = ShareStateShard::default();
        apply(shard.initialize(k(), 0, 10, 0), &mut shard).unwrap();
        apply(shard.read(k(), epoch, 0), &mut shard).unwrap();
        shard
    }

    /// Offsets 10-12 accepted, as a leader writes them.
    fn acked() -> Vec<StateBatch> {
        vec![StateBatch {
            first_offset: 10,
            last_offset: 12,
            delivery_state: 2,
            delivery_count: 1,
        }]
    }

    fn apply<R>((records, answer): (Records, Answer<R>), shard: &mut ShareStateShard) -> R {
        let _ = records;
        answer(shard, Ok(()))
    }

    #[test]
    fn records_round_trip_and_replay_keeps_the_latest() {
        let snapshot = Snapshot {
            snapshot_epoch: 2,
            state_epoch: 1,
            leader_epoch: 7,
            start_offset: 42,
            create_timestamp: 1,
            write_timestamp: 2,
            batches: vec![StateBatch {
                first_offset: 42,
                last_offset: 50,
                delivery_state: 2,
                delivery_count: 3,
            }],
        };
        assert_eq!(decode_value(&value(&snapshot)), Some(snapshot.clone()));
        assert_eq!(decode_key(&key(&k())), Some(k()));
        let mut shard = ShareStateShard::default();
        assert!(shard.replay(&key(&k()), Some(&value(&Snapshot::default()))));
        assert!(shard.replay(&key(&k()), Some(&value(&snapshot))));
        assert_eq!(shard.summary(&k()).unwrap().start_offset, 42);
        assert!(shard.replay(&key(&k()), None));
        assert_eq!(shard.summary(&k()), None);
        assert!(!shard.replay(b"\x00\x01", Some(b"junk")));
    }

    #[test]
    fn leaders_and_state_epochs_fence_stale_writers() {
        let mut shard = ShareStateShard::default();
        apply(shard.initialize(k(), 0, 10, 0), &mut shard).unwrap();
        let read = apply(shard.read(k(), 5, 0), &mut shard).unwrap().unwrap();
        assert_eq!((read.start_offset, read.leader_epoch), (10, 5));
        apply(shard.write(k(), 0, 5, 12, Vec::new(), 1), &mut shard).unwrap();
        // A newer leader read it: the old one is fenced.
        apply(shard.read(k(), 6, 2), &mut shard).unwrap();
        assert_eq!(
            apply(shard.write(k(), 0, 5, 13, Vec::new(), 3), &mut shard),
            Err(error_code::FENCED_LEADER_EPOCH)
        );
        // The offsets were reset under a new state epoch: the leader's writes are fenced.
        apply(shard.initialize(k(), 1, 0, 4), &mut shard).unwrap();
        assert_eq!(
            apply(shard.write(k(), 0, 6, 14, Vec::new(), 5), &mut shard),
            Err(error_code::FENCED_STATE_EPOCH)
        );
        assert_eq!(shard.summary(&k()).unwrap().start_offset, 0);
        assert!(shard.summary(&k()).is_some());
        apply(shard.delete(k()), &mut shard).unwrap();
        assert!(shard.summary(&k()).is_none());
        assert_eq!(
            apply(shard.write(k(), 1, 6, 14, Vec::new(), 6), &mut shard),
            Err(error_code::INVALID_REQUEST),
            "a deleted state is not written back"
        );
    }

    /// The runtime takes the next request while a write waits for the replicas: a
    /// request is checked against the writes before it, settled or not. Before, a new
    /// leader's read still settling let the old leader's write through (answered to its
    /// member as durable), and the read's older snapshot then replaced it: the new
    /// leader delivered acknowledged records again.
    #[test]
    fn a_request_sees_the_writes_before_it_that_have_not_settled() {
        let mut shard = loaded_by(4);
        let acked = acked();
        // Leader 5 reads (its write not settled yet), then leader 4 writes: fenced.
        let read = shard.read(k(), 5, 1);
        let stale = shard.write(k(), 0, 4, 10, acked.clone(), 2);
        assert!(stale.0.is_empty(), "nothing written for a fenced leader");
        assert_eq!(read.1(&mut shard, Ok(())).unwrap().unwrap().leader_epoch, 5);
        assert_eq!(
            stale.1(&mut shard, Ok(())),
            Err(error_code::FENCED_LEADER_EPOCH)
        );
        // Leader 5 writes its acknowledgements; leader 6's read, taken before that write
        // settles, gets them.
        let write = shard.write(k(), 0, 5, 10, acked.clone(), 3);
        let read = shard.read(k(), 6, 4);
        write.1(&mut shard, Ok(())).unwrap();
        let seen = read.1(&mut shard, Ok(())).unwrap().unwrap();
        assert_eq!(seen.batches, acked);
        assert_eq!(shard.summary(&k()).unwrap().leader_epoch, 6);
        // A write that fails leaves what was settled.
        let failed = shard.write(k(), 0, 6, 13, Vec::new(), 5);
        assert!(failed.1(&mut shard, Err(error_code::REQUEST_TIMED_OUT)).is_err());
        let now = apply(shard.read(k(), 6, 6), &mut shard).unwrap().unwrap();
        assert_eq!((now.start_offset, now.batches), (10, acked));
    }

    /// A refused append settles at once, ahead of the writes before it: it must uncover
    /// those, not the settled state (review: a retried read then carried an older
    /// snapshot past the acknowledgements of the write still in flight).
    #[test]
    fn a_refused_write_uncovers_the_unsettled_writes_before_it() {
        let mut shard = loaded_by(5);
        let acked = acked();
        let write = shard.write(k(), 0, 5, 10, acked.clone(), 1);
        let refused = shard.read(k(), 6, 2);
        assert!(refused.1(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS)).is_err());
        let again = shard.read(k(), 6, 3);
        write.1(&mut shard, Ok(())).unwrap();
        let seen = again.1(&mut shard, Ok(())).unwrap().unwrap();
        assert_eq!((seen.leader_epoch, seen.batches), (6, acked));
    }

    /// An answer that writes nothing, drawn from a write not yet settled, is not given
    /// if that write fails: the caller retries (review: a leader's resent read answered
    /// from a read that then timed out loaded as if it had fenced the old leader).
    #[test]
    fn an_answer_drawn_from_a_write_that_failed_asks_for_a_retry() {
        let mut shard = ShareStateShard::default();
        apply(shard.initialize(k(), 0, 10, 0), &mut shard).unwrap();
        let first = shard.read(k(), 5, 1);
        let resent = shard.read(k(), 5, 2);
        assert!(resent.0.is_empty(), "answered from the read before it");
        assert!(first.1(&mut shard, Err(error_code::REQUEST_TIMED_OUT)).is_err());
        assert_eq!(
            resent.1(&mut shard, Ok(())),
            Err(error_code::COORDINATOR_NOT_AVAILABLE)
        );
        // Settled, the same answer is given.
        apply(shard.read(k(), 5, 3), &mut shard).unwrap();
        let again = apply(shard.read(k(), 5, 4), &mut shard).unwrap().unwrap();
        assert_eq!(again.leader_epoch, 5);
        // Likewise "no state" drawn from a tombstone that failed.
        let delete = shard.delete(k());
        let none = shard.read(k(), 6, 5);
        assert!(delete.1(&mut shard, Err(error_code::REQUEST_TIMED_OUT)).is_err());
        assert_eq!(
            none.1(&mut shard, Ok(())),
            Err(error_code::COORDINATOR_NOT_AVAILABLE)
        );
    }

    /// Initializing again under the same state epoch changes an initialized state in
    /// nothing: two leaders loading a new share-partition at once both initialize it,
    /// and the second must not wipe what the first wrote since (a second review: with
    /// another start offset, as the first's start moved on or the second's high
    /// watermark differs, it still did).
    #[test]
    fn initializing_again_alike_keeps_the_state() {
        let mut shard = loaded_by(5);
        let acked = acked();
        apply(shard.write(k(), 0, 5, 10, acked.clone(), 1), &mut shard).unwrap();
        let again = shard.initialize(k(), 0, 10, 2);
        assert!(again.0.is_empty());
        again.1(&mut shard, Ok(())).unwrap();
        let state = apply(shard.read(k(), 5, 3), &mut shard).unwrap().unwrap();
        assert_eq!(state.batches, acked);
        // Nor another start offset under the same state epoch (the first's start moved).
        apply(shard.initialize(k(), 0, 7, 4), &mut shard).unwrap();
        let state = apply(shard.read(k(), 5, 5), &mut shard).unwrap().unwrap();
        assert_eq!((state.start_offset, state.batches), (10, acked));
        // A reset takes a newer state epoch.
        apply(shard.initialize(k(), 1, 20, 6), &mut shard).unwrap();
        assert_eq!(shard.summary(&k()).unwrap().start_offset, 20);
        // A state an admin created without a start offset is initialized by the leader
        // under its state epoch.
        apply(shard.initialize(k(), 2, -1, 7), &mut shard).unwrap();
        apply(shard.initialize(k(), 2, 30, 8), &mut shard).unwrap();
        assert_eq!(shard.summary(&k()).unwrap().start_offset, 30);
    }

    #[test]
    fn coordinator_keys_name_the_topic_as_kafka_prints_ids() {
        let id = Uuid::from_u128(0);
        assert_eq!(
            coordinator_key(&("g".into(), id, 1)),
            "g:AAAAAAAAAAAAAAAAAAAAAA:1"
        );
    }
}
