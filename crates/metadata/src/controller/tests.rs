use std::collections::BTreeMap;

use proptest::prelude::*;

use super::*;
use crate::features::ELIGIBLE_LEADER_REPLICAS_VERSION;

fn incarnation(id: BrokerId) -> Uuid {
    Uuid::from_u128(id as u128)
}

fn cluster(brokers: &[BrokerId]) -> MetadataImage {
    let mut image = MetadataImage::default();
    for &id in brokers {
        apply(
            &mut image,
            &ControllerCommand::RegisterBroker {
                id,
                host: "127.0.0.1".into(),
                port: 9000 + id as u16,
                rack: None,
                incarnation: incarnation(id),
                listeners: Vec::new(),
                unclean_shutdown: false,
            },
        );
        assert!(
            image.brokers[&id].fenced,
            "a new registration starts fenced"
        );
        apply(
            &mut image,
            &ControllerCommand::UnfenceBroker {
                id,
                incarnation: incarnation(id),
            },
        );
    }
    image
}

fn new_topic(name: &str, partitions: i32, rf: i16) -> NewTopic {
    NewTopic {
        name: name.into(),
        id: Uuid::from_u128(0xabcdef ^ name.len() as u128),
        partitions,
        replication_factor: rf,
        assignments: Vec::new(),
        configs: BTreeMap::new(),
    }
}

fn create(image: &mut MetadataImage, topic: NewTopic) -> ItemResult {
    match apply(
        image,
        &ControllerCommand::CreateTopics {
            topics: vec![topic],
        },
    )
    .0
    {
        ControllerReply::Results(mut results) => results.remove(0),
        other => panic!("{other:?}"),
    }
}

fn fence(image: &mut MetadataImage, id: BrokerId) {
    apply(
        image,
        &ControllerCommand::FenceBroker {
            id,
            incarnation: image.brokers[&id].incarnation,
        },
    );
}

fn unfence(image: &mut MetadataImage, id: BrokerId) {
    apply(
        image,
        &ControllerCommand::UnfenceBroker {
            id,
            incarnation: image.brokers[&id].incarnation,
        },
    );
}

#[test]
fn topics_get_distinct_replicas_with_the_first_leading() {
    let mut image = cluster(&[1, 2, 3]);
    assert!(create(&mut image, new_topic("orders", 6, 3)).is_ok());
    let topic = image.topic("orders").unwrap();
    assert_eq!(topic.partitions.len(), 6);
    for state in &topic.partitions {
        let mut sorted = state.replicas.clone();
        sorted.sort_unstable();
        assert_eq!(sorted, vec![1, 2, 3]);
        assert_eq!(state.leader, state.replicas[0]);
        assert_eq!(state.isr, state.replicas);
    }
    assert!(image.topic_by_id(&topic.id).is_some());
    let again = create(&mut image, new_topic("orders", 1, 1));
    assert_eq!(again.code, error_code::TOPIC_ALREADY_EXISTS);
}

#[test]
fn replication_factor_beyond_live_brokers_is_refused() {
    let mut image = cluster(&[1, 2, 3]);
    fence(&mut image, 3);
    let result = create(&mut image, new_topic("t", 1, 3));
    assert_eq!(result.code, error_code::INVALID_REPLICATION_FACTOR);
    assert!(result.message.unwrap().contains("only 2 broker(s)"));
}

#[test]
fn fencing_a_leader_elects_from_the_isr_and_bumps_the_epoch() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 3, 3));
    let before = image.topic("t").unwrap().partitions.clone();
    let victim = before[0].leader;
    fence(&mut image, victim);
    for (old, new) in before.iter().zip(&image.topic("t").unwrap().partitions) {
        assert!(!new.isr.contains(&victim));
        assert_ne!(new.leader, victim);
        assert!(old.isr.contains(&new.leader));
        assert_eq!(
            new.leader_epoch,
            old.leader_epoch + i32::from(old.leader == victim)
        );
        assert_eq!(new.partition_epoch, old.partition_epoch + 1);
    }
}

/// A new incarnation of broker `id` registers (after a clean shutdown or not), then, if
/// `unfenced`, heartbeats its way out of fencing.
fn restart(
    image: &mut MetadataImage,
    id: BrokerId,
    incarnation: Uuid,
    unclean_shutdown: bool,
    unfenced: bool,
) {
    apply(
        image,
        &ControllerCommand::RegisterBroker {
            id,
            host: "h".into(),
            port: 1,
            rack: None,
            incarnation,
            listeners: Vec::new(),
            unclean_shutdown,
        },
    );
    if unfenced {
        apply(image, &ControllerCommand::UnfenceBroker { id, incarnation });
    }
}

fn set_features(image: &mut MetadataImage, name: &str, level: i16) {
    apply(
        image,
        &ControllerCommand::SetFeatures {
            levels: BTreeMap::from([(name.to_string(), level)]),
        },
    );
}

fn set_topic_configs(image: &mut MetadataImage, topic: &str, configs: &[(&str, &str)]) {
    apply(
        image,
        &ControllerCommand::SetTopicConfigs {
            name: topic.into(),
            configs: configs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        },
    );
}

/// The last ISR member fenced: without ELR it stays in the ISR, with ELR (Kafka 4.4's
/// default) it leaves the ISR for the ELR and is the last known leader; either way only it
/// may lead again, and does when it is back.
fn last_isr_member_leads_again_when_back(elr_on: bool) {
    let mut image = cluster(&[1, 2, 3]);
    set_features(
        &mut image,
        ELIGIBLE_LEADER_REPLICAS_VERSION,
        i16::from(elr_on),
    );
    create(&mut image, new_topic("t", 1, 3));
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    fence(&mut image, replicas[0]);
    fence(&mut image, replicas[1]);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.leader, replicas[2]);
    assert_eq!(state.isr, vec![replicas[2]]);
    fence(&mut image, replicas[2]);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.leader, NO_LEADER, "no unclean election by default");
    if elr_on {
        assert!(state.isr.is_empty(), "{state:?}");
        assert_eq!(state.elr, vec![replicas[2]]);
        assert_eq!(state.last_known_elr, vec![replicas[2]]);
    } else {
        assert_eq!(state.isr, vec![replicas[2]]);
        assert!(state.elr.is_empty() && state.last_known_elr.is_empty());
    }
    // The first two come back: neither in the ISR nor eligible, so still no leader.
    unfence(&mut image, replicas[0]);
    unfence(&mut image, replicas[1]);
    assert_eq!(image.partition("t", 0).unwrap().leader, NO_LEADER);
    unfence(&mut image, replicas[2]);
    let state = image.partition("t", 0).unwrap();
    assert_eq!(state.leader, replicas[2]);
    assert_eq!(state.isr, vec![replicas[2]]);
    assert!(state.elr.is_empty() && state.last_known_elr.is_empty());
    assert_eq!(state.leader_epoch, 4, "three fences and one election");
}

