//! Eligible leader replicas (KIP-966), as Kafka 4.4's controller keeps them
//! (PartitionChangeBuilder). While a partition's ISR is below its min.insync.replicas, the
//! high watermark cannot move (partition.rs on the broker), so every replica that left the
//! ISR since it was last at min ISR still holds every committed record: those replicas are
//! the partition's ELR, and one of them may lead cleanly once the ISR is empty. With ELR on,
//! the last ISR member leaving (fenced, shutting down) empties the ISR instead of staying
//! in it; a replica whose broker restarted without a clean shutdown may have lost
//! unflushed records, so it leaves the ISR and the ELR. The last leader before the
//! partition lost its leader is kept (last known ELR) and elected, as an unclean election,
//! when the ISR and the ELR are both empty and it comes back: Kafka's "balanced recovery".
//!
//! The flows that change a partition (controller.rs) do it in Kafka's order: choose the
//! ISR, [`populate`] the ELR from it, elect a leader ([`valid_new_leader`],
//! [`last_known_leader`]), then [`finish`]; [`record_change`] is both for a change without
//! an election.

use std::collections::BTreeMap;

use crate::features::{FinalizedFeatures, ELIGIBLE_LEADER_REPLICAS_VERSION};
use crate::image::{MetadataImage, PartitionState};
use crate::{BrokerId, NO_LEADER};

/// The name of the topic and broker config.
pub const MIN_INSYNC_REPLICAS: &str = "min.insync.replicas";

/// What decides a partition's ELR: whether the feature is on, and the topic's effective
/// min.insync.replicas.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElrRules {
    pub enabled: bool,
    pub min_isr: usize,
}

/// The rules for `topic`'s partitions: the feature's finalized level, and Kafka's
/// effective min ISR (getTopicEffectiveMinIsr): the topic's min.insync.replicas, else the
/// cluster-wide dynamic one (which the first active controller records from its start
/// setting, as Kafka's format does), else 1; never above the replication factor. A
/// per-broker dynamic value lower than that (stored while ELR was off, or by an older
/// Strand: Kafka strips them when ELR is turned on, and so does `SetFeatures`) lowers it:
/// a leader using it moves its high watermark with fewer replicas, and the ELR must not
/// count on more.
pub fn rules(image: &MetadataImage, topic: &str) -> ElrRules {
    let parse = |value: &String| value.trim().parse::<usize>().ok();
    let topic_image = image.topic(topic);
    let configured = match topic_image.and_then(|t| t.configs.get(MIN_INSYNC_REPLICAS)) {
        Some(own) => parse(own).unwrap_or(1),
        None => {
            let cluster = image
                .default_broker_configs
                .get(MIN_INSYNC_REPLICAS)
                .and_then(parse)
                .unwrap_or(1);
            image
                .broker_configs
                .values()
                .filter_map(|configs| configs.get(MIN_INSYNC_REPLICAS).and_then(parse))
                .fold(cluster, usize::min)
        }
    };
    let replication_factor = topic_image
        .and_then(|t| t.partitions.first())
        .map_or(usize::MAX, |p| p.replicas.len());
    ElrRules {
        enabled: enabled(&image.features),
        min_isr: configured.min(replication_factor),
    }
}

/// `eligible.leader.replicas.version` 1 or more: the controller keeps ELRs, and a dynamic
/// min.insync.replicas is cluster-wide only.
pub fn enabled(features: &FinalizedFeatures) -> bool {
    features.level(ELIGIBLE_LEADER_REPLICAS_VERSION) >= 1
}

/// Kafka's isValidNewLeader: an ISR member, or, while the ISR is empty, an ELR member.
pub fn valid_new_leader(
    state: &PartitionState,
    replica: BrokerId,
    elr_enabled: bool,
    eligible: impl Fn(BrokerId) -> bool,
) -> bool {
    let in_sync = state.isr.contains(&replica)
        || (elr_enabled && state.isr.is_empty() && state.elr.contains(&replica));
    in_sync && eligible(replica)
}

/// Makes `replica` the leader of `next`; a leader taken from the ELR becomes the ISR.
pub fn take_leader(next: &mut PartitionState, replica: BrokerId) {
    if next.isr.is_empty() && next.elr.contains(&replica) {
        next.isr = vec![replica];
    }
    next.leader = replica;
}

/// The last known leader when it may be elected (Kafka's canElectLastKnownLeader): ELR
/// on, the ISR and the ELR empty, exactly one last known leader, and it eligible. Such an
/// election is unclean.
pub fn last_known_leader(
    state: &PartitionState,
    elr_enabled: bool,
    eligible: impl Fn(BrokerId) -> bool,
) -> Option<BrokerId> {
    match state.last_known_elr.as_slice() {
        [leader] if elr_enabled && state.isr.is_empty() && state.elr.is_empty() => {
            eligible(*leader).then_some(*leader)
        }
        _ => None,
    }
}

