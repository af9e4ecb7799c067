//! Fetch (key 1): reads from each requested partition up to the high watermark, within
//! partition_max_bytes and the response's max_bytes (the first partition with data returns
//! at least one whole batch, KIP-74). When fewer than min_bytes are ready it parks on the
//! partitions until an append wakes it or max_wait_ms passes: no busy loop. Incremental
//! fetch sessions (KIP-227, v7+) through `fetch_session`: an incremental answer carries only
//! partitions with news. v13+ addresses topics by id.
//!
//! Consumers read from the leader only (NOT_LEADER_OR_FOLLOWER elsewhere), and their
//! `current_leader_epoch` is checked (FENCED_LEADER_EPOCH / UNKNOWN_LEADER_EPOCH). A fetch
//! with a replica id is a follower's: it reads up to the log end offset, and its fetch
//! offset tells the leader how far the follower has come (high watermark, ISR).
//!
//! Reads run on the runtime worker without waiting for the disk (`cold_reads`): a
//! partition whose data is not in the page cache answers without records while its data
//! is warmed off the runtime, and the parked fetch wakes to read it.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::FetchRequest;
use strand_log::read_mode::Miss;
use strand_log::{LogError, TopicPartition};
use strand_protocol::{
    encode_fetch_response, FetchPartitionOut, FetchTopicOut, RecordsOut, SharedFile,
};
use tokio::sync::Notify;
use uuid::Uuid;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::fetch_session::{FetchKey, SessionPlan, Wanted};
use crate::net::RequestContext;
use crate::partition::{IsrProposal, Partition};
use crate::replication_throttle::{names_replica, ReplicationThrottle};
use crate::router::{decode, Outcome};
use crate::tiered::reader::{ChunkWanted, RemoteRead};
use crate::tiered::remote_log::RemoteLog;
use crate::tiered::TieredStorage;
use strand_metadata::client_quotas::CONSUMER_BYTE_RATE;

/// The topic config naming replicas whose leader side is throttled.
const LEADER_THROTTLED_REPLICAS: &str = "leader.replication.throttled.replicas";

/// A follower's fetch under leader.replication.throttled.rate: which targets (by index)
/// it covers, and the budget.
struct LeaderThrottling<'b> {
    throttle: &'b ReplicationThrottle,
    throttled: Vec<bool>,
}

/// For a follower's fetch while a leader rate is set: the partitions this leader throttles
/// for it (listed with this broker's id, the follower not in the ISR).
fn leader_throttling<'b>(
    broker: &'b Broker,
    targets: &[Target],
    follower: Option<i32>,
) -> Option<LeaderThrottling<'b>> {
    let follower = follower?;
    let throttle = &broker.dynamic.leader_throttle;
    if !throttle.is_limited() {
        return None;
    }
    let node = broker.node_id();
    let throttled = targets
        .iter()
        .map(|target| {
            let (Some(tp), Ok(partition)) = (&target.tp, &target.partition) else {
                return false;
            };
            let listed = broker
                .topic(&tp.topic)
                .and_then(|topic| topic.configs.get(LEADER_THROTTLED_REPLICAS).cloned())
                .is_some_and(|value| names_replica(&value, tp.partition, node));
            listed && !partition.assignment().isr.contains(&follower)
        })
        .collect();
    Some(LeaderThrottling {
        throttle,
        throttled,
    })
}

/// Longest a fetch may wait, whatever it asks for.
const FETCH_WAIT_MAX: Duration = Duration::from_secs(300);

