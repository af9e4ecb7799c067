//! request_percentage at the router: the time a request keeps a thread busy is the time
//! spent polling its handler (each poll timed; waiting for data, replicas or a long-poll
//! fetch costs nothing, as Kafka counts request-handler thread time and not purgatory
//! time), counted against the client's quota (`quotas.rs`); over it, the answer's
//! throttle_time_ms becomes at least the throttle and the connection is muted for it.
//!
//! The answer is encoded by then, so its throttle_time_ms is written into the bytes: in
//! every response of Kafka's schemas that has the field, it comes first in the body (after
//! OffsetDelete's error code), from the version that added it (`throttle_time_position`,
//! checked against the encoder in the tests). Produce's comes after its partitions: the
//! produce handler counts its own time (from its start to its answer: appends do not wait
//! on anything but the log) and sets the field itself (`times_itself`). Fetch's first part
//! (header and first fields) is patched the same way, and a consumer fetch from a client
//! already over its quota answers no records, as Kafka's does (the fetch handler asks
//! `Broker::request_throttle_now`).

use std::future::Future;
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::ApiKey;
use strand_protocol::{ParsedRequest, ResponsePart};

use crate::router::Outcome;

/// Runs `future`, measuring the time spent inside its polls.
pub async fn timed<F: Future>(future: F) -> (F::Output, Duration) {
    let mut future = std::pin::pin!(future);
    let mut busy = Duration::ZERO;
    let output = std::future::poll_fn(|cx| {
        let started = Instant::now();
        let poll = future.as_mut().poll(cx);
        busy += started.elapsed();
        poll
    })
    .await;
    (output, busy)
}

/// Requests whose time Kafka does not count: the broker's own (follower fetches: Strand's
/// followers fetch at v12, whose body begins with the replica id; transaction markers)
/// and the authentication exchange.
pub fn is_exempt(request: &ParsedRequest) -> bool {
    match request.api_key {
        ApiKey::ApiVersions
        | ApiKey::SaslHandshake
        | ApiKey::SaslAuthenticate
        | ApiKey::WriteTxnMarkers => true,
        ApiKey::Fetch => is_follower_fetch(request),
        _ => false,
    }
}

/// A Fetch from a follower replica: Strand's followers fetch at v12, whose body begins
/// with the replica id (from v15 it is a tagged field, and such fetches count as a
/// consumer's).
pub fn is_follower_fetch(request: &ParsedRequest) -> bool {
    request.api_key == ApiKey::Fetch
        && request.header.request_api_version < 15
        && request.body.len() >= 4
        && i32::from_be_bytes(request.body[..4].try_into().expect("4 bytes")) >= 0
}

/// Requests whose handler counts its own time (Produce).
pub fn times_itself(request: &ParsedRequest) -> bool {
    request.api_key == ApiKey::Produce
}

/// Where throttle_time_ms sits in the body of `api_key`'s response at `version`: its
/// offset, or None where the response has no such field (or Strand does not patch it).
fn throttle_time_position(api_key: ApiKey, version: i16) -> Option<usize> {
    use ApiKey::*;
    let (since, offset) = match api_key {
        Fetch | FindCoordinator | Heartbeat | LeaveGroup | SyncGroup | DescribeGroups
        | ListGroups | DeleteTopics => (1, 0),
        ListOffsets | JoinGroup | CreateTopics | OffsetForLeaderEpoch => (2, 0),
        Metadata | OffsetCommit | OffsetFetch => (3, 0),
        DeleteRecords
        | InitProducerId
        | AddPartitionsToTxn
        | AddOffsetsToTxn
        | EndTxn
        | TxnOffsetCommit
        | DescribeAcls
        | CreateAcls
        | DeleteAcls
        | DescribeConfigs
        | AlterConfigs
        | AlterReplicaLogDirs
        | DescribeLogDirs
        | CreatePartitions
        | DeleteGroups
        | ElectLeaders
        | IncrementalAlterConfigs
        | AlterPartitionReassignments
        | ListPartitionReassignments
        | DescribeClientQuotas
        | AlterClientQuotas
        | DescribeUserScramCredentials
        | AlterUserScramCredentials
        | UpdateFeatures
        | DescribeCluster
        | DescribeProducers
        | UnregisterBroker
        | DescribeTransactions
        | ListTransactions
        | ConsumerGroupHeartbeat
        | ConsumerGroupDescribe
        | DescribeTopicPartitions => (0, 0),
        // After the top-level error code.
        OffsetDelete => (0, 2),
        _ => return None,
    };
    (version >= since).then_some(offset)
}

