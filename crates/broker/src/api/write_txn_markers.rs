//! WriteTxnMarkers (27): a transaction coordinator (on a peer) asks this broker, as the
//! leader of the transaction's partitions, to write their commit or abort markers. The
//! answer goes out once every partition has its marker durable and on its in-sync
//! replicas, or its error (docs/design/transactions.md §4.1).

use std::collections::BTreeMap;
use std::sync::Arc;

use kafka_protocol::messages::write_txn_markers_response::{
    WritableTxnMarkerPartitionResult, WritableTxnMarkerResult, WritableTxnMarkerTopicResult,
};
use kafka_protocol::messages::{WriteTxnMarkersRequest, WriteTxnMarkersResponse};
use strand_log::TopicPartition;

use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::txn::markers::write_locally;

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: WriteTxnMarkersRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: ALTER or CLUSTER_ACTION on the cluster; a refusal fails the request
    // (Kafka answers every partition CLUSTER_AUTHORIZATION_FAILED).
    let allowed = {
        let authorization = broker.authorization(context);
        authorization.allows_cluster(AclOperation::Alter)
            || authorization.allows_cluster(AclOperation::ClusterAction)
    };
    let mut writes = tokio::task::JoinSet::new();
    for (index, marker) in body.markers.iter().enumerate() {
        for topic in &marker.topics {
            for &partition in &topic.partition_indexes {
                if !allowed {
                    let tp = TopicPartition::new(topic.name.as_str(), partition);
                    writes.spawn(async move {
                        (index, tp, crate::error_code::CLUSTER_AUTHORIZATION_FAILED)
                    });
                    continue;
                }
                let broker = broker.clone();
                let tp = TopicPartition::new(topic.name.as_str(), partition);
                let (pid, epoch, commit, coordinator_epoch) = (
                    marker.producer_id.0,
                    marker.producer_epoch,
                    marker.transaction_result,
                    marker.coordinator_epoch,
                );
                writes.spawn(async move {
                    let code =
                        write_locally(&broker, &tp, pid, epoch, commit, coordinator_epoch).await;
                    (index, tp, code)
                });
            }
        }
    }
    let mut by_marker: BTreeMap<usize, BTreeMap<String, Vec<(i32, i16)>>> = BTreeMap::new();
    while let Some(done) = writes.join_next().await {
        if let Ok((index, tp, code)) = done {
            by_marker
                .entry(index)
                .or_default()
                .entry(tp.topic)
                .or_default()
                .push((tp.partition, code));
        }
    }
    let markers = body
        .markers
        .iter()
        .enumerate()
        .map(|(index, marker)| {
            let topics = by_marker
                .remove(&index)
                .unwrap_or_default()
                .into_iter()
                .map(|(topic, mut partitions)| {
                    partitions.sort();
                    WritableTxnMarkerTopicResult::default()
                        .with_name(super::topic_name(&topic))
                        .with_partitions(
                            partitions
                                .into_iter()
                                .map(|(partition, code)| {
                                    WritableTxnMarkerPartitionResult::default()
                                        .with_partition_index(partition)
                                        .with_error_code(code)
                                })
                                .collect(),
                        )
                })
                .collect();
            WritableTxnMarkerResult::default()
                .with_producer_id(marker.producer_id)
                .with_topics(topics)
        })
        .collect();
    respond(
        &request,
        &WriteTxnMarkersResponse::default().with_markers(markers),
    )
}
