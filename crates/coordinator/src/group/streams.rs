//! One streams group under KIP-1071 (StreamsGroupHeartbeat, Kafka Streams'
//! `group.protocol=streams`): the application sends its topology, the broker decides the
//! internal topics' partition counts and has them created (streams_topology.rs), assigns
//! tasks (subtopology, partition) with the sticky assignor (streams_assignor.rs), and
//! moves each member to its target as KIP-848 moves consumers: a member first gives up
//! the tasks it must lose, then receives those no other member of any process still
//! runs. A plain state machine: time and topic metadata are passed in. The behaviour is
//! Kafka 4.4's, described in docs/design/streams-groups.md (section numbers below).

use std::collections::{BTreeMap, BTreeSet, HashMap};

use strand_types::error_code;

use super::consumer::{HeartbeatError, TopicView, LEAVE_EPOCH, STATIC_LEAVE_EPOCH};
use super::streams_assignor::{self, AssignorMember, AssignorSubtopology};
use super::streams_records::{
    StoredTopology, TaskIds, MEMBER_STATE_STABLE, MEMBER_STATE_UNRELEASED_TASKS,
    MEMBER_STATE_UNREVOKED_TASKS,
};
use super::streams_topology::{self, ConfiguredTopology, TopicToCreate};

/// Status codes of a heartbeat answer (2.7) other than the topic ones.
pub const STATUS_STALE_TOPOLOGY: i8 = 0;
pub const STATUS_SHUTDOWN_APPLICATION: i8 = 4;
pub const STATUS_ASSIGNMENT_DELAYED: i8 = 5;

/// The only built-in assignor.
pub const ASSIGNOR_STICKY: &str = "sticky";

/// group.streams.* settings (a group's streams.* configs override them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StreamsGroupLimits {
    pub session_timeout_ms: i32,
    pub heartbeat_interval_ms: i32,
    pub max_size: usize,
    pub num_standby_replicas: u32,
    pub initial_rebalance_delay_ms: i32,
    pub assignment_interval_ms: i32,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
}

impl Default for StreamsGroupLimits {
    fn default() -> Self {
        StreamsGroupLimits {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: i32::MAX as usize,
            num_standby_replicas: 0,
            initial_rebalance_delay_ms: 3_000,
            assignment_interval_ms: 1_000,
            task_offset_interval_ms: 60_000,
            acceptable_recovery_lag: 10_000,
        }
    }
}

/// Active, standby and warm-up tasks (by subtopology).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Tasks {
    pub active: TaskIds,
    pub standby: TaskIds,
    pub warmup: TaskIds,
}

impl Tasks {
    pub fn is_empty(&self) -> bool {
        self.active.is_empty() && self.standby.is_empty() && self.warmup.is_empty()
    }

    fn kinds(&self) -> [&TaskIds; 3] {
        [&self.active, &self.standby, &self.warmup]
    }
}

/// Whether two task lists name the same tasks (a subtopology listed without partitions
/// names none).
fn same_tasks(a: &Tasks, b: &Tasks) -> bool {
    let named = |ids: &TaskIds| -> TaskIds {
        ids.iter()
            .filter(|(_, partitions)| !partitions.is_empty())
            .map(|(s, p)| (s.clone(), p.clone()))
            .collect()
    };
    a.kinds()
        .iter()
        .zip(b.kinds())
        .all(|(x, y)| named(x) == named(y))
}

/// A member's state in its move to the target (Kafka's MemberState bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemberState {
    Stable,
    /// Must report tasks revoked before it advances.
    UnrevokedTasks,
    /// At the target epoch, waiting for tasks other members still run.
    UnreleasedTasks,
}

impl MemberState {
    pub fn code(self) -> i8 {
        match self {
            MemberState::Stable => MEMBER_STATE_STABLE,
            MemberState::UnrevokedTasks => MEMBER_STATE_UNREVOKED_TASKS,
            MemberState::UnreleasedTasks => MEMBER_STATE_UNRELEASED_TASKS,
        }
    }

    /// An unknown byte (Kafka's UNKNOWN) is read as unrevoked: the member must report
    /// what it owns before it gets anything new.
    pub fn from_code(code: i8) -> MemberState {
        match code {
            MEMBER_STATE_STABLE => MemberState::Stable,
            MEMBER_STATE_UNRELEASED_TASKS => MemberState::UnreleasedTasks,
            _ => MemberState::UnrevokedTasks,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsMember {
    pub member_id: String,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub rebalance_timeout_ms: i32,
    pub topology_epoch: i32,
    pub process_id: String,
    pub user_endpoint: Option<(String, u16)>,
    /// Sorted by key.
    pub client_tags: Vec<(String, String)>,
    pub member_epoch: i32,
    pub previous_member_epoch: i32,
    pub state: MemberState,
    pub assigned: Tasks,
    /// The member epoch each active task was assigned at (offset commits from an older
    /// epoch are accepted for tasks it had by then).
    pub active_epochs: BTreeMap<(String, i32), i32>,
    pub pending_revocation: Tasks,
    /// Last reported changelog offset sums (in memory only).
    pub task_offsets: BTreeMap<(String, i32), i64>,
    pub task_end_offsets: BTreeMap<(String, i32), i64>,
    pub session_deadline_ms: i64,
    /// (deadline, the epoch it was armed at): the member is fenced if it has not given
    /// up its tasks by then.
    pub revocation_deadline: Option<(i64, i32)>,
}

impl StreamsMember {
    /// A member that has sent nothing yet.
    pub(crate) fn blank(member_id: &str) -> StreamsMember {
        StreamsMember {
            member_id: member_id.to_string(),
            instance_id: None,
            rack_id: None,
            client_id: String::new(),
            client_host: String::new(),
            rebalance_timeout_ms: -1,
            topology_epoch: 0,
            process_id: String::new(),
            user_endpoint: None,
            client_tags: Vec::new(),
            member_epoch: 0,
            previous_member_epoch: 0,
            state: MemberState::Stable,
            assigned: Tasks::default(),
            active_epochs: BTreeMap::new(),
            pending_revocation: Tasks::default(),
            task_offsets: BTreeMap::new(),
            task_end_offsets: BTreeMap::new(),
            session_deadline_ms: 0,
            revocation_deadline: None,
        }
    }

    /// The fields record type 19 holds (a change of them is written).
    fn metadata(&self) -> impl PartialEq + '_ {
        (
            &self.instance_id,
            &self.rack_id,
            &self.client_id,
            &self.client_host,
            self.rebalance_timeout_ms,
            self.topology_epoch,
            &self.process_id,
            &self.user_endpoint,
            &self.client_tags,
        )
    }
}

/// A StreamsGroupHeartbeat, decoded and checked (`validate`).
#[derive(Debug, Clone, Default)]
pub struct StreamsHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub endpoint_information_epoch: i32,
    pub instance_id: Option<String>,
    pub rack_id: Option<String>,
    pub rebalance_timeout_ms: i32,
    pub topology: Option<StoredTopology>,
    /// What the member runs (None: unchanged since its last heartbeat).
    pub owned: Option<Tasks>,
    /// Which of the active, standby and warm-up lists the request carried when it
    /// carried some but not all (`owned` is then None; Kafka refuses it, in its order).
    pub partial_task_lists: [bool; 3],
    pub process_id: Option<String>,
    pub user_endpoint: Option<(String, u16)>,
    pub client_tags: Option<Vec<(String, String)>>,
    pub task_offsets: Option<Vec<(String, i32, i64)>>,
    pub task_end_offsets: Option<Vec<(String, i32, i64)>>,
    pub shutdown_application: bool,
    pub client_id: String,
    pub client_host: String,
}

/// Partitions by topic.
pub type TopicPartitions = BTreeMap<String, BTreeSet<i32>>;

/// What a member with an endpoint serves, for interactive queries (2.8).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EndpointPartitions {
    pub endpoint: (String, u16),
    pub active: TopicPartitions,
    /// Standby and warm-up tasks' partitions.
    pub standby: TopicPartitions,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StreamsHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    pub task_offset_interval_ms: i32,
    pub acceptable_recovery_lag: i64,
    pub statuses: Vec<(i8, String)>,
    /// The member's whole assignment when it joined or its tasks changed.
    pub tasks: Option<Tasks>,
    pub endpoint_information_epoch: i32,
    pub endpoints: Option<Vec<EndpointPartitions>>,
    /// Internal topics the broker should create for the group.
    pub topics_to_create: Vec<TopicToCreate>,
}

