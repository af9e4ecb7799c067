//! Requests this broker sends to its peers itself (transaction markers to partition
//! leaders, KIP-890 verification to transaction coordinators): one connection per peer,
//! opened on first use at the address the metadata image gives, dropped on any error so
//! the next request reconnects (to wherever the peer now listens). Every call has a
//! deadline and the requests in flight to one peer are bounded.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context;
use kafka_protocol::messages::ApiKey;
use kafka_protocol::protocol::{Decodable, Encodable};
use strand_protocol::client::Connection;

use super::Cluster;

/// Requests in flight to one peer.
const IN_FLIGHT_MAX: usize = 32;

#[derive(Default)]
pub struct Peers {
    connections: Mutex<HashMap<i32, Arc<Connection>>>,
    /// One connection attempt per peer at a time: callers that find none open wait for
    /// the one being opened instead of each logging in on its own.
    connecting: Mutex<HashMap<i32, Arc<tokio::sync::Mutex<()>>>>,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let open = self.connections.lock().map(|c| c.len()).unwrap_or(0);
        f.debug_struct("Peers").field("open", &open).finish()
    }
}

impl Peers {
    /// The open connection to `node` (a peer that restarted, or whose session is ending,
    /// closed it: connect again rather than wait on it).
    fn open(&self, node: i32) -> Option<Arc<Connection>> {
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&node)
            .filter(|open| !open.is_closed())
            .cloned()
    }

    async fn connection(&self, cluster: &Cluster, node: i32) -> anyhow::Result<Arc<Connection>> {
        if let Some(open) = self.open(node) {
            return Ok(open);
        }
        let attempt = self
            .connecting
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(node)
            .or_default()
            .clone();
        let _attempt = attempt.lock().await;
        if let Some(open) = self.open(node) {
            return Ok(open);
        }
        let address = {
            let image = cluster.image();
            let peer = image
                .brokers
                .get(&node)
                .with_context(|| format!("broker {node} is not registered"))?;
            format!("{}:{}", peer.host, peer.port)
        };
        let connection = cluster
            .inter_broker
            .connect(&address, IN_FLIGHT_MAX, "strand-broker")
            .await
            .with_context(|| format!("connecting to broker {node}"))?;
        let connection = Arc::new(connection);
        self.connections
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(node, connection.clone());
        Ok(connection)
    }

    /// Sends `body` to broker `node` and waits at most `timeout` for its answer, the
    /// connection's opening included.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        cluster: &Cluster,
        node: i32,
        key: ApiKey,
        version: i16,
        body: &Req,
        timeout: Duration,
    ) -> anyhow::Result<Resp> {
        let deadline = tokio::time::Instant::now() + timeout;
        let late = || anyhow::anyhow!("broker {node} did not answer {key:?} in {timeout:?}");
        let connection = tokio::time::timeout_at(deadline, self.connection(cluster, node))
            .await
            .map_err(|_| late())??;
        let answer = tokio::time::timeout_at(deadline, connection.call(key, version, body))
            .await
            .map_err(|_| late())
            .and_then(|answer| answer);
        if answer.is_err() {
            let mut connections = self.connections.lock().unwrap_or_else(|p| p.into_inner());
            if connections
                .get(&node)
                .is_some_and(|open| Arc::ptr_eq(open, &connection))
            {
                connections.remove(&node);
            }
        }
        answer
    }
}
