//! Runs the moves of logs between log directories (AlterReplicaLogDirs) on a thread of
//! its own, one at a time, as Kafka's ReplicaAlterLogDirsThread does with one thread per
//! directory by default. The request is answered at once; clients follow the move with
//! DescribeLogDirs (the future replica, then the replica in its new directory).
//!
//! The queue holds at most one move per hosted partition (the log manager refuses a
//! second move of a partition to where it is already going), so it is bounded by the
//! partitions. A queued move holds the broker weakly: dropping the broker ends the thread.

use std::sync::mpsc;
use std::sync::{Mutex, Weak};

use strand_log::log_manager::MoveJob;
use strand_log::log_move::MoveOutcome;

use crate::broker::Broker;

/// replica.alter.log.dirs.io.max.bytes.per.second: the byte rate of a move's copying
/// (Kafka's default, Long.MAX_VALUE, is no limit).
pub const MOVE_RATE_CONFIG: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

struct MoveTask {
    job: MoveJob,
    broker: Weak<Broker>,
}

#[derive(Debug)]
pub struct LogMover {
    sender: Mutex<mpsc::Sender<MoveTask>>,
}

impl std::fmt::Debug for MoveTask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoveTask").field("job", &self.job).finish()
    }
}

impl LogMover {
    pub fn start() -> std::io::Result<LogMover> {
        let (sender, queue) = mpsc::channel::<MoveTask>();
        std::thread::Builder::new()
            .name("strand-log-mover".into())
            .spawn(move || {
                for task in queue {
                    run(task);
                }
            })?;
        Ok(LogMover {
            sender: Mutex::new(sender),
        })
    }

    pub fn submit(&self, job: MoveJob, broker: Weak<Broker>) {
        let sender = self.sender.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(mpsc::SendError(task)) = sender.send(MoveTask { job, broker }) {
            if let Some(broker) = task.broker.upgrade() {
                broker.finish_log_move(&task.job, &Ok(MoveOutcome::Cancelled));
            }
        }
    }
}

fn run(task: MoveTask) {
    let Some(broker) = task.broker.upgrade() else {
        return;
    };
    let rate = broker
        .dynamic
        .get(MOVE_RATE_CONFIG)
        .and_then(|value| value.trim().parse::<i64>().ok())
        .filter(|rate| *rate > 0 && *rate < i64::MAX)
        .map(|rate| rate as u64);
    let log_move = &task.job.log_move;
    tracing::info!(partition = %log_move.tp, to = %log_move.destination.display(), ?rate, "moving a log to another log directory");
    let outcome = task.job.run(rate);
    match &outcome {
        Ok(MoveOutcome::Moved) => {
            tracing::info!(partition = %log_move.tp, to = %log_move.destination.display(), "log moved")
        }
        Ok(MoveOutcome::Cancelled) => {
            tracing::info!(partition = %log_move.tp, "log move cancelled")
        }
        Err(error) => {
            tracing::error!(partition = %log_move.tp, to = %log_move.destination.display(), %error, "log move failed; the log stays where it was")
        }
    }
    broker.finish_log_move(&task.job, &outcome);
}
