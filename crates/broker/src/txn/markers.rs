//! Transaction markers (docs/design/transactions.md §4): written by the partition leader,
//! for WriteTxnMarkers and for this broker's own coordinator, and sent by the coordinator
//! to each partition's leader (itself, or a peer with WriteTxnMarkers v1).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::write_txn_markers_request::{
    WritableTxnMarker, WritableTxnMarkerTopic,
};
use kafka_protocol::messages::{
    ApiKey, ProducerId, WriteTxnMarkersRequest, WriteTxnMarkersResponse,
};
use strand_coordinator::txn::shard::MarkerJob;
use strand_log::TopicPartition;
use strand_records::{EndTxnMarker, TxnResult};

use crate::api::topic_name;
use crate::broker::Broker;
use crate::error_code;
use crate::group::records::OFFSETS_TOPIC;

/// request.timeout.ms for a marker's write (durable and on the in-sync replicas).
pub const MARKER_WRITE_TIMEOUT: Duration = Duration::from_secs(30);
const WRITE_TXN_MARKERS_VERSION: i16 = 1;

/// Writes one marker on a partition this broker leads and answers its error code: a
/// `__consumer_offsets` partition's marker goes through its group shard (which commits
/// or drops the transaction's offsets), any other is appended to the partition, answered
/// once durable and on every in-sync replica.
pub async fn write_locally(
    broker: &Broker,
    tp: &TopicPartition,
    producer_id: i64,
    producer_epoch: i16,
    commit: bool,
    coordinator_epoch: i32,
) -> i16 {
    if tp.topic == OFFSETS_TOPIC {
        return broker
            .groups
            .write_marker(
                broker,
                tp.partition,
                producer_id,
                producer_epoch,
                commit,
                coordinator_epoch,
            )
            .await;
    }
    let Some(partition) = broker.partition(tp) else {
        return error_code::UNKNOWN_TOPIC_OR_PARTITION;
    };
    let Some(leader_epoch) = partition.leader_epoch_if_leader() else {
        return error_code::NOT_LEADER_OR_FOLLOWER;
    };
    let marker = EndTxnMarker {
        result: if commit {
            TxnResult::Commit
        } else {
            TxnResult::Abort
        },
        coordinator_epoch,
    };
    let (info, durable) = match partition.append_marker(producer_id, producer_epoch, marker) {
        Ok(appended) => appended,
        Err(refusal) => {
            tracing::debug!(partition = %tp, code = refusal.code, message = ?refusal.message, "a transaction marker was refused");
            return refusal.code;
        }
    };
    let committed = async {
        if let Some(durable) = durable {
            durable
                .start_for(partition.clone())
                .finish()
                .await
                .map_err(|error| error.kafka_error_code())?;
        }
        partition
            .wait_for_replication(info.last_offset + 1, leader_epoch, MARKER_WRITE_TIMEOUT)
            .await
            .map_err(|refusal| refusal.code)
    };
    match tokio::time::timeout(MARKER_WRITE_TIMEOUT, committed).await {
        Ok(Ok(())) => error_code::NONE,
        Ok(Err(code)) => code,
        Err(_) => error_code::REQUEST_TIMED_OUT,
    }
}

/// Where a partition's marker goes.
enum Destination {
    Local,
    Peer(i32),
    /// The partition no longer exists (its topic was deleted): nothing to mark.
    Gone,
    /// It exists without a leader now: try again later.
    NoLeader,
}

fn destination(broker: &Broker, tp: &TopicPartition) -> Destination {
    let Some(cluster) = broker.cluster() else {
        let exists = broker
            .topic(&tp.topic)
            .is_some_and(|t| (0..t.partitions).contains(&tp.partition));
        return if exists {
            Destination::Local
        } else {
            Destination::Gone
        };
    };
    let image = cluster.image();
    match image.partition(&tp.topic, tp.partition) {
        None => Destination::Gone,
        Some(state) if state.leader == broker.node_id() => Destination::Local,
        Some(state) if image.is_eligible(state.leader) => Destination::Peer(state.leader),
        Some(_) => Destination::NoLeader,
    }
}

