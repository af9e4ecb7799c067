//! Entries of the metadata log and how every node replays them.
//!
//! The active controller decides each command once (`decide`) and stores the versioned
//! records it decided, as KRaft does; replay applies records and decides nothing, so a
//! change to `decide` in a later version never rewrites history. Logs written before
//! Strand stored records hold commands (`MetadataEntry::Command`); those still replay by
//! deciding them.
//!
//! Two rules keep every image equal to what the controller decided against:
//! - A chain: each records entry names the decision it was decided after (`follows`) and
//!   applies only if that is the last one applied; otherwise it is stale (its controller
//!   decided on a state the log does not have, e.g. after an earlier entry was lost with a
//!   leadership change) and changes nothing, on every node alike. So the controller may
//!   decide the next command before the previous one commits.
//! - Atomic decisions: one too large for an entry is stored in parts (`Part`), which
//!   replay together when the last arrives. Any other applied entry after an unfinished
//!   decision drops it: its controller gave up (lost leadership) before writing the rest.

use serde::{Deserialize, Serialize};

use crate::controller::{apply, ControllerCommand};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

/// The newest records format this build writes and reads; a newer one is refused, not
/// misread. Version 2 added reassignments (a partition's adding and removing replicas)
/// and the dynamic broker and group config records; version 3 the unregistration of a
/// broker; version 4 SCRAM credentials; version 5 ACLs; version 6 client quotas. An entry holding none of what a
/// version added is still written at the older version, so a cluster not using it stays readable by a build that predates it, and
/// one that does is refused there rather than misread.
pub const RECORDS_VERSION: u16 = 6;

/// The records version `records` need: the newest version whose additions any uses.
pub fn records_version(records: &[MetadataRecord]) -> u16 {
    if records
        .iter()
        .any(|record| matches!(record, MetadataRecord::SetClientQuota { .. }))
    {
        return 6;
    }
    if records.iter().any(|record| {
        matches!(
            record,
            MetadataRecord::CreateAcl(_) | MetadataRecord::DeleteAcl(_)
        )
    }) {
        return 5;
    }
    if records
        .iter()
        .any(|record| matches!(record, MetadataRecord::SetUserScramCredential { .. }))
    {
        return 4;
    }
    if records
        .iter()
        .any(|record| matches!(record, MetadataRecord::UnregisterBroker { .. }))
    {
        return 3;
    }
    let reassigning =
        |partitions: &[crate::image::PartitionState]| partitions.iter().any(|p| p.is_reassigning());
    let needs_2 = records.iter().any(|record| match record {
        MetadataRecord::SetBrokerConfigs { .. }
        | MetadataRecord::SetGroupConfigs { .. }
        | MetadataRecord::SetFeatures { .. } => true,
        MetadataRecord::ChangePartition { state, .. } => state.is_reassigning(),
        MetadataRecord::CreateTopic { partitions, .. }
        | MetadataRecord::AddPartitions { partitions, .. } => reassigning(partitions),
        _ => false,
    });
    if needs_2 {
        2
    } else {
        1
    }
}

/// Names one records entry: the Raft term its controller decided in, and a sequence number
/// that only grows within that controller. Among committed entries ids order as the
/// entries do in the log (term first): a controller starts past its log's last id of its
/// term. Among entries proposed they may repeat: openraft orders votes by term and node
/// id, so two controllers can lead one term in turn, the second not knowing the first's
/// uncommitted ids. So a controller learns whether its own decision applied from the
/// decision's write, never by looking for its id in the chain (the simulator found that
/// mistake: crates/sim/src/quorum.rs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct DecisionId {
    pub term: u64,
    pub seq: u64,
}

/// This entry is part `index` (from 0) of a decision stored in `count` entries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Part {
    pub index: u32,
    pub count: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecordsEntry {
    pub version: u16,
    pub id: DecisionId,
    /// The entry applied just before this one when it was decided (None: the first).
    pub follows: Option<DecisionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub part: Option<Part>,
    pub records: Vec<MetadataRecord>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetadataEntry {
    Records(RecordsEntry),
    /// As logs written before records were stored hold them.
    Command(ControllerCommand),
}

/// A decision whose parts are still arriving.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct OpenDecision {
    received: u32,
    count: u32,
    records: Vec<MetadataRecord>,
}

/// Where replay stands besides the image: the last applied records entry and an
/// unfinished decision. Part of a snapshot, so a node installing one continues the chain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReplayState {
    #[serde(default)]
    pub last: Option<DecisionId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    open: Option<OpenDecision>,
}

/// What replaying one entry did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Replayed {
    /// The image changed (or had nothing to change): the decision took effect.
    Applied,
    /// A part of a larger decision, held until its last part.
    Pending,
    /// Decided on a state the log does not have: nothing changed.
    Stale,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownRecordsVersion(pub u16);

