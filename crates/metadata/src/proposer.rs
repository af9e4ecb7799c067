//! The active controller's side of the metadata log: it decides each command against the
//! image as it will be once every entry it has proposed applies, and turns the decision
//! into chained records entries (see `entry`) that fit the log's entry size. A proposer
//! lives for one controller term; after any write whose outcome is unknown the controller
//! starts a new one from the applied image, and stale entries of the old one apply nowhere.

use crate::controller::{decide, ControllerCommand, ControllerReply};
use crate::entry::{records_version, DecisionId, MetadataEntry, Part, RecordsEntry};
use crate::image::{MetadataImage, PartitionState};
use crate::records::MetadataRecord;

/// The most records one decision may hold, in bytes of JSON (a topic of 100,000
/// partitions at replication factor 3 is about 11 MiB; fencing a broker that leads
/// 100,000 partitions about 15 MiB). Replay holds a decision's parts in memory until the last.
pub const DECISION_MAX_BYTES: usize = 64 * 1024 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecisionTooLarge {
    pub bytes: usize,
    pub limit: usize,
}

impl std::fmt::Display for DecisionTooLarge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "the metadata change needs {} bytes of records, over the {} allowed in one change \
             (an entry's records limit, or the whole change's)",
            self.bytes, self.limit
        )
    }
}

impl std::error::Error for DecisionTooLarge {}

#[derive(Debug, Clone)]
pub struct Proposer {
    image: MetadataImage,
    last: Option<DecisionId>,
    term: u64,
    next_seq: u64,
    /// Records bytes per entry.
    entry_bytes: usize,
}

impl Proposer {
    /// Starts from an image holding every entry of the log (`last`: its chain position),
    /// for `term`. `first_seq` must exceed every sequence number this controller used in
    /// the term before.
    pub fn new(
        image: MetadataImage,
        last: Option<DecisionId>,
        term: u64,
        first_seq: u64,
        entry_bytes: usize,
    ) -> Proposer {
        Proposer {
            image,
            last,
            term,
            next_seq: first_seq,
            entry_bytes,
        }
    }

    pub fn term(&self) -> u64 {
        self.term
    }

    /// The last entry proposed (or, before any, the chain position it started from).
    pub fn last(&self) -> Option<DecisionId> {
        self.last
    }

    /// The next sequence number a successor in the same term must start from.
    pub fn next_seq(&self) -> u64 {
        self.next_seq
    }

    /// Decides `command` and returns its reply and the entries to append, in order (none
    /// if it changes nothing). From now on decisions assume these entries apply.
    pub fn propose(
        &mut self,
        command: &ControllerCommand,
    ) -> Result<(ControllerReply, Vec<MetadataEntry>), DecisionTooLarge> {
        let (reply, records) = decide(&self.image, command);
        if records.is_empty() {
            return Ok((reply, Vec::new()));
        }
        let batches = pack(&records, self.entry_bytes)?;
        for record in &records {
            self.image.replay(record);
        }
        let count = batches.len() as u32;
        let entries = batches
            .into_iter()
            .enumerate()
            .map(|(index, records)| {
                let id = DecisionId {
                    term: self.term,
                    seq: self.next_seq,
                };
                self.next_seq += 1;
                let follows = self.last.replace(id);
                MetadataEntry::Records(RecordsEntry {
                    version: records_version(&records),
                    id,
                    follows,
                    part: (count > 1).then_some(Part {
                        index: index as u32,
                        count,
                    }),
                    records,
                })
            })
            .collect();
        Ok((reply, entries))
    }
}

fn json_len<T: serde::Serialize>(value: &T) -> usize {
    serde_json::to_vec(value).map_or(usize::MAX, |json| json.len())
}

