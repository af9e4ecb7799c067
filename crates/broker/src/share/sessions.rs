//! Share sessions (KIP-932): a member's ShareFetch with epoch 0 opens a session holding
//! the partitions it fetches from; later requests (epochs 1, 2, ...) add partitions and
//! forget others, and every answer covers all the session's partitions. Epoch -1 closes
//! the session: what the member still holds goes back to the others.
//!
//! A plain state machine behind one mutex; bounded by group.share.max.share.sessions.
//! A session belongs to the connection that opened it: when that connection closes, the
//! session goes and its member's records are released, as on Kafka.

use std::collections::{BTreeSet, HashMap};
use std::sync::Mutex;

use uuid::Uuid;

use crate::error_code;

/// The epoch that opens a session.
pub const INITIAL_EPOCH: i32 = 0;
/// The epoch that closes one.
pub const FINAL_EPOCH: i32 = -1;

/// (group id, member id)
pub type SessionKey = (String, String);
/// (topic id, partition)
pub type SharePartitionKey = (Uuid, i32);

#[derive(Debug, Clone)]
struct Session {
    /// The epoch the next request must carry.
    next_epoch: i32,
    partitions: BTreeSet<SharePartitionKey>,
    /// The connection that opened it.
    connection: u64,
}

/// What a request does to its member's session.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionStep {
    /// The session's partitions now (the request's added, its forgotten removed), and
    /// those the request added that the session did not have (answered once even with
    /// nothing to say, as Kafka does).
    Open(Vec<SharePartitionKey>, Vec<SharePartitionKey>),
    /// Epoch -1: the session is closed with this request's answer; nothing to fetch.
    Closed(Vec<SharePartitionKey>),
}

#[derive(Debug)]
pub struct ShareSessions {
    max_sessions: usize,
    sessions: Mutex<HashMap<SessionKey, Session>>,
}

