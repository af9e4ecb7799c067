//! Produce (key 0): one batch per partition, appended as leader (NOT_LEADER_OR_FOLLOWER
//! elsewhere). acks must be 0, 1 or -1 (INVALID_REQUIRED_ACKS). acks=-1 is refused with
//! NOT_ENOUGH_REPLICAS while the ISR is smaller than min.insync.replicas, and completes
//! when the high watermark passes the batch (every in-sync replica has it) and, for
//! flush-before-ack topics, the batch is synced; REQUEST_TIMED_OUT after the request's
//! timeout. On a single node the ISR is this node, so the high watermark is already there.
//! acks=0 gets no response; if any partition failed, the connection is closed instead,
//! which is how Kafka tells an acks=0 producer that something went wrong.
//! v13 addresses topics by id. Idempotent producers (a producer id in the batch) are
//! deduplicated by the log: a retried batch is answered with its original offsets.

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::produce_response::{
    BatchIndexAndErrorMessage, PartitionProduceResponse, TopicProduceResponse,
};
use kafka_protocol::messages::{ProduceRequest, ProduceResponse, TopicName};
use strand_log::TopicPartition;
use strand_records::BatchHeader;

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::partition::{Durable, DurableWait, Partition, Refusal};
use crate::router::{decode, respond, Outcome};
use crate::txn::verification::{Guard, Operation};
use strand_metadata::client_quotas::PRODUCER_BYTE_RATE;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: ProduceRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let version = request.header.request_api_version;
    let acks = body.acks;
    let transactional_id = body
        .transactional_id
        .as_ref()
        .map(|id| id.as_str().to_string());
    // The client's producer_byte_rate quota counts the request's bytes; over it, the
    // answer carries the throttle time and the connection waits it out.
    let client_id = request.client_id();
    let throttle_ms = broker.record_quota(
        context,
        client_id,
        PRODUCER_BYTE_RATE,
        request.body.len() as f64,
    );
    context.throttle.mute_for(throttle_ms);
    let request_quota = broker.request_quota(context, client_id);
    // Kafka's checks: WRITE on the transactional id (else every partition fails with
    // TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic.
    let authorization = broker.authorization(context);
    let refused_id = transactional_id
        .as_ref()
        .is_some_and(|id| !authorization.allows_transactional_id(AclOperation::Write, id));
    // KIP-890: a transactional batch that would open its producer's transaction on a
    // partition is appended only once the coordinator confirms the partition is in it.
    let verdicts = match &transactional_id {
        Some(id) if !refused_id => verify_transactional(broker, &body, id, version).await,
        _ => Vec::new(),
    };
    // Append everything first; then wait for every flush-before-ack partition's sync at
    // once, so partitions' syncs overlap instead of queueing one behind another.
    let appending = std::time::Instant::now();
    let mut results: Vec<(usize, i32, AppendResult, Pending)> = Vec::new();
    for (topic_index, topic) in body.topic_data.iter().enumerate() {
        let resolved = if version >= 13 {
            broker
                .topic_by_id(&topic.topic_id)
                .map(|t| t.name)
                .ok_or(error_code::UNKNOWN_TOPIC_ID)
        } else {
            Ok(topic.name.as_str().to_string())
        };
        let resolved = resolved.and_then(|name| {
            if refused_id {
                Err(error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
            } else if !authorization.allows_topic(AclOperation::Write, &name) {
                Err(error_code::TOPIC_AUTHORIZATION_FAILED)
            } else {
                Ok(name)
            }
        });
        for data in &topic.partition_data {
            let (result, pending) = match &resolved {
                Err(code) => (Err(Refusal::new(*code, None)), Pending::default()),
                Ok(name) => {
                    let tp = TopicPartition::new(name.clone(), data.index);
                    let verdict = verdicts
                        .iter()
                        .find(|(verified, _)| *verified == tp)
                        .map(|(_, verdict)| *verdict);
                    match append_one(
                        broker,
                        &tp,
                        acks,
                        &transactional_id,
                        verdict,
                        data.records.clone(),
                    ) {
                        Ok((info, pending)) => (Ok(info), pending),
                        Err(error) => (Err(error), Pending::default()),
                    }
                }
            };
            results.push((topic_index, data.index, result, pending));
        }
    }
    // The appends are this request's busy time (request_percentage; request_quota.rs).
    let request_throttle_ms = request_quota.map_or(0, |quota| {
        broker.record_request_time(quota, appending.elapsed())
    });
    context.throttle.mute_for(request_throttle_ms);
    let throttle_ms = throttle_ms.max(request_throttle_ms) as i32;
    let topic_meta: Vec<(kafka_protocol::messages::TopicName, uuid::Uuid)> = body
        .topic_data
        .iter()
        .map(|t| (t.name.clone(), t.topic_id))
        .collect();
    if acks == 0 {
        for (_, _, _, pending) in &mut results {
            if let Some((durable, partition)) = pending.durable.take() {
                partition.follow_unanswered_sync(durable);
            }
        }
    }
    let waiting = acks != 0 && results.iter().any(|(_, _, _, pending)| pending.is_some());
    if waiting {
        // The answer waits for syncs and replication; the connection reads on meanwhile.
        // The syncs start now, not when the writer reaches this answer: the next
        // pipelined requests (other partitions) then sync alongside this one instead of
        // each waiting for the previous answer to be written.
        let syncs: Vec<Option<DurableWait>> = results
            .iter_mut()
            .map(|(_, _, _, pending)| {
                // Once synced the high watermark counts it, answered or not.
                pending
                    .durable
                    .take()
                    .map(|(durable, partition)| durable.start_for(partition))
            })
            .collect();
        // The request's timeout runs from now, not from when the writer gets to it.
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(body.timeout_ms.max(0) as u64);
        // The answer needs the header only: the body (up to socket.request.max.bytes,
        // whose pool reservation ends now) is released before waiting.
        // Names copied out too: decoded strings are slices of the request's buffer.
        let request = request.header_only();
        let topic_meta = topic_meta
            .into_iter()
            .map(|(name, id)| (TopicName(str_bytes(name.as_str())), id))
            .collect();
        drop(body);
        let waiting = broker.metrics.produce_waiting();
        let finished = finish(
            request,
            topic_meta,
            results,
            syncs,
            (acks, throttle_ms),
            deadline,
        );
        return Outcome::Deferred(Box::pin(async move {
            let _waiting = waiting;
            finished.await
        }));
    }
    answer(request, topic_meta, results, (acks, throttle_ms))
}

