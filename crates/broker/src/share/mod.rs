//! Share groups on the partition leader (KIP-932): each (group, partition) a share group
//! consumes has a share-partition (`partition_state`) on the partition's leader, which
//! hands records to members with ShareFetch and settles their acknowledgements; share
//! sessions (`sessions`) hold which partitions each member fetches from.
//!
//! A share-partition is created the first time a member fetches from it: from the state
//! the share coordinator keeps for it (`persister`), or at the offset
//! share.auto.offset.reset names. Every change a member makes by acknowledging is
//! written to the share coordinator before it is answered; acquisitions are not (a lock
//! does not outlive the leader, so a new leader hands those records out again).
//! A leader epoch change reloads the share-partition from the coordinator.

pub mod admin;
pub mod coordinator;
pub mod partition_state;
pub mod persister;
pub mod sessions;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::{Bytes, BytesMut};
use strand_log::TopicPartition;
use strand_records::{BatchHeader, BATCH_HEADER_BYTES};
use uuid::Uuid;

use crate::broker::Broker;
use crate::error_code;
use crate::partition::Partition;
use partition_state::{Acquired, LogBatch, Persisted, ShareLimits, SharePartition};
use sessions::ShareSessions;

/// (group id, topic id, partition)
pub type ShareKey = (String, Uuid, i32);

/// share.auto.offset.reset: where a new share-partition starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AutoReset {
    Earliest,
    Latest,
    /// The first offset whose timestamp is at least now minus this many ms.
    ByDuration(i64),
}

/// A share group's settings on this broker: group.share.* with the group's configs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GroupShareSettings {
    pub limits: ShareLimits,
    pub reset: AutoReset,
    /// share.isolation.level=read_committed
    pub read_committed: bool,
    /// share.renew.acknowledge.enable
    pub renew_enabled: bool,
}

/// Parses Kafka's `by_duration:PnDTnHnMn.nS` (java.time.Duration's form) to ms.
pub fn parse_duration_ms(text: &str) -> Option<i64> {
    let rest = text.strip_prefix('P')?;
    let (days, time) = match rest.split_once('T') {
        Some((days, time)) => (days, time),
        None => (rest, ""),
    };
    let mut total = 0f64;
    if !days.is_empty() {
        total += days.strip_suffix('D')?.parse::<f64>().ok()? * 86_400_000.0;
    }
    let mut number = String::new();
    for c in time.chars() {
        match c {
            '0'..='9' | '.' | '-' => number.push(c),
            'H' | 'M' | 'S' => {
                let value: f64 = number.parse().ok()?;
                number.clear();
                total += value
                    * match c {
                        'H' => 3_600_000.0,
                        'M' => 60_000.0,
                        _ => 1_000.0,
                    };
            }
            _ => return None,
        }
    }
    (number.is_empty() && total >= 0.0 && (days.len() + time.len()) > 0).then_some(total as i64)
}

impl GroupShareSettings {
    pub fn of(broker: &Broker, group_id: &str) -> GroupShareSettings {
        let configs = broker.group_configs_of(group_id);
        let int = |name: &str, default: i32| {
            configs
                .get(name)
                .and_then(|v| v.trim().parse::<i32>().ok())
                .unwrap_or(default)
        };
        let config = &broker.config;
        let reset = match configs.get("share.auto.offset.reset").map(|v| v.trim()) {
            Some("earliest") => AutoReset::Earliest,
            Some(value) => value
                .strip_prefix("by_duration:")
                .and_then(parse_duration_ms)
                .map_or(AutoReset::Latest, AutoReset::ByDuration),
            None => AutoReset::Latest,
        };
        GroupShareSettings {
            limits: ShareLimits {
                lock_duration_ms: int(
                    "share.record.lock.duration.ms",
                    config.group_share_record_lock_duration_ms,
                ) as i64,
                delivery_count_limit: int(
                    "share.delivery.count.limit",
                    config.group_share_delivery_count_limit,
                )
                .clamp(1, i16::MAX as i32) as i16,
                max_in_flight: int(
                    "share.partition.max.record.locks",
                    config.group_share_partition_max_record_locks,
                )
                .max(1) as i64,
            },
            reset,
            read_committed: configs
                .get("share.isolation.level")
                .is_some_and(|v| v.trim() == "read_committed"),
            renew_enabled: configs
                .get("share.renew.acknowledge.enable")
                .is_none_or(|v| !v.trim().eq_ignore_ascii_case("false")),
        }
    }
}