/// The outcome with its throttle_time_ms raised to at least `ms`.
pub fn with_throttle_time(outcome: Outcome, api_key: ApiKey, version: i16, ms: u32) -> Outcome {
    let Some(offset) = throttle_time_position(api_key, version) else {
        return outcome;
    };
    // Size prefix, correlation id, and in flexible headers an empty tagged-field section.
    let header = 4 + 4 + usize::from(api_key.response_header_version(version) >= 1);
    let at = header + offset;
    match outcome {
        Outcome::Respond(bytes) => Outcome::Respond(patched(bytes, at, ms)),
        Outcome::RespondParts(mut parts) => {
            if let Some(ResponsePart::Bytes(first)) = parts.first_mut() {
                *first = patched(std::mem::take(first), at, ms);
            }
            Outcome::RespondParts(parts)
        }
        Outcome::Deferred(answer) => Outcome::Deferred(Box::pin(async move {
            with_throttle_time(answer.await, api_key, version, ms)
        })),
        other => other,
    }
}

/// `bytes` with the i32 at `at` raised to at least `ms`.
fn patched(bytes: Bytes, at: usize, ms: u32) -> Bytes {
    let Some(field) = bytes.get(at..at + 4) else {
        return bytes;
    };
    let current = i32::from_be_bytes(field.try_into().expect("4 bytes"));
    let wanted = i32::try_from(ms).unwrap_or(i32::MAX);
    if current >= wanted {
        return bytes;
    }
    let mut out = BytesMut::from(&bytes[..]);
    out[at..at + 4].copy_from_slice(&wanted.to_be_bytes());
    out.freeze()
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::*;
    use kafka_protocol::protocol::Encodable;
    use strand_protocol::{encode_response, supported_versions};

    use super::*;

    /// Encodes `body` with a throttle time, then raises it through the patch: the field
    /// the encoder wrote is the one patched, at every version Strand serves.
    fn check<B: Encodable>(api_key: ApiKey, body: impl Fn(i32) -> B) {
        let (min, max) = supported_versions(api_key).expect("served");
        for version in min..=max {
            let patch = |bytes: Bytes, ms| match with_throttle_time(
                Outcome::Respond(bytes),
                api_key,
                version,
                ms,
            ) {
                Outcome::Respond(bytes) => bytes,
                other => panic!("{other:?}"),
            };
            let encoded = encode_response(api_key, version, 7, &body(1_000)).unwrap();
            let raised = patch(encoded.clone(), 5_000);
            let expected = encode_response(api_key, version, 7, &body(5_000)).unwrap();
            if throttle_time_position(api_key, version).is_some() {
                assert_eq!(raised, expected, "{api_key:?} v{version}");
                // Never lowered.
                let kept = patch(expected.clone(), 10);
                assert_eq!(kept, expected, "{api_key:?} v{version}");
            } else {
                assert_eq!(
                    raised, encoded,
                    "{api_key:?} v{version}: no field, unchanged"
                );
                assert_eq!(
                    encoded, expected,
                    "{api_key:?} v{version} has no throttle time"
                );
            }
        }
    }

    #[test]
    fn the_throttle_time_is_written_where_the_encoder_puts_it() {
        macro_rules! check_all {
            ($($key:ident => $response:ty),* $(,)?) => {
                $(check(ApiKey::$key, |ms| <$response>::default().with_throttle_time_ms(ms));)*
            };
        }
        check_all!(
            Fetch => FetchResponse,
            ListOffsets => ListOffsetsResponse,
            Metadata => MetadataResponse,
            OffsetCommit => OffsetCommitResponse,
            OffsetFetch => OffsetFetchResponse,
            FindCoordinator => FindCoordinatorResponse,
            JoinGroup => JoinGroupResponse,
            Heartbeat => HeartbeatResponse,
            LeaveGroup => LeaveGroupResponse,
            SyncGroup => SyncGroupResponse,
            DescribeGroups => DescribeGroupsResponse,
            ListGroups => ListGroupsResponse,
            CreateTopics => CreateTopicsResponse,
            DeleteTopics => DeleteTopicsResponse,
            DeleteRecords => DeleteRecordsResponse,
            InitProducerId => InitProducerIdResponse,
            OffsetForLeaderEpoch => OffsetForLeaderEpochResponse,
            AddPartitionsToTxn => AddPartitionsToTxnResponse,
            AddOffsetsToTxn => AddOffsetsToTxnResponse,
            EndTxn => EndTxnResponse,
            TxnOffsetCommit => TxnOffsetCommitResponse,
            DescribeAcls => DescribeAclsResponse,
            CreateAcls => CreateAclsResponse,
            DeleteAcls => DeleteAclsResponse,
            DescribeConfigs => DescribeConfigsResponse,
            AlterConfigs => AlterConfigsResponse,
            AlterReplicaLogDirs => AlterReplicaLogDirsResponse,
            DescribeLogDirs => DescribeLogDirsResponse,
            CreatePartitions => CreatePartitionsResponse,
            DeleteGroups => DeleteGroupsResponse,
            ElectLeaders => ElectLeadersResponse,
            IncrementalAlterConfigs => IncrementalAlterConfigsResponse,
            AlterPartitionReassignments => AlterPartitionReassignmentsResponse,
            ListPartitionReassignments => ListPartitionReassignmentsResponse,
            OffsetDelete => OffsetDeleteResponse,
            DescribeClientQuotas => DescribeClientQuotasResponse,
            AlterClientQuotas => AlterClientQuotasResponse,
            DescribeUserScramCredentials => DescribeUserScramCredentialsResponse,
            AlterUserScramCredentials => AlterUserScramCredentialsResponse,
            UpdateFeatures => UpdateFeaturesResponse,
            DescribeCluster => DescribeClusterResponse,
            DescribeProducers => DescribeProducersResponse,
            UnregisterBroker => UnregisterBrokerResponse,
            DescribeTransactions => DescribeTransactionsResponse,
            ListTransactions => ListTransactionsResponse,
            ConsumerGroupHeartbeat => ConsumerGroupHeartbeatResponse,
            ConsumerGroupDescribe => ConsumerGroupDescribeResponse,
            DescribeTopicPartitions => DescribeTopicPartitionsResponse,
        );
    }

    #[test]
    fn follower_fetches_are_exempt_and_consumer_fetches_are_not() {
        let request = |replica_id: i32, version: i16| ParsedRequest {
            api_key: ApiKey::Fetch,
            header: RequestHeader::default().with_request_api_version(version),
            body: Bytes::copy_from_slice(&replica_id.to_be_bytes()),
        };
        assert!(is_exempt(&request(2, 12)));
        assert!(!is_exempt(&request(-1, 12)));
        assert!(!is_exempt(&request(-1, 17)));
    }

    #[tokio::test]
    async fn timing_counts_the_polls_and_not_the_waits() {
        let (_, busy) = timed(async {
            tokio::time::sleep(Duration::from_millis(200)).await;
        })
        .await;
        assert!(busy < Duration::from_millis(100), "{busy:?}");
        let (_, busy) = timed(async {
            std::thread::sleep(Duration::from_millis(50));
        })
        .await;
        assert!(busy >= Duration::from_millis(50), "{busy:?}");
    }
}
