//! Follower replication: one task per leader broker pulls every partition this broker
//! follows from it with Kafka's Fetch (replica id set), appends what arrives keeping the
//! leader's offsets and epochs, and takes the leader's high watermark.
//!
//! After a leader change a partition first truncates by leader epoch (KIP-101/279): it
//! asks the leader (OffsetForLeaderEpoch) where its own latest epoch ends in the leader's
//! log and cuts its log there, so records a previous leader wrote but never committed go
//! away before new ones arrive. Never by high watermark alone, except when the leader
//! knows none of its epochs.
//!
//! Thread-safe: the followed set behind a mutex per leader; each task owns its connection.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::offset_for_leader_epoch_request::{
    OffsetForLeaderPartition, OffsetForLeaderTopic,
};
use kafka_protocol::messages::{
    ApiKey, BrokerId, FetchRequest, FetchResponse, OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use strand_log::{LogError, LogResult, TopicPartition};
use strand_protocol::client::Connection;
use strand_raft::state_machine::Published;
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::inter_broker::InterBrokerSecurity;
use crate::error_code;
use crate::partition::Partition;
use crate::replication_throttle::{names_replica, ReplicationThrottle};
use crate::tiered::TieredStorage;

/// The topic config naming replicas whose follower fetches are throttled.
const FOLLOWER_THROTTLED_REPLICAS: &str = "follower.replication.throttled.replicas";

const FETCH_VERSION: i16 = 12;
const OFFSET_FOR_LEADER_EPOCH_VERSION: i16 = 4;
/// replica.fetch.wait.max.ms
const FETCH_WAIT_MAX_MS: i32 = 500;
/// replica.fetch.max.bytes (per partition) and replica.fetch.response.max.bytes.
const PARTITION_FETCH_MAX_BYTES: i32 = 1024 * 1024;
const RESPONSE_FETCH_MAX_BYTES: i32 = 10 * 1024 * 1024;
/// replica.fetch.backoff.ms: after an error, before trying again.
const FETCH_BACKOFF: Duration = Duration::from_millis(200);
/// Waiting for a follower request to be answered, beyond the fetch's own wait.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Debug)]
struct Followed {
    partition: Arc<Partition>,
    leader_epoch: i32,
    needs_truncation: bool,
    /// Skipped until then (an error from the leader, e.g. it does not know it leads yet).
    paused_until: Option<tokio::time::Instant>,
}

#[derive(Debug)]
struct LeaderFetcher {
    followed: Mutex<HashMap<TopicPartition, Followed>>,
    changed: Notify,
    task: Mutex<Option<JoinHandle<()>>>,
}

/// Every leader this broker fetches from.
#[derive(Debug)]
pub struct Fetchers {
    node_id: i32,
    metadata: watch::Receiver<Published>,
    by_leader: Mutex<HashMap<i32, Arc<LeaderFetcher>>>,
    /// follower.replication.throttled.rate, shared by every leader's fetcher.
    throttle: Arc<ReplicationThrottle>,
    /// How connections to leaders are opened (TLS, SASL).
    security: Arc<InterBrokerSecurity>,
    /// Tiered storage: a follower behind its leader's local log start starts after the
    /// remote copy.
    tiered: Option<Arc<TieredStorage>>,
}

impl Fetchers {
    pub fn new(
        node_id: i32,
        metadata: watch::Receiver<Published>,
        throttle: Arc<ReplicationThrottle>,
        security: Arc<InterBrokerSecurity>,
        tiered: Option<Arc<TieredStorage>>,
    ) -> Fetchers {
        Fetchers {
            node_id,
            metadata,
            by_leader: Mutex::new(HashMap::new()),
            throttle,
            security,
            tiered,
        }
    }

    /// Follows `tp` from `leader` at `leader_epoch`, truncating first.
    pub fn follow(
        &self,
        tp: TopicPartition,
        partition: Arc<Partition>,
        leader: i32,
        leader_epoch: i32,
    ) {
        self.unfollow(&tp);
        if leader < 0 {
            return; // no leader: wait for the next assignment
        }
        let mut by_leader = self.by_leader.lock().unwrap_or_else(|p| p.into_inner());
        let fetcher = by_leader.entry(leader).or_insert_with(|| {
            Arc::new(LeaderFetcher {
                followed: Mutex::new(HashMap::new()),
                changed: Notify::new(),
                task: Mutex::new(None),
            })
        });
        fetcher
            .followed
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                tp,
                Followed {
                    partition,
                    leader_epoch,
                    needs_truncation: true,
                    paused_until: None,
                },
            );
        let mut task = fetcher.task.lock().unwrap_or_else(|p| p.into_inner());
        if task.as_ref().is_none_or(JoinHandle::is_finished) {
            *task = Some(tokio::spawn(run(
                self.node_id,
                leader,
                fetcher.clone(),
                self.metadata.clone(),
                self.throttle.clone(),
                self.security.clone(),
                self.tiered.clone(),
            )));
        }
        fetcher.changed.notify_one();
    }

    pub fn unfollow(&self, tp: &TopicPartition) {
        let by_leader = self.by_leader.lock().unwrap_or_else(|p| p.into_inner());
        for fetcher in by_leader.values() {
            fetcher
                .followed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(tp);
        }
    }

    /// Stops every fetcher (shutdown).
    pub fn stop(&self) {
        let by_leader =
            std::mem::take(&mut *self.by_leader.lock().unwrap_or_else(|p| p.into_inner()));
        for fetcher in by_leader.values() {
            if let Some(task) = fetcher
                .task
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take()
            {
                task.abort();
            }
        }
    }
}