/// A share-partition and the leader epoch it was loaded in.
#[derive(Debug)]
pub struct Slot {
    pub leader_epoch: i32,
    /// The share coordinator's state epoch (a reset of the group's offsets moves it).
    pub state_epoch: i32,
    pub state: SharePartition,
}

/// What one partition's share fetch gives a member.
#[derive(Debug, Default)]
pub struct ShareRead {
    pub records: Option<Bytes>,
    pub acquired: Vec<Acquired>,
    /// Locks ran out on the way: the state changed and should be made durable.
    pub expired: bool,
}

/// One key's share-partition, or nothing while it is not loaded: requests on a key take
/// its lock, so one loads it and the others wait for that (never two copies).
type SlotCell = Arc<tokio::sync::Mutex<Option<Slot>>>;

/// A loaded share-partition, held (its lock) for one request.
pub struct SlotGuard(tokio::sync::OwnedMutexGuard<Option<Slot>>);

impl SlotGuard {
    /// Whether the share-partition is still loaded (a refused write unloads it).
    pub fn is_loaded(&self) -> bool {
        self.0.is_some()
    }
}

impl std::ops::Deref for SlotGuard {
    type Target = Slot;
    fn deref(&self) -> &Slot {
        self.0.as_ref().expect("a SlotGuard holds a loaded slot")
    }
}

impl std::ops::DerefMut for SlotGuard {
    fn deref_mut(&mut self) -> &mut Slot {
        self.0.as_mut().expect("a SlotGuard holds a loaded slot")
    }
}

/// How long a request waits for a share-partition's lock or load beyond its own deadline
/// (a fetch with max_wait_ms 0 still gets a chance to load it).
const SLOT_WAIT_MIN: std::time::Duration = std::time::Duration::from_secs(2);

#[derive(Debug)]
pub struct ShareManager {
    slots: Mutex<HashMap<ShareKey, SlotCell>>,
    pub sessions: ShareSessions,
}

impl ShareManager {
    pub fn new(max_sessions: usize) -> ShareManager {
        ShareManager {
            slots: Mutex::new(HashMap::new()),
            sessions: ShareSessions::new(max_sessions),
        }
    }

