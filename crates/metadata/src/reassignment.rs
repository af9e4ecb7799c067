//! Partition reassignment (AlterPartitionReassignments, kafka-reassign-partitions), as
//! Kafka's controller runs it, in three steps:
//!
//! 1. Start: the replica list becomes the target followed by the replicas it drops;
//!    `adding_replicas` and `removing_replicas` say which are which. The ISR is unchanged,
//!    and the added replicas start fetching as followers.
//! 2. Catch up: the leader adds each new replica to the ISR once it has caught up
//!    (AlterPartition).
//! 3. Complete: as soon as the ISR, without the removed replicas, holds every target
//!    replica, the replica list becomes the target and the removed replicas leave the
//!    ISR. If the leader was one of them, leadership moves to the first in-sync target
//!    replica. The removed replicas see they are no longer replicas and delete their logs.
//!
//! A reassignment that only reorders replicas, or only removes in-sync ones, completes at
//! once. Cancelling one (a null target) goes back to the replicas it started from. Every
//! step is a `PartitionState` change decided here and replayed from the metadata log.

use crate::controller::ItemResult;
use crate::error_code;
use crate::image::{MetadataImage, PartitionState};
use crate::{BrokerId, NO_LEADER};

/// Starts (or replaces) a reassignment of `state` to `target`. Returns the changed
/// partition, or None when `target` is what the partition has already.
pub fn reassign(
    image: &MetadataImage,
    state: &PartitionState,
    target: &[BrokerId],
    allow_replication_factor_change: bool,
) -> Result<Option<PartitionState>, ItemResult> {
    check_replica_list(image, target, None)?;
    if !allow_replication_factor_change {
        let current = target_size(state);
        if current != target.len() {
            return Err(ItemResult::error(
                error_code::INVALID_REPLICATION_FACTOR,
                format!(
                    "The replication factor is changed from {current} to {}",
                    target.len()
                ),
            ));
        }
    }
    // Against the replica list as it is now: a replica an earlier, unfinished reassignment
    // was adding and this target leaves out is removed like any other; one the target
    // keeps is still being added. (Kafka keeps the earlier adding and removing lists
    // whenever the new ones are empty, which can remove a target replica; not here.)
    let removing = sorted_difference(&state.replicas, target);
    let still_adding = state
        .adding_replicas
        .iter()
        .filter(|id| target.contains(id));
    let mut adding = sorted_difference(target, &state.replicas);
    adding.extend(still_adding);
    adding.sort_unstable();
    let mut next = state.clone();
    next.replicas = target.iter().chain(&removing).copied().collect();
    next.adding_replicas = adding;
    next.removing_replicas = removing;
    Ok(settle(image, state, next, false))
}

/// Cancels the reassignment in progress: the replicas it was adding leave the replica list
/// and the ISR; the ones it was removing stay. If only added replicas were in sync, the
/// revert needs an unclean election, which the topic must allow.
pub fn cancel(
    image: &MetadataImage,
    topic: &str,
    partition: i32,
    state: &PartitionState,
    unclean_allowed: bool,
) -> Result<Option<PartitionState>, ItemResult> {
    if !state.is_reassigning() {
        // Kafka answers the error's default message as null.
        return Err(ItemResult {
            code: error_code::NO_REASSIGNMENT_IN_PROGRESS,
            message: None,
        });
    }
    let adding = &state.adding_replicas;
    let mut next = state.clone();
    next.replicas.retain(|id| !adding.contains(id));
    next.isr.retain(|id| !adding.contains(id));
    next.adding_replicas.clear();
    next.removing_replicas.clear();
    if next.isr.is_empty() {
        if !unclean_allowed {
            return Err(ItemResult::error(
                error_code::INVALID_REPLICA_ASSIGNMENT,
                format!(
                    "Unable to revert partition assignment for {topic}:{partition} because it \
                     would require an unclean leader election."
                ),
            ));
        }
        next.isr = next.replicas.first().copied().into_iter().collect();
    }
    Ok(settle(image, state, next, unclean_allowed))
}

