//! A single node's small settings files (dynamic broker configs, group configs): JSON,
//! missing means the default, replaced atomically and written off the async runtime, since
//! the write syncs and a slow disk must hold up only the request that changed a setting.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::Serialize;

use crate::broker::ApiError;
use crate::error_code;

/// The file at `path`, or `T::default()` if there is none.
pub fn load<T: DeserializeOwned + Default>(path: &Path) -> anyhow::Result<T> {
    match std::fs::read(path) {
        Ok(bytes) => Ok(serde_json::from_slice(&bytes)?),
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => Ok(T::default()),
        Err(error) => Err(error.into()),
    }
}

/// Replaces the file at `path` with `value`, on a blocking thread. `what` names the file
/// in the error a client gets if the write fails.
pub async fn store<T: Serialize>(path: PathBuf, value: &T, what: &str) -> Result<(), ApiError> {
    let failed = |error: std::io::Error| {
        ApiError::new(
            error_code::UNKNOWN_SERVER_ERROR,
            format!("storing the {what} failed: {error}"),
        )
    };
    let bytes = serde_json::to_vec_pretty(value).map_err(|e| failed(std::io::Error::other(e)))?;
    tokio::task::spawn_blocking(move || strand_log::checkpoint::write_atomically(&path, &bytes))
        .await
        .map_err(std::io::Error::other)
        .and_then(|written| written)
        .map_err(failed)
}
