//! Changing who votes in the metadata quorum: KIP-853's AddRaftVoter and RemoveRaftVoter
//! (`kafka-metadata-quorum add-controller` / `remove-controller`, Admin.addRaftVoter /
//! removeRaftVoter) and UnregisterController, which forgets a node that left for good.
//!
//! The checks are plain functions of the membership the leader holds (`QuorumView`), with
//! Kafka's errors and messages; the change itself is openraft's joint consensus
//! (`ControllerService::change_voters`). Every node of a cluster is already in the
//! membership as a learner, since it receives the metadata log, so adding a voter promotes
//! a learner that is caught up, and a removed voter stays a learner: its broker still
//! needs the log. A replica is known by its id and the directory id of its metadata log
//! (`QuorumPeer`), as on Kafka, so a node that lost its disk is not mistaken for the
//! replica that had it.

use std::collections::BTreeMap;
use std::fmt;

use strand_types::error_code;
use strand_types::kafka_uuid;
use uuid::Uuid;

use crate::{NodeId, QuorumPeer};

/// Kafka's ReplicaKey: a node id and the directory id of its metadata log, nil when
/// unknown (a voter named at start that has not registered yet).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReplicaKey {
    pub id: NodeId,
    pub directory_id: Uuid,
}

impl fmt::Display for ReplicaKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.directory_id.is_nil() {
            write!(f, "ReplicaKey(id={}, directoryId=<undefined>)", self.id)
        } else {
            write!(
                f,
                "ReplicaKey(id={}, directoryId={})",
                self.id,
                kafka_uuid::to_text(&self.directory_id)
            )
        }
    }
}

/// Why a voter change was refused, each with the Kafka error it is answered with.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum VoterChangeError {
    /// INVALID_REQUEST
    Invalid(String),
    /// DUPLICATE_VOTER
    Duplicate(String),
    /// VOTER_NOT_FOUND
    NotFound(String),
    /// REQUEST_TIMED_OUT: not possible now (a change in progress, a replica behind).
    TimedOut(String),
    /// CONTROLLER_ID_NOT_REGISTERED
    NotRegistered(String),
}

impl VoterChangeError {
    /// The Kafka error code and message it is answered with.
    pub fn into_kafka_error(self) -> (i16, String) {
        match self {
            VoterChangeError::Invalid(message) => (error_code::INVALID_REQUEST, message),
            VoterChangeError::Duplicate(message) => (error_code::DUPLICATE_VOTER, message),
            VoterChangeError::NotFound(message) => (error_code::VOTER_NOT_FOUND, message),
            VoterChangeError::TimedOut(message) => (error_code::REQUEST_TIMED_OUT, message),
            VoterChangeError::NotRegistered(message) => {
                (error_code::CONTROLLER_ID_NOT_REGISTERED, message)
            }
        }
    }
}

/// The membership as the leader holds it.
#[derive(Debug, Clone, Default)]
pub struct QuorumView {
    pub voters: BTreeMap<NodeId, QuorumPeer>,
    pub learners: BTreeMap<NodeId, QuorumPeer>,
    /// A joint configuration: a change is still being committed.
    pub changing: bool,
}

/// What adding a voter takes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AddVoter {
    pub id: NodeId,
    /// The learner's node with the directory id asked for, when it had none recorded yet:
    /// set before promoting it.
    pub set_directory: Option<QuorumPeer>,
}

const CHANGE_IN_PROGRESS: &str =
    "Request timed out waiting for leader to handle previous voter change request";

impl QuorumView {
    fn voter_keys(&self) -> String {
        let keys: Vec<String> = self
            .voters
            .iter()
            .map(|(id, peer)| {
                ReplicaKey {
                    id: *id,
                    directory_id: peer.directory_id,
                }
                .to_string()
            })
            .collect();
        format!("[{}]", keys.join(", "))
    }

