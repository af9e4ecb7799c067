//! `strand consume -g GROUP` as a member of a classic consumer group, the protocol every
//! Kafka broker and client speaks: JoinGroup (again with the member id the broker
//! assigns), the leader's range assignment over every member's subscription, SyncGroup,
//! heartbeats, rejoining when the group rebalances, and LeaveGroup on exit so the group
//! rebalances at once rather than after the session timeout.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use bytes::{Bytes, BytesMut};
use kafka_protocol::messages::consumer_protocol_assignment::TopicPartition as AssignedPartitions;
use kafka_protocol::messages::join_group_request::JoinGroupRequestProtocol;
use kafka_protocol::messages::join_group_response::JoinGroupResponseMember;
use kafka_protocol::messages::leave_group_request::MemberIdentity;
use kafka_protocol::messages::sync_group_request::SyncGroupRequestAssignment;
use kafka_protocol::messages::{
    ApiKey, ConsumerProtocolAssignment, ConsumerProtocolSubscription, HeartbeatRequest,
    HeartbeatResponse, JoinGroupRequest, JoinGroupResponse, LeaveGroupRequest, LeaveGroupResponse,
    SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};

use super::client::{check, error_name, topic_name, Client, RETRY_DEADLINE};
use super::group_offsets::{self, group_id, Offsets};

const PROTOCOL_TYPE: &str = "consumer";
const ASSIGNOR: &str = "range";
/// Kafka's consumer defaults (session.timeout.ms 45 s, heartbeat.interval.ms 3 s); the
/// rebalance timeout is kept under the CLI's request timeout so a JoinGroup that waits
/// for the other members is answered before the CLI gives up on it.
const SESSION_TIMEOUT_MS: i32 = 45_000;
const REBALANCE_TIMEOUT_MS: i32 = 25_000;
const HEARTBEAT_INTERVAL: Duration = Duration::from_secs(3);
/// The highest version of ConsumerProtocolAssignment the CLI decodes.
const ASSIGNMENT_VERSION: i16 = 3;

pub struct GroupMember<'a> {
    client: &'a Client,
    group: String,
    topic: String,
    coordinator: i32,
    member_id: String,
    generation: i32,
    /// The partitions of `topic` this member owns in `generation`.
    pub assignment: Vec<i32>,
    last_heartbeat: Instant,
}

impl<'a> GroupMember<'a> {
    /// Joins `group` subscribed to `topic` and waits for its assignment.
    pub async fn join(client: &'a Client, group: &str, topic: &str) -> anyhow::Result<Self> {
        let coordinator = client.group_coordinator(group).await?;
        let mut member = GroupMember {
            client,
            group: group.to_string(),
            topic: topic.to_string(),
            coordinator,
            member_id: String::new(),
            generation: -1,
            assignment: Vec::new(),
            last_heartbeat: Instant::now(),
        };
        member.rejoin().await?;
        Ok(member)
    }

    pub fn coordinator(&self) -> i32 {
        self.coordinator
    }

    /// JoinGroup then SyncGroup until the member has an assignment in a generation.
    async fn rejoin(&mut self) -> anyhow::Result<()> {
        let deadline = Instant::now() + RETRY_DEADLINE;
        // A group that keeps rebalancing (members coming and going) gets two rebalance
        // timeouts to settle; each JoinGroup may itself wait up to one.
        let settle_by = Instant::now() + 2 * Duration::from_millis(REBALANCE_TIMEOUT_MS as u64);
        loop {
            let code = self.join_and_sync().await?;
            match error_name(code).as_str() {
                "NONE" => {
                    self.last_heartbeat = Instant::now();
                    return Ok(());
                }
                // The broker assigned an id to ask again with (KIP-394), or the group
                // moved on while this member synced: join again.
                "MEMBER_ID_REQUIRED" | "REBALANCE_IN_PROGRESS" | "ILLEGAL_GENERATION"
                    if Instant::now() < settle_by => {}
                "UNKNOWN_MEMBER_ID" if Instant::now() < settle_by => self.member_id.clear(),
                "NOT_COORDINATOR"
                | "COORDINATOR_NOT_AVAILABLE"
                | "COORDINATOR_LOAD_IN_PROGRESS"
                    if Instant::now() < deadline =>
                {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    self.coordinator = self.client.group_coordinator(&self.group).await?;
                }
                _ => check(code, None, &format!("joining group {}", self.group))?,
            }
        }
    }

