//! ShareFetch (78): a share group member's fetch (KIP-932). It carries the member's
//! acknowledgements of records it had (applied first, each partition's outcome in
//! acknowledge_error_code), then acquires records for the member from every partition of
//! its share session: available records first (released or timed out), then new ones,
//! each batch returned whole with the ranges the member acquired. When nothing is
//! acquired it waits on the partitions (max_wait_ms) for new records, as Fetch does.
//!
//! Session epochs as `share::sessions`: 0 opens, -1 closes (and releases what the member
//! still holds), anything else must be the session's next epoch.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::share_fetch_response::{
    AcquiredRecords, LeaderIdAndEpoch, NodeEndpoint, PartitionData, ShareFetchableTopicResponse,
};
use kafka_protocol::messages::{ShareFetchRequest, ShareFetchResponse};
use tokio::sync::Notify;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::partition::Partition;
use crate::router::{decode, respond, Outcome};
use crate::share::partition_state::check_batches;
use crate::share::sessions::{SessionStep, SharePartitionKey, INITIAL_EPOCH};
use crate::share::{self, GroupShareSettings, ShareKey};

/// Longest a share fetch may wait, whatever it asks for.
const WAIT_MAX: Duration = Duration::from_secs(300);
/// ShareAcquireMode (v2): 1 = strict, never more than max_records.
const ACQUIRE_MODE_RECORD_LIMIT: i8 = 1;
/// How often a waiting share fetch looks again for records whose lock ran out.
const LOCK_RECHECK: Duration = Duration::from_millis(250);
/// How long an acknowledgement waits for its share-partition's lock.
const ACK_WAIT_MAX: Duration = Duration::from_secs(10);

/// One partition's answer.
#[derive(Default)]
struct Answer {
    error_code: i16,
    acknowledge_error_code: Option<i16>,
    leader: Option<(i32, i32)>,
    read: share::ShareRead,
}

/// Kafka's member id check: a client-made UUID string, at most 36 characters.
pub fn member_id_valid(member_id: &str) -> bool {
    !member_id.trim().is_empty() && member_id.chars().count() <= 36
}