    fn slots(&self) -> std::sync::MutexGuard<'_, HashMap<ShareKey, SlotCell>> {
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The share-partition of `key` on this leader, loaded (or created) for the current
    /// leader epoch, held until the guard drops. NOT_LEADER_OR_FOLLOWER off the leader;
    /// COORDINATOR_LOAD_IN_PROGRESS when the lock or the load takes past `deadline`.
    pub async fn slot(
        &self,
        broker: &Broker,
        key: &ShareKey,
        partition: &Arc<Partition>,
        settings: &GroupShareSettings,
        deadline: tokio::time::Instant,
    ) -> Result<SlotGuard, i16> {
        let epoch = partition
            .leader_epoch_if_leader()
            .ok_or(error_code::NOT_LEADER_OR_FOLLOWER)?;
        let deadline = deadline.max(tokio::time::Instant::now() + SLOT_WAIT_MIN);
        let cell = self.slots().entry(key.clone()).or_default().clone();
        let mut guard = tokio::time::timeout_at(deadline, cell.lock_owned())
            .await
            .map_err(|_| error_code::COORDINATOR_LOAD_IN_PROGRESS)?;
        // The epoch again, now that no one else changes the slot: it may have moved while
        // this request waited, and a slot loaded for the newer one must not be replaced.
        let epoch = partition
            .leader_epoch_if_leader()
            .ok_or(error_code::NOT_LEADER_OR_FOLLOWER)?
            .max(epoch);
        match guard.as_ref().map(|s| s.leader_epoch) {
            Some(loaded) if loaded == epoch => return Ok(SlotGuard(guard)),
            Some(loaded) if loaded > epoch => return Err(error_code::NOT_LEADER_OR_FOLLOWER),
            _ => {}
        }
        *guard = None;
        let loaded =
            tokio::time::timeout_at(deadline, load(broker, key, partition, settings, epoch))
                .await
                .map_err(|_| error_code::COORDINATOR_LOAD_IN_PROGRESS)??;
        // Leadership may have moved while the state loaded: a former leader must not
        // hand records out from it (its log read would not stop it), so it keeps
        // nothing and the member goes to the new leader.
        if partition.leader_epoch_if_leader() != Some(epoch) {
            return Err(error_code::NOT_LEADER_OR_FOLLOWER);
        }
        *guard = Some(loaded);
        Ok(SlotGuard(guard))
    }

    /// The share-partition of `key` if it is loaded for the current leader epoch (an
    /// acknowledgement never loads one: what it settles was acquired here, in this epoch).
    /// UNKNOWN_TOPIC_OR_PARTITION if it is not, as Kafka answers.
    pub async fn loaded_slot(
        &self,
        key: &ShareKey,
        partition: &Partition,
        deadline: tokio::time::Instant,
    ) -> Result<SlotGuard, i16> {
        let epoch = partition
            .leader_epoch_if_leader()
            .ok_or(error_code::NOT_LEADER_OR_FOLLOWER)?;
        let cell = self
            .slots()
            .get(key)
            .cloned()
            .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION)?;
        let guard = tokio::time::timeout_at(deadline, cell.lock_owned())
            .await
            .map_err(|_| error_code::COORDINATOR_LOAD_IN_PROGRESS)?;
        if guard.as_ref().is_some_and(|s| s.leader_epoch == epoch) {
            Ok(SlotGuard(guard))
        } else {
            Err(error_code::UNKNOWN_TOPIC_OR_PARTITION)
        }
    }

    /// Keeps what `slot` changed durable: written to the share coordinator. A write the
    /// coordinator refuses (another leader read the state since, the group's offsets were
    /// reset, or its state deleted) unloads the share-partition, so the next request
    /// loads it afresh; the client is told NOT_LEADER_OR_FOLLOWER, as Kafka tells it.
    pub async fn persist(
        &self,
        broker: &Broker,
        key: &ShareKey,
        slot: &mut SlotGuard,
    ) -> Result<(), i16> {
        let persisted = slot.state.persisted();
        let written =
            persister::write(broker, key, slot.state_epoch, slot.leader_epoch, &persisted).await;
        match written {
            Err(code) if write_unloads(code) => {
                *slot.0 = None;
                Err(error_code::NOT_LEADER_OR_FOLLOWER)
            }
            other => other,
        }
    }

    /// Unloads the share-partitions of the keys `gone` picks, each under its own lock (a
    /// request using one finishes first; the next loads it afresh from the share
    /// coordinator). A key's entry goes only once no request holds it, so there is never
    /// a second copy of a share-partition.
    pub async fn unload_where(&self, gone: impl Fn(&ShareKey) -> bool) {
        let cells: Vec<(ShareKey, SlotCell)> = self
            .slots()
            .iter()
            .filter(|(key, _)| gone(key))
            .map(|(k, c)| (k.clone(), c.clone()))
            .collect();
        for (_, cell) in &cells {
            let deadline = tokio::time::Instant::now() + SLOT_WAIT_MIN;
            if let Ok(mut guard) =
                tokio::time::timeout_at(deadline, cell.clone().lock_owned()).await
            {
                *guard = None;
            }
        }
        drop(cells);
        self.slots().retain(|key, cell| {
            let idle =
                Arc::strong_count(cell) == 1 && cell.try_lock().is_ok_and(|slot| slot.is_none());
            !(gone(key) && idle)
        });
    }

    /// What `member_id` acquired on `connection` (None: on any) in `group_id`'s
    /// share-partitions here goes back to the others (its share session closed), durably.
    /// The group's last session here closing drops its share-partitions (Kafka's
    /// onGroupEmpty): they are loaded afresh from the share coordinator at the next
    /// fetch, so offsets an admin reset meanwhile apply.
    pub async fn release_member(
        &self,
        broker: &Broker,
        group_id: &str,
        member_id: &str,
        connection: Option<u64>,
    ) {
        for (key, cell) in self.of_group(group_id) {
            let deadline = tokio::time::Instant::now() + SLOT_WAIT_MIN;
            let Ok(guard) = tokio::time::timeout_at(deadline, cell.lock_owned()).await else {
                continue;
            };
            let mut slot = SlotGuard(guard);
            if !slot.is_loaded() {
                continue;
            }
            // No longer the leader of its epoch: nothing to release here (the new
            // leader hands the records out again); the share-partition is dropped.
            let leads = partition_of(broker, &key.1, key.2)
                .ok()
                .and_then(|p| p.leader_epoch_if_leader());
            if leads != Some(slot.leader_epoch) {
                *slot.0 = None;
                continue;
            }
            if slot.state.release_member(member_id, connection) {
                if let Err(code) = self.persist(broker, &key, &mut slot).await {
                    tracing::debug!(group = group_id, code, "persisting a release failed");
                }
            }
        }
        if !self.sessions.has_group(group_id) {
            self.unload_where(|key| key.0 == group_id).await;
        }
    }

    /// Every loaded share-partition of `group_id`, with its key.
    fn of_group(&self, group_id: &str) -> Vec<(ShareKey, SlotCell)> {
        self.slots()
            .iter()
            .filter(|(k, _)| k.0 == group_id)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }
}