fn error(code: i16, message: impl Into<String>) -> HeartbeatError {
    HeartbeatError {
        code,
        message: message.into(),
    }
}

fn invalid(message: impl Into<String>) -> HeartbeatError {
    error(error_code::INVALID_REQUEST, message)
}

/// The request checks Kafka makes before the group is looked at (2.3, step 2).
pub fn validate(request: &StreamsHeartbeat, group_id: &str) -> Result<(), HeartbeatError> {
    let blank = |s: &str| s.trim().is_empty();
    if blank(&request.member_id) {
        return Err(invalid("MemberId can't be empty."));
    }
    if blank(group_id) {
        return Err(invalid("GroupId can't be empty."));
    }
    if request.instance_id.as_deref().is_some_and(blank) {
        return Err(invalid("InstanceId can't be empty."));
    }
    if request.rack_id.as_deref().is_some_and(blank) {
        return Err(invalid("RackId can't be empty."));
    }
    if let Some(topology) = &request.topology {
        if topology
            .subtopologies
            .iter()
            .any(|s| !s.source_topic_regex.is_empty())
        {
            return Err(invalid(
                "Regular expressions for source topics are not supported yet.",
            ));
        }
    }
    match request.member_epoch {
        0 => {
            if request.rebalance_timeout_ms == -1 {
                return Err(invalid(
                    "RebalanceTimeoutMs must be provided in first request.",
                ));
            }
            let owned = request.owned.as_ref();
            for (kind, name) in [(0, "ActiveTasks"), (1, "StandbyTasks"), (2, "WarmupTasks")] {
                let empty = match owned {
                    Some(owned) => owned.kinds()[kind].is_empty(),
                    // Sent (empty) in a partial request: that rule comes later.
                    None => request.partial_task_lists[kind],
                };
                if !empty {
                    return Err(invalid(format!("{name} must be empty when (re-)joining.")));
                }
            }
            let Some(topology) = &request.topology else {
                return Err(invalid("Topology must be non-null when (re-)joining."));
            };
            for changelog in topology
                .subtopologies
                .iter()
                .flat_map(|s| s.state_changelog_topics.iter())
            {
                if changelog.partitions != 0 {
                    return Err(error(
                        error_code::STREAMS_INVALID_TOPOLOGY,
                        format!(
                            "Changelog topic {} must have an undefined partition count, but it is set to {}.",
                            changelog.name, changelog.partitions
                        ),
                    ));
                }
            }
        }
        STATIC_LEAVE_EPOCH if request.instance_id.is_none() => {
            return Err(invalid("InstanceId can't be null."));
        }
        epoch if epoch < STATIC_LEAVE_EPOCH => {
            return Err(invalid(format!(
                "MemberEpoch is {epoch}, but must be greater than or equal to -2."
            )));
        }
        _ => {}
    }
    if request.partial_task_lists.iter().any(|sent| *sent) {
        return Err(invalid(
            "If one task-type is non-null, all must be non-null.",
        ));
    }
    if request.member_epoch != 0 && request.topology.is_some() {
        return Err(invalid("Topology can only be provided when (re-)joining."));
    }
    for offsets in [&request.task_offsets, &request.task_end_offsets]
        .into_iter()
        .flatten()
    {
        let mut seen = BTreeSet::new();
        for (subtopology, partition, _) in offsets {
            if !seen.insert((subtopology, partition)) {
                return Err(invalid(format!("Task offsets contain a duplicate entry for subtopology {subtopology} and partition {partition}.")));
            }
        }
    }
    Ok(())
}

/// Kafka's streams group states (as ListGroups and describe spell them).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamsGroupState {
    Empty,
    NotReady,
    Assigning,
    Reconciling,
    Stable,
}

impl StreamsGroupState {
    pub fn name(self) -> &'static str {
        match self {
            StreamsGroupState::Empty => "Empty",
            StreamsGroupState::NotReady => "NotReady",
            StreamsGroupState::Assigning => "Assigning",
            StreamsGroupState::Reconciling => "Reconciling",
            StreamsGroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct StreamsGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    /// When the target was last computed (0: never), for streams.assignment.interval.ms.
    pub assignment_timestamp_ms: i64,
    /// The topology epoch the target was computed for while ready; -1 when not ready.
    pub validated_topology_epoch: i32,
    /// Of the topics the topology needs, as last configured (streams_topology::metadata_hash).
    pub metadata_hash: i64,
    /// The assignment configs the target was computed with (num.standby.replicas).
    pub last_assignment_configs: BTreeMap<String, String>,
    /// Kept as read (a topology description plugin's epochs; Strand has none).
    pub description_epochs: (i32, i32),
    pub topology: Option<StoredTopology>,
    pub members: BTreeMap<String, StreamsMember>,
    pub target: BTreeMap<String, Tasks>,
    /// Instance id -> member id.
    pub static_members: HashMap<String, String>,
    /// The topology configured against the topics (in memory; recomputed when the
    /// topics' hash changes).
    configured: Option<(ConfiguredTopology, i64)>,
    /// Bumped when a member's endpoint or an endpoint member's tasks change.
    pub endpoint_epoch: i32,
    /// The member that asked every instance to shut down (until the group is empty).
    pub shutdown_requested_by: Option<String>,
    /// streams.initial.rebalance.delay.ms: no target before this.
    pub initial_delay_deadline_ms: Option<i64>,
    limits: StreamsGroupLimits,
}

impl StreamsGroup {
    pub fn new(group_id: &str, limits: StreamsGroupLimits) -> StreamsGroup {
        StreamsGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            assignment_timestamp_ms: 0,
            validated_topology_epoch: -1,
            metadata_hash: 0,
            last_assignment_configs: BTreeMap::new(),
            description_epochs: (-1, -1),
            topology: None,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            static_members: HashMap::new(),
            configured: None,
            endpoint_epoch: 0,
            shutdown_requested_by: None,
            initial_delay_deadline_ms: None,
            limits,
        }
    }

