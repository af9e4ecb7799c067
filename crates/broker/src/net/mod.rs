//! Client connections: the listeners a broker serves (`listener`), the bytes of a
//! connection in the clear or under TLS (`transport`), the SASL gate ahead of the router
//! (`authenticator`), one connection's read-route-answer loop (`connection`), and what a
//! handler knows of the connection a request came on (`context`).

pub mod authenticator;
pub mod connection;
pub mod context;
pub mod listener;
pub mod transport;

pub use context::RequestContext;
pub use listener::Listener;