/// Kafka's maybePopulateTargetElr, before a change's election: with the ISR the change
/// leaves (`next.isr`) below min ISR, the replicas that were in the ISR or the ELR and are
/// not in it now are eligible (but a replica restarting uncleanly, and only replicas: a
/// reassignment completing below min ISR drops some, which Kafka's builder would keep);
/// at min ISR nobody is.
pub fn populate(
    prev: &PartitionState,
    next: &mut PartitionState,
    rules: ElrRules,
    unclean_shutdown: Option<BrokerId>,
) {
    if !rules.enabled {
        return;
    }
    if next.isr.len() >= rules.min_isr {
        next.elr.clear();
        return;
    }
    let mut elr: Vec<BrokerId> = prev
        .elr
        .iter()
        .chain(&prev.isr)
        .copied()
        .filter(|id| next.replicas.contains(id) && !next.isr.contains(id))
        .filter(|id| Some(*id) != unclean_shutdown)
        .collect();
    elr.sort_unstable();
    elr.dedup();
    next.elr = elr;
}

/// After a change's election (Kafka's maybeUpdateRecordElr and
/// maybeUpdateLastKnownLeader): an ELR member elected is in the ISR now, not the ELR; an
/// unclean election, or ELR off, forgets the ELR; the last known leader is the leader the
/// partition had when it lost it, cleared once it has one again (ELR off: left as is).
pub fn finish(
    prev: &PartitionState,
    next: &mut PartitionState,
    rules: ElrRules,
    unclean_election: bool,
) {
    if !rules.enabled || unclean_election {
        next.elr.clear();
    }
    let PartitionState { isr, elr, .. } = next;
    elr.retain(|id| !isr.contains(id));
    if !rules.enabled {
        return;
    }
    if next.leader == NO_LEADER && prev.leader != NO_LEADER && prev.last_known_elr.is_empty() {
        next.last_known_elr = vec![prev.leader];
    } else if next.leader != NO_LEADER && !prev.last_known_elr.is_empty() {
        next.last_known_elr.clear();
    }
}

/// [`populate`] and [`finish`] for a change without an election of its own (an ISR the
/// leader changed, a reassignment step, a failed replica leaving).
pub fn record_change(prev: &PartitionState, next: &mut PartitionState, rules: ElrRules) {
    populate(prev, next, rules, None);
    finish(prev, next, rules, false);
}

/// The changes that strip every per-broker min.insync.replicas when eligible leader
/// replicas are turned on (Kafka's maybeGenerateElrSafetyRecords): the brokers' config sets
/// without it.
pub fn without_per_broker_min_isr(
    image: &MetadataImage,
) -> Vec<(BrokerId, BTreeMap<String, String>)> {
    image
        .broker_configs
        .iter()
        .filter(|(_, configs)| configs.contains_key(MIN_INSYNC_REPLICAS))
        .map(|(broker, configs)| {
            let mut kept = configs.clone();
            kept.remove(MIN_INSYNC_REPLICAS);
            (*broker, kept)
        })
        .collect()
}

/// The ELR and last known ELR cleared (Kafka's ClearElrRecord, written when a topic's or
/// the cluster's min.insync.replicas changes): None when they are empty already.
pub fn cleared(state: &PartitionState) -> Option<PartitionState> {
    if state.elr.is_empty() && state.last_known_elr.is_empty() {
        return None;
    }
    let mut next = state.clone();
    next.elr.clear();
    next.last_known_elr.clear();
    next.partition_epoch += 1;
    Some(next)
}

