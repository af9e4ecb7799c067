//! Offsets committed inside a transaction (TxnOffsetCommit, docs/design/transactions.md
//! §3.5): written to the group's partition as a transactional batch of the producer, held
//! pending per producer id, made the committed offsets by the producer's COMMIT marker on
//! the partition and dropped by its ABORT marker. The shard writes the markers of its own
//! partition, so they are ordered with its other writes, and its replay of the log does
//! the same as the live writes.

use std::collections::BTreeSet;

use strand_types::error_code;

use super::{
    accept_offsets, answer_now, coordinator_error_for_append, Answerer, CommitKind, GroupShard,
    OffsetToCommit,
};
use crate::group::records::{self, OffsetsRecord};
use crate::runtime::Write;

/// TxnOffsetCommit's producer and group member.
#[derive(Debug, Clone)]
pub struct TxnCommitter {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub generation_id: i32,
    pub member_id: String,
    pub group_instance_id: Option<String>,
    /// The TxnOffsetCommit version: v6 answers GROUP_ID_NOT_FOUND and STALE_MEMBER_EPOCH.
    pub api_version: i16,
}

impl GroupShard {
    /// TxnOffsetCommit: an error code per offset. The offsets become visible when the
    /// producer's transaction commits.
    pub fn txn_commit(
        &mut self,
        group_id: &str,
        committer: TxnCommitter,
        offsets: Vec<OffsetToCommit>,
    ) -> (Write, Answerer<Vec<i16>>) {
        let all = |code: i16| vec![code; offsets.len()];
        let refuse = |code| {
            let (_, answer) = answer_now(all(code));
            (Write::Records(Vec::new()), answer)
        };
        if group_id.is_empty() {
            return refuse(error_code::INVALID_GROUP_ID);
        }
        if !self.room_for(group_id) {
            return refuse(error_code::COORDINATOR_NOT_AVAILABLE);
        }
        let partitions: Vec<(&str, i32)> =
            offsets.iter().map(|(t, p, _)| (t.as_str(), *p)).collect();
        if let Err(code) = self.may_commit(
            group_id,
            committer.generation_id,
            &committer.member_id,
            committer.group_instance_id.as_deref(),
            CommitKind::Transactional {
                api_version: committer.api_version,
            },
            &partitions,
        ) {
            return refuse(code);
        }
        let (codes, accepted) = accept_offsets(offsets);
        let records = accepted
            .iter()
            .map(|(topic, partition, value)| {
                (
                    records::offset_key(group_id, topic, *partition),
                    Some(records::offset_value(value)),
                )
            })
            .collect();
        let write = Write::Transactional {
            producer_id: committer.producer_id,
            producer_epoch: committer.producer_epoch,
            records,
        };
        let group_id = group_id.to_string();
        let producer_id = committer.producer_id;
        (
            write,
            Box::new(move |shard, written| match written {
                Ok(()) => {
                    for (topic, partition, value) in accepted {
                        shard.hold(&group_id, producer_id, topic, partition, value);
                    }
                    codes
                }
                Err(code) => {
                    let code = coordinator_error_for_append(code);
                    codes
                        .into_iter()
                        .map(|c| if c == error_code::NONE { code } else { c })
                        .collect()
                }
            }),
        )
    }

    fn hold(
        &mut self,
        group_id: &str,
        producer_id: i64,
        topic: String,
        partition: i32,
        value: records::CommittedOffset,
    ) {
        let entry = self.groups.entry(group_id.to_string()).or_default();
        entry
            .txn_offsets
            .entry(producer_id)
            .or_default()
            .insert((topic, partition), value);
        self.open_txns
            .entry(producer_id)
            .or_default()
            .insert(group_id.to_string());
    }

    /// Ends `producer_id`'s transaction on this partition: a COMMIT makes its pending
    /// offsets the committed ones, an ABORT drops them.
    fn end_txn(&mut self, producer_id: i64, commit: bool) {
        let Some(groups) = self.open_txns.remove(&producer_id) else {
            return;
        };
        for group_id in groups {
            let Some(entry) = self.groups.get_mut(&group_id) else {
                continue;
            };
            let Some(offsets) = entry.txn_offsets.remove(&producer_id) else {
                continue;
            };
            if commit {
                entry.offsets.extend(offsets);
            }
        }
    }

