//! Incremental fetch sessions (KIP-227). A client's full fetch (session id 0, epoch 0)
//! creates a session holding its partitions and fetch positions; its next fetches
//! (session id, epoch 1, 2, ...) carry only what changed, and the answer carries only the
//! partitions with something new: records, an error, or a changed high watermark, last
//! stable offset or log start offset. Without sessions every answer lists every partition,
//! which makes the new Java consumer spin on paused partitions.
//!
//! A plain state machine (`apply`, `filter`); the cache is bounded by
//! max.incremental.fetch.session.cache.slots and evicts the least recently used session.
//! Thread-safe through one mutex in `FetchSessionCache`.

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use uuid::Uuid;

use crate::error_code;

/// max.incremental.fetch.session.cache.slots
pub const FETCH_SESSION_SLOTS_DEFAULT: usize = 1000;
/// A request's epoch that ends (or declines) a session.
pub const FINAL_EPOCH: i32 = -1;

/// A partition as a fetch names it: by topic name (v4-v12) or topic id (v13+).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FetchKey {
    pub topic: String,
    pub topic_id: Uuid,
    pub partition: i32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Wanted {
    pub fetch_offset: i64,
    pub partition_max_bytes: i32,
    pub current_leader_epoch: i32,
    /// KIP-320: the epoch of the fetcher's last batch (-1: not given).
    pub last_fetched_epoch: i32,
}

/// (high watermark, last stable offset, log start offset) last sent for a partition.
pub type Marks = (i64, i64, i64);

#[derive(Debug, Clone, Default)]
struct Session {
    epoch: i32,
    partitions: BTreeMap<FetchKey, (Wanted, Option<Marks>)>,
    last_used: u64,
}

/// How a fetch request relates to sessions, after `apply`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SessionPlan {
    /// No session: read and answer exactly the request's partitions.
    Sessionless,
    /// A full fetch that opened session `id`: answer every partition.
    Full { id: i32 },
    /// An incremental fetch of session `id`: these are all its partitions now; answer
    /// only those with news.
    Incremental {
        id: i32,
        partitions: Vec<(FetchKey, Wanted)>,
    },
    /// A top-level error: FETCH_SESSION_ID_NOT_FOUND or INVALID_FETCH_SESSION_EPOCH.
    Error(i16),
}

#[derive(Debug)]
pub struct FetchSessionCache {
    slots: usize,
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    sessions: HashMap<i32, Session>,
    next_id: i32,
    tick: u64,
}

impl FetchSessionCache {
    pub fn new(slots: usize) -> FetchSessionCache {
        FetchSessionCache {
            slots,
            inner: Mutex::new(CacheInner {
                next_id: 1,
                ..CacheInner::default()
            }),
        }
    }

    /// Applies a request's session fields, its partitions and its forgotten partitions.
    pub fn apply(
        &self,
        session_id: i32,
        epoch: i32,
        requested: &[(FetchKey, Wanted)],
        forgotten: &[FetchKey],
    ) -> SessionPlan {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        inner.tick += 1;
        let tick = inner.tick;
        // A full fetch (epoch 0 or -1) closes any session it names, as in Kafka; epoch 0
        // then opens a new one.
        if session_id != 0 && (epoch == 0 || epoch == FINAL_EPOCH) {
            inner.sessions.remove(&session_id);
        }
        match (session_id, epoch) {
            (_, FINAL_EPOCH) => SessionPlan::Sessionless,
            (_, 0) => {
                if self.slots == 0 {
                    return SessionPlan::Sessionless;
                }
                if inner.sessions.len() >= self.slots {
                    if let Some(oldest) = inner
                        .sessions
                        .iter()
                        .min_by_key(|(_, s)| s.last_used)
                        .map(|(id, _)| *id)
                    {
                        inner.sessions.remove(&oldest);
                    }
                }
                let id = loop {
                    let id = inner.next_id;
                    inner.next_id = if inner.next_id == i32::MAX {
                        1
                    } else {
                        inner.next_id + 1
                    };
                    if !inner.sessions.contains_key(&id) {
                        break id;
                    }
                };
                let partitions = requested
                    .iter()
                    .map(|(k, w)| (k.clone(), (*w, None)))
                    .collect();
                inner.sessions.insert(
                    id,
                    Session {
                        epoch: 1,
                        partitions,
                        last_used: tick,
                    },
                );
                SessionPlan::Full { id }
            }
            (0, _) => SessionPlan::Error(error_code::INVALID_FETCH_SESSION_EPOCH),
            (id, epoch) => {
                let Some(session) = inner.sessions.get_mut(&id) else {
                    return SessionPlan::Error(error_code::FETCH_SESSION_ID_NOT_FOUND);
                };
                if epoch != session.epoch {
                    return SessionPlan::Error(error_code::INVALID_FETCH_SESSION_EPOCH);
                }
                session.epoch = if session.epoch == i32::MAX {
                    1
                } else {
                    session.epoch + 1
                };
                session.last_used = tick;
                for key in forgotten {
                    session.partitions.remove(key);
                }
                for (key, wanted) in requested {
                    let marks = session.partitions.get(key).and_then(|(_, m)| *m);
                    session.partitions.insert(key.clone(), (*wanted, marks));
                }
                let partitions = session
                    .partitions
                    .iter()
                    .map(|(k, (w, _))| (k.clone(), *w))
                    .collect();
                SessionPlan::Incremental { id, partitions }
            }
        }
    }

