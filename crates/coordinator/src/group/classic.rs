//! One consumer group under the classic protocol (JoinGroup / SyncGroup / Heartbeat /
//! LeaveGroup), as a plain state machine: every method takes the current time and returns
//! what to answer now, and which parked requests to complete. No I/O, no clocks, no
//! channels: the coordinator (`group::coordinator`) owns those, and tests drive this
//! directly.
//!
//! States follow Kafka: Empty -> PreparingRebalance -> CompletingRebalance -> Stable, and
//! back to PreparingRebalance whenever membership or subscriptions change. Members are
//! fenced by member id and generation; session and rebalance timeouts evict the silent;
//! static members (group.instance.id) keep their assignment across restarts.

use std::collections::{BTreeMap, HashMap};

use bytes::Bytes;

use strand_types::error_code;

/// Settings of the group coordinator (Kafka's broker configs of the same names).
#[derive(Debug, Clone, Copy)]
pub struct GroupLimits {
    /// group.min.session.timeout.ms
    pub min_session_timeout_ms: i32,
    /// group.max.session.timeout.ms
    pub max_session_timeout_ms: i32,
    /// group.initial.rebalance.delay.ms
    pub initial_rebalance_delay_ms: i64,
    /// group.max.size
    pub max_size: usize,
}

impl Default for GroupLimits {
    fn default() -> Self {
        GroupLimits {
            min_session_timeout_ms: 6_000,
            max_session_timeout_ms: 1_800_000,
            initial_rebalance_delay_ms: 3_000,
            max_size: 1_000,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GroupState {
    Empty,
    PreparingRebalance,
    CompletingRebalance,
    Stable,
    Dead,
}

impl GroupState {
    /// Kafka's names, as ListGroups and DescribeGroups report them.
    pub fn name(self) -> &'static str {
        match self {
            GroupState::Empty => "Empty",
            GroupState::PreparingRebalance => "PreparingRebalance",
            GroupState::CompletingRebalance => "CompletingRebalance",
            GroupState::Stable => "Stable",
            GroupState::Dead => "Dead",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocols: Vec<(String, Bytes)>,
    pub assignment: Bytes,
    /// When the session expires unless the member is heard from.
    pub session_deadline_ms: i64,
    pub awaiting_join: bool,
    pub awaiting_sync: bool,
}

impl Member {
    fn metadata_for(&self, protocol: &str) -> Bytes {
        self.protocols
            .iter()
            .find(|(name, _)| name == protocol)
            .map(|(_, m)| m.clone())
            .unwrap_or_default()
    }
}

/// A JoinGroup from a client.
#[derive(Debug, Clone)]
pub struct JoinRequest {
    pub member_id: String,
    pub group_instance_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub session_timeout_ms: i32,
    pub rebalance_timeout_ms: i32,
    pub protocol_type: String,
    pub protocols: Vec<(String, Bytes)>,
    /// v4+ clients must first learn their member id (MEMBER_ID_REQUIRED).
    pub require_known_member_id: bool,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JoinResult {
    pub error_code: i16,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: String,
    pub member_id: String,
    /// (member id, group instance id, metadata): only for the leader.
    pub members: Vec<(String, Option<String>, Bytes)>,
    /// A returning static leader keeps the current assignment (JoinGroup v9).
    pub skip_assignment: bool,
}

impl JoinResult {
    pub fn error(code: i16, member_id: &str) -> JoinResult {
        JoinResult {
            error_code: code,
            generation_id: -1,
            protocol_type: None,
            protocol_name: None,
            leader: String::new(),
            member_id: member_id.to_string(),
            members: Vec::new(),
            skip_assignment: false,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncResult {
    pub error_code: i16,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub assignment: Bytes,
}

impl SyncResult {
    pub fn error(code: i16) -> SyncResult {
        SyncResult {
            error_code: code,
            protocol_type: None,
            protocol_name: None,
            assignment: Bytes::new(),
        }
    }
}

/// A parked request the coordinator must now answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Completion {
    Join {
        member_id: String,
        result: JoinResult,
    },
    Sync {
        member_id: String,
        result: SyncResult,
    },
}

/// What a JoinGroup or SyncGroup gets at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply<T> {
    Now(T),
    /// Parked: answered later through a `Completion` for this member id.
    Wait {
        member_id: String,
    },
}

/// Kafka's member-id shape: client id, a dash, a random suffix.
pub type MemberIdGenerator<'a> = &'a mut dyn FnMut(&str) -> String;

#[derive(Debug, Clone)]
pub struct ClassicGroup {
    pub group_id: String,
    pub state: GroupState,
    pub generation_id: i32,
    pub protocol_type: Option<String>,
    pub protocol_name: Option<String>,
    pub leader: Option<String>,
    pub members: BTreeMap<String, Member>,
    /// Member ids handed out with MEMBER_ID_REQUIRED, valid until their deadline.
    pub pending_members: HashMap<String, i64>,
    /// group.instance.id -> member id.
    pub static_members: HashMap<String, String>,
    /// When the current rebalance phase gives up waiting.
    pub phase_deadline_ms: Option<i64>,
    /// During the initial delay, joins extend the wait up to this limit.
    initial_delay_limit_ms: Option<i64>,
    limits: GroupLimits,
}

impl ClassicGroup {
    pub fn new(group_id: &str, limits: GroupLimits) -> ClassicGroup {
        ClassicGroup {
            group_id: group_id.to_string(),
            state: GroupState::Empty,
            generation_id: 0,
            protocol_type: None,
            protocol_name: None,
            leader: None,
            members: BTreeMap::new(),
            pending_members: HashMap::new(),
            static_members: HashMap::new(),
            phase_deadline_ms: None,
            initial_delay_limit_ms: None,
            limits,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// Topics this group's consumers subscribe to (consumer protocol), for OffsetDelete.
    pub fn subscribed_topics(&self) -> Vec<String> {
        let Some(protocol) = &self.protocol_name else {
            return Vec::new();
        };
        if self.protocol_type.as_deref() != Some("consumer") {
            return Vec::new();
        }
        let mut topics: Vec<String> = self
            .members
            .values()
            .flat_map(|m| parse_subscription_topics(&m.metadata_for(protocol)))
            .collect();
        topics.sort();
        topics.dedup();
        topics
    }

    pub fn join(
        &mut self,
        request: JoinRequest,
        now_ms: i64,
        new_member_id: MemberIdGenerator<'_>,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        let member_id = request.member_id.clone();
        if request.session_timeout_ms < self.limits.min_session_timeout_ms
            || request.session_timeout_ms > self.limits.max_session_timeout_ms
        {
            return (
                Reply::Now(JoinResult::error(
                    error_code::INVALID_SESSION_TIMEOUT,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        if request.protocol_type.is_empty() || request.protocols.is_empty() {
            return (
                Reply::Now(JoinResult::error(
                    error_code::INCONSISTENT_GROUP_PROTOCOL,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        if !self.members.is_empty() && !self.supports(&request) {
            return (
                Reply::Now(JoinResult::error(
                    error_code::INCONSISTENT_GROUP_PROTOCOL,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        if self.state == GroupState::Dead {
            return (
                Reply::Now(JoinResult::error(
                    error_code::COORDINATOR_NOT_AVAILABLE,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        if member_id.is_empty() {
            return self.join_new_member(request, now_ms, new_member_id);
        }
        if let Some(instance) = &request.group_instance_id {
            if let Some(current) = self.static_members.get(instance) {
                if current != &member_id {
                    return (
                        Reply::Now(JoinResult::error(
                            error_code::FENCED_INSTANCE_ID,
                            &member_id,
                        )),
                        Vec::new(),
                    );
                }
            }
        }
        if self.pending_members.remove(&member_id).is_some() {
            return self.add_member_and_rebalance(request, member_id, now_ms);
        }
        if !self.members.contains_key(&member_id) {
            return (
                Reply::Now(JoinResult::error(error_code::UNKNOWN_MEMBER_ID, &member_id)),
                Vec::new(),
            );
        }
        self.join_existing_member(request, now_ms)
    }

    fn join_new_member(
        &mut self,
        request: JoinRequest,
        now_ms: i64,
        new_member_id: MemberIdGenerator<'_>,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        if let Some(instance) = request.group_instance_id.clone() {
            if let Some(old_id) = self.static_members.get(&instance).cloned() {
                return self.replace_static_member(request, old_id, now_ms, new_member_id);
            }
        }
        if self.members.len() + self.pending_members.len() >= self.limits.max_size {
            return (
                Reply::Now(JoinResult::error(error_code::GROUP_MAX_SIZE_REACHED, "")),
                Vec::new(),
            );
        }
        let member_id = new_member_id(id_prefix(&request));
        if request.require_known_member_id && request.group_instance_id.is_none() {
            self.pending_members.insert(
                member_id.clone(),
                now_ms + request.session_timeout_ms as i64,
            );
            return (
                Reply::Now(JoinResult::error(
                    error_code::MEMBER_ID_REQUIRED,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        self.add_member_and_rebalance(request, member_id, now_ms)
    }

    /// A static member restarting with the same instance id: it takes over its old
    /// identity without a rebalance when nothing else changed.
    fn replace_static_member(
        &mut self,
        request: JoinRequest,
        old_id: String,
        now_ms: i64,
        new_member_id: MemberIdGenerator<'_>,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        let new_id = new_member_id(id_prefix(&request));
        let Some(mut member) = self.members.remove(&old_id) else {
            self.static_members
                .remove(request.group_instance_id.as_deref().unwrap_or_default());
            return self.add_member_and_rebalance(request, new_id, now_ms);
        };
        // A request the old process left parked is answered now: its instance has a new
        // member (Kafka answers it FENCED_INSTANCE_ID).
        let mut fenced = Vec::new();
        if std::mem::take(&mut member.awaiting_join) {
            fenced.push(Completion::Join {
                member_id: old_id.clone(),
                result: JoinResult::error(error_code::FENCED_INSTANCE_ID, &old_id),
            });
        }
        if std::mem::take(&mut member.awaiting_sync) {
            fenced.push(Completion::Sync {
                member_id: old_id.clone(),
                result: SyncResult::error(error_code::FENCED_INSTANCE_ID),
            });
        }
        // Kafka rebalances a returning static member only if the group's protocol would
        // change; new subscription bytes alone (a Java consumer's embed its owned
        // partitions and generation) do not.
        let protocol_kept = self
            .protocol_name
            .as_ref()
            .is_some_and(|chosen| request.protocols.iter().any(|(name, _)| name == chosen));
        member.protocols = request.protocols.clone();
        member.member_id = new_id.clone();
        member.session_deadline_ms = now_ms + request.session_timeout_ms as i64;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        let was_leader = self.leader.as_deref() == Some(old_id.as_str());
        self.members.insert(new_id.clone(), member);
        if let Some(instance) = &request.group_instance_id {
            self.static_members.insert(instance.clone(), new_id.clone());
        }
        if was_leader {
            self.leader = Some(new_id.clone());
        }
        match self.state {
            GroupState::Stable if protocol_kept => {
                // The current generation, unchanged; a returning leader gets the members
                // but is told to skip the assignment (JoinGroup v9), as in Kafka. The
                // shard writes the group's record before this answer leaves
                // (`GroupShard::join_with`): a new coordinator must know the new id.
                let mut result = self.join_result_for(&new_id);
                result.skip_assignment = was_leader;
                (Reply::Now(result), Vec::new())
            }
            GroupState::Stable | GroupState::CompletingRebalance => {
                // A new protocol, or the leader may already hold the member list with the
                // old id (its assignment would give the new id nothing): a rebalance, as
                // in Kafka.
                let reason = format!("static member {new_id} replaced {old_id}");
                let (reply, completions) = self.rejoin_and_rebalance(&new_id, &reason, now_ms);
                fenced.extend(completions);
                (reply, fenced)
            }
            _ => {
                let mut request = request;
                request.member_id = new_id;
                let (reply, completions) = self.join_existing_member(request, now_ms);
                fenced.extend(completions);
                (reply, fenced)
            }
        }
    }

    /// The record of a static member's replacement (`old` by `new_id`) could not be
    /// written: the instance takes its old member id back with its old settings, as Kafka
    /// reverts it (what the group's record on disk still says), unless it moved on since.
    pub fn revert_static_replacement(
        &mut self,
        instance: &str,
        new_id: &str,
        old: &Member,
        now_ms: i64,
    ) {
        if self.static_members.get(instance).map(String::as_str) != Some(new_id) {
            return;
        }
        let Some(mut member) = self.members.remove(new_id) else {
            return;
        };
        member.member_id = old.member_id.clone();
        member.client_id = old.client_id.clone();
        member.client_host = old.client_host.clone();
        member.protocols = old.protocols.clone();
        member.session_timeout_ms = old.session_timeout_ms;
        member.rebalance_timeout_ms = old.rebalance_timeout_ms;
        member.session_deadline_ms = now_ms + old.session_timeout_ms as i64;
        self.members.insert(old.member_id.clone(), member);
        self.static_members
            .insert(instance.to_string(), old.member_id.clone());
        if self.leader.as_deref() == Some(new_id) {
            self.leader = Some(old.member_id.clone());
        }
    }

    fn add_member_and_rebalance(
        &mut self,
        request: JoinRequest,
        member_id: String,
        now_ms: i64,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        if self.members.len() >= self.limits.max_size {
            return (
                Reply::Now(JoinResult::error(
                    error_code::GROUP_MAX_SIZE_REACHED,
                    &member_id,
                )),
                Vec::new(),
            );
        }
        if self.members.is_empty() {
            self.protocol_type = Some(request.protocol_type.clone());
        }
        if let Some(instance) = &request.group_instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        self.members.insert(
            member_id.clone(),
            Member {
                member_id: member_id.clone(),
                group_instance_id: request.group_instance_id.clone(),
                client_id: request.client_id,
                client_host: request.client_host,
                session_timeout_ms: request.session_timeout_ms,
                rebalance_timeout_ms: request.rebalance_timeout_ms,
                protocols: request.protocols,
                assignment: Bytes::new(),
                session_deadline_ms: now_ms + request.session_timeout_ms as i64,
                awaiting_join: true,
                awaiting_sync: false,
            },
        );
        let reason = format!("adding new member {member_id}");
        let mut completions = self.prepare_rebalance(&reason, now_ms);
        completions.extend(self.maybe_complete_join(now_ms));
        (
            self.reply_for_join(&member_id, &mut completions),
            completions,
        )
    }

    fn join_existing_member(
        &mut self,
        request: JoinRequest,
        now_ms: i64,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        let member_id = request.member_id.clone();
        let is_leader = self.leader.as_deref() == Some(member_id.as_str());
        let member = self
            .members
            .get_mut(&member_id)
            .expect("checked by the caller");
        let unchanged = member.protocols == request.protocols;
        member.protocols = request.protocols;
        member.session_timeout_ms = request.session_timeout_ms;
        member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        member.session_deadline_ms = now_ms + request.session_timeout_ms as i64;
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance if unchanged && !is_leader => {
                // A follower rejoining with nothing new gets the current generation.
                return (Reply::Now(self.join_result_for(&member_id)), Vec::new());
            }
            GroupState::CompletingRebalance if unchanged => {
                return (Reply::Now(self.join_result_for(&member_id)), Vec::new());
            }
            _ => {}
        }
        let reason = format!(
            "updating metadata for member {member_id} during {:?}",
            self.state
        );
        self.rejoin_and_rebalance(&member_id, &reason, now_ms)
    }

    /// `member_id` joins the next generation: a rebalance starts (if none is under way)
    /// and its join is answered now if that completed the join phase, else parked.
    fn rejoin_and_rebalance(
        &mut self,
        member_id: &str,
        reason: &str,
        now_ms: i64,
    ) -> (Reply<JoinResult>, Vec<Completion>) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.awaiting_join = true;
        }
        let mut completions = self.prepare_rebalance(reason, now_ms);
        completions.extend(self.maybe_complete_join(now_ms));
        (
            self.reply_for_join(member_id, &mut completions),
            completions,
        )
    }

    /// If `member_id`'s join completed in `completions`, answer it now instead.
    fn reply_for_join(
        &self,
        member_id: &str,
        completions: &mut Vec<Completion>,
    ) -> Reply<JoinResult> {
        if let Some(index) = completions
            .iter()
            .position(|c| matches!(c, Completion::Join { member_id: id, .. } if id == member_id))
        {
            if let Completion::Join { result, .. } = completions.remove(index) {
                return Reply::Now(result);
            }
        }
        Reply::Wait {
            member_id: member_id.to_string(),
        }
    }

    fn supports(&self, request: &JoinRequest) -> bool {
        if self.protocol_type.as_deref() != Some(request.protocol_type.as_str()) {
            return false;
        }
        // Some protocol every member (and this one) supports.
        request.protocols.iter().any(|(name, _)| {
            self.members
                .values()
                .all(|m| m.protocols.iter().any(|(n, _)| n == name))
        })
    }

    /// The record of a change that settled generation `generation_id` could not be
    /// written: as Kafka, the group rebalances (if it is still at that generation and has
    /// members), so the next assignment is written again. Returns the parked requests
    /// to answer.
    pub fn write_failed(&mut self, generation_id: i32, now_ms: i64) -> Vec<Completion> {
        if self.generation_id != generation_id
            || self.state != GroupState::Stable
            || self.members.is_empty()
        {
            return Vec::new();
        }
        self.prepare_rebalance("the group's record could not be written", now_ms)
    }

    /// Starts a rebalance: members must rejoin before the deadline. A group already
    /// rebalancing keeps its deadline (Kafka's `canRebalance`): members joining one after
    /// another do not hold the others past it.
    fn prepare_rebalance(&mut self, reason: &str, now_ms: i64) -> Vec<Completion> {
        let mut completions = Vec::new();
        if matches!(
            self.state,
            GroupState::PreparingRebalance | GroupState::Dead
        ) {
            return completions;
        }
        tracing::info!(
            group = %self.group_id,
            state = ?self.state,
            generation = self.generation_id,
            reason,
            "preparing to rebalance"
        );
        // Members parked in SyncGroup must rejoin: tell them so.
        if self.state == GroupState::CompletingRebalance {
            for member in self.members.values_mut() {
                if member.awaiting_sync {
                    member.awaiting_sync = false;
                    completions.push(Completion::Sync {
                        member_id: member.member_id.clone(),
                        result: SyncResult::error(error_code::REBALANCE_IN_PROGRESS),
                    });
                }
            }
        }
        let rebalance_timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0);
        if self.state == GroupState::Empty && self.limits.initial_rebalance_delay_ms > 0 {
            // Kafka's initial delay: wait a little for more members of a new group.
            let delay = self
                .limits
                .initial_rebalance_delay_ms
                .min(rebalance_timeout.max(1));
            self.phase_deadline_ms = Some(now_ms + delay);
            self.initial_delay_limit_ms = Some(now_ms + rebalance_timeout.max(delay));
        } else {
            self.phase_deadline_ms = Some(now_ms + rebalance_timeout);
            self.initial_delay_limit_ms = None;
        }
        for member in self.members.values_mut() {
            member.assignment = Bytes::new();
        }
        self.state = GroupState::PreparingRebalance;
        completions
    }

    /// Completes the join phase once every member has rejoined (outside an initial delay).
    fn maybe_complete_join(&mut self, now_ms: i64) -> Vec<Completion> {
        if self.state != GroupState::PreparingRebalance {
            return Vec::new();
        }
        if let Some(limit) = self.initial_delay_limit_ms {
            // A join during the initial delay extends it, up to the rebalance timeout.
            if now_ms < limit {
                let extended = (now_ms + self.limits.initial_rebalance_delay_ms).min(limit);
                self.phase_deadline_ms =
                    Some(self.phase_deadline_ms.unwrap_or(extended).max(extended));
            }
            return Vec::new();
        }
        if self.members.values().all(|m| m.awaiting_join) && self.pending_members.is_empty() {
            return self.complete_join(now_ms);
        }
        Vec::new()
    }

    fn complete_join(&mut self, now_ms: i64) -> Vec<Completion> {
        // Members that did not rejoin in time are out.
        let gone: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in gone {
            self.remove_member(&member_id);
        }
        self.pending_members.clear();
        self.phase_deadline_ms = None;
        self.initial_delay_limit_ms = None;
        self.generation_id += 1;
        if self.members.is_empty() {
            self.state = GroupState::Empty;
            self.protocol_name = None;
            self.leader = None;
            return Vec::new();
        }
        self.protocol_name = Some(self.select_protocol());
        if self
            .leader
            .as_ref()
            .is_none_or(|leader| !self.members.contains_key(leader))
        {
            self.leader = self.members.keys().next().cloned();
        }
        self.state = GroupState::CompletingRebalance;
        tracing::info!(
            group = %self.group_id,
            generation = self.generation_id,
            members = self.members.len(),
            "stabilized group"
        );
        // Members that do not sync by the rebalance timeout are evicted (see `tick`).
        let rebalance_timeout = self
            .members
            .values()
            .map(|m| m.rebalance_timeout_ms as i64)
            .max()
            .unwrap_or(0);
        self.phase_deadline_ms = Some(now_ms + rebalance_timeout);
        let mut completions = Vec::new();
        let ids: Vec<String> = self.members.keys().cloned().collect();
        for member_id in ids {
            let member = self.members.get_mut(&member_id).expect("listed");
            member.awaiting_join = false;
            member.session_deadline_ms = now_ms + member.session_timeout_ms as i64;
            completions.push(Completion::Join {
                member_id: member_id.clone(),
                result: self.join_result_for(&member_id),
            });
        }
        completions
    }

    /// The protocol chosen by vote: each member votes for its first preference among
    /// those every member supports (Kafka's rule).
    fn select_protocol(&self) -> String {
        let candidates: Vec<&String> = self
            .members
            .values()
            .next()
            .map(|m| {
                m.protocols
                    .iter()
                    .map(|(name, _)| name)
                    .collect::<Vec<&String>>()
            })
            .unwrap_or_default()
            .into_iter()
            .filter(|name| {
                self.members
                    .values()
                    .all(|m| m.protocols.iter().any(|(n, _)| n == *name))
            })
            .collect();
        let mut votes: BTreeMap<&String, usize> = BTreeMap::new();
        for member in self.members.values() {
            if let Some((name, _)) = member
                .protocols
                .iter()
                .find(|(name, _)| candidates.contains(&name))
            {
                *votes.entry(name).or_default() += 1;
            }
        }
        let best = votes.values().copied().max().unwrap_or(0);
        candidates
            .into_iter()
            .find(|name| votes.get(name).copied() == Some(best))
            .cloned()
            .unwrap_or_default()
    }

    fn join_result_for(&self, member_id: &str) -> JoinResult {
        let is_leader = self.leader.as_deref() == Some(member_id);
        let protocol = self.protocol_name.clone().unwrap_or_default();
        JoinResult {
            error_code: error_code::NONE,
            generation_id: self.generation_id,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            leader: self.leader.clone().unwrap_or_default(),
            member_id: member_id.to_string(),
            members: if is_leader {
                self.members
                    .values()
                    .map(|m| {
                        (
                            m.member_id.clone(),
                            m.group_instance_id.clone(),
                            m.metadata_for(&protocol),
                        )
                    })
                    .collect()
            } else {
                Vec::new()
            },
            skip_assignment: false,
        }
    }

    pub fn sync(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        assignments: Vec<(String, Bytes)>,
        now_ms: i64,
    ) -> (Reply<SyncResult>, Vec<Completion>) {
        if let Err(code) = self.check_member(member_id, group_instance_id, generation_id) {
            return (Reply::Now(SyncResult::error(code)), Vec::new());
        }
        match self.state {
            GroupState::PreparingRebalance => (
                Reply::Now(SyncResult::error(error_code::REBALANCE_IN_PROGRESS)),
                Vec::new(),
            ),
            GroupState::Stable => {
                self.touch(member_id, now_ms);
                (Reply::Now(self.sync_result_for(member_id)), Vec::new())
            }
            GroupState::CompletingRebalance => {
                self.touch(member_id, now_ms);
                self.members
                    .get_mut(member_id)
                    .expect("checked")
                    .awaiting_sync = true;
                let mut completions = Vec::new();
                if self.leader.as_deref() == Some(member_id) {
                    for member in self.members.values_mut() {
                        member.assignment = assignments
                            .iter()
                            .find(|(id, _)| id == &member.member_id)
                            .map(|(_, a)| a.clone())
                            .unwrap_or_default();
                    }
                    self.state = GroupState::Stable;
                    self.phase_deadline_ms = None;
                    let ids: Vec<String> = self
                        .members
                        .values()
                        .filter(|m| m.awaiting_sync)
                        .map(|m| m.member_id.clone())
                        .collect();
                    for id in ids {
                        self.members.get_mut(&id).expect("listed").awaiting_sync = false;
                        completions.push(Completion::Sync {
                            member_id: id.clone(),
                            result: self.sync_result_for(&id),
                        });
                    }
                }
                let reply = match completions.iter().position(
                    |c| matches!(c, Completion::Sync { member_id: id, .. } if id == member_id),
                ) {
                    Some(index) => match completions.remove(index) {
                        Completion::Sync { result, .. } => Reply::Now(result),
                        Completion::Join { .. } => unreachable!("only syncs are pushed here"),
                    },
                    None => Reply::Wait {
                        member_id: member_id.to_string(),
                    },
                };
                (reply, completions)
            }
            GroupState::Empty | GroupState::Dead => (
                Reply::Now(SyncResult::error(error_code::UNKNOWN_MEMBER_ID)),
                Vec::new(),
            ),
        }
    }

    fn sync_result_for(&self, member_id: &str) -> SyncResult {
        SyncResult {
            error_code: error_code::NONE,
            protocol_type: self.protocol_type.clone(),
            protocol_name: self.protocol_name.clone(),
            assignment: self
                .members
                .get(member_id)
                .map(|m| m.assignment.clone())
                .unwrap_or_default(),
        }
    }

    /// Fencing: the member must exist (by id, and by instance id for static members) and
    /// speak for the current generation.
    pub fn check_member(
        &self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
    ) -> Result<(), i16> {
        if let Some(instance) = group_instance_id {
            if let Some(current) = self.static_members.get(instance) {
                if current != member_id {
                    return Err(error_code::FENCED_INSTANCE_ID);
                }
            }
        }
        if !self.members.contains_key(member_id) {
            return Err(error_code::UNKNOWN_MEMBER_ID);
        }
        if generation_id != self.generation_id {
            return Err(error_code::ILLEGAL_GENERATION);
        }
        Ok(())
    }

    fn touch(&mut self, member_id: &str, now_ms: i64) {
        if let Some(member) = self.members.get_mut(member_id) {
            member.session_deadline_ms = now_ms + member.session_timeout_ms as i64;
        }
    }

    pub fn heartbeat(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        generation_id: i32,
        now_ms: i64,
    ) -> i16 {
        if matches!(self.state, GroupState::Empty | GroupState::Dead) {
            return error_code::UNKNOWN_MEMBER_ID;
        }
        if let Err(code) = self.check_member(member_id, group_instance_id, generation_id) {
            // During a rebalance the generation moves on: an old-generation member that is
            // still a member must hear REBALANCE_IN_PROGRESS and rejoin.
            if code == error_code::ILLEGAL_GENERATION
                && self.state == GroupState::PreparingRebalance
            {
                self.touch(member_id, now_ms);
                return error_code::REBALANCE_IN_PROGRESS;
            }
            return code;
        }
        self.touch(member_id, now_ms);
        if self.state == GroupState::PreparingRebalance {
            error_code::REBALANCE_IN_PROGRESS
        } else {
            error_code::NONE
        }
    }

    /// LeaveGroup for one member (by member id, or by instance id for static members).
    pub fn leave(
        &mut self,
        member_id: &str,
        group_instance_id: Option<&str>,
        now_ms: i64,
    ) -> (i16, Vec<Completion>) {
        let target = match group_instance_id {
            Some(instance) => match self.static_members.get(instance) {
                Some(current) if member_id.is_empty() || current == member_id => current.clone(),
                Some(_) => return (error_code::FENCED_INSTANCE_ID, Vec::new()),
                None => return (error_code::UNKNOWN_MEMBER_ID, Vec::new()),
            },
            None => member_id.to_string(),
        };
        if self.pending_members.remove(&target).is_some() {
            return (error_code::NONE, self.maybe_complete_join(now_ms));
        }
        if !self.members.contains_key(&target) {
            return (error_code::UNKNOWN_MEMBER_ID, Vec::new());
        }
        tracing::info!(group = %self.group_id, member = %target, "member left the group");
        let completions = self.remove_and_rebalance(&target, now_ms);
        (error_code::NONE, completions)
    }

    fn remove_member(&mut self, member_id: &str) -> Option<Member> {
        let member = self.members.remove(member_id)?;
        if let Some(instance) = &member.group_instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        if self.leader.as_deref() == Some(member_id) {
            self.leader = None;
        }
        Some(member)
    }

    /// Removes a member; its parked request (if any) is answered UNKNOWN_MEMBER_ID.
    fn remove_and_rebalance(&mut self, member_id: &str, now_ms: i64) -> Vec<Completion> {
        let mut completions = Vec::new();
        if let Some(member) = self.remove_member(member_id) {
            if member.awaiting_join {
                completions.push(Completion::Join {
                    member_id: member_id.to_string(),
                    result: JoinResult::error(error_code::UNKNOWN_MEMBER_ID, member_id),
                });
            }
            if member.awaiting_sync {
                completions.push(Completion::Sync {
                    member_id: member_id.to_string(),
                    result: SyncResult::error(error_code::UNKNOWN_MEMBER_ID),
                });
            }
        }
        match self.state {
            GroupState::Stable | GroupState::CompletingRebalance => {
                if self.members.is_empty() {
                    self.generation_id += 1;
                    self.state = GroupState::Empty;
                    self.protocol_name = None;
                    self.leader = None;
                    self.phase_deadline_ms = None;
                } else {
                    let reason = format!("removing member {member_id}");
                    completions.extend(self.prepare_rebalance(&reason, now_ms));
                    completions.extend(self.maybe_complete_join(now_ms));
                }
            }
            GroupState::PreparingRebalance => completions.extend(self.maybe_complete_join(now_ms)),
            GroupState::Empty | GroupState::Dead => {}
        }
        completions
    }

    /// Timers: expired sessions, the end of a join phase, a sync that never came.
    pub fn tick(&mut self, now_ms: i64) -> Vec<Completion> {
        let mut completions = Vec::new();
        let pending = self.pending_members.len();
        let group_id = &self.group_id;
        self.pending_members.retain(|member_id, deadline| {
            let keep = *deadline > now_ms;
            if !keep {
                tracing::info!(group = %group_id, member = %member_id, "pending member removed after its session timeout");
            }
            keep
        });
        if self.pending_members.len() < pending {
            // A join phase may have been waiting only for them (as in Kafka, an expired
            // pending member completes it rather than the rebalance timeout).
            completions.extend(self.maybe_complete_join(now_ms));
        }
        if self.state == GroupState::PreparingRebalance
            && self.phase_deadline_ms.is_some_and(|d| now_ms >= d)
        {
            // The rebalance timeout (or the end of the initial delay): whoever rejoined.
            self.initial_delay_limit_ms = None;
            completions.extend(self.complete_join(now_ms));
        }
        if self.state == GroupState::CompletingRebalance
            && self.phase_deadline_ms.is_some_and(|d| now_ms >= d)
        {
            // The leader (or others) never synced: drop those who did not and start over.
            let silent: Vec<String> = self
                .members
                .values()
                .filter(|m| !m.awaiting_sync)
                .map(|m| m.member_id.clone())
                .collect();
            for member_id in silent {
                completions.extend(self.remove_and_rebalance(&member_id, now_ms));
            }
        }
        // Members parked in a join are kept alive by the join itself (as in Kafka).
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| !m.awaiting_join && !m.awaiting_sync && m.session_deadline_ms <= now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in expired {
            tracing::info!(group = %self.group_id, member = %member_id, "session timed out; removing member");
            completions.extend(self.remove_and_rebalance(&member_id, now_ms));
        }
        completions
    }

    /// The earliest time `tick` has work to do.
    pub fn next_deadline(&self) -> Option<i64> {
        let sessions = self
            .members
            .values()
            .filter(|m| !m.awaiting_join && !m.awaiting_sync)
            .map(|m| m.session_deadline_ms);
        let pending = self.pending_members.values().copied();
        sessions.chain(pending).chain(self.phase_deadline_ms).min()
    }
}

/// What a new member id starts with: a static member's instance id, else the client id
/// (Kafka's).
fn id_prefix(request: &JoinRequest) -> &str {
    request
        .group_instance_id
        .as_deref()
        .unwrap_or(&request.client_id)
}

/// The topics of a ConsumerProtocolSubscription (version i16, topics [string], ...).
pub fn parse_subscription_topics(metadata: &[u8]) -> Vec<String> {
    let mut topics = Vec::new();
    if metadata.len() < 6 {
        return topics;
    }
    let count = i32::from_be_bytes([metadata[2], metadata[3], metadata[4], metadata[5]]);
    let mut rest = &metadata[6..];
    for _ in 0..count.max(0) {
        if rest.len() < 2 {
            break;
        }
        let length = i16::from_be_bytes([rest[0], rest[1]]);
        if length < 0 || rest.len() < 2 + length as usize {
            break;
        }
        topics.push(String::from_utf8_lossy(&rest[2..2 + length as usize]).into_owned());
        rest = &rest[2 + length as usize..];
    }
    topics
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> GroupLimits {
        GroupLimits {
            initial_rebalance_delay_ms: 0,
            ..GroupLimits::default()
        }
    }

    fn request(member_id: &str) -> JoinRequest {
        JoinRequest {
            member_id: member_id.to_string(),
            group_instance_id: None,
            client_id: "client".into(),
            client_host: "/127.0.0.1".into(),
            session_timeout_ms: 10_000,
            rebalance_timeout_ms: 30_000,
            protocol_type: "consumer".into(),
            protocols: vec![
                ("range".into(), Bytes::from_static(b"r")),
                ("roundrobin".into(), Bytes::from_static(b"rr")),
            ],
            require_known_member_id: true,
        }
    }

    fn ids() -> impl FnMut(&str) -> String {
        let mut next = 0;
        move |client: &str| {
            next += 1;
            format!("{client}-{next}")
        }
    }

    /// A group of two members, joined and synced at generation 1.
    fn two_stable_members(gen: &mut impl FnMut(&str) -> String) -> (ClassicGroup, Vec<String>) {
        let mut group = ClassicGroup::new("g", limits());
        let mut members = Vec::new();
        for _ in 0..2 {
            let Reply::Now(r) = group.join(request(""), 0, &mut *gen).0 else {
                panic!()
            };
            members.push(r.member_id);
        }
        for member in &members {
            group.join(request(member), 0, &mut *gen);
        }
        for member in &members {
            group.sync(member, None, 1, vec![], 0);
        }
        (group, members)
    }

    #[test]
    fn two_members_join_sync_and_become_stable() {
        let mut group = ClassicGroup::new("g", limits());
        let mut gen = ids();
        let (reply, _) = group.join(request(""), 0, &mut gen);
        let Reply::Now(first) = reply else { panic!() };
        assert_eq!(first.error_code, error_code::MEMBER_ID_REQUIRED);
        let a = first.member_id.clone();
        let (reply, _) = group.join(request(&a), 0, &mut gen);
        let Reply::Now(joined) = reply else {
            panic!("a lone member completes at once")
        };
        assert_eq!(
            (
                joined.generation_id,
                joined.leader.as_str(),
                joined.members.len()
            ),
            (1, a.as_str(), 1)
        );
        let (reply, _) = group.sync(
            &a,
            None,
            1,
            vec![(a.clone(), Bytes::from_static(b"all"))],
            0,
        );
        assert_eq!(
            reply,
            Reply::Now(SyncResult {
                error_code: 0,
                protocol_type: Some("consumer".into()),
                protocol_name: Some("range".into()),
                assignment: Bytes::from_static(b"all")
            })
        );
        assert_eq!(group.state, GroupState::Stable);

        // A second member triggers a rebalance; the first learns it from its heartbeat.
        let Reply::Now(second) = group.join(request(""), 100, &mut gen).0 else {
            panic!()
        };
        let b = second.member_id;
        let (reply, _) = group.join(request(&b), 100, &mut gen);
        assert!(matches!(reply, Reply::Wait { .. }));
        assert_eq!(
            group.heartbeat(&a, None, 1, 200),
            error_code::REBALANCE_IN_PROGRESS
        );
        let (reply, completions) = group.join(request(&a), 300, &mut gen);
        let Reply::Now(leader_view) = reply else {
            panic!()
        };
        assert_eq!(
            (leader_view.generation_id, leader_view.members.len()),
            (2, 2)
        );
        assert!(
            matches!(&completions[..], [Completion::Join { member_id, result }] if *member_id == b && result.generation_id == 2 && result.members.is_empty())
        );
        // The follower's sync parks until the leader's arrives.
        assert!(matches!(
            group.sync(&b, None, 2, vec![], 400).0,
            Reply::Wait { .. }
        ));
        let (reply, completions) = group.sync(
            &a,
            None,
            2,
            vec![
                (a.clone(), Bytes::from_static(b"p0")),
                (b.clone(), Bytes::from_static(b"p1")),
            ],
            500,
        );
        assert!(
            matches!(reply, Reply::Now(SyncResult { ref assignment, .. }) if assignment.as_ref() == b"p0")
        );
        assert!(
            matches!(&completions[..], [Completion::Sync { result, .. }] if result.assignment.as_ref() == b"p1")
        );
        assert_eq!(group.state, GroupState::Stable);
        assert_eq!(
            group.heartbeat(&a, None, 1, 600),
            error_code::ILLEGAL_GENERATION
        );
        assert_eq!(
            group.heartbeat("stranger", None, 2, 600),
            error_code::UNKNOWN_MEMBER_ID
        );
    }

    #[test]
    fn a_silent_member_is_evicted_after_its_session_timeout() {
        let mut gen = ids();
        let (mut group, members) = two_stable_members(&mut gen);
        assert_eq!(group.state, GroupState::Stable);
        assert_eq!(
            group.heartbeat(&members[0], None, 1, 9_000),
            error_code::NONE
        );
        let completions = group.tick(10_001);
        assert!(completions.is_empty());
        assert_eq!(
            group.state,
            GroupState::PreparingRebalance,
            "member 1 expired"
        );
        assert!(!group.members.contains_key(&members[1]));
        let (reply, _) = group.join(request(&members[0]), 10_100, &mut gen);
        assert!(matches!(
            reply,
            Reply::Now(JoinResult {
                generation_id: 2,
                ..
            })
        ));
    }

    #[test]
    fn a_member_that_does_not_rejoin_is_dropped_at_the_rebalance_deadline() {
        let mut group = ClassicGroup::new("g", limits());
        let mut gen = ids();
        let mut members = Vec::new();
        for _ in 0..2 {
            let Reply::Now(r) = group.join(request(""), 0, &mut gen).0 else {
                panic!()
            };
            members.push(r.member_id);
        }
        group.join(request(&members[0]), 0, &mut gen);
        group.join(request(&members[1]), 0, &mut gen);
        group.sync(&members[0], None, 1, vec![], 0);
        // member 0 rejoins (new subscription); member 1 never does.
        let mut changed = request(&members[0]);
        changed.protocols = vec![("range".into(), Bytes::from_static(b"new"))];
        assert!(matches!(
            group.join(changed, 1_000, &mut gen).0,
            Reply::Wait { .. }
        ));
        let completions = group.tick(1_000 + 30_000);
        assert!(completions.iter().any(|c| matches!(c, Completion::Join { member_id, result } if *member_id == members[0] && result.generation_id == 2)));
        assert_eq!(group.members.len(), 1);
    }

    #[test]
    fn a_pending_member_that_never_rejoins_holds_the_join_only_for_its_session_timeout() {
        let mut group = ClassicGroup::new("g", limits());
        let mut gen = ids();
        let Reply::Now(first) = group.join(request(""), 0, &mut gen).0 else {
            panic!()
        };
        let a = first.member_id;
        group.join(request(&a), 0, &mut gen);
        group.sync(&a, None, 1, vec![], 0);
        assert_eq!(group.state, GroupState::Stable);
        // A client asks for a member id (KIP-394) and is never heard from again.
        let Reply::Now(pending) = group.join(request(""), 1_000, &mut gen).0 else {
            panic!()
        };
        assert_eq!(pending.error_code, error_code::MEMBER_ID_REQUIRED);
        // The member rebalances (a new subscription): its join waits for the pending one.
        let mut changed = request(&a);
        changed.protocols = vec![("range".into(), Bytes::from_static(b"new"))];
        assert!(matches!(
            group.join(changed, 2_000, &mut gen).0,
            Reply::Wait { .. }
        ));
        assert!(group.tick(10_000).is_empty(), "within the pending session");
        let completions = group.tick(11_001);
        assert!(
            completions.iter().any(|c| matches!(c, Completion::Join { member_id, result } if *member_id == a && result.generation_id == 2)),
            "the pending member expired at 11 000, long before the 32 000 rebalance deadline: {completions:?}"
        );
        assert_eq!(group.state, GroupState::CompletingRebalance);
    }

    #[test]
    fn members_joining_during_a_rebalance_do_not_extend_its_deadline() {
        let mut gen = ids();
        let (mut group, members) = two_stable_members(&mut gen);
        // Member 0 rejoins at 1 000 (deadline 31 000); member 1 keeps heartbeating and
        // never rejoins; newcomers keep arriving.
        let mut changed = request(&members[0]);
        changed.protocols = vec![("range".into(), Bytes::from_static(b"new"))];
        assert!(matches!(
            group.join(changed, 1_000, &mut gen).0,
            Reply::Wait { .. }
        ));
        for at in [10_000, 20_000, 30_000] {
            let Reply::Now(r) = group.join(request(""), at, &mut gen).0 else {
                panic!()
            };
            assert!(matches!(
                group.join(request(&r.member_id), at, &mut gen).0,
                Reply::Wait { .. }
            ));
            group.heartbeat(&members[1], None, 1, at);
        }
        let completions = group.tick(31_000);
        assert!(
            completions.iter().any(|c| matches!(c, Completion::Join { member_id, result } if *member_id == members[0] && result.generation_id == 2)),
            "the join completes at the first deadline: {completions:?}"
        );
        assert_eq!(
            group.members.len(),
            4,
            "member 1 dropped, three newcomers in"
        );
    }

    #[test]
    fn protocol_mismatch_and_bad_session_timeouts_are_refused() {
        let mut group = ClassicGroup::new("g", limits());
        let mut gen = ids();
        let mut short = request("");
        short.session_timeout_ms = 100;
        assert!(matches!(
            group.join(short, 0, &mut gen).0,
            Reply::Now(JoinResult {
                error_code: error_code::INVALID_SESSION_TIMEOUT,
                ..
            })
        ));
        let Reply::Now(r) = group.join(request(""), 0, &mut gen).0 else {
            panic!()
        };
        group.join(request(&r.member_id), 0, &mut gen);
        let mut other = request("");
        other.protocols = vec![("sticky".into(), Bytes::new())];
        assert!(matches!(
            group.join(other, 0, &mut gen).0,
            Reply::Now(JoinResult {
                error_code: error_code::INCONSISTENT_GROUP_PROTOCOL,
                ..
            })
        ));
    }

    fn static_request(member: &str, instance: &str) -> JoinRequest {
        let mut r = request(member);
        r.group_instance_id = Some(instance.to_string());
        r
    }

    /// Static members "a" and "b" joined (no MEMBER_ID_REQUIRED round trip for them):
    /// their ids.
    fn two_static_members(
        group: &mut ClassicGroup,
        gen: MemberIdGenerator<'_>,
    ) -> (String, String) {
        group.join(static_request("", "a"), 0, gen);
        group.join(static_request("", "b"), 0, gen);
        let a = group.static_members["a"].clone();
        (a, group.static_members["b"].clone())
    }

    /// Kafka rebalances when a static member comes back while the leader may hold the
    /// member list with its old id: the leader's assignment would give the new id
    /// nothing, and the partitions assigned to the old id nobody.
    /// Review: the old process's parked SyncGroup is answered FENCED_INSTANCE_ID when a
    /// new process takes its instance's place (Kafka's), not left to the broker's timeout.
    #[test]
    fn a_replaced_static_members_parked_sync_is_fenced() {
        let (mut group, mut gen) = (ClassicGroup::new("g", limits()), ids());
        let (a_id, _) = two_static_members(&mut group, &mut gen);
        group.join(static_request(&a_id, "a"), 0, &mut gen);
        assert_eq!(group.state, GroupState::CompletingRebalance);
        let follower = if group.leader.as_deref() == Some(a_id.as_str()) {
            "b"
        } else {
            "a"
        };
        let old = group.static_members[follower].clone();
        let (reply, _) = group.sync(&old, Some(follower), group.generation_id, vec![], 5);
        assert!(
            matches!(reply, Reply::Wait { .. }),
            "the follower waits for the leader"
        );
        let (_, completions) = group.join(static_request("", follower), 10, &mut gen);
        assert!(
            completions.iter().any(|c| matches!(
                c,
                Completion::Sync { member_id, result }
                    if *member_id == old && result.error_code == error_code::FENCED_INSTANCE_ID
            )),
            "{completions:?}"
        );
    }

    #[test]
    fn a_static_member_back_during_the_sync_phase_starts_a_rebalance() {
        let (mut group, mut gen) = (ClassicGroup::new("g", limits()), ids());
        let (a_id, _) = two_static_members(&mut group, &mut gen);
        group.join(static_request(&a_id, "a"), 0, &mut gen);
        assert_eq!(group.state, GroupState::CompletingRebalance);
        let generation = group.generation_id;

        let (reply, _) = group.join(static_request("", "b"), 10, &mut gen);
        assert!(
            matches!(reply, Reply::Wait { .. }),
            "it joins the next generation"
        );
        assert_eq!(group.state, GroupState::PreparingRebalance);
        let b_id = group.static_members["b"].clone();
        let (reply, completions) = group.join(static_request(&a_id, "a"), 20, &mut gen);
        let Reply::Now(a_joined) = reply else {
            panic!("a's rejoin completes the join phase")
        };
        assert_eq!(a_joined.generation_id, generation + 1);
        assert!(
            completions
                .iter()
                .any(|c| matches!(c, Completion::Join { member_id, .. } if *member_id == b_id)),
            "b's parked join is answered with the new generation"
        );
        if a_joined.leader == a_id {
            let listed: Vec<&String> = a_joined.members.iter().map(|m| &m.0).collect();
            assert!(listed.contains(&&b_id), "the leader sees b's new id");
        }
    }

    #[test]
    fn static_members_keep_their_assignment_across_a_restart() {
        let (mut group, mut gen) = (ClassicGroup::new("g", limits()), ids());
        let (a_id, b_id) = two_static_members(&mut group, &mut gen);
        // A static member's id starts with its instance id, as Kafka's.
        assert!(
            a_id.starts_with("a-") && b_id.starts_with("b-"),
            "{a_id} {b_id}"
        );
        // a rejoins: both are now waiting, so the join phase completes.
        let (reply, _) = group.join(static_request(&a_id, "a"), 0, &mut gen);
        assert!(matches!(
            reply,
            Reply::Now(JoinResult { error_code: 0, .. })
        ));
        assert_eq!(group.state, GroupState::CompletingRebalance);
        let leader = group.leader.clone().unwrap();
        let generation = group.generation_id;
        let assignments = vec![
            (a_id.clone(), Bytes::from_static(b"A")),
            (b_id.clone(), Bytes::from_static(b"B")),
        ];
        let (follower, follower_instance, follower_assignment) = if leader == a_id {
            (b_id.clone(), "b", b"B")
        } else {
            (a_id.clone(), "a", b"A")
        };
        group.sync(&leader, None, generation, assignments, 0);
        group.sync(&follower, None, generation, vec![], 0);
        assert_eq!(group.state, GroupState::Stable);

        // The follower restarts: same instance id, no member id. No rebalance.
        let Reply::Now(rejoined) = group
            .join(static_request("", follower_instance), 100, &mut gen)
            .0
        else {
            panic!("a static rejoin of a follower is answered at once")
        };
        assert_eq!(
            (rejoined.error_code, rejoined.generation_id),
            (0, generation)
        );
        assert_ne!(rejoined.member_id, follower);
        assert_eq!(group.state, GroupState::Stable);
        let Reply::Now(sync) = group
            .sync(
                &rejoined.member_id,
                Some(follower_instance),
                generation,
                vec![],
                100,
            )
            .0
        else {
            panic!()
        };
        assert_eq!(sync.assignment.as_ref(), follower_assignment);
        // The old identity is fenced.
        assert_eq!(
            group.heartbeat(&follower, Some(follower_instance), generation, 100),
            error_code::FENCED_INSTANCE_ID
        );

        // The leader restarts too, with new subscription bytes (a Java consumer's carry
        // its owned partitions): still no rebalance; it is told to skip the assignment.
        let leader_instance = if follower_instance == "a" { "b" } else { "a" };
        let mut changed = static_request("", leader_instance);
        changed.protocols = vec![(
            "range".into(),
            Bytes::from_static(b"r-with-owned-partitions"),
        )];
        let Reply::Now(leader_back) = group.join(changed, 200, &mut gen).0 else {
            panic!()
        };
        assert_eq!(
            (leader_back.generation_id, leader_back.skip_assignment),
            (generation, true)
        );
        assert_eq!(group.state, GroupState::Stable);
        assert_eq!(leader_back.members.len(), 2);
    }

    #[test]
    fn leaving_rebalances_the_rest() {
        let mut group = ClassicGroup::new("g", limits());
        let mut gen = ids();
        let mut ids_joined = Vec::new();
        for _ in 0..2 {
            let Reply::Now(r) = group.join(request(""), 0, &mut gen).0 else {
                panic!()
            };
            ids_joined.push(r.member_id);
        }
        group.join(request(&ids_joined[0]), 0, &mut gen);
        group.join(request(&ids_joined[1]), 0, &mut gen);
        group.sync(&ids_joined[0], None, 1, vec![], 0);
        group.sync(&ids_joined[1], None, 1, vec![], 0);
        let (code, _) = group.leave(&ids_joined[1], None, 10);
        assert_eq!(code, 0);
        assert_eq!(group.state, GroupState::PreparingRebalance);
        let (code, _) = group.leave("nobody", None, 10);
        assert_eq!(code, error_code::UNKNOWN_MEMBER_ID);
    }

    #[test]
    fn subscription_topics_are_parsed() {
        let mut metadata = vec![0, 1, 0, 0, 0, 2];
        for topic in ["orders", "users"] {
            metadata.extend_from_slice(&(topic.len() as i16).to_be_bytes());
            metadata.extend_from_slice(topic.as_bytes());
        }
        assert_eq!(
            parse_subscription_topics(&metadata),
            vec!["orders", "users"]
        );
        assert!(parse_subscription_topics(&[1, 2]).is_empty());
    }
}