    /// WriteTxnMarkers for this partition: the marker is written by the shard, and once
    /// it is, the producer's pending offsets are committed or dropped. Answers the
    /// marker's error code as the partition gave it (the transaction coordinator retries
    /// on NOT_LEADER_OR_FOLLOWER).
    pub fn write_marker(
        &mut self,
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    ) -> (Write, Answerer<i16>) {
        let write = Write::Marker {
            producer_id,
            producer_epoch,
            commit,
            coordinator_epoch,
        };
        (
            write,
            Box::new(move |shard, written| match written {
                Ok(()) => {
                    shard.end_txn(producer_id, commit);
                    error_code::NONE
                }
                // The transaction coordinator retries on this, finding the leader again.
                Err(
                    error_code::COORDINATOR_NOT_AVAILABLE
                    | error_code::COORDINATOR_LOAD_IN_PROGRESS
                    | error_code::NOT_COORDINATOR,
                ) => error_code::NOT_LEADER_OR_FOLLOWER,
                Err(code) => code,
            }),
        )
    }

    /// Replays a record of a producer's transactional batch (at load).
    pub fn replay_transactional(&mut self, producer_id: i64, key: &[u8], value: Option<&[u8]>) {
        if let Some(OffsetsRecord::Offset {
            group,
            topic,
            partition,
            value: Some(offset),
        }) = records::decode(key, value)
        {
            self.hold(&group, producer_id, topic, partition, offset);
        }
    }

    /// Replays a transaction marker (at load).
    pub fn replay_marker(&mut self, producer_id: i64, commit: bool) {
        self.end_txn(producer_id, commit);
    }