/// What an appended batch still waits for before it is acknowledged.
#[derive(Debug, Default)]
struct Pending {
    /// The sync of a flush-before-ack topic, and the partition whose high watermark may
    /// move once it is done.
    durable: Option<(Durable, Arc<Partition>)>,
    /// acks=-1: the high watermark must pass `end` while `leader_epoch` lasts.
    replication: Option<(Arc<Partition>, i64, i32)>,
}

impl Pending {
    fn is_some(&self) -> bool {
        self.durable.is_some() || self.replication.is_some()
    }
}

/// Waits for the started syncs (one per flush-before-ack partition, `syncs[i]` for
/// `results[i]`), then for replication, then answers.
async fn finish(
    request: strand_protocol::ParsedRequest,
    topic_meta: Vec<(kafka_protocol::messages::TopicName, uuid::Uuid)>,
    mut results: Vec<(usize, i32, AppendResult, Pending)>,
    syncs: Vec<Option<DurableWait>>,
    acks_and_throttle: (i16, i32),
    deadline: tokio::time::Instant,
) -> Outcome {
    for ((_, _, result, _), wait) in results.iter_mut().zip(syncs) {
        if let Some(wait) = wait {
            let outcome = wait.finish().await;
            if let (Err(error), Ok(_)) = (outcome, &*result) {
                *result = Err(Refusal::from(error));
            }
        }
    }
    for (_, _, result, pending) in results.iter_mut() {
        if let (Some((partition, end, epoch)), Ok(_)) = (pending.replication.take(), &*result) {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if let Err(refusal) = partition.wait_for_replication(end, epoch, left).await {
                *result = Err(refusal);
            }
        }
    }
    answer(request, topic_meta, results, acks_and_throttle)
}