    pub fn set_limits(&mut self, limits: StreamsGroupLimits) {
        self.limits = limits;
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn has_member(&self, member_id: &str) -> bool {
        self.members.contains_key(member_id)
    }

    pub fn state(&self) -> StreamsGroupState {
        if self.members.is_empty() {
            StreamsGroupState::Empty
        } else if self
            .topology
            .as_ref()
            .is_none_or(|t| t.epoch != self.validated_topology_epoch)
        {
            StreamsGroupState::NotReady
        } else if self.assignment_epoch < self.group_epoch {
            StreamsGroupState::Assigning
        } else if self
            .members
            .values()
            .any(|m| m.state != MemberState::Stable || m.member_epoch != self.assignment_epoch)
        {
            StreamsGroupState::Reconciling
        } else {
            StreamsGroupState::Stable
        }
    }

    /// The topology configured against the topics, when it has been.
    pub fn configured(&self) -> Option<&ConfiguredTopology> {
        self.configured.as_ref().map(|(c, _)| c)
    }

    /// After a load from the log: every member has a session from now, and one that was
    /// giving up tasks its rebalance timeout.
    pub fn restored(&mut self, now_ms: i64) {
        let session = self.limits.session_timeout_ms as i64;
        for member in self.members.values_mut() {
            member.session_deadline_ms = now_ms + session;
            if member.state == MemberState::UnrevokedTasks {
                member.revocation_deadline = Some((
                    now_ms + member.rebalance_timeout_ms.max(0) as i64,
                    member.member_epoch,
                ));
            }
            if let Some(instance) = &member.instance_id {
                self.static_members
                    .insert(instance.clone(), member.member_id.clone());
            }
        }
    }

    /// Topics of the topology the group reads: source and repartition-source topics
    /// (OffsetDelete refuses them while the group has members).
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        let mut out = BTreeSet::new();
        for s in self.topology.iter().flat_map(|t| t.subtopologies.iter()) {
            out.extend(s.source_topics.iter().cloned());
            out.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        }
        out
    }

