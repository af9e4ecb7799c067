//! Where the ACLs live and how they change (CreateAcls, DeleteAcls): in a cluster the
//! metadata log (`CreateAcl` / `DeleteAcl` records, so every broker enforces the same
//! set); on a single node `acls.json` in the data directory, changed by the same
//! controller decision applied to a local image, so both answer alike.

use std::path::Path;
use std::sync::{Arc, RwLock};

use strand_metadata::{ControllerCommand, ControllerReply, ItemResult, MetadataImage};
use strand_security::authorizer::{AclBinding, AclFilter, Acls};

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::local_json;

/// The single node's file of ACLs.
pub const ACLS_FILE: &str = "acls.json";

/// A single node's ACLs (a cluster's are in its image).
#[derive(Debug)]
pub struct LocalAcls {
    acls: RwLock<Arc<Acls>>,
    /// One change at a time writes the file.
    writer: tokio::sync::Mutex<()>,
}

impl LocalAcls {
    pub fn load(data_dir: &Path) -> anyhow::Result<LocalAcls> {
        let acls: Acls = local_json::load(&data_dir.join(ACLS_FILE))?;
        Ok(LocalAcls {
            acls: RwLock::new(Arc::new(acls)),
            writer: tokio::sync::Mutex::new(()),
        })
    }

    fn current(&self) -> Arc<Acls> {
        self.acls.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

/// The ACLs as this broker knows them now: a cluster's image, or the single node's set.
pub enum AclSnapshot {
    Image(Arc<MetadataImage>),
    Local(Arc<Acls>),
}

impl std::ops::Deref for AclSnapshot {
    type Target = Acls;

    fn deref(&self) -> &Acls {
        match self {
            AclSnapshot::Image(image) => &image.acls,
            AclSnapshot::Local(acls) => acls,
        }
    }
}

impl Broker {
    pub fn acls(&self) -> AclSnapshot {
        match self.cluster() {
            Some(cluster) => AclSnapshot::Image(cluster.image()),
            None => AclSnapshot::Local(self.local_acls.current()),
        }
    }

    /// CreateAcls of ACLs the broker has checked: one result per ACL.
    pub async fn create_acls(&self, acls: Vec<AclBinding>) -> Result<Vec<ItemResult>, ApiError> {
        let created = acls.clone();
        let applied = move |image_acls: &Acls| created.iter().all(|acl| image_acls.contains(acl));
        match self
            .decide_acls(ControllerCommand::CreateAcls { acls }, applied)
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
        let applied =
            move |image_acls: &Acls| gone.iter().all(|f| image_acls.matching(f).next().is_none());
        match self
            .decide_acls(ControllerCommand::DeleteAcls { filters }, applied)
            .await?
        {
            ControllerReply::DeletedAcls(matched) => Ok(matched),
            other => Err(unexpected(other)),
        }
    }

    /// The controller's decision on an ACL change: in a cluster through the quorum
    /// (answered once this broker's image enforces it), on a single node applied to its
    /// file.
    async fn decide_acls(
        &self,
        command: ControllerCommand,
        applied: impl Fn(&Acls) -> bool,
    ) -> Result<ControllerReply, ApiError> {
        if let Some(cluster) = self.cluster() {
            let reply = cluster.write(command).await?;
            if !cluster.wait_for_image(|image| applied(&image.acls)).await {
                return Err(ApiError::new(
                    error_code::REQUEST_TIMED_OUT,
                    "The ACL change was stored but this broker does not enforce it yet",
                ));
            }
            return Ok(reply);
        }
        let _writer = self.local_acls.writer.lock().await;
        let mut image = MetadataImage::default();
        image.acls = (*self.local_acls.current()).clone();
        let (reply, records) = strand_metadata::decide(&image, &command);
        for record in &records {
            image.replay(record);
        }
        if !records.is_empty() {
            let path = self.config.data_dir.join(ACLS_FILE);
            local_json::store(path, &image.acls, "ACLs").await?;
            *self
                .local_acls
                .acls
                .write()
                .unwrap_or_else(|p| p.into_inner()) = Arc::new(image.acls);
        }
        Ok(reply)
    }
}

fn unexpected(reply: ControllerReply) -> ApiError {
    ApiError::new(
        error_code::UNKNOWN_SERVER_ERROR,
        format!("unexpected controller answer {reply:?}"),
    )
}