    /// Whether a partition's answer goes out in an incremental response: it has records
    /// or an error, or its marks changed since last sent. Records what is sent.
    pub fn should_send(
        &self,
        session_id: i32,
        key: &FetchKey,
        has_records: bool,
        error: bool,
        marks: Marks,
    ) -> bool {
        let mut inner = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some((_, last)) = inner
            .sessions
            .get_mut(&session_id)
            .and_then(|s| s.partitions.get_mut(key))
        else {
            return true;
        };
        let send = has_records || error || *last != Some(marks);
        if send {
            *last = Some(marks);
        }
        send
    }

    pub fn len(&self) -> usize {
        self.inner
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .sessions
            .len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(partition: i32) -> FetchKey {
        FetchKey {
            topic: "t".into(),
            topic_id: Uuid::nil(),
            partition,
        }
    }

    fn wanted(offset: i64) -> Wanted {
        Wanted {
            fetch_offset: offset,
            partition_max_bytes: 1 << 20,
            current_leader_epoch: -1,
            last_fetched_epoch: -1,
        }
    }

    #[test]
    fn full_then_incremental_fetches() {
        let cache = FetchSessionCache::new(10);
        let SessionPlan::Full { id } =
            cache.apply(0, 0, &[(key(0), wanted(0)), (key(1), wanted(0))], &[])
        else {
            panic!()
        };
        // First answers record the marks.
        assert!(cache.should_send(id, &key(0), false, false, (5, 5, 0)));
        assert!(cache.should_send(id, &key(1), false, false, (0, 0, 0)));
        // Incremental: only partition 0 moved; partition 1 is unchanged and not sent.
        let SessionPlan::Incremental { partitions, .. } =
            cache.apply(id, 1, &[(key(0), wanted(5))], &[])
        else {
            panic!()
        };
        assert_eq!(partitions, vec![(key(0), wanted(5)), (key(1), wanted(0))]);
        assert!(!cache.should_send(id, &key(1), false, false, (0, 0, 0)));
        assert!(
            cache.should_send(id, &key(1), false, false, (3, 3, 0)),
            "a moved high watermark is news"
        );
        // Forgetting a partition drops it from the session.
        let SessionPlan::Incremental { partitions, .. } = cache.apply(id, 2, &[], &[key(1)]) else {
            panic!()
        };
        assert_eq!(partitions.len(), 1);
    }

    #[test]
    fn wrong_epochs_unknown_sessions_and_closing() {
        let cache = FetchSessionCache::new(10);
        let SessionPlan::Full { id } = cache.apply(0, 0, &[(key(0), wanted(0))], &[]) else {
            panic!()
        };
        assert_eq!(
            cache.apply(id, 5, &[], &[]),
            SessionPlan::Error(error_code::INVALID_FETCH_SESSION_EPOCH)
        );
        assert_eq!(
            cache.apply(id + 100, 1, &[], &[]),
            SessionPlan::Error(error_code::FETCH_SESSION_ID_NOT_FOUND)
        );
        assert_eq!(
            cache.apply(id, FINAL_EPOCH, &[], &[]),
            SessionPlan::Sessionless
        );
        assert!(cache.is_empty());
        assert_eq!(
            cache.apply(0, FINAL_EPOCH, &[], &[]),
            SessionPlan::Sessionless
        );
    }

    #[test]
    fn a_full_fetch_naming_a_session_replaces_it() {
        let cache = FetchSessionCache::new(10);
        let SessionPlan::Full { id: first } = cache.apply(0, 0, &[(key(0), wanted(0))], &[]) else {
            panic!()
        };
        let SessionPlan::Full { id: second } = cache.apply(first, 0, &[(key(1), wanted(0))], &[])
        else {
            panic!()
        };
        assert_ne!(first, second);
        assert_eq!(
            cache.apply(first, 1, &[], &[]),
            SessionPlan::Error(error_code::FETCH_SESSION_ID_NOT_FOUND)
        );
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_cache_is_bounded() {
        let cache = FetchSessionCache::new(2);
        for _ in 0..5 {
            assert!(matches!(
                cache.apply(0, 0, &[(key(0), wanted(0))], &[]),
                SessionPlan::Full { .. }
            ));
        }
        assert_eq!(cache.len(), 2);
        assert_eq!(
            FetchSessionCache::new(0).apply(0, 0, &[], &[]),
            SessionPlan::Sessionless
        );
    }
}
