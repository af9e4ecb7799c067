//! One consumer group under the KIP-848 protocol (ConsumerGroupHeartbeat, GA in Kafka 4.0):
//! the broker computes the assignment with a server-side assignor (uniform or range) and
//! moves each member to it incrementally: a member first gives up the partitions it must
//! lose (it keeps its epoch until it reports them revoked), then advances to the target
//! epoch and receives the partitions no other member still holds. No stop-the-world
//! rebalance. A plain state machine: time and topic metadata are passed in.

use std::collections::{BTreeMap, BTreeSet};

use strand_types::error_code;

/// group.consumer.* settings.
#[derive(Debug, Clone, Copy)]
pub struct ConsumerGroupLimits {
    /// group.consumer.session.timeout.ms
    pub session_timeout_ms: i32,
    /// group.consumer.heartbeat.interval.ms
    pub heartbeat_interval_ms: i32,
    /// group.consumer.max.size
    pub max_size: usize,
}

impl Default for ConsumerGroupLimits {
    fn default() -> Self {
        ConsumerGroupLimits {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 1_000,
        }
    }
}

pub const ASSIGNOR_UNIFORM: &str = "uniform";
pub const ASSIGNOR_RANGE: &str = "range";
pub const LEAVE_EPOCH: i32 = -1;
pub const STATIC_LEAVE_EPOCH: i32 = -2;

/// topic -> partitions
pub type Assignment = BTreeMap<String, BTreeSet<i32>>;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumerMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topics: Vec<String>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// Partitions the member may own now.
    pub assigned: Assignment,
    /// Partitions the member must give up before it advances.
    pub revoking: Assignment,
    /// The member epoch at which each partition it owns or is giving up was assigned to
    /// it (Kafka 4.4's assignment epochs): an offset commit from an older member epoch
    /// is accepted for partitions assigned at or before that epoch.
    pub assigned_at: BTreeMap<(String, i32), i32>,
    pub session_deadline_ms: i64,
    pub revocation_deadline_ms: Option<i64>,
}

/// A heartbeat, decoded (topic ids already resolved to names by the caller).
#[derive(Debug, Clone)]
pub struct Heartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub subscribed_topics: Option<Vec<String>>,
    pub subscribed_regex: Option<String>,
    pub server_assignor: Option<String>,
    /// What the member says it owns (None: unchanged since the last heartbeat).
    pub owned: Option<Assignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Always sent: the client ignores an assignment equal to the one it has.
    pub assignment: Option<Assignment>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeartbeatError {
    pub code: i16,
    pub message: String,
}

/// UNKNOWN_MEMBER_ID with Kafka's message.
fn unknown_member(member_id: &str, group_id: &str) -> HeartbeatError {
    error(
        error_code::UNKNOWN_MEMBER_ID,
        format!("Member {member_id} is not a member of group {group_id}."),
    )
}

fn error(code: i16, message: impl Into<String>) -> HeartbeatError {
    HeartbeatError {
        code,
        message: message.into(),
    }
}

/// Kafka's consumer group states.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConsumerGroupState {
    Empty,
    Assigning,
    Reconciling,
    Stable,
}

impl ConsumerGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ConsumerGroupState::Empty => "Empty",
            ConsumerGroupState::Assigning => "Assigning",
            ConsumerGroupState::Reconciling => "Reconciling",
            ConsumerGroupState::Stable => "Stable",
        }
    }
}

/// Partition counts of the topics the group's members may subscribe to, and their ids
/// (the group's records name partitions by topic id, as Kafka's do).
pub trait TopicView {
    fn partitions(&self, topic: &str) -> Option<i32>;
    fn names(&self) -> Vec<String>;
    fn id(&self, topic: &str) -> Option<uuid::Uuid>;
    fn name_of(&self, id: uuid::Uuid) -> Option<String>;
}

#[derive(Debug, Clone)]
pub struct ConsumerGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ConsumerMember>,
    pub target: BTreeMap<String, Assignment>,
    pub static_members: BTreeMap<String, String>,
    /// Partition counts the target was computed for (a change triggers a new target).
    subscribed_partition_counts: BTreeMap<String, i32>,
    limits: ConsumerGroupLimits,
}

impl ConsumerGroup {
    /// New settings (group configs changed): sessions renewed from now on use them.
    pub fn set_limits(&mut self, limits: ConsumerGroupLimits) {
        self.limits = limits;
    }

    pub fn new(group_id: &str, limits: ConsumerGroupLimits) -> ConsumerGroup {
        ConsumerGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: BTreeMap::new(),
            subscribed_partition_counts: BTreeMap::new(),
            limits,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    /// After a load from the log: every member has a session from now, and the target
    /// is taken to stand for the partition counts it covers (every partition of a
    /// subscribed topic is in it), so a topic created or grown since gets a new target
    /// at the next refresh.
    pub fn restored(&mut self, now_ms: i64) {
        for member in self.members.values_mut() {
            member.session_deadline_ms = now_ms + self.limits.session_timeout_ms as i64;
        }
        let mut counts: BTreeMap<String, i32> = BTreeMap::new();
        for (topic, partitions) in self.target.values().flatten() {
            if let Some(last) = partitions.last() {
                let count = counts.entry(topic.clone()).or_default();
                *count = (*count).max(last + 1);
            }
        }
        self.subscribed_partition_counts = counts;
    }

    pub fn state(&self) -> ConsumerGroupState {
        if self.members.is_empty() {
            ConsumerGroupState::Empty
        } else if self.assignment_epoch < self.group_epoch {
            ConsumerGroupState::Assigning
        } else if self.members.values().any(|m| {
            m.member_epoch != self.assignment_epoch
                || !m.revoking.is_empty()
                || Some(&m.assigned) != self.target.get(&m.member_id)
        }) {
            ConsumerGroupState::Reconciling
        } else {
            ConsumerGroupState::Stable
        }
    }

    pub fn assignor(&self) -> &'static str {
        if self
            .members
            .values()
            .filter_map(|m| m.server_assignor.as_deref())
            .any(|a| a == ASSIGNOR_RANGE)
        {
            ASSIGNOR_RANGE
        } else {
            ASSIGNOR_UNIFORM
        }
    }

