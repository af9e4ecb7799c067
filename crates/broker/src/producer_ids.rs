//! Allocates producer ids that never repeat, even across restarts: ids are handed out from
//! blocks, and a block's end is made durable (`producer-id-block`, replaced atomically)
//! before any id in it is used. A restart resumes after the last persisted block, so ids
//! of a block cut short by a crash are skipped, never reused. (Kafka's ProducerIdManager
//! does the same with blocks from the controller.)
//!
//! In a cluster the blocks come from the controller instead (`AllocateProducerIds` in the
//! metadata log), so no two brokers ever hand out the same id: `take_from_block` serves
//! from the current block and `install_block` adds the next one.
//!
//! Thread-safe: one mutex; a block write happens once per `PRODUCER_ID_BLOCK_SIZE` ids.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

pub const PRODUCER_ID_BLOCK_FILE: &str = "producer-id-block";
pub const PRODUCER_ID_BLOCK_SIZE: i64 = 1000;

#[derive(Debug)]
pub struct ProducerIdManager {
    path: PathBuf,
    state: Mutex<(i64, i64)>, // (next id, end of the persisted block)
}

impl ProducerIdManager {
    pub fn open(data_dir: &Path) -> anyhow::Result<ProducerIdManager> {
        let path = data_dir.join(PRODUCER_ID_BLOCK_FILE);
        let block_end = match std::fs::read_to_string(&path) {
            Ok(text) => text
                .trim()
                .parse::<i64>()
                .map_err(|_| anyhow::anyhow!("corrupt {}: {text:?}", path.display()))?,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => 0,
            Err(error) => return Err(error.into()),
        };
        anyhow::ensure!(
            block_end >= 0,
            "corrupt {}: negative block end",
            path.display()
        );
        Ok(ProducerIdManager {
            path,
            state: Mutex::new((block_end, block_end)),
        })
    }

    /// Cluster: whether the current block has an id left.
    pub fn has_ids(&self) -> bool {
        let state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.0 < state.1
    }

    /// Cluster: the next id of the controller's block, if any is left.
    pub fn take_from_block(&self) -> Option<i64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (next, end) = *state;
        (next < end).then(|| {
            state.0 = next + 1;
            next
        })
    }

    /// Cluster: replaces the exhausted block with `first..first + count` from the
    /// controller.
    pub fn install_block(&self, first: i64, count: i64) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if state.0 >= state.1 {
            *state = (first, first + count);
        }
    }

    /// The next producer id (single node).
    pub fn next_id(&self) -> anyhow::Result<i64> {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let (next, block_end) = *state;
        if next >= block_end {
            let new_end = next + PRODUCER_ID_BLOCK_SIZE;
            strand_log::checkpoint::write_atomically(
                &self.path,
                format!("{new_end}\n").as_bytes(),
            )?;
            state.1 = new_end;
        }
        state.0 = next + 1;
        Ok(next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_never_repeat_across_restarts() {
        let dir = tempfile::tempdir().unwrap();
        let manager = ProducerIdManager::open(dir.path()).unwrap();
        let first: Vec<i64> = (0..5).map(|_| manager.next_id().unwrap()).collect();
        assert_eq!(first, vec![0, 1, 2, 3, 4]);
        drop(manager);
        let manager = ProducerIdManager::open(dir.path()).unwrap();
        let after = manager.next_id().unwrap();
        assert_eq!(
            after, PRODUCER_ID_BLOCK_SIZE,
            "the rest of the old block is skipped"
        );
        for _ in 0..PRODUCER_ID_BLOCK_SIZE {
            manager.next_id().unwrap();
        }
        drop(manager);
        let manager = ProducerIdManager::open(dir.path()).unwrap();
        assert_eq!(manager.next_id().unwrap(), 3 * PRODUCER_ID_BLOCK_SIZE);
    }
}
