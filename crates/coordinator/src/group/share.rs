//! One share group (KIP-932, ShareGroupHeartbeat): members subscribe to topics and the
//! coordinator hands each a set of partitions with the simple assignor. Unlike a consumer
//! group, several members may share a partition (the partition's leader hands each
//! record to one of them at a time, `strand_broker::share`), so an assignment moves at
//! once: there is no revocation to wait for, and every member goes to the group's epoch
//! with its next heartbeat. A plain state machine: time and topic metadata are passed in.

use std::collections::{BTreeMap, BTreeSet};

use strand_types::error_code;

use super::consumer::{Assignment, HeartbeatError, TopicView};

/// group.share.* settings (and the group configs share.session.timeout.ms and
/// share.heartbeat.interval.ms).
#[derive(Debug, Clone, Copy)]
pub struct ShareGroupLimits {
    /// group.share.session.timeout.ms
    pub session_timeout_ms: i32,
    /// group.share.heartbeat.interval.ms
    pub heartbeat_interval_ms: i32,
    /// group.share.max.size
    pub max_size: usize,
}

impl Default for ShareGroupLimits {
    fn default() -> Self {
        ShareGroupLimits {
            session_timeout_ms: 45_000,
            heartbeat_interval_ms: 5_000,
            max_size: 200,
        }
    }
}

/// The only assignor share groups have (Kafka's SimpleAssignor).
pub const ASSIGNOR_SIMPLE: &str = "simple";
pub const LEAVE_EPOCH: i32 = -1;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareMember {
    pub member_id: String,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    pub member_epoch: i32,
    /// The epoch before the last move: still accepted, since the answer that moved
    /// the member may have been lost.
    pub previous_member_epoch: i32,
    pub subscribed_topics: Vec<String>,
    pub assigned: Assignment,
    pub session_deadline_ms: i64,
}

/// (group epoch, initialized partitions by topic): what a share group's records say.
pub type SavedShareGroup = (i32, BTreeMap<String, BTreeSet<i32>>);

/// A ShareGroupHeartbeat, decoded.
#[derive(Debug, Clone)]
pub struct ShareHeartbeat {
    pub member_id: String,
    pub member_epoch: i32,
    pub rack_id: Option<String>,
    pub client_id: String,
    pub client_host: String,
    /// None: unchanged since the last heartbeat.
    pub subscribed_topics: Option<Vec<String>>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShareHeartbeatResult {
    pub member_id: String,
    pub member_epoch: i32,
    pub heartbeat_interval_ms: i32,
    /// Sent when the member's assignment changed, or it (re)joined.
    pub assignment: Option<Assignment>,
}

fn error(code: i16, message: impl Into<String>) -> HeartbeatError {
    HeartbeatError {
        code,
        message: message.into(),
    }
}

/// Kafka's share group states (Dead is a group that no longer exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShareGroupState {
    Empty,
    Stable,
}