    /// Topics any member subscribes to (names and regex matches).
    pub fn subscribed_topics(&self, topics: &dyn TopicView) -> BTreeSet<String> {
        let names = topics.names();
        let mut out = BTreeSet::new();
        for member in self.members.values() {
            out.extend(member_topics(member, &names));
        }
        out
    }

    pub fn heartbeat(
        &mut self,
        request: Heartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
        new_member_id: &mut dyn FnMut() -> String,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        if let Some(assignor) = &request.server_assignor {
            if assignor != ASSIGNOR_UNIFORM && assignor != ASSIGNOR_RANGE {
                return Err(error(
                    error_code::UNSUPPORTED_ASSIGNOR,
                    format!("Assignor {assignor} is not supported; use uniform or range."),
                ));
            }
        }
        if let Some(regex) = &request.subscribed_regex {
            if regex::Regex::new(regex).is_err() {
                return Err(error(
                    error_code::INVALID_REGULAR_EXPRESSION,
                    format!("SubscribedTopicRegex {regex} is not a valid regular expression."),
                ));
            }
        }
        match request.member_epoch {
            STATIC_LEAVE_EPOCH => {
                // Kafka's checks: a static member, known by its instance id, speaking
                // for the member that holds it.
                let Some(instance) = &request.instance_id else {
                    return Err(error(
                        error_code::INVALID_REQUEST,
                        "InstanceId can't be null.",
                    ));
                };
                match self.static_members.get(instance) {
                    None => {
                        return Err(error(
                            error_code::UNKNOWN_MEMBER_ID,
                            format!("Instance id {instance} is unknown."),
                        ))
                    }
                    Some(holder) if *holder != request.member_id => {
                        return Err(error(
                            error_code::FENCED_INSTANCE_ID,
                            format!(
                                "Static member {} with instance id {instance} was fenced by member {holder}.",
                                request.member_id
                            ),
                        ))
                    }
                    Some(_) => {}
                }
                // A static member leaving for a while (a restart): it stays, at epoch -2,
                // with its partitions and without a rebalance, until it comes back under
                // its instance id or its session runs out (Kafka's
                // consumerGroupStaticMemberGroupLeave).
                let Some(member) = self.members.get_mut(&request.member_id) else {
                    return Err(unknown_member(&request.member_id, &self.group_id));
                };
                member.member_epoch = STATIC_LEAVE_EPOCH;
                member.revoking = Assignment::new();
                member.revocation_deadline_ms = None;
                Ok(HeartbeatResult {
                    member_id: request.member_id.clone(),
                    member_epoch: STATIC_LEAVE_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                })
            }
            LEAVE_EPOCH => {
                let member_id = request.member_id.clone();
                if self.members.contains_key(&member_id) {
                    self.remove_member(&member_id, topics);
                }
                Ok(HeartbeatResult {
                    member_id,
                    member_epoch: request.member_epoch,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                })
            }
            0 => self.join(request, now_ms, topics, new_member_id),
            epoch if epoch > 0 => self.existing(request, now_ms, topics),
            other => Err(error(
                error_code::INVALID_REQUEST,
                format!("Invalid member epoch {other}."),
            )),
        }
    }

    fn join(
        &mut self,
        request: Heartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
        new_member_id: &mut dyn FnMut() -> String,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        if request.rebalance_timeout_ms < 0 {
            return Err(error(
                error_code::INVALID_REQUEST,
                "RebalanceTimeoutMs must be provided in first request.",
            ));
        }
        if request.subscribed_topics.is_none() && request.subscribed_regex.is_none() {
            return Err(error(
                error_code::INVALID_REQUEST,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            ));
        }
        if request.owned.as_ref().is_none_or(|owned| !owned.is_empty()) {
            return Err(error(
                error_code::INVALID_REQUEST,
                "TopicPartitions must be empty when (re-)joining.",
            ));
        }
        let member_id = if request.member_id.is_empty() {
            new_member_id()
        } else {
            request.member_id.clone()
        };
        if let Some(instance) = &request.instance_id {
            if let Some(existing) = self.static_members.get(instance).cloned() {
                let holder = self
                    .members
                    .get(&existing)
                    .filter(|_| existing != member_id);
                let active = |m: &ConsumerMember| {
                    m.member_epoch != STATIC_LEAVE_EPOCH && m.session_deadline_ms > now_ms
                };
                if holder.is_some_and(active) {
                    // Another process still holds the instance id: it has not left (-2)
                    // and its session has not run out (one past its deadline that the
                    // timer has not removed yet counts as out). Kafka's
                    // throwIfInstanceIdIsUnreleased, fatal to the client: two live
                    // processes configured alike must not take the instance from each
                    // other in turn.
                    return Err(error(
                        error_code::UNRELEASED_INSTANCE_ID,
                        format!("Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by {existing} member."),
                    ));
                }
                if holder.is_some() {
                    // A static member back after its temporary leave replaces its previous
                    // incarnation and keeps its assignment (Kafka's static membership for
                    // the new protocol).
                    let mut previous = self.members.remove(&existing).expect("checked");
                    previous.member_id = member_id.clone();
                    previous.member_epoch = 0;
                    previous.session_deadline_ms = now_ms + self.limits.session_timeout_ms as i64;
                    if let Some(target) = self.target.remove(&existing) {
                        self.target.insert(member_id.clone(), target);
                    }
                    self.members.insert(member_id.clone(), previous);
                }
            }
        }
        if !self.members.contains_key(&member_id) && self.members.len() >= self.limits.max_size {
            return Err(error(
                error_code::GROUP_MAX_SIZE_REACHED,
                format!(
                    "The consumer group has reached its maximum capacity of {} members.",
                    self.limits.max_size
                ),
            ));
        }
        // Only once admitted: a refused join leaves no instance id pointing at nobody.
        if let Some(instance) = &request.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        let existing = self.members.get(&member_id).cloned();
        // What the member held before, kept only by a static member taking over: a
        // dynamic member (re)joining owns nothing (it lost its partitions when it was
        // fenced, or never heard of them), and keeping its old ones would answer it
        // partitions at epoch 0, whose next heartbeat (epoch 0, owning them) is
        // INVALID_REQUEST: a member stuck for good (found by the simulator).
        let kept = existing.as_ref().filter(|_| request.instance_id.is_some());
        let member = ConsumerMember {
            member_id: member_id.clone(),
            instance_id: request.instance_id.clone(),
            rack_id: request.rack_id.clone(),
            client_id: request.client_id.clone(),
            client_host: request.client_host.clone(),
            member_epoch: 0,
            previous_member_epoch: -1,
            rebalance_timeout_ms: request.rebalance_timeout_ms,
            subscribed_topics: request.subscribed_topics.clone().unwrap_or_default(),
            subscribed_regex: request.subscribed_regex.clone(),
            server_assignor: request.server_assignor.clone(),
            assigned: kept.map(|m| m.assigned.clone()).unwrap_or_default(),
            revoking: Assignment::new(),
            assigned_at: kept.map(|m| m.assigned_at.clone()).unwrap_or_default(),
            session_deadline_ms: now_ms + self.limits.session_timeout_ms as i64,
            revocation_deadline_ms: None,
        };
        let changed = existing.as_ref().is_none_or(|m| {
            m.subscribed_topics != member.subscribed_topics
                || m.subscribed_regex != member.subscribed_regex
        });
        self.members.insert(member_id.clone(), member);
        if changed {
            self.group_epoch += 1;
        }
        self.refresh_target(topics);
        self.reconcile(&member_id, Some(&Assignment::new()), now_ms)
    }

