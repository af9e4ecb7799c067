//! One module per Kafka API. Each decodes its request, acts, and encodes its response.

pub mod acls;
pub mod add_offsets_to_txn;
pub mod add_partitions_to_txn;
pub mod alter_partition_reassignments;
pub mod alter_replica_log_dirs;
pub mod api_versions;
pub mod client_quotas;
pub mod configs;
pub mod consumer_group_describe;
pub mod consumer_group_heartbeat;
pub mod create_partitions;
pub mod create_topics;
pub mod delete_groups;
pub mod delete_records;
pub mod delete_topics;
pub mod describe_cluster;
pub mod describe_groups;
pub mod describe_log_dirs;
pub mod describe_producers;
pub mod describe_quorum;
pub mod describe_topic_partitions;
pub mod describe_transactions;
pub mod elect_leaders;
pub mod end_txn;
pub mod fetch;
pub mod find_coordinator;
pub mod heartbeat;
pub mod init_producer_id;
pub mod join_group;
pub mod leave_group;
pub mod list_groups;
pub mod list_offsets;
pub mod list_partition_reassignments;
pub mod list_transactions;
pub mod metadata;
pub mod offset_commit;
pub mod offset_delete;
pub mod offset_fetch;
pub mod offset_for_leader_epoch;
pub(crate) mod partition_views;
pub mod produce;
pub mod raft_voters;
pub mod sasl;
pub mod share_acknowledge;
pub mod share_fetch;
pub mod share_group_describe;
pub mod share_group_heartbeat;
pub mod share_group_offsets;
pub mod share_group_state;
pub mod streams_group_describe;
pub mod streams_group_heartbeat;
pub mod sync_group;
pub mod topic_ids;
pub mod txn_offset_commit;
pub mod unregister_broker;
pub mod update_features;
pub mod user_scram_credentials;
pub mod write_txn_markers;

use kafka_protocol::messages::TopicName;
use kafka_protocol::protocol::StrBytes;

pub(crate) fn topic_name(name: &str) -> TopicName {
    TopicName(StrBytes::from_string(name.to_string()))
}

pub(crate) fn str_bytes(text: impl Into<String>) -> StrBytes {
    StrBytes::from_string(text.into())
}

/// A broker clients may connect to: (id, host, port, rack).
pub(crate) type LiveBroker = (i32, String, u16, Option<String>);

/// The brokers clients are told about and the controller id they see: this node on a
/// single node; in a cluster the unfenced brokers of the image, and (clients cannot reach
/// KRaft controllers) the active controller if it is one of them, else a live broker.
///
/// Addresses are those of the listener the request came on.
pub(crate) async fn live_brokers(
    broker: &crate::broker::Broker,
    context: &crate::net::RequestContext,
) -> (Vec<LiveBroker>, i32) {
    let Some(cluster) = broker.cluster() else {
        let (host, port) = own_endpoint(context);
        let me = (broker.node_id(), host, port, None);
        return (vec![me], broker.node_id());
    };
    let image = cluster.image();
    let listener = context.listener_name();
    let inter_broker = &broker.config.listener_name;
    // A broker without this listener is left out, as Kafka leaves it out.
    let live: Vec<LiveBroker> = image
        .brokers
        .values()
        .filter(|b| !b.fenced)
        .filter_map(|b| {
            let (host, port) = b.endpoint(listener, inter_broker)?;
            Some((b.id, host.to_string(), port, b.rack.clone()))
        })
        .collect();
    let controller = match cluster.controller_id().await {
        Some(id) if live.iter().any(|b| b.0 == id) => id,
        _ => live.first().map_or(-1, |b| b.0),
    };
    (live, controller)
}

/// The (host, port) this broker advertises on the listener `context` came in on.
pub(crate) fn own_endpoint(context: &crate::net::RequestContext) -> (String, u16) {
    let spec = &context.listener.spec;
    (spec.advertised_host.clone(), spec.advertised_port)
}