/// Loads `key`'s share-partition as leader in `epoch`: its state from the share
/// coordinator (which fences older leaders), or where share.auto.offset.reset says for a
/// new one (or one an admin initialized without a start offset).
async fn load(
    broker: &Broker,
    key: &ShareKey,
    partition: &Partition,
    settings: &GroupShareSettings,
    epoch: i32,
) -> Result<Slot, i16> {
    let (state_epoch, persisted) = match persister::read(broker, key, epoch)
        .await
        .map_err(fenced_is_not_leader)?
    {
        Some((state_epoch, persisted)) if persisted.start_offset >= 0 => (state_epoch, persisted),
        found => {
            let state_epoch = found.map_or(0, |(epoch, _)| epoch);
            let start = initial_offset(partition, settings)?;
            persister::initialize(broker, key, state_epoch, start)
                .await
                .map_err(fenced_is_not_leader)?;
            // Read again as this leader, so an older one is fenced.
            persister::read(broker, key, epoch)
                .await
                .map_err(fenced_is_not_leader)?
                .unwrap_or((
                    state_epoch,
                    Persisted {
                        start_offset: start,
                        batches: Vec::new(),
                    },
                ))
        }
    };
    let mut state = SharePartition::new(&persisted, settings.limits);
    state.log_start_moved(partition.log().log_start_offset());
    Ok(Slot {
        leader_epoch: epoch,
        state_epoch,
        state,
    })
}