    fn existing(
        &mut self,
        request: Heartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        let Some(member) = self.members.get_mut(&request.member_id) else {
            return Err(unknown_member(&request.member_id, &self.group_id));
        };
        // A static member that left for a while (epoch -2) comes back only as a new
        // process joining under its instance id: every epoch is above its -2 (Kafka).
        if member.member_epoch == STATIC_LEAVE_EPOCH
            || (request.member_epoch != member.member_epoch
                && request.member_epoch != member.previous_member_epoch)
        {
            return Err(error(
                error_code::FENCED_MEMBER_EPOCH,
                format!("The consumer group member has a member epoch ({}) different from the one known by the group coordinator ({}).", request.member_epoch, member.member_epoch),
            ));
        }
        member.session_deadline_ms = now_ms + self.limits.session_timeout_ms as i64;
        member.client_host = request.client_host.clone();
        if request.rebalance_timeout_ms >= 0 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if request.server_assignor.is_some() {
            member.server_assignor = request.server_assignor.clone();
        }
        let mut changed = false;
        if let Some(subscribed) = &request.subscribed_topics {
            if *subscribed != member.subscribed_topics {
                member.subscribed_topics = subscribed.clone();
                changed = true;
            }
        }
        if request.subscribed_regex.is_some() && request.subscribed_regex != member.subscribed_regex
        {
            member.subscribed_regex = request.subscribed_regex.clone();
            changed = true;
        }
        if changed {
            self.group_epoch += 1;
        }
        self.refresh_target(topics);
        self.reconcile(&request.member_id, request.owned.as_ref(), now_ms)
    }

    /// Recomputes the target assignment when the group epoch moved past it, or when a
    /// subscribed topic's partition count changed.
    fn refresh_target(&mut self, topics: &dyn TopicView) {
        let subscribed = self.subscribed_topics(topics);
        let counts: BTreeMap<String, i32> = subscribed
            .iter()
            .filter_map(|t| topics.partitions(t).map(|n| (t.clone(), n)))
            .collect();
        if counts != self.subscribed_partition_counts {
            self.subscribed_partition_counts = counts.clone();
            if !self.members.is_empty() {
                self.group_epoch = self.group_epoch.max(self.assignment_epoch + 1);
            }
        }
        if self.assignment_epoch == self.group_epoch {
            return;
        }
        let names = topics.names();
        let subscriptions: BTreeMap<String, BTreeSet<String>> = self
            .members
            .values()
            .map(|m| {
                (
                    m.member_id.clone(),
                    member_topics(m, &names)
                        .into_iter()
                        .filter(|t| counts.contains_key(t))
                        .collect(),
                )
            })
            .collect();
        self.target = match self.assignor() {
            ASSIGNOR_RANGE => assign_range(&subscriptions, &counts),
            _ => assign_uniform(&subscriptions, &counts, &self.target),
        };
        self.assignment_epoch = self.group_epoch;
    }

