//! The one place requests are authorized: every API handler asks
//! [`Broker::authorization`] for its request's view (the principal and host from the
//! connection's context, the ACLs as they are now) and asks it the questions Kafka's
//! KafkaApis asks for that API, with Kafka's operations and resources. With ACLs off
//! (no authorizer.class.name) every answer is yes and the authorized-operations fields
//! list everything a resource type supports, as Kafka's do without an authorizer.

pub use strand_security::authorizer::{AclOperation, ResourceType};
use strand_security::authorizer::{Acls, Authorizer, CLUSTER_NAME};
use strand_security::KafkaPrincipal;

use crate::broker::Broker;
use crate::local_state::Snapshot;
use crate::net::RequestContext;

/// "Not requested", in every authorized-operations field.
pub const OMITTED: i32 = i32::MIN;

/// One request's questions to the authorizer.
pub struct Authorization<'a> {
    /// None: ACLs are off.
    checked: Option<(&'a Authorizer, Snapshot<Acls>)>,
    principal: &'a KafkaPrincipal,
    host: &'a str,
}

impl Broker {
    /// The authorizer's view for a request that came on `context`.
    pub fn authorization<'a>(&'a self, context: &'a RequestContext) -> Authorization<'a> {
        Authorization {
            checked: self.authorizer.as_ref().map(|a| (a, self.acls())),
            principal: &context.principal,
            host: &context.host,
        }
    }
}

impl Authorization<'_> {
    /// Whether ACLs are on.
    pub fn enabled(&self) -> bool {
        self.checked.is_some()
    }

    /// May the principal do `operation` on the resource?
    pub fn allows(&self, operation: AclOperation, resource_type: ResourceType, name: &str) -> bool {
        match &self.checked {
            None => true,
            Some((authorizer, acls)) => authorizer.authorize(
                acls,
                self.principal,
                self.host,
                operation,
                resource_type,
                name,
            ),
        }
    }

    pub fn allows_topic(&self, operation: AclOperation, topic: &str) -> bool {
        self.allows(operation, ResourceType::Topic, topic)
    }

    pub fn allows_group(&self, operation: AclOperation, group: &str) -> bool {
        self.allows(operation, ResourceType::Group, group)
    }

    pub fn allows_transactional_id(&self, operation: AclOperation, id: &str) -> bool {
        self.allows(operation, ResourceType::TransactionalId, id)
    }

    pub fn allows_cluster(&self, operation: AclOperation) -> bool {
        self.allows(operation, ResourceType::Cluster, CLUSTER_NAME)
    }

    /// Kafka's checks of a transaction's offsets (AddOffsetsToTxn, TxnOffsetCommit): WRITE
    /// on the transactional id, then READ on the group; the refusal's code, if any.
    pub fn refuses_transactional_offsets(
        &self,
        transactional_id: &str,
        group: &str,
    ) -> Option<i16> {
        if !self.allows_transactional_id(AclOperation::Write, transactional_id) {
            Some(crate::error_code::TRANSACTIONAL_ID_AUTHORIZATION_FAILED)
        } else if !self.allows_group(AclOperation::Read, group) {
            Some(crate::error_code::GROUP_AUTHORIZATION_FAILED)
        } else {
            None
        }
    }

    /// May the principal do `operation` on some resource of the type (Kafka's
    /// authorizeByResourceType)?
    pub fn allows_some(&self, operation: AclOperation, resource_type: ResourceType) -> bool {
        match &self.checked {
            None => true,
            Some((authorizer, acls)) => authorizer.authorize_by_resource_type(
                acls,
                self.principal,
                self.host,
                operation,
                resource_type,
            ),
        }
    }

    /// KIP-430's bitfield of what the principal may do to the resource, or [`OMITTED`]
    /// when the request did not ask.
    pub fn operations(&self, requested: bool, resource_type: ResourceType, name: &str) -> i32 {
        if !requested {
            return OMITTED;
        }
        match &self.checked {
            None => ResourceType::operation_bits(resource_type.operations()),
            Some((authorizer, acls)) => authorizer.authorized_operations(
                acls,
                self.principal,
                self.host,
                resource_type,
                name,
            ),
        }
    }
}