/// The first checks of a ShareFetch or ShareAcknowledge, in Kafka's order: share groups
/// on, a group id, READ on the group, a valid member id. The (group, member), or the
/// request's top-level error.
pub fn member_of(
    broker: &Broker,
    context: &RequestContext,
    group_id: Option<&str>,
    member_id: Option<&str>,
) -> Result<(String, String), (i16, Option<&'static str>)> {
    if !broker.share_groups_enabled() {
        return Err((error_code::UNSUPPORTED_VERSION, None));
    }
    let group_id = group_id.ok_or((
        error_code::INVALID_REQUEST,
        Some("Invalid group id in the request."),
    ))?;
    if !broker
        .authorization(context)
        .allows_group(AclOperation::Read, group_id)
    {
        return Err((error_code::GROUP_AUTHORIZATION_FAILED, None));
    }
    let member_id = member_id.unwrap_or_default();
    if !member_id_valid(member_id) {
        return Err((
            error_code::INVALID_REQUEST,
            Some("Invalid member id in the request."),
        ));
    }
    Ok((group_id.to_string(), member_id.to_string()))
}

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ShareFetchRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let top = |code: i16, message: Option<&str>| {
        respond(
            &request,
            &ShareFetchResponse::default()
                .with_error_code(code)
                .with_error_message(message.map(str_bytes)),
        )
    };
    let (group_id, member_id) = match member_of(
        broker,
        context,
        body.group_id.as_ref().map(|g| g.as_str()),
        body.member_id.as_ref().map(|m| m.as_str()),
    ) {
        Ok(ids) => ids,
        Err((code, message)) => return top(code, message),
    };
    let authorization = broker.authorization(context);
    // v2 IsRenewAck: only acknowledgements (lock renewals among them), no fetch.
    let renew = version >= 2 && body.is_renew_ack;
    if renew
        && (body.max_bytes != 0
            || body.min_bytes != 0
            || body.max_records != 0
            || body.max_wait_ms != 0)
    {
        return top(
            error_code::INVALID_REQUEST,
            Some("maxBytes must be set to 0, minBytes must be set to 0, maxRecords must be set to 0, maxWaitMs must be set to 0 if isRenewAck is true."),
        );
    }
    let has_acks = body.topics.iter().any(|t| {
        t.partitions
            .iter()
            .any(|p| !p.acknowledgement_batches.is_empty())
    });
    if body.share_session_epoch == INITIAL_EPOCH && has_acks {
        return top(
            error_code::INVALID_REQUEST,
            Some("Acknowledge data present in initial fetch request."),
        );
    }
    let settings = GroupShareSettings::of(broker, &group_id);
    let added: Vec<SharePartitionKey> = body
        .topics
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(move |p| (t.topic_id, p.partition_index))
        })
        .collect();
    let forgotten: Vec<SharePartitionKey> = body
        .forgotten_topics_data
        .iter()
        .flat_map(|t| t.partitions.iter().map(move |p| (t.topic_id, *p)))
        .collect();
    let session_key = (group_id.clone(), member_id.clone());
    let step = match broker.share.sessions.fetch(
        &session_key,
        body.share_session_epoch,
        &added,
        &forgotten,
        context.connection_id,
    ) {
        Ok(step) => step,
        Err(error_code::SHARE_SESSION_LIMIT_REACHED) => {
            // Kafka answers this only after the fetch's wait, so a client does not
            // retry in a tight loop.
            let wait = Duration::from_millis(body.max_wait_ms.max(0) as u64).min(WAIT_MAX);
            let mut shutdown = broker.shutdown_signal();
            tokio::select! {
                _ = tokio::time::sleep(wait) => {}
                _ = shutdown.changed() => {}
            }
            return top(error_code::SHARE_SESSION_LIMIT_REACHED, None);
        }
        Err(code) => return top(code, None),
    };
    let initial = body.share_session_epoch == INITIAL_EPOCH;
    let (session_partitions, newly_added, closing) = match &step {
        SessionStep::Open(all, new) => (all.clone(), new.clone(), false),
        SessionStep::Closed(_) => (Vec::new(), Vec::new(), true),
    };
    // Every partition the request touches, checked once (Kafka's READ on each topic),
    // before anything waits.
    let mut checked: BTreeMap<SharePartitionKey, Result<Arc<Partition>, i16>> = BTreeMap::new();
    for key in added.iter().chain(session_partitions.iter()) {
        checked.entry(*key).or_insert_with(|| {
            let topic = broker
                .topic_by_id(&key.0)
                .ok_or(error_code::UNKNOWN_TOPIC_ID)?;
            if !authorization.allows_topic(AclOperation::Read, &topic.name) {
                return Err(error_code::TOPIC_AUTHORIZATION_FAILED);
            }
            share::partition_of(broker, &key.0, key.1)
        });
    }
    drop(authorization);
    let now = crate::shard_log::now_ms();
    let mut answers: BTreeMap<SharePartitionKey, Answer> = BTreeMap::new();
    // Partitions answered even with nothing to say: all of a new session's, those just
    // added to one; in a session's later answers the others only with news.
    for key in &newly_added {
        answers.entry(*key).or_default();
    }
    if initial {
        for key in &session_partitions {
            answers.entry(*key).or_default();
        }
    }
    // The acknowledgements first: records the member settles may be what it fetches next.
    for topic in &body.topics {
        for partition in &topic.partitions {
            if partition.acknowledgement_batches.is_empty() {
                continue;
            }
            let key = (topic.topic_id, partition.partition_index);
            let batches: Vec<(i64, i64, Vec<i8>)> = partition
                .acknowledgement_batches
                .iter()
                .map(|b| (b.first_offset, b.last_offset, b.acknowledge_types.clone()))
                .collect();
            let code = match (checked[&key].clone(), check_batches(&batches, renew)) {
                (Err(code), _) | (Ok(_), Err(code)) => code,
                (Ok(p), Ok(())) => acknowledge(
                    broker, &group_id, &member_id, key, &p, &settings, &batches, now,
                )
                .await
                .err()
                .unwrap_or(error_code::NONE),
            };
            answers.entry(key).or_default().acknowledge_error_code = Some(code);
        }
    }
    if closing {
        // Kafka answers first and releases after; the order is not observable to the
        // member, whose session is gone either way.
        broker
            .share
            .release_member(broker, &group_id, &member_id, None)
            .await;
        return answer(&request, broker, context, &settings, answers);
    }
    // Acknowledgements only (a renewal, or Kafka's record_limit mode telling the other
    // leaders its acks): nothing to fetch, answered at once.
    if renew || body.max_records == 0 || body.max_bytes == 0 {
        return answer(&request, broker, context, &settings, answers);
    }
    let mut targets: Vec<(SharePartitionKey, Arc<Partition>)> = Vec::new();
    for key in session_partitions {
        match &checked[&key] {
            Ok(partition) => targets.push((key, partition.clone())),
            Err(code) => answers.entry(key).or_default().error_code = *code,
        }
    }
    // The partitions take turns at going first, so one busy partition cannot starve
    // the others of the byte and record budgets (Kafka rotates by session epoch).
    if !targets.is_empty() {
        let turn = body.share_session_epoch.max(0) as usize % targets.len();
        targets.rotate_left(turn);
    }
    let wait = Duration::from_millis(body.max_wait_ms.max(0) as u64).min(WAIT_MAX);
    let deadline = tokio::time::Instant::now() + wait;
    let max_records = body.max_records.max(1) as i64;
    let strict = version >= 2 && body.share_acquire_mode == ACQUIRE_MODE_RECORD_LIMIT;
    loop {
        let waiter = Arc::new(Notify::new());
        let parked: Vec<&Arc<Partition>> = targets
            .iter()
            .map(|(_, p)| p)
            .filter(|p| p.park_fetch(&waiter))
            .collect();
        let mut budget = body.max_bytes.max(0) as u64;
        let mut records_left = max_records;
        let mut bytes = 0u64;
        let mut errors = false;
        for (key, partition) in &targets {
            if records_left <= 0 || budget == 0 {
                break;
            }
            let share_key: ShareKey = (group_id.clone(), key.0, key.1);
            let mut slot = match broker
                .share
                .slot(broker, &share_key, partition, &settings, deadline)
                .await
            {
                Ok(slot) => slot,
                // The share coordinator is moving or loading: nothing from this partition
                // this time (the Java client takes a coordinator error on a partition as
                // fatal; Kafka leaves a share-partition still initializing out).
                Err(code) if share::persister::retriable(code) => {
                    tracing::debug!(group = %group_id, code, "share state not available yet");
                    continue;
                }
                Err(code) => {
                    answers.entry(*key).or_default().error_code = code;
                    errors = true;
                    continue;
                }
            };
            slot.state.set_limits(settings.limits);
            let leader = (broker.node_id(), slot.leader_epoch);
            let read = share::read_and_acquire(
                &mut slot,
                partition,
                &member_id,
                context.connection_id,
                budget,
                records_left,
                strict,
                settings.read_committed,
                crate::shard_log::now_ms(),
            );
            // Locks that ran out changed the state: kept durable (best effort, as Kafka's
            // timeouts are), so a failover does not forget the deliveries counted.
            if read.as_ref().is_ok_and(|r| r.expired) {
                if let Err(code) = broker.share.persist(broker, &share_key, &mut slot).await {
                    tracing::debug!(group = %group_id, code, "persisting expired locks failed");
                }
                // Refused: this leader's share-partition is history, and what it just
                // acquired is not the member's (the next load hands it out again).
                if !slot.is_loaded() {
                    answers.entry(*key).or_default().error_code =
                        error_code::NOT_LEADER_OR_FOLLOWER;
                    errors = true;
                    continue;
                }
            }
            match read {
                Ok(read) if !read.acquired.is_empty() => {
                    let length = read.records.as_ref().map_or(0, |r| r.len() as u64);
                    let count: i64 = read.acquired.iter().map(|a| a.last - a.first + 1).sum();
                    records_left -= count;
                    bytes += length;
                    budget = budget.saturating_sub(length);
                    let answer = answers.entry(*key).or_default();
                    answer.leader = Some(leader);
                    answer.read = read;
                }
                Ok(_) => {
                    if let Some(answer) = answers.get_mut(key) {
                        answer.leader = Some(leader);
                    }
                }
                Err(code) => {
                    answers.entry(*key).or_default().error_code = code;
                    errors = true;
                }
            }
        }
        let done = bytes >= body.min_bytes.max(1) as u64
            || bytes > 0
            || errors
            || targets.is_empty()
            || tokio::time::Instant::now() >= deadline
            || *broker.shutdown_signal().borrow();
        if !done {
            let mut shutdown = broker.shutdown_signal();
            // A lock running out frees records too: look again at the next one.
            let recheck = tokio::time::Instant::now() + LOCK_RECHECK;
            tokio::select! {
                _ = waiter.notified() => {}
                _ = tokio::time::sleep_until(deadline.min(recheck)) => {}
                _ = shutdown.changed() => {}
            }
        }
        for partition in parked {
            partition.unpark_fetch(&waiter);
        }
        if done {
            break;
        }
    }
    answer(&request, broker, context, &settings, answers)
}

