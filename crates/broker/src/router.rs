//! Routes a parsed request to its API module after checking that Strand serves that API
//! at that version. What Kafka does for the rest: an unknown API key or an unsupported
//! version of anything but ApiVersions closes the connection; ApiVersions answers
//! UNSUPPORTED_VERSION in its v0 format so the client can downgrade.

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use strand_protocol::{
    decode_body, encode_response, supported_versions, HeaderError, ParsedRequest, ResponsePart,
};

use crate::api;
use crate::broker::Broker;
use crate::metrics::RequestTimes;
use crate::net::RequestContext;
use crate::request_quota;

/// What the connection does after a request.
pub enum Outcome {
    Respond(Bytes),
    /// A response in parts, some of them file regions to send with sendfile (Fetch).
    RespondParts(Vec<ResponsePart>),
    /// acks=0 produce: Kafka sends nothing back.
    NoResponse,
    /// An answer that is ready later (a produce waiting for its data to be synced); it
    /// keeps its place in the connection's response order.
    Deferred(std::pin::Pin<Box<dyn std::future::Future<Output = Outcome> + Send>>),
    /// Close the connection, logging why.
    Close(String),
    /// Send this answer, then close the connection after the delay (a failed
    /// authentication: connection.failed.authentication.delay.ms).
    RespondAndClose(Bytes, std::time::Duration),
}

pub async fn route(
    broker: &Arc<Broker>,
    parsed: Result<ParsedRequest, HeaderError>,
    context: &RequestContext,
) -> Outcome {
    let request_bytes = parsed.as_ref().map_or(0, |request| request.body.len());
    route_measured(broker, parsed, context, Instant::now(), request_bytes)
        .await
        .0
}

/// Routes a request whose body was read at `read`: its outcome, and its times so far
/// (RequestMetrics) for a request that was served.
pub async fn route_measured(
    broker: &Arc<Broker>,
    parsed: Result<ParsedRequest, HeaderError>,
    context: &RequestContext,
    read: Instant,
    request_bytes: usize,
) -> (Outcome, Option<RequestTimes>) {
    let request = match parsed {
        Ok(request) => request,
        Err(error) => return (Outcome::Close(error.to_string()), None),
    };
    let version = request.header.request_api_version;
    let api_key = request.api_key;
    let served = api_key == ApiKey::ApiVersions
        || supported_versions(api_key).is_some_and(|(min, max)| (min..=max).contains(&version));
    if !served {
        return (unserved(&request), None);
    }
    let mut times = broker.metrics.requests.start(
        broker.metrics.recorder(),
        api_key,
        version,
        request_quota::is_follower_fetch(&request),
        read,
        request_bytes,
    );
    if api_key == ApiKey::ApiVersions {
        let outcome = api::api_versions::handle(broker, &request);
        times.handled(times.since_start());
        return (outcome, Some(times));
    }
    // request_percentage: the handler's busy time counts against the client's quota.
    let quota = if request_quota::times_itself(&request) || request_quota::is_exempt(&request) {
        None
    } else {
        let client_id = request.client_id();
        broker.request_quota(context, client_id)
    };
    let (mut outcome, busy) = request_quota::timed(dispatch(broker, request, context)).await;
    times.handled(busy);
    let throttle_ms = quota.map_or(0, |quota| broker.record_request_time(quota, busy));
    if throttle_ms > 0 {
        context.throttle.mute_for(throttle_ms);
        outcome = request_quota::with_throttle_time(outcome, api_key, version, throttle_ms);
    }
    // Every throttle this request caused (the handler's produce, fetch or mutation quota,
    // the request quota above), taken after the last one is set so that none is left for
    // the connection's next request to report (ThrottleTimeMs).
    times.throttled(context.throttle.take_throttle_ms());
    (outcome, Some(times))
}

/// What Kafka does with a request it does not serve: an unknown API key or an unsupported
/// version closes the connection, except ApiVersions (answered by its handler).
fn unserved(request: &ParsedRequest) -> Outcome {
    let version = request.header.request_api_version;
    match supported_versions(request.api_key) {
        None => Outcome::Close(format!("unsupported API {:?}", request.api_key)),
        Some((min, max)) => Outcome::Close(format!(
            "unsupported version {version} of {:?} (serving {min}-{max})",
            request.api_key
        )),
    }
}