/// A connection closed: the share sessions it opened close too, and their members'
/// records are released (in the background: the connection is gone).
pub fn connection_closed(broker: &Arc<Broker>, connection_id: u64) {
    let closed = broker.share.sessions.connection_closed(connection_id);
    if closed.is_empty() {
        return;
    }
    let broker = broker.clone();
    tokio::spawn(async move {
        for (group_id, member_id) in closed {
            broker
                .share
                .release_member(&broker, &group_id, &member_id, Some(connection_id))
                .await;
        }
    });
}

/// A refused write of the share state that unloads the share-partition: another leader
/// read the state since, the group's offsets were reset, or its state deleted.
pub fn write_unloads(code: i16) -> bool {
    matches!(
        code,
        error_code::FENCED_LEADER_EPOCH
            | error_code::FENCED_STATE_EPOCH
            | error_code::INVALID_REQUEST
    )
}

/// The share coordinator fenced this leader: to the client, it is not the leader.
pub fn fenced_is_not_leader(code: i16) -> i16 {
    match code {
        error_code::FENCED_LEADER_EPOCH | error_code::FENCED_STATE_EPOCH => {
            error_code::NOT_LEADER_OR_FOLLOWER
        }
        other => other,
    }
}

/// Where a new share-partition starts (share.auto.offset.reset).
fn initial_offset(partition: &Partition, settings: &GroupShareSettings) -> Result<i64, i16> {
    let log = partition.log();
    Ok(match settings.reset {
        AutoReset::Earliest => log.log_start_offset(),
        AutoReset::Latest => {
            if settings.read_committed {
                log.last_stable_offset()
            } else {
                log.high_watermark()
            }
        }
        AutoReset::ByDuration(ms) => {
            let since = crate::shard_log::now_ms() - ms;
            match log.offset_for_timestamp(since) {
                Ok(Some(found)) => found.offset.min(log.high_watermark()),
                Ok(None) => log.high_watermark(),
                Err(error) => return Err(error.kafka_error_code()),
            }
        }
    })
}

/// Reads from `partition` at the share-partition's next fetch offset and acquires for
/// `member`: the batches holding acquired records, and the acquired ranges.
#[allow(clippy::too_many_arguments)]
pub fn read_and_acquire(
    slot: &mut Slot,
    partition: &Arc<Partition>,
    member: &str,
    connection: u64,
    max_bytes: u64,
    max_records: i64,
    strict: bool,
    read_committed: bool,
    now_ms: i64,
) -> Result<ShareRead, i16> {
    let (expired, offset) =
        before_read(&mut slot.state, partition.log().log_start_offset(), now_ms);
    let nothing = ShareRead {
        expired,
        ..ShareRead::default()
    };
    let Some(offset) = offset else {
        return Ok(nothing);
    };
    // Warming this partition's data from disk failed: answered as Fetch answers it.
    if partition.warming().take_failure() {
        return Err(error_code::KAFKA_STORAGE_ERROR);
    }
    // As Fetch reads (`cold_reads`): never waiting for the disk on a runtime worker. Data
    // not in the page cache is warmed on a blocking thread, which wakes the parked fetch.
    let read = strand_log::read_mode::without_waiting(|| {
        let (read, aborted) = partition.read(offset, max_bytes, true, read_committed)?;
        let bytes = match &read.slice {
            Some(slice) => Some(slice.read_to_vec().map_err(strand_log::LogError::Io)?),
            None => None,
        };
        Ok::<_, strand_log::LogError>((bytes, aborted))
    });
    let (bytes, aborted) = match read {
        Ok((Some(bytes), aborted)) => (bytes, aborted),
        Ok((None, _)) | Err(strand_log::LogError::OffsetOutOfRange { .. }) => return Ok(nothing),
        Err(error) if strand_log::read_mode::would_block(&error) => {
            if let Some(miss) = strand_log::read_mode::take_miss() {
                crate::cold_reads::warm(partition, miss);
            }
            return Ok(nothing);
        }
        Err(error) => return Err(error.kafka_error_code()),
    };
    let aborted = read_committed.then_some(aborted.as_slice());
    let read = Read {
        offset,
        bytes: &bytes,
        aborted,
    };
    Ok(acquire_read(
        &mut slot.state,
        read,
        member,
        connection,
        max_records,
        strict,
        now_ms,
        expired,
    ))
}