    /// Kafka's checks for AddRaftVoter, in its order. `caught_up` says whether the learner
    /// has the leader's whole log; `listener_ports` are the ports of the endpoints the
    /// request names, one of which must be the learner's quorum port (the listener the
    /// quorum talks on, Kafka's "default listener").
    pub fn check_add(
        &self,
        key: ReplicaKey,
        listener_ports: &[u16],
        caught_up: impl Fn(NodeId) -> bool,
    ) -> Result<AddVoter, VoterChangeError> {
        if key.directory_id.is_nil() {
            return Err(VoterChangeError::Invalid(
                "Add voter request didn't include a valid voter".into(),
            ));
        }
        if self.voters.contains_key(&key.id) {
            return Err(VoterChangeError::Duplicate(format!(
                "The voter id for {key} is already part of the set of voters {}.",
                self.voter_keys()
            )));
        }
        if self.changing {
            return Err(VoterChangeError::TimedOut(CHANGE_IN_PROGRESS.into()));
        }
        let lagging = || {
            VoterChangeError::TimedOut(format!(
                "Aborted add voter operation for {key} since it is lagging behind"
            ))
        };
        // Not in the quorum at all, or another replica under that id (a new disk): it is
        // not the observer asked for.
        let Some(learner) = self.learners.get(&key.id) else {
            return Err(lagging());
        };
        if !learner.directory_id.is_nil() && learner.directory_id != key.directory_id {
            return Err(lagging());
        }
        let quorum_port = learner
            .addr
            .rsplit_once(':')
            .and_then(|(_, port)| port.parse::<u16>().ok());
        if !quorum_port.is_some_and(|port| listener_ports.contains(&port)) {
            return Err(VoterChangeError::Invalid(format!(
                "Add voter request didn't include the endpoint ({}) for the default listener",
                learner.addr
            )));
        }
        if !caught_up(key.id) {
            return Err(lagging());
        }
        Ok(AddVoter {
            id: key.id,
            set_directory: learner
                .directory_id
                .is_nil()
                .then(|| QuorumPeer::new(learner.addr.clone(), key.directory_id)),
        })
    }

    /// Kafka's checks for RemoveRaftVoter: a replica key with a directory id, the exact
    /// replica must vote, and not alone.
    pub fn check_remove(&self, key: ReplicaKey) -> Result<NodeId, VoterChangeError> {
        if key.directory_id.is_nil() {
            return Err(VoterChangeError::Invalid(
                "Remove voter request didn't include a valid voter".into(),
            ));
        }
        if self.changing {
            return Err(VoterChangeError::TimedOut(CHANGE_IN_PROGRESS.into()));
        }
        let votes = self
            .voters
            .get(&key.id)
            .is_some_and(|peer| peer.directory_id == key.directory_id);
        if !votes || self.voters.len() < 2 {
            return Err(VoterChangeError::NotFound(format!(
                "Cannot remove voter {key} from the set of voters {}",
                self.voter_keys()
            )));
        }
        Ok(key.id)
    }