struct Target {
    key: FetchKey,
    index: i32,
    fetch_offset: i64,
    partition_max_bytes: i32,
    current_leader_epoch: i32,
    last_fetched_epoch: i32,
    partition: Result<Arc<Partition>, i16>,
    tp: Option<TopicPartition>,
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: FetchRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let replica_id = if version >= 15 {
        body.replica_state.replica_id.0
    } else {
        body.replica_id.0
    };
    let follower = (replica_id >= 0).then_some(replica_id);
    let requested = wanted_partitions(&body, version);
    let forgotten: Vec<FetchKey> = body
        .forgotten_topics_data
        .iter()
        .flat_map(|t| {
            t.partitions.iter().map(move |p| FetchKey {
                topic: if version >= 13 {
                    String::new()
                } else {
                    t.topic.as_str().to_string()
                },
                topic_id: if version >= 13 {
                    t.topic_id
                } else {
                    Uuid::nil()
                },
                partition: *p,
            })
        })
        .collect();
    let plan = if version >= 7 {
        broker
            .fetch_sessions
            .apply(body.session_id, body.session_epoch, &requested, &forgotten)
    } else {
        SessionPlan::Sessionless
    };
    let (session_id, partitions) = match plan {
        SessionPlan::Error(code) => return answer(&request, version, (0, code), 0, Vec::new()),
        SessionPlan::Sessionless => (0, requested),
        SessionPlan::Full { id } => (id, requested),
        SessionPlan::Incremental { id, partitions } => (id, partitions),
    };
    let incremental = session_id != 0 && body.session_epoch > 0;
    // Kafka's checks: a follower needs CLUSTER_ACTION on the cluster, a consumer READ on
    // each topic; a partition refused answers TOPIC_AUTHORIZATION_FAILED.
    let authorization = broker.authorization(context);
    let follower_allowed =
        follower.is_none() || authorization.allows_cluster(AclOperation::ClusterAction);
    let may_read = |topic: &str| match follower {
        Some(_) => follower_allowed,
        None => authorization.allows_topic(AclOperation::Read, topic),
    };
    let targets = resolve(broker, &partitions, version, &may_read);
    drop(authorization);
    let wait = Duration::from_millis(body.max_wait_ms.max(0) as u64).min(FETCH_WAIT_MAX);
    let deadline = tokio::time::Instant::now() + wait;
    let read_committed = body.isolation_level == 1;
    let throttling = leader_throttling(broker, &targets, follower);
    let responses = loop {
        let waiter = Arc::new(Notify::new());
        let parked: Vec<&Arc<Partition>> = targets
            .iter()
            .filter_map(|t| t.partition.as_ref().ok())
            .filter(|p| p.park_fetch(&waiter))
            .collect();
        let mut proposals = Vec::new();
        let mut waits = Waits {
            tiered: broker.tiered(),
            disk: Vec::new(),
            remote: Vec::new(),
        };
        let (responses, bytes, errors) = strand_log::read_mode::without_waiting(|| {
            read_all(
                &targets,
                body.max_bytes,
                read_committed,
                follower,
                throttling.as_ref(),
                &mut proposals,
                &mut waits,
            )
        });
        if !proposals.is_empty() {
            broker.propose_isr_changes(proposals);
        }
        for (partition, miss) in waits.disk {
            crate::cold_reads::warm(partition, miss);
        }
        if let Some(tiered) = broker.tiered() {
            for (remote, partition, wanted) in waits.remote {
                tiered.get_chunks(remote, partition.clone(), wanted);
            }
        }
        let done = bytes >= body.min_bytes.max(1) as u64
            || errors
            || tokio::time::Instant::now() >= deadline
            || *broker.shutdown_signal().borrow();
        if !done {
            let mut shutdown = broker.shutdown_signal();
            if !*shutdown.borrow() {
                tokio::select! {
                    _ = waiter.notified() => {}
                    _ = tokio::time::sleep_until(deadline) => {}
                    _ = shutdown.changed() => {}
                }
            }
        }
        for partition in parked {
            partition.unpark_fetch(&waiter);
        }
        if done {
            break responses;
        }
    };
    // A consumer's consumer_byte_rate quota counts the record bytes it is sent; over it,
    // or over its request_percentage, as on Kafka, the answer holds nothing (and its bytes
    // are not counted), carries the throttle time, and the connection waits it out. Its
    // session learns nothing from it.
    if follower.is_none() {
        let client_id = request.client_id();
        let bytes = responses
            .iter()
            .map(|(_, out)| out.records.len())
            .sum::<u64>() as f64;
        let byte_throttle_ms = broker.record_quota(context, client_id, CONSUMER_BYTE_RATE, bytes);
        let throttle_ms = if byte_throttle_ms > 0 {
            byte_throttle_ms
        } else {
            broker.request_throttle_now(context, client_id)
        };
        if throttle_ms > 0 {
            count_reads(&targets, &responses, false, false);
            broker.record_quota(context, client_id, CONSUMER_BYTE_RATE, -bytes);
            context.throttle.mute_for(throttle_ms);
            let session = if incremental { session_id } else { 0 };
            let throttle_ms = throttle_ms as i32;
            return answer(
                &request,
                version,
                (throttle_ms, error_code::NONE),
                session,
                Vec::new(),
            );
        }
    }
    count_reads(&targets, &responses, follower.is_some(), true);
    // In a session, record what each partition's answer told the client; an incremental
    // answer leaves out partitions with nothing new.
    let mut kept: Vec<(FetchKey, FetchPartitionOut)> = Vec::with_capacity(responses.len());
    for (key, out) in responses {
        let has_records = !matches!(out.records, RecordsOut::Empty);
        let marks = (
            out.high_watermark,
            out.last_stable_offset,
            out.log_start_offset,
        );
        // A diverging epoch is news like an error: the fetcher must act on it.
        let must_act = out.error_code != error_code::NONE || out.diverging_epoch.is_some();
        let send = session_id == 0
            || broker
                .fetch_sessions
                .should_send(session_id, &key, has_records, must_act, marks)
            || !incremental;
        if send {
            kept.push((key, out));
        }
    }
    answer(&request, version, (0, error_code::NONE), session_id, kept)
}