impl std::fmt::Display for UnknownRecordsVersion {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "metadata records of version {} (this build reads up to {RECORDS_VERSION}): \
             written by a newer Strand",
            self.0
        )
    }
}

impl std::error::Error for UnknownRecordsVersion {}

/// Replays one committed entry onto `image`. Deterministic: every node gets the same
/// answer for the same log.
pub fn replay_entry(
    image: &mut MetadataImage,
    state: &mut ReplayState,
    entry: &MetadataEntry,
) -> Result<Replayed, UnknownRecordsVersion> {
    let entry = match entry {
        MetadataEntry::Command(command) => {
            drop_unfinished(state);
            apply(image, command);
            return Ok(Replayed::Applied);
        }
        MetadataEntry::Records(entry) => entry,
    };
    if entry.version > RECORDS_VERSION {
        return Err(UnknownRecordsVersion(entry.version));
    }
    if entry.follows != state.last {
        return Ok(Replayed::Stale);
    }
    let Some(part) = entry.part else {
        state.last = Some(entry.id);
        drop_unfinished(state);
        for record in &entry.records {
            image.replay(record);
        }
        return Ok(Replayed::Applied);
    };
    let continues = state
        .open
        .as_ref()
        .is_some_and(|open| open.count == part.count && open.received == part.index);
    if !continues && part.index != 0 {
        // A later part without its start: cannot come from a controller that follows the
        // chain; nothing of it applies and the chain stays where it was.
        return Ok(Replayed::Stale);
    }
    state.last = Some(entry.id);
    if !continues {
        drop_unfinished(state);
        state.open = Some(OpenDecision {
            received: 0,
            count: part.count,
            records: Vec::new(),
        });
    }
    let open = state.open.as_mut().expect("opened above");
    open.records.extend(entry.records.iter().cloned());
    open.received += 1;
    if open.received < open.count {
        return Ok(Replayed::Pending);
    }
    let done = state.open.take().expect("still open");
    for record in &done.records {
        image.replay(record);
    }
    Ok(Replayed::Applied)
}