    /// One JoinGroup and, when it succeeds, one SyncGroup; the first error code met.
    async fn join_and_sync(&mut self) -> anyhow::Result<i16> {
        let version = self.client.version(ApiKey::JoinGroup, 7)?;
        let subscription = encode_versioned(
            &ConsumerProtocolSubscription::default()
                .with_topics(vec![StrBytes::from_string(self.topic.clone())]),
            0,
        )?;
        let request = JoinGroupRequest::default()
            .with_group_id(group_id(&self.group))
            .with_session_timeout_ms(SESSION_TIMEOUT_MS)
            .with_rebalance_timeout_ms(REBALANCE_TIMEOUT_MS)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(StrBytes::from_static_str(PROTOCOL_TYPE))
            .with_protocols(vec![JoinGroupRequestProtocol::default()
                .with_name(StrBytes::from_static_str(ASSIGNOR))
                .with_metadata(subscription)]);
        let joined: JoinGroupResponse = self
            .client
            .call_node(self.coordinator, ApiKey::JoinGroup, version, &request)
            .await?;
        if !joined.member_id.is_empty() {
            self.member_id = joined.member_id.to_string();
        }
        if joined.error_code != 0 {
            return Ok(joined.error_code);
        }
        self.generation = joined.generation_id;
        let assignments = if joined.leader == joined.member_id && !joined.skip_assignment {
            self.assign(&joined.members).await?
        } else {
            Vec::new()
        };
        let version = self.client.version(ApiKey::SyncGroup, 5)?;
        let request = SyncGroupRequest::default()
            .with_group_id(group_id(&self.group))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()))
            .with_protocol_type(Some(StrBytes::from_static_str(PROTOCOL_TYPE)))
            .with_protocol_name(Some(StrBytes::from_static_str(ASSIGNOR)))
            .with_assignments(assignments);
        let synced: SyncGroupResponse = self
            .client
            .call_node(self.coordinator, ApiKey::SyncGroup, version, &request)
            .await?;
        if synced.error_code != 0 {
            return Ok(synced.error_code);
        }
        self.assignment = decode_assignment(&synced.assignment)?
            .remove(&self.topic)
            .unwrap_or_default();
        self.assignment.sort_unstable();
        Ok(0)
    }

    /// The leader's work: every member's share of every topic any member subscribes to.
    async fn assign(
        &self,
        members: &[JoinGroupResponseMember],
    ) -> anyhow::Result<Vec<SyncGroupRequestAssignment>> {
        let mut subscriptions: BTreeMap<String, Vec<String>> = BTreeMap::new();
        for member in members {
            let subscription: ConsumerProtocolSubscription = decode_versioned(&member.metadata, 3)
                .with_context(|| {
                    format!("the subscription of group member {}", member.member_id)
                })?;
            subscriptions.insert(
                member.member_id.to_string(),
                subscription.topics.iter().map(|t| t.to_string()).collect(),
            );
        }
        let mut topics: Vec<String> = subscriptions.values().flatten().cloned().collect();
        topics.sort();
        topics.dedup();
        let metadata = self.client.metadata(Some(&topics)).await?;
        let partitions: BTreeMap<String, i32> = metadata
            .topics
            .iter()
            .filter(|t| t.error_code == 0)
            .filter_map(|t| Some((t.name.as_ref()?.0.to_string(), t.partitions.len() as i32)))
            .collect();
        let plan = range_assignment(&subscriptions, &partitions);
        let mut assignments = Vec::new();
        for (member_id, owned) in plan {
            let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(
                owned
                    .into_iter()
                    .map(|(topic, partitions)| {
                        AssignedPartitions::default()
                            .with_topic(topic_name(&topic))
                            .with_partitions(partitions)
                    })
                    .collect(),
            );
            assignments.push(
                SyncGroupRequestAssignment::default()
                    .with_member_id(StrBytes::from_string(member_id))
                    .with_assignment(encode_versioned(&assignment, 0)?),
            );
        }
        Ok(assignments)
    }

    /// Heartbeats when one is due. When the group is rebalancing, commits `positions`
    /// (still allowed in the old generation), rejoins, and answers true: the assignment
    /// has changed.
    pub async fn keep_alive(&mut self, positions: &Offsets) -> anyhow::Result<bool> {
        if self.last_heartbeat.elapsed() < HEARTBEAT_INTERVAL {
            return Ok(false);
        }
        let version = self.client.version(ApiKey::Heartbeat, 4)?;
        let request = HeartbeatRequest::default()
            .with_group_id(group_id(&self.group))
            .with_generation_id(self.generation)
            .with_member_id(StrBytes::from_string(self.member_id.clone()));
        let response: HeartbeatResponse = self
            .client
            .call_node(self.coordinator, ApiKey::Heartbeat, version, &request)
            .await?;
        self.last_heartbeat = Instant::now();
        match error_name(response.error_code).as_str() {
            "NONE" => Ok(false),
            "REBALANCE_IN_PROGRESS" => {
                self.commit(positions).await;
                self.rejoin().await?;
                Ok(true)
            }
            "ILLEGAL_GENERATION" => {
                self.rejoin().await?;
                Ok(true)
            }
            "UNKNOWN_MEMBER_ID" => {
                // Out of the group (its session expired): join as a new member.
                self.member_id.clear();
                self.rejoin().await?;
                Ok(true)
            }
            "NOT_COORDINATOR" | "COORDINATOR_NOT_AVAILABLE" => {
                self.coordinator = self.client.group_coordinator(&self.group).await?;
                Ok(false)
            }
            _ => {
                check(
                    response.error_code,
                    None,
                    &format!("heartbeat to group {}", self.group),
                )?;
                Ok(false)
            }
        }
    }

    /// Commits the positions of the partitions this member owns; a failure is reported
    /// and not fatal (the records were printed; the next commit covers them).
    pub async fn commit(&self, positions: &Offsets) {
        let owned: Offsets = positions
            .iter()
            .filter(|((topic, partition), _)| {
                *topic == self.topic && self.assignment.contains(partition)
            })
            .map(|(key, offset)| (key.clone(), *offset))
            .collect();
        if let Err(error) = group_offsets::commit(
            self.client,
            self.coordinator,
            &self.group,
            self.generation,
            &self.member_id,
            &owned,
        )
        .await
        {
            eprintln!("strand: warning: {error:#}");
        }
    }

    /// Leaves the group, so it rebalances now rather than after the session timeout.
    pub async fn leave(&self) -> anyhow::Result<()> {
        let version = self.client.version(ApiKey::LeaveGroup, 4)?;
        let mut request = LeaveGroupRequest::default().with_group_id(group_id(&self.group));
        if version >= 3 {
            request = request.with_members(vec![MemberIdentity::default()
                .with_member_id(StrBytes::from_string(self.member_id.clone()))]);
        } else {
            request = request.with_member_id(StrBytes::from_string(self.member_id.clone()));
        }
        let response: LeaveGroupResponse = self
            .client
            .call_node(self.coordinator, ApiKey::LeaveGroup, version, &request)
            .await?;
        check(
            response.error_code,
            None,
            &format!("leaving group {}", self.group),
        )?;
        for member in response.members {
            check(
                member.error_code,
                None,
                &format!("leaving group {}", self.group),
            )?;
        }
        Ok(())
    }
}

