//! Creates the directories and first segment files of new partitions in the background,
//! after the request that created them has been answered. Kafka answers CreateTopics once
//! the metadata is durable and its brokers create the logs afterwards; doing the same
//! turns a 10,000-partition topic from 40,000 file-system calls inside the request into
//! one write of the topic metadata. Until its turn comes a log is empty and lives in
//! memory (see `Log::create_deferred`); a write to it creates its files first, so the
//! background thread only saves the first write that work.
//!
//! One thread, fed through a channel; it ends when the broker (the sender) is dropped.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use strand_log::Log;

type Batch = Vec<Arc<Mutex<Log>>>;

#[derive(Debug)]
pub struct LogDirCreator {
    sender: Mutex<mpsc::Sender<Batch>>,
}

impl LogDirCreator {
    pub fn start() -> std::io::Result<LogDirCreator> {
        let (sender, receiver) = mpsc::channel::<Batch>();
        std::thread::Builder::new()
            .name("strand-log-dirs".into())
            .spawn(move || {
                for batch in receiver {
                    materialize(batch);
                }
            })?;
        Ok(LogDirCreator {
            sender: Mutex::new(sender),
        })
    }

    /// Queues new logs whose files do not exist yet.
    pub fn create_later(&self, logs: Batch) {
        let logs: Batch = logs
            .into_iter()
            .filter(|log| !lock(log).is_on_disk())
            .collect();
        if logs.is_empty() {
            return;
        }
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(mpsc::SendError(logs)) = sender.send(logs) {
            // The thread is gone (it never panics, but be safe): create them here.
            materialize(logs);
        }
    }
}

fn materialize(logs: Batch) {
    for log in logs {
        let mut log = lock(&log);
        // Deleted before its turn: nothing to create. A failure marks the log offline
        // and is logged there; its writes are refused, as after any storage failure.
        if !log.is_offline() {
            let _ = log.materialize();
        }
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}
