//! Where the ACLs live and how they change (CreateAcls, DeleteAcls): in a cluster the
//! metadata log (`CreateAcl` / `DeleteAcl` records, so every broker enforces the same
//! set); on a single node `acls.json` in the data directory (`local_state.rs`).

use strand_metadata::{ControllerCommand, ControllerReply, ItemResult, MetadataImage};
use strand_security::authorizer::{AclBinding, AclFilter, Acls};

use crate::broker::{ApiError, Broker};
use crate::cluster::unexpected_reply;
use crate::local_state::{ImageState, Snapshot};

/// The single node's file of ACLs.
pub const ACLS_FILE: &str = "acls.json";

impl ImageState for Acls {
    fn of(image: &MetadataImage) -> &Acls {
        &image.acls
    }

    fn of_mut(image: &mut MetadataImage) -> &mut Acls {
        &mut image.acls
    }
}

impl Broker {
    pub fn acls(&self) -> Snapshot<Acls> {
        self.snapshot(&self.local_acls)
    }

    /// CreateAcls of ACLs the broker has checked: one result per ACL.
    pub async fn create_acls(&self, acls: Vec<AclBinding>) -> Result<Vec<ItemResult>, ApiError> {
        let command = ControllerCommand::CreateAcls { acls };
        match self.decide_metadata(&self.local_acls, command).await? {
            ControllerReply::Results(results) => Ok(results),
            other => Err(unexpected_reply(other)),
        }
    }

    /// DeleteAcls: per filter, the ACLs it matched, all removed.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, ApiError> {
        let command = ControllerCommand::DeleteAcls { filters };
        match self.decide_metadata(&self.local_acls, command).await? {
            ControllerReply::DeletedAcls(Ok(matched)) => Ok(matched),
            ControllerReply::DeletedAcls(Err(refused)) => Err(ApiError {
                code: refused.code,
                message: refused.message,
            }),
            other => Err(unexpected_reply(other)),
        }
    }
}