fn drop_unfinished(state: &mut ReplayState) {
    if let Some(open) = state.open.take() {
        tracing::warn!(
            received = open.received,
            parts = open.count,
            "metadata log: a decision left unfinished by its controller is dropped"
        );
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::image::{BrokerInfo, PartitionState};

    fn id(seq: u64) -> DecisionId {
        DecisionId { term: 3, seq }
    }

    fn broker(id: i32) -> MetadataRecord {
        MetadataRecord::RegisterBroker(BrokerInfo {
            id,
            host: "h".into(),
            port: 9092,
            rack: None,
            incarnation: Uuid::from_u128(id as u128),
            fenced: false,
            in_controlled_shutdown: false,
            listeners: Vec::new(),
        })
    }

    fn entry(
        seq: u64,
        follows: Option<u64>,
        part: Option<(u32, u32)>,
        records: Vec<MetadataRecord>,
    ) -> MetadataEntry {
        MetadataEntry::Records(RecordsEntry {
            version: RECORDS_VERSION,
            id: id(seq),
            follows: follows.map(id),
            part: part.map(|(index, count)| Part { index, count }),
            records,
        })
    }

    #[test]
    fn only_what_version_2_added_is_written_as_version_2() {
        let mut state = PartitionState::new(vec![1, 2]);
        let change = |state: &PartitionState| MetadataRecord::ChangePartition {
            topic: "t".into(),
            partition: 0,
            state: state.clone(),
        };
        assert_eq!(records_version(&[change(&state)]), 1);
        state.adding_replicas = vec![2];
        assert_eq!(records_version(&[change(&state)]), 2);
        let configs = MetadataRecord::SetGroupConfigs {
            group: "g".into(),
            configs: BTreeMap::new(),
        };
        assert_eq!(records_version(&[configs]), 2);
        let features = MetadataRecord::SetFeatures {
            levels: BTreeMap::from([("group.version".to_string(), 0)]),
        };
        assert_eq!(records_version(std::slice::from_ref(&features)), 2);
        let unregister = MetadataRecord::UnregisterBroker { id: 2 };
        assert_eq!(records_version(&[features, unregister.clone()]), 3);
        let credential = MetadataRecord::SetUserScramCredential {
            user: "alice".into(),
            mechanism: "SCRAM-SHA-256".into(),
            credential: None,
        };
        assert_eq!(records_version(&[unregister, credential]), 4);
        let plain = serde_json::to_string(&PartitionState::new(vec![1])).unwrap();
        assert!(
            !plain.contains("adding"),
            "version 1's encoding unchanged: {plain}"
        );
    }

    #[test]
    fn an_entry_decided_on_another_state_changes_nothing() {
        let mut image = MetadataImage::default();
        let mut state = ReplayState::default();
        assert_eq!(
            replay_entry(
                &mut image,
                &mut state,
                &entry(1, None, None, vec![broker(1)])
            ),
            Ok(Replayed::Applied)
        );
        // Decided after an entry (seq 7) that never reached the log.
        assert_eq!(
            replay_entry(
                &mut image,
                &mut state,
                &entry(8, Some(7), None, vec![broker(2)])
            ),
            Ok(Replayed::Stale)
        );
        assert_eq!(image.brokers.keys().collect::<Vec<_>>(), vec![&1]);
        assert_eq!(state.last, Some(id(1)));
    }

    #[test]
    fn parts_apply_together_and_an_unfinished_decision_is_dropped() {
        let mut image = MetadataImage::default();
        let mut state = ReplayState::default();
        let parts = [
            entry(1, None, Some((0, 3)), vec![broker(1)]),
            entry(2, Some(1), Some((1, 3)), vec![broker(2)]),
        ];
        for part in &parts {
            assert_eq!(
                replay_entry(&mut image, &mut state, part),
                Ok(Replayed::Pending)
            );
        }
        assert!(
            image.brokers.is_empty(),
            "nothing shows before the last part"
        );
        // The controller lost leadership; its successor's first decision follows the chain.
        assert_eq!(
            replay_entry(
                &mut image,
                &mut state,
                &entry(9, Some(2), None, vec![broker(3)])
            ),
            Ok(Replayed::Applied)
        );
        assert_eq!(image.brokers.keys().collect::<Vec<_>>(), vec![&3]);

        let last = entry(12, Some(11), Some((1, 2)), vec![broker(5)]);
        let first = entry(11, Some(9), Some((0, 2)), vec![broker(4)]);
        assert_eq!(
            replay_entry(&mut image, &mut state, &first),
            Ok(Replayed::Pending)
        );
        assert_eq!(
            replay_entry(&mut image, &mut state, &last),
            Ok(Replayed::Applied)
        );
        assert_eq!(image.brokers.keys().collect::<Vec<_>>(), vec![&3, &4, &5]);
    }

    #[test]
    fn a_newer_records_version_is_refused() {
        let mut newer = entry(1, None, None, vec![broker(1)]);
        if let MetadataEntry::Records(records) = &mut newer {
            records.version = RECORDS_VERSION + 1;
        }
        let mut image = MetadataImage::default();
        assert_eq!(
            replay_entry(&mut image, &mut ReplayState::default(), &newer),
            Err(UnknownRecordsVersion(RECORDS_VERSION + 1))
        );
        assert!(image.brokers.is_empty());
    }

    /// Entries as this format writes them, fixed here: whatever `decide` does in later
    /// versions, they replay to this image. (`decide` today would place these replicas
    /// differently and start the broker fenced.)
    #[test]
    fn stored_records_replay_to_the_same_image_whatever_decide_does_now() {
        let log = [
            r#"{"version":1,"id":{"term":1,"seq":0},"follows":null,"records":[{"RegisterBroker":{"id":1,"host":"a","port":9092,"rack":null,"incarnation":"00000000-0000-0000-0000-000000000001","fenced":false,"in_controlled_shutdown":false}}]}"#,
            r#"{"version":1,"id":{"term":1,"seq":1},"follows":{"term":1,"seq":0},"part":{"index":0,"count":2},"records":[{"CreateTopic":{"name":"t","id":"00000000-0000-0000-0000-0000000000aa","configs":{"cleanup.policy":"compact"},"partitions":[{"replicas":[1,7],"isr":[7],"leader":7,"leader_epoch":4,"partition_epoch":9}]}}]}"#,
            r#"{"version":1,"id":{"term":1,"seq":2},"follows":{"term":1,"seq":1},"part":{"index":1,"count":2},"records":[{"AddPartitions":{"name":"t","partitions":[{"replicas":[7],"isr":[7],"leader":7,"leader_epoch":0,"partition_epoch":0}]}}]}"#,
            r#"{"DeleteTopics":{"names":["missing"]}}"#,
        ];
        let mut image = MetadataImage::default();
        let mut state = ReplayState::default();
        for json in log {
            let entry: MetadataEntry = serde_json::from_str(json).unwrap();
            replay_entry(&mut image, &mut state, &entry).unwrap();
        }
        assert!(!image.brokers[&1].fenced);
        let topic = image.topic("t").unwrap();
        assert_eq!(topic.id, Uuid::from_u128(0xaa));
        assert_eq!(
            topic.configs,
            BTreeMap::from([("cleanup.policy".to_string(), "compact".to_string())])
        );
        assert_eq!(
            topic.partitions,
            vec![
                PartitionState {
                    replicas: vec![1, 7],
                    isr: vec![7],
                    leader: 7,
                    leader_epoch: 4,
                    partition_epoch: 9,
                    adding_replicas: Vec::new(),
                    removing_replicas: Vec::new(),
                    elr: Vec::new(),
                    last_known_elr: Vec::new(),
                },
                PartitionState::new(vec![7]),
            ]
        );
        assert_eq!(state.last, Some(DecisionId { term: 1, seq: 2 }));
    }
}