/// Finishes a change to `before` (the proposed `next`) as Kafka's PartitionChangeBuilder
/// does: completes the reassignment if the ISR allows, keeps the leader if it is still a
/// valid one or elects the first in-sync eligible replica (with `unclean`, any eligible
/// replica, the ISR then being just that one), and bumps the epochs. Returns None when
/// nothing changes.
pub fn settle(
    image: &MetadataImage,
    before: &PartitionState,
    mut next: PartitionState,
    unclean: bool,
) -> Option<PartitionState> {
    complete_if_in_sync(&mut next);
    let valid = |id: BrokerId, isr: &[BrokerId]| isr.contains(&id) && image.is_eligible(id);
    if !valid(next.leader, &next.isr) {
        let clean = next
            .replicas
            .iter()
            .copied()
            .find(|&id| valid(id, &next.isr));
        match clean {
            Some(leader) => next.leader = leader,
            None if unclean => {
                match next
                    .replicas
                    .iter()
                    .copied()
                    .find(|&id| image.is_eligible(id))
                {
                    Some(leader) => {
                        next.leader = leader;
                        next.isr = vec![leader];
                    }
                    None => next.leader = NO_LEADER,
                }
            }
            None => next.leader = NO_LEADER,
        }
    }
    if next == *before {
        return None;
    }
    // A new leader, or replicas dropped: followers and the old leader see a new epoch.
    let dropped = before.replicas.iter().any(|id| !next.replicas.contains(id));
    if next.leader != before.leader || dropped {
        next.leader_epoch = before.leader_epoch + 1;
    }
    next.partition_epoch = before.partition_epoch + 1;
    Some(next)
}

/// Step 3: the replica list becomes the target once the ISR without the removed replicas
/// is not empty and holds every target replica.
pub(crate) fn complete_if_in_sync(state: &mut PartitionState) {
    if !state.is_reassigning() {
        return;
    }
    let removing = &state.removing_replicas;
    let isr: Vec<BrokerId> = state
        .isr
        .iter()
        .copied()
        .filter(|id| !removing.contains(id))
        .collect();
    let replicas: Vec<BrokerId> = state
        .replicas
        .iter()
        .copied()
        .filter(|id| !removing.contains(id))
        .collect();
    if isr.is_empty() || replicas.is_empty() || !replicas.iter().all(|id| isr.contains(id)) {
        return;
    }
    state.isr = isr;
    state.replicas = replicas;
    state.adding_replicas.clear();
    state.removing_replicas.clear();
}

/// The replica count the partition has once its reassignment (if any) is done.
fn target_size(state: &PartitionState) -> usize {
    state.replicas.len() - state.removing_replicas.len()
}

/// Members of `a` not in `b`, in ascending order (as Kafka lists them).
fn sorted_difference(a: &[BrokerId], b: &[BrokerId]) -> Vec<BrokerId> {
    let mut out: Vec<BrokerId> = a.iter().copied().filter(|id| !b.contains(id)).collect();
    out.sort_unstable();
    out.dedup();
    out
}

/// Kafka's check of a manual replica list (CreateTopics assignments, reassignments): not
/// empty, each broker registered and named once, in ascending order of broker id, and the
/// same length as the other partitions' (`expected_len`) where that applies.
pub fn check_replica_list(
    image: &MetadataImage,
    replicas: &[BrokerId],
    expected_len: Option<usize>,
) -> Result<(), ItemResult> {
    let invalid =
        |message: String| ItemResult::error(error_code::INVALID_REPLICA_ASSIGNMENT, message);
    if replicas.is_empty() {
        return Err(invalid(
            "The manual partition assignment includes an empty replica list.".into(),
        ));
    }
    let mut sorted = replicas.to_vec();
    sorted.sort_unstable();
    let mut previous = None;
    for id in sorted {
        if !image.brokers.contains_key(&id) {
            return Err(invalid(format!(
                "The manual partition assignment includes broker {id}, but no such broker is registered."
            )));
        }
        if previous == Some(id) {
            return Err(invalid(format!(
                "The manual partition assignment includes the broker {id} more than once."
            )));
        }
        previous = Some(id);
    }
    match expected_len {
        Some(expected) if expected != replicas.len() => Err(invalid(format!(
            "The manual partition assignment includes a partition with {} replica(s), but this \
             is not consistent with previous partitions, which have {expected} replica(s).",
            replicas.len()
        ))),
        _ => Ok(()),
    }
}
