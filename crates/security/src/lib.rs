//! Who is on the other end of a connection, decided the way Kafka decides it.
//!
//! - [`tls`]: a rustls server configuration from Kafka's `ssl.*` settings (PEM key stores
//!   and trust stores), rebuilt when its files change.
//! - [`sasl`]: the SASL mechanisms a broker offers (PLAIN today), each a plain state
//!   machine fed the client's tokens.
//! - [`jaas`]: the JAAS entries (`listener.name.NAME.MECHANISM.sasl.jaas.config`) that
//!   carry PLAIN's users.
//! - [`principal`] and [`principal_mapping`]: the `User:name` a connection acts as, from
//!   its SASL user or its certificate's subject through `ssl.principal.mapping.rules`.
//!
//! - [`authorizer`]: ACLs, DescribeAcls/DeleteAcls filters and StandardAuthorizer's
//!   decision over them, a pure function (the broker asks it in `authorization.rs`).
//!
//! Nothing here touches sockets: the broker's connection code feeds these and acts on
//! their answers.

pub mod authorizer;
pub mod distinguished_name;
pub mod jaas;
pub mod principal;
pub mod principal_mapping;
pub mod sasl;
pub mod security_protocol;
pub mod tls;

pub use principal::KafkaPrincipal;
pub use security_protocol::SecurityProtocol;