/// Hands a served request to its API's handler.
async fn dispatch(
    broker: &Arc<Broker>,
    request: ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    match request.api_key {
        ApiKey::Produce => api::produce::handle(broker, request, context).await,
        ApiKey::Fetch => api::fetch::handle(broker, request, context).await,
        ApiKey::ListOffsets => api::list_offsets::handle(broker, request, context).await,
        ApiKey::Metadata => api::metadata::handle(broker, request, context).await,
        ApiKey::CreateTopics => api::create_topics::handle(broker, request, context).await,
        ApiKey::DeleteTopics => api::delete_topics::handle(broker, request, context).await,
        ApiKey::CreatePartitions => api::create_partitions::handle(broker, request, context).await,
        ApiKey::DescribeConfigs => api::configs::describe(broker, request, context),
        ApiKey::AlterConfigs => api::configs::alter(broker, request, context).await,
        ApiKey::IncrementalAlterConfigs => {
            api::configs::incremental_alter(broker, request, context).await
        }
        ApiKey::InitProducerId => api::init_producer_id::handle(broker, request, context).await,
        ApiKey::FindCoordinator => api::find_coordinator::handle(broker, request, context).await,
        ApiKey::JoinGroup => api::join_group::handle(broker, request, context).await,
        ApiKey::SyncGroup => api::sync_group::handle(broker, request, context).await,
        ApiKey::Heartbeat => api::heartbeat::handle(broker, request, context).await,
        ApiKey::LeaveGroup => api::leave_group::handle(broker, request, context).await,
        ApiKey::OffsetCommit => api::offset_commit::handle(broker, request, context).await,
        ApiKey::OffsetFetch => api::offset_fetch::handle(broker, request, context).await,
        ApiKey::ListGroups => api::list_groups::handle(broker, request, context).await,
        ApiKey::DescribeGroups => api::describe_groups::handle(broker, request, context).await,
        ApiKey::DeleteGroups => api::delete_groups::handle(broker, request, context).await,
        ApiKey::OffsetDelete => api::offset_delete::handle(broker, request, context).await,
        ApiKey::ConsumerGroupHeartbeat => {
            api::consumer_group_heartbeat::handle(broker, request, context).await
        }
        ApiKey::ConsumerGroupDescribe => {
            api::consumer_group_describe::handle(broker, request, context).await
        }
        ApiKey::ShareGroupHeartbeat => {
            api::share_group_heartbeat::handle(broker, request, context).await
        }
        ApiKey::ShareGroupDescribe => {
            api::share_group_describe::handle(broker, request, context).await
        }
        ApiKey::StreamsGroupHeartbeat => {
            api::streams_group_heartbeat::handle(broker, request, context).await
        }
        ApiKey::StreamsGroupDescribe => {
            api::streams_group_describe::handle(broker, request, context).await
        }
        ApiKey::StreamsGroupTopologyDescriptionUpdate => {
            api::streams_group_describe::topology_description_update(broker, request, context).await
        }
        ApiKey::ShareFetch => api::share_fetch::handle(broker, request, context).await,
        ApiKey::ShareAcknowledge => api::share_acknowledge::handle(broker, request, context).await,
        ApiKey::DescribeShareGroupOffsets => {
            api::share_group_offsets::describe(broker, request, context).await
        }
        ApiKey::AlterShareGroupOffsets => {
            api::share_group_offsets::alter(broker, request, context).await
        }
        ApiKey::DeleteShareGroupOffsets => {
            api::share_group_offsets::delete(broker, request, context).await
        }
        ApiKey::InitializeShareGroupState => {
            api::share_group_state::initialize(broker, request, context).await
        }
        ApiKey::ReadShareGroupState => api::share_group_state::read(broker, request, context).await,
        ApiKey::WriteShareGroupState => {
            api::share_group_state::write(broker, request, context).await
        }
        ApiKey::DeleteShareGroupState => {
            api::share_group_state::delete(broker, request, context).await
        }
        ApiKey::ReadShareGroupStateSummary => {
            api::share_group_state::read_summary(broker, request, context).await
        }
        ApiKey::DescribeCluster => api::describe_cluster::handle(broker, request, context).await,
        ApiKey::AddPartitionsToTxn => {
            api::add_partitions_to_txn::handle(broker, request, context).await
        }
        ApiKey::AddOffsetsToTxn => api::add_offsets_to_txn::handle(broker, request, context).await,
        ApiKey::EndTxn => api::end_txn::handle(broker, request, context).await,
        ApiKey::WriteTxnMarkers => api::write_txn_markers::handle(broker, request, context).await,
        ApiKey::TxnOffsetCommit => api::txn_offset_commit::handle(broker, request, context).await,
        ApiKey::DescribeTransactions => {
            api::describe_transactions::handle(broker, request, context).await
        }
        ApiKey::ListTransactions => api::list_transactions::handle(broker, request, context).await,
        ApiKey::DescribeProducers => {
            api::describe_producers::handle(broker, request, context).await
        }
        ApiKey::ElectLeaders => api::elect_leaders::handle(broker, request, context).await,
        ApiKey::DescribeQuorum => api::describe_quorum::handle(broker, request, context).await,
        ApiKey::UpdateFeatures => api::update_features::handle(broker, request, context).await,
        ApiKey::AlterPartitionReassignments => {
            api::alter_partition_reassignments::handle(broker, request, context).await
        }
        ApiKey::ListPartitionReassignments => {
            api::list_partition_reassignments::handle(broker, request, context)
        }
        ApiKey::DeleteRecords => api::delete_records::handle(broker, request, context),
        ApiKey::DescribeLogDirs => api::describe_log_dirs::handle(broker, request, context),
        ApiKey::AlterReplicaLogDirs => {
            api::alter_replica_log_dirs::handle(broker, request, context)
        }
        ApiKey::UnregisterBroker => api::unregister_broker::handle(broker, request, context).await,
        ApiKey::AddRaftVoter => api::raft_voters::add(broker, request, context).await,
        ApiKey::RemoveRaftVoter => api::raft_voters::remove(broker, request, context).await,
        ApiKey::UnregisterController => {
            api::raft_voters::unregister_controller(broker, request, context).await
        }
        ApiKey::DescribeTopicPartitions => {
            api::describe_topic_partitions::handle(broker, request, context)
        }
        ApiKey::OffsetForLeaderEpoch => {
            api::offset_for_leader_epoch::handle(broker, request, context)
        }
        ApiKey::AlterUserScramCredentials => {
            api::user_scram_credentials::alter(broker, request, context).await
        }
        ApiKey::DescribeUserScramCredentials => {
            api::user_scram_credentials::describe(broker, request, context)
        }
        ApiKey::DescribeClientQuotas => api::client_quotas::describe(broker, request, context),
        ApiKey::AlterClientQuotas => api::client_quotas::alter(broker, request, context).await,
        ApiKey::DescribeAcls => api::acls::describe(broker, request, context),
        ApiKey::CreateAcls => api::acls::create(broker, request, context).await,
        ApiKey::DeleteAcls => api::acls::delete(broker, request, context).await,
        ApiKey::SaslHandshake => api::sasl::handshake_out_of_place(request),
        ApiKey::SaslAuthenticate => api::sasl::authenticate_out_of_place(request),
        other => Outcome::Close(format!("API {other:?} is advertised but has no handler")),
    }
}