/// Splits records into batches of at most `entry_bytes` of JSON each, in order; a topic's
/// partitions are split over a `CreateTopic` and `AddPartitions` records where one record
/// would not fit (the decision applies atomically, so no reader sees the topic partial).
fn pack(
    records: &[MetadataRecord],
    entry_bytes: usize,
) -> Result<Vec<Vec<MetadataRecord>>, DecisionTooLarge> {
    let mut batches: Vec<Vec<MetadataRecord>> = Vec::new();
    let mut batch_bytes = 0usize;
    let mut total = 0usize;
    for record in records.iter().flat_map(|r| split(r, entry_bytes)) {
        let bytes = json_len(&record) + 1; // and its comma
        total = total.saturating_add(bytes);
        if bytes > entry_bytes || total > DECISION_MAX_BYTES {
            return Err(DecisionTooLarge {
                bytes: total.max(bytes),
                limit: if bytes > entry_bytes {
                    entry_bytes
                } else {
                    DECISION_MAX_BYTES
                },
            });
        }
        if batches.is_empty() || batch_bytes + bytes > entry_bytes {
            batches.push(Vec::new());
            batch_bytes = 0;
        }
        batch_bytes += bytes;
        batches.last_mut().expect("pushed").push(record);
    }
    Ok(batches)
}

/// One record, or a topic's record split so that each piece fits `entry_bytes`.
fn split(record: &MetadataRecord, entry_bytes: usize) -> Vec<MetadataRecord> {
    if json_len(record) < entry_bytes {
        return vec![record.clone()];
    }
    let (name, first, partitions) = match record {
        MetadataRecord::CreateTopic {
            name,
            id,
            configs,
            partitions,
        } => (
            name,
            MetadataRecord::CreateTopic {
                name: name.clone(),
                id: *id,
                configs: configs.clone(),
                partitions: Vec::new(),
            },
            partitions,
        ),
        MetadataRecord::AddPartitions { name, partitions } => (
            name,
            MetadataRecord::AddPartitions {
                name: name.clone(),
                partitions: Vec::new(),
            },
            partitions,
        ),
        _ => return vec![record.clone()],
    };
    let more = || MetadataRecord::AddPartitions {
        name: name.clone(),
        partitions: Vec::new(),
    };
    let mut pieces = vec![first];
    let mut piece_bytes = json_len(&pieces[0]);
    for partition in partitions {
        let bytes = json_len(partition) + 1;
        let piece_has_some = !partition_list(pieces.last_mut().expect("one")).is_empty();
        if piece_has_some && piece_bytes + bytes + 1 >= entry_bytes {
            pieces.push(more());
            piece_bytes = json_len(pieces.last().expect("pushed"));
        }
        partition_list(pieces.last_mut().expect("one")).push(partition.clone());
        piece_bytes += bytes;
    }
    pieces
}

