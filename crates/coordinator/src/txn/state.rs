//! The states of a transactional id and Kafka's table of which may follow which
//! (docs/design/transactions.md, 1.2). Ids are the `TransactionStatus` byte stored in
//! `__transaction_state`; names are what DescribeTransactions and ListTransactions show.

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TxnState {
    Empty,
    Ongoing,
    PrepareCommit,
    PrepareAbort,
    CompleteCommit,
    CompleteAbort,
    /// Only ever pending: ends in a tombstone and the id's removal.
    Dead,
    /// Only ever pending: replaced at once by PrepareAbort with the bumped epoch.
    PrepareEpochFence,
}

use TxnState::*;

impl TxnState {
    /// Every state, in the order of its id.
    pub const ALL: [TxnState; 8] = [
        Empty,
        Ongoing,
        PrepareCommit,
        PrepareAbort,
        CompleteCommit,
        CompleteAbort,
        Dead,
        PrepareEpochFence,
    ];

    /// The `TransactionStatus` byte.
    pub fn id(self) -> i8 {
        match self {
            Empty => 0,
            Ongoing => 1,
            PrepareCommit => 2,
            PrepareAbort => 3,
            CompleteCommit => 4,
            CompleteAbort => 5,
            Dead => 6,
            PrepareEpochFence => 7,
        }
    }

    pub fn from_id(id: i8) -> Option<TxnState> {
        TxnState::ALL.get(usize::try_from(id).ok()?).copied()
    }

    /// As Kafka spells it in DescribeTransactions and ListTransactions.
    pub fn name(self) -> &'static str {
        match self {
            Empty => "Empty",
            Ongoing => "Ongoing",
            PrepareCommit => "PrepareCommit",
            PrepareAbort => "PrepareAbort",
            CompleteCommit => "CompleteCommit",
            CompleteAbort => "CompleteAbort",
            Dead => "Dead",
            PrepareEpochFence => "PrepareEpochFence",
        }
    }

    pub fn from_name(name: &str) -> Option<TxnState> {
        TxnState::ALL.into_iter().find(|state| state.name() == name)
    }

    /// Whether this state may follow `previous` (Kafka 4.0's table; the moves from
    /// Empty and the complete states to PrepareAbort are taken by transaction version 2
    /// only).
    pub fn may_follow(self, previous: TxnState) -> bool {
        let allowed: &[TxnState] = match self {
            Empty => &[Empty, CompleteCommit, CompleteAbort],
            Ongoing => &[Ongoing, Empty, CompleteCommit, CompleteAbort],
            PrepareCommit => &[Ongoing],
            PrepareAbort => &[
                Ongoing,
                PrepareEpochFence,
                Empty,
                CompleteCommit,
                CompleteAbort,
            ],
            CompleteCommit => &[PrepareCommit],
            CompleteAbort => &[PrepareAbort],
            Dead => &[Empty, CompleteAbort, CompleteCommit],
            PrepareEpochFence => &[Ongoing],
        };
        allowed.contains(&previous)
    }

    /// Whether an id in this state may expire (transactional.id.expiration.ms).
    pub fn may_expire(self) -> bool {
        matches!(self, Empty | CompleteCommit | CompleteAbort)
    }

    /// Whether a committed record may hold this state (Dead and PrepareEpochFence are
    /// pending only; finding one in the log is damage).
    pub fn may_be_stored(self) -> bool {
        !matches!(self, Dead | PrepareEpochFence)
    }
}

/// Kafka keeps the last epoch for fencing: a client never gets 32767.
pub fn epoch_exhausted(epoch: i16) -> bool {
    epoch >= i16::MAX - 1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip_as_kafka_numbers_them() {
        for (id, state) in TxnState::ALL.into_iter().enumerate() {
            assert_eq!(state.id(), id as i8);
            assert_eq!(TxnState::from_id(id as i8), Some(state));
            assert_eq!(TxnState::from_name(state.name()), Some(state));
        }
        assert_eq!(TxnState::from_id(8), None);
        assert_eq!(
            TxnState::from_name("ongoing"),
            None,
            "names are case-sensitive"
        );
    }

    #[test]
    fn transitions_follow_kafkas_table() {
        assert!(Ongoing.may_follow(Empty));
        assert!(Ongoing.may_follow(CompleteAbort));
        assert!(PrepareCommit.may_follow(Ongoing));
        assert!(!PrepareCommit.may_follow(Empty), "commit needs partitions");
        assert!(
            PrepareAbort.may_follow(Empty),
            "transaction version 2 aborts empty"
        );
        assert!(PrepareAbort.may_follow(PrepareEpochFence));
        assert!(CompleteCommit.may_follow(PrepareCommit));
        assert!(!CompleteCommit.may_follow(PrepareAbort));
        assert!(
            !Empty.may_follow(Ongoing),
            "an open transaction ends by a prepare"
        );
        assert!(Dead.may_follow(CompleteCommit));
        assert!(!Dead.may_follow(Ongoing));
        let stored: Vec<_> = TxnState::ALL
            .into_iter()
            .filter(|s| s.may_be_stored())
            .collect();
        assert_eq!(stored.len(), 6);
        assert!(Empty.may_expire() && !Ongoing.may_expire());
        assert!(epoch_exhausted(32766) && !epoch_exhausted(32765));
    }
}