    /// Moves one member toward its target (Kafka's CurrentAssignmentBuilder, simplified).
    fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Assignment>,
        now_ms: i64,
    ) -> Result<HeartbeatResult, HeartbeatError> {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        // Partitions other members hold or are still giving up.
        let held_by_others: BTreeSet<(String, i32)> = self
            .members
            .values()
            .filter(|m| m.member_id != member_id)
            .flat_map(|m| pairs(&m.assigned).chain(pairs(&m.revoking)))
            .collect();
        let assignment_epoch = self.assignment_epoch;
        let member = self
            .members
            .get_mut(member_id)
            .expect("the caller checked the member");
        if !member.revoking.is_empty() {
            let still_owned = owned.is_some_and(|owned| {
                pairs(&member.revoking)
                    .any(|(t, p)| owned.get(&t).is_some_and(|ps| ps.contains(&p)))
            });
            if still_owned || owned.is_none() {
                member.settle_assignment_epochs();
                return Ok(result(member, self.limits.heartbeat_interval_ms));
            }
            member.revoking.clear();
            member.revocation_deadline_ms = None;
        }
        let to_revoke: Assignment = difference(&member.assigned, &target);
        // As Kafka's CurrentAssignmentBuilder (ownsRevokedPartitions): partitions to give
        // up that the member says it does not own (a member rejoining owns nothing) are
        // gone at once, and it moves on to the target epoch.
        let owns_revoked = owned.is_none_or(|owned| {
            pairs(&to_revoke).any(|(t, p)| owned.get(&t).is_some_and(|ps| ps.contains(&p)))
        });
        if !to_revoke.is_empty() && !owns_revoked {
            member.assigned = intersection(&member.assigned, &target);
        }
        if !to_revoke.is_empty() && owns_revoked {
            member.assigned = intersection(&member.assigned, &target);
            member.revoking = to_revoke;
            member.revocation_deadline_ms =
                Some(now_ms + member.rebalance_timeout_ms.max(0) as i64);
            member.settle_assignment_epochs();
            return Ok(result(member, self.limits.heartbeat_interval_ms));
        }
        if member.member_epoch != assignment_epoch {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = assignment_epoch;
        }
        for (topic, partitions) in &target {
            for partition in partitions {
                if !held_by_others.contains(&(topic.clone(), *partition)) {
                    member
                        .assigned
                        .entry(topic.clone())
                        .or_default()
                        .insert(*partition);
                }
            }
        }
        member.settle_assignment_epochs();
        Ok(result(member, self.limits.heartbeat_interval_ms))
    }

    fn remove_member(&mut self, member_id: &str, topics: &dyn TopicView) {
        if let Some(member) = self.members.remove(member_id) {
            if let Some(instance) = &member.instance_id {
                if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                    self.static_members.remove(instance);
                }
            }
            self.target.remove(member_id);
            self.group_epoch += 1;
            self.refresh_target(topics);
        }
    }

    /// Timers: silent members (session timeout) and members that did not give up their
    /// partitions within their rebalance timeout are removed.
    pub fn tick(&mut self, now_ms: i64, topics: &dyn TopicView) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline_ms <= now_ms
                    || m.revocation_deadline_ms.is_some_and(|d| d <= now_ms)
            })
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &expired {
            tracing::info!(group = %self.group_id, member = %member_id, "consumer group member timed out; removing it");
            self.remove_member(member_id, topics);
        }
        // Topic changes (new partitions) reach the target even without heartbeats.
        self.refresh_target(topics);
        expired
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| [Some(m.session_deadline_ms), m.revocation_deadline_ms])
            .flatten()
            .min()
    }

    /// Kafka 4.4's rule for a member's offset commit (ConsumerGroup.validateOffsetCommit):
    /// its current epoch commits anything; a newer one is STALE_MEMBER_EPOCH; an older one
    /// (a commit sent before the member learned of its new epoch) is accepted only if
    /// every partition it commits was assigned to the member at or before that epoch and
    /// is still owned or being given up, else the whole commit is STALE_MEMBER_EPOCH.
    pub fn check_commit(
        &self,
        member_id: &str,
        member_epoch: i32,
        partitions: &[(&str, i32)],
    ) -> Result<(), i16> {
        let Some(member) = self.members.get(member_id) else {
            return Err(error_code::UNKNOWN_MEMBER_ID);
        };
        if member_epoch == member.member_epoch {
            return Ok(());
        }
        if member_epoch > member.member_epoch {
            return Err(error_code::STALE_MEMBER_EPOCH);
        }
        let assigned_by_then = |&(topic, partition): &(&str, i32)| {
            member
                .assigned_at
                .get(&(topic.to_string(), partition))
                .is_some_and(|&assigned| member_epoch >= assigned)
        };
        if partitions.iter().all(assigned_by_then) {
            Ok(())
        } else {
            Err(error_code::STALE_MEMBER_EPOCH)
        }
    }
}

impl ConsumerMember {
    /// Keeps `assigned_at` to the partitions owned or being given up; those just
    /// assigned take the member's current epoch.
    pub(crate) fn settle_assignment_epochs(&mut self) {
        let held: BTreeSet<(String, i32)> =
            pairs(&self.assigned).chain(pairs(&self.revoking)).collect();
        self.assigned_at.retain(|key, _| held.contains(key));
        for key in held {
            self.assigned_at.entry(key).or_insert(self.member_epoch);
        }
    }
}

fn result(member: &ConsumerMember, heartbeat_interval_ms: i32) -> HeartbeatResult {
    HeartbeatResult {
        member_id: member.member_id.clone(),
        member_epoch: member.member_epoch,
        heartbeat_interval_ms,
        assignment: Some(member.assigned.clone()),
    }
}

fn member_topics(member: &ConsumerMember, all_names: &[String]) -> BTreeSet<String> {
    let mut topics: BTreeSet<String> = member.subscribed_topics.iter().cloned().collect();
    if let Some(regex) = member
        .subscribed_regex
        .as_deref()
        .and_then(|r| regex::Regex::new(&format!("^(?:{r})$")).ok())
    {
        // Every topic the regex matches, internal ones included, as Kafka resolves it.
        topics.extend(
            all_names
                .iter()
                .filter(|name| regex.is_match(name))
                .cloned(),
        );
    }
    topics
}

fn pairs(assignment: &Assignment) -> impl Iterator<Item = (String, i32)> + '_ {
    assignment
        .iter()
        .flat_map(|(topic, partitions)| partitions.iter().map(move |p| (topic.clone(), *p)))
}