/// Builds the answer from the append results (nothing left to wait for), with the
/// request's acks and the client's quota throttle.
fn answer(
    request: strand_protocol::ParsedRequest,
    topic_meta: Vec<(kafka_protocol::messages::TopicName, uuid::Uuid)>,
    results: Vec<(usize, i32, AppendResult, Pending)>,
    (acks, throttle_ms): (i16, i32),
) -> Outcome {
    let any_error = results.iter().any(|(_, _, result, _)| result.is_err());
    let mut topics: Vec<TopicProduceResponse> = topic_meta
        .into_iter()
        .map(|(name, id)| {
            TopicProduceResponse::default()
                .with_name(name)
                .with_topic_id(id)
        })
        .collect();
    for (topic_index, index, result, _) in results {
        let response = PartitionProduceResponse::default().with_index(index);
        topics[topic_index].partition_responses.push(match result {
            Ok(info) => response
                .with_error_code(error_code::NONE)
                .with_base_offset(info.first_offset)
                .with_log_append_time_ms(info.log_append_time_ms)
                .with_log_start_offset(info.log_start_offset),
            Err(refusal) => response
                .with_error_code(refusal.code)
                .with_base_offset(-1)
                .with_log_append_time_ms(-1)
                .with_log_start_offset(-1)
                .with_record_errors(
                    refusal
                        .record_errors
                        .into_iter()
                        .map(|e| {
                            BatchIndexAndErrorMessage::default()
                                .with_batch_index(e.batch_index)
                                .with_batch_index_error_message(Some(str_bytes(e.message)))
                        })
                        .collect(),
                )
                .with_error_message(refusal.message.map(str_bytes)),
        });
    }
    if acks == 0 {
        return if any_error {
            Outcome::Close("acks=0 produce failed".into())
        } else {
            Outcome::NoResponse
        };
    }
    respond(
        &request,
        &ProduceResponse::default()
            .with_responses(topics)
            .with_throttle_time_ms(throttle_ms),
    )
}

type AppendResult = Result<strand_log::AppendInfo, Refusal>;

/// The partitions of a transactional request whose batch would open its producer's
/// transaction there, each with the coordinator's verdict (KIP-890 part 1).
async fn verify_transactional(
    broker: &Arc<Broker>,
    body: &ProduceRequest,
    transactional_id: &str,
    version: i16,
) -> Vec<(TopicPartition, Result<Guard, i16>)> {
    // Produce v12+ comes from producers on transaction version 2, which add partitions
    // by producing to them.
    let operation = if version >= 12 {
        Operation::Add
    } else {
        Operation::Verify
    };
    let mut verdicts = Vec::new();
    for topic in &body.topic_data {
        let name = if request_uses_ids(topic) {
            match broker.topic_by_id(&topic.topic_id) {
                Some(info) => info.name,
                None => continue,
            }
        } else {
            topic.name.as_str().to_string()
        };
        for data in &topic.partition_data {
            let Some(header) = data
                .records
                .as_ref()
                .and_then(|records| BatchHeader::parse(records).ok())
            else {
                continue;
            };
            if !header.attributes.is_transactional() || header.attributes.is_control() {
                continue;
            }
            let tp = TopicPartition::new(name.clone(), data.index);
            let Some(partition) = broker.partition(&tp) else {
                continue;
            };
            if partition.has_ongoing_txn(header.producer_id, header.producer_epoch) {
                continue;
            }
            let verdict = crate::txn::verification::verify(
                broker,
                transactional_id,
                header.producer_id,
                header.producer_epoch,
                &tp,
                operation,
            )
            .await;
            verdicts.push((tp, verdict));
        }
    }
    verdicts
}

/// v13 names topics by id only.
fn request_uses_ids(topic: &kafka_protocol::messages::produce_request::TopicProduceData) -> bool {
    topic.name.is_empty() && !topic.topic_id.is_nil()
}