#[test]
fn without_elr_the_last_isr_member_is_kept_and_leads_again_when_back() {
    last_isr_member_leads_again_when_back(false);
}

#[test]
fn with_elr_the_last_isr_member_leaves_for_the_elr_and_leads_again_when_back() {
    last_isr_member_leads_again_when_back(true);
}

/// KIP-966's point: with min ISR 2, the replicas that left the ISR while it was below 2
/// hold every committed record (the high watermark did not move), so any of them may
/// lead once the ISR is empty, not only the last ISR member.
#[test]
fn an_elr_member_leads_when_the_last_isr_member_stays_away() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    set_topic_configs(&mut image, "t", &[("min.insync.replicas", "2")]);
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    fence(&mut image, replicas[0]);
    let state = image.partition("t", 0).unwrap().clone();
    assert!(state.elr.is_empty(), "at min ISR: {state:?}");
    fence(&mut image, replicas[1]);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.isr, vec![replicas[2]]);
    assert_eq!(state.elr, vec![replicas[1]], "left below min ISR");
    fence(&mut image, replicas[2]);
    let state = image.partition("t", 0).unwrap().clone();
    assert!(state.isr.is_empty());
    let mut both = vec![replicas[1], replicas[2]];
    both.sort_unstable();
    assert_eq!(state.elr, both);
    // replicas[0] left at min ISR: it may have missed committed records.
    unfence(&mut image, replicas[0]);
    assert_eq!(image.partition("t", 0).unwrap().leader, NO_LEADER);
    unfence(&mut image, replicas[1]);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.leader, replicas[1]);
    assert_eq!(state.isr, vec![replicas[1]]);
    assert_eq!(state.elr, vec![replicas[2]]);
    // Changing min ISR forgets the ELR, as Kafka's ClearElrRecord.
    set_topic_configs(&mut image, "t", &[("min.insync.replicas", "1")]);
    let cleared = image.partition("t", 0).unwrap();
    assert!(cleared.elr.is_empty());
    assert_eq!(cleared.partition_epoch, state.partition_epoch + 1);
}

#[test]
fn an_unclean_restart_leaves_the_elr_and_the_last_leader_comes_back_uncleanly() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    set_topic_configs(&mut image, "t", &[("min.insync.replicas", "2")]);
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    for &id in &replicas {
        fence(&mut image, id);
    }
    let last = replicas[2];
    let crashed = |id: BrokerId| Uuid::from_u128(0x1000 + id as u128);
    // Both ELR members restart after a crash: neither is eligible any more.
    restart(&mut image, replicas[1], crashed(replicas[1]), true, true);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.leader, NO_LEADER);
    assert_eq!(state.elr, vec![last]);
    assert_eq!(state.last_known_elr, vec![last]);
    restart(&mut image, last, crashed(last), true, true);
    // The ISR and the ELR are empty: the last known leader is elected, uncleanly.
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.leader, last, "{state:?}");
    assert_eq!(state.isr, vec![last]);
    assert!(state.elr.is_empty() && state.last_known_elr.is_empty());
}

#[test]
fn a_clean_restart_keeps_the_elr_place() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    for &id in &replicas {
        fence(&mut image, id);
    }
    let last = replicas[2];
    restart(&mut image, last, Uuid::from_u128(0x2000), false, false);
    assert_eq!(image.partition("t", 0).unwrap().elr, vec![last]);
}

#[test]
fn min_isr_is_recorded_cluster_wide_at_init_and_its_change_clears_every_elr() {
    let mut image = cluster(&[1, 2, 3]);
    apply(
        &mut image,
        &ControllerCommand::InitCluster {
            cluster_id: "c".into(),
            min_insync_replicas: Some(2),
        },
    );
    assert_eq!(
        image.default_broker_configs.get("min.insync.replicas"),
        Some(&"2".to_string())
    );
    create(&mut image, new_topic("t", 1, 3));
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    fence(&mut image, replicas[0]);
    fence(&mut image, replicas[1]);
    assert_eq!(image.partition("t", 0).unwrap().elr, vec![replicas[1]]);
    apply(
        &mut image,
        &ControllerCommand::SetBrokerConfigs {
            broker: None,
            configs: BTreeMap::from([("min.insync.replicas".to_string(), "3".to_string())]),
        },
    );
    assert!(image.partition("t", 0).unwrap().elr.is_empty());
}

#[test]
fn unclean_election_only_where_the_topic_allows_it() {
    let mut image = cluster(&[1, 2, 3]);
    let mut topic = new_topic("dirty", 1, 3);
    topic
        .configs
        .insert("unclean.leader.election.enable".into(), "true".into());
    create(&mut image, topic);
    let replicas = image.partition("dirty", 0).unwrap().replicas.clone();
    let leader = replicas[0];
    // Shrink the ISR to the leader alone, then lose it.
    let state = image.partition("dirty", 0).unwrap().clone();
    let reply = apply(
        &mut image,
        &ControllerCommand::AlterPartition {
            topic: "dirty".into(),
            partition: 0,
            leader,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            isr: vec![leader],
        },
    )
    .0;
    assert!(matches!(reply, ControllerReply::Partition(Ok(_))));
    fence(&mut image, leader);
    let state = image.partition("dirty", 0).unwrap();
    assert_eq!(state.leader, replicas[1]);
    assert_eq!(state.isr, vec![replicas[1]]);
}

#[test]
fn alter_partition_checks_epochs_membership_and_eligibility() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    let state = image.partition("t", 0).unwrap().clone();
    let alter = |isr: Vec<BrokerId>, leader_epoch: i32, partition_epoch: i32| {
        ControllerCommand::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: state.leader,
            leader_epoch,
            partition_epoch,
            isr,
        }
    };
    let code = |reply: ControllerReply| match reply {
        ControllerReply::Partition(Err(error)) => error.code,
        ControllerReply::Partition(Ok(_)) => error_code::NONE,
        other => panic!("{other:?}"),
    };
    let leader = state.leader;
    let follower = state.replicas[1];
    let other = state.replicas[2];
    assert_eq!(
        code(apply(&mut image, &alter(vec![leader, follower], -1, 0)).0),
        error_code::FENCED_LEADER_EPOCH
    );
    assert_eq!(
        code(apply(&mut image, &alter(vec![leader, follower], 0, 7)).0),
        error_code::INVALID_UPDATE_VERSION
    );
    assert_eq!(
        code(apply(&mut image, &alter(vec![follower], 0, 0)).0),
        error_code::INVALID_REQUEST,
        "the leader stays in its ISR"
    );
    assert_eq!(
        code(apply(&mut image, &alter(vec![leader, follower], 0, 0)).0),
        error_code::NONE
    );
    assert_eq!(image.partition("t", 0).unwrap().partition_epoch, 1);
    fence(&mut image, other);
    let epoch = image.partition("t", 0).unwrap().partition_epoch;
    assert_eq!(
        code(apply(&mut image, &alter(vec![leader, follower, other], 0, epoch)).0),
        error_code::INELIGIBLE_REPLICA
    );
}