/// Kafka's refusals of a dynamic min.insync.replicas while ELR is on: no broker may have
/// its own (the controller would not know which to use), and the cluster-wide one may
/// change but not go. `broker` is the BROKER resource (None: the cluster default);
/// `current` and `wanted` its configs before and after. Err(Kafka's message), an
/// INVALID_CONFIG.
pub fn check_min_isr_config(
    elr_enabled: bool,
    broker: Option<BrokerId>,
    current: Option<&str>,
    wanted: Option<&str>,
) -> Result<(), &'static str> {
    if !elr_enabled || current == wanted {
        return Ok(());
    }
    match broker {
        Some(_) => Err("Broker-level min.insync.replicas cannot be altered while ELR is enabled."),
        None if wanted.is_none() => {
            Err("Cluster-level min.insync.replicas cannot be removed while ELR is enabled.")
        }
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: ElrRules = ElrRules {
        enabled: true,
        min_isr: 2,
    };

    fn state(isr: &[BrokerId], leader: BrokerId, elr: &[BrokerId]) -> PartitionState {
        let mut state = PartitionState::new(vec![1, 2, 3]);
        state.isr = isr.to_vec();
        state.leader = leader;
        state.elr = elr.to_vec();
        state
    }

    /// A change of ISR and leader without an election of its own.
    fn changed(prev: &PartitionState, isr: &[BrokerId], leader: BrokerId) -> PartitionState {
        let mut next = prev.clone();
        next.isr = isr.to_vec();
        next.leader = leader;
        record_change(prev, &mut next, ON);
        next
    }

    #[test]
    fn replicas_leaving_below_min_isr_become_eligible() {
        let full = state(&[1, 2, 3], 1, &[]);
        // Down to min ISR: nobody is eligible outside the ISR.
        let at_min = changed(&full, &[1, 2], 1);
        assert!(at_min.elr.is_empty());
        // Below it: the replica that left holds every committed record.
        let below = changed(&at_min, &[1], 1);
        assert_eq!(below.elr, vec![2]);
        // The last ISR member goes (fenced): the ISR is empty, both are eligible, and the
        // leader it had is the last known one.
        let empty = changed(&below, &[], NO_LEADER);
        assert_eq!(empty.elr, vec![1, 2]);
        assert_eq!(empty.last_known_elr, vec![1]);
        // Back at min ISR: the ELR is forgotten.
        let back = changed(&below, &[1, 3], 1);
        assert!(back.elr.is_empty());
    }

    #[test]
    fn an_elr_member_elected_becomes_the_isr() {
        let empty = state(&[], NO_LEADER, &[1, 2]);
        assert!(valid_new_leader(&empty, 2, true, |_| true));
        assert!(!valid_new_leader(&empty, 2, false, |_| true));
        assert!(!valid_new_leader(&empty, 3, true, |_| true));
        // Kafka's order: the ELR is worked out with the ISR before the election (empty,
        // below min ISR even at min ISR 1), then the elected member leaves it.
        for min_isr in [1, 2] {
            let rules = ElrRules {
                enabled: true,
                min_isr,
            };
            let mut next = empty.clone();
            populate(&empty, &mut next, rules, None);
            take_leader(&mut next, 2);
            finish(&empty, &mut next, rules, false);
            assert_eq!(next.isr, vec![2]);
            assert_eq!(next.elr, vec![1], "min ISR {min_isr}");
        }
    }

    #[test]
    fn an_unclean_shutdown_or_election_forgets_eligibility() {
        let empty = state(&[], NO_LEADER, &[1, 2]);
        let mut next = empty.clone();
        populate(&empty, &mut next, ON, Some(2));
        finish(&empty, &mut next, ON, false);
        assert_eq!(next.elr, vec![1]);
        let mut next = empty.clone();
        populate(&empty, &mut next, ON, None);
        next.leader = 3;
        next.isr = vec![3];
        finish(&empty, &mut next, ON, true);
        assert!(next.elr.is_empty());
    }

    #[test]
    fn the_last_known_leader_alone_may_come_back() {
        let mut lost = state(&[], NO_LEADER, &[]);
        lost.last_known_elr = vec![1];
        assert_eq!(last_known_leader(&lost, true, |_| true), Some(1));
        assert_eq!(last_known_leader(&lost, true, |id| id != 1), None);
        assert_eq!(last_known_leader(&lost, false, |_| true), None);
        let mut with_elr = lost.clone();
        with_elr.elr = vec![2];
        assert_eq!(last_known_leader(&with_elr, true, |_| true), None);
        // Elected: the last known leader is cleared.
        let mut next = lost.clone();
        next.leader = 1;
        next.isr = vec![1];
        finish(&lost, &mut next, ON, true);
        assert!(next.last_known_elr.is_empty());
    }

    #[test]
    fn off_clears_the_elr_and_keeps_the_last_known_leader() {
        let mut prev = state(&[1], 1, &[2]);
        prev.last_known_elr = vec![3];
        let mut next = prev.clone();
        let off = ElrRules {
            enabled: false,
            min_isr: 2,
        };
        record_change(&prev, &mut next, off);
        assert!(next.elr.is_empty());
        assert_eq!(next.last_known_elr, vec![3]);
    }

    #[test]
    fn a_lower_per_broker_min_isr_lowers_the_rule() {
        let mut image = MetadataImage::default();
        image.default_broker_configs =
            BTreeMap::from([(MIN_INSYNC_REPLICAS.to_string(), "3".to_string())]);
        assert_eq!(rules(&image, "none").min_isr, 3);
        image.broker_configs.insert(
            2,
            BTreeMap::from([(MIN_INSYNC_REPLICAS.to_string(), "2".to_string())]),
        );
        assert_eq!(rules(&image, "none").min_isr, 2);
        assert_eq!(
            without_per_broker_min_isr(&image),
            vec![(2, BTreeMap::new())]
        );
    }

    #[test]
    fn min_isr_configs_while_elr_is_on() {
        assert!(check_min_isr_config(true, Some(1), None, Some("2")).is_err());
        assert!(check_min_isr_config(true, Some(1), Some("2"), Some("2")).is_ok());
        assert!(check_min_isr_config(false, Some(1), None, Some("2")).is_ok());
        assert!(check_min_isr_config(true, None, Some("2"), Some("3")).is_ok());
        assert!(check_min_isr_config(true, None, Some("2"), None).is_err());
        assert!(check_min_isr_config(true, None, None, None).is_ok());
    }
}
