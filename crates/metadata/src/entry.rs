//! What the metadata log stores: the versioned records a command produced, decided once by
//! the active controller, never the command itself (as KRaft stores records). Replaying the
//! log applies those records and decides nothing, so a later Strand whose `decide` places
//! replicas or elects leaders differently cannot rewrite what an older one decided.
//!
//! Logs written before this change hold commands: they still replay, by deciding them as
//! before (the decision that was made when they were written, as long as `decide` has not
//! changed for them since).

use serde::{Deserialize, Serialize};

use crate::controller::{apply, decide, ControllerCommand, ControllerReply};
use crate::image::MetadataImage;
use crate::records::MetadataRecord;

/// The schema of `MetadataRecord` that entries written now carry. A node refuses to replay
/// entries of a later version (it would misread them) rather than diverge.
pub const RECORDS_VERSION: u16 = 1;

/// One entry of the metadata log. Untagged, so both shapes read back: a records entry is a
/// map with these three fields, a legacy command is the command's own encoding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum MetadataEntry {
    Records {
        records_version: u16,
        records: Vec<MetadataRecord>,
        /// What the command answered when it was decided, returned once committed.
        reply: ControllerReply,
    },
    /// Written before records were stored: decided again on replay.
    Command(ControllerCommand),
}

/// A metadata entry this node cannot replay.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("metadata records of version {found}; this node reads up to {RECORDS_VERSION}")]
pub struct UnknownRecordsVersion {
    pub found: u16,
}

/// Decides `command` against `image` (the active controller's current image): the reply,
/// and the entry to write, or None if the command changes nothing (answered at once).
pub fn decide_entry(
    image: &MetadataImage,
    command: &ControllerCommand,
) -> (ControllerReply, Option<MetadataEntry>) {
    let (reply, records) = decide(image, command);
    let entry = (!records.is_empty()).then(|| MetadataEntry::Records {
        records_version: RECORDS_VERSION,
        records,
        reply: reply.clone(),
    });
    (reply, entry)
}

/// Replays one committed entry onto `image` (what every node does, in log order) and
/// returns the command's reply.
pub fn replay_entry(
    image: &mut MetadataImage,
    entry: &MetadataEntry,
) -> Result<ControllerReply, UnknownRecordsVersion> {
    match entry {
        MetadataEntry::Records {
            records_version,
            records,
            reply,
        } => {
            if *records_version > RECORDS_VERSION {
                return Err(UnknownRecordsVersion {
                    found: *records_version,
                });
            }
            for record in records {
                image.replay(record);
            }
            Ok(reply.clone())
        }
        MetadataEntry::Command(command) => Ok(apply(image, command).0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::NewTopic;
    use uuid::Uuid;

    fn register(id: i32) -> ControllerCommand {
        ControllerCommand::RegisterBroker {
            id,
            host: "localhost".into(),
            port: 9092,
            rack: None,
            incarnation: Uuid::from_u128(id as u128),
        }
    }

    fn unfence(id: i32) -> ControllerCommand {
        ControllerCommand::UnfenceBroker {
            id,
            incarnation: Uuid::from_u128(id as u128),
        }
    }

    fn create(name: &str) -> ControllerCommand {
        ControllerCommand::CreateTopics {
            topics: vec![NewTopic {
                name: name.into(),
                id: Uuid::from_u128(7),
                partitions: 2,
                replication_factor: 2,
                assignments: Vec::new(),
                configs: Default::default(),
            }],
        }
    }

    /// The image after deciding and replaying `commands` the way the controller does.
    fn decided(commands: &[ControllerCommand]) -> (MetadataImage, Vec<MetadataEntry>) {
        let mut image = MetadataImage::default();
        let mut entries = Vec::new();
        for command in commands {
            let (_, entry) = decide_entry(&image, command);
            if let Some(entry) = entry {
                replay_entry(&mut image, &entry).unwrap();
                entries.push(entry);
            }
        }
        (image, entries)
    }

    #[test]
    fn replay_applies_the_stored_records_and_decides_nothing() {
        let commands = [
            register(1),
            register(2),
            register(3),
            unfence(1),
            unfence(2),
            unfence(3),
            create("t"),
        ];
        let (today, mut entries) = decided(&commands);
        let today = today.partition("t", 0).unwrap();
        assert_ne!((today.replicas.clone(), today.leader), (vec![3, 1], 3));
        // An older Strand decided differently: it put both replicas of partition 0 on
        // brokers 3 and 1, led by 3. Today's decide would not; the log says it did.
        let MetadataEntry::Records { records, .. } = entries.last_mut().unwrap() else {
            panic!("records")
        };
        let MetadataRecord::CreateTopic { partitions, .. } = &mut records[0] else {
            panic!("the topic's record")
        };
        partitions[0].replicas = vec![3, 1];
        partitions[0].isr = vec![3, 1];
        partitions[0].leader = 3;

        let stored = serde_json::to_vec(&entries).unwrap();
        let mut image = MetadataImage::default();
        for entry in serde_json::from_slice::<Vec<MetadataEntry>>(&stored).unwrap() {
            replay_entry(&mut image, &entry).unwrap();
        }
        let partition = image.partition("t", 0).unwrap();
        assert_eq!(
            (partition.replicas.clone(), partition.leader),
            (vec![3, 1], 3)
        );
    }

    #[test]
    fn a_log_of_commands_written_before_records_still_replays() {
        let commands = [
            register(1),
            register(2),
            unfence(1),
            unfence(2),
            create("t"),
        ];
        // The old log's entries: the commands' own JSON.
        let legacy: Vec<String> = commands
            .iter()
            .map(|c| serde_json::to_string(c).unwrap())
            .collect();
        let mut replayed = MetadataImage::default();
        for json in &legacy {
            let entry: MetadataEntry = serde_json::from_str(json).unwrap();
            assert!(matches!(entry, MetadataEntry::Command(_)));
            replay_entry(&mut replayed, &entry).unwrap();
        }
        let (decided, _) = decided(&commands);
        assert!(decided.topic("t").is_some());
        assert_eq!(replayed.topic("t"), decided.topic("t"));
        assert_eq!(replayed.brokers, decided.brokers);
    }

    #[test]
    fn a_command_that_changes_nothing_writes_nothing() {
        let (image, _) = decided(&[register(1)]);
        let (reply, entry) = decide_entry(&image, &register(1));
        assert!(entry.is_none(), "the same incarnation registering again");
        assert_eq!(
            reply,
            ControllerReply::Results(vec![crate::ItemResult::ok()])
        );
    }

    #[test]
    fn records_of_a_later_version_are_refused_not_misread() {
        let entry = MetadataEntry::Records {
            records_version: RECORDS_VERSION + 1,
            records: Vec::new(),
            reply: ControllerReply::Results(Vec::new()),
        };
        let json = serde_json::to_string(&entry).unwrap();
        let read: MetadataEntry = serde_json::from_str(&json).unwrap();
        assert_eq!(
            replay_entry(&mut MetadataImage::default(), &read),
            Err(UnknownRecordsVersion {
                found: RECORDS_VERSION + 1
            })
        );
    }
}