/// BrokerTopicMetrics of a fetch's partitions (`responses` in the order of `targets`):
/// each read answered, its record bytes if they are `sent`, its unexpected failures.
fn count_reads(
    targets: &[Target],
    responses: &[(FetchKey, FetchPartitionOut)],
    follower: bool,
    sent: bool,
) {
    for (target, (_, out)) in targets.iter().zip(responses) {
        let Ok(partition) = &target.partition else {
            continue;
        };
        let counters = partition.counters();
        let bytes = if sent { out.records.len() } else { 0 };
        counters.fetched(bytes, follower);
        if out.error_code != error_code::NONE {
            counters.fetch_failed(out.error_code);
        }
    }
}

/// Encodes the answer: partitions grouped by topic in the order they come, with the
/// client's quota throttle and the request's error.
fn answer(
    request: &strand_protocol::ParsedRequest,
    version: i16,
    (throttle_ms, error): (i32, i16),
    session_id: i32,
    partitions: Vec<(FetchKey, FetchPartitionOut)>,
) -> Outcome {
    let mut topics: Vec<FetchTopicOut> = Vec::new();
    for (key, out) in partitions {
        let same = topics
            .last()
            .is_some_and(|t| t.name == key.topic && t.topic_id == key.topic_id);
        if !same {
            topics.push(FetchTopicOut {
                name: key.topic.clone(),
                topic_id: key.topic_id,
                partitions: Vec::new(),
            });
        }
        topics
            .last_mut()
            .expect("pushed above")
            .partitions
            .push(out);
    }
    match encode_fetch_response(
        version,
        request.header.correlation_id,
        throttle_ms,
        error,
        session_id,
        &topics,
    ) {
        Ok(parts) => Outcome::RespondParts(parts),
        Err(error) => Outcome::Close(format!("cannot encode fetch response: {error}")),
    }
}

/// The request's partitions, keyed as sessions key them (names before v13, ids after).
fn wanted_partitions(body: &FetchRequest, version: i16) -> Vec<(FetchKey, Wanted)> {
    body.topics
        .iter()
        .flat_map(|topic| {
            topic.partitions.iter().map(move |p| {
                (
                    FetchKey {
                        topic: if version >= 13 {
                            String::new()
                        } else {
                            topic.topic.as_str().to_string()
                        },
                        topic_id: if version >= 13 {
                            topic.topic_id
                        } else {
                            Uuid::nil()
                        },
                        partition: p.partition,
                    },
                    Wanted {
                        fetch_offset: p.fetch_offset,
                        partition_max_bytes: p.partition_max_bytes,
                        current_leader_epoch: p.current_leader_epoch,
                        last_fetched_epoch: if version >= 12 {
                            p.last_fetched_epoch
                        } else {
                            -1
                        },
                    },
                )
            })
        })
        .collect()
}