fn leader_address(metadata: &watch::Receiver<Published>, leader: i32) -> Option<String> {
    let image = metadata.borrow().image.clone();
    image
        .brokers
        .get(&leader)
        .map(|b| format!("{}:{}", b.host, b.port))
}

/// The partitions among `active` this follower throttles: named with this broker in the
/// topic's follower.replication.throttled.replicas, and not in the ISR.
fn throttled_partitions(
    node_id: i32,
    metadata: &watch::Receiver<Published>,
    active: &[(TopicPartition, Arc<Partition>, i32, bool)],
) -> HashSet<TopicPartition> {
    let image = metadata.borrow().image.clone();
    active
        .iter()
        .map(|(tp, ..)| tp)
        .filter(|tp| {
            let Some(topic) = image.topic(&tp.topic) else {
                return false;
            };
            let listed = topic
                .configs
                .get(FOLLOWER_THROTTLED_REPLICAS)
                .is_some_and(|value| names_replica(value, tp.partition, node_id));
            let in_sync = image
                .partition(&tp.topic, tp.partition)
                .is_some_and(|state| state.isr.contains(&node_id));
            listed && !in_sync
        })
        .cloned()
        .collect()
}

async fn run(
    node_id: i32,
    leader: i32,
    fetcher: Arc<LeaderFetcher>,
    metadata: watch::Receiver<Published>,
    throttle: Arc<ReplicationThrottle>,
    security: Arc<InterBrokerSecurity>,
    tiered: Option<Arc<TieredStorage>>,
) {
    let mut connection: Option<Connection> = None;
    loop {
        let mut active: Vec<(TopicPartition, Arc<Partition>, i32, bool)> = {
            let now = tokio::time::Instant::now();
            fetcher
                .followed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .iter()
                .filter(|(_, f)| f.paused_until.is_none_or(|until| until <= now))
                // A failed replica (offline log, damage found) stops following until a
                // restart re-checks it: caught up, the leader would take it back into
                // the ISR and a preferred-leader election would give it leadership.
                .filter(|(_, f)| f.partition.log().failure().is_none())
                .map(|(tp, f)| {
                    (
                        tp.clone(),
                        f.partition.clone(),
                        f.leader_epoch,
                        f.needs_truncation,
                    )
                })
                .collect()
        };
        if active.is_empty() {
            // Nothing to fetch (or everything paused): wait for a change or a pause to end.
            let _ = tokio::time::timeout(FETCH_BACKOFF, fetcher.changed.notified()).await;
            continue;
        }
        // Over follower.replication.throttled.rate: throttled replicas sit this fetch out.
        let throttled = if throttle.is_limited() {
            throttled_partitions(node_id, &metadata, &active)
        } else {
            HashSet::new()
        };
        if !throttled.is_empty() && throttle.is_exceeded(std::time::Instant::now()) {
            active.retain(|(tp, ..)| !throttled.contains(tp));
            if active.is_empty() {
                tokio::time::sleep(FETCH_BACKOFF).await;
                continue;
            }
        }
        // A connection the leader closed (or whose SASL session is ending) is replaced.
        if connection.as_ref().is_some_and(Connection::is_closed) {
            connection = None;
        }
        if connection.is_none() {
            let Some(address) = leader_address(&metadata, leader) else {
                tokio::time::sleep(FETCH_BACKOFF).await;
                continue;
            };
            match security
                .connect(&address, 1, "strand-replica-fetcher")
                .await
            {
                Ok(c) => connection = Some(c),
                Err(error) => {
                    tracing::debug!(
                        leader,
                        error = format!("{error:#}"),
                        "replica fetcher: cannot connect"
                    );
                    tokio::time::sleep(FETCH_BACKOFF).await;
                    continue;
                }
            }
        }
        let conn = connection.as_ref().expect("connected above");
        let to_truncate: Vec<_> = active.iter().filter(|a| a.3).cloned().collect();
        let result = if to_truncate.is_empty() {
            let tiered = tiered.as_ref();
            fetch_once(
                node_id, conn, &fetcher, &active, &throttled, &throttle, tiered,
            )
            .await
        } else {
            truncate(node_id, conn, &fetcher, &to_truncate).await
        };
        if let Err(error) = result {
            tracing::debug!(leader, %error, "replica fetcher: request failed; reconnecting");
            connection = None;
            tokio::time::sleep(FETCH_BACKOFF).await;
        }
    }
}

fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

/// Groups per topic name, as requests list them.
fn by_topic<T>(
    items: impl IntoIterator<Item = (TopicPartition, T)>,
) -> Vec<(String, Vec<(i32, T)>)> {
    // Linear in the partitions: a fetcher may follow thousands from one leader.
    let mut topics: Vec<(String, Vec<(i32, T)>)> = Vec::new();
    let mut index: HashMap<String, usize> = HashMap::new();
    for (tp, item) in items {
        let slot = *index.entry(tp.topic.clone()).or_insert_with(|| {
            topics.push((tp.topic.clone(), Vec::new()));
            topics.len() - 1
        });
        topics[slot].1.push((tp.partition, item));
    }
    topics
}

fn set_state(
    fetcher: &LeaderFetcher,
    tp: &TopicPartition,
    epoch: i32,
    change: impl FnOnce(&mut Followed),
) {
    let mut followed = fetcher.followed.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(entry) = followed.get_mut(tp).filter(|f| f.leader_epoch == epoch) {
        change(entry);
    }
}

fn pause(fetcher: &LeaderFetcher, tp: &TopicPartition, epoch: i32) {
    set_state(fetcher, tp, epoch, |f| {
        f.paused_until = Some(tokio::time::Instant::now() + FETCH_BACKOFF)
    });
}

/// Where to cut our log, told by the leader that `leader_epoch` (the largest it has at or
/// below ours) ends at `end_offset` in its log: KIP-101/279 from OffsetForLeaderEpoch,
/// KIP-320 from a fetch's diverging epoch.
pub fn truncation_target(log: &strand_log::Log, leader_epoch: i32, end_offset: i64) -> i64 {
    let ours = log.leader_epochs().latest().map(|e| e.epoch);
    match ours {
        // The leader has none of our epochs: the high watermark is all we know to be
        // committed.
        _ if end_offset < 0 => log.high_watermark(),
        None => log.high_watermark(),
        Some(ours) if leader_epoch == ours => end_offset,
        // The leader's epoch is older than our latest: our log may diverge from where
        // that epoch ends in ours too. One we do not know (newer than all of ours, as a
        // stale answer can name after a truncation) bounds nothing of ours: Kafka cuts to
        // the leader's end then, never below our log start.
        Some(_) => match log.end_offset_for_epoch(leader_epoch).1 {
            ours if ours < 0 => end_offset,
            ours => end_offset.min(ours),
        },
    }
    .max(log.log_start_offset())
}

/// Runs a follower's truncation or reset, which syncs files, on a blocking thread: a
/// stalled disk then holds up this partition's replication, not a runtime worker.
async fn off_runtime<T: Send + 'static>(
    partition: &Arc<Partition>,
    epoch: i32,
    work: impl FnOnce(&Partition, i32) -> LogResult<T> + Send + 'static,
) -> LogResult<T> {
    let partition = partition.clone();
    tokio::task::spawn_blocking(move || work(&partition, epoch))
        .await
        .unwrap_or_else(|error| Err(LogError::Io(std::io::Error::other(error))))
}