    /// UnregisterController: a controller's registration, on Strand, is its place in the
    /// quorum's membership. A voter must be removed first (Kafka unregisters a voter and
    /// lets it register again; here it would stop voting with no change of membership);
    /// a node that is still a registered broker keeps receiving the log (`is_broker`);
    /// any other learner is dropped, so the leader stops replicating to a node gone for
    /// good.
    pub fn check_unregister(
        &self,
        id: NodeId,
        is_broker: bool,
    ) -> Result<NodeId, VoterChangeError> {
        if self.voters.contains_key(&id) {
            return Err(VoterChangeError::Invalid(format!(
                "Controller {id} is a voter of the metadata quorum: remove it with RemoveRaftVoter first."
            )));
        }
        if !self.learners.contains_key(&id) {
            return Err(VoterChangeError::NotRegistered(format!(
                "Controller ID {id} is not currently registered."
            )));
        }
        if is_broker {
            return Err(VoterChangeError::Invalid(format!(
                "Node {id} is a registered broker and receives the metadata log: unregister the broker first."
            )));
        }
        if self.changing {
            return Err(VoterChangeError::TimedOut(CHANGE_IN_PROGRESS.into()));
        }
        Ok(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dir(n: u8) -> Uuid {
        Uuid::from_bytes([n; 16])
    }

    fn view() -> QuorumView {
        QuorumView {
            voters: BTreeMap::from([
                (1, QuorumPeer::new("127.0.0.1:9001", Uuid::nil())),
                (2, QuorumPeer::new("127.0.0.1:9002", dir(2))),
            ]),
            learners: BTreeMap::from([
                (3, QuorumPeer::new("127.0.0.1:9003", dir(3))),
                (4, QuorumPeer::new("127.0.0.1:9004", Uuid::nil())),
            ]),
            changing: false,
        }
    }

    fn key(id: NodeId, directory_id: Uuid) -> ReplicaKey {
        ReplicaKey { id, directory_id }
    }

    #[test]
    fn a_caught_up_learner_with_its_directory_and_listener_is_promoted() {
        let add = view().check_add(key(3, dir(3)), &[9003], |_| true).unwrap();
        assert_eq!(
            add,
            AddVoter {
                id: 3,
                set_directory: None
            }
        );
        // A learner that never told its directory takes the one asked for.
        let add = view().check_add(key(4, dir(4)), &[9004], |_| true).unwrap();
        assert_eq!(
            add.set_directory,
            Some(QuorumPeer::new("127.0.0.1:9004", dir(4)))
        );
    }

    #[test]
    fn adding_is_refused_as_kafka_refuses_it() {
        let v = view();
        assert_eq!(
            v.check_add(key(3, Uuid::nil()), &[9003], |_| true),
            Err(VoterChangeError::Invalid(
                "Add voter request didn't include a valid voter".into()
            ))
        );
        let duplicate = v.check_add(key(2, dir(2)), &[9002], |_| true).unwrap_err();
        assert_eq!(
            duplicate,
            VoterChangeError::Duplicate(format!(
                "The voter id for ReplicaKey(id=2, directoryId={}) is already part of the set of voters [ReplicaKey(id=1, directoryId=<undefined>), ReplicaKey(id=2, directoryId={})].",
                kafka_uuid::to_text(&dir(2)),
                kafka_uuid::to_text(&dir(2))
            ))
        );
        let lagging = |id| {
            VoterChangeError::TimedOut(format!(
                "Aborted add voter operation for {} since it is lagging behind",
                key(id, dir(9))
            ))
        };
        // Unknown node, another directory, not caught up.
        assert_eq!(
            v.check_add(key(7, dir(9)), &[9007], |_| true),
            Err(lagging(7))
        );
        assert_eq!(
            v.check_add(key(3, dir(9)), &[9003], |_| true),
            Err(lagging(3))
        );
        assert_eq!(
            v.check_add(key(4, dir(9)), &[9004], |_| false),
            Err(lagging(4))
        );
        assert!(matches!(
            v.check_add(key(3, dir(3)), &[9999], |_| true),
            Err(VoterChangeError::Invalid(_))
        ));
        let changing = QuorumView {
            changing: true,
            ..view()
        };
        assert!(matches!(
            changing.check_add(key(3, dir(3)), &[9003], |_| true),
            Err(VoterChangeError::TimedOut(_))
        ));
    }

    #[test]
    fn only_the_exact_replica_is_removed_and_never_the_last() {
        let v = view();
        // Kafka's rule: no directory id, no valid voter (a static voter cannot be removed).
        assert_eq!(
            v.check_remove(key(1, Uuid::nil())),
            Err(VoterChangeError::Invalid(
                "Remove voter request didn't include a valid voter".into()
            ))
        );
        assert_eq!(v.check_remove(key(2, dir(2))), Ok(2));
        assert!(matches!(
            v.check_remove(key(2, dir(9))),
            Err(VoterChangeError::NotFound(_))
        ));
        assert!(matches!(
            v.check_remove(key(3, dir(3))),
            Err(VoterChangeError::NotFound(_))
        ));
        let alone = QuorumView {
            voters: BTreeMap::from([(2, QuorumPeer::new("127.0.0.1:9002", dir(2)))]),
            ..view()
        };
        let d = kafka_uuid::to_text(&dir(2));
        assert_eq!(
            alone.check_remove(key(2, dir(2))),
            Err(VoterChangeError::NotFound(format!(
                "Cannot remove voter ReplicaKey(id=2, directoryId={d}) from the set of voters [ReplicaKey(id=2, directoryId={d})]"
            )))
        );
    }

    #[test]
    fn only_a_learner_that_is_no_broker_is_unregistered() {
        let v = view();
        assert_eq!(v.check_unregister(3, false), Ok(3));
        assert!(matches!(
            v.check_unregister(3, true),
            Err(VoterChangeError::Invalid(_))
        ));
        assert!(matches!(
            v.check_unregister(1, false),
            Err(VoterChangeError::Invalid(_))
        ));
        assert_eq!(
            v.check_unregister(8, false),
            Err(VoterChangeError::NotRegistered(
                "Controller ID 8 is not currently registered.".into()
            ))
        );
    }
}
