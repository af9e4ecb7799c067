//! DescribeQuorum (55, kafka-metadata-quorum, Admin.describeMetadataQuorum): the metadata
//! quorum's leader, epoch and high watermark, each voter's and observer's log end and
//! when it last heard from the leader, and (v2) the voters' CONTROLLER endpoints. Asked
//! of the active controller (`strand_raft::quorum_state`); only `__cluster_metadata`
//! partition 0 exists, anything else is UNKNOWN_TOPIC_OR_PARTITION as on Kafka.
//!
//! A single node has no Raft log: it is its own, only voter and controller, at epoch 0
//! with an empty metadata log.

use std::sync::Arc;

use kafka_protocol::messages::describe_quorum_response::{
    Listener, Node, PartitionData, ReplicaState, TopicData,
};
use kafka_protocol::messages::{BrokerId, DescribeQuorumRequest, DescribeQuorumResponse};
use kafka_protocol::protocol::StrBytes;
use strand_raft::quorum_state::{QuorumDescription, QuorumReplica};

use super::str_bytes;
use crate::authorization::AclOperation;
use crate::broker::Broker;
use crate::error_code;
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};

const METADATA_TOPIC: &str = "__cluster_metadata";
const CONTROLLER_LISTENER: &str = "CONTROLLER";

pub async fn handle(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeQuorumRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    // Kafka's check: DESCRIBE on the cluster.
    if !broker
        .authorization(context)
        .allows_cluster(AclOperation::Describe)
    {
        return respond(
            &request,
            &DescribeQuorumResponse::default()
                .with_error_code(error_code::CLUSTER_AUTHORIZATION_FAILED),
        );
    }
    // Fields by version: the timestamps from v1, messages and endpoints from v2.
    let version = request.header.request_api_version;
    let asks_for_metadata_log = body.topics.len() == 1
        && body.topics[0].topic_name.as_str() == METADATA_TOPIC
        && body.topics[0].partitions.len() == 1
        && body.topics[0].partitions[0].partition_index == 0;
    let empty = || (version >= 2).then(|| StrBytes::from_static_str(""));
    if !asks_for_metadata_log {
        // Kafka answers each partition asked with the same error.
        let topics = body
            .topics
            .iter()
            .map(|topic| {
                TopicData::default()
                    .with_topic_name(topic.topic_name.clone())
                    .with_partitions(
                        topic
                            .partitions
                            .iter()
                            .map(|p| {
                                PartitionData::default()
                                    .with_partition_index(p.partition_index)
                                    .with_error_code(error_code::UNKNOWN_TOPIC_OR_PARTITION)
                                    .with_error_message((version >= 2).then(|| {
                                        str_bytes("This server does not host this topic-partition.")
                                    }))
                            })
                            .collect(),
                    )
            })
            .collect();
        return respond(
            &request,
            &DescribeQuorumResponse::default()
                .with_error_message(empty())
                .with_topics(topics),
        );
    }
    let quorum = match broker.cluster() {
        Some(cluster) => match cluster.describe_quorum().await {
            Ok(quorum) => quorum,
            Err(error) => {
                return respond(
                    &request,
                    &DescribeQuorumResponse::default()
                        .with_error_code(error.code)
                        .with_error_message(error.message.filter(|_| version >= 2).map(str_bytes)),
                )
            }
        },
        None => QuorumDescription::single_node(
            broker.node_id(),
            broker.advertised_host.clone(),
            broker.advertised_port,
        ),
    };
    let replica = |r: &QuorumReplica| {
        let state = ReplicaState::default()
            .with_replica_id(BrokerId(r.id))
            .with_replica_directory_id(r.directory_id)
            .with_log_end_offset(r.log_end_offset);
        if version >= 1 {
            state
                .with_last_fetch_timestamp(r.last_fetch_ms)
                .with_last_caught_up_timestamp(r.last_caught_up_ms)
        } else {
            state
        }
    };
    let partition = PartitionData::default()
        .with_partition_index(0)
        .with_error_message(empty())
        .with_leader_id(BrokerId(quorum.leader))
        .with_leader_epoch(quorum.epoch)
        .with_high_watermark(quorum.high_watermark)
        .with_current_voters(quorum.voters.iter().map(replica).collect())
        .with_observers(quorum.observers.iter().map(replica).collect());
    let nodes = quorum
        .voter_endpoints
        .iter()
        .filter(|_| version >= 2)
        .map(|(id, host, port)| {
            Node::default()
                .with_node_id(BrokerId(*id))
                .with_listeners(vec![Listener::default()
                    .with_name(StrBytes::from_static_str(CONTROLLER_LISTENER))
                    .with_host(str_bytes(host.clone()))
                    .with_port(*port)])
        })
        .collect();
    let response = DescribeQuorumResponse::default()
        .with_error_message(empty())
        .with_topics(vec![TopicData::default()
            .with_topic_name(body.topics[0].topic_name.clone())
            .with_partitions(vec![partition])])
        .with_nodes(nodes);
    respond(&request, &response)
}