/// Before a share fetch reads the log: locks that ran out released (whether any did)
/// and the log's start applied; the offset to read from, if anything can be acquired.
pub fn before_read(state: &mut SharePartition, log_start: i64, now_ms: i64) -> (bool, Option<i64>) {
    let expired = state.expire_locks(now_ms);
    state.log_start_moved(log_start);
    (
        expired,
        state.can_acquire().then(|| state.next_fetch_offset()),
    )
}

/// What a share fetch read of the log: from `offset`, its bytes (whole batches), and
/// under read_committed the aborted transactions (producer id, first offset).
pub struct Read<'a> {
    pub offset: i64,
    pub bytes: &'a [u8],
    pub aborted: Option<&'a [(i64, i64)]>,
}

/// Acquires for `member` what `read` holds (`before_read` gave its offset): the batches
/// holding acquired records, and the acquired ranges. No I/O: the simulator calls it
/// with its own reads.
#[allow(clippy::too_many_arguments)]
pub fn acquire_read(
    state: &mut SharePartition,
    read: Read<'_>,
    member: &str,
    connection: u64,
    max_records: i64,
    strict: bool,
    now_ms: i64,
    expired: bool,
) -> ShareRead {
    let batches = scan(read.bytes, read.aborted);
    let log_batches: Vec<LogBatch> = batches.iter().map(|(b, _)| *b).collect();
    let acquired = state.acquire(
        member,
        connection,
        &log_batches,
        read.offset,
        max_records,
        strict,
        now_ms,
    );
    if acquired.is_empty() {
        return ShareRead {
            expired,
            ..ShareRead::default()
        };
    }
    // Only the batches with a record acquired now go to the member.
    let mut out = BytesMut::new();
    for (batch, range) in &batches {
        let holds = acquired
            .iter()
            .any(|a| a.first <= batch.last_offset && batch.base_offset <= a.last);
        if holds {
            out.extend_from_slice(&read.bytes[range.clone()]);
        }
    }
    ShareRead {
        records: Some(out.freeze()),
        acquired,
        expired,
    }
}

/// The batches in `bytes` (whole ones only) with their byte ranges; control batches, and
/// under read_committed the batches of aborted transactions (`aborted`: (producer id,
/// first offset)), are marked to skip.
fn scan(bytes: &[u8], aborted: Option<&[(i64, i64)]>) -> Vec<(LogBatch, std::ops::Range<usize>)> {
    let mut out = Vec::new();
    let mut position = 0usize;
    // As Kafka's consumer reads them: each aborted transaction (producer id, first
    // offset), by first offset, starts counting once a batch reaches its first offset,
    // and ends at that producer's next marker; a transaction that ended is not counted
    // again (a later one of the same producer may have committed).
    let mut pending: Vec<(i64, i64)> = aborted.map(<[_]>::to_vec).unwrap_or_default();
    pending.sort_by_key(|(_, first)| *first);
    let mut pending = pending.into_iter().peekable();
    let mut aborting: std::collections::HashSet<i64> = std::collections::HashSet::new();
    while position + BATCH_HEADER_BYTES <= bytes.len() {
        let Ok(header) = BatchHeader::parse(&bytes[position..]) else {
            break;
        };
        let end = position + header.total_bytes() as usize;
        if end > bytes.len() {
            break;
        }
        while let Some((producer, _)) = pending.next_if(|(_, first)| *first <= header.last_offset())
        {
            aborting.insert(producer);
        }
        let is_control = header.attributes.is_control();
        let aborted_batch = header.attributes.is_transactional()
            && !is_control
            && aborting.contains(&header.producer_id);
        if is_control {
            // The marker ends the producer's transaction here.
            aborting.remove(&header.producer_id);
        }
        out.push((
            LogBatch {
                base_offset: header.base_offset,
                last_offset: header.last_offset(),
                skip: is_control || aborted_batch,
            },
            position..end,
        ));
        position = end;
    }
    out
}