/// Asks the leader where our latest epoch ends and cuts the log there.
async fn truncate(
    node_id: i32,
    connection: &Connection,
    fetcher: &LeaderFetcher,
    partitions: &[(TopicPartition, Arc<Partition>, i32, bool)],
) -> anyhow::Result<()> {
    let mut asked = Vec::new();
    for (tp, partition, epoch, _) in partitions {
        let latest = partition
            .log()
            .leader_epochs()
            .latest()
            .map_or(-1, |e| e.epoch);
        asked.push((tp.clone(), (partition.clone(), *epoch, latest)));
    }
    let topics = by_topic(
        asked
            .iter()
            .map(|(tp, (_, epoch, latest))| (tp.clone(), (*epoch, *latest))),
    )
    .into_iter()
    .map(|(name, partitions)| {
        OffsetForLeaderTopic::default()
            .with_topic(topic_name(&name))
            .with_partitions(
                partitions
                    .into_iter()
                    .map(|(index, (current, asked_epoch))| {
                        OffsetForLeaderPartition::default()
                            .with_partition(index)
                            .with_current_leader_epoch(current)
                            .with_leader_epoch(asked_epoch)
                    })
                    .collect(),
            )
    })
    .collect();
    let request = OffsetForLeaderEpochRequest::default()
        .with_replica_id(BrokerId(node_id))
        .with_topics(topics);
    let response: OffsetForLeaderEpochResponse = tokio::time::timeout(
        REQUEST_TIMEOUT,
        connection.call(
            ApiKey::OffsetForLeaderEpoch,
            OFFSET_FOR_LEADER_EPOCH_VERSION,
            &request,
        ),
    )
    .await??;
    let asked: HashMap<_, _> = asked.into_iter().collect();
    for topic in response.topics {
        for answer in topic.partitions {
            let tp = TopicPartition::new(topic.topic.as_str(), answer.partition);
            let Some((partition, epoch, _)) = asked.get(&tp) else {
                continue;
            };
            if answer.error_code != error_code::NONE {
                pause(fetcher, &tp, *epoch);
                continue;
            }
            let end_offset = answer.end_offset;
            let leader_epoch = answer.leader_epoch;
            let outcome = off_runtime(partition, *epoch, move |partition, epoch| {
                partition.truncate_as_follower(epoch, |log| {
                    truncation_target(log, leader_epoch, end_offset)
                })
            })
            .await;
            if let Ok(Some((from, to))) = &outcome {
                if to < from {
                    tracing::info!(partition = %tp, from, to, "truncating by leader epoch");
                }
            }
            match outcome {
                Ok(Some(_)) => set_state(fetcher, &tp, *epoch, |f| f.needs_truncation = false),
                Ok(None) => {} // the role moved on; the new assignment decides
                Err(error) => {
                    tracing::error!(partition = %tp, %error, "truncation failed");
                    pause(fetcher, &tp, *epoch);
                }
            }
        }
    }
    Ok(())
}

