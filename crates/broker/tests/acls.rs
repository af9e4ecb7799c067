//! ACLs as a Kafka client meets them: with authorizer.class.name set to StandardAuthorizer
//! a principal may do only what super.users or an ACL lets it, and is refused with
//! Kafka's error codes; CreateAcls, DescribeAcls and DeleteAcls manage the ACLs (only
//! for principals allowed on the cluster), and the ACLs survive a restart. Without an
//! authorizer the ACL APIs answer SECURITY_DISABLED.

mod common;

use common::listeners::{plain_login, start, start_in};
use common::{call, fetch_request, produce_request};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::create_topics_request::CreatableTopic;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, CreateTopicsRequest, CreateTopicsResponse,
    DeleteAclsRequest, DeleteAclsResponse, DescribeAclsRequest, DescribeAclsResponse,
    FetchResponse, FindCoordinatorRequest, FindCoordinatorResponse, MetadataRequest,
    MetadataResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::StrBytes;
use tokio::net::TcpStream;

const TOPIC_AUTHORIZATION_FAILED: i16 = 29;
const GROUP_AUTHORIZATION_FAILED: i16 = 30;
const CLUSTER_AUTHORIZATION_FAILED: i16 = 31;
const INVALID_REQUEST: i16 = 42;
const SECURITY_DISABLED: i16 = 54;

// Kafka's codes.
const TOPIC: i8 = 2;
const GROUP: i8 = 3;
const CLUSTER: i8 = 4;
const ANY: i8 = 1;
const MATCH: i8 = 2;
const LITERAL: i8 = 3;
const PREFIXED: i8 = 4;
const READ: i8 = 3;
const WRITE: i8 = 4;
const DESCRIBE: i8 = 8;
const DENY: i8 = 2;
const ALLOW: i8 = 3;

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

fn properties() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
        (
            "authorizer.class.name",
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        ),
        ("super.users", "User:admin"),
    ]
}

fn text(value: &str) -> StrBytes {
    StrBytes::from_string(value.to_string())
}

fn acl(
    resource_type: i8,
    name: &str,
    pattern: i8,
    principal: &str,
    operation: i8,
    permission: i8,
) -> AclCreation {
    AclCreation::default()
        .with_resource_type(resource_type)
        .with_resource_name(text(name))
        .with_resource_pattern_type(pattern)
        .with_principal(text(principal))
        .with_host(text("*"))
        .with_operation(operation)
        .with_permission_type(permission)
}

async fn create_acls(stream: &mut TcpStream, acls: Vec<AclCreation>) -> CreateAclsResponse {
    call(
        stream,
        ApiKey::CreateAcls,
        3,
        &CreateAclsRequest::default().with_creations(acls),
    )
    .await
}

fn describe_filter(resource_type: i8, name: Option<&str>, pattern: i8) -> DescribeAclsRequest {
    DescribeAclsRequest::default()
        .with_resource_type_filter(resource_type)
        .with_resource_name_filter(name.map(text))
        .with_pattern_type_filter(pattern)
        .with_principal_filter(None)
        .with_host_filter(None)
        .with_operation(ANY)
        .with_permission_type(ANY)
}

async fn describe_acls(
    stream: &mut TcpStream,
    filter: DescribeAclsRequest,
) -> DescribeAclsResponse {
    call(stream, ApiKey::DescribeAcls, 3, &filter).await
}

async fn create_topic(stream: &mut TcpStream, name: &str) -> CreateTopicsResponse {
    call(
        stream,
        ApiKey::CreateTopics,
        7,
        &CreateTopicsRequest::default()
            .with_topics(vec![CreatableTopic::default()
                .with_name(TopicName(text(name)))
                .with_num_partitions(1)
                .with_replication_factor(1)])
            .with_timeout_ms(5_000),
    )
    .await
}

/// Metadata of every topic (None) or of the topics named, with topic authorized
/// operations.
async fn metadata(stream: &mut TcpStream, topics: Option<&[&str]>) -> MetadataResponse {
    let topics = topics.map(|names| {
        names
            .iter()
            .map(|n| MetadataRequestTopic::default().with_name(Some(TopicName(text(n)))))
            .collect()
    });
    call(
        stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_topics(topics)
            .with_allow_auto_topic_creation(false)
            .with_include_topic_authorized_operations(true),
    )
    .await
}