impl std::fmt::Debug for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Respond(bytes) => write!(f, "Respond({} bytes)", bytes.len()),
            Outcome::RespondParts(parts) => write!(f, "RespondParts({parts:?})"),
            Outcome::NoResponse => write!(f, "NoResponse"),
            Outcome::Deferred(_) => write!(f, "Deferred"),
            Outcome::Close(reason) => write!(f, "Close({reason})"),
            Outcome::RespondAndClose(bytes, linger) => {
                write!(f, "RespondAndClose({} bytes, then {linger:?})", bytes.len())
            }
        }
    }
}

/// Decodes the request body as `T`, or an outcome that closes the connection.
pub fn decode<T: Decodable>(request: &ParsedRequest) -> Result<T, Outcome> {
    decode_body(request.body.clone(), request.header.request_api_version)
        .map_err(|error| Outcome::Close(format!("{:?}: {error}", request.api_key)))
}

/// Encodes `body` as the response to `request`.
pub fn respond<B: Encodable>(request: &ParsedRequest, body: &B) -> Outcome {
    match encode_response(
        request.api_key,
        request.header.request_api_version,
        request.header.correlation_id,
        body,
    ) {
        Ok(bytes) => Outcome::Respond(bytes),
        Err(error) => Outcome::Close(format!(
            "cannot encode {:?} response: {error}",
            request.api_key
        )),
    }
}
