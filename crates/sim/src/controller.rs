//! The active controller as the simulation runs it: Strand's own `decide` on a
//! `MetadataImage`, its records replayed in order (what the Raft log would commit), with
//! the controller service's duties driven by the simulation: sessions that expire fence
//! a broker, a registered broker heartbeating while fenced is unfenced, AlterPartition
//! from leaders, the periodic preferred-leader election. Raft itself is not simulated
//! here (the quorum world, quorum.rs, runs it): a command commits the moment it is
//! decided, and each node applies it after its own metadata lag (world.rs).

use std::collections::BTreeMap;

use strand_broker::partition::Assignment;
use strand_metadata::{
    decide, ControllerCommand, ControllerReply, MetadataImage, NewTopic, PartitionState,
};
use uuid::Uuid;

pub const TOPIC: &str = "sim";
/// The group coordinator's partition (one, replicated like the data).
pub const OFFSETS_TOPIC: &str = "__consumer_offsets";
/// The transaction coordinator's partition (one, replicated like the data).
pub const TXN_TOPIC: &str = "__transaction_state";
/// The share coordinator's partition (one, replicated like the data).
pub const SHARE_TOPIC: &str = strand_coordinator::share::SHARE_STATE_TOPIC;
/// The simulated partitions, by index: the data, the offsets, the transactions, the
/// share groups' state.
pub const TOPICS: [&str; 4] = [TOPIC, OFFSETS_TOPIC, TXN_TOPIC, SHARE_TOPIC];
const TOPIC_ID: u128 = 0x5157_0000_0000_0000_0000_0000_0000_0001;

/// The id of topic `index` of `TOPICS`.
pub fn topic_id(index: usize) -> Uuid {
    Uuid::from_u128(TOPIC_ID + index as u128)
}

pub struct Controller {
    pub image: MetadataImage,
    /// The virtual time of each broker's last heartbeat, and whether it said it had
    /// applied the metadata up to then (caught up).
    heartbeats: BTreeMap<i32, (i64, bool)>,
    registrations: u128,
}

impl Controller {
    pub fn new(nodes: &[i32], min_isr: i32) -> Controller {
        let mut controller = Controller {
            image: MetadataImage::default(),
            heartbeats: BTreeMap::new(),
            registrations: 0,
        };
        controller.command(ControllerCommand::InitCluster {
            cluster_id: "strand-sim".to_string(),
            min_insync_replicas: Some(min_isr),
        });
        for &id in nodes {
            controller.register(id, 0, false);
            let incarnation = controller.incarnation(id).expect("just registered");
            controller.command(ControllerCommand::UnfenceBroker { id, incarnation });
        }
        // Each topic's preferred leader another node.
        let topics = TOPICS
            .iter()
            .enumerate()
            .map(|(index, name)| {
                let mut replicas = nodes.to_vec();
                replicas.rotate_left(index % nodes.len());
                NewTopic {
                    name: name.to_string(),
                    id: topic_id(index),
                    partitions: 1,
                    replication_factor: nodes.len() as i16,
                    assignments: vec![replicas],
                    configs: BTreeMap::from([(
                        "min.insync.replicas".to_string(),
                        min_isr.to_string(),
                    )]),
                }
            })
            .collect();
        let reply = controller.command(ControllerCommand::CreateTopics { topics });
        assert!(
            matches!(&reply, ControllerReply::Results(r) if r.iter().all(|r| r.is_ok())),
            "creating the simulated topic: {reply:?}"
        );
        controller
    }

    /// Decides `command` and replays its records: committed at once.
    pub fn command(&mut self, command: ControllerCommand) -> ControllerReply {
        let (reply, records) = decide(&self.image, &command);
        for record in &records {
            self.image.replay(record);
        }
        reply
    }

    pub fn incarnation(&self, id: i32) -> Option<Uuid> {
        self.image.brokers.get(&id).map(|b| b.incarnation)
    }

    /// A broker process starting: a new incarnation (deterministic, so runs replay), as
    /// the broker registers at every start; `unclean`: its last process crashed.
    pub fn register(&mut self, id: i32, now_ms: i64, unclean: bool) {
        self.registrations += 1;
        let incarnation = Uuid::from_u128((id as u128) << 64 | self.registrations);
        self.command(ControllerCommand::RegisterBroker {
            id,
            host: format!("node{id}"),
            port: 9092,
            rack: None,
            incarnation,
            listeners: Vec::new(),
            unclean_shutdown: unclean,
        });
        self.heartbeats.insert(id, (now_ms, true));
    }

    pub fn heartbeat(&mut self, id: i32, now_ms: i64, caught_up: bool) {
        self.heartbeats.insert(id, (now_ms, caught_up));
    }

    /// The controller service's periodic duties: fence brokers whose session expired,
    /// unfence registered brokers that heartbeat having caught up with the metadata (a
    /// broker's heartbeat says so, as Kafka's wantFence does).
    pub fn tick(&mut self, now_ms: i64, session_ms: i64) {
        let brokers: Vec<(i32, Uuid, bool)> = self
            .image
            .brokers
            .iter()
            .map(|(id, b)| (*id, b.incarnation, b.fenced))
            .collect();
        for (id, incarnation, fenced) in brokers {
            let (last, caught_up) = self
                .heartbeats
                .get(&id)
                .copied()
                .unwrap_or((i64::MIN / 2, false));
            let alive = now_ms - last < session_ms;
            if !fenced && !alive {
                self.command(ControllerCommand::FenceBroker { id, incarnation });
            } else if fenced && alive && caught_up {
                self.command(ControllerCommand::UnfenceBroker { id, incarnation });
            }
        }
    }

    /// Partition `index` of `TOPICS`.
    pub fn state(&self, index: usize) -> &PartitionState {
        self.image
            .partition(TOPICS[index], 0)
            .expect("the simulated topics exist")
    }

    pub fn assignment(&self, index: usize) -> Assignment {
        Assignment::from(self.state(index))
    }

    /// Every partition's, by index.
    pub fn assignments(&self) -> Vec<Assignment> {
        (0..TOPICS.len()).map(|p| self.assignment(p)).collect()
    }
}