fn topic_names(response: &MetadataResponse) -> Vec<String> {
    response
        .topics
        .iter()
        .filter_map(|t| t.name.as_ref().map(|n| n.to_string()))
        .collect()
}

async fn produce(stream: &mut TcpStream, topic: &str) -> i16 {
    let response: ProduceResponse = call(
        stream,
        ApiKey::Produce,
        9,
        &produce_request(topic, 0, 1, b"v"),
    )
    .await;
    response.responses[0].partition_responses[0].error_code
}

async fn find_group_coordinator(stream: &mut TcpStream, group: &str) -> i16 {
    let response: FindCoordinatorResponse = call(
        stream,
        ApiKey::FindCoordinator,
        4,
        &FindCoordinatorRequest::default()
            .with_key_type(0)
            .with_coordinator_keys(vec![text(group)]),
    )
    .await;
    response.coordinators[0].error_code
}

#[tokio::test]
async fn each_principal_may_do_what_its_acls_allow_and_is_refused_with_kafkas_codes() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start_in(dir.path(), &properties()).await;
    let sasl = broker.address("SASL_PLAINTEXT");
    let mut admin = plain_login(sasl, "admin", "admin-secret").await;
    let mut alice = plain_login(sasl, "alice", "alice-secret").await;

    // A super user may do anything; alice nothing yet.
    assert_eq!(
        create_topic(&mut admin, "orders").await.topics[0].error_code,
        0
    );
    let refused = create_topic(&mut alice, "alices").await;
    assert_eq!(refused.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        refused.topics[0].error_message.as_deref(),
        Some("Authorization failed.")
    );
    assert!(topic_names(&metadata(&mut alice, None).await).is_empty());
    let named = metadata(&mut alice, Some(&["orders"])).await;
    assert_eq!(named.topics[0].error_code, TOPIC_AUTHORIZATION_FAILED);
    assert_eq!(
        produce(&mut alice, "orders").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    let described = describe_acls(&mut alice, describe_filter(ANY, None, ANY)).await;
    assert_eq!(described.error_code, CLUSTER_AUTHORIZATION_FAILED);
    let created = create_acls(
        &mut alice,
        vec![acl(TOPIC, "orders", LITERAL, "User:alice", ALL_OPS, ALLOW)],
    )
    .await;
    assert_eq!(created.results[0].error_code, CLUSTER_AUTHORIZATION_FAILED);

    // The admin lets alice write to topics starting "ord" and read group "g", but never
    // touch "ord-secret"; a CLUSTER ACL must name kafka-cluster.
    let created = create_acls(
        &mut admin,
        vec![
            acl(TOPIC, "ord", PREFIXED, "User:alice", WRITE, ALLOW),
            acl(GROUP, "g", LITERAL, "User:alice", READ, ALLOW),
            acl(TOPIC, "ord-secret", LITERAL, "User:alice", ALL_OPS, DENY),
            acl(
                CLUSTER,
                "my-cluster",
                LITERAL,
                "User:alice",
                DESCRIBE,
                ALLOW,
            ),
        ],
    )
    .await;
    let codes: Vec<i16> = created.results.iter().map(|r| r.error_code).collect();
    assert_eq!(codes, vec![0, 0, 0, INVALID_REQUEST]);
    assert_eq!(
        created.results[3].error_message.as_deref(),
        Some("The only valid name for the CLUSTER resource is kafka-cluster")
    );
    assert_eq!(
        create_topic(&mut admin, "ord-secret").await.topics[0].error_code,
        0
    );

    // WRITE allows producing and implies DESCRIBE; READ is still refused.
    assert_eq!(produce(&mut alice, "orders").await, 0);
    assert_eq!(
        produce(&mut alice, "ord-secret").await,
        TOPIC_AUTHORIZATION_FAILED
    );
    let all = metadata(&mut alice, None).await;
    assert_eq!(topic_names(&all), vec!["orders".to_string()]);
    assert_eq!(
        all.topics[0].topic_authorized_operations,
        (1 << WRITE) | (1 << DESCRIBE),
        "what alice may do to orders"
    );
    let fetched: FetchResponse = call(
        &mut alice,
        ApiKey::Fetch,
        12,
        &fetch_request("orders", 0, 0),
    )
    .await;
    assert_eq!(
        fetched.responses[0].partitions[0].error_code,
        TOPIC_AUTHORIZATION_FAILED
    );
    assert_eq!(find_group_coordinator(&mut alice, "g").await, 0);
    assert_eq!(
        find_group_coordinator(&mut alice, "other").await,
        GROUP_AUTHORIZATION_FAILED
    );

    // DescribeAcls: every ACL grouped by resource; MATCH finds the ones that apply to a
    // name (the prefix and the literal).
    let every = describe_acls(&mut admin, describe_filter(ANY, None, ANY)).await;
    assert_eq!(every.error_code, 0);
    assert_eq!(every.resources.len(), 3);
    let matching = describe_acls(
        &mut admin,
        describe_filter(TOPIC, Some("ord-secret"), MATCH),
    )
    .await;
    let mut patterns: Vec<(String, i8)> = matching
        .resources
        .iter()
        .map(|r| (r.resource_name.to_string(), r.pattern_type))
        .collect();
    patterns.sort();
    assert_eq!(
        patterns,
        vec![
            ("ord".to_string(), PREFIXED),
            ("ord-secret".to_string(), LITERAL)
        ]
    );

    // The ACLs survive a restart.
    drop((admin, alice));
    broker.stop().await;
    let broker = start_in(dir.path(), &properties()).await;
    let sasl = broker.address("SASL_PLAINTEXT");
    let mut admin = plain_login(sasl, "admin", "admin-secret").await;
    let mut alice = plain_login(sasl, "alice", "alice-secret").await;
    assert_eq!(produce(&mut alice, "orders").await, 0);

    // DeleteAcls answers what each filter matched; alice is refused again.
    let deleted: DeleteAclsResponse = call(
        &mut admin,
        ApiKey::DeleteAcls,
        3,
        &DeleteAclsRequest::default().with_filters(vec![DeleteAclsFilter::default()
            .with_resource_type_filter(TOPIC)
            .with_resource_name_filter(None)
            .with_pattern_type_filter(ANY)
            .with_host_filter(None)
            .with_principal_filter(Some(text("User:alice")))
            .with_operation(WRITE)
            .with_permission_type(ANY)]),
    )
    .await;
    assert_eq!(deleted.filter_results[0].error_code, 0);
    let matched = &deleted.filter_results[0].matching_acls;
    assert_eq!(matched.len(), 1);
    assert_eq!(matched[0].resource_name.as_str(), "ord");
    assert_eq!(matched[0].pattern_type, PREFIXED);
    assert_eq!(
        produce(&mut alice, "orders").await,
        TOPIC_AUTHORIZATION_FAILED
    );

    // An anonymous PLAINTEXT client is no one in particular: it sees nothing.
    let mut anonymous = TcpStream::connect(broker.address("PLAINTEXT"))
        .await
        .unwrap();
    assert!(topic_names(&metadata(&mut anonymous, None).await).is_empty());
    assert_eq!(
        produce(&mut anonymous, "orders").await,
        TOPIC_AUTHORIZATION_FAILED
    );
}

/// Kafka's AclOperation ALL.
const ALL_OPS: i8 = 2;

#[tokio::test]
async fn without_an_authorizer_the_acl_apis_answer_security_disabled() {
    let broker = start(&[("listeners", "PLAINTEXT://127.0.0.1:0")]).await;
    let mut stream = TcpStream::connect(broker.address("PLAINTEXT"))
        .await
        .unwrap();
    let described = describe_acls(&mut stream, describe_filter(ANY, None, ANY)).await;
    assert_eq!(described.error_code, SECURITY_DISABLED);
    assert_eq!(
        described.error_message.as_deref(),
        Some("No Authorizer is configured on the broker")
    );
    let created = create_acls(
        &mut stream,
        vec![acl(TOPIC, "t", LITERAL, "User:alice", READ, ALLOW)],
    )
    .await;
    assert_eq!(created.results[0].error_code, SECURITY_DISABLED);
    // And everything else is allowed, as on Kafka without an authorizer.
    assert_eq!(create_topic(&mut stream, "t").await.topics[0].error_code, 0);
    assert_eq!(produce(&mut stream, "t").await, 0);
}
