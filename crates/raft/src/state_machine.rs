//! The state machine: the metadata image, advanced by replaying each committed entry's
//! records (`strand_metadata::replay_entry`; decided once, by the active controller, and
//! only applied where they follow the chain, the same on every node). After every
//! applied batch the new image is published on a watch channel, which the broker follows.
//! A snapshot is the image itself, as JSON, kept in `snapshot.json`.
//!
//! Shared between openraft (through clones) and the publisher; state behind one mutex.

use std::io::Cursor;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use openraft::storage::{RaftStateMachine, Snapshot};
use openraft::{
    Entry, EntryPayload, ErrorSubject, ErrorVerb, LogId, RaftSnapshotBuilder, SnapshotMeta,
    StoredMembership,
};
use serde::{Deserialize, Serialize};
use strand_metadata::{DecisionId, MetadataImage, ReplayState, Replayed};
use tokio::sync::watch;

use crate::{io_error, MetadataRaft, NodeId, QuorumPeer, StorageError, TypeConfig};

const SNAPSHOT_FILE: &str = "snapshot.json";

/// What the broker sees: an image and the log index it reflects.
#[derive(Debug, Clone, Default)]
pub struct Published {
    pub image: Arc<MetadataImage>,
    /// Index of the last applied log entry (0 before any).
    pub applied_index: u64,
    /// The last records entry applied: where the next decision's chain starts.
    pub last_decision: Option<DecisionId>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
struct SnapshotBody {
    image: MetadataImage,
    #[serde(default)]
    replay: ReplayState,
    last_applied: Option<LogId<NodeId>>,
    membership: StoredMembership<NodeId, QuorumPeer>,
    snapshot_id: String,
}

#[derive(Debug)]
struct State {
    body: SnapshotBody,
    /// The last snapshot built or installed (serialised body), for followers that need it.
    snapshot: Option<(SnapshotMeta<NodeId, QuorumPeer>, Vec<u8>)>,
    snapshots_built: u64,
}

/// `C`: the runtime's Raft types (`MetadataRaft`); production's by default.
#[derive(Debug)]
pub struct StateMachine<C: MetadataRaft = TypeConfig> {
    dir: PathBuf,
    state: Arc<Mutex<State>>,
    published: watch::Sender<Published>,
    types: std::marker::PhantomData<fn() -> C>,
}

impl<C: MetadataRaft> Clone for StateMachine<C> {
    fn clone(&self) -> Self {
        StateMachine {
            dir: self.dir.clone(),
            state: self.state.clone(),
            published: self.published.clone(),
            types: std::marker::PhantomData,
        }
    }
}

fn meta_of(body: &SnapshotBody) -> SnapshotMeta<NodeId, QuorumPeer> {
    SnapshotMeta {
        last_log_id: body.last_applied,
        last_membership: body.membership.clone(),
        snapshot_id: body.snapshot_id.clone(),
    }
}

impl<C: MetadataRaft> StateMachine<C> {
    /// Loads the latest snapshot from `dir` (if any); the log after it is re-applied by
    /// openraft.
    pub fn open(dir: &Path) -> anyhow::Result<StateMachine<C>> {
        std::fs::create_dir_all(dir)?;
        let (body, snapshot) = match std::fs::read(dir.join(SNAPSHOT_FILE)) {
            Ok(bytes) => {
                let mut body: SnapshotBody = serde_json::from_slice(&bytes)?;
                body.image.reindex();
                let meta = meta_of(&body);
                (body, Some((meta, bytes)))
            }
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => {
                (SnapshotBody::default(), None)
            }
            Err(error) => return Err(error.into()),
        };
        let published = watch::Sender::new(published_of(&body));
        Ok(StateMachine {
            dir: dir.to_path_buf(),
            state: Arc::new(Mutex::new(State {
                body,
                snapshot,
                snapshots_built: 0,
            })),
            published,
            types: std::marker::PhantomData,
        })
    }

