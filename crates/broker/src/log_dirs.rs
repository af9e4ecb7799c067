//! Creates the directories and first segment files of new partitions in the background,
//! after the request that created them has been answered. Kafka answers CreateTopics once
//! the metadata is durable and its brokers create the logs afterwards; doing the same
//! turns a 10,000-partition topic from 40,000 file-system calls inside the request into
//! one write of the topic metadata. Until its turn comes a log is empty and lives in
//! memory (see `Log::create_deferred`); a write to it creates its files first, so the
//! background thread only saves the first write that work.
//!
//! One thread, fed through a channel of at most `QUEUED_BATCHES_MAX` batches (one per
//! topic creation or reopen); when it is full the creating request makes its files
//! itself, as before there was a thread. It ends when the broker (the sender) is dropped.

use std::sync::mpsc;
use std::sync::{Arc, Mutex};

use strand_log::Log;

type Batch = Vec<Arc<Mutex<Log>>>;

/// Batches of new logs waiting for the thread.
pub const QUEUED_BATCHES_MAX: usize = 1024;

#[derive(Debug)]
pub struct LogDirCreator {
    sender: Mutex<mpsc::SyncSender<Batch>>,
}

impl LogDirCreator {
    pub fn start() -> std::io::Result<LogDirCreator> {
        let (creator, queue) = LogDirCreator::with_queue(QUEUED_BATCHES_MAX);
        std::thread::Builder::new()
            .name("strand-log-dirs".into())
            .spawn(move || {
                for batch in queue {
                    materialize(batch);
                }
            })?;
        Ok(creator)
    }

    /// A creator and the queue its thread works through.
    fn with_queue(batches_max: usize) -> (LogDirCreator, mpsc::Receiver<Batch>) {
        let (sender, queue) = mpsc::sync_channel::<Batch>(batches_max);
        let creator = LogDirCreator {
            sender: Mutex::new(sender),
        };
        (creator, queue)
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
        match sender.try_send(logs) {
            Ok(()) => {}
            // A full queue (or, never expected, a gone thread): create them here.
            Err(mpsc::TrySendError::Full(logs) | mpsc::TrySendError::Disconnected(logs)) => {
                drop(sender);
                materialize(logs);
            }
        }
    }
}

fn materialize(logs: Batch) {
    for log in logs {
        let mut log = lock(&log);
        // Deleted before its turn: nothing to create. A failure is retried by the log's
        // first write.
        if !log.is_offline() {
            let _ = log.materialize();
        }
    }
}

fn lock(log: &Mutex<Log>) -> std::sync::MutexGuard<'_, Log> {
    log.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use strand_log::{LogManager, LogManagerOptions, TopicPartition};

    /// The queue is bounded: with the queue full (its thread busy), a creation makes its
    /// files at once instead of queueing more.
    #[test]
    fn a_full_queue_creates_the_files_in_the_caller() {
        let dir = tempfile::tempdir().unwrap();
        let (mut logs, _) = LogManager::open(&[dir.path()], LogManagerOptions::default()).unwrap();
        let mut deferred = |name: &str| -> Arc<Mutex<Log>> {
            logs.get_or_create_deferred(&TopicPartition::new(name, 0), None)
                .unwrap()
        };
        let (creator, queue) = LogDirCreator::with_queue(1);
        let queued = deferred("queued");
        creator.create_later(vec![queued.clone()]); // fills the queue of one
        let overflow = deferred("overflow");
        creator.create_later(vec![overflow.clone()]);
        assert!(
            lock(&overflow).is_on_disk(),
            "made by the caller, not queued"
        );
        assert!(!lock(&queued).is_on_disk(), "still waiting in the queue");
        materialize(queue.try_recv().expect("one batch queued"));
        assert!(lock(&queued).is_on_disk());
        assert!(queue.try_recv().is_err(), "nothing else was queued");
    }
}