fn partition_list(record: &mut MetadataRecord) -> &mut Vec<PartitionState> {
    match record {
        MetadataRecord::CreateTopic { partitions, .. }
        | MetadataRecord::AddPartitions { partitions, .. } => partitions,
        _ => unreachable!("only topic records are split"),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use uuid::Uuid;

    use super::*;
    use crate::controller::NewTopic;
    use crate::entry::{replay_entry, ReplayState, Replayed};

    const ENTRY_BYTES: usize = 4096;

    fn register(id: i32) -> ControllerCommand {
        ControllerCommand::RegisterBroker {
            id,
            host: "127.0.0.1".into(),
            port: 9092,
            rack: None,
            incarnation: Uuid::from_u128(id as u128),
            listeners: Vec::new(),
            unclean_shutdown: false,
        }
    }

    fn unfence(id: i32) -> ControllerCommand {
        ControllerCommand::UnfenceBroker {
            id,
            incarnation: Uuid::from_u128(id as u128),
        }
    }

    fn topic(name: &str, partitions: i32) -> ControllerCommand {
        ControllerCommand::CreateTopics {
            topics: vec![NewTopic {
                name: name.into(),
                id: Uuid::from_u128(name.len() as u128),
                partitions,
                replication_factor: 3,
                assignments: Vec::new(),
                configs: BTreeMap::new(),
            }],
        }
    }

    /// Proposes each command and replays the entries as the log would, checking that the
    /// replayed image matches the proposer's at every step.
    fn run(commands: &[ControllerCommand]) -> (MetadataImage, Vec<MetadataEntry>) {
        let mut proposer = Proposer::new(MetadataImage::default(), None, 1, 0, ENTRY_BYTES);
        let mut image = MetadataImage::default();
        let mut state = ReplayState::default();
        let mut log = Vec::new();
        for command in commands {
            let (_, entries) = proposer.propose(command).unwrap();
            for (i, entry) in entries.iter().enumerate() {
                let expected = if i + 1 == entries.len() {
                    Replayed::Applied
                } else {
                    Replayed::Pending
                };
                assert_eq!(replay_entry(&mut image, &mut state, entry), Ok(expected));
                assert!(
                    json_len(entry) <= ENTRY_BYTES + 256,
                    "an entry of {} bytes",
                    json_len(entry)
                );
            }
            assert_eq!(image, proposer.image);
            log.extend(entries);
        }
        (image, log)
    }

    #[test]
    fn a_large_topic_and_a_large_fence_are_split_into_parts_that_apply_atomically() {
        let mut commands: Vec<_> = (1..=4).flat_map(|id| [register(id), unfence(id)]).collect();
        commands.push(topic("big", 200));
        commands.push(ControllerCommand::FenceBroker {
            id: 1,
            incarnation: Uuid::from_u128(1),
        });
        let (image, log) = run(&commands);
        assert_eq!(image.topic("big").unwrap().partitions.len(), 200);
        assert!(image
            .topic("big")
            .unwrap()
            .partitions
            .iter()
            .all(|p| p.leader != 1));
        assert!(image.brokers[&1].fenced);
        let parts = log
            .iter()
            .filter(|e| matches!(e, MetadataEntry::Records(r) if r.part.is_some()))
            .count();
        assert!(
            parts > 4,
            "the topic and the fence each take several entries"
        );
    }

    #[test]
    fn a_command_that_changes_nothing_writes_nothing() {
        let mut proposer = Proposer::new(MetadataImage::default(), None, 1, 0, ENTRY_BYTES);
        let (_, entries) = proposer
            .propose(&ControllerCommand::DeleteTopics {
                names: vec!["missing".into()],
            })
            .unwrap();
        assert!(entries.is_empty());
    }

    #[test]
    fn a_decision_over_the_limit_is_refused_and_changes_nothing() {
        let mut proposer = Proposer::new(MetadataImage::default(), None, 1, 0, 64);
        let before = proposer.image.clone();
        let error = proposer.propose(&register(1)).unwrap_err();
        assert!(error.bytes > 64);
        assert_eq!(proposer.image, before);
        assert_eq!(proposer.next_seq(), 0);
    }

    #[test]
    fn decisions_after_a_lost_entry_are_stale_everywhere() {
        let mut proposer = Proposer::new(MetadataImage::default(), None, 1, 0, ENTRY_BYTES);
        let (_, first) = proposer.propose(&register(1)).unwrap();
        let (_, second) = proposer.propose(&register(2)).unwrap();
        // The first entry was lost (its leader's log was truncated); the second arrives.
        let mut image = MetadataImage::default();
        let mut state = ReplayState::default();
        assert_eq!(
            replay_entry(&mut image, &mut state, &second[0]),
            Ok(Replayed::Stale)
        );
        assert!(image.brokers.is_empty());
        // A successor proposer starts from the applied image and continues the chain.
        let mut next = Proposer::new(image.clone(), state.last, 2, 0, ENTRY_BYTES);
        let (_, entries) = next.propose(&register(2)).unwrap();
        assert_eq!(
            replay_entry(&mut image, &mut state, &entries[0]),
            Ok(Replayed::Applied)
        );
        assert_eq!(first.len(), 1);
        assert_eq!(image.brokers.keys().collect::<Vec<_>>(), vec![&2]);
    }
}