async fn fetch_once(
    node_id: i32,
    connection: &Connection,
    fetcher: &LeaderFetcher,
    partitions: &[(TopicPartition, Arc<Partition>, i32, bool)],
    throttled: &HashSet<TopicPartition>,
    throttle: &ReplicationThrottle,
    tiered: Option<&Arc<TieredStorage>>,
) -> anyhow::Result<()> {
    let mut wanted = Vec::new();
    // Flush before ack: a tail this replica wrote as leader may still be syncing, and the
    // fetch offsets below tell the leader it is on disk.
    let mut tails = Vec::new();
    for (tp, partition, epoch, _) in partitions {
        let (log_end, log_start, last_epoch) = {
            let log = partition.log();
            if let Some(tail) = partition.unsynced_tail_of(&log) {
                tails.push((tp.clone(), *epoch, tail.start()));
            }
            let last_epoch = log.leader_epochs().latest().map_or(-1, |e| e.epoch);
            (log.log_end_offset(), log.log_start_offset(), last_epoch)
        };
        wanted.push((
            tp.clone(),
            (partition.clone(), *epoch, log_end, log_start, last_epoch),
        ));
    }
    for (tp, epoch, sync) in tails {
        if let Err(error) = sync.finish().await {
            tracing::error!(partition = %tp, %error, "follower sync failed");
            pause(fetcher, &tp, epoch);
            return Ok(()); // the next round leaves it out
        }
    }
    let topics = by_topic(
        wanted
            .iter()
            .map(|(tp, (_, epoch, end, start, last))| (tp.clone(), (*epoch, *end, *start, *last))),
    )
    .into_iter()
    .map(|(name, partitions)| {
        FetchTopic::default()
            .with_topic(topic_name(&name))
            .with_partitions(
                partitions
                    .into_iter()
                    .map(|(index, (epoch, end, start, last_epoch))| {
                        // KIP-320: the leader checks our log against its epochs on
                        // every fetch and answers a diverging epoch to truncate to.
                        FetchPartition::default()
                            .with_partition(index)
                            .with_current_leader_epoch(epoch)
                            .with_fetch_offset(end)
                            .with_last_fetched_epoch(last_epoch)
                            .with_log_start_offset(start)
                            .with_partition_max_bytes(PARTITION_FETCH_MAX_BYTES)
                    })
                    .collect(),
            )
    })
    .collect();
    let request = FetchRequest::default()
        .with_replica_id(BrokerId(node_id))
        .with_max_wait_ms(FETCH_WAIT_MAX_MS)
        .with_min_bytes(1)
        .with_max_bytes(RESPONSE_FETCH_MAX_BYTES)
        .with_isolation_level(0)
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(topics);
    let response: FetchResponse = tokio::time::timeout(
        REQUEST_TIMEOUT,
        connection.call(ApiKey::Fetch, FETCH_VERSION, &request),
    )
    .await??;
    if response.error_code != error_code::NONE {
        anyhow::bail!("fetch failed with error {}", response.error_code);
    }
    let wanted: HashMap<_, _> = wanted.into_iter().collect();
    // Flush-before-ack partitions' syncs, all under way at once and finished before the
    // next fetch reports the new offsets to the leader.
    let mut syncs = Vec::new();
    for topic in response.responses {
        for answer in topic.partitions {
            let tp = TopicPartition::new(topic.topic.as_str(), answer.partition_index);
            let Some((partition, epoch, fetched_at, _, _)) = wanted.get(&tp) else {
                continue;
            };
            // The partition may have moved on (new epoch) while the fetch was out.
            let current = fetcher
                .followed
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(&tp)
                .is_some_and(|f| f.leader_epoch == *epoch && !f.needs_truncation);
            if !current {
                continue;
            }
            let diverging = &answer.diverging_epoch;
            if answer.error_code == error_code::NONE && diverging.epoch >= 0 {
                let (leader_epoch, end_offset) = (diverging.epoch, diverging.end_offset);
                let outcome = off_runtime(partition, *epoch, move |partition, epoch| {
                    partition.truncate_as_follower(epoch, |log| {
                        truncation_target(log, leader_epoch, end_offset)
                    })
                })
                .await;
                match outcome {
                    Ok(Some((from, to))) if to < from => {
                        tracing::info!(partition = %tp, from, to, leader_epoch, "truncating to the leader's diverging epoch");
                    }
                    Ok(_) => {}
                    Err(error) => {
                        tracing::error!(partition = %tp, %error, "truncation failed");
                        pause(fetcher, &tp, *epoch);
                    }
                }
                continue;
            }
            match answer.error_code {
                error_code::NONE => {
                    let records = answer.records.unwrap_or_default();
                    if throttled.contains(&tp) {
                        throttle.record(records.len() as u64);
                    }
                    if partition.log().log_end_offset() != *fetched_at {
                        continue; // truncated meanwhile
                    }
                    match partition.append_as_follower(*epoch, &records, answer.high_watermark) {
                        Ok(appended) => {
                            if let Some(appended) = appended {
                                if appended.info.is_some() {
                                    partition.counters().replicated_in(records.len() as u64);
                                }
                                if let Some(durable) = appended.durable {
                                    syncs.push((tp.clone(), *epoch, durable.start()));
                                }
                            }
                            // FetcherLagMetrics is this less the log end, at the scrape.
                            partition.saw_leader_high_watermark(answer.high_watermark);
                            if let Err(error) =
                                partition.follow_log_start(*epoch, answer.log_start_offset)
                            {
                                tracing::warn!(partition = %tp, %error, "following the leader's log start failed");
                            }
                        }
                        Err(LogError::NonMonotonicOffset { .. }) => {
                            set_state(fetcher, &tp, *epoch, |f| f.needs_truncation = true)
                        }
                        Err(error) => {
                            tracing::error!(partition = %tp, %error, "follower append failed");
                            pause(fetcher, &tp, *epoch);
                        }
                    }
                }
                error_code::OFFSET_OUT_OF_RANGE => {
                    if *fetched_at < answer.log_start_offset {
                        // Behind the leader's retention: start over at its log start.
                        let start = answer.log_start_offset;
                        let result = off_runtime(partition, *epoch, move |partition, epoch| {
                            partition.reset_as_follower(epoch, start)
                        })
                        .await;
                        if let Err(error) = result {
                            tracing::error!(partition = %tp, %error, "resetting follower log failed");
                            pause(fetcher, &tp, *epoch);
                        }
                    } else {
                        set_state(fetcher, &tp, *epoch, |f| f.needs_truncation = true);
                    }
                }
                error_code::OFFSET_MOVED_TO_TIERED_STORAGE => {
                    // Below the leader's local log start, in the remote store: start our
                    // log where the store ends (the leader holds everything after it
                    // locally; what is below stays readable from the store), with the
                    // copies' leader epochs and producer state. Until this broker has
                    // read the store's listing, or while ours is older than the
                    // leader's deletions, back off and ask again.
                    let remote_end = partition.log().remote_end();
                    let remote = tiered.and_then(|t| t.remote_log(&tp).map(|r| (t, r)));
                    match (remote_end.filter(|end| *end > *fetched_at), remote) {
                        (Some(start), Some((tiered, remote))) => {
                            match tiered.auxiliary_state(&remote, start).await {
                                Ok((epochs, snapshot)) => {
                                    let result =
                                        off_runtime(partition, *epoch, move |partition, epoch| {
                                            partition.reset_after_remote(
                                                epoch,
                                                start,
                                                &epochs,
                                                snapshot.as_deref(),
                                            )
                                        })
                                        .await;
                                    if let Err(error) = result {
                                        tracing::error!(partition = %tp, %error, "starting the follower log after the remote copy failed");
                                        pause(fetcher, &tp, *epoch);
                                    }
                                }
                                Err(error) => {
                                    tracing::warn!(partition = %tp, %error, "reading the remote copy's epochs and producer state failed");
                                    pause(fetcher, &tp, *epoch);
                                }
                            }
                        }
                        (_, remote) => {
                            // Our listing is older than the leader's deletions: the next
                            // pass lists the store again.
                            if let Some((_, remote)) = remote {
                                remote.want_listing();
                            }
                            pause(fetcher, &tp, *epoch);
                        }
                    }
                }
                _ => pause(fetcher, &tp, *epoch),
            }
        }
    }
    for (tp, epoch, sync) in syncs {
        if let Err(error) = sync.finish().await {
            // Not on disk: the next fetch must not claim it (the log is offline now).
            tracing::error!(partition = %tp, %error, "follower sync failed");
            pause(fetcher, &tp, epoch);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_log::{LogManager, LogManagerOptions};
    use strand_records::{BatchBuilder, Record};

    fn batch(records: usize) -> Vec<u8> {
        let mut builder = BatchBuilder::new(0, 1_000);
        for i in 0..records {
            builder.push(Record::new(None, Some(vec![i as u8; 10]), 1_000));
        }
        builder.build()
    }

    /// Our log: epoch 0 for offsets 0..5, then epoch 1 for 5..8 (a leader that lost its
    /// place). The new leader has epoch 0 for 0..5 and epoch 2 from 5: it answers our
    /// fetch (last fetched epoch 1) with the diverging epoch (0, 5), and we cut at 5.
    #[test]
    fn a_diverging_epoch_truncates_where_the_logs_part() {
        let dir = tempfile::tempdir().unwrap();
        let (mut logs, _) = LogManager::open(&[dir.path()], LogManagerOptions::default()).unwrap();
        let log = logs
            .get_or_create(&TopicPartition::new("t", 0), None)
            .unwrap();
        let mut log = log.lock().unwrap();
        log.append_as_leader(&mut batch(5), 0).unwrap();
        log.append_as_leader(&mut batch(3), 1).unwrap();
        assert_eq!(truncation_target(&log, 0, 5), 5);
        // The leader has our latest epoch and it ends at 6 there.
        assert_eq!(truncation_target(&log, 1, 6), 6);
        // The leader knows none of our epochs: back to the high watermark.
        log.set_high_watermark(2);
        assert_eq!(truncation_target(&log, -1, -1), 2);
        // The simulator found it: an answer naming an epoch newer than all of ours (a
        // stale one, after we truncated) cut the log to offset -1. Now the leader's end.
        assert_eq!(truncation_target(&log, 7, 6), 6);
    }
}