/// Applies a member's acknowledgements to one share-partition and makes them durable.
#[allow(clippy::too_many_arguments)]
pub async fn acknowledge(
    broker: &Broker,
    group_id: &str,
    member_id: &str,
    key: SharePartitionKey,
    partition: &Arc<Partition>,
    settings: &GroupShareSettings,
    batches: &[(i64, i64, Vec<i8>)],
    now_ms: i64,
) -> Result<(), i16> {
    // Kafka: "Renewing acquisition locks is not enabled for the group."
    if !settings.renew_enabled
        && batches
            .iter()
            .any(|(_, _, types)| types.contains(&share::partition_state::ACK_RENEW))
    {
        return Err(error_code::INVALID_RECORD_STATE);
    }
    let share_key: ShareKey = (group_id.to_string(), key.0, key.1);
    let deadline = tokio::time::Instant::now() + ACK_WAIT_MAX;
    let mut slot = broker
        .share
        .loaded_slot(&share_key, partition, deadline)
        .await?;
    slot.state.set_limits(settings.limits);
    // All or nothing, durable or undone: a write that fails leaves the records as they
    // were (still acquired by the member), as Kafka rolls its transitions back.
    let before = slot.state.clone();
    slot.state.acknowledge(member_id, batches, now_ms)?;
    let written = broker.share.persist(broker, &share_key, &mut slot).await;
    if written.is_err() && slot.is_loaded() {
        slot.state = before;
    }
    written
}

