//! Finalized features (UpdateFeatures, kafka-features) on a single node: changed all or
//! nothing, kept across a restart, reported by ApiVersions, and acted on (group.version 0
//! turns the KIP-848 consumer protocol off; transaction.version reaches the transaction
//! coordinator). Kafka's messages for each refusal are checked in
//! strand_metadata::features; the kafka-features tool runs in the `cli` interop driver.

mod common;

use common::{call, open_broker};
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse, GroupId,
};
use kafka_protocol::protocol::StrBytes;
use strand_broker::serve;
use strand_metadata::features::{
    FeatureUpdate, UpgradeType, ELIGIBLE_LEADER_REPLICAS_VERSION, GROUP_VERSION, SHARE_VERSION,
    STREAMS_VERSION, TRANSACTION_VERSION,
};
use tokio::net::TcpStream;

fn update(name: &str, level: i16, upgrade_type: UpgradeType) -> FeatureUpdate {
    FeatureUpdate {
        name: name.into(),
        level,
        upgrade_type,
    }
}

#[tokio::test]
async fn feature_levels_change_all_or_nothing_persist_and_take_effect() {
    let dir = tempfile::tempdir().unwrap();
    {
        let broker = open_broker(dir.path(), |_| {});
        assert_eq!(
            broker.finalized_features().finalized(),
            [
                (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
                (GROUP_VERSION, 1),
                (SHARE_VERSION, 1),
                (STREAMS_VERSION, 1),
                (TRANSACTION_VERSION, 2)
            ]
        );
        let downgrades = [
            update(GROUP_VERSION, 0, UpgradeType::SafeDowngrade),
            update(TRANSACTION_VERSION, 1, UpgradeType::SafeDowngrade),
        ];
        broker.update_features(&downgrades, true).await.unwrap();
        assert!(
            broker.consumer_protocol_enabled(),
            "validate_only changes nothing"
        );
        broker.update_features(&downgrades, false).await.unwrap();
        assert!(!broker.consumer_protocol_enabled());
        assert_eq!(broker.txns.transaction_version(), 1);
        // One bad update refuses them all.
        let refused = broker
            .update_features(
                &[
                    update(TRANSACTION_VERSION, 2, UpgradeType::Upgrade),
                    update("no.such.feature", 1, UpgradeType::Upgrade),
                ],
                false,
            )
            .await
            .unwrap_err();
        assert_eq!(refused.code, 95, "INVALID_UPDATE_VERSION");
        assert_eq!(broker.finalized_features().level(TRANSACTION_VERSION), 1);
        broker.shutdown().unwrap();
    }
    let broker = open_broker(dir.path(), |_| {});
    assert_eq!(
        broker.finalized_features().finalized(),
        [
            (ELIGIBLE_LEADER_REPLICAS_VERSION, 1),
            (SHARE_VERSION, 1),
            (STREAMS_VERSION, 1),
            (TRANSACTION_VERSION, 1)
        ]
    );
    assert_eq!(broker.txns.transaction_version(), 1, "followed at start");
    let (address, _handle, server) = serve(broker).await.unwrap();
    tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();

    let versions: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default()
            .with_client_software_name(StrBytes::from_static_str("test"))
            .with_client_software_version(StrBytes::from_static_str("1")),
    )
    .await;
    let finalized: Vec<(String, i16)> = versions
        .finalized_features
        .iter()
        .map(|f| (f.name.to_string(), f.max_version_level))
        .collect();
    assert_eq!(
        finalized,
        [
            (ELIGIBLE_LEADER_REPLICAS_VERSION.to_string(), 1),
            (SHARE_VERSION.to_string(), 1),
            (STREAMS_VERSION.to_string(), 1),
            (TRANSACTION_VERSION.to_string(), 1)
        ]
    );
    assert_eq!(
        versions.finalized_features_epoch, 2,
        "one change after the start"
    );
    let supported: Vec<String> = versions
        .supported_features
        .iter()
        .map(|f| f.name.to_string())
        .collect();
    assert_eq!(
        supported,
        [
            ELIGIBLE_LEADER_REPLICAS_VERSION,
            GROUP_VERSION,
            SHARE_VERSION,
            STREAMS_VERSION,
            TRANSACTION_VERSION
        ]
    );

    let heartbeat: ConsumerGroupHeartbeatResponse = call(
        &mut stream,
        ApiKey::ConsumerGroupHeartbeat,
        0,
        &ConsumerGroupHeartbeatRequest::default()
            .with_group_id(GroupId(StrBytes::from_static_str("g")))
            .with_member_id(StrBytes::from_static_str("m"))
            .with_rebalance_timeout_ms(30_000)
            .with_subscribed_topic_names(Some(vec![])),
    )
    .await;
    assert_eq!(
        heartbeat.error_code, 35,
        "UNSUPPORTED_VERSION while group.version is 0"
    );
}
