//! Group configs over the wire: IncrementalAlterConfigs on a GROUP resource sets a KIP-848
//! group's heartbeat interval and session timeout, the group's members get them at their
//! next heartbeat (another group keeps the broker's), DescribeConfigs reports them as
//! GROUP_CONFIG, Kafka's checks refuse bad values, and they are stored for a restart.

mod common;

use std::collections::BTreeMap;

use common::{call, open_broker};
use kafka_protocol::messages::describe_configs_request::DescribeConfigsResource;
use kafka_protocol::messages::incremental_alter_configs_request::{
    AlterConfigsResource, AlterableConfig,
};
use kafka_protocol::messages::{
    ApiKey, ConsumerGroupHeartbeatRequest, ConsumerGroupHeartbeatResponse, DescribeConfigsRequest,
    DescribeConfigsResponse, GroupId, IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;

const GROUP: i8 = 32;

async fn set(
    stream: &mut TcpStream,
    group: &str,
    configs: &[(&str, &str)],
) -> (i16, Option<String>) {
    let request = IncrementalAlterConfigsRequest::default().with_resources(vec![
        AlterConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(StrBytes::from_string(group.into()))
            .with_configs(
                configs
                    .iter()
                    .map(|(name, value)| {
                        AlterableConfig::default()
                            .with_name(StrBytes::from_string(name.to_string()))
                            .with_config_operation(0)
                            .with_value(Some(StrBytes::from_string(value.to_string())))
                    })
                    .collect(),
            ),
    ]);
    let response: IncrementalAlterConfigsResponse =
        call(stream, ApiKey::IncrementalAlterConfigs, 1, &request).await;
    let result = &response.responses[0];
    (
        result.error_code,
        result.error_message.as_ref().map(|m| m.to_string()),
    )
}

/// (value, source) of each config DescribeConfigs reports for `group`.
async fn describe(stream: &mut TcpStream, group: &str) -> BTreeMap<String, (String, i8)> {
    let request =
        DescribeConfigsRequest::default().with_resources(vec![DescribeConfigsResource::default()
            .with_resource_type(GROUP)
            .with_resource_name(StrBytes::from_string(group.into()))
            .with_configuration_keys(None)]);
    let response: DescribeConfigsResponse =
        call(stream, ApiKey::DescribeConfigs, 4, &request).await;
    assert_eq!(response.results[0].error_code, 0, "{response:?}");
    response.results[0]
        .configs
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                (
                    c.value.as_ref().map(|v| v.to_string()).unwrap_or_default(),
                    c.config_source,
                ),
            )
        })
        .collect()
}

async fn join(stream: &mut TcpStream, group: &str) -> i32 {
    let request = ConsumerGroupHeartbeatRequest::default()
        .with_group_id(GroupId(StrBytes::from_string(group.into())))
        .with_member_id(StrBytes::from_string(format!("member-of-{group}")))
        .with_member_epoch(0)
        .with_rebalance_timeout_ms(30_000)
        .with_subscribed_topic_names(Some(vec![TopicName(StrBytes::from_static_str("t"))]))
        .with_topic_partitions(Some(vec![]));
    let response: ConsumerGroupHeartbeatResponse =
        call(stream, ApiKey::ConsumerGroupHeartbeat, 1, &request).await;
    assert_eq!(response.error_code, 0, "{response:?}");
    response.heartbeat_interval_ms
}

#[tokio::test]
async fn a_groups_configs_reach_its_members_and_are_stored() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    let (address, handle, server) = strand_broker::serve(broker).await.unwrap();
    tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();

    assert_eq!(
        set(
            &mut stream,
            "tuned",
            &[
                ("consumer.heartbeat.interval.ms", "6000"),
                ("consumer.session.timeout.ms", "50000")
            ]
        )
        .await,
        (0, None)
    );
    assert_eq!(
        join(&mut stream, "tuned").await,
        6000,
        "the group's own interval"
    );
    assert_eq!(
        join(&mut stream, "plain").await,
        5000,
        "the broker's default"
    );

    let described = describe(&mut stream, "tuned").await;
    assert_eq!(described.len(), 21, "Kafka's 21 group configs");
    assert_eq!(
        described["consumer.heartbeat.interval.ms"],
        ("6000".into(), 8)
    );
    assert_eq!(
        described["consumer.session.timeout.ms"],
        ("50000".into(), 8)
    );
    assert_eq!(described["share.session.timeout.ms"], ("45000".into(), 5));

    assert_eq!(
        set(
            &mut stream,
            "tuned",
            &[("consumer.heartbeat.interval.ms", "100")]
        )
        .await,
        (
            40,
            Some(
                "consumer.heartbeat.interval.ms must be in the range 5000 to 15000 inclusive."
                    .into()
            )
        )
    );
    assert_eq!(
        set(&mut stream, "tuned", &[("retention.ms", "1")]).await,
        (40, Some("Unknown group config name: retention.ms".into()))
    );
    assert_eq!(
        set(&mut stream, "", &[("consumer.session.timeout.ms", "50000")]).await,
        (42, Some("Default group resources are not allowed.".into()))
    );

    // What a restart reads back (Broker::open loads this file).
    drop(stream);
    handle.shutdown();
    let stored: BTreeMap<String, BTreeMap<String, String>> = serde_json::from_slice(
        &std::fs::read(
            dir.path()
                .join(strand_broker::group_configs::GROUP_CONFIGS_FILE),
        )
        .unwrap(),
    )
    .unwrap();
    assert_eq!(stored["tuned"]["consumer.heartbeat.interval.ms"], "6000");
}