    /// One heartbeat. On an error the group is left as it was.
    pub fn heartbeat(
        &mut self,
        request: StreamsHeartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<StreamsHeartbeatResult, HeartbeatError> {
        let mut next = self.clone();
        let result = match request.member_epoch {
            LEAVE_EPOCH | STATIC_LEAVE_EPOCH => next.leave(&request),
            _ => next.join_or_heartbeat(request, now_ms, topics),
        }?;
        *self = next;
        Ok(result)
    }

    fn leave(
        &mut self,
        request: &StreamsHeartbeat,
    ) -> Result<StreamsHeartbeatResult, HeartbeatError> {
        let member_id = self.resolve_existing(request)?;
        if request.shutdown_application && self.shutdown_requested_by.is_none() {
            self.shutdown_requested_by = Some(member_id.clone());
        }
        if request.member_epoch == LEAVE_EPOCH {
            self.fence(&member_id);
        } else {
            // A static member leaving for a while (a restart): it keeps its place and
            // tasks, without a rebalance, until its session runs out.
            let member = self.members.get_mut(&member_id).expect("resolved");
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = STATIC_LEAVE_EPOCH;
            member.pending_revocation = Tasks::default();
            member.state = MemberState::Stable;
            member.revocation_deadline = None;
            for epoch in member.active_epochs.values_mut() {
                *epoch = 0;
            }
        }
        Ok(StreamsHeartbeatResult {
            member_id: request.member_id.clone(),
            member_epoch: request.member_epoch,
            heartbeat_interval_ms: 0,
            task_offset_interval_ms: 0,
            // Kafka's leave answer leaves these at their defaults.
            acceptable_recovery_lag: -1,
            statuses: Vec::new(),
            tasks: None,
            endpoint_information_epoch: 0,
            endpoints: None,
            topics_to_create: Vec::new(),
        })
    }

    /// The member a non-joining request speaks for (2.5).
    fn resolve_existing(&self, request: &StreamsHeartbeat) -> Result<String, HeartbeatError> {
        if let Some(instance) = &request.instance_id {
            let Some(holder) = self.static_members.get(instance) else {
                return Err(error(
                    error_code::UNKNOWN_MEMBER_ID,
                    format!("Instance id {instance} is unknown."),
                ));
            };
            if *holder != request.member_id {
                return Err(error(
                    error_code::FENCED_INSTANCE_ID,
                    format!(
                        "Static member {} with instance id {instance} was fenced by member {holder}.",
                        request.member_id
                    ),
                ));
            }
        }
        if !self.members.contains_key(&request.member_id) {
            return Err(error(
                error_code::UNKNOWN_MEMBER_ID,
                format!(
                    "Member {} is not a member of group {}.",
                    request.member_id, self.group_id
                ),
            ));
        }
        Ok(request.member_id.clone())
    }

    /// Removes a member (left, or its session or rebalance timeout ran out): a new
    /// group epoch, so the others get a new target.
    pub fn fence(&mut self, member_id: &str) {
        let Some(member) = self.members.remove(member_id) else {
            return;
        };
        if let Some(instance) = &member.instance_id {
            if self.static_members.get(instance).map(String::as_str) == Some(member_id) {
                self.static_members.remove(instance);
            }
        }
        self.target.remove(member_id);
        self.group_epoch += 1;
        if member.user_endpoint.is_some() {
            self.endpoint_epoch += 1;
        }
        if self.members.is_empty() {
            self.assignment_epoch = self.group_epoch;
            self.assignment_timestamp_ms = 0;
            self.shutdown_requested_by = None;
            self.initial_delay_deadline_ms = None;
        }
    }

    fn join_or_heartbeat(
        &mut self,
        request: StreamsHeartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<StreamsHeartbeatResult, HeartbeatError> {
        let joining = request.member_epoch == 0;
        let was_empty = self.members.is_empty();
        let member_id = if joining {
            self.admit(&request)?
        } else {
            let member_id = self.resolve_existing(&request)?;
            self.check_epoch(&member_id, &request)?;
            member_id
        };
        let mut recompute = false;
        let new_member = !self.members.contains_key(&member_id);
        if new_member && self.group_epoch == 0 {
            // A group starts at epoch 1 with an (empty) target at epoch 1.
            self.group_epoch = 1;
            self.assignment_epoch = 1;
        }
        let old = self
            .members
            .get(&member_id)
            .cloned()
            .unwrap_or_else(|| StreamsMember::blank(&member_id));
        let before_tasks = old.assigned.clone();
        let mut member = old.clone();
        if request.instance_id.is_some() {
            member.instance_id = request.instance_id.clone();
        }
        if request.rack_id.is_some() {
            member.rack_id = request.rack_id.clone();
        }
        if request.rebalance_timeout_ms != -1 {
            member.rebalance_timeout_ms = request.rebalance_timeout_ms;
        }
        if let Some(process_id) = &request.process_id {
            member.process_id = process_id.clone();
        }
        if let Some(tags) = &request.client_tags {
            let mut tags = tags.clone();
            tags.sort();
            member.client_tags = tags;
        }
        if let Some(topology) = &request.topology {
            member.topology_epoch = topology.epoch;
        }
        member.client_id = request.client_id.clone();
        member.client_host = request.client_host.clone();
        if joining || request.user_endpoint.is_some() {
            member.user_endpoint = request.user_endpoint.clone();
        }
        let endpoint_changed = member.user_endpoint != old.user_endpoint;
        if new_member || member.metadata() != old.metadata() {
            let static_member = member.instance_id.is_some();
            if new_member
                || !static_member
                || member.topology_epoch != old.topology_epoch
                || member.rack_id != old.rack_id
                || member.client_tags != old.client_tags
                || member.process_id != old.process_id
            {
                recompute = true;
            }
        }
        if let Some(instance) = &member.instance_id {
            self.static_members
                .insert(instance.clone(), member_id.clone());
        }
        self.members.insert(member_id.clone(), member);

        // 2.4: the first topology sent is the group's; later ones must be the same.
        let mut stale_topology = false;
        if let Some(topology) = request.topology {
            match &self.topology {
                None => {
                    self.topology = Some(topology);
                    self.configured = None;
                    recompute = true;
                }
                Some(stored) if topology.epoch < stored.epoch => stale_topology = true,
                Some(stored) if *stored != topology => {
                    return Err(invalid("Topology updates are not supported yet."));
                }
                Some(_) => {}
            }
        }
        let group_topology_epoch = self.topology.as_ref().map_or(0, |t| t.epoch);
        if self.members[&member_id].topology_epoch < group_topology_epoch {
            stale_topology = true;
        }

        // 2.6: configure the topology when the topics it needs changed.
        let hash = self
            .topology
            .as_ref()
            .map_or(0, |t| streams_topology::metadata_hash(t, topics));
        if let Some(topology) = &self.topology {
            if self.configured.as_ref().is_none_or(|(_, h)| *h != hash) {
                let configured = streams_topology::configure(topology, topics)
                    .map_err(|e| error(e.code(), e.0))?;
                self.configured = Some((configured, hash));
            }
        }
        if hash != self.metadata_hash {
            self.metadata_hash = hash;
            recompute = true;
        }
        let ready = self.configured().is_some_and(|c| c.ready);
        let validated = if ready { group_topology_epoch } else { -1 };
        if ready {
            if let Some(owned) = &request.owned {
                self.check_owned(owned)?;
            }
        }
        if validated != self.validated_topology_epoch {
            self.validated_topology_epoch = validated;
            recompute = true;
        }
        let member = self.members.get_mut(&member_id).expect("inserted");
        if let Some(offsets) = &request.task_offsets {
            member.task_offsets = offsets
                .iter()
                .map(|(s, p, o)| ((s.clone(), *p), *o))
                .collect();
        }
        if let Some(offsets) = &request.task_end_offsets {
            member.task_end_offsets = offsets
                .iter()
                .map(|(s, p, o)| ((s.clone(), *p), *o))
                .collect();
        }
        // The configs a new epoch is assigned with are the group's from that epoch on.
        let configs = self.assignment_configs();
        if configs != self.last_assignment_configs {
            self.last_assignment_configs = configs;
            recompute = true;
        }
        if recompute {
            self.group_epoch += 1;
        }
        // 2.9 step 9: a group that was empty waits for more members before assigning.
        if was_empty && new_member && self.limits.initial_rebalance_delay_ms > 0 {
            self.initial_delay_deadline_ms
                .get_or_insert(now_ms + self.limits.initial_rebalance_delay_ms as i64);
        }
        let mut statuses = Vec::new();
        if stale_topology {
            statuses.push((
                STATUS_STALE_TOPOLOGY,
                format!(
                    "The member's topology epoch {} is behind the group's topology epoch {group_topology_epoch}.",
                    self.members[&member_id].topology_epoch
                ),
            ));
        }
        if let Some(delayed) = self.update_target(now_ms)? {
            statuses.push((STATUS_ASSIGNMENT_DELAYED, delayed.to_string()));
        }
        let mut topics_to_create = Vec::new();
        if let Some(configured) = self.configured() {
            if let Some(status) = &configured.status {
                statuses.push(status.clone());
            }
            topics_to_create = configured.topics_to_create.clone();
        }
        if request.shutdown_application && self.shutdown_requested_by.is_none() {
            self.shutdown_requested_by = Some(member_id.clone());
        }
        if let Some(requester) = &self.shutdown_requested_by {
            statuses.push((
                STATUS_SHUTDOWN_APPLICATION,
                format!("Streams group member {requester} encountered a fatal error and requested a shutdown for the entire application."),
            ));
        }

        self.reconcile(&member_id, request.owned.as_ref(), now_ms)?;
        let session = self.limits.session_timeout_ms as i64;
        let member = self.members.get_mut(&member_id).expect("inserted");
        member.session_deadline_ms = now_ms + session;
        let tasks_changed = member.assigned != before_tasks;
        if endpoint_changed || (tasks_changed && member.user_endpoint.is_some()) {
            self.endpoint_epoch += 1;
        }
        let member = &self.members[&member_id];
        let endpoints = (request.endpoint_information_epoch != self.endpoint_epoch)
            .then(|| self.endpoints(&member_id, topics));
        // Kafka sends the tasks only to a joining member or when this heartbeat changed
        // them. A member reporting other tasks than it was given missed an answer (lost
        // with its connection, after which Kafka Streams reports its task lists again):
        // without the tasks again it would never run those the lost answer carried, so it
        // gets them (a deliberate difference; an answer repeating a member's assignment
        // changes nothing for it).
        let missed = request
            .owned
            .as_ref()
            .is_some_and(|owned| !same_tasks(owned, &member.assigned));
        Ok(StreamsHeartbeatResult {
            member_id: member_id.clone(),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: self.limits.heartbeat_interval_ms,
            task_offset_interval_ms: self.limits.task_offset_interval_ms,
            acceptable_recovery_lag: self.limits.acceptable_recovery_lag,
            statuses,
            tasks: (joining || tasks_changed || missed).then(|| member.assigned.clone()),
            endpoint_information_epoch: self.endpoint_epoch,
            endpoints,
            topics_to_create,
        })
    }

    /// A joining member (epoch 0): its id admitted, a static one replacing its previous
    /// incarnation (2.5).
    fn admit(&mut self, request: &StreamsHeartbeat) -> Result<String, HeartbeatError> {
        let member_id = request.member_id.clone();
        if let Some(instance) = &request.instance_id {
            if let Some(holder) = self.static_members.get(instance).cloned() {
                if holder != member_id {
                    let previous = self.members.get(&holder);
                    if previous.is_some_and(|m| m.member_epoch != STATIC_LEAVE_EPOCH) {
                        return Err(error(
                            error_code::UNRELEASED_INSTANCE_ID,
                            format!("Static member {member_id} with instance id {instance} cannot join the group because the instance id is owned by {holder} member."),
                        ));
                    }
                    if let Some(mut previous) = self.members.remove(&holder) {
                        // The new incarnation takes the old one's place and tasks.
                        previous.member_id = member_id.clone();
                        previous.member_epoch = 0;
                        previous.previous_member_epoch = 0;
                        if let Some(target) = self.target.remove(&holder) {
                            self.target.insert(member_id.clone(), target);
                        }
                        self.members.insert(member_id.clone(), previous);
                    }
                    self.static_members
                        .insert(instance.clone(), member_id.clone());
                }
            }
        }
        if !self.members.contains_key(&member_id) && self.members.len() >= self.limits.max_size {
            return Err(error(
                error_code::GROUP_MAX_SIZE_REACHED,
                format!(
                    "The streams group has reached its maximum capacity of {} members.",
                    self.limits.max_size
                ),
            ));
        }
        Ok(member_id)
    }

    /// The epoch a heartbeat carries (2.5): its current one, or its previous one when
    /// it only reports tasks it still has (a lost answer).
    fn check_epoch(
        &self,
        member_id: &str,
        request: &StreamsHeartbeat,
    ) -> Result<(), HeartbeatError> {
        let member = &self.members[member_id];
        let received = request.member_epoch;
        if received > member.member_epoch {
            return Err(error(
                error_code::FENCED_MEMBER_EPOCH,
                format!("The streams group member has a greater member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", member.member_epoch),
            ));
        }
        if received < member.member_epoch {
            let subset = |owned: &TaskIds, have: &TaskIds| {
                owned.iter().all(|(s, ps)| {
                    have.get(s)
                        .is_some_and(|mine| ps.iter().all(|p| mine.contains(p)))
                })
            };
            let fits = request.owned.as_ref().is_some_and(|owned| {
                subset(&owned.active, &member.assigned.active)
                    && subset(&owned.standby, &member.assigned.standby)
                    && subset(&owned.warmup, &member.assigned.warmup)
            });
            if received != member.previous_member_epoch || !fits {
                return Err(error(
                    error_code::FENCED_MEMBER_EPOCH,
                    format!("The streams group member has a smaller member epoch ({received}) than the one known by the group coordinator ({}). The member must abandon all its partitions and rejoin.", member.member_epoch),
                ));
            }
        }
        Ok(())
    }

    /// Reported tasks must exist in the configured topology (2.9 step 5).
    fn check_owned(&self, owned: &Tasks) -> Result<(), HeartbeatError> {
        let Some(configured) = self.configured() else {
            return Ok(());
        };
        for kind in owned.kinds() {
            for (subtopology, partitions) in kind {
                let Some(s) = configured.subtopologies.get(subtopology) else {
                    return Err(invalid(format!(
                        "Subtopology {subtopology} does not exist in the topology."
                    )));
                };
                if let Some(p) = partitions.iter().find(|p| **p < 0 || **p >= s.tasks) {
                    return Err(invalid(format!(
                        "Task {p} for subtopology {subtopology} is invalid. Number of tasks for this subtopology: {}",
                        s.tasks
                    )));
                }
            }
        }
        Ok(())
    }

    fn assignment_configs(&self) -> BTreeMap<String, String> {
        BTreeMap::from([(
            "num.standby.replicas".to_string(),
            self.limits.num_standby_replicas.to_string(),
        )])
    }

    /// 2.9 step 10: a new target when the group epoch moved past it, unless the initial
    /// delay or the assignment interval holds it back (then the reason, for the status).
    fn update_target(&mut self, now_ms: i64) -> Result<Option<&'static str>, HeartbeatError> {
        if let Some(deadline) = self.initial_delay_deadline_ms {
            if now_ms < deadline {
                return Ok(Some(
                    "Assignment delayed due to the configured initial rebalance delay.",
                ));
            }
            self.initial_delay_deadline_ms = None;
        }
        if self.assignment_epoch >= self.group_epoch {
            return Ok(None);
        }
        if self.assignment_timestamp_ms != 0
            && now_ms - self.assignment_timestamp_ms < self.limits.assignment_interval_ms as i64
        {
            return Ok(Some(
                "Assignment delayed due to the configured assignment interval.",
            ));
        }
        self.compute_target(now_ms)?;
        Ok(None)
    }

    /// Runs the assignor over every member for the current group epoch; while the
    /// topology is not ready everyone's target is empty.
    fn compute_target(&mut self, now_ms: i64) -> Result<(), HeartbeatError> {
        let configured = self.configured().filter(|c| c.ready);
        let target = match configured {
            None => self
                .members
                .keys()
                .map(|m| (m.clone(), Tasks::default()))
                .collect(),
            Some(configured) => {
                let members: Vec<AssignorMember> = self
                    .members
                    .values()
                    .map(|m| AssignorMember {
                        member_id: m.member_id.clone(),
                        process_id: m.process_id.clone(),
                        current: streams_assignor::AssignedTasks {
                            active: m.assigned.active.clone(),
                            standby: m.assigned.standby.clone(),
                        },
                        task_offsets: m.task_offsets.clone(),
                    })
                    .collect();
                let subtopologies: Vec<AssignorSubtopology> = configured
                    .subtopologies
                    .iter()
                    .map(|(id, s)| AssignorSubtopology {
                        id: id.clone(),
                        tasks: s.tasks,
                        stateful: s.stateful(),
                    })
                    .collect();
                let assigned = streams_assignor::assign(
                    &members,
                    &subtopologies,
                    self.limits.num_standby_replicas,
                )
                .map_err(|e| {
                    error(
                        error_code::UNKNOWN_SERVER_ERROR,
                        format!(
                            "Failed to compute a new target assignment for epoch {}: {e}",
                            self.group_epoch
                        ),
                    )
                })?;
                assigned
                    .into_iter()
                    .map(|(member, tasks)| {
                        (
                            member,
                            Tasks {
                                active: tasks.active,
                                standby: tasks.standby,
                                warmup: TaskIds::new(),
                            },
                        )
                    })
                    .collect()
            }
        };
        self.target = target;
        self.assignment_epoch = self.group_epoch;
        self.assignment_timestamp_ms = now_ms;
        Ok(())
    }

    /// Where each task is: active task -> process, standby/warm-up -> processes, over
    /// every member but `except` (assigned and still being revoked).
    fn task_holders(&self, except: &str) -> TaskHolders {
        let mut holders = TaskHolders::default();
        for m in self.members.values().filter(|m| m.member_id != except) {
            for tasks in [&m.assigned, &m.pending_revocation] {
                for (kind, map) in [(0, &tasks.active), (1, &tasks.standby), (2, &tasks.warmup)] {
                    for (s, ps) in map {
                        for p in ps {
                            let key = (s.clone(), *p);
                            let entry = match kind {
                                0 => &mut holders.active,
                                1 => &mut holders.standby,
                                _ => &mut holders.warmup,
                            };
                            entry.entry(key).or_default().insert(m.process_id.clone());
                        }
                    }
                }
            }
        }
        holders
    }

    /// 3.1: moves one member toward its target.
    fn reconcile(
        &mut self,
        member_id: &str,
        owned: Option<&Tasks>,
        now_ms: i64,
    ) -> Result<(), HeartbeatError> {
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let target_epoch = self.assignment_epoch;
        let holders = self.task_holders(member_id);
        let member = self.members.get_mut(member_id).expect("checked");
        if member.state == MemberState::Stable && member.member_epoch == target_epoch {
            return Ok(());
        }
        if member.state == MemberState::UnrevokedTasks {
            let still_owned = owned.is_none_or(|owned| overlaps(owned, &member.pending_revocation));
            if still_owned {
                return Ok(());
            }
            member.pending_revocation = Tasks::default();
            member.revocation_deadline = None;
        }
        let process = member.process_id.clone();
        let has = |set: Option<&BTreeSet<String>>| set.is_some_and(|s| s.contains(&process));
        let current = member.assigned.clone();
        // Revoked: what the target no longer has in that role; a standby or warm-up
        // being promoted to active stays until the active is granted.
        let mut revoke = Tasks {
            active: minus(&current.active, &target.active),
            standby: minus(&minus(&current.standby, &target.standby), &target.active),
            warmup: minus(&minus(&current.warmup, &target.warmup), &target.active),
        };
        // Role swaps inside the member are not revocations the client must report.
        revoke.standby = minus(&revoke.standby, &target.warmup);
        revoke.warmup = minus(&revoke.warmup, &target.standby);
        let owns_revoked = owned.is_none_or(|owned| overlaps(owned, &revoke));
        let mut unreleased = false;
        let mut grant = Tasks::default();
        for (s, ps) in &target.active {
            for p in ps {
                if current.active.get(s).is_some_and(|c| c.contains(p)) {
                    continue;
                }
                let key = (s.clone(), *p);
                let elsewhere = holders.active.contains_key(&key)
                    || has(holders.standby.get(&key))
                    || has(holders.warmup.get(&key));
                if elsewhere {
                    unreleased = true;
                } else {
                    grant.active.entry(s.clone()).or_default().insert(*p);
                }
            }
        }
        for (target_kind, grant_kind, other_kinds) in [(1, 1, [0, 2]), (2, 2, [0, 1])] {
            let wanted = if target_kind == 1 {
                &target.standby
            } else {
                &target.warmup
            };
            for (s, ps) in wanted {
                for p in ps {
                    let key = (s.clone(), *p);
                    let mine = [&current.standby, &current.warmup][target_kind - 1]
                        .get(s)
                        .is_some_and(|c| c.contains(p));
                    if mine {
                        continue;
                    }
                    let held_here = [&holders.active, &holders.standby, &holders.warmup];
                    let clash = has(held_here[target_kind].get(&key))
                        || other_kinds.iter().any(|k| has(held_here[*k].get(&key)));
                    if clash {
                        unreleased = true;
                    } else {
                        let map = if grant_kind == 1 {
                            &mut grant.standby
                        } else {
                            &mut grant.warmup
                        };
                        map.entry(s.clone()).or_default().insert(*p);
                    }
                }
            }
        }
        let kept = Tasks {
            active: intersect(&current.active, &target.active),
            standby: minus(&current.standby, &revoke.standby),
            warmup: minus(&current.warmup, &revoke.warmup),
        };
        if !revoke.is_empty() && owns_revoked {
            // Give up first: standby and warm-up roles granted at once (they do not
            // clash with what this member revokes), actives wait for the next step.
            let mut assigned = kept;
            union_into(&mut assigned.standby, &grant.standby);
            union_into(&mut assigned.warmup, &grant.warmup);
            member.assigned = assigned;
            member.pending_revocation = revoke;
            member.state = MemberState::UnrevokedTasks;
            member.revocation_deadline = Some((
                now_ms + member.rebalance_timeout_ms.max(0) as i64,
                member.member_epoch,
            ));
        } else {
            let mut assigned = kept;
            union_into(&mut assigned.active, &grant.active);
            union_into(&mut assigned.standby, &grant.standby);
            union_into(&mut assigned.warmup, &grant.warmup);
            // A promoted standby or warm-up leaves its old role once active.
            assigned.standby = minus(&assigned.standby, &assigned.active);
            assigned.warmup = minus(&assigned.warmup, &assigned.active);
            member.assigned = assigned;
            member.pending_revocation = Tasks::default();
            member.revocation_deadline = None;
            if member.member_epoch != target_epoch {
                member.previous_member_epoch = member.member_epoch;
                member.member_epoch = target_epoch;
            }
            member.state = if unreleased {
                MemberState::UnreleasedTasks
            } else {
                MemberState::Stable
            };
        }
        // Assignment epochs: kept actives keep theirs, new ones take the member's epoch.
        let epoch = member.member_epoch;
        let mut epochs = BTreeMap::new();
        for tasks in [&member.assigned.active, &member.pending_revocation.active] {
            for (s, ps) in tasks {
                for p in ps {
                    let key = (s.clone(), *p);
                    let at = member.active_epochs.get(&key).copied().unwrap_or(epoch);
                    epochs.insert(key, at);
                }
            }
        }
        member.active_epochs = epochs;
        Ok(())
    }

    /// 2.8: what each member with an endpoint serves (the asking member last).
    fn endpoints(&self, asking: &str, topics: &dyn TopicView) -> Vec<EndpointPartitions> {
        let configured = self.configured();
        let partitions_of = |tasks: &[&TaskIds]| -> TopicPartitions {
            let mut out = TopicPartitions::new();
            let Some(configured) = configured else {
                return out;
            };
            for map in tasks {
                for (s, ps) in *map {
                    let Some(sub) = configured.subtopologies.get(s) else {
                        continue;
                    };
                    for p in ps {
                        for topic in sub.partitions_of_task(*p, topics) {
                            out.entry(topic).or_default().insert(*p);
                        }
                    }
                }
            }
            out
        };
        let mut members: Vec<&StreamsMember> = self
            .members
            .values()
            .filter(|m| m.user_endpoint.is_some())
            .collect();
        members.sort_by_key(|m| m.member_id == asking);
        members
            .into_iter()
            .map(|m| EndpointPartitions {
                endpoint: m.user_endpoint.clone().expect("filtered"),
                active: partitions_of(&[&m.assigned.active]),
                standby: partitions_of(&[&m.assigned.standby, &m.assigned.warmup]),
            })
            .collect()
    }

    /// Timers: sessions and rebalance timeouts fence members; the initial delay's end
    /// computes the pending target. Returns the members fenced.
    pub fn tick(&mut self, now_ms: i64) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| {
                m.session_deadline_ms <= now_ms
                    || m.revocation_deadline.is_some_and(|(deadline, epoch)| {
                        deadline <= now_ms && m.member_epoch == epoch
                    })
            })
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &expired {
            tracing::info!(group = %self.group_id, member = %member_id, "streams group member timed out; removing it");
            self.fence(member_id);
        }
        if self
            .initial_delay_deadline_ms
            .is_some_and(|deadline| deadline <= now_ms)
        {
            self.initial_delay_deadline_ms = None;
            if !self.members.is_empty()
                && self.assignment_epoch < self.group_epoch
                && self.configured.is_some()
            {
                // A failed assignor leaves the target for the next heartbeat to retry.
                let _ = self.compute_target(now_ms);
            }
        }
        expired
    }

    pub fn next_deadline(&self) -> Option<i64> {
        self.members
            .values()
            .flat_map(|m| {
                [
                    Some(m.session_deadline_ms),
                    m.revocation_deadline.map(|(d, _)| d),
                ]
            })
            .flatten()
            .chain(self.initial_delay_deadline_ms)
            .min()
    }

    /// 6.3: an offset commit of a member. Its epoch commits anything; a newer epoch is
    /// STALE_MEMBER_EPOCH; an older one only for active tasks it had by that epoch.
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
        let subtopology_of = |topic: &str| -> Option<&str> {
            self.topology.as_ref()?.subtopologies.iter().find_map(|s| {
                (s.source_topics.iter().any(|t| t == topic)
                    || s.repartition_source_topics.iter().any(|t| t.name == topic))
                .then_some(s.id.as_str())
            })
        };
        let ok = partitions.iter().all(|(topic, partition)| {
            subtopology_of(topic).is_some_and(|s| {
                member
                    .active_epochs
                    .get(&(s.to_string(), *partition))
                    .is_some_and(|at| member_epoch >= *at)
            })
        });
        if ok {
            Ok(())
        } else {
            Err(error_code::STALE_MEMBER_EPOCH)
        }
    }
}