fn append_one(
    broker: &Arc<Broker>,
    tp: &TopicPartition,
    acks: i16,
    transactional_id: &Option<String>,
    verdict: Option<Result<Guard, i16>>,
    records: Option<bytes::Bytes>,
) -> Result<(strand_log::AppendInfo, Pending), Refusal> {
    if !matches!(acks, -1..=1) {
        return Err(Refusal::new(error_code::INVALID_REQUIRED_ACKS, None));
    }
    let partition = broker
        .partition(tp)
        .ok_or(Refusal::new(error_code::UNKNOWN_TOPIC_OR_PARTITION, None))?;
    let records = records.unwrap_or_default();
    // BrokerTopicMetrics, counted as Kafka's appendToLocalLog counts them.
    let counters = partition.counters();
    counters.produce_requested();
    let bytes = records.len() as u64;
    let appended = append_to(&partition, tp, acks, transactional_id, verdict, records);
    match &appended {
        Ok((info, _)) => {
            counters.appended((info.last_offset - info.first_offset + 1) as u64, bytes)
        }
        Err(refusal) => counters.append_refused(refusal.code),
    }
    appended
}

fn append_to(
    partition: &Arc<Partition>,
    tp: &TopicPartition,
    acks: i16,
    transactional_id: &Option<String>,
    verdict: Option<Result<Guard, i16>>,
    records: bytes::Bytes,
) -> Result<(strand_log::AppendInfo, Pending), Refusal> {
    let mut guard = None;
    if let Ok(header) = BatchHeader::parse(&records) {
        if header.attributes.is_transactional() {
            if transactional_id.is_none() {
                return Err(Refusal::new(
                    error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                    Some("A transactional batch needs the request's transactional id".into()),
                ));
            }
            if header.producer_id < 0 || header.producer_epoch < 0 {
                return Err(Refusal::new(
                    error_code::INVALID_RECORD,
                    Some("A transactional batch needs a producer id and epoch".into()),
                ));
            }
            if let Some(Err(code)) = verdict {
                tracing::debug!(partition = %tp, producer_id = header.producer_id, epoch = header.producer_epoch, sequence = header.base_sequence, code, "the coordinator refused a transactional batch");
            }
            match verdict {
                Some(Err(error_code::INVALID_TXN_STATE)) => {
                    return Err(Refusal::new(
                        error_code::INVALID_TXN_STATE,
                        Some("Partition was not added to the transaction".into()),
                    ))
                }
                Some(Err(code)) => return Err(Refusal::new(code, None)),
                // Verified: appended if nothing of the producer landed since (or its
                // transaction is open by then). Not verified: only a transaction the
                // partition has open may be joined, checked again at the append.
                Some(Ok(verified)) => {
                    guard = Some((header.producer_id, header.producer_epoch, verified))
                }
                None => guard = Some((header.producer_id, header.producer_epoch, Some(i64::MIN))),
            }
        }
        if header.attributes.is_control() {
            return Err(Refusal::new(
                error_code::INVALID_RECORD,
                Some("Client produce requests should not have control records".into()),
            ));
        }
    }
    // The epoch before the append: if leadership moves in between, the wait below sees a
    // different epoch and answers NOT_LEADER_OR_FOLLOWER rather than acknowledging.
    let epoch = partition.leader_epoch_if_leader().unwrap_or(-1);
    let (info, durable) = match guard {
        Some(guard) => partition
            .append_transactional(records.to_vec(), acks, guard)
            .inspect_err(|refusal| {
                tracing::debug!(partition = %tp, producer_id = guard.0, epoch = guard.1, expected = ?guard.2, code = refusal.code, "a transactional batch was refused at the append");
            })?,
        None => partition.append_unsynced(records.to_vec(), acks)?,
    };
    let end = info.last_offset + 1;
    let moved = partition.leader_epoch_if_leader() != Some(epoch);
    let replication = (acks == -1 && (moved || partition.high_watermark() < end))
        .then(|| (partition.clone(), end, epoch));
    Ok((
        info,
        Pending {
            durable: durable.map(|durable| (durable, partition.clone())),
            replication,
        },
    ))
}
