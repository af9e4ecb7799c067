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

/// How long a leader waits for the coordinator's answer.
const VERIFY_TIMEOUT: Duration = Duration::from_secs(10);
/// add.partitions.to.txn.retry.backoff.ms and .max.ms: while the coordinator still
/// writes the previous transaction's markers (CONCURRENT_TRANSACTIONS), an implicit add
/// is retried this often for this long before the producer is told.
const ADD_RETRY_BACKOFF: Duration = Duration::from_millis(20);
const ADD_RETRY_MAX: Duration = Duration::from_millis(100);

/// What the leader asks of the coordinator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// Transaction version 0 (Produce up to v11, TxnOffsetCommit up to v4): is the
    /// partition in the ongoing transaction?
    Verify,
    /// Transaction version 2 (Produce v12+, TxnOffsetCommit v5): add the partition to
    /// the transaction (KIP-890 part 2: producers no longer send AddPartitionsToTxn).
    Add,
}

/// What the partition knew of the producer when the coordinator said yes: the offset of
/// its last batch or marker there (None: not known). The append goes ahead only if that
/// is unchanged, or the producer has a transaction open there by then: a marker that
/// landed in between (the transaction verified ended, §7.3's ABA race) makes the late
/// batch one that would open a transaction no coordinator knows, which would hold the
/// last stable offset forever.
pub type Guard = Option<i64>;

/// The guard of `producer_id` on `tp` now.
pub fn guard_of(broker: &Broker, tp: &TopicPartition, producer_id: i64) -> Guard {
    broker.partition(tp).and_then(|p| {
        p.log()
            .producer_state()
            .get(producer_id)
            .map(|e| e.last_offset)
    })
}

/// Whether `tp` is in the ongoing transaction of `transactional_id`'s producer at
/// `producer_epoch` (or, for `Add`, now added to it): the guard to append with, or the
/// Produce error code (§7.2's mapping).
pub async fn verify(
    broker: &Arc<Broker>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
    operation: Operation,
) -> Result<Guard, i16> {
    let deadline = tokio::time::Instant::now() + ADD_RETRY_MAX;
    let (code, guard) = loop {
        // Transaction version 0: taken before each question, so a marker landing while
        // the coordinator answers (the verified transaction ended) voids the yes.
        // Version 2: taken after the yes, which the coordinator gives only once the
        // previous transaction's markers are all written (it answers
        // CONCURRENT_TRANSACTIONS until then); a marker of that transaction landing
        // while the question is out must not void it (KAFKA-18575), and a late batch of
        // an ended transaction is refused by its epoch, which every marker bumps.
        let before = guard_of(broker, tp, producer_id);
        let code = ask(
            broker,
            transactional_id,
            producer_id,
            producer_epoch,
            tp,
            operation,
        )
        .await;
        let retry = operation == Operation::Add
            && code == error_code::CONCURRENT_TRANSACTIONS
            && tokio::time::Instant::now() + ADD_RETRY_BACKOFF < deadline;
        if !retry {
            let guard = match operation {
                Operation::Verify => before,
                Operation::Add => guard_of(broker, tp, producer_id),
            };
            break (code, guard);
        }
        tokio::time::sleep(ADD_RETRY_BACKOFF).await;
    };
    match code {
        error_code::NONE => Ok(guard),
        error_code::PRODUCER_FENCED => Err(error_code::INVALID_PRODUCER_EPOCH),
        error_code::TRANSACTION_ABORTABLE => Err(error_code::INVALID_TXN_STATE),
        error_code::CONCURRENT_TRANSACTIONS if operation == Operation::Add => {
            Err(error_code::CONCURRENT_TRANSACTIONS)
        }
        error_code::NETWORK_EXCEPTION
        | error_code::COORDINATOR_LOAD_IN_PROGRESS
        | error_code::COORDINATOR_NOT_AVAILABLE
        | error_code::NOT_COORDINATOR
        | error_code::CONCURRENT_TRANSACTIONS => Err(error_code::NOT_ENOUGH_REPLICAS),
        other => Err(other),
    }
}

/// The coordinator's code for `tp`.
async fn ask(
    broker: &Arc<Broker>,
    transactional_id: &str,
    producer_id: i64,
    producer_epoch: i16,
    tp: &TopicPartition,
    operation: Operation,
) -> i16 {
    let partitions = vec![(tp.topic.clone(), tp.partition)];
    match coordinator_node(broker, transactional_id) {
        None => error_code::COORDINATOR_NOT_AVAILABLE,
        Some(node) if node == broker.node_id() => match operation {
            Operation::Verify => broker
                .txns
                .verify(
                    broker,
                    transactional_id,
                    producer_id,
                    producer_epoch,
                    partitions,
                )
                .await
                .map_or_else(
                    |code| code,
                    |codes| codes.first().copied().unwrap_or(error_code::NONE),
                ),
            Operation::Add => {
                broker
                    .txns
                    .add_partitions(
                        broker,
                        transactional_id,
                        producer_id,
                        producer_epoch,
                        partitions,
                        2,
                    )
                    .await
            }
        },
        Some(node) => ask_peer(
            broker,
            node,
            transactional_id,
            producer_id,
            producer_epoch,
            tp,
            operation,
        )
        .await
        .unwrap_or_else(|code| code),
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
    operation: Operation,
) -> Result<i16, i16> {
    // v4 verifies (KIP-890 part 1), v5 adds (part 2).
    let version = match operation {
        Operation::Verify => 4,
        Operation::Add => 5,
    };
    let cluster = broker
        .cluster()
        .ok_or(error_code::COORDINATOR_NOT_AVAILABLE)?;
    let request = AddPartitionsToTxnRequest::default().with_transactions(vec![
        AddPartitionsToTxnTransaction::default()
            .with_transactional_id(TransactionalId(str_bytes(transactional_id)))
            .with_producer_id(ProducerId(producer_id))
            .with_producer_epoch(producer_epoch)
            .with_verify_only(operation == Operation::Verify)
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
            version,
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