#[derive(Default)]
struct TaskHolders {
    active: BTreeMap<(String, i32), BTreeSet<String>>,
    standby: BTreeMap<(String, i32), BTreeSet<String>>,
    warmup: BTreeMap<(String, i32), BTreeSet<String>>,
}

fn minus(a: &TaskIds, b: &TaskIds) -> TaskIds {
    let mut out = TaskIds::new();
    for (s, ps) in a {
        let rest: BTreeSet<i32> = match b.get(s) {
            Some(other) => ps.difference(other).copied().collect(),
            None => ps.clone(),
        };
        if !rest.is_empty() {
            out.insert(s.clone(), rest);
        }
    }
    out
}

fn intersect(a: &TaskIds, b: &TaskIds) -> TaskIds {
    let mut out = TaskIds::new();
    for (s, ps) in a {
        if let Some(other) = b.get(s) {
            let both: BTreeSet<i32> = ps.intersection(other).copied().collect();
            if !both.is_empty() {
                out.insert(s.clone(), both);
            }
        }
    }
    out
}

fn union_into(into: &mut TaskIds, from: &TaskIds) {
    for (s, ps) in from {
        into.entry(s.clone())
            .or_default()
            .extend(ps.iter().copied());
    }
}

/// Whether the member still reports running any of `tasks` in the role it is revoked
/// from.
fn overlaps(owned: &Tasks, tasks: &Tasks) -> bool {
    owned
        .kinds()
        .iter()
        .zip(tasks.kinds())
        .any(|(owned_map, revoked_map)| {
            revoked_map.iter().any(|(s, ps)| {
                owned_map
                    .get(s)
                    .is_some_and(|o| ps.iter().any(|p| o.contains(p)))
            })
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::group::streams_records::{StoredSubtopology, StoredTopicInfo};

    struct Topics(BTreeMap<String, i32>);

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            self.0.get(topic).copied()
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().cloned().collect()
        }
        fn id(&self, _topic: &str) -> Option<uuid::Uuid> {
            None
        }
        fn name_of(&self, _id: uuid::Uuid) -> Option<String> {
            None
        }
    }

    const REPARTITION: &str = "wc-counts-store-repartition";
    const CHANGELOG: &str = "wc-counts-store-changelog";

    fn info(name: &str) -> StoredTopicInfo {
        StoredTopicInfo {
            name: name.into(),
            partitions: 0,
            replication_factor: -1,
            configs: Vec::new(),
        }
    }

    fn word_count() -> StoredTopology {
        StoredTopology {
            epoch: 0,
            subtopologies: vec![
                StoredSubtopology {
                    id: "0".into(),
                    source_topics: vec!["in".into()],
                    repartition_sink_topics: vec![REPARTITION.into()],
                    ..StoredSubtopology::default()
                },
                StoredSubtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![info(REPARTITION)],
                    state_changelog_topics: vec![info(CHANGELOG)],
                    ..StoredSubtopology::default()
                },
            ],
        }
    }

    fn all_topics() -> Topics {
        Topics(BTreeMap::from([
            ("in".to_string(), 3),
            (REPARTITION.to_string(), 3),
            (CHANGELOG.to_string(), 3),
        ]))
    }

    fn join(member: &str, process: &str) -> StreamsHeartbeat {
        StreamsHeartbeat {
            member_id: member.into(),
            member_epoch: 0,
            endpoint_information_epoch: -1,
            rebalance_timeout_ms: 30_000,
            topology: Some(word_count()),
            owned: Some(Tasks::default()),
            process_id: Some(process.into()),
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..StreamsHeartbeat::default()
        }
    }

    fn beat(member: &str, epoch: i32, owned: Option<Tasks>) -> StreamsHeartbeat {
        StreamsHeartbeat {
            member_id: member.into(),
            member_epoch: epoch,
            endpoint_information_epoch: -1,
            rebalance_timeout_ms: -1,
            owned,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            ..StreamsHeartbeat::default()
        }
    }

    fn no_delay() -> StreamsGroupLimits {
        StreamsGroupLimits {
            initial_rebalance_delay_ms: 0,
            assignment_interval_ms: 0,
            ..StreamsGroupLimits::default()
        }
    }

    fn count(ids: &TaskIds) -> usize {
        ids.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn a_first_member_waits_for_its_internal_topics_and_the_initial_delay() {
        let mut group = StreamsGroup::new("wc", StreamsGroupLimits::default());
        let only_input = Topics(BTreeMap::from([("in".to_string(), 3)]));
        let first = group.heartbeat(join("a", "p1"), 0, &only_input).unwrap();
        // The join bumped the new group's epoch 1 to 2; the target waits for the delay.
        assert_eq!(group.group_epoch, 2);
        assert_eq!(first.member_epoch, 1);
        assert_eq!(first.tasks, Some(Tasks::default()));
        let codes: Vec<i8> = first.statuses.iter().map(|(c, _)| *c).collect();
        assert_eq!(
            codes,
            vec![
                STATUS_ASSIGNMENT_DELAYED,
                streams_topology::STATUS_MISSING_INTERNAL_TOPICS
            ]
        );
        assert_eq!(first.topics_to_create.len(), 2);
        assert_eq!(group.state(), StreamsGroupState::NotReady);
        // Heartbeats while the group waits change nothing.
        let again = group
            .heartbeat(beat("a", 1, Some(Tasks::default())), 100, &only_input)
            .unwrap();
        assert_eq!((group.group_epoch, again.member_epoch), (2, 1));
        assert_eq!(again.tasks, None);
        // The topics exist and the delay is over: every task, at the new epoch.
        let second = group
            .heartbeat(beat("a", 1, Some(Tasks::default())), 3_000, &all_topics())
            .unwrap();
        assert!(second.statuses.is_empty(), "{:?}", second.statuses);
        let tasks = second.tasks.expect("changed");
        assert_eq!(count(&tasks.active), 6);
        assert_eq!(second.member_epoch, group.group_epoch);
        assert_eq!(group.state(), StreamsGroupState::Stable);
    }

    #[test]
    fn tasks_move_only_after_their_owner_gave_them_up() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let a = group.heartbeat(join("a", "p1"), 0, &topics).unwrap();
        let a_tasks = a.tasks.unwrap();
        assert_eq!(count(&a_tasks.active), 6);
        // b joins: the target splits the tasks, but b gets none until a revokes.
        let b = group.heartbeat(join("b", "p2"), 10, &topics).unwrap();
        assert_eq!(b.tasks, Some(Tasks::default()));
        assert_eq!(group.members["b"].state, MemberState::UnreleasedTasks);
        let a = group
            .heartbeat(
                beat("a", a.member_epoch, Some(a_tasks.clone())),
                20,
                &topics,
            )
            .unwrap();
        let kept = a.tasks.expect("revocation");
        assert_eq!(count(&kept.active), 3);
        assert_eq!(group.members["a"].state, MemberState::UnrevokedTasks);
        // Still running them: nothing changes.
        group
            .heartbeat(beat("a", a.member_epoch, Some(a_tasks)), 30, &topics)
            .unwrap();
        assert_eq!(group.members["a"].state, MemberState::UnrevokedTasks);
        let a = group
            .heartbeat(beat("a", a.member_epoch, Some(kept.clone())), 40, &topics)
            .unwrap();
        assert_eq!(a.member_epoch, group.assignment_epoch);
        let b = group
            .heartbeat(
                beat("b", b.member_epoch, Some(Tasks::default())),
                50,
                &topics,
            )
            .unwrap();
        let b_tasks = b.tasks.expect("released");
        assert_eq!(count(&b_tasks.active), 3);
        for (s, ps) in &b_tasks.active {
            assert!(kept.active.get(s).is_none_or(|k| k.is_disjoint(ps)));
        }
        assert_eq!(group.state(), StreamsGroupState::Stable);
        // b leaves: a ends up with everything.
        group
            .heartbeat(beat("b", LEAVE_EPOCH, None), 60, &topics)
            .unwrap();
        let a = group
            .heartbeat(beat("a", a.member_epoch, Some(kept)), 70, &topics)
            .unwrap();
        assert_eq!(count(&a.tasks.unwrap().active), 6);
    }

    #[test]
    fn epochs_and_topologies_are_checked_as_kafka_does() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let a = group.heartbeat(join("a", "p1"), 0, &topics).unwrap();
        let fenced = group
            .heartbeat(beat("a", a.member_epoch + 1, None), 1, &topics)
            .unwrap_err();
        assert_eq!(fenced.code, error_code::FENCED_MEMBER_EPOCH);
        let unknown = group.heartbeat(beat("x", 1, None), 1, &topics).unwrap_err();
        assert_eq!(unknown.code, error_code::UNKNOWN_MEMBER_ID);
        let mut other = join("b", "p2");
        other.topology.as_mut().unwrap().subtopologies.pop();
        let refused = group.heartbeat(other, 1, &topics).unwrap_err();
        assert_eq!(refused.message, "Topology updates are not supported yet.");
        assert!(!group.has_member("b"), "a refused join leaves no trace");
        // The previous epoch is still accepted with tasks the member has.
        let before = group.members["a"].clone();
        group.heartbeat(join("b", "p2"), 2, &topics).unwrap();
        let a_now = group
            .heartbeat(beat("a", a.member_epoch, None), 3, &topics)
            .unwrap();
        if a_now.member_epoch != before.member_epoch {
            let stale = group
                .heartbeat(
                    beat("a", before.member_epoch, Some(Tasks::default())),
                    4,
                    &topics,
                )
                .unwrap();
            assert_eq!(stale.member_id, "a");
        }
    }

    /// Found by the simulator's streams group: an answer that released tasks to a member
    /// was lost, and the next ones said its tasks had not changed, so it never ran them
    /// (two of six partitions unprocessed for good).
    #[test]
    fn a_member_that_missed_the_answer_with_its_tasks_gets_them_again() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let a = group.heartbeat(join("a", "p1"), 0, &topics).unwrap();
        let (mut a_epoch, mut a_owned) = (a.member_epoch, a.tasks.unwrap());
        let mut b_epoch = group
            .heartbeat(join("b", "p2"), 1, &topics)
            .unwrap()
            .member_epoch;
        for now in 2..20 {
            let a = group
                .heartbeat(beat("a", a_epoch, Some(a_owned.clone())), now, &topics)
                .unwrap();
            a_epoch = a.member_epoch;
            a_owned = a.tasks.unwrap_or(a_owned);
            let b = group
                .heartbeat(beat("b", b_epoch, Some(Tasks::default())), now, &topics)
                .unwrap();
            let Some(given) = b.tasks.filter(|t| !t.active.is_empty()) else {
                b_epoch = b.member_epoch;
                continue;
            };
            // That answer is lost: b comes again with what it had.
            let again = group
                .heartbeat(beat("b", b_epoch, Some(Tasks::default())), now, &topics)
                .unwrap();
            assert_eq!(again.member_epoch, b.member_epoch);
            assert_eq!(again.tasks, Some(given), "the tasks it missed, again");
            let steady = group
                .heartbeat(beat("b", b.member_epoch, again.tasks), now, &topics)
                .unwrap();
            assert_eq!(steady.tasks, None, "nothing to repeat once it runs them");
            return;
        }
        panic!("b never got tasks");
    }

    #[test]
    fn requests_are_validated_before_anything_else() {
        let mut bad = join("a", "p");
        bad.owned = None;
        assert_eq!(
            validate(&bad, "g").unwrap_err().message,
            "ActiveTasks must be empty when (re-)joining."
        );
        let mut bad = join("a", "p");
        bad.rebalance_timeout_ms = -1;
        assert_eq!(
            validate(&bad, "g").unwrap_err().message,
            "RebalanceTimeoutMs must be provided in first request."
        );
        let mut bad = beat("a", 3, None);
        bad.topology = Some(word_count());
        assert_eq!(
            validate(&bad, "g").unwrap_err().message,
            "Topology can only be provided when (re-)joining."
        );
        assert_eq!(
            validate(&beat("a", -2, None), "g").unwrap_err().message,
            "InstanceId can't be null."
        );
        assert_eq!(
            validate(&beat("", 1, None), "g").unwrap_err().message,
            "MemberId can't be empty."
        );
        let mut bad = join("a", "p");
        bad.topology.as_mut().unwrap().subtopologies[1].state_changelog_topics[0].partitions = 2;
        assert_eq!(
            validate(&bad, "g").unwrap_err().code,
            error_code::STREAMS_INVALID_TOPOLOGY
        );
        assert!(validate(&join("a", "p"), "g").is_ok());
    }

    #[test]
    fn silent_members_are_fenced_and_static_members_come_back_to_their_tasks() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let mut first = join("a", "p1");
        first.instance_id = Some("i1".into());
        let a = group.heartbeat(first, 0, &topics).unwrap();
        let tasks = a.tasks.unwrap();
        let mut away = beat("a", STATIC_LEAVE_EPOCH, None);
        away.instance_id = Some("i1".into());
        let epoch = group.group_epoch;
        group.heartbeat(away, 10, &topics).unwrap();
        assert_eq!(
            group.group_epoch, epoch,
            "a static leave does not rebalance"
        );
        let mut back = join("a2", "p1");
        back.instance_id = Some("i1".into());
        let a2 = group.heartbeat(back, 20, &topics).unwrap();
        assert_eq!(a2.tasks.unwrap(), tasks);
        assert!(!group.has_member("a"));
        // Its session runs out: fenced, the group is empty.
        let deadline = group.next_deadline().unwrap();
        assert_eq!(group.tick(deadline), vec!["a2".to_string()]);
        assert!(group.is_empty());
        assert_eq!(group.state(), StreamsGroupState::Empty);
    }

    #[test]
    fn members_with_an_endpoint_learn_who_serves_which_partitions() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let mut a = join("a", "p1");
        a.user_endpoint = Some(("host-a".into(), 8080));
        let first = group.heartbeat(a, 0, &topics).unwrap();
        // The client starts at endpoint epoch -1: it gets the map, with a's partitions.
        let endpoints = first.endpoints.expect("epochs differ");
        assert_eq!(endpoints.len(), 1);
        assert_eq!(endpoints[0].endpoint, ("host-a".to_string(), 8080));
        assert_eq!(endpoints[0].active["in"], BTreeSet::from([0, 1, 2]));
        assert_eq!(endpoints[0].active[REPARTITION], BTreeSet::from([0, 1, 2]));
        assert!(endpoints[0].standby.is_empty());
        // At the group's epoch nothing is sent again.
        let mut again = beat("a", first.member_epoch, None);
        again.endpoint_information_epoch = first.endpoint_information_epoch;
        assert_eq!(group.heartbeat(again, 10, &topics).unwrap().endpoints, None);
        // A member without an endpoint is not listed; the asking member comes last.
        group.heartbeat(join("b", "p2"), 20, &topics).unwrap();
        let mut c = join("c", "p3");
        c.user_endpoint = Some(("host-c".into(), 9090));
        let listed = group.heartbeat(c, 30, &topics).unwrap().endpoints.unwrap();
        let hosts: Vec<&str> = listed.iter().map(|e| e.endpoint.0.as_str()).collect();
        assert_eq!(hosts, ["host-a", "host-c"]);
    }

    #[test]
    fn commits_from_an_older_epoch_need_the_task_by_then() {
        let mut group = StreamsGroup::new("wc", no_delay());
        let topics = all_topics();
        let a = group.heartbeat(join("a", "p1"), 0, &topics).unwrap();
        let epoch = a.member_epoch;
        assert_eq!(group.check_commit("a", epoch, &[("in", 0)]), Ok(()));
        assert_eq!(
            group.check_commit("a", epoch + 1, &[("in", 0)]),
            Err(error_code::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            group.check_commit("a", epoch - 1, &[("in", 0)]),
            Err(error_code::STALE_MEMBER_EPOCH)
        );
        assert_eq!(
            group.check_commit("x", epoch, &[("in", 0)]),
            Err(error_code::UNKNOWN_MEMBER_ID)
        );
    }
}
