//! A topic's partitions as clients are told about them (leader, epoch, replicas, ISR,
//! eligible leader replicas, offline replicas), for Metadata and DescribeTopicPartitions
//! alike: this node on a single node, the metadata image in a cluster.

use crate::broker::Broker;
use crate::error_code;
use crate::topics::TopicInfo;

pub(crate) struct PartitionView {
    pub index: i32,
    /// LEADER_NOT_AVAILABLE for a partition without a leader.
    pub error_code: i16,
    pub leader: i32,
    pub leader_epoch: i32,
    pub replicas: Vec<i32>,
    pub isr: Vec<i32>,
    /// KIP-966's eligible leader replicas and last known leader (DescribeTopicPartitions).
    pub elr: Vec<i32>,
    pub last_known_elr: Vec<i32>,
    pub offline: Vec<i32>,
}

/// The partitions of `topic` from `first` on. In a cluster the topic table can be a step
/// ahead of the reconciled image (a topic or partitions just created): only partitions
/// the image has are listed, as Kafka's brokers answer from one image.
pub(crate) fn partition_views(
    broker: &Broker,
    topic: &TopicInfo,
    first: i32,
) -> Vec<PartitionView> {
    let node = broker.node_id();
    let image = broker.cluster().map(|c| c.image());
    (first.max(0)..topic.partitions)
        .filter_map(|index| {
            let Some(image) = &image else {
                // A log in an offline directory is an offline replica; it still leads,
                // serving reads (docs/ARCHITECTURE.md, storage failures).
                let offline = broker
                    .any_log_dir_offline()
                    .then(|| strand_log::TopicPartition::new(topic.name.clone(), index))
                    .and_then(|tp| broker.partition(&tp))
                    .filter(|partition| partition.log().is_offline())
                    .map(|_| vec![node])
                    .unwrap_or_default();
                return Some(PartitionView {
                    index,
                    error_code: error_code::NONE,
                    leader: node,
                    leader_epoch: 0,
                    replicas: vec![node],
                    isr: vec![node],
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                    offline,
                });
            };
            let state = image.partition(&topic.name, index)?;
            let offline = state
                .replicas
                .iter()
                .copied()
                .filter(|id| image.brokers.get(id).is_none_or(|b| b.fenced))
                .collect();
            Some(PartitionView {
                index,
                error_code: if state.leader < 0 {
                    error_code::LEADER_NOT_AVAILABLE
                } else {
                    error_code::NONE
                },
                leader: state.leader,
                leader_epoch: state.leader_epoch,
                replicas: state.replicas.clone(),
                isr: state.isr.clone(),
                elr: state.elr.clone(),
                last_known_elr: state.last_known_elr.clone(),
                offline,
            })
        })
        .collect()
}