/// Kafka's RangeAssignor: for each topic, its partitions in order split into contiguous
/// ranges over the subscribed members sorted by id, the first ones taking one more when
/// the division is uneven. member id -> topic -> partitions (every member listed).
pub fn range_assignment(
    subscriptions: &BTreeMap<String, Vec<String>>,
    partitions: &BTreeMap<String, i32>,
) -> BTreeMap<String, BTreeMap<String, Vec<i32>>> {
    let mut plan: BTreeMap<String, BTreeMap<String, Vec<i32>>> = subscriptions
        .keys()
        .map(|member| (member.clone(), BTreeMap::new()))
        .collect();
    for (topic, &count) in partitions {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, topics)| topics.contains(topic))
            .map(|(member, _)| member)
            .collect();
        if members.is_empty() {
            continue;
        }
        let (share, extra) = (count / members.len() as i32, count % members.len() as i32);
        let mut next = 0;
        for (index, member) in members.into_iter().enumerate() {
            let take = share + i32::from((index as i32) < extra);
            plan.get_mut(member)
                .unwrap()
                .insert(topic.clone(), (next..next + take).collect());
            next += take;
        }
    }
    plan
}

/// topic -> partitions in an encoded ConsumerProtocolAssignment (empty bytes: nothing).
pub fn decode_assignment(bytes: &[u8]) -> anyhow::Result<BTreeMap<String, Vec<i32>>> {
    if bytes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let assignment: ConsumerProtocolAssignment = decode_versioned(bytes, ASSIGNMENT_VERSION)?;
    Ok(assignment
        .assigned_partitions
        .into_iter()
        .map(|owned| (owned.topic.0.to_string(), owned.partitions))
        .collect())
}