    /// Follows the image as commands are applied.
    pub fn subscribe(&self) -> watch::Receiver<Published> {
        self.published.subscribe()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the snapshot on disk: a restart loads it and replays only the log after it.
    // openraft's own error type, as its trait methods return it.
    #[allow(clippy::result_large_err)]
    fn persist_snapshot(
        &self,
        meta: &SnapshotMeta<NodeId, QuorumPeer>,
        bytes: &[u8],
    ) -> Result<(), StorageError> {
        strand_log::checkpoint::write_atomically(&self.dir.join(SNAPSHOT_FILE), bytes).map_err(
            |e| {
                io_error(
                    ErrorSubject::Snapshot(Some(meta.signature())),
                    ErrorVerb::Write,
                    e,
                )
            },
        )
    }

    fn publish(&self, body: &SnapshotBody) {
        self.published.send_replace(published_of(body));
    }
}

fn published_of(body: &SnapshotBody) -> Published {
    Published {
        image: Arc::new(body.image.clone()),
        applied_index: body.last_applied.map_or(0, |id| id.index),
        last_decision: body.replay.last,
    }
}

impl<C: MetadataRaft> RaftSnapshotBuilder<C> for StateMachine<C> {
    async fn build_snapshot(&mut self) -> Result<Snapshot<C>, StorageError> {
        let (meta, bytes) = {
            let mut state = self.state();
            state.snapshots_built += 1;
            let id = format!(
                "{}-{}",
                state.body.last_applied.map_or(0, |id| id.index),
                state.snapshots_built
            );
            state.body.snapshot_id = id;
            let bytes = serde_json::to_vec(&state.body)
                .map_err(|e| io_error(ErrorSubject::StateMachine, ErrorVerb::Write, e))?;
            let meta = meta_of(&state.body);
            state.snapshot = Some((meta.clone(), bytes.clone()));
            (meta, bytes)
        };
        self.persist_snapshot(&meta, &bytes)?;
        Ok(Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        })
    }
}

impl<C: MetadataRaft> RaftStateMachine<C> for StateMachine<C> {
    type SnapshotBuilder = StateMachine<C>;

    async fn applied_state(
        &mut self,
    ) -> Result<(Option<LogId<NodeId>>, StoredMembership<NodeId, QuorumPeer>), StorageError> {
        let state = self.state();
        Ok((state.body.last_applied, state.body.membership.clone()))
    }

    async fn apply<I>(&mut self, entries: I) -> Result<Vec<Replayed>, StorageError>
    where
        I: IntoIterator<Item = Entry<C>> + Send,
        I::IntoIter: Send,
    {
        let mut replies = Vec::new();
        let body = {
            let mut state = self.state();
            for entry in entries {
                let reply = match entry.payload {
                    EntryPayload::Blank => Replayed::Applied,
                    EntryPayload::Normal(metadata) => {
                        let body = &mut state.body;
                        let replayed = strand_metadata::replay_entry(
                            &mut body.image,
                            &mut body.replay,
                            &metadata,
                        )
                        .map_err(|error| {
                            io_error(ErrorSubject::Apply(entry.log_id), ErrorVerb::Read, error)
                        })?;
                        tracing::debug!(
                            index = entry.log_id.index,
                            ?replayed,
                            ?metadata,
                            "metadata entry"
                        );
                        replayed
                    }
                    EntryPayload::Membership(membership) => {
                        state.body.membership =
                            StoredMembership::new(Some(entry.log_id), membership);
                        Replayed::Applied
                    }
                };
                state.body.last_applied = Some(entry.log_id);
                replies.push(reply);
            }
            state.body.clone()
        };
        self.publish(&body);
        Ok(replies)
    }

    async fn get_snapshot_builder(&mut self) -> Self::SnapshotBuilder {
        self.clone()
    }

    async fn begin_receiving_snapshot(&mut self) -> Result<Box<Cursor<Vec<u8>>>, StorageError> {
        Ok(Box::new(Cursor::new(Vec::new())))
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMeta<NodeId, QuorumPeer>,
        snapshot: Box<Cursor<Vec<u8>>>,
    ) -> Result<(), StorageError> {
        let bytes = snapshot.into_inner();
        let mut body: SnapshotBody = serde_json::from_slice(&bytes).map_err(|e| {
            io_error(
                ErrorSubject::Snapshot(Some(meta.signature())),
                ErrorVerb::Read,
                e,
            )
        })?;
        body.image.reindex();
        self.persist_snapshot(meta, &bytes)?;
        {
            let mut state = self.state();
            state.body = body.clone();
            state.snapshot = Some((meta.clone(), bytes));
        }
        self.publish(&body);
        Ok(())
    }

    async fn get_current_snapshot(&mut self) -> Result<Option<Snapshot<C>>, StorageError> {
        Ok(self.state().snapshot.clone().map(|(meta, bytes)| Snapshot {
            meta,
            snapshot: Box::new(Cursor::new(bytes)),
        }))
    }
}
