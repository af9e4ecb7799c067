//! KIP-890 part 1 (docs/design/transactions.md §7): before a partition leader appends a
//! transactional batch that opens the producer's transaction on the partition, it asks
//! the transaction coordinator whether the partition is in the producer's ongoing
//! transaction, so a late or hanging write cannot open a transaction the coordinator
//! will never end. The coordinator is this broker's own shard, or a peer asked with
//! AddPartitionsToTxn v4 (verify only).

use std::sync::Arc;
use std::time::Duration;

use kafka_protocol::messages::add_partitions_to_txn_request::{
    AddPartitionsToTxnTopic, AddPartitionsToTxnTransaction,
};
use kafka_protocol::messages::{
    AddPartitionsToTxnRequest, AddPartitionsToTxnResponse, ApiKey, ProducerId, TransactionalId,
};
use strand_coordinator::codec::partition_for;
use strand_log::TopicPartition;

use super::{TRANSACTION_STATE_PARTITIONS, TRANSACTION_STATE_TOPIC};
use crate::api::{str_bytes, topic_name};
use crate::broker::Broker;
use crate::error_code;

const ADD_PARTITIONS_VERSION: i16 = 4;
/// How long a leader waits for the coordinator's answer.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether `tp` is in the ongoing transaction of `transactional_id`'s producer at
/// `producer_epoch`: Ok to append, or the Produce error code (§7.2's mapping).
pub async fn verify(
    broker: &Arc<Broker>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
) -> Result<(), i16> {
    let partitions = vec![(tp.topic.clone(), tp.partition)];
    let answer = match coordinator_node(broker, transactional_id) {
        None => Err(error_code::COORDINATOR_NOT_AVAILABLE),
        Some(node) if node == broker.node_id() => broker
            .txns
            .verify(
                broker,
                transactional_id,
                producer_id,
                producer_epoch,
                partitions,
            )
            .await
            .map(|codes| codes.first().copied().unwrap_or(error_code::NONE)),
        Some(node) => {
            ask_peer(
                broker,
                node,
                transactional_id,
                producer_id,
                producer_epoch,
                tp,
            )
            .await
        }
    };
    let code = match answer {
        Ok(code) | Err(code) => code,
    };
    match code {
        error_code::NONE => Ok(()),
        error_code::PRODUCER_FENCED => Err(error_code::INVALID_PRODUCER_EPOCH),
        error_code::TRANSACTION_ABORTABLE => Err(error_code::INVALID_TXN_STATE),
        error_code::NETWORK_EXCEPTION
        | error_code::COORDINATOR_LOAD_IN_PROGRESS
        | error_code::COORDINATOR_NOT_AVAILABLE
        | error_code::NOT_COORDINATOR
        | error_code::CONCURRENT_TRANSACTIONS => Err(error_code::NOT_ENOUGH_REPLICAS),
        other => Err(other),
    }
}

/// The broker coordinating `transactional_id` now, if known.
fn coordinator_node(broker: &Broker, transactional_id: &str) -> Option<i32> {
    let Some(cluster) = broker.cluster() else {
        return Some(broker.node_id());
    };
    let image = cluster.image();
    let index = partition_for(transactional_id, TRANSACTION_STATE_PARTITIONS);
    image
        .partition(TRANSACTION_STATE_TOPIC, index)
        .map(|p| p.leader)
        .filter(|leader| image.is_eligible(*leader))
}

async fn ask_peer(
    broker: &Broker,
    node: i32,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
) -> Result<i16, i16> {
    let cluster = broker
        .cluster()
        .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(true)
            .with_topics(vec![AddPartitionsToTxnTopic::default()
                .with_name(topic_name(&tp.topic))
                .with_partitions(vec![tp.partition])]),
    ]);
    let response: AddPartitionsToTxnResponse = broker
        .txns
        .peers()
        .call(
            cluster,
            node,
            ApiKey::AddPartitionsToTxn,
            ADD_PARTITIONS_VERSION,
            &request,
            VERIFY_TIMEOUT,
        )
        .await
        .map_err(|error| {
            tracing::debug!(node, %error, "verifying a transactional produce failed");
            error_code::NETWORK_EXCEPTION
        })?;
    Ok(response
        .results_by_transaction
        .iter()
        .flat_map(|t| t.topic_results.iter())
        .flat_map(|t| t.results_by_partition.iter())
        .map(|p| p.partition_error_code)
        .next()
        .unwrap_or(error_code::NETWORK_EXCEPTION))
}