    /// The partitions of `group_id` with an offset pending in an open transaction
    /// (OffsetFetch with require_stable answers UNSTABLE_OFFSET_COMMIT for them).
    pub fn unstable_offsets(&self, group_id: &str) -> BTreeSet<(String, i32)> {
        self.groups
            .get(group_id)
            .map(|entry| {
                entry
                    .txn_offsets
                    .values()
                    .flat_map(|offsets| offsets.keys().cloned())
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Whether a group has transactions pending (it is not deleted meanwhile).
    pub fn has_open_txns(&self, group_id: &str) -> bool {
        self.groups
            .get(group_id)
            .is_some_and(|entry| !entry.txn_offsets.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::shard;
    use super::*;
    use crate::group::records::CommittedOffset;

    fn offset(value: i64) -> CommittedOffset {
        CommittedOffset {
            offset: value,
            leader_epoch: -1,
            metadata: String::new(),
            commit_timestamp: 0,
        }
    }

    fn committer(producer_id: i64) -> TxnCommitter {
        TxnCommitter {
            producer_id,
            producer_epoch: 0,
            generation_id: -1,
            member_id: String::new(),
            group_instance_id: None,
            api_version: 5,
        }
    }

    fn committed(shard: &GroupShard, group: &str) -> Vec<(String, i32, Option<i64>)> {
        shard
            .fetch_offsets(group, Some(vec![("t".to_string(), 0)]))
            .into_iter()
            .map(|(t, p, o)| (t, p, o.map(|o| o.offset)))
            .collect()
    }

    fn txn_commit(shard: &mut GroupShard, producer_id: i64, value: i64) -> Write {
        let (write, answer) = shard.txn_commit(
            "g",
            committer(producer_id),
            vec![("t".to_string(), 0, Ok(offset(value)))],
        );
        assert_eq!(answer(shard, Ok(())), vec![error_code::NONE]);
        write
    }

    #[test]
    fn txn_offsets_materialize_on_commit_and_drop_on_abort() {
        let mut shard = shard();
        let write = txn_commit(&mut shard, 7, 42);
        assert!(matches!(
            write,
            Write::Transactional {
                producer_id: 7,
                ref records,
                ..
            } if records.len() == 1
        ));
        assert_eq!(
            committed(&shard, "g"),
            vec![("t".into(), 0, None)],
            "pending"
        );
        assert!(shard.unstable_offsets("g").contains(&("t".to_string(), 0)));
        let (_, answer) = shard.write_marker(7, 0, true, 3);
        assert_eq!(answer(&mut shard, Ok(())), error_code::NONE);
        assert_eq!(committed(&shard, "g"), vec![("t".into(), 0, Some(42))]);
        assert!(shard.unstable_offsets("g").is_empty());

        txn_commit(&mut shard, 7, 50);
        let (_, answer) = shard.write_marker(7, 0, false, 3);
        answer(&mut shard, Ok(()));
        assert_eq!(
            committed(&shard, "g"),
            vec![("t".into(), 0, Some(42))],
            "aborted"
        );
        assert!(!shard.has_open_txns("g"));
    }

    #[test]
    fn a_failed_marker_write_keeps_the_offsets_pending_and_asks_for_a_retry() {
        let mut shard = shard();
        txn_commit(&mut shard, 7, 42);
        let (_, answer) = shard.write_marker(7, 0, true, 3);
        assert_eq!(
            answer(&mut shard, Err(error_code::NOT_COORDINATOR)),
            error_code::NOT_LEADER_OR_FOLLOWER
        );
        assert!(shard.has_open_txns("g"));
    }

    #[test]
    fn replay_does_what_the_live_writes_did() {
        let mut shard = shard();
        let key = records::offset_key("g", "t", 0);
        let value = records::offset_value(&offset(9));
        shard.replay_transactional(5, &key, Some(&value));
        shard.replay_transactional(6, &key, Some(&records::offset_value(&offset(11))));
        assert_eq!(committed(&shard, "g"), vec![("t".into(), 0, None)]);
        shard.replay_marker(6, false);
        shard.replay_marker(5, true);
        assert_eq!(committed(&shard, "g"), vec![("t".into(), 0, Some(9))]);
        shard.replay_marker(5, true);
        assert_eq!(
            committed(&shard, "g"),
            vec![("t".into(), 0, Some(9))],
            "a marker with nothing pending ends nothing"
        );
    }

    #[test]
    fn a_failed_txn_commit_holds_nothing() {
        let mut shard = shard();
        let (_, answer) =
            shard.txn_commit("g", committer(7), vec![("t".to_string(), 0, Ok(offset(1)))]);
        assert_eq!(
            answer(&mut shard, Err(error_code::NOT_ENOUGH_REPLICAS)),
            vec![error_code::COORDINATOR_NOT_AVAILABLE]
        );
        assert!(!shard.has_open_txns("g"));
    }

    #[test]
    fn a_generation_for_an_unknown_group_is_group_id_not_found_from_v6() {
        for (api_version, code) in [
            (5, error_code::ILLEGAL_GENERATION),
            (6, error_code::GROUP_ID_NOT_FOUND),
        ] {
            let mut shard = shard();
            let committer = TxnCommitter {
                generation_id: 3,
                member_id: "m".into(),
                api_version,
                ..committer(7)
            };
            let (_, answer) =
                shard.txn_commit("none", committer, vec![("t".to_string(), 0, Ok(offset(1)))]);
            assert_eq!(answer(&mut shard, Ok(())), vec![code], "v{api_version}");
        }
    }

    #[test]
    fn a_stale_member_epoch_in_a_txn_commit_is_illegal_generation_as_kafka_answers() {
        use crate::group::consumer::Heartbeat;
        let mut shard = shard();
        let (written, answer) = shard.consumer_heartbeat(
            "g",
            Heartbeat {
                member_id: "m".into(),
                member_epoch: 0,
                instance_id: None,
                rack_id: None,
                client_id: "c".into(),
                client_host: "h".into(),
                rebalance_timeout_ms: 30_000,
                subscribed_topics: Some(vec!["t".into()]),
                subscribed_regex: None,
                server_assignor: None,
                owned: Some(Default::default()),
            },
            0,
        );
        assert!(!written.is_empty(), "the new member is written");
        let joined = answer(&mut shard, Ok(())).unwrap();
        let stale = TxnCommitter {
            generation_id: joined.member_epoch + 1,
            member_id: "m".into(),
            ..committer(7)
        };
        let (_, answer) = shard.txn_commit(
            "g",
            stale.clone(),
            vec![("t".to_string(), 0, Ok(offset(1)))],
        );
        assert_eq!(
            answer(&mut shard, Ok(())),
            vec![error_code::ILLEGAL_GENERATION]
        );
        // v6 (KIP-1319) answers the KIP-848 code.
        let v6 = TxnCommitter {
            api_version: 6,
            ..stale
        };
        let (_, answer) = shard.txn_commit("g", v6, vec![("t".to_string(), 0, Ok(offset(1)))]);
        assert_eq!(
            answer(&mut shard, Ok(())),
            vec![error_code::STALE_MEMBER_EPOCH]
        );
        // A plain OffsetCommit keeps KIP-848's code.
        let (_, answer) = shard.commit(
            9,
            "g",
            joined.member_epoch + 1,
            "m",
            None,
            vec![("t".to_string(), 0, Ok(offset(1)))],
        );
        assert_eq!(
            answer(&mut shard, Ok(())),
            vec![error_code::STALE_MEMBER_EPOCH]
        );
        // A KIP-848 member commits with OffsetCommit v9+; an admin commit to a group
        // with members is UNKNOWN_MEMBER_ID (Kafka's ConsumerGroup.validateOffsetCommit).
        for (version, epoch, member, code) in [
            (8, joined.member_epoch, "m", error_code::UNSUPPORTED_VERSION),
            (9, -1, "", error_code::UNKNOWN_MEMBER_ID),
            (9, joined.member_epoch, "m", error_code::NONE),
        ] {
            let (_, answer) = shard.commit(
                version,
                "g",
                epoch,
                member,
                None,
                vec![("t".to_string(), 0, Ok(offset(1)))],
            );
            assert_eq!(
                answer(&mut shard, Ok(())),
                vec![code],
                "v{version} {member:?}"
            );
        }
    }
}