impl ShareSessions {
    pub fn new(max_sessions: usize) -> ShareSessions {
        ShareSessions {
            max_sessions: max_sessions.max(1),
            sessions: Mutex::new(HashMap::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SessionKey, Session>> {
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A ShareFetch: `added` are the request's partitions, `forgotten` what it drops.
    /// Errors: SHARE_SESSION_NOT_FOUND, INVALID_SHARE_SESSION_EPOCH,
    /// SHARE_SESSION_LIMIT_REACHED, as Kafka answers them.
    pub fn fetch(
        &self,
        key: &SessionKey,
        epoch: i32,
        added: &[SharePartitionKey],
        forgotten: &[SharePartitionKey],
        connection: u64,
    ) -> Result<SessionStep, i16> {
        let mut sessions = self.lock();
        match epoch {
            INITIAL_EPOCH => {
                // A member's new session replaces its old one (whose records stay held
                // until their locks run out, as on Kafka).
                if !sessions.contains_key(key) && sessions.len() >= self.max_sessions {
                    return Err(error_code::SHARE_SESSION_LIMIT_REACHED);
                }
                let session = Session {
                    next_epoch: 1,
                    partitions: added.iter().copied().collect(),
                    connection,
                };
                let partitions: Vec<SharePartitionKey> =
                    session.partitions.iter().copied().collect();
                sessions.insert(key.clone(), session);
                Ok(SessionStep::Open(partitions.clone(), partitions))
            }
            FINAL_EPOCH => {
                let session = sessions
                    .remove(key)
                    .ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
                Ok(SessionStep::Closed(
                    session.partitions.into_iter().collect(),
                ))
            }
            epoch if epoch > 0 => {
                let session = sessions
                    .get_mut(key)
                    .ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
                if session.next_epoch != epoch {
                    return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
                }
                session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                let new: Vec<SharePartitionKey> = added
                    .iter()
                    .filter(|p| !session.partitions.contains(p))
                    .copied()
                    .collect();
                session.partitions.extend(added.iter().copied());
                for partition in forgotten {
                    session.partitions.remove(partition);
                }
                Ok(SessionStep::Open(
                    session.partitions.iter().copied().collect(),
                    new,
                ))
            }
            _ => Err(error_code::INVALID_SHARE_SESSION_EPOCH),
        }
    }

    /// A ShareAcknowledge: checks the epoch as a fetch does (and moves it on), without
    /// changing the partitions; epoch -1 closes the session (its epoch is not checked).
    /// Whether the session stays open.
    pub fn acknowledge(&self, key: &SessionKey, epoch: i32) -> Result<bool, i16> {
        let mut sessions = self.lock();
        match epoch {
            FINAL_EPOCH => {
                sessions
                    .remove(key)
                    .ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
                Ok(false)
            }
            epoch if epoch > 0 => {
                let session = sessions
                    .get_mut(key)
                    .ok_or(error_code::SHARE_SESSION_NOT_FOUND)?;
                if session.next_epoch != epoch {
                    return Err(error_code::INVALID_SHARE_SESSION_EPOCH);
                }
                session.next_epoch = if epoch == i32::MAX { 1 } else { epoch + 1 };
                Ok(true)
            }
            // A ShareAcknowledge cannot open a session.
            _ => Err(error_code::INVALID_SHARE_SESSION_EPOCH),
        }
    }

    /// The sessions `connection` opened, removed (it closed): their members' records
    /// go back to the others.
    pub fn connection_closed(&self, connection: u64) -> Vec<SessionKey> {
        let mut sessions = self.lock();
        let closed: Vec<SessionKey> = sessions
            .iter()
            .filter(|(_, s)| s.connection == connection)
            .map(|(k, _)| k.clone())
            .collect();
        for key in &closed {
            sessions.remove(key);
        }
        closed
    }

    /// Whether any member of `group_id` has a session here.
    pub fn has_group(&self, group_id: &str) -> bool {
        self.lock().keys().any(|(group, _)| group == group_id)
    }

    pub fn len(&self) -> usize {
        self.lock().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(member: &str) -> SessionKey {
        ("g".into(), member.into())
    }

    #[test]
    fn a_session_follows_its_epochs_and_keeps_its_partitions() {
        let sessions = ShareSessions::new(10);
        let (t, u) = (Uuid::from_u128(1), Uuid::from_u128(2));
        assert_eq!(
            sessions.fetch(&key("m"), 0, &[(t, 0)], &[], 7),
            Ok(SessionStep::Open(vec![(t, 0)], vec![(t, 0)]))
        );
        assert_eq!(
            sessions.fetch(&key("m"), 1, &[(u, 1), (t, 0)], &[], 7),
            Ok(SessionStep::Open(vec![(t, 0), (u, 1)], vec![(u, 1)]))
        );
        assert_eq!(
            sessions.fetch(&key("m"), 1, &[], &[], 7),
            Err(error_code::INVALID_SHARE_SESSION_EPOCH)
        );
        assert_eq!(sessions.acknowledge(&key("m"), 2), Ok(true));
        assert_eq!(
            sessions.acknowledge(&key("m"), 0),
            Err(error_code::INVALID_SHARE_SESSION_EPOCH)
        );
        assert_eq!(
            sessions.fetch(&key("m"), 3, &[], &[(t, 0)], 7),
            Ok(SessionStep::Open(vec![(u, 1)], vec![]))
        );
        assert_eq!(
            sessions.fetch(&key("other"), 1, &[], &[], 7),
            Err(error_code::SHARE_SESSION_NOT_FOUND)
        );
        assert_eq!(
            sessions.fetch(&key("m"), FINAL_EPOCH, &[], &[], 7),
            Ok(SessionStep::Closed(vec![(u, 1)]))
        );
        assert_eq!(
            sessions.fetch(&key("m"), FINAL_EPOCH, &[], &[], 7),
            Err(error_code::SHARE_SESSION_NOT_FOUND)
        );
        assert!(sessions.is_empty());
    }

    #[test]
    fn sessions_are_bounded_and_go_with_their_connection() {
        let sessions = ShareSessions::new(1);
        sessions.fetch(&key("a"), 0, &[], &[], 1).unwrap();
        assert_eq!(
            sessions.fetch(&key("b"), 0, &[], &[], 2),
            Err(error_code::SHARE_SESSION_LIMIT_REACHED)
        );
        assert!(sessions.connection_closed(2).is_empty());
        assert_eq!(sessions.connection_closed(1), vec![key("a")]);
        sessions.fetch(&key("b"), 0, &[], &[], 2).unwrap();
    }
}