impl ShareGroupState {
    pub fn name(self) -> &'static str {
        match self {
            ShareGroupState::Empty => "Empty",
            ShareGroupState::Stable => "Stable",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ShareGroup {
    pub group_id: String,
    pub group_epoch: i32,
    pub assignment_epoch: i32,
    pub members: BTreeMap<String, ShareMember>,
    /// The assignment computed at `assignment_epoch`; each member takes its part at its
    /// next heartbeat (`ShareMember::assigned` is what it was last told).
    pub target: BTreeMap<String, Assignment>,
    /// Partitions whose share state the group has (assigned at some point, or set by
    /// AlterShareGroupOffsets): what DescribeShareGroupOffsets lists and a deletion
    /// removes from the share coordinator.
    pub initialized: BTreeMap<String, BTreeSet<i32>>,
    /// (group epoch, initialized) as the log last has them.
    saved: Option<SavedShareGroup>,
    /// Partition counts the assignment was computed for (a change means a new one).
    subscribed_partition_counts: BTreeMap<String, i32>,
    limits: ShareGroupLimits,
}

impl ShareGroup {
    pub fn new(group_id: &str, limits: ShareGroupLimits) -> ShareGroup {
        ShareGroup {
            group_id: group_id.to_string(),
            group_epoch: 0,
            assignment_epoch: 0,
            members: BTreeMap::new(),
            target: BTreeMap::new(),
            initialized: BTreeMap::new(),
            saved: None,
            subscribed_partition_counts: BTreeMap::new(),
            limits,
        }
    }

    /// A group read back from the log: its epoch and initialized partitions, no members
    /// (they rejoin).
    pub fn restored(
        group_id: &str,
        limits: ShareGroupLimits,
        epoch: i32,
        initialized: BTreeMap<String, BTreeSet<i32>>,
    ) -> ShareGroup {
        let mut group = ShareGroup::new(group_id, limits);
        group.group_epoch = epoch;
        group.assignment_epoch = epoch;
        group.saved = Some((epoch, initialized.clone()));
        group.initialized = initialized;
        group
    }

    /// What the log must learn of the group since it was last written: every partition
    /// the assignment gives is initialized; the epoch and those partitions, if either
    /// changed. With it, the state to mark saved once the write commits.
    pub fn unsaved(&mut self) -> Option<SavedShareGroup> {
        for (topic, partition) in self.assigned_partitions() {
            self.initialized.entry(topic).or_default().insert(partition);
        }
        let now = (self.group_epoch, self.initialized.clone());
        (self.saved.as_ref() != Some(&now)).then_some(now)
    }

    pub fn mark_saved(&mut self, saved: SavedShareGroup) {
        self.saved = Some(saved);
    }

    /// The log no longer has the group (its records were tombstoned).
    pub fn mark_unsaved(&mut self) {
        self.saved = None;
    }

    /// New settings (group configs changed): sessions renewed from now on use them.
    pub fn set_limits(&mut self, limits: ShareGroupLimits) {
        self.limits = limits;
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    pub fn state(&self) -> ShareGroupState {
        if self.members.is_empty() {
            ShareGroupState::Empty
        } else {
            ShareGroupState::Stable
        }
    }

    /// Topics any member subscribes to.
    pub fn subscribed_topics(&self) -> BTreeSet<String> {
        self.members
            .values()
            .flat_map(|m| m.subscribed_topics.iter().cloned())
            .collect()
    }

    /// Every partition the assignment gives some member.
    pub fn assigned_partitions(&self) -> BTreeSet<(String, i32)> {
        self.target
            .values()
            .flat_map(|a| {
                a.iter()
                    .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            })
            .collect()
    }

    /// Moves `member_id` to the current assignment (Kafka's reconciliation: no
    /// revocation phase for share groups). Whether its partitions changed.
    fn reconcile(&mut self, member_id: &str) -> bool {
        let epoch = self.assignment_epoch;
        let target = self.target.get(member_id).cloned().unwrap_or_default();
        let Some(member) = self.members.get_mut(member_id) else {
            return false;
        };
        if member.member_epoch != epoch {
            member.previous_member_epoch = member.member_epoch;
            member.member_epoch = epoch;
        }
        let changed = member.assigned != target;
        member.assigned = target;
        changed
    }

    /// The earliest session deadline of any member.
    pub fn next_deadline(&self) -> Option<i64> {
        self.members.values().map(|m| m.session_deadline_ms).min()
    }

    pub fn heartbeat(
        &mut self,
        request: ShareHeartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<ShareHeartbeatResult, HeartbeatError> {
        // Kafka's throwIfShareGroupHeartbeatRequestIsInvalid.
        if request.member_id.is_empty() {
            return Err(error(
                error_code::INVALID_REQUEST,
                "MemberId can't be empty.",
            ));
        }
        if request.rack_id.as_deref() == Some("") {
            return Err(error(error_code::INVALID_REQUEST, "RackId can't be empty."));
        }
        match request.member_epoch {
            LEAVE_EPOCH => {
                if self.members.contains_key(&request.member_id) {
                    self.remove_member(&request.member_id, topics);
                } else {
                    return Err(error(
                        error_code::UNKNOWN_MEMBER_ID,
                        format!(
                            "Member {} is not a member of group {}.",
                            request.member_id, self.group_id
                        ),
                    ));
                }
                Ok(ShareHeartbeatResult {
                    member_id: request.member_id,
                    member_epoch: LEAVE_EPOCH,
                    heartbeat_interval_ms: 0,
                    assignment: None,
                })
            }
            0 => self.join(request, now_ms, topics),
            epoch if epoch > 0 => self.existing(request, now_ms, topics),
            _ => Err(error(
                error_code::INVALID_REQUEST,
                "MemberEpoch is invalid.",
            )),
        }
    }

    fn join(
        &mut self,
        request: ShareHeartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<ShareHeartbeatResult, HeartbeatError> {
        let subscribed = match &request.subscribed_topics {
            Some(names) if !names.is_empty() => names.clone(),
            _ => {
                return Err(error(
                    error_code::INVALID_REQUEST,
                    "SubscribedTopicNames must be set in first request.",
                ))
            }
        };
        let member_id = request.member_id.clone();
        let deadline = now_ms + self.limits.session_timeout_ms as i64;
        match self.members.get_mut(&member_id) {
            // A member rejoining (fenced, or its answer lost) is kept, as on Kafka.
            Some(member) => {
                member.session_deadline_ms = deadline;
                member.client_id = request.client_id.clone();
                member.client_host = request.client_host.clone();
                if request.rack_id.is_some() {
                    member.rack_id = request.rack_id.clone();
                }
                if member.subscribed_topics != subscribed {
                    member.subscribed_topics = subscribed;
                    self.group_epoch += 1;
                }
            }
            None => {
                if self.members.len() >= self.limits.max_size {
                    return Err(error(
                        error_code::GROUP_MAX_SIZE_REACHED,
                        format!(
                            "The share group has reached its maximum capacity of {} members.",
                            self.limits.max_size
                        ),
                    ));
                }
                self.members.insert(
                    member_id.clone(),
                    ShareMember {
                        member_id: member_id.clone(),
                        rack_id: request.rack_id.clone(),
                        client_id: request.client_id.clone(),
                        client_host: request.client_host.clone(),
                        member_epoch: 0,
                        previous_member_epoch: 0,
                        subscribed_topics: subscribed,
                        assigned: Assignment::new(),
                        session_deadline_ms: deadline,
                    },
                );
                self.group_epoch += 1;
            }
        }
        self.refresh(topics);
        self.reconcile(&member_id);
        let member = &self.members[&member_id];
        Ok(ShareHeartbeatResult {
            member_id,
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: self.limits.heartbeat_interval_ms,
            assignment: Some(member.assigned.clone()),
        })
    }

    fn existing(
        &mut self,
        request: ShareHeartbeat,
        now_ms: i64,
        topics: &dyn TopicView,
    ) -> Result<ShareHeartbeatResult, HeartbeatError> {
        let group_id = self.group_id.clone();
        let Some(member) = self.members.get_mut(&request.member_id) else {
            return Err(error(
                error_code::UNKNOWN_MEMBER_ID,
                format!(
                    "Member {} is not a member of group {group_id}.",
                    request.member_id
                ),
            ));
        };
        if request.member_epoch > member.member_epoch {
            return Err(error(
                error_code::FENCED_MEMBER_EPOCH,
                format!(
                    "The share group member has a greater member epoch ({}) than the one \
                     known by the group coordinator ({}). The member must abandon all its \
                     partitions and rejoin.",
                    request.member_epoch, member.member_epoch
                ),
            ));
        }
        if request.member_epoch < member.member_epoch
            && request.member_epoch != member.previous_member_epoch
        {
            return Err(error(
                error_code::FENCED_MEMBER_EPOCH,
                format!(
                    "The share group member has a smaller member epoch ({}) than the one \
                     known by the group coordinator ({}) and it does not match the previous \
                     member epoch ({}). The member must abandon all its partitions and \
                     rejoin.",
                    request.member_epoch, member.member_epoch, member.previous_member_epoch
                ),
            ));
        }
        member.session_deadline_ms = now_ms + self.limits.session_timeout_ms as i64;
        if request.rack_id.is_some() {
            member.rack_id = request.rack_id.clone();
        }
        let mut changed = false;
        // A "full" heartbeat (it names the subscription) is answered with the assignment.
        let full = request.subscribed_topics.is_some();
        if let Some(names) = request.subscribed_topics {
            if names != member.subscribed_topics {
                member.subscribed_topics = names;
                changed = true;
            }
        }
        if changed {
            self.group_epoch += 1;
        }
        self.refresh(topics);
        let moved = self.reconcile(&request.member_id);
        let member = &self.members[&request.member_id];
        Ok(ShareHeartbeatResult {
            member_id: request.member_id.clone(),
            member_epoch: member.member_epoch,
            heartbeat_interval_ms: self.limits.heartbeat_interval_ms,
            assignment: (full || moved).then(|| member.assigned.clone()),
        })
    }

    fn remove_member(&mut self, member_id: &str, topics: &dyn TopicView) {
        self.members.remove(member_id);
        self.target.remove(member_id);
        self.group_epoch += 1;
        self.refresh(topics);
    }

    /// Session timeouts: members whose deadline passed leave the group.
    pub fn tick(&mut self, now_ms: i64, topics: &dyn TopicView) -> Vec<String> {
        let expired: Vec<String> = self
            .members
            .values()
            .filter(|m| m.session_deadline_ms <= now_ms)
            .map(|m| m.member_id.clone())
            .collect();
        for member_id in &expired {
            self.remove_member(member_id, topics);
        }
        expired
    }

    /// Recomputes the assignment when the group epoch moved or a subscribed topic's
    /// partition count changed (created, grown, deleted); every member takes it at once.
    fn refresh(&mut self, topics: &dyn TopicView) {
        let counts: BTreeMap<String, i32> = self
            .subscribed_topics()
            .into_iter()
            .filter_map(|t| topics.partitions(&t).map(|n| (t, n)))
            .collect();
        if counts != self.subscribed_partition_counts {
            self.subscribed_partition_counts = counts;
            if self.assignment_epoch == self.group_epoch {
                self.group_epoch += 1;
            }
        }
        if self.assignment_epoch == self.group_epoch {
            return;
        }
        self.target = simple_assignment(
            &self.members,
            &self.target,
            &self.subscribed_partition_counts,
        );
        self.assignment_epoch = self.group_epoch;
    }
}

/// A partition of a topic, by name.
type TopicPartitionName = (String, i32);

/// Kafka's simple share-group assignor (SimpleAssignor): balance first, stickiness
/// second. Each partition should be shared by `ceil(members / partitions)` members and
/// each member hold its even share of those assignments; members keep what they had
/// unless that breaks the balance, then partitions still short of members go round-robin
/// to the members still short of partitions. With identical subscriptions this runs once
/// over every subscribed partition; otherwise once per topic over its subscribers, as
/// Kafka's heterogeneous builder does. Members and partitions are taken in sorted order,
/// so the same group gives the same assignment.
pub fn simple_assignment(
    members: &BTreeMap<String, ShareMember>,
    previous: &BTreeMap<String, Assignment>,
    partition_counts: &BTreeMap<String, i32>,
) -> BTreeMap<String, Assignment> {
    let partitions_of = |topics: &[&String]| -> Vec<TopicPartitionName> {
        topics
            .iter()
            .flat_map(|t| {
                let count = partition_counts.get(*t).copied().unwrap_or(0).max(0);
                (0..count).map(move |p| ((*t).clone(), p))
            })
            .collect()
    };
    let old_of = |member: &ShareMember| -> BTreeSet<TopicPartitionName> {
        previous
            .get(&member.member_id)
            .into_iter()
            .flatten()
            .flat_map(|(t, ps)| ps.iter().map(move |p| (t.clone(), *p)))
            .collect()
    };
    let mut out: BTreeMap<String, Assignment> = members
        .keys()
        .map(|m| (m.clone(), Assignment::new()))
        .collect();
    let mut add = |member: &str, (topic, partition): TopicPartitionName| {
        out.entry(member.to_string())
            .or_default()
            .entry(topic)
            .or_default()
            .insert(partition);
    };
    let homogeneous = members
        .values()
        .map(|m| m.subscribed_topics.iter().collect::<BTreeSet<_>>())
        .collect::<BTreeSet<_>>()
        .len()
        <= 1;
    if homogeneous {
        let Some(first) = members.values().next() else {
            return out;
        };
        let topics: BTreeSet<&String> = first.subscribed_topics.iter().collect();
        let topics: Vec<&String> = topics.into_iter().collect();
        let ids: Vec<&str> = members.keys().map(String::as_str).collect();
        let old: Vec<BTreeSet<TopicPartitionName>> = members.values().map(old_of).collect();
        for (index, held) in spread(&old, &partitions_of(&topics))
            .into_iter()
            .enumerate()
        {
            for partition in held {
                add(ids[index], partition);
            }
        }
        return out;
    }
    let topics: BTreeSet<&String> = members
        .values()
        .flat_map(|m| m.subscribed_topics.iter())
        .collect();
    for topic in topics {
        let subscribers: Vec<&ShareMember> = members
            .values()
            .filter(|m| m.subscribed_topics.contains(topic))
            .collect();
        let old: Vec<BTreeSet<TopicPartitionName>> = subscribers
            .iter()
            .map(|m| old_of(m).into_iter().filter(|(t, _)| t == topic).collect())
            .collect();
        for (index, held) in spread(&old, &partitions_of(&[topic]))
            .into_iter()
            .enumerate()
        {
            for partition in held {
                add(&subscribers[index].member_id, partition);
            }
        }
    }
    out
}

/// The core of SimpleAssignor for one set of members (their previous partitions, by
/// index) and target partitions: the partitions each member gets.
fn spread(
    old: &[BTreeSet<TopicPartitionName>],
    targets: &[TopicPartitionName],
) -> Vec<BTreeSet<TopicPartitionName>> {
    let members = old.len();
    let mut by_member: Vec<BTreeSet<TopicPartitionName>> = vec![BTreeSet::new(); members];
    if members == 0 || targets.is_empty() {
        return by_member;
    }
    let partitions = targets.len();
    let desired_sharing = members.div_ceil(partitions);
    let precise = (desired_sharing * partitions) as f64 / members as f64;
    let desired: Vec<usize> = (0..members)
        .map(|i| {
            ((precise * (i + 1) as f64).ceil() - (precise * i as f64).ceil()).max(0.0) as usize
        })
        .collect();
    let target_set: BTreeSet<&TopicPartitionName> = targets.iter().collect();
    let mut by_partition: BTreeMap<TopicPartitionName, BTreeSet<usize>> = BTreeMap::new();
    let mut unfilled: BTreeSet<usize> = BTreeSet::new();
    // 1. Keep what each member had that is still a target; 2. trim overfilled members.
    for (index, held) in old.iter().enumerate() {
        for partition in held.iter().filter(|p| target_set.contains(p)) {
            if by_member[index].len() >= desired[index] {
                break;
            }
            by_member[index].insert(partition.clone());
            by_partition
                .entry(partition.clone())
                .or_default()
                .insert(index);
        }
        if by_member[index].len() < desired[index] {
            unfilled.insert(index);
        }
    }
    // 3. Partitions shared by more members than desired lose the extra ones.
    for (partition, holders) in by_partition.iter_mut() {
        while holders.len() > desired_sharing {
            let index = *holders.iter().next_back().expect("not empty");
            holders.remove(&index);
            by_member[index].remove(partition);
            unfilled.insert(index);
        }
    }
    // 4. Every target partition, held or not.
    for partition in targets {
        by_partition.entry(partition.clone()).or_default();
    }
    // 5. One pass over the partitions, handing the short ones to unfilled members in
    // turn; a partition no unfilled member can take stays short.
    let mut queue: Vec<usize> = unfilled.into_iter().collect();
    let mut cursor = 0usize;
    let mut assigned_this_round = false;
    for (partition, holders) in by_partition.iter_mut() {
        if queue.is_empty() {
            break;
        }
        let mut wanted = desired_sharing.saturating_sub(holders.len());
        while wanted > 0 {
            if cursor >= queue.len() {
                if !assigned_this_round || queue.is_empty() {
                    break;
                }
                cursor = 0;
                assigned_this_round = false;
            }
            let index = queue[cursor];
            if holders.contains(&index) {
                cursor += 1;
                continue;
            }
            holders.insert(index);
            by_member[index].insert(partition.clone());
            wanted -= 1;
            assigned_this_round = true;
            if by_member[index].len() >= desired[index] {
                queue.remove(cursor);
            } else {
                cursor += 1;
            }
        }
    }
    by_member
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Topics(BTreeMap<String, i32>);

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            self.0.get(topic).copied()
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().cloned().collect()
        }
        fn id(&self, _: &str) -> Option<uuid::Uuid> {
            None
        }
        fn name_of(&self, _: uuid::Uuid) -> Option<String> {
            None
        }
    }

    fn topics(list: &[(&str, i32)]) -> Topics {
        Topics(list.iter().map(|(t, n)| (t.to_string(), *n)).collect())
    }

    fn join(id: &str, subscribed: &[&str]) -> ShareHeartbeat {
        ShareHeartbeat {
            member_id: id.to_string(),
            member_epoch: 0,
            rack_id: None,
            client_id: "c".into(),
            client_host: "/127.0.0.1".into(),
            subscribed_topics: Some(subscribed.iter().map(|s| s.to_string()).collect()),
        }
    }

    fn beat(id: &str, epoch: i32) -> ShareHeartbeat {
        ShareHeartbeat {
            member_epoch: epoch,
            subscribed_topics: None,
            ..join(id, &[])
        }
    }

    fn count(assignment: &Assignment) -> usize {
        assignment.values().map(BTreeSet::len).sum()
    }

    #[test]
    fn members_split_the_partitions_and_move_at_once() {
        let t = topics(&[("t", 6)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        let a = group.heartbeat(join("a", &["t"]), 0, &t).unwrap();
        assert_eq!(a.member_epoch, 1);
        assert_eq!(count(&a.assignment.unwrap()), 6);
        let b = group.heartbeat(join("b", &["t"]), 0, &t).unwrap();
        assert_eq!(b.member_epoch, 2);
        assert_eq!(count(&b.assignment.unwrap()), 3);
        // a moves to the new epoch with its smaller share at its next heartbeat (no
        // revocation phase); its previous epoch is still accepted after that (the answer
        // that moved it may be lost).
        let a = group.heartbeat(beat("a", 1), 10, &t).unwrap();
        assert_eq!(a.member_epoch, 2);
        assert_eq!(
            count(&a.assignment.unwrap()),
            3,
            "changed since a last heard"
        );
        let a = group.heartbeat(beat("a", 1), 10, &t).unwrap();
        assert_eq!(
            (a.member_epoch, a.assignment),
            (2, None),
            "unchanged: not sent"
        );
        group.heartbeat(join("c", &["t"]), 0, &t).unwrap();
        assert_eq!(
            group.heartbeat(beat("a", 2), 10, &t).unwrap().member_epoch,
            3
        );
        let err = group.heartbeat(beat("a", 1), 10, &t).unwrap_err();
        assert_eq!(
            err.code,
            error_code::FENCED_MEMBER_EPOCH,
            "two epochs behind"
        );
        let err = group.heartbeat(beat("a", 9), 10, &t).unwrap_err();
        assert_eq!(err.code, error_code::FENCED_MEMBER_EPOCH);
        assert_eq!(group.assigned_partitions().len(), 6);
        // A fenced member rejoins with epoch 0 and keeps its place and partitions.
        let held = group.target["a"].clone();
        let again = group.heartbeat(join("a", &["t"]), 20, &t).unwrap();
        assert_eq!(again.member_epoch, 3);
        assert_eq!(again.assignment, Some(held));
    }

    #[test]
    fn the_assignor_shares_as_kafkas_simple_assignor_does() {
        let shares = |partitions: i32, members: usize| {
            let t = topics(&[("t", partitions)]);
            let mut group = ShareGroup::new("g", ShareGroupLimits::default());
            for m in 0..members {
                group
                    .heartbeat(join(&format!("m{m}"), &["t"]), 0, &t)
                    .unwrap();
            }
            let counts: Vec<usize> = group.target.values().map(count).collect();
            let mut sharing = vec![0usize; partitions as usize];
            for assignment in group.target.values() {
                for p in assignment.get("t").into_iter().flatten() {
                    sharing[*p as usize] += 1;
                }
            }
            (counts, sharing)
        };
        assert_eq!(shares(1, 3), (vec![1, 1, 1], vec![3]));
        let (counts, sharing) = shares(3, 2);
        assert_eq!((counts.iter().sum::<usize>(), sharing), (3, vec![1, 1, 1]));
        assert!(counts.contains(&2) && counts.contains(&1));
        assert_eq!(shares(4, 8), (vec![1; 8], vec![2; 4]));
    }

    #[test]
    fn members_keep_their_partitions_when_others_come_and_go() {
        let t = topics(&[("t", 4)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        group.heartbeat(join("a", &["t"]), 0, &t).unwrap();
        group.heartbeat(join("b", &["t"]), 0, &t).unwrap();
        let a_before = group.target["a"]["t"].clone();
        group.heartbeat(join("c", &["t"]), 0, &t).unwrap();
        group.heartbeat(join("d", &["t"]), 0, &t).unwrap();
        let a_after = &group.target["a"]["t"];
        assert_eq!(a_after.len(), 1);
        assert!(a_before.is_superset(a_after), "a kept one of its own");
    }

    #[test]
    fn more_members_than_partitions_share_them() {
        let t = topics(&[("t", 2)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        for id in ["a", "b", "c", "d", "e"] {
            group.heartbeat(join(id, &["t"]), 0, &t).unwrap();
        }
        // Each partition shared by ceil(5 / 2) = 3 members: 6 assignments, the first
        // member taking two (Kafka's desired counts 2, 1, 1, 1, 1).
        let counts: Vec<usize> = group.target.values().map(count).collect();
        assert_eq!(counts, vec![2, 1, 1, 1, 1]);
        for partition in 0..2 {
            let sharing = group
                .target
                .values()
                .filter(|a| a["t"].contains(&partition))
                .count();
            assert_eq!(sharing, 3);
        }
    }

    #[test]
    fn members_only_get_topics_they_subscribe_to() {
        let t = topics(&[("x", 2), ("y", 3)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        group.heartbeat(join("a", &["x"]), 0, &t).unwrap();
        group.heartbeat(join("b", &["x", "y"]), 0, &t).unwrap();
        assert!(!group.target["a"].contains_key("y"));
        assert_eq!(group.target["b"]["y"].len(), 3);
        assert_eq!(group.assigned_partitions().len(), 5);
    }

    #[test]
    fn requests_are_checked_as_kafka_checks_them() {
        let t = topics(&[("t", 1)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        let err = group.heartbeat(join("", &["t"]), 0, &t).unwrap_err();
        assert_eq!(err.code, error_code::INVALID_REQUEST);
        let err = group.heartbeat(join("a", &[]), 0, &t).unwrap_err();
        assert_eq!(err.code, error_code::INVALID_REQUEST);
        let err = group.heartbeat(beat("nobody", 3), 0, &t).unwrap_err();
        assert_eq!(err.code, error_code::UNKNOWN_MEMBER_ID);
        let err = group.heartbeat(beat("a", -2), 0, &t).unwrap_err();
        assert_eq!(err.code, error_code::INVALID_REQUEST);
        let mut small = ShareGroup::new(
            "g",
            ShareGroupLimits {
                max_size: 1,
                ..Default::default()
            },
        );
        small.heartbeat(join("a", &["t"]), 0, &t).unwrap();
        let err = small.heartbeat(join("b", &["t"]), 0, &t).unwrap_err();
        assert_eq!(err.code, error_code::GROUP_MAX_SIZE_REACHED);
    }

    #[test]
    fn leaving_and_expiring_members_hand_their_partitions_on() {
        let t = topics(&[("t", 4)]);
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        group.heartbeat(join("a", &["t"]), 0, &t).unwrap();
        group.heartbeat(join("b", &["t"]), 0, &t).unwrap();
        let left = group.heartbeat(beat("a", LEAVE_EPOCH), 1, &t).unwrap();
        assert_eq!(left.member_epoch, LEAVE_EPOCH);
        assert_eq!(count(&group.target["b"]), 4);
        assert_eq!(group.tick(45_000, &t), vec!["b".to_string()]);
        assert_eq!(group.state(), ShareGroupState::Empty);
    }

    #[test]
    fn a_topic_created_later_is_assigned_at_the_next_heartbeat() {
        let mut group = ShareGroup::new("g", ShareGroupLimits::default());
        let none = topics(&[]);
        let a = group.heartbeat(join("a", &["t"]), 0, &none).unwrap();
        assert_eq!(a.assignment, Some(Assignment::new()));
        let t = topics(&[("t", 2)]);
        let a = group.heartbeat(beat("a", a.member_epoch), 1, &t).unwrap();
        assert_eq!(count(&a.assignment.unwrap()), 2);
    }
}