#[test]
fn a_new_incarnation_loses_its_leaderships_until_unfenced() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 3, 3));
    let led_by_1 = |image: &MetadataImage| {
        image
            .topic("t")
            .unwrap()
            .partitions
            .iter()
            .filter(|p| p.leader == 1)
            .count()
    };
    assert_eq!(led_by_1(&image), 1);
    apply(
        &mut image,
        &ControllerCommand::RegisterBroker {
            id: 1,
            host: "127.0.0.1".into(),
            port: 9001,
            rack: None,
            incarnation: Uuid::from_u128(77),
            listeners: Vec::new(),
            unclean_shutdown: false,
        },
    );
    assert!(image.brokers[&1].fenced);
    assert_eq!(led_by_1(&image), 0);
    assert!(image
        .topic("t")
        .unwrap()
        .partitions
        .iter()
        .all(|p| !p.isr.contains(&1)));
    // The old incarnation's unfence is refused.
    let reply = apply(
        &mut image,
        &ControllerCommand::UnfenceBroker {
            id: 1,
            incarnation: incarnation(1),
        },
    )
    .0;
    assert_eq!(
        reply,
        ControllerReply::Results(vec![ItemResult::error(
            error_code::STALE_BROKER_EPOCH,
            "broker 1 is not registered with this incarnation"
        )])
    );
}

#[test]
fn controlled_shutdown_moves_leadership_and_preferred_election_restores_it() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 6, 3));
    apply(
        &mut image,
        &ControllerCommand::ControlledShutdown {
            id: 2,
            incarnation: incarnation(2),
        },
    );
    let partitions = &image.topic("t").unwrap().partitions;
    assert!(partitions
        .iter()
        .all(|p| p.leader != 2 && !p.isr.contains(&2)));
    // Back (unfenced), caught up (the leader re-adds it to the ISR), then rebalanced.
    unfence(&mut image, 2);
    for index in 0..6 {
        let state = image.partition("t", index).unwrap().clone();
        let mut isr = state.isr.clone();
        isr.push(2);
        apply(
            &mut image,
            &ControllerCommand::AlterPartition {
                topic: "t".into(),
                partition: index,
                leader: state.leader,
                leader_epoch: state.leader_epoch,
                partition_epoch: state.partition_epoch,
                isr,
            },
        );
    }
    apply(&mut image, &ControllerCommand::ElectPreferredLeaders);
    for state in &image.topic("t").unwrap().partitions {
        assert_eq!(state.leader, state.replicas[0]);
    }
}

#[test]
fn producer_id_blocks_never_overlap() {
    let mut image = MetadataImage::default();
    let mut next = 0;
    for count in [1000, 1, 5000] {
        match apply(
            &mut image,
            &ControllerCommand::AllocateProducerIds { count },
        )
        .0
        {
            ControllerReply::ProducerIds { first, count: got } => {
                assert_eq!(first, next);
                next = first + got;
            }
            other => panic!("{other:?}"),
        }
    }
}

#[test]
fn delete_and_grow_topics() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 2, 2));
    let reply = apply(
        &mut image,
        &ControllerCommand::CreatePartitions {
            name: "t".into(),
            count: 5,
        },
    )
    .0;
    assert_eq!(reply, ControllerReply::Results(vec![ItemResult::ok()]));
    assert_eq!(image.topic("t").unwrap().partitions.len(), 5);
    assert!(image
        .topic("t")
        .unwrap()
        .partitions
        .iter()
        .all(|p| p.replicas.len() == 2));
    let reply = apply(
        &mut image,
        &ControllerCommand::DeleteTopics {
            names: vec!["t".into(), "missing".into()],
        },
    )
    .0;
    let ControllerReply::Results(results) = reply else {
        panic!()
    };
    assert!(results[0].is_ok());
    assert_eq!(results[1].code, error_code::UNKNOWN_TOPIC_OR_PARTITION);
    assert!(image.topics.is_empty());
}

