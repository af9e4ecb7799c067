//! Where the ACLs live and how they change (CreateAcls, DeleteAcls): in a cluster the
//! metadata log (`CreateAcl` / `DeleteAcl` records, so every broker enforces the same
//! set); on a single node `acls.json` in the data directory (`local_state.rs`).

use strand_metadata::{ControllerCommand, ControllerReply, ItemResult, MetadataImage};
use strand_security::authorizer::{AclBinding, AclFilter, Acls};

use crate::broker::{ApiError, Broker};
use crate::error_code;
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
        let created = acls.clone();
        let applied =
            move |image: &MetadataImage| created.iter().all(|acl| image.acls.contains(acl));
        match self
            .decide_metadata(
                &self.local_acls,
                ControllerCommand::CreateAcls { acls },
                applied,
            )
            .await?
        {
            ControllerReply::Results(results) => Ok(results),
            other => Err(unexpected(other)),
        }
    }

    /// DeleteAcls: per filter, the ACLs it matched, all removed.
    pub async fn delete_acls(
        &self,
        filters: Vec<AclFilter>,
    ) -> Result<Vec<Vec<AclBinding>>, ApiError> {
        let gone = filters.clone();
        // Done once none of what the filters matched is left (a concurrent CreateAcls of
        // a matching ACL after the decision would keep this waiting: the deadline ends it).
        let applied = move |image: &MetadataImage| {
            gone.iter().all(|f| image.acls.matching(f).next().is_none())
        };
        match self
            .decide_metadata(
                &self.local_acls,
                ControllerCommand::DeleteAcls { filters },
                applied,
            )
            .await?
        {
            ControllerReply::DeletedAcls(matched) => Ok(matched),
            other => Err(unexpected(other)),
        }
    }
}

pub(crate) fn unexpected(reply: ControllerReply) -> ApiError {
    ApiError::new(
        error_code::UNKNOWN_SERVER_ERROR,
        format!("unexpected controller answer {reply:?}"),
    )
}