fn resolve(
    broker: &Arc<Broker>,
    partitions: &[(FetchKey, Wanted)],
    version: i16,
    may_read: &dyn Fn(&str) -> bool,
) -> Vec<Target> {
    partitions
        .iter()
        .map(|(key, wanted)| {
            let (name, unknown) = if version >= 13 {
                (
                    broker.topic_by_id(&key.topic_id).map(|t| t.name),
                    error_code::UNKNOWN_TOPIC_ID,
                )
            } else {
                (
                    Some(key.topic.clone()),
                    error_code::UNKNOWN_TOPIC_OR_PARTITION,
                )
            };
            let resolved = match &name {
                None => Err(unknown),
                Some(name) if !may_read(name) => Err(error_code::TOPIC_AUTHORIZATION_FAILED),
                Some(name) => broker
                    .partition(&TopicPartition::new(name.clone(), key.partition))
                    .ok_or(error_code::UNKNOWN_TOPIC_OR_PARTITION),
            };
            Target {
                key: key.clone(),
                index: key.partition,
                fetch_offset: wanted.fetch_offset,
                partition_max_bytes: wanted.partition_max_bytes,
                current_leader_epoch: wanted.current_leader_epoch,
                last_fetched_epoch: wanted.last_fetched_epoch,
                partition: resolved,
                tp: name.map(|name| TopicPartition::new(name, key.partition)),
            }
        })
        .collect()
}

/// What reads found missing, to get before the parked fetch reads again.
struct Waits<'t> {
    tiered: Option<&'t Arc<TieredStorage>>,
    /// Reads that would wait for the disk.
    disk: Vec<(&'t Arc<Partition>, Miss)>,
    /// Chunks of remote segments to get (reads below the local log start, read-ahead).
    remote: Vec<(Arc<RemoteLog>, &'t Arc<Partition>, Vec<ChunkWanted>)>,
}

/// Reads every target once. Returns each partition's answer, the record bytes found,
/// and whether any partition had an error (which ends the wait, as in Kafka). A read
/// that would wait for the disk or the remote store answers without records and leaves
/// what it missed in `waits`.
fn read_all<'t>(
    targets: &'t [Target],
    max_bytes: i32,
    read_committed: bool,
    follower: Option<i32>,
    throttling: Option<&LeaderThrottling>,
    proposals: &mut Vec<(TopicPartition, IsrProposal)>,
    waits: &mut Waits<'t>,
) -> (Vec<(FetchKey, FetchPartitionOut)>, u64, bool) {
    let mut budget = max_bytes.max(0) as u64;
    let mut total = 0u64;
    let mut errors = false;
    let mut answers = Vec::with_capacity(targets.len());
    let now = std::time::Instant::now();
    for (index, target) in targets.iter().enumerate() {
        let throttle = throttling
            .filter(|t| t.throttled.get(index).copied().unwrap_or(false))
            .map(|t| t.throttle);
        // Over budget: the follower's fetch still counts (progress, ISR), without records.
        let over_budget = throttle.is_some_and(|t| t.is_exceeded(now));
        let mut out = FetchPartitionOut {
            partition_index: target.index,
            error_code: error_code::NONE,
            high_watermark: -1,
            last_stable_offset: -1,
            log_start_offset: -1,
            aborted_transactions: read_committed.then(Vec::new),
            preferred_read_replica: -1,
            records: RecordsOut::Empty, // never null: librdkafka rejects null records
            diverging_epoch: None,
        };
        let (budget_here, first) = if over_budget {
            (0, false)
        } else {
            (budget, total == 0)
        };
        match read_one(
            target,
            budget_here,
            first,
            read_committed,
            follower,
            proposals,
            waits,
        ) {
            Ok(read) => {
                let length = read.records.len();
                if let Some(throttle) = throttle {
                    throttle.record(length);
                }
                total += length;
                budget = budget.saturating_sub(length);
                // A diverging epoch comes without records and is answered at once, as an
                // error is: the fetcher truncates first.
                errors |= read.diverging_epoch.is_some();
                out.high_watermark = read.high_watermark;
                out.last_stable_offset = read.last_stable_offset;
                out.log_start_offset = read.log_start_offset;
                out.records = read.records;
                if let (true, Some(aborted)) = (read_committed, read.aborted) {
                    out.aborted_transactions = Some(aborted);
                }
                out.diverging_epoch = read.diverging_epoch;
            }
            Err(Refusal::Error(code, high_watermark, log_start_offset)) => {
                errors = true;
                out.error_code = code;
                out.high_watermark = high_watermark;
                out.last_stable_offset = high_watermark;
                out.log_start_offset = log_start_offset;
            }
            Err(Refusal::WouldWait(partition, miss)) => {
                let log = partition.log();
                out.high_watermark = log.high_watermark();
                out.last_stable_offset = log.last_stable_offset();
                out.log_start_offset = unified_log_start(waits.tiered, partition, &log);
                waits.disk.extend(miss.map(|miss| (partition, miss)));
            }
        }
        answers.push((target.key.clone(), out));
    }
    (answers, total, errors)
}

