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
}

impl RequestContext {
    pub fn listener_name(&self) -> &str {
        &self.listener.spec.name
    }

    /// A context for a plaintext listener of this name (tests, and requests the broker
    /// makes of itself).
    pub fn plaintext(name: &str, peer: SocketAddr) -> RequestContext {
        RequestContext {
            listener: Arc::new(Listener::plaintext(name, peer)),
            peer,
            principal: KafkaPrincipal::anonymous(),
        }
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
