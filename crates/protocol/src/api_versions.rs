//! The APIs Strand serves and the versions it advertises in ApiVersions. An API appears
//! here only once the broker implements it, at exactly the versions it implements
//! (the brief's rule: advertise only what you do).

use kafka_protocol::messages::ApiKey;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SupportedApi {
    pub key: ApiKey,
    pub min_version: i16,
    pub max_version: i16,
}

const fn api(key: ApiKey, min_version: i16, max_version: i16) -> SupportedApi {
    SupportedApi {
        key,
        min_version,
        max_version,
    }
}

/// Versions follow Kafka 4.4.0's brokers (kafka-protocol's messages are regenerated from
/// its schemas: vendor/kafka-protocol/STRAND.md).
pub const SUPPORTED_APIS: &[SupportedApi] = &[
    api(ApiKey::Produce, 3, 13),
    // v18 adds a follower's high watermark to the request (KIP-1166), which only brokers
    // replicating from this one send: accepted, and the answer is v17's.
    api(ApiKey::Fetch, 4, 18),
    api(ApiKey::ListOffsets, 1, 11),
    api(ApiKey::Metadata, 0, 13),
    api(ApiKey::OffsetCommit, 2, 10),
    api(ApiKey::OffsetFetch, 1, 10),
    api(ApiKey::FindCoordinator, 0, 6),
    api(ApiKey::JoinGroup, 0, 9),
    api(ApiKey::Heartbeat, 0, 4),
    api(ApiKey::LeaveGroup, 0, 5),
    api(ApiKey::SyncGroup, 0, 5),
    api(ApiKey::DescribeGroups, 0, 6),
    api(ApiKey::ListGroups, 0, 5),
    api(ApiKey::ApiVersions, 0, 5),
    // Advertised on every listener, as Kafka does; outside a SASL listener's
    // authentication they answer ILLEGAL_SASL_STATE.
    api(ApiKey::SaslHandshake, 0, 1),
    api(ApiKey::SaslAuthenticate, 0, 2),
    api(ApiKey::DescribeUserScramCredentials, 0, 0),
    api(ApiKey::DescribeAcls, 1, 3),
    api(ApiKey::DescribeClientQuotas, 0, 1),
    api(ApiKey::AlterClientQuotas, 0, 1),
    api(ApiKey::CreateAcls, 1, 3),
    api(ApiKey::DeleteAcls, 1, 3),
    api(ApiKey::AlterUserScramCredentials, 0, 0),
    api(ApiKey::CreateTopics, 2, 7),
    api(ApiKey::DeleteTopics, 1, 6),
    api(ApiKey::DeleteRecords, 0, 2),
    api(ApiKey::InitProducerId, 0, 5),
    api(ApiKey::OffsetForLeaderEpoch, 2, 4),
    api(ApiKey::DescribeConfigs, 1, 4),
    api(ApiKey::AlterConfigs, 0, 2),
    api(ApiKey::CreatePartitions, 0, 3),
    api(ApiKey::IncrementalAlterConfigs, 0, 1),
    // v3's per-group error message: Kafka sets it only when a whole coordinator
    // partition fails, so Strand's is always null, as Kafka's per-group errors are.
    api(ApiKey::DeleteGroups, 0, 3),
    api(ApiKey::OffsetDelete, 0, 0),
    api(ApiKey::DescribeCluster, 0, 2),
    api(ApiKey::ElectLeaders, 0, 2),
    api(ApiKey::DescribeQuorum, 0, 2),
    api(ApiKey::UpdateFeatures, 0, 2),
    api(ApiKey::UnregisterBroker, 0, 0),
    // Voters of the metadata quorum (KIP-853) and forgetting a departed controller.
    api(ApiKey::AddRaftVoter, 0, 1),
    api(ApiKey::RemoveRaftVoter, 0, 0),
    api(ApiKey::UnregisterController, 0, 0),
    api(ApiKey::AlterPartitionReassignments, 0, 1),
    api(ApiKey::ListPartitionReassignments, 0, 0),
    // v5's is_cordoned: Strand has no cordoned directories.
    api(ApiKey::DescribeLogDirs, 1, 5),
    // Moves between this broker's log directories (log.dirs).
    api(ApiKey::AlterReplicaLogDirs, 1, 2),
    api(ApiKey::DescribeTopicPartitions, 0, 0),
    api(ApiKey::ConsumerGroupHeartbeat, 0, 1),
    api(ApiKey::ConsumerGroupDescribe, 0, 1),
    // Share groups (KIP-932), while `share.version` is finalized at 1 or more.
    api(ApiKey::ShareGroupHeartbeat, 1, 1),
    api(ApiKey::ShareGroupDescribe, 1, 1),
    api(ApiKey::ShareFetch, 1, 2),
    api(ApiKey::ShareAcknowledge, 1, 2),
    api(ApiKey::DescribeShareGroupOffsets, 0, 1),
    api(ApiKey::AlterShareGroupOffsets, 0, 0),
    api(ApiKey::DeleteShareGroupOffsets, 0, 0),
    // The share coordinator's APIs, which brokers send each other.
    api(ApiKey::InitializeShareGroupState, 0, 0),
    api(ApiKey::ReadShareGroupState, 0, 0),
    api(ApiKey::WriteShareGroupState, 0, 1),
    api(ApiKey::DeleteShareGroupState, 0, 0),
    api(ApiKey::ReadShareGroupStateSummary, 0, 1),
    // Streams groups (KIP-1071), while `streams.version` is finalized at 1 or more; 93
    // answers as Kafka's does without a topology description plugin.
    api(ApiKey::StreamsGroupHeartbeat, 0, 1),
    api(ApiKey::StreamsGroupDescribe, 0, 1),
    api(ApiKey::StreamsGroupTopologyDescriptionUpdate, 0, 0),
    // Transactions. Clients use transaction version 2 (EndTxn v5, TxnOffsetCommit v5,
    // partitions added by Produce v12+) once ApiVersions finalizes `transaction.version`
    // 2 (TRANSACTION_VERSION); older clients speak version 0 (AddPartitionsToTxn up to
    // v3). AddPartitionsToTxn v4-5 are the brokers' requests to the coordinator.
    api(ApiKey::AddPartitionsToTxn, 0, 5),
    api(ApiKey::AddOffsetsToTxn, 0, 4),
    api(ApiKey::EndTxn, 0, 5),
    // v2's transaction_version (KIP-1228) is accepted and not needed: the marker's epoch
    // rules follow the producer's state either way.
    api(ApiKey::WriteTxnMarkers, 1, 2),
    api(ApiKey::TxnOffsetCommit, 0, 6),
    api(ApiKey::DescribeProducers, 0, 0),
    api(ApiKey::DescribeTransactions, 0, 0),
    api(ApiKey::ListTransactions, 0, 2),
];

/// The `transaction.version` a broker starts with until it knows the cluster's finalized
/// one (Kafka 4's default for a new cluster): 2, KIP-890 part 2.
pub const TRANSACTION_VERSION: i16 = 2;

/// (min, max) advertised for `key`, or None if Strand does not serve it.
pub fn supported_versions(key: ApiKey) -> Option<(i16, i16)> {
    SUPPORTED_APIS
        .iter()
        .find(|api| api.key == key)
        .map(|api| (api.min_version, api.max_version))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn advertised_versions_lie_within_the_codec_schemas() {
        for api in SUPPORTED_APIS {
            let known = api.key.valid_versions();
            assert!(
                known.min <= api.min_version && api.max_version <= known.max,
                "{:?}",
                api.key
            );
        }
    }
}