#[derive(Debug, Clone)]
enum Step {
    Fence(BrokerId),
    Unfence(BrokerId),
    Restart(BrokerId, bool),
    Shrink(usize),
    Expand(usize),
    Preferred,
    Reassign(usize, Vec<BrokerId>),
    Cancel(usize),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        (1..=4).prop_map(Step::Fence),
        (1..=4).prop_map(Step::Unfence),
        (1..=4, any::<bool>()).prop_map(|(id, unclean)| Step::Restart(id, unclean)),
        (0..4usize).prop_map(Step::Shrink),
        (0..4usize).prop_map(Step::Expand),
        Just(Step::Preferred),
        (
            0..4usize,
            proptest::sample::subsequence(vec![1, 2, 3, 4], 1..=4).prop_shuffle()
        )
            .prop_map(|(index, target)| Step::Reassign(index, target)),
        (0..4usize).prop_map(Step::Cancel),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Whatever happens to brokers, every partition keeps Kafka's invariants, and a
    /// leader change without unclean election picks a member of the previous ISR (the
    /// replicas known to hold every committed record).
    #[test]
    fn elections_keep_the_invariants(
        steps in proptest::collection::vec(step(), 1..60),
        elr_on in any::<bool>(),
    ) {
        let mut image = cluster(&[1, 2, 3, 4]);
        set_features(&mut image, ELIGIBLE_LEADER_REPLICAS_VERSION, i16::from(elr_on));
        create(&mut image, new_topic("t", 4, 3));
        // Min ISR 2 of 3 replicas: the ELR fills as the ISR shrinks below it.
        set_topic_configs(&mut image, "t", &[("min.insync.replicas", "2")]);
        let mut restarts = 100u128;
        for step in steps {
            let before = image.clone();
            match step {
                Step::Fence(id) => fence(&mut image, id),
                Step::Unfence(id) => unfence(&mut image, id),
                Step::Restart(id, unclean_shutdown) => {
                    restarts += 1;
                    apply(&mut image, &ControllerCommand::RegisterBroker {
                        id, host: "h".into(), port: 1, rack: None,
                        incarnation: Uuid::from_u128(restarts),
                        listeners: Vec::new(),
                        unclean_shutdown,
                    });
                }
                Step::Shrink(index) | Step::Expand(index) => {
                    let state = image.partition("t", index as i32).unwrap().clone();
                    if state.leader == NO_LEADER { continue; }
                    let isr = if matches!(step, Step::Shrink(_)) {
                        vec![state.leader]
                    } else {
                        state.replicas.iter().copied()
                            .filter(|&id| state.isr.contains(&id) || image.is_eligible(id))
                            .collect()
                    };
                    apply(&mut image, &ControllerCommand::AlterPartition {
                        topic: "t".into(), partition: index as i32, leader: state.leader,
                        leader_epoch: state.leader_epoch,
                        partition_epoch: state.partition_epoch, isr,
                    });
                }
                Step::Preferred => { apply(&mut image, &ControllerCommand::ElectPreferredLeaders); }
                Step::Reassign(index, ref target) => {
                    reassign(&mut image, "t", index as i32, Some(target.clone()));
                }
                Step::Cancel(index) => { reassign(&mut image, "t", index as i32, None); }
            }
            for (old, new) in before.topic("t").unwrap().partitions.iter()
                .zip(&image.topic("t").unwrap().partitions)
            {
                // Only a partition without a leader has an empty ISR (with ELR on).
                prop_assert!(!new.isr.is_empty() || (elr_on && new.leader == NO_LEADER));
                prop_assert!(new.isr.iter().all(|id| new.replicas.contains(id)));
                // The ELR: replicas outside the ISR, only while it is below min ISR.
                prop_assert!(new.elr.iter().all(|id| new.replicas.contains(id) && !new.isr.contains(id)));
                prop_assert!(new.elr.is_empty() || (elr_on && new.isr.len() < 2), "{new:?}");
                let mut distinct = new.replicas.clone();
                distinct.sort_unstable();
                distinct.dedup();
                prop_assert_eq!(distinct.len(), new.replicas.len());
                prop_assert!(new.adding_replicas.iter().chain(&new.removing_replicas)
                    .all(|id| new.replicas.contains(id)));
                prop_assert!(new.adding_replicas.iter().all(|id| !new.removing_replicas.contains(id)));
                if new.replicas.len() < old.replicas.len() || new.leader != old.leader {
                    // Replicas dropped or a new leader: a new leader epoch fences the old.
                    prop_assert!(new.leader_epoch > old.leader_epoch);
                }
                prop_assert!(new.leader_epoch >= old.leader_epoch);
                prop_assert!(new.partition_epoch >= old.partition_epoch);
                if new.leader != NO_LEADER {
                    prop_assert!(new.isr.contains(&new.leader));
                    prop_assert!(image.is_eligible(new.leader));
                }
                if new.leader != old.leader {
                    prop_assert!(new.leader_epoch > old.leader_epoch);
                    // From the old ISR, or (an ISR expansion completing a reassignment)
                    // from the replicas the leader just reported in sync.
                    // With ELR, once the change empties the ISR: an ELR member, or the
                    // last leader when the ELR is empty too (perhaps emptied by this
                    // change: an unclean restart), an unclean election forgetting the ELR.
                    let from_elr = old.elr.contains(&new.leader);
                    let last_known = old.last_known_elr == [new.leader] && new.elr.is_empty();
                    if new.leader != NO_LEADER && !matches!(step, Step::Expand(_)) {
                        prop_assert!(
                            old.isr.contains(&new.leader) || from_elr || last_known,
                            "{old:?} -> {new:?}"
                        );
                    }
                }
                if new.isr != old.isr && new.leader == old.leader && new.leader != NO_LEADER {
                    // ISR changes come with a partition epoch bump.
                    prop_assert!(new.partition_epoch > old.partition_epoch);
                }
                // Liveness: an eligible ISR member (or, the ISR being empty, ELR member)
                // means someone leads.
                let candidates = if new.isr.is_empty() { &new.elr } else { &new.isr };
                if candidates.iter().any(|&id| image.is_eligible(id)) {
                    prop_assert!(new.leader != NO_LEADER, "{new:?}");
                }
            }
        }
    }
}

#[test]
fn the_first_cluster_id_stays() {
    let mut image = MetadataImage::default();
    for id in ["first", "second"] {
        apply(
            &mut image,
            &ControllerCommand::InitCluster {
                min_insync_replicas: None,
                cluster_id: id.into(),
            },
        );
    }
    assert_eq!(image.cluster_id.as_deref(), Some("first"));
}

fn replica_failed(image: &mut MetadataImage, id: BrokerId, topic: &str) -> ItemResult {
    match apply(
        image,
        &ControllerCommand::ReplicaFailed {
            id,
            incarnation: incarnation(id),
            topic: topic.into(),
            partition: 0,
        },
    )
    .0
    {
        ControllerReply::Results(mut results) => results.remove(0),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_failed_leader_replica_hands_leadership_to_the_isr_and_leaves_it() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    let before = image.partition("t", 0).unwrap().clone();
    let leader = before.leader;
    assert!(replica_failed(&mut image, leader, "t").is_ok());
    let after = image.partition("t", 0).unwrap();
    assert_ne!(after.leader, leader);
    assert!(before.isr.contains(&after.leader));
    assert!(
        !after.isr.contains(&leader),
        "the damaged replica is out of the ISR"
    );
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
    // Reported again (every check until it restarts): nothing more changes.
    let settled = after.clone();
    assert!(replica_failed(&mut image, leader, "t").is_ok());
    assert_eq!(image.partition("t", 0).unwrap(), &settled);
}

#[test]
fn a_failed_follower_leaves_the_isr_and_a_sole_in_sync_replica_stays() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    let state = image.partition("t", 0).unwrap().clone();
    let follower = state.replicas[1];
    replica_failed(&mut image, follower, "t");
    let after = image.partition("t", 0).unwrap().clone();
    assert_eq!(after.leader, state.leader);
    assert!(!after.isr.contains(&follower));

    create(&mut image, new_topic("single", 1, 1));
    let alone = image.partition("single", 0).unwrap().clone();
    assert!(replica_failed(&mut image, alone.leader, "single").is_ok());
    assert_eq!(
        image.partition("single", 0).unwrap(),
        &alone,
        "no other replica can serve: it keeps leading"
    );

    let stale = apply(
        &mut image,
        &ControllerCommand::ReplicaFailed {
            id: state.leader,
            incarnation: Uuid::from_u128(999),
            topic: "t".into(),
            partition: 0,
        },
    )
    .0;
    assert_eq!(
        stale,
        ControllerReply::single(ItemResult::error(
            error_code::STALE_BROKER_EPOCH,
            format!(
                "broker {} is not registered with this incarnation",
                state.leader
            )
        ))
    );
}