/// Where a partition's leader is now, for a NOT_LEADER_OR_FOLLOWER answer (Kafka's
/// CurrentLeader and NodeEndpoints, so the client goes there without a metadata round
/// trip): (leader, leader epoch, and the leader's (host, port, rack) on `listener`).
pub type LeaderHint = (i32, i32, Option<(String, i32, Option<String>)>);

pub fn leader_hint(
    broker: &Broker,
    topic_id: &Uuid,
    partition: i32,
    listener: &str,
) -> Option<LeaderHint> {
    let cluster = broker.cluster()?;
    let topic = broker.topic_by_id(topic_id)?;
    let image = cluster.image();
    let state = image.partition(&topic.name, partition)?;
    let endpoint = image.brokers.get(&state.leader).and_then(|b| {
        b.endpoint(listener, &broker.config.listener_name)
            .map(|(host, port)| (host.to_string(), port as i32, b.rack.clone()))
    });
    Some((state.leader, state.leader_epoch, endpoint))
}

/// The partition a share key names, if the topic is known here.
pub fn partition_of(broker: &Broker, topic_id: &Uuid, index: i32) -> Result<Arc<Partition>, i16> {
    let topic = broker
        .topic_by_id(topic_id)
        .ok_or(error_code::UNKNOWN_TOPIC_ID)?;
    broker
        .partition(&TopicPartition::new(topic.name, index))
        .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn txn_batch(offset: i64, producer: i64) -> Vec<u8> {
        let mut builder = strand_records::BatchBuilder::new(offset, 0)
            .transactional()
            .producer(producer, 0, 0);
        builder.push(strand_records::Record::new(None, Some(b"v".to_vec()), 0));
        builder.build()
    }

    fn marker(offset: i64, producer: i64, commit: bool) -> Vec<u8> {
        let result = if commit {
            strand_records::TxnResult::Commit
        } else {
            strand_records::TxnResult::Abort
        };
        let mut batch = strand_records::EndTxnMarker {
            result,
            coordinator_epoch: 0,
        }
        .batch(producer, 0, 0);
        strand_records::set_base_offset(&mut batch, offset);
        batch
    }

    #[test]
    fn an_aborted_transaction_hides_only_its_own_batches() {
        // Producer 7 aborts at 0..1, then commits at 2..3 (read_committed from 0).
        let bytes = [
            txn_batch(0, 7),
            marker(1, 7, false),
            txn_batch(2, 7),
            marker(3, 7, true),
        ]
        .concat();
        let skips: Vec<(i64, bool)> = scan(&bytes, Some(&[(7, 0)]))
            .iter()
            .map(|(b, _)| (b.base_offset, b.skip))
            .collect();
        assert_eq!(skips, [(0, true), (1, true), (2, false), (3, true)]);
        // Read uncommitted, only the markers are skipped.
        let skips: Vec<bool> = scan(&bytes, None).iter().map(|(b, _)| b.skip).collect();
        assert_eq!(skips, [false, true, false, true]);
    }

    #[test]
    fn durations_parse_as_java_parses_them() {
        assert_eq!(parse_duration_ms("PT1H"), Some(3_600_000));
        assert_eq!(parse_duration_ms("P1D"), Some(86_400_000));
        assert_eq!(
            parse_duration_ms("P1DT2M3.5S"),
            Some(86_400_000 + 120_000 + 3_500)
        );
        assert_eq!(parse_duration_ms("PT"), None);
        assert_eq!(parse_duration_ms("1H"), None);
        assert_eq!(parse_duration_ms("PT-1H"), None);
    }
}