/// The consumer protocol's framing: an i16 version, then the message at that version
/// (a newer version than the CLI knows is read as the newest it knows, as Kafka does).
fn decode_versioned<M: Decodable>(bytes: &[u8], newest: i16) -> anyhow::Result<M> {
    anyhow::ensure!(
        bytes.len() >= 2,
        "a consumer protocol message of {} bytes",
        bytes.len()
    );
    let version = i16::from_be_bytes([bytes[0], bytes[1]]).min(newest);
    let mut body = Bytes::copy_from_slice(&bytes[2..]);
    M::decode(&mut body, version)
}

fn encode_versioned<M: Encodable>(message: &M, version: i16) -> anyhow::Result<Bytes> {
    let mut bytes = BytesMut::new();
    bytes.extend_from_slice(&version.to_be_bytes());
    message.encode(&mut bytes, version)?;
    Ok(bytes.freeze())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn range_assignment_splits_like_kafkas_range_assignor() {
        let subscriptions = BTreeMap::from([
            ("b".to_string(), vec!["t".to_string()]),
            ("a".to_string(), vec!["t".to_string(), "u".to_string()]),
            ("c".to_string(), vec!["t".to_string()]),
        ]);
        let partitions = BTreeMap::from([("t".to_string(), 7), ("u".to_string(), 2)]);
        let plan = range_assignment(&subscriptions, &partitions);
        assert_eq!(plan["a"]["t"], [0, 1, 2]);
        assert_eq!(plan["b"]["t"], [3, 4]);
        assert_eq!(plan["c"]["t"], [5, 6]);
        assert_eq!(plan["a"]["u"], [0, 1]);
        assert!(!plan["b"].contains_key("u"));
    }

    #[test]
    fn assignments_round_trip_through_the_consumer_protocol() {
        let assignment = ConsumerProtocolAssignment::default().with_assigned_partitions(vec![
            AssignedPartitions::default()
                .with_topic(topic_name("t"))
                .with_partitions(vec![2, 3]),
        ]);
        let bytes = encode_versioned(&assignment, 0).unwrap();
        assert_eq!(&bytes[..2], &[0, 0]);
        assert_eq!(decode_assignment(&bytes).unwrap()["t"], [2, 3]);
        assert!(decode_assignment(&[]).unwrap().is_empty());
        assert!(decode_assignment(&[0]).is_err());
    }
}