fn elect(
    image: &mut MetadataImage,
    election: Election,
    partitions: Option<Vec<(&str, i32)>>,
) -> Vec<(String, i32, i16)> {
    let command = ControllerCommand::ElectLeaders {
        election,
        partitions: partitions
            .map(|list| list.into_iter().map(|(t, p)| (t.to_string(), p)).collect()),
    };
    match apply(image, &command) {
        (ControllerReply::Elections(topics), _) => topics
            .into_iter()
            .flat_map(|t| {
                let topic = t.topic;
                t.partitions
                    .into_iter()
                    .map(move |(p, result)| (topic.clone(), p, result.code))
            })
            .collect(),
        other => panic!("unexpected reply {other:?}"),
    }
}

#[test]
fn preferred_elections_answer_as_kafka() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 2, 3));
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    // Every preferred replica leads: nothing to do, and the all-partitions form answers
    // nothing at all.
    assert_eq!(
        elect(
            &mut image,
            Election::Preferred,
            Some(vec![("t", 0), ("t", 9), ("u", 0)])
        ),
        vec![
            ("t".into(), 0, error_code::ELECTION_NOT_NEEDED),
            ("t".into(), 9, error_code::UNKNOWN_TOPIC_OR_PARTITION),
            ("u".into(), 0, error_code::UNKNOWN_TOPIC_OR_PARTITION),
        ]
    );
    assert_eq!(elect(&mut image, Election::Preferred, None), vec![]);
    match apply(
        &mut image,
        &ControllerCommand::ElectLeaders {
            election: Election::Preferred,
            partitions: None,
        },
    ) {
        (ControllerReply::Elections(topics), _) => assert_eq!(
            topics,
            vec![TopicElections {
                topic: "t".into(),
                partitions: vec![]
            }],
            "every topic is listed, without the partitions that needed nothing"
        ),
        other => panic!("unexpected reply {other:?}"),
    }
    // The preferred replica fenced: leadership moves; while it is out of the ISR the
    // election is not possible.
    fence(&mut image, replicas[0]);
    assert_ne!(image.partition("t", 0).unwrap().leader, replicas[0]);
    unfence(&mut image, replicas[0]);
    assert_eq!(
        elect(&mut image, Election::Preferred, Some(vec![("t", 0)])),
        vec![("t".into(), 0, error_code::PREFERRED_LEADER_NOT_AVAILABLE)]
    );
    // Back in the ISR: elected, epochs bumped.
    let state = image.partition("t", 0).unwrap().clone();
    let mut isr = state.isr.clone();
    isr.push(replicas[0]);
    apply(
        &mut image,
        &ControllerCommand::AlterPartition {
            topic: "t".into(),
            partition: 0,
            leader: state.leader,
            leader_epoch: state.leader_epoch,
            partition_epoch: state.partition_epoch,
            isr,
        },
    );
    let before = image.partition("t", 0).unwrap().clone();
    let results = elect(&mut image, Election::Preferred, None);
    assert!(
        results.contains(&("t".into(), 0, error_code::NONE)),
        "{results:?}"
    );
    let after = image.partition("t", 0).unwrap();
    assert_eq!(after.leader, replicas[0]);
    assert_eq!(after.leader_epoch, before.leader_epoch + 1);
    assert_eq!(after.partition_epoch, before.partition_epoch + 1);
}

#[test]
fn unclean_election_on_request_even_where_the_topic_forbids_it() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 3));
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    assert_eq!(
        elect(&mut image, Election::Unclean, Some(vec![("t", 0)])),
        vec![("t".into(), 0, error_code::ELECTION_NOT_NEEDED)],
        "a partition with a leader needs no unclean election"
    );
    for &id in &replicas {
        fence(&mut image, id);
    }
    let state = image.partition("t", 0).unwrap();
    // The last ISR member: in the ISR without ELR, in the ELR with it.
    let last = *state.isr.first().or(state.elr.first()).unwrap();
    assert_eq!(state.leader, NO_LEADER);
    assert_eq!(
        elect(&mut image, Election::Unclean, Some(vec![("t", 0)])),
        vec![("t".into(), 0, error_code::ELIGIBLE_LEADERS_NOT_AVAILABLE)]
    );
    // A replica outside the ISR comes back; the last ISR member stays away.
    let other = *replicas.iter().find(|&&id| id != last).unwrap();
    unfence(&mut image, other);
    assert_eq!(image.partition("t", 0).unwrap().leader, NO_LEADER);
    assert_eq!(
        elect(&mut image, Election::Unclean, None),
        vec![("t".into(), 0, error_code::NONE)]
    );
    let state = image.partition("t", 0).unwrap();
    assert_eq!(state.leader, other);
    assert_eq!(state.isr, vec![other]);
}

fn reassign(
    image: &mut MetadataImage,
    topic: &str,
    partition: i32,
    target: Option<Vec<BrokerId>>,
) -> ItemResult {
    let command = ControllerCommand::AlterPartitionReassignments {
        reassignments: vec![Reassignment {
            topic: topic.into(),
            partition,
            target,
        }],
        allow_replication_factor_change: true,
    };
    match apply(image, &command).0 {
        ControllerReply::Results(mut results) => results.remove(0),
        other => panic!("{other:?}"),
    }
}

/// The leader reports `isr` in sync (AlterPartition with the current epochs).
fn report_isr(image: &mut MetadataImage, topic: &str, isr: Vec<BrokerId>) -> ControllerReply {
    let state = image.partition(topic, 0).unwrap().clone();
    let command = ControllerCommand::AlterPartition {
        topic: topic.into(),
        partition: 0,
        leader: state.leader,
        leader_epoch: state.leader_epoch,
        partition_epoch: state.partition_epoch,
        isr,
    };
    apply(image, &command).0
}

fn with_replicas(name: &str, replicas: Vec<BrokerId>) -> NewTopic {
    NewTopic {
        assignments: vec![replicas],
        ..new_topic(name, 1, 1)
    }
}

#[test]
fn growing_a_partition_adds_followers_and_completes_when_they_are_in_sync() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1]));
    assert!(reassign(&mut image, "t", 0, Some(vec![1, 2, 3])).is_ok());
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.replicas, vec![1, 2, 3]);
    assert_eq!(state.adding_replicas, vec![2, 3]);
    assert!(state.removing_replicas.is_empty());
    assert_eq!((state.isr.clone(), state.leader), (vec![1], 1));
    assert_eq!(state.leader_epoch, 0, "nothing dropped, same leader");

    report_isr(&mut image, "t", vec![1, 2]);
    assert!(
        image.partition("t", 0).unwrap().is_reassigning(),
        "3 not in sync yet"
    );
    report_isr(&mut image, "t", vec![1, 2, 3]);
    let done = image.partition("t", 0).unwrap();
    assert!(!done.is_reassigning());
    assert_eq!(
        (done.replicas.clone(), done.isr.clone()),
        (vec![1, 2, 3], vec![1, 2, 3])
    );
    assert_eq!((done.leader, done.leader_epoch), (1, 0));
}