/// Writes `job`'s marker to each of `partitions` (at their current leaders) and answers
/// an error code per partition: NONE for a partition that has it, or that is gone.
pub async fn write(
    broker: &Arc<Broker>,
    job: &MarkerJob,
    partitions: &[(String, i32)],
) -> Vec<((String, i32), i16)> {
    let mut results = Vec::with_capacity(partitions.len());
    let mut local = tokio::task::JoinSet::new();
    let mut by_peer: BTreeMap<i32, Vec<(String, i32)>> = BTreeMap::new();
    for (topic, index) in partitions {
        let tp = TopicPartition::new(topic.clone(), *index);
        match destination(broker, &tp) {
            Destination::Gone => results.push(((topic.clone(), *index), error_code::NONE)),
            Destination::NoLeader => {
                results.push(((topic.clone(), *index), error_code::NOT_LEADER_OR_FOLLOWER))
            }
            Destination::Peer(node) => by_peer
                .entry(node)
                .or_default()
                .push((topic.clone(), *index)),
            Destination::Local => {
                let broker = broker.clone();
                let job = job.clone();
                local.spawn(async move {
                    let code = write_locally(
                        &broker,
                        &tp,
                        job.producer_id,
                        job.producer_epoch,
                        job.commit,
                        job.coordinator_epoch,
                    )
                    .await;
                    ((tp.topic, tp.partition), code)
                });
            }
        }
    }
    // Every peer at once: one slow or gone peer does not hold back the others' markers.
    let mut remote = tokio::task::JoinSet::new();
    for (node, partitions) in by_peer {
        let broker = broker.clone();
        let job = job.clone();
        remote.spawn(async move {
            send_to_peer(&broker, broker.txns.peers(), node, &job, partitions).await
        });
    }
    while let Some(done) = local.join_next().await {
        if let Ok(result) = done {
            results.push(result);
        }
    }
    while let Some(done) = remote.join_next().await {
        if let Ok(answered) = done {
            results.extend(answered);
        }
    }
    results
}

async fn send_to_peer(
    broker: &Broker,
    peers: &crate::cluster::peers::Peers,
    node: i32,
    job: &MarkerJob,
    partitions: Vec<(String, i32)>,
) -> Vec<((String, i32), i16)> {
    let retry = |partitions: Vec<(String, i32)>| {
        partitions
            .into_iter()
            .map(|tp| (tp, error_code::NOT_LEADER_OR_FOLLOWER))
            .collect()
    };
    let Some(cluster) = broker.cluster() else {
        return retry(partitions);
    };
    let mut topics: BTreeMap<&str, Vec<i32>> = BTreeMap::new();
    for (topic, index) in &partitions {
        topics.entry(topic).or_default().push(*index);
    }
    let request =
        WriteTxnMarkersRequest::default().with_markers(vec![WritableTxnMarker::default()
            .with_producer_id(ProducerId(job.producer_id))
            .with_producer_epoch(job.producer_epoch)
            .with_transaction_result(job.commit)
            .with_coordinator_epoch(job.coordinator_epoch)
            .with_topics(
                topics
                    .into_iter()
                    .map(|(topic, indexes)| {
                        WritableTxnMarkerTopic::default()
                            .with_name(topic_name(topic))
                            .with_partition_indexes(indexes)
                    })
                    .collect(),
            )]);
    let answer: anyhow::Result<WriteTxnMarkersResponse> = peers
        .call(
            cluster,
            node,
            ApiKey::WriteTxnMarkers,
            WRITE_TXN_MARKERS_VERSION,
            &request,
            MARKER_WRITE_TIMEOUT + Duration::from_secs(5),
        )
        .await;
    let response = match answer {
        Ok(response) => response,
        Err(error) => {
            tracing::warn!(node, %error, "sending transaction markers failed; retrying");
            return retry(partitions);
        }
    };
    let mut answered: BTreeMap<(String, i32), i16> = BTreeMap::new();
    for marker in response.markers {
        for topic in marker.topics {
            for partition in topic.partitions {
                answered.insert(
                    (topic.name.as_str().to_string(), partition.partition_index),
                    partition.error_code,
                );
            }
        }
    }
    partitions
        .into_iter()
        .map(|tp| {
            let code = answered
                .get(&tp)
                .copied()
                .unwrap_or(error_code::NOT_LEADER_OR_FOLLOWER);
            (tp, code)
        })
        .collect()
}