/// What a partition's read gives a fetch: records, or (KIP-320) the diverging epoch.
struct PartitionRead {
    records: RecordsOut,
    high_watermark: i64,
    last_stable_offset: i64,
    /// A consumer's: the aborted transactions in what it may return.
    aborted: Option<Vec<(i64, i64)>>,
    log_start_offset: i64,
    diverging_epoch: Option<(i32, i64)>,
}

/// KIP-320, as Kafka's leader checks it: a fetch that names the epoch of its last batch
/// whose log, by our epochs, diverges before its fetch offset (that epoch ends earlier
/// here) is told (epoch, end offset) to truncate to, with the high watermark and log
/// start, instead of records.
fn diverging_epoch(partition: &Partition, target: &Target) -> Option<PartitionRead> {
    let log = partition.log();
    let diverging = diverging_epoch_of(&log, target.last_fetched_epoch, target.fetch_offset)?;
    Some(PartitionRead {
        records: RecordsOut::Empty,
        high_watermark: log.high_watermark(),
        last_stable_offset: log.last_stable_offset(),
        aborted: None,
        log_start_offset: log.log_start_offset(),
        diverging_epoch: Some(diverging),
    })
}

/// KIP-320 at the leader: (epoch, end offset) for a follower whose log, by our epochs,
/// diverges before `fetch_offset` (its `last_fetched_epoch` ends earlier here).
pub fn diverging_epoch_of(
    log: &strand_log::Log,
    last_fetched_epoch: i32,
    fetch_offset: i64,
) -> Option<(i32, i64)> {
    if last_fetched_epoch < 0 {
        return None;
    }
    let (epoch, end_offset) = log.end_offset_for_epoch(last_fetched_epoch);
    // Undefined (no epochs here, or the fetcher's is newer than all of ours): nothing
    // to point the fetcher at; the read goes on as before KIP-320.
    let known = epoch >= 0 && end_offset >= 0;
    let diverges = end_offset < fetch_offset || epoch < last_fetched_epoch;
    (known && diverges).then_some((epoch, end_offset))
}

/// Why a partition's read gives no records.
enum Refusal<'t> {
    /// (error code, high watermark, log start)
    Error(i16, i64, i64),
    /// The read would wait for the disk; what it missed, to warm.
    WouldWait(&'t Arc<Partition>, Option<Miss>),
}

fn refused<'t>(code: i16) -> Refusal<'t> {
    Refusal::Error(code, -1, -1)
}

/// The partition's log start: the remote store's when it holds older offsets.
fn unified_log_start(
    tiered: Option<&Arc<TieredStorage>>,
    partition: &Partition,
    log: &strand_log::Log,
) -> i64 {
    let local = log.log_start_offset();
    tiered
        .and_then(|tiered| tiered.remote_log(&partition.tp))
        .map_or(local, |remote| remote.log_start_offset(local))
}