#[test]
fn moving_the_leaders_replica_hands_leadership_to_the_target_on_completion() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1, 2]));
    assert!(reassign(&mut image, "t", 0, Some(vec![3, 2])).is_ok());
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(
        state.replicas,
        vec![3, 2, 1],
        "the target, then what it drops"
    );
    assert_eq!(
        (
            state.adding_replicas.clone(),
            state.removing_replicas.clone()
        ),
        (vec![3], vec![1])
    );
    assert_eq!(
        state.leader, 1,
        "the old leader leads until the new replica is in sync"
    );

    // The leader's ISR expansion completes it: 1 leaves, 3 (first in-sync target) leads.
    assert!(matches!(
        report_isr(&mut image, "t", vec![1, 2, 3]),
        ControllerReply::Partition(Ok(_))
    ));
    let done = image.partition("t", 0).unwrap();
    assert_eq!(done.replicas, vec![3, 2]);
    assert_eq!(done.isr, vec![2, 3]);
    assert_eq!(done.leader, 3);
    assert_eq!(done.leader_epoch, state.leader_epoch + 1);
    assert!(!done.is_reassigning());
}

#[test]
fn reordering_or_dropping_in_sync_replicas_completes_at_once() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1, 2, 3]));
    assert!(reassign(&mut image, "t", 0, Some(vec![3, 1, 2])).is_ok());
    let reordered = image.partition("t", 0).unwrap().clone();
    assert_eq!(reordered.replicas, vec![3, 1, 2]);
    assert_eq!(
        (reordered.leader, reordered.leader_epoch),
        (1, 0),
        "no election"
    );
    assert_eq!(reordered.partition_epoch, 1);

    assert!(reassign(&mut image, "t", 0, Some(vec![3, 2])).is_ok());
    let shrunk = image.partition("t", 0).unwrap();
    assert!(!shrunk.is_reassigning());
    assert_eq!(
        (shrunk.replicas.clone(), shrunk.isr.clone()),
        (vec![3, 2], vec![2, 3])
    );
    assert_eq!((shrunk.leader, shrunk.leader_epoch), (3, 1));

    let unchanged = image.clone();
    assert!(reassign(&mut image, "t", 0, Some(vec![3, 2])).is_ok());
    assert_eq!(
        image, unchanged,
        "the partition has the target already: nothing to do"
    );
}

#[test]
fn dropping_an_out_of_sync_target_waits_for_it() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1, 2, 3]));
    report_isr(&mut image, "t", vec![1, 3]);
    assert!(reassign(&mut image, "t", 0, Some(vec![1, 2])).is_ok());
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.removing_replicas, vec![3]);
    assert!(state.is_reassigning(), "2 is a target replica out of sync");
    report_isr(&mut image, "t", vec![1, 3, 2]);
    let done = image.partition("t", 0).unwrap();
    assert_eq!(
        (done.replicas.clone(), done.isr.clone()),
        (vec![1, 2], vec![1, 2])
    );
}

#[test]
fn cancelling_reverts_to_the_original_replicas() {
    let mut image = cluster(&[1, 2, 3, 4]);
    create(&mut image, with_replicas("t", vec![1, 2]));
    let none = reassign(&mut image, "t", 0, None);
    assert_eq!(none.code, error_code::NO_REASSIGNMENT_IN_PROGRESS);
    assert_eq!(none.message, None, "Kafka's default message, sent as null");

    reassign(&mut image, "t", 0, Some(vec![3, 4]));
    report_isr(&mut image, "t", vec![1, 2, 3]);
    let moving = image.partition("t", 0).unwrap().clone();
    assert_eq!(moving.replicas, vec![3, 4, 1, 2]);
    assert!(reassign(&mut image, "t", 0, None).is_ok());
    let reverted = image.partition("t", 0).unwrap();
    assert_eq!(
        (reverted.replicas.clone(), reverted.isr.clone()),
        (vec![1, 2], vec![1, 2])
    );
    assert!(!reverted.is_reassigning());
    assert_eq!(reverted.leader, 1);
    assert!(
        reverted.leader_epoch > moving.leader_epoch,
        "replicas 3 and 4 are dropped"
    );
}

#[test]
fn a_cancel_that_needs_an_unclean_election_is_refused_unless_the_topic_allows_it() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1, 3]));
    report_isr(&mut image, "t", vec![1]);
    // 2 replaces 1; 3, a target replica, is out of sync, so this cannot complete.
    reassign(&mut image, "t", 0, Some(vec![2, 3]));
    report_isr(&mut image, "t", vec![1, 2]);
    fence(&mut image, 1);
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(
        (state.replicas.clone(), state.adding_replicas.clone()),
        (vec![2, 3, 1], vec![2])
    );
    assert_eq!(
        (state.isr.clone(), state.leader),
        (vec![2], 2),
        "only the added replica is in sync"
    );
    let refused = reassign(&mut image, "t", 0, None);
    assert_eq!(refused.code, error_code::INVALID_REPLICA_ASSIGNMENT);
    assert_eq!(
        refused.message.as_deref(),
        Some("Unable to revert partition assignment for t:0 because it would require an unclean leader election.")
    );
    apply(
        &mut image,
        &ControllerCommand::SetTopicConfigs {
            name: "t".into(),
            configs: BTreeMap::from([("unclean.leader.election.enable".into(), "true".into())]),
        },
    );
    unfence(&mut image, 1);
    assert!(reassign(&mut image, "t", 0, None).is_ok());
    let reverted = image.partition("t", 0).unwrap();
    assert_eq!(
        (
            reverted.replicas.clone(),
            reverted.isr.clone(),
            reverted.leader
        ),
        (vec![3, 1], vec![3], 3),
        "the first original replica, unclean"
    );
}