fn answer(
    request: &strand_protocol::ParsedRequest,
    broker: &Broker,
    context: &RequestContext,
    settings: &GroupShareSettings,
    answers: BTreeMap<SharePartitionKey, Answer>,
) -> Outcome {
    let mut topics: Vec<ShareFetchableTopicResponse> = Vec::new();
    let mut endpoints: BTreeMap<i32, NodeEndpoint> = BTreeMap::new();
    for ((topic_id, index), mut answer) in answers {
        if topics.last().is_none_or(|t| t.topic_id != topic_id) {
            topics.push(ShareFetchableTopicResponse::default().with_topic_id(topic_id));
        }
        if answer.error_code == error_code::NOT_LEADER_OR_FOLLOWER {
            if let Some((leader, epoch, endpoint)) =
                share::leader_hint(broker, &topic_id, index, context.listener_name())
            {
                answer.leader = Some((leader, epoch));
                if let Some((host, port, rack)) = endpoint {
                    endpoints.insert(
                        leader,
                        NodeEndpoint::default()
                            .with_node_id(leader.into())
                            .with_host(str_bytes(host))
                            .with_port(port)
                            .with_rack(rack.map(str_bytes)),
                    );
                }
            }
        }
        let (leader_id, leader_epoch) = answer.leader.unwrap_or((-1, -1));
        let data = PartitionData::default()
            .with_partition_index(index)
            .with_error_code(answer.error_code)
            .with_acknowledge_error_code(answer.acknowledge_error_code.unwrap_or(error_code::NONE))
            .with_current_leader(
                LeaderIdAndEpoch::default()
                    .with_leader_id(leader_id)
                    .with_leader_epoch(leader_epoch),
            )
            // Never null from v1 on: nothing is empty records.
            .with_records(Some(answer.read.records.unwrap_or_default()))
            .with_acquired_records(
                answer
                    .read
                    .acquired
                    .iter()
                    .map(|a| {
                        AcquiredRecords::default()
                            .with_first_offset(a.first)
                            .with_last_offset(a.last)
                            .with_delivery_count(a.delivery_count)
                    })
                    .collect(),
            );
        topics.last_mut().expect("pushed").partitions.push(data);
    }
    respond(
        request,
        &ShareFetchResponse::default()
            .with_error_code(error_code::NONE)
            .with_acquisition_lock_timeout_ms(settings.limits.lock_duration_ms as i32)
            .with_responses(topics)
            .with_node_endpoints(endpoints.into_values().collect()),
    )
}
