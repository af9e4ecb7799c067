//! How the quorum looks from its leader, for DescribeQuorum (kafka-metadata-quorum): each
//! replica's log end, when it last answered the leader and when it was last caught up.
//!
//! Kafka's followers fetch from the leader; Raft's leader pushes AppendEntries instead, so
//! a follower's "last fetch" is the last AppendEntries it acknowledged, and it was caught
//! up when that acknowledgement covered the leader's whole log. openraft's metrics give
//! the acknowledged log ends (`replication`) but no times, so `FollowerContacts` records
//! them as the answers arrive (`network.rs`). Offsets are Raft log indexes: a log end is
//! the index after the last entry, as Kafka's log end offset is.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use openraft::RaftMetrics;
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use uuid::Uuid;

use crate::{NodeId, QuorumPeer};

/// DescribeQuorum's view of one replica. Times are ms since the epoch, -1 when unknown.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumReplica {
    pub id: i32,
    /// The directory id of its metadata log (nil: not known, as Kafka's static voters).
    #[serde(default)]
    pub directory_id: Uuid,
    pub log_end_offset: i64,
    pub last_fetch_ms: i64,
    pub last_caught_up_ms: i64,
}

/// The quorum as the leader sees it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumDescription {
    pub leader: i32,
    /// The Raft term (Kafka's leader epoch).
    pub epoch: i32,
    /// The end of the committed log.
    pub high_watermark: i64,
    pub voters: Vec<QuorumReplica>,
    /// Nodes that receive the log without voting (brokers that are not controllers).
    pub observers: Vec<QuorumReplica>,
    /// Each voter's quorum address: (id, host, port).
    pub voter_endpoints: Vec<(i32, String, u16)>,
}

impl QuorumDescription {
    /// A single node's quorum: itself, the only voter, leading at epoch 0 a metadata log
    /// it does not keep, reachable at `host:port`.
    pub fn single_node(id: i32, host: String, port: u16) -> QuorumDescription {
        let now = now_ms();
        QuorumDescription {
            leader: id,
            epoch: 0,
            high_watermark: 0,
            voters: vec![QuorumReplica {
                id,
                directory_id: Uuid::nil(),
                log_end_offset: 0,
                last_fetch_ms: now,
                last_caught_up_ms: now,
            }],
            observers: Vec::new(),
            voter_endpoints: vec![(id, host, port)],
        }
    }
}

#[derive(Debug, Clone, Copy)]
struct Contact {
    last_ack_ms: i64,
    last_caught_up_ms: i64,
}

/// The leader's record of its followers' acknowledgements.
#[derive(Debug, Default)]
pub struct FollowerContacts {
    metrics: OnceLock<watch::Receiver<RaftMetrics<NodeId, QuorumPeer>>>,
    seen: Mutex<HashMap<NodeId, Contact>>,
    /// Milliseconds of wall clock: the system's unless set (the simulator's virtual one).
    clock: Option<fn() -> i64>,
}

impl FollowerContacts {
    /// Contacts timed by `clock` (milliseconds) instead of the system's wall clock.
    pub fn with_clock(clock: fn() -> i64) -> FollowerContacts {
        FollowerContacts {
            clock: Some(clock),
            ..FollowerContacts::default()
        }
    }

    fn now_ms(&self) -> i64 {
        self.clock.map_or_else(now_ms, |clock| clock())
    }

    /// Where a follower's log ends once it accepts everything `rpc` sends.
    pub fn sent_end<C: openraft::RaftTypeConfig<NodeId = NodeId>>(
        rpc: &openraft::raft::AppendEntriesRequest<C>,
    ) -> u64 {
        rpc.entries
            .last()
            .map(|entry| *openraft::RaftLogId::get_log_id(entry))
            .or(rpc.prev_log_id)
            .map_or(0, |log_id| log_id.index + 1)
    }