#[test]
fn a_new_target_replaces_the_reassignment_in_progress() {
    let mut image = cluster(&[1, 2, 3, 4]);
    create(&mut image, with_replicas("t", vec![1]));
    reassign(&mut image, "t", 0, Some(vec![1, 2, 3]));
    let moving = image.clone();
    assert!(reassign(&mut image, "t", 0, Some(vec![1, 2, 3])).is_ok());
    assert_eq!(image, moving, "the same target again changes nothing");

    // 3 is dropped before it caught up; 2 is still being added, 4 joins it.
    reassign(&mut image, "t", 0, Some(vec![1, 2, 4]));
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!(state.replicas, vec![1, 2, 4, 3]);
    assert_eq!(
        (
            state.adding_replicas.clone(),
            state.removing_replicas.clone()
        ),
        (vec![2, 4], vec![3])
    );
    report_isr(&mut image, "t", vec![1, 2, 4]);
    let done = image.partition("t", 0).unwrap();
    assert_eq!(
        (done.replicas.clone(), done.isr.clone()),
        (vec![1, 2, 4], vec![1, 2, 4])
    );
    assert!(!done.is_reassigning());
}

#[test]
fn reassignments_are_checked_as_kafka_checks_them() {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, with_replicas("t", vec![1, 2]));
    type Case<'a> = (&'a str, i32, Option<Vec<BrokerId>>, i16, &'a str);
    let cases: [Case; 5] = [
        (
            "nope",
            0,
            Some(vec![1]),
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "Unable to find a topic named nope.",
        ),
        (
            "t",
            5,
            Some(vec![1]),
            error_code::UNKNOWN_TOPIC_OR_PARTITION,
            "Unable to find partition t:5.",
        ),
        (
            "t",
            0,
            Some(vec![]),
            error_code::INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        ),
        (
            "t",
            0,
            Some(vec![9, 1]),
            error_code::INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes broker 9, but no such broker is registered.",
        ),
        (
            "t",
            0,
            Some(vec![2, 1, 2]),
            error_code::INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes the broker 2 more than once.",
        ),
    ];
    for (topic, partition, target, code, message) in cases {
        let result = reassign(&mut image, topic, partition, target);
        assert_eq!(
            (result.code, result.message.as_deref()),
            (code, Some(message))
        );
    }
    let command = ControllerCommand::AlterPartitionReassignments {
        reassignments: vec![Reassignment {
            topic: "t".into(),
            partition: 0,
            target: Some(vec![1, 2, 3]),
        }],
        allow_replication_factor_change: false,
    };
    let ControllerReply::Results(results) = apply(&mut image, &command).0 else {
        panic!()
    };
    assert_eq!(results[0].code, error_code::INVALID_REPLICATION_FACTOR);
    assert_eq!(
        results[0].message.as_deref(),
        Some("The replication factor is changed from 2 to 3")
    );
}

#[test]
fn an_unclean_election_that_leaves_the_target_in_sync_completes_the_reassignment() {
    let mut image = cluster(&[1, 2]);
    create(&mut image, with_replicas("t", vec![1]));
    apply(
        &mut image,
        &ControllerCommand::SetTopicConfigs {
            name: "t".into(),
            configs: BTreeMap::from([("unclean.leader.election.enable".into(), "true".into())]),
        },
    );
    reassign(&mut image, "t", 0, Some(vec![2]));
    fence(&mut image, 1);
    let done = image.partition("t", 0).unwrap();
    assert_eq!(
        (done.leader, done.isr.clone(), done.replicas.clone()),
        (2, vec![2], vec![2]),
        "{done:?}"
    );
    assert!(!done.is_reassigning());
}

#[test]
fn feature_levels_set_by_the_controller_reach_the_image_with_a_new_epoch() {
    use crate::features::{GROUP_VERSION, TRANSACTION_VERSION};
    let mut image = cluster(&[1, 2, 3]);
    assert_eq!(image.features.level(TRANSACTION_VERSION), 2);
    let command = ControllerCommand::SetFeatures {
        levels: BTreeMap::from([(TRANSACTION_VERSION.to_string(), 0)]),
    };
    let (reply, records) = apply(&mut image, &command);
    assert!(
        matches!(reply, ControllerReply::Results(ref items) if items.iter().all(|i| i.code == error_code::NONE)),
        "{reply:?}"
    );
    assert_eq!(records.len(), 1);
    assert_eq!(image.features.level(TRANSACTION_VERSION), 0);
    assert_eq!(
        image.features.level(GROUP_VERSION),
        1,
        "the others keep theirs"
    );
    assert_eq!(image.features.epoch, 1);
    // The image's encoding round-trips them (snapshots).
    let encoded = serde_json::to_string(&image).unwrap();
    let decoded: MetadataImage = serde_json::from_str(&encoded).unwrap();
    assert_eq!(decoded.features, image.features);
}

#[test]
fn an_unregistered_broker_leads_nothing_and_is_forgotten_as_on_kafka() {
    let mut image = cluster(&[1, 2, 3]);
    assert!(create(&mut image, new_topic("orders", 3, 3)).is_ok());
    let unregister = |image: &mut MetadataImage, id| match apply(
        image,
        &ControllerCommand::UnregisterBroker { id },
    )
    .0
    {
        ControllerReply::Results(mut results) => results.remove(0),
        other => panic!("{other:?}"),
    };
    let missing = unregister(&mut image, 9);
    assert_eq!(missing.code, error_code::BROKER_ID_NOT_REGISTERED);
    assert_eq!(
        missing.message.as_deref(),
        Some("Broker ID 9 is not currently registered")
    );

    assert!(unregister(&mut image, 1).is_ok());
    assert!(!image.brokers.contains_key(&1));
    for state in &image.topic("orders").unwrap().partitions {
        assert_ne!(state.leader, 1, "{state:?}");
        assert!(!state.isr.contains(&1), "{state:?}");
        assert!(
            state.replicas.contains(&1),
            "still a replica: reassign to move it"
        );
    }
    // New topics are placed on the registered brokers only.
    assert!(create(&mut image, new_topic("later", 4, 2)).is_ok());
    for state in &image.topic("later").unwrap().partitions {
        assert!(!state.replicas.contains(&1), "{state:?}");
    }
    assert_eq!(
        unregister(&mut image, 1).code,
        error_code::BROKER_ID_NOT_REGISTERED
    );
}

