//! Cluster metadata, without I/O: the records of the metadata log (`records`), the image
//! every node replays them into (`image`), replica placement (`placement`) and the
//! controller's decisions (`controller`): `decide(image, command)` returns a reply and the
//! records that carry it out. The active controller decides once (`proposer`) and the Raft
//! crate stores the versioned records (`entry`); every node replays them, so all images
//! agree and a change to `decide` never rewrites history.

pub mod client_quotas;
pub mod controller;
pub mod eligible_leaders;
pub mod entry;
pub mod features;
pub mod image;
pub mod placement;
pub mod proposer;
pub mod reassignment;
pub mod records;

pub use controller::{
    apply, by_topic, decide, election_not_needed, unknown_partition, ControllerCommand,
    ControllerReply, Election, ItemResult, NewTopic, Reassignment, TopicElections,
};
pub use entry::{
    replay_entry, DecisionId, MetadataEntry, ReplayState, Replayed, UnknownRecordsVersion,
    RECORDS_VERSION,
};
pub use image::{
    BrokerEndpoint, BrokerInfo, MetadataImage, PartitionState, ScramCredentialRecord, TopicImage,
};
pub use proposer::{DecisionTooLarge, Proposer};
pub use records::MetadataRecord;

/// A broker's (and controller's) node id, as Kafka's `node.id`.
pub type BrokerId = i32;

/// Kafka's "no leader" marker in metadata.
pub const NO_LEADER: BrokerId = -1;

/// Error codes the controller answers with (Kafka's numbers and names).
pub mod error_code {
    pub const NONE: i16 = 0;
    pub const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
    pub const NOT_LEADER_OR_FOLLOWER: i16 = 6;
    pub const STALE_BROKER_EPOCH: i16 = 77;
    pub const TOPIC_ALREADY_EXISTS: i16 = 36;
    pub const INVALID_PARTITIONS: i16 = 37;
    pub const INVALID_REPLICATION_FACTOR: i16 = 38;
    pub const INVALID_REPLICA_ASSIGNMENT: i16 = 39;
    pub const INVALID_TOPIC_EXCEPTION: i16 = 17;
    pub const INVALID_REQUEST: i16 = 42;
    pub const FENCED_LEADER_EPOCH: i16 = 74;
    pub const INVALID_UPDATE_VERSION: i16 = 95;
    pub const INELIGIBLE_REPLICA: i16 = 107;
    pub const BROKER_ID_NOT_REGISTERED: i16 = 102;
    pub const UNKNOWN_TOPIC_ID: i16 = 100;
    pub const PREFERRED_LEADER_NOT_AVAILABLE: i16 = 80;
    pub const ELIGIBLE_LEADERS_NOT_AVAILABLE: i16 = 83;
    pub const ELECTION_NOT_NEEDED: i16 = 84;
    pub const NO_REASSIGNMENT_IN_PROGRESS: i16 = 85;
    pub const RESOURCE_NOT_FOUND: i16 = 91;
    pub const UNSUPPORTED_VERSION: i16 = 35;
    pub const POLICY_VIOLATION: i16 = 44;
}