fn difference(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (topic, partitions) in a {
        let kept: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| !b.get(topic).is_some_and(|bs| bs.contains(p)))
            .copied()
            .collect();
        if !kept.is_empty() {
            out.insert(topic.clone(), kept);
        }
    }
    out
}

fn intersection(a: &Assignment, b: &Assignment) -> Assignment {
    let mut out = Assignment::new();
    for (topic, partitions) in a {
        let kept: BTreeSet<i32> = partitions
            .iter()
            .filter(|p| b.get(topic).is_some_and(|bs| bs.contains(p)))
            .copied()
            .collect();
        if !kept.is_empty() {
            out.insert(topic.clone(), kept);
        }
    }
    out
}

/// The range assignor: per topic, consecutive ranges to the subscribed members sorted by
/// member id; the first `partitions % members` get one extra.
pub fn assign_range(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let mut target: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    for (topic, count) in counts {
        let members: Vec<&String> = subscriptions
            .iter()
            .filter(|(_, t)| t.contains(topic))
            .map(|(m, _)| m)
            .collect();
        if members.is_empty() {
            continue;
        }
        let per = *count as usize / members.len();
        let extra = *count as usize % members.len();
        let mut next = 0i32;
        for (index, member) in members.iter().enumerate() {
            let take = per + usize::from(index < extra);
            let partitions: BTreeSet<i32> = (next..next + take as i32).collect();
            next += take as i32;
            if !partitions.is_empty() {
                target
                    .get_mut(*member)
                    .expect("listed")
                    .insert(topic.clone(), partitions);
            }
        }
    }
    target
}