#[test]
fn a_registration_keeps_every_listener_for_metadata_per_listener() {
    let mut image = MetadataImage::default();
    let endpoint = |name: &str, port| BrokerEndpoint {
        name: name.into(),
        host: "kafka.example".into(),
        port,
    };
    apply(
        &mut image,
        &ControllerCommand::RegisterBroker {
            id: 1,
            host: "10.0.0.1".into(),
            port: 9092,
            rack: None,
            incarnation: incarnation(1),
            listeners: vec![endpoint("INTERNAL", 9092), endpoint("SASL_SSL", 9094)],
            unclean_shutdown: false,
        },
    );
    let broker = &image.brokers[&1];
    assert_eq!(
        broker.endpoint("SASL_SSL", "INTERNAL"),
        Some(("kafka.example", 9094))
    );
    assert_eq!(broker.endpoint("SSL", "INTERNAL"), None, "no such listener");
    // A registration from before brokers named their listeners: only the inter-broker one.
    apply(
        &mut image,
        &ControllerCommand::RegisterBroker {
            id: 2,
            host: "10.0.0.2".into(),
            port: 9092,
            rack: None,
            incarnation: incarnation(2),
            listeners: Vec::new(),
            unclean_shutdown: false,
        },
    );
    let old = &image.brokers[&2];
    assert_eq!(
        old.endpoint("INTERNAL", "INTERNAL"),
        Some(("10.0.0.2", 9092))
    );
    assert_eq!(old.endpoint("SASL_SSL", "INTERNAL"), None);
    // Written before the field existed, a command still reads.
    let command: ControllerCommand = serde_json::from_str(
        r#"{"RegisterBroker":{"id":3,"host":"h","port":1,"rack":null,"incarnation":"00000000-0000-0000-0000-000000000003"}}"#,
    )
    .unwrap();
    assert!(
        matches!(command, ControllerCommand::RegisterBroker { listeners, .. } if listeners.is_empty())
    );
}

#[test]
fn a_user_operation_writes_at_most_kafkas_record_bound() {
    use strand_security::authorizer::{
        AclBinding, AclFilter, AclOperation, PatternType, Permission, ResourceType,
    };
    let acl = |i: usize| AclBinding {
        resource_type: ResourceType::Topic,
        resource_name: format!("t{i}"),
        pattern_type: PatternType::Literal,
        principal: "User:a".into(),
        host: "*".into(),
        operation: AclOperation::Read,
        permission: Permission::Allow,
    };
    let refused = |reply: &ControllerReply| match reply {
        ControllerReply::Results(results) => results
            .iter()
            .all(|r| r.code == error_code::POLICY_VIOLATION),
        ControllerReply::DeletedAcls(result) => result
            .as_ref()
            .is_err_and(|r| r.code == error_code::POLICY_VIOLATION),
        _ => false,
    };
    let mut image = MetadataImage::default();
    let at_bound: Vec<AclBinding> = (0..MAX_RECORDS_PER_USER_OP).map(acl).collect();
    let (reply, records) = decide(&image, &ControllerCommand::CreateAcls { acls: at_bound });
    assert!(!refused(&reply));
    assert_eq!(records.len(), MAX_RECORDS_PER_USER_OP);
    for record in &records {
        image.replay(record);
    }
    let over: Vec<AclBinding> = (0..=MAX_RECORDS_PER_USER_OP)
        .map(|i| acl(i + 20_000))
        .collect();
    let (reply, records) = decide(&image, &ControllerCommand::CreateAcls { acls: over });
    assert!(refused(&reply) && records.is_empty());
    let (reply, records) = decide(
        &image,
        &ControllerCommand::DeleteAcls {
            filters: vec![AclFilter::any()],
        },
    );
    assert!(!refused(&reply));
    assert_eq!(records.len(), MAX_RECORDS_PER_USER_OP);
    image.replay(&MetadataRecord::CreateAcl(acl(99_999)));
    let (reply, records) = decide(
        &image,
        &ControllerCommand::DeleteAcls {
            filters: vec![AclFilter::any()],
        },
    );
    assert!(refused(&reply) && records.is_empty());
}

/// Topic "t", one partition on two replicas [a, b], min ISR 2; the image, a and b.
fn two_replicas_min_isr_two() -> (MetadataImage, BrokerId, BrokerId) {
    let mut image = cluster(&[1, 2, 3]);
    create(&mut image, new_topic("t", 1, 2));
    set_topic_configs(&mut image, "t", &[("min.insync.replicas", "2")]);
    let replicas = image.partition("t", 0).unwrap().replicas.clone();
    (image, replicas[0], replicas[1])
}

/// [`two_replicas_min_isr_two`] with b fenced (ISR [a], ELR [b]), then unfenced out of the
/// ISR.
fn elr_of_two() -> (MetadataImage, BrokerId, BrokerId) {
    let (mut image, a, b) = two_replicas_min_isr_two();
    fence(&mut image, b);
    unfence(&mut image, b);
    let state = image.partition("t", 0).unwrap();
    assert_eq!((state.isr.clone(), state.elr.clone()), (vec![a], vec![b]));
    (image, a, b)
}

#[test]
fn a_broker_registering_without_a_registration_on_record_leaves_every_elr() {
    let (mut image, a, b) = two_replicas_min_isr_two();
    fence(&mut image, b);
    fence(&mut image, a);
    let state = image.partition("t", 0).unwrap();
    assert_eq!(state.elr, vec![a.min(b), a.max(b)]);
    // b is unregistered and comes back (say on a new disk): it may not lead from the ELR.
    apply(&mut image, &ControllerCommand::UnregisterBroker { id: b });
    restart(&mut image, b, Uuid::from_u128(0x3000), false, true);
    let state = image.partition("t", 0).unwrap();
    assert_eq!(state.leader, NO_LEADER, "{state:?}");
    assert_eq!(state.elr, vec![a]);
}

#[test]
fn a_failed_sole_in_sync_leader_hands_over_to_the_elr_and_a_failed_elr_member_leaves_it() {
    let (mut image, a, b) = elr_of_two();
    // ISR [a], ELR [b]: a's log fails; b, eligible, takes over with an ISR of itself.
    assert!(replica_failed(&mut image, a, "t").is_ok());
    let state = image.partition("t", 0).unwrap().clone();
    assert_eq!((state.leader, state.isr.clone()), (b, vec![b]));
    assert!(
        state.elr.is_empty(),
        "the failed replica is not eligible: {state:?}"
    );

    let (mut image, _, b) = elr_of_two();
    assert!(replica_failed(&mut image, b, "t").is_ok());
    assert!(image.partition("t", 0).unwrap().elr.is_empty());
}

#[test]
fn turning_elr_on_strips_per_broker_min_isr() {
    let mut image = cluster(&[1, 2, 3]);
    set_features(&mut image, ELIGIBLE_LEADER_REPLICAS_VERSION, 0);
    let per_broker = BTreeMap::from([
        ("min.insync.replicas".to_string(), "1".to_string()),
        ("log.cleaner.threads".to_string(), "2".to_string()),
    ]);
    apply(
        &mut image,
        &ControllerCommand::SetBrokerConfigs {
            broker: Some(2),
            configs: per_broker,
        },
    );
    set_features(&mut image, ELIGIBLE_LEADER_REPLICAS_VERSION, 1);
    assert_eq!(
        image.broker_configs.get(&2),
        Some(&BTreeMap::from([(
            "log.cleaner.threads".to_string(),
            "2".to_string()
        )]))
    );
}