/// The partition's read, or why there is none.
fn read_one<'t>(
    target: &'t Target,
    budget: u64,
    first: bool,
    read_committed: bool,
    follower: Option<i32>,
    proposals: &mut Vec<(TopicPartition, IsrProposal)>,
    waits: &mut Waits<'t>,
) -> Result<PartitionRead, Refusal<'t>> {
    let partition = target.partition.as_ref().map_err(|code| refused(*code))?;
    if !partition.is_leader() {
        return Err(refused(error_code::NOT_LEADER_OR_FOLLOWER));
    }
    partition
        .check_leader_epoch(target.current_leader_epoch)
        .map_err(refused)?;
    if let Some(diverging) = diverging_epoch(partition, target) {
        return Ok(diverging);
    }
    let limit = budget.min(target.partition_max_bytes.max(0) as u64);
    // Reading this partition's data from disk failed: answered as Kafka answers a read
    // error (the client retries, and the read after that tries the disk again).
    if partition.warming().take_failure() {
        return Err(refused(error_code::KAFKA_STORAGE_ERROR));
    }
    let read = match follower {
        None => partition
            .read(target.fetch_offset, limit, first, read_committed)
            .map(|(read, aborted)| (read, Some(aborted))),
        Some(replica) => {
            let (read, proposal) = partition
                .read_for_follower(replica, target.fetch_offset, limit)
                .map_err(refused)?;
            if let (Some(proposal), Some(tp)) = (proposal, &target.tp) {
                proposals.push((tp.clone(), proposal));
            }
            read.map(|read| (read, None))
        }
    };
    if let Err(error) = &read {
        if strand_log::read_mode::would_block(error) {
            return Err(Refusal::WouldWait(
                partition,
                strand_log::read_mode::take_miss(),
            ));
        }
    }
    match read {
        Ok((result, aborted)) => {
            let records = match result.slice {
                Some(slice) if limit > 0 || first => {
                    let file: SharedFile = slice.files.clone();
                    RecordsOut::File {
                        file,
                        position: slice.position,
                        length: slice.length,
                    }
                }
                _ => RecordsOut::Empty,
            };
            let log_start_offset = waits
                .tiered
                .and_then(|tiered| tiered.remote_log(&partition.tp))
                .map_or(result.log_start_offset, |remote| {
                    remote.log_start_offset(result.log_start_offset)
                });
            Ok(PartitionRead {
                records,
                high_watermark: result.high_watermark,
                last_stable_offset: result.last_stable_offset,
                aborted,
                log_start_offset,
                diverging_epoch: None,
            })
        }
        Err(LogError::OffsetOutOfRange {
            log_start_offset: local_start,
            ..
        }) => {
            if target.fetch_offset < local_start {
                if let Some(tiered) = waits.tiered {
                    let read =
                        read_remote(tiered, target, partition, limit, first, follower, waits);
                    if let Some(read) = read {
                        return read;
                    }
                }
            }
            let log = partition.log();
            Err(Refusal::Error(
                error_code::OFFSET_OUT_OF_RANGE,
                log.high_watermark(),
                unified_log_start(waits.tiered, partition, &log),
            ))
        }
        Err(error) => Err(refused(error.kafka_error_code())),
    }
}

/// A read below the local log start of a tiered partition: from the remote store for a
/// consumer; OFFSET_MOVED_TO_TIERED_STORAGE for a follower, which starts from the local
/// log start instead (as Kafka's). None: the partition is not tiered, or no copy holds
/// the offset (out of range).
fn read_remote<'t>(
    tiered: &Arc<TieredStorage>,
    target: &'t Target,
    partition: &'t Arc<Partition>,
    limit: u64,
    first: bool,
    follower: Option<i32>,
    waits: &mut Waits<'t>,
) -> Option<Result<PartitionRead, Refusal<'t>>> {
    let (high_watermark, last_stable_offset, local_start) = {
        let log = partition.log();
        if !log.config().remote_storage {
            return None;
        }
        (
            log.high_watermark(),
            log.last_stable_offset(),
            log.log_start_offset(),
        )
    };
    // Tiered, but what the store holds is not known yet (the broker just started, or
    // the topic just turned tiering on): retriable, never an out-of-range answer that
    // would send a consumer to the local start past what the store holds.
    let Some(remote) = tiered.remote_log(&partition.tp).filter(|r| r.is_loaded()) else {
        return Some(Err(refused(error_code::KAFKA_STORAGE_ERROR)));
    };
    let log_start = remote.log_start_offset(local_start);
    if target.fetch_offset < log_start {
        return None;
    }
    if follower.is_some() {
        return Some(Err(Refusal::Error(
            error_code::OFFSET_MOVED_TO_TIERED_STORAGE,
            high_watermark,
            log_start,
        )));
    }
    if remote.take_read_failure() {
        return Some(Err(refused(error_code::KAFKA_STORAGE_ERROR)));
    }
    let mut wanted = Vec::new();
    let read = tiered.read(&remote, target.fetch_offset, limit, first, &mut wanted);
    if !wanted.is_empty() {
        waits.remote.push((remote.clone(), partition, wanted));
    }
    Some(match read {
        RemoteRead::Records { records, aborted } => Ok(PartitionRead {
            records: if records.is_empty() {
                RecordsOut::Empty
            } else {
                RecordsOut::Memory(records)
            },
            high_watermark,
            last_stable_offset,
            aborted: Some(aborted),
            log_start_offset: log_start,
            diverging_epoch: None,
        }),
        RemoteRead::Missing => Err(Refusal::WouldWait(partition, None)),
        RemoteRead::OutOfRange => return None,
    })
}
