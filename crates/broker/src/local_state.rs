//! State a cluster keeps in its metadata log and a single node in a JSON file of its data
//! directory (ACLs, SCRAM credentials, client quotas), read and changed the same way in
//! both: reads see a snapshot (the cluster's image, or the node's current copy), changes
//! are the controller's decision (`strand_metadata::decide`). In a cluster a change goes
//! through the quorum and is answered once this broker's image shows its effect; on a
//! single node it is decided against a local image holding the file's state, and the
//! records it yields are replayed, stored, then made current.

use std::path::{Path, PathBuf};
use std::sync::{Arc, RwLock};

use serde::de::DeserializeOwned;
use serde::Serialize;
use strand_metadata::{ControllerCommand, ControllerReply, MetadataImage, MetadataRecord};

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::local_json;

/// A piece of the metadata image a single node keeps in a file of its own.
pub trait ImageState:
    Clone + Default + PartialEq + Serialize + DeserializeOwned + Send + Sync + 'static
{
    fn of(image: &MetadataImage) -> &Self;
    fn of_mut(image: &mut MetadataImage) -> &mut Self;
}

/// A single node's copy of one piece of metadata state, with its file.
#[derive(Debug)]
pub struct LocalState<T> {
    current: RwLock<Arc<T>>,
    /// One change at a time writes the file.
    writer: tokio::sync::Mutex<()>,
    path: PathBuf,
    /// What the file holds, for error messages.
    what: &'static str,
}

/// The state as this broker knows it now: from the cluster's image, or the single node's
/// copy. Cheap to take (an `Arc`), and one request's reads see one version.
pub enum Snapshot<T: ImageState> {
    Image(Arc<MetadataImage>),
    Local(Arc<T>),
}

impl<T: ImageState> std::ops::Deref for Snapshot<T> {
    type Target = T;

    fn deref(&self) -> &T {
        match self {
            Snapshot::Image(image) => T::of(image),
            Snapshot::Local(state) => state,
        }
    }
}

impl<T: ImageState> LocalState<T> {
    pub fn load(data_dir: &Path, file: &str, what: &'static str) -> anyhow::Result<LocalState<T>> {
        let path = data_dir.join(file);
        Ok(LocalState {
            current: RwLock::new(Arc::new(local_json::load(&path)?)),
            writer: tokio::sync::Mutex::new(()),
            path,
            what,
        })
    }

    fn current(&self) -> Arc<T> {
        self.current
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// An image holding only this state.
    fn image(&self) -> MetadataImage {
        image_of((*self.current()).clone())
    }

    /// Decides `command` against an image holding only this state, stores what changed
    /// and makes it current.
    async fn decide(&self, command: &ControllerCommand) -> Result<ControllerReply, ApiError> {
        let _writer = self.writer.lock().await;
        let mut image = self.image();
        let (reply, records) = strand_metadata::decide(&image, command);
        if records.is_empty() {
            return Ok(reply);
        }
        for record in &records {
            image.replay(record);
        }
        let changed = std::mem::take(T::of_mut(&mut image));
        local_json::store(self.path.clone(), &changed, self.what).await?;
        *self.current.write().unwrap_or_else(|p| p.into_inner()) = Arc::new(changed);
        Ok(reply)
    }
}

/// An image holding only `state`.
fn image_of<T: ImageState>(state: T) -> MetadataImage {
    let mut image = MetadataImage::default();
    *T::of_mut(&mut image) = state;
    image
}

/// Whether `image` already shows what `records` do to state T (replaying them onto its
/// state changes nothing).
fn shows<T: ImageState>(image: &MetadataImage, records: &[MetadataRecord]) -> bool {
    let mut after = image_of(T::of(image).clone());
    for record in records {
        after.replay(record);
    }
    T::of(&after) == T::of(image)
}

/// Whether a decision refused everything, so nothing is to be seen in the image.
fn refused_everything(reply: &ControllerReply) -> bool {
    match reply {
        ControllerReply::Results(results) => results.iter().all(|r| !r.is_ok()),
        ControllerReply::DeletedAcls(result) => result.is_err(),
        _ => false,
    }
}

impl Broker {
    /// The state now: the cluster's image, or the single node's `local` copy.
    pub(crate) fn snapshot<T: ImageState>(&self, local: &LocalState<T>) -> Snapshot<T> {
        match self.cluster() {
            Some(cluster) => Snapshot::Image(cluster.image()),
            None => Snapshot::Local(local.current()),
        }
    }

    /// A controller decision on state a single node keeps in `local`: in a cluster through
    /// the quorum, answered once this broker's image shows what the decision does (as far
    /// as this broker foresees it: the same decision on its own image), unless it refused
    /// everything.
    pub(crate) async fn decide_metadata<T: ImageState>(
        &self,
        local: &LocalState<T>,
        command: ControllerCommand,
    ) -> Result<ControllerReply, ApiError> {
        let Some(cluster) = self.cluster() else {
            return local.decide(&command).await;
        };
        let (_, expected) = strand_metadata::decide(&cluster.image(), &command);
        let reply = cluster.write(command).await?;
        if refused_everything(&reply) {
            return Ok(reply);
        }
        if !cluster
            .wait_for_image(|image| shows::<T>(image, &expected))
            .await
        {
            return Err(ApiError::new(
                error_code::REQUEST_TIMED_OUT,
                "The change was stored but this broker does not apply it yet",
            ));
        }
        Ok(reply)
    }

    /// A decision only checked, never stored (validate_only): against the cluster's image,
    /// or the single node's state.
    pub(crate) fn decide_without_storing<T: ImageState>(
        &self,
        local: &LocalState<T>,
        command: &ControllerCommand,
    ) -> ControllerReply {
        match self.cluster() {
            Some(cluster) => strand_metadata::decide(&cluster.image(), command).0,
            None => strand_metadata::decide(&local.image(), command).0,
        }
    }
}