    /// `node` answered an AppendEntries whose entries ended at `sent_end`.
    pub fn append_answered(
        &self,
        node: NodeId,
        sent_end: u64,
        response: &openraft::raft::AppendEntriesResponse<NodeId>,
    ) {
        use openraft::raft::AppendEntriesResponse;
        match response {
            AppendEntriesResponse::Success => self.acknowledged(node, sent_end),
            AppendEntriesResponse::PartialSuccess(matched) => {
                self.acknowledged(node, matched.map_or(0, |log_id| log_id.index + 1));
            }
            _ => {}
        }
    }
    /// The Raft instance whose log ends acknowledgements are compared with.
    pub fn watch(&self, metrics: watch::Receiver<RaftMetrics<NodeId, QuorumPeer>>) {
        let _ = self.metrics.set(metrics);
    }

    /// `node` acknowledged AppendEntries: its log now ends at `log_end`.
    pub fn acknowledged(&self, node: NodeId, log_end: u64) {
        let now = self.now_ms();
        let leader_end = self
            .metrics
            .get()
            .map(|metrics| metrics.borrow().last_log_index.map_or(0, |index| index + 1));
        let mut seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let contact = seen.entry(node).or_insert(Contact {
            last_ack_ms: -1,
            last_caught_up_ms: -1,
        });
        contact.last_ack_ms = now;
        if leader_end.is_some_and(|end| log_end >= end) {
            contact.last_caught_up_ms = now;
        }
    }

    /// Whether `node` acknowledged an AppendEntries within `window`.
    pub fn acknowledged_within(&self, node: NodeId, window: Duration) -> bool {
        self.within(node, window, |contact| contact.last_ack_ms)
    }

    /// Whether an acknowledgement from `node` covered the leader's whole log within
    /// `window`.
    pub fn caught_up_within(&self, node: NodeId, window: Duration) -> bool {
        self.within(node, window, |contact| contact.last_caught_up_ms)
    }

    /// Whether the moment `when` picks from `node`'s contact (-1: never) lies within
    /// `window`.
    fn within(&self, node: NodeId, window: Duration, when: fn(&Contact) -> i64) -> bool {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        seen.get(&node)
            .map(when)
            .is_some_and(|at| at >= 0 && self.now_ms() - at <= window.as_millis() as i64)
    }

    /// The quorum as `metrics` (this node's, as leader) and the acknowledgements show it.
    pub fn describe(&self, metrics: &RaftMetrics<NodeId, QuorumPeer>) -> QuorumDescription {
        let now = self.now_ms();
        let membership = metrics.membership_config.membership();
        let leader_end = metrics.last_log_index.map_or(0, |index| index as i64 + 1);
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        let directory_id = |node: NodeId| {
            membership
                .get_node(&node)
                .map_or(Uuid::nil(), |peer| peer.directory_id)
        };
        let replica = |node: NodeId| -> QuorumReplica {
            if node == metrics.id {
                return QuorumReplica {
                    id: node as i32,
                    directory_id: directory_id(node),
                    log_end_offset: leader_end,
                    last_fetch_ms: now,
                    last_caught_up_ms: now,
                };
            }
            let matched = metrics
                .replication
                .as_ref()
                .and_then(|replication| replication.get(&node).copied().flatten());
            let contact = seen.get(&node);
            QuorumReplica {
                id: node as i32,
                directory_id: directory_id(node),
                log_end_offset: matched.map_or(0, |log_id| log_id.index as i64 + 1),
                last_fetch_ms: contact.map_or(-1, |c| c.last_ack_ms),
                last_caught_up_ms: contact.map_or(-1, |c| c.last_caught_up_ms),
            }
        };
        let voter_endpoints = membership
            .nodes()
            .filter(|(id, _)| membership.voter_ids().any(|v| v == **id))
            .filter_map(|(id, node)| {
                let (host, port) = node.addr.rsplit_once(':')?;
                Some((*id as i32, host.to_string(), port.parse().ok()?))
            })
            .collect();
        QuorumDescription {
            leader: metrics.id as i32,
            epoch: metrics.current_term as i32,
            high_watermark: metrics
                .last_applied
                .map_or(0, |log_id| log_id.index as i64 + 1),
            voters: membership.voter_ids().map(replica).collect(),
            observers: membership.learner_ids().map(replica).collect(),
            voter_endpoints,
        }
    }
}

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as i64)
}