/// The uniform assignor: every subscribed partition to one eligible member, balancing
/// counts, and keeping a partition with its previous owner while that owner is under
/// its fair share (stickiness cuts the partitions that move).
pub fn assign_uniform(
    subscriptions: &BTreeMap<String, BTreeSet<String>>,
    counts: &BTreeMap<String, i32>,
    previous: &BTreeMap<String, Assignment>,
) -> BTreeMap<String, Assignment> {
    let mut target: BTreeMap<String, Assignment> = subscriptions
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut load: BTreeMap<&String, usize> = subscriptions.keys().map(|m| (m, 0)).collect();
    let previous_owner: BTreeMap<(String, i32), &String> = previous
        .iter()
        .flat_map(|(member, assignment)| pairs(assignment).map(move |tp| (tp, member)))
        .collect();
    let all: Vec<(String, i32)> = counts
        .iter()
        .flat_map(|(t, n)| (0..*n).map(move |p| (t.clone(), p)))
        .collect();
    let eligible_members = |topic: &str| -> Vec<&String> {
        subscriptions
            .iter()
            .filter(|(_, t)| t.contains(topic))
            .map(|(m, _)| m)
            .collect()
    };
    // Fair share: the partitions a member's subscriptions cover, spread over the members
    // sharing them (exact for identical subscriptions, a good bound otherwise).
    let share: BTreeMap<&String, usize> = subscriptions
        .iter()
        .map(|(member, topics)| {
            let partitions: usize = topics
                .iter()
                .map(|t| counts.get(t).copied().unwrap_or(0) as usize)
                .sum();
            let sharers = subscriptions
                .values()
                .filter(|other| !other.is_disjoint(topics))
                .count()
                .max(1);
            (member, partitions.div_ceil(sharers))
        })
        .collect();
    let mut unassigned = Vec::new();
    for (topic, partition) in &all {
        match previous_owner.get(&(topic.clone(), *partition)) {
            Some(owner)
                if subscriptions.get(*owner).is_some_and(|t| t.contains(topic))
                    && load[owner] < share[owner] =>
            {
                target
                    .get_mut(*owner)
                    .expect("member")
                    .entry(topic.clone())
                    .or_default()
                    .insert(*partition);
                *load.get_mut(owner).expect("member") += 1;
            }
            _ => unassigned.push((topic.clone(), *partition)),
        }
    }
    for (topic, partition) in unassigned {
        let Some(member) = eligible_members(&topic)
            .into_iter()
            .min_by_key(|m| (load[m], (*m).clone()))
        else {
            continue;
        };
        target
            .get_mut(member)
            .expect("member")
            .entry(topic)
            .or_default()
            .insert(partition);
        *load.get_mut(member).expect("member") += 1;
    }
    target
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Topics(Vec<(&'static str, i32)>);
    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            self.0.iter().find(|(t, _)| *t == topic).map(|(_, n)| *n)
        }
        fn names(&self) -> Vec<String> {
            self.0.iter().map(|(t, _)| t.to_string()).collect()
        }
        fn id(&self, _: &str) -> Option<uuid::Uuid> {
            None
        }
        fn name_of(&self, _: uuid::Uuid) -> Option<String> {
            None
        }
    }

    fn join(member: &str, topics: &[&str]) -> Heartbeat {
        Heartbeat {
            member_id: member.to_string(),
            member_epoch: 0,
            instance_id: None,
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            rebalance_timeout_ms: 30_000,
            subscribed_topics: Some(topics.iter().map(|t| t.to_string()).collect()),
            subscribed_regex: None,
            server_assignor: None,
            owned: Some(Assignment::new()),
        }
    }

    fn beat(member: &str, epoch: i32, owned: &Assignment) -> Heartbeat {
        Heartbeat {
            member_epoch: epoch,
            subscribed_topics: None,
            owned: Some(owned.clone()),
            ..join(member, &[])
        }
    }

    fn count(assignment: &Assignment) -> usize {
        assignment.values().map(BTreeSet::len).sum()
    }

    fn no_ids() -> impl FnMut() -> String {
        || unreachable!("clients send their own member ids")
    }

    /// a (joining as `a_join` says) owns all six partitions; b joins, and the target
    /// moves half of them to b before a hears; a, fenced meanwhile, joins again as
    /// `a_join` says, owning nothing. Its answer, and its next heartbeat's.
    fn rejoin_after_the_target_moved(
        a_join: impl Fn() -> Heartbeat,
    ) -> (HeartbeatResult, Result<HeartbeatResult, HeartbeatError>) {
        let topics = Topics(vec![("t", 6)]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let a = group
            .heartbeat(a_join(), 0, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(count(a.assignment.as_ref().unwrap()), 6);
        group
            .heartbeat(join("b", &["t"]), 10, &topics, &mut no_ids())
            .unwrap();
        let again = group
            .heartbeat(a_join(), 20, &topics, &mut no_ids())
            .unwrap();
        let owned = again.assignment.clone().unwrap_or_default();
        let next = group.heartbeat(
            beat("a", again.member_epoch, &owned),
            30,
            &topics,
            &mut no_ids(),
        );
        (again, next)
    }

    /// Found by the simulator: a dynamic member rejoining under its id (after it was
    /// fenced) kept what the coordinator last gave it, and when the target had moved
    /// some of it away it was answered partitions at member epoch 0; its next heartbeat
    /// (epoch 0, owning them) was INVALID_REQUEST, for good.
    #[test]
    fn a_member_rejoining_under_its_id_starts_owning_nothing_and_gets_an_epoch() {
        let (again, next) = rejoin_after_the_target_moved(|| join("a", &["t"]));
        assert!(again.member_epoch > 0, "{again:?}");
        let owned = again.assignment.clone().unwrap_or_default();
        assert!(
            count(&owned) <= 3,
            "only a's share of the target: {owned:?}"
        );
        let next = next.expect("its next heartbeat is accepted");
        assert!(next.member_epoch >= again.member_epoch);
    }

    /// A static member keeps its assignment when it rejoins; partitions its target lost
    /// meanwhile, which it no longer owns, are dropped at once (Kafka's
    /// ownsRevokedPartitions), not left to revoke at epoch 0 (review of the fix above).
    #[test]
    fn a_static_member_rejoining_after_its_target_moved_gets_an_epoch() {
        let (again, next) = rejoin_after_the_target_moved(|| Heartbeat {
            instance_id: Some("ia".into()),
            ..join("a", &["t"])
        });
        assert!(again.member_epoch > 0, "{again:?}");
        let owned = again.assignment.clone().unwrap_or_default();
        assert_eq!(count(&owned), 3, "its share of the target: {owned:?}");
        next.expect("its next heartbeat is accepted");
    }

    /// A group of six partitions for the static-member tests.
    fn static_group() -> (Topics, ConsumerGroupLimits, ConsumerGroup) {
        let limits = ConsumerGroupLimits::default();
        (
            Topics(vec![("t", 6)]),
            limits,
            ConsumerGroup::new("g", limits),
        )
    }

    /// A static member (instance "ia") joining as `member`.
    fn statically(member: &str) -> Heartbeat {
        Heartbeat {
            instance_id: Some("ia".into()),
            ..join(member, &["t"])
        }
    }

    /// Kafka's static membership for the new protocol: a static member that leaves
    /// with epoch -2 (a restart) keeps its place and partitions, without a rebalance,
    /// until it comes back under its instance id; only its session running out removes
    /// it. Strand removed it at once before, so every rolling restart moved partitions.
    #[test]
    fn a_static_member_leaving_for_a_restart_keeps_its_partitions_until_it_is_back() {
        let (topics, limits, mut group) = static_group();
        // a1 (instance "ia") leaves with epoch -2.
        let leave_for_a_while = |group: &mut ConsumerGroup, now: i64| {
            let request = Heartbeat {
                member_epoch: STATIC_LEAVE_EPOCH,
                ..statically("a1")
            };
            group
                .heartbeat(request, now, &topics, &mut no_ids())
                .unwrap()
        };
        let a = group
            .heartbeat(statically("a1"), 0, &topics, &mut no_ids())
            .unwrap();
        let a_owned = a.assignment.unwrap();
        group
            .heartbeat(
                beat("a1", a.member_epoch, &a_owned),
                5,
                &topics,
                &mut no_ids(),
            )
            .unwrap();
        let epoch = group.group_epoch;
        let left = leave_for_a_while(&mut group, 10);
        assert_eq!(left.member_epoch, STATIC_LEAVE_EPOCH);
        assert_eq!(group.group_epoch, epoch, "no rebalance");
        // Nothing speaks for it until a new process joins (review): not its old epoch...
        let stale = group
            .heartbeat(
                beat("a1", a.member_epoch, &a_owned),
                12,
                &topics,
                &mut no_ids(),
            )
            .unwrap_err();
        assert_eq!(stale.code, error_code::FENCED_MEMBER_EPOCH);
        // ...and -2 needs the instance id of the member that holds it.
        let anonymous = Heartbeat {
            member_epoch: STATIC_LEAVE_EPOCH,
            instance_id: None,
            ..join("a1", &["t"])
        };
        let refused = group
            .heartbeat(anonymous, 14, &topics, &mut no_ids())
            .unwrap_err();
        assert_eq!(refused.code, error_code::INVALID_REQUEST);
        let other = Heartbeat {
            member_epoch: STATIC_LEAVE_EPOCH,
            ..statically("x")
        };
        let fenced = group
            .heartbeat(other, 16, &topics, &mut no_ids())
            .unwrap_err();
        assert_eq!(fenced.code, error_code::FENCED_INSTANCE_ID);
        // Another member meanwhile gets nothing of a's.
        let b = group
            .heartbeat(join("b", &["t"]), 20, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(
            count(b.assignment.as_ref().unwrap()),
            0,
            "a's partitions stay a's"
        );
        // a comes back as a new process (a new member id): its partitions at once.
        let back = group
            .heartbeat(statically("a2"), 30, &topics, &mut no_ids())
            .unwrap();
        assert!(back.member_epoch > 0);
        assert!(count(back.assignment.as_ref().unwrap()) > 0, "{back:?}");
        assert!(!group.members.contains_key("a1"));
        // Had it not come back, its session would have removed it.
        let mut lapsed = ConsumerGroup::new("g", limits);
        lapsed
            .heartbeat(statically("a1"), 0, &topics, &mut no_ids())
            .unwrap();
        leave_for_a_while(&mut lapsed, 10);
        assert!(lapsed.members.contains_key("a1"));
        lapsed.tick(10 + limits.session_timeout_ms as i64, &topics);
        assert!(
            !lapsed.members.contains_key("a1"),
            "removed when its session ran out"
        );
    }

    /// A second process with an instance id whose member has neither left (-2) nor run
    /// out its session is refused UNRELEASED_INSTANCE_ID, as Kafka's
    /// throwIfInstanceIdIsUnreleased; Strand replaced the running member before, so two
    /// processes configured alike took the instance from each other in turn. The member
    /// itself rejoining under its own id (a lost answer, a fence) is taken back, where
    /// Kafka 4.4 refuses it too (apache/kafka#23542 fixes that there).
    #[test]
    fn a_static_instance_still_held_is_refused_until_its_session_runs_out() {
        let (topics, limits, mut group) = static_group();
        let a = group
            .heartbeat(statically("a1"), 0, &topics, &mut no_ids())
            .unwrap();
        let epoch = group.group_epoch;
        let refused = group
            .heartbeat(statically("a2"), 10, &topics, &mut no_ids())
            .unwrap_err();
        assert_eq!(refused.code, error_code::UNRELEASED_INSTANCE_ID);
        assert!(group.members.contains_key("a1") && !group.members.contains_key("a2"));
        assert_eq!(
            group.static_members.get("ia").map(String::as_str),
            Some("a1")
        );
        assert_eq!(group.group_epoch, epoch, "nothing changed");
        // a1 rejoining under its own id keeps its place.
        let again = group
            .heartbeat(statically("a1"), 20, &topics, &mut no_ids())
            .unwrap();
        assert!(again.member_epoch > 0);
        assert_eq!(again.assignment, a.assignment);
        // Once a1's session runs out, a2 takes the instance.
        group.tick(20 + limits.session_timeout_ms as i64, &topics);
        assert!(!group.members.contains_key("a1"));
        let a2 = group
            .heartbeat(
                statically("a2"),
                30 + limits.session_timeout_ms as i64,
                &topics,
                &mut no_ids(),
            )
            .unwrap();
        assert!(a2.member_epoch > 0);
        assert_eq!(
            group.static_members.get("ia").map(String::as_str),
            Some("a2")
        );
        // A session past its deadline that the timer has not removed yet counts as out.
        let late = 40 + 2 * limits.session_timeout_ms as i64;
        let a3 = group
            .heartbeat(statically("a3"), late, &topics, &mut no_ids())
            .unwrap();
        assert!(a3.member_epoch > 0);
        assert!(!group.members.contains_key("a2"));
    }

    #[test]
    fn a_second_member_gets_partitions_only_after_the_first_revokes_them() {
        let topics = Topics(vec![("t", 6)]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let a = group
            .heartbeat(join("a", &["t"]), 0, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(
            (a.member_epoch, count(a.assignment.as_ref().unwrap())),
            (1, 6)
        );
        let a_owned = a.assignment.unwrap();

        let b = group
            .heartbeat(join("b", &["t"]), 10, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(
            count(b.assignment.as_ref().unwrap()),
            0,
            "a still holds every partition"
        );
        assert_eq!(group.state(), ConsumerGroupState::Reconciling);

        // a is told to keep 3 (epoch unchanged until it revokes the other 3).
        let a = group
            .heartbeat(beat("a", 1, &a_owned), 20, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(
            (a.member_epoch, count(a.assignment.as_ref().unwrap())),
            (1, 3)
        );
        let kept = a.assignment.unwrap();
        // a reports the revocation: it advances to epoch 2.
        let a = group
            .heartbeat(beat("a", 1, &kept), 30, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(a.member_epoch, 2);
        // b now receives the released partitions.
        let b = group
            .heartbeat(beat("b", 2, &Assignment::new()), 40, &topics, &mut no_ids())
            .unwrap();
        let b_assigned = b.assignment.unwrap();
        assert_eq!(count(&b_assigned), 3);
        assert!(
            pairs(&b_assigned).all(|tp| !pairs(&kept).any(|k| k == tp)),
            "disjoint"
        );
        group
            .heartbeat(beat("b", 2, &b_assigned), 50, &topics, &mut no_ids())
            .unwrap();
        assert_eq!(group.state(), ConsumerGroupState::Stable);

        // Offset commits by Kafka 4.4's rule: a kept its partitions since epoch 1, b got
        // its own at epoch 2.
        let (a_kept, a_gave_up, b_got): (Vec<_>, Vec<_>, Vec<_>) = (
            pairs(&kept).collect(),
            pairs(&a_owned)
                .filter(|tp| !pairs(&kept).any(|k| k == *tp))
                .collect(),
            pairs(&b_assigned).collect(),
        );
        let check = |member: &str, epoch: i32, tps: &[(String, i32)]| {
            let tps: Vec<(&str, i32)> = tps.iter().map(|(t, p)| (t.as_str(), *p)).collect();
            group.check_commit(member, epoch, &tps)
        };
        // The current epoch commits anything; a newer one is stale.
        assert_eq!(check("a", 2, &a_gave_up), Ok(()));
        assert_eq!(check("a", 3, &a_kept), Err(error_code::STALE_MEMBER_EPOCH));
        // An older epoch: partitions assigned at or before it, still owned, only.
        assert_eq!(check("a", 1, &a_kept), Ok(()));
        assert_eq!(
            check("a", 1, &a_gave_up),
            Err(error_code::STALE_MEMBER_EPOCH)
        );
        let mixed = [a_kept[0].clone(), a_gave_up[0].clone()];
        assert_eq!(
            check("a", 1, &mixed),
            Err(error_code::STALE_MEMBER_EPOCH),
            "all or nothing"
        );
        assert_eq!(check("b", 1, &b_got), Err(error_code::STALE_MEMBER_EPOCH));
        assert_eq!(check("b", 2, &b_got), Ok(()));
        assert_eq!(check("c", 2, &[]), Err(error_code::UNKNOWN_MEMBER_ID));
        assert_eq!(group.members["a"].assigned_at[&a_kept[0]], 1);
        assert_eq!(group.members["b"].assigned_at[&b_got[0]], 2);
    }

    #[test]
    fn fencing_leave_and_session_expiry() {
        let topics = Topics(vec![("t", 4)]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        group
            .heartbeat(join("a", &["t"]), 0, &topics, &mut no_ids())
            .unwrap();
        let stale = group
            .heartbeat(beat("a", 7, &Assignment::new()), 1, &topics, &mut no_ids())
            .unwrap_err();
        assert_eq!(stale.code, error_code::FENCED_MEMBER_EPOCH);
        let unknown = group
            .heartbeat(beat("zz", 1, &Assignment::new()), 1, &topics, &mut no_ids())
            .unwrap_err();
        assert_eq!(unknown.code, error_code::UNKNOWN_MEMBER_ID);
        group
            .heartbeat(join("b", &["t"]), 2, &topics, &mut no_ids())
            .unwrap();
        // b goes silent; a keeps beating.
        let owned = group.members["a"].assigned.clone();
        group
            .heartbeat(
                beat("a", group.members["a"].member_epoch, &owned),
                40_000,
                &topics,
                &mut no_ids(),
            )
            .unwrap();
        assert_eq!(group.tick(45_003, &topics), vec!["b".to_string()]);
        let leave = group
            .heartbeat(
                Heartbeat {
                    member_epoch: LEAVE_EPOCH,
                    ..beat("a", 0, &Assignment::new())
                },
                45_004,
                &topics,
                &mut no_ids(),
            )
            .unwrap();
        assert_eq!(leave.member_epoch, LEAVE_EPOCH);
        assert!(group.is_empty());
    }

    #[test]
    fn assignors_balance_and_stick() {
        let subscriptions: BTreeMap<String, BTreeSet<String>> = ["a", "b", "c"]
            .iter()
            .map(|m| (m.to_string(), ["t".to_string()].into_iter().collect()))
            .collect();
        let counts: BTreeMap<String, i32> = [("t".to_string(), 7)].into_iter().collect();
        let range = assign_range(&subscriptions, &counts);
        assert_eq!(range["a"]["t"], (0..3).collect());
        assert_eq!(range["c"]["t"], (5..7).collect());
        let uniform = assign_uniform(&subscriptions, &counts, &BTreeMap::new());
        let mut sizes: Vec<usize> = uniform.values().map(count).collect();
        sizes.sort();
        assert_eq!(sizes, vec![2, 2, 3]);
        // A fourth member: partitions move only as much as balance needs.
        let mut four = subscriptions.clone();
        four.insert("d".into(), ["t".to_string()].into_iter().collect());
        let next = assign_uniform(&four, &counts, &uniform);
        let moved = ["a", "b", "c"]
            .iter()
            .map(|m| count(&difference(&uniform[*m], &next[*m])))
            .sum::<usize>();
        assert!(moved <= 2, "moved {moved}");
        assert_eq!(next.values().map(count).sum::<usize>(), 7);
    }

    #[test]
    fn unsupported_assignors_and_bad_joins_are_refused() {
        let topics = Topics(vec![("t", 1)]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let mut bad = join("a", &["t"]);
        bad.server_assignor = Some("sticky".into());
        assert_eq!(
            group
                .heartbeat(bad, 0, &topics, &mut no_ids())
                .unwrap_err()
                .code,
            error_code::UNSUPPORTED_ASSIGNOR
        );
        let mut no_subscription = join("a", &[]);
        no_subscription.subscribed_topics = None;
        assert_eq!(
            group
                .heartbeat(no_subscription, 0, &topics, &mut no_ids())
                .unwrap_err()
                .code,
            error_code::INVALID_REQUEST
        );
    }

    #[test]
    fn regex_subscriptions_follow_topics() {
        let topics = Topics(vec![("orders-eu", 2), ("orders-us", 2), ("users", 3)]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let mut request = join("a", &[]);
        request.subscribed_topics = None;
        request.subscribed_regex = Some("orders-.*".into());
        let result = group.heartbeat(request, 0, &topics, &mut no_ids()).unwrap();
        let assignment = result.assignment.unwrap();
        assert_eq!(
            assignment.keys().cloned().collect::<Vec<_>>(),
            vec!["orders-eu", "orders-us"]
        );
    }

    #[test]
    fn a_regex_resolves_to_internal_topics_too_as_kafka_does() {
        let topics = Topics(vec![
            ("__consumer_offsets", 2),
            ("__orders", 1),
            ("users", 3),
        ]);
        let mut group = ConsumerGroup::new("g", ConsumerGroupLimits::default());
        let mut request = join("a", &[]);
        request.subscribed_topics = None;
        request.subscribed_regex = Some("__.*".into());
        let result = group.heartbeat(request, 0, &topics, &mut no_ids()).unwrap();
        let assignment = result.assignment.unwrap();
        assert_eq!(
            assignment.keys().cloned().collect::<Vec<_>>(),
            vec!["__consumer_offsets", "__orders"]
        );
    }
}
