//! What every API handler knows of the connection a request came on: the listener (its
//! name decides which addresses Metadata answers with), the peer, and the principal it
//! authenticated as. Authorization and quotas read it here, in one place.

use std::net::SocketAddr;
use std::sync::Arc;

use strand_security::KafkaPrincipal;

use super::listener::Listener;

#[derive(Clone)]
pub struct RequestContext {
    pub listener: Arc<Listener>,
    pub peer: SocketAddr,
    pub principal: KafkaPrincipal,
    /// The peer's address as ACLs name hosts (Kafka's getHostAddress), formatted once.
    pub host: String,
    /// Set by a request whose client went over its quota: the connection is not read from
    /// until then.
    pub throttle: Arc<Throttle>,
    /// This connection among all the broker's (share sessions belong to one).
    pub connection_id: u64,
}

/// Numbers connections as they open.
static NEXT_CONNECTION_ID: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);

/// When a throttled connection may be read from again (Kafka mutes a throttled client's
/// channel for its throttle time).
#[derive(Debug, Default)]
pub struct Throttle {
    until: std::sync::Mutex<Option<std::time::Instant>>,
    /// The longest throttle set since the router last took it: the request being handled
    /// (they are handled one at a time) reports it as its ThrottleTimeMs.
    throttle_ms: std::sync::atomic::AtomicU32,
}

impl Throttle {
    /// Mutes the connection for `ms` from now (the later of two mutes wins).
    pub fn mute_for(&self, ms: u32) {
        if ms == 0 {
            return;
        }
        self.throttle_ms
            .fetch_max(ms, std::sync::atomic::Ordering::Relaxed);
        let until = std::time::Instant::now() + std::time::Duration::from_millis(ms.into());
        let mut current = self.until.lock().unwrap_or_else(|p| p.into_inner());
        if current.is_none_or(|c| c < until) {
            *current = Some(until);
        }
    }

    /// The longest throttle set since the last call (and clears it).
    pub fn take_throttle_ms(&self) -> u32 {
        self.throttle_ms
            .swap(0, std::sync::atomic::Ordering::Relaxed)
    }

    /// The end of the mute, if one is pending (and clears it).
    pub fn take(&self) -> Option<std::time::Instant> {
        self.until.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

impl RequestContext {
    pub fn listener_name(&self) -> &str {
        &self.listener.spec.name
    }

    pub fn new(listener: Arc<Listener>, peer: SocketAddr, principal: KafkaPrincipal) -> Self {
        RequestContext {
            listener,
            peer,
            principal,
            host: peer.ip().to_string(),
            throttle: Arc::default(),
            connection_id: NEXT_CONNECTION_ID.fetch_add(1, std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// A context for a plaintext listener of this name (tests, and requests the broker
    /// makes of itself).
    pub fn plaintext(name: &str, peer: SocketAddr) -> RequestContext {
        RequestContext::new(
            Arc::new(Listener::plaintext(name, peer)),
            peer,
            KafkaPrincipal::anonymous(),
        )
    }
}

impl std::fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestContext")
            .field("listener", &self.listener.spec.name)
            .field("peer", &self.peer)
            .field("principal", &self.principal.to_string())
            .finish()
    }
}
