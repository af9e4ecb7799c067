//! Replica placement for new partitions: Kafka's round-robin with a shifting second
//! replica (`AdminUtils.assignReplicasToBrokers`), over brokers ordered so racks
//! alternate when `broker.rack` is set. Kafka draws the start index and shift at random;
//! here they come from a seed (the topic id) so every node computes the same placement.

use std::collections::{BTreeMap, BTreeSet};

use crate::BrokerId;

/// Brokers ordered by id, interleaved by rack ("rack alternated list"): a, b, c from
/// racks 1, 2, 3 then the second broker of each rack, and so on. Without racks: by id.
pub fn rack_alternated(brokers: &[(BrokerId, Option<String>)]) -> Vec<(BrokerId, Option<String>)> {
    let mut by_rack: BTreeMap<&str, Vec<(BrokerId, Option<String>)>> = BTreeMap::new();
    for (id, rack) in brokers {
        by_rack
            .entry(rack.as_deref().unwrap_or(""))
            .or_default()
            .push((*id, rack.clone()));
    }
    for ids in by_rack.values_mut() {
        ids.sort_unstable();
    }
    let mut ordered = Vec::with_capacity(brokers.len());
    let mut round = 0;
    while ordered.len() < brokers.len() {
        for ids in by_rack.values() {
            if let Some(broker) = ids.get(round) {
                ordered.push(broker.clone());
            }
        }
        round += 1;
    }
    ordered
}

/// Replica lists for partitions `first_partition..first_partition + count`, each of
/// `replication_factor` distinct brokers from `brokers` (ordered by `rack_alternated`).
/// When racks are set, a replica whose rack is already used is skipped for the next
/// broker on a new rack while one exists (Kafka's rack-aware rule). The caller checks
/// `replication_factor <= brokers.len()`.
pub fn assign_replicas(
    brokers: &[(BrokerId, Option<String>)],
    first_partition: usize,
    count: usize,
    replication_factor: usize,
    seed: u64,
) -> Vec<Vec<BrokerId>> {
    let n = brokers.len();
    assert!(replication_factor <= n && replication_factor > 0);
    let racks: BTreeSet<&str> = brokers.iter().filter_map(|(_, r)| r.as_deref()).collect();
    let start = (seed % n as u64) as usize;
    let mut shift = ((seed >> 32) % n as u64) as usize;
    let mut assignments = Vec::with_capacity(count);
    for partition in 0..first_partition + count {
        if partition > 0 && partition % n == 0 {
            shift += 1;
        }
        if partition < first_partition {
            continue;
        }
        let first = (start + partition) % n;
        let mut chosen = vec![first];
        for j in 0..replication_factor - 1 {
            // Kafka's replicaIndex: the step is 1..n-1, so it never lands on `first`.
            let step = 1 + (shift + j) % (n - 1).max(1);
            let used_racks: BTreeSet<&str> = chosen
                .iter()
                .filter_map(|&i| brokers[i].1.as_deref())
                .collect();
            let wants_new_rack = !racks.is_empty() && used_racks.len() < racks.len();
            let pick = (0..n)
                .map(|k| (first + step + k) % n)
                .filter(|i| !chosen.contains(i))
                .find(|&i| {
                    !wants_new_rack
                        || brokers[i]
                            .1
                            .as_deref()
                            .is_some_and(|rack| !used_racks.contains(rack))
                })
                .expect("replication_factor <= brokers, so an unused broker exists");
            chosen.push(pick);
        }
        assignments.push(chosen.into_iter().map(|i| brokers[i].0).collect());
    }
    assignments
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn replicas_are_distinct_and_leaders_spread() {
        let brokers: Vec<_> = (1..=4).map(|id| (id, None)).collect();
        for seed in [0u64, 7, 1 << 40, u64::MAX] {
            let plan = assign_replicas(&brokers, 0, 12, 3, seed);
            let mut leaders = BTreeMap::new();
            for replicas in &plan {
                assert_eq!(replicas.iter().collect::<BTreeSet<_>>().len(), 3);
                *leaders.entry(replicas[0]).or_insert(0) += 1;
            }
            assert!(leaders.values().all(|&count| count == 3), "{leaders:?}");
        }
    }

    #[test]
    fn growing_a_topic_continues_the_pattern() {
        let brokers: Vec<_> = (1..=3).map(|id| (id, None)).collect();
        let all = assign_replicas(&brokers, 0, 9, 2, 99);
        let tail = assign_replicas(&brokers, 4, 5, 2, 99);
        assert_eq!(&all[4..], &tail[..]);
    }

    #[test]
    fn racks_alternate() {
        let brokers = vec![
            (1, Some("a".to_string())),
            (2, Some("a".to_string())),
            (3, Some("b".to_string())),
            (4, Some("b".to_string())),
        ];
        let ordered = rack_alternated(&brokers);
        let ids: Vec<BrokerId> = ordered.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, vec![1, 3, 2, 4]);
        let rack = |id: BrokerId| if id <= 2 { "a" } else { "b" };
        for seed in 0..50u64 {
            for replicas in
                assign_replicas(&ordered, 0, 8, 2, seed.wrapping_mul(0x9E37_79B9_7F4A_7C15))
            {
                assert_ne!(rack(replicas[0]), rack(replicas[1]), "{replicas:?}");
            }
        }
    }
}
