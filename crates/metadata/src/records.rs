//! The records of the metadata log: each one is a fact the image replays. They are
//! produced only by `controller::decide`, so they never need validating on replay.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use strand_security::authorizer::AclBinding;
use uuid::Uuid;

use crate::client_quotas::{QuotaEntity, QuotaValue};
use crate::image::{BrokerInfo, PartitionState, ScramCredentialRecord};
use crate::BrokerId;

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum MetadataRecord {
    /// A broker (re)registered; a new incarnation starts fenced.
    RegisterBroker(BrokerInfo),
    /// The broker may not lead or be in an ISR (missed heartbeats, or a new incarnation).
    FenceBroker {
        id: BrokerId,
    },
    /// The broker heartbeats again with its current incarnation.
    UnfenceBroker {
        id: BrokerId,
    },
    /// The broker asked to stop; it leads nothing from now on.
    ControlledShutdown {
        id: BrokerId,
    },
    /// The broker's registration is forgotten (UnregisterBroker); records version 3.
    UnregisterBroker {
        id: BrokerId,
    },
    CreateTopic {
        name: String,
        id: Uuid,
        configs: BTreeMap<String, String>,
        partitions: Vec<PartitionState>,
    },
    /// New partitions appended to a topic (CreatePartitions).
    AddPartitions {
        name: String,
        partitions: Vec<PartitionState>,
    },
    /// A partition's leader, epochs or ISR changed.
    ChangePartition {
        topic: String,
        partition: i32,
        state: PartitionState,
    },
    SetTopicConfigs {
        name: String,
        configs: BTreeMap<String, String>,
    },
    DeleteTopic {
        name: String,
    },
    /// A group's configs (KIP-848 group configs), replacing the set (empty: none).
    SetGroupConfigs {
        group: String,
        configs: BTreeMap<String, String>,
    },
    /// A broker's dynamic configs (None: the cluster-wide default), replacing the set.
    SetBrokerConfigs {
        broker: Option<BrokerId>,
        configs: BTreeMap<String, String>,
    },
    /// A user's SCRAM credential for one mechanism set, or removed (None); records
    /// version 4.
    SetUserScramCredential {
        user: String,
        mechanism: String,
        credential: Option<ScramCredentialRecord>,
    },
    /// An ACL added (CreateAcls); records version 5.
    CreateAcl(AclBinding),
    /// An ACL removed (DeleteAcls); records version 5.
    DeleteAcl(AclBinding),
    /// One client quota of an entity set, or removed (None); records version 6.
    SetClientQuota {
        entity: QuotaEntity,
        key: String,
        value: Option<QuotaValue>,
    },
    /// Finalized feature levels UpdateFeatures set (the others keep theirs).
    SetFeatures {
        levels: BTreeMap<String, i16>,
    },
    /// The cluster's id (the first one set stays).
    ClusterId {
        id: String,
    },
    /// Producer ids below `next` are handed out.
    ProducerIds {
        next: i64,
    },
}
