//! The Strand broker: a Kafka-protocol server over the partition log.
//!
//! Request path: `server` accepts (bounded connections) -> `connection` reads a frame
//! (size capped, memory reserved from a pool) -> `router` checks the API and version ->
//! `api::<name>` decodes, acts on `Broker` / `Partition`, encodes the response.
//! Requests on one connection are handled one at a time, so responses keep their order.

pub mod acls;
pub mod api;
pub mod authorization;
pub mod broker;
pub mod broker_configs;
pub mod cluster;
pub mod cold_reads;
pub mod config;
pub mod console_access;
pub mod dynamic_broker_configs;
pub use strand_types::error_code;
pub mod features;
pub mod fetch_session;
pub mod group;
pub mod group_configs;
pub mod http;
pub mod local_json;
pub mod local_state;
pub mod log_dirs;
pub mod log_mover;
pub mod metrics;
pub mod net;
pub mod partition;
pub mod producer_ids;
pub mod quotas;
pub mod replication_throttle;
pub mod request_quota;
pub mod router;
pub mod scram_credentials;
pub mod server;
pub mod shard_log;
pub mod share;
pub mod tiered;
pub mod topic_config;
pub mod topics;
pub mod txn;

pub use broker::{ApiError, Broker};
pub use config::{BrokerConfig, ConsoleMode, FlushMode};
pub use server::{bind, serve, serve_listeners, serve_on, ServerHandle};
