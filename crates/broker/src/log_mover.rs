//! Runs the moves of logs between log directories (AlterReplicaLogDirs) on a thread of
//! its own, one at a time, as Kafka's ReplicaAlterLogDirsThread does with one thread per
//! directory by default. The request is answered at once; clients follow the move with
//! DescribeLogDirs (the future replica, then the replica in its new directory).
//!
//! The moves wait in the log manager's queue (one per partition at most: a cancelled move
//! leaves it), not here: this thread is only woken, through a channel of one slot, and
//! then takes moves until none is left. A wake-up holds the broker weakly, so dropping
//! the broker ends the thread.

use std::sync::mpsc;
use std::sync::{Mutex, Weak};

use strand_log::log_move::MoveOutcome;

use crate::broker::Broker;

/// replica.alter.log.dirs.io.max.bytes.per.second: the byte rate of a move's copying
/// (Kafka's default, Long.MAX_VALUE, is no limit).
pub const MOVE_RATE_CONFIG: &str = "replica.alter.log.dirs.io.max.bytes.per.second";

#[derive(Debug)]
pub struct LogMover {
    wake: Mutex<mpsc::SyncSender<Weak<Broker>>>,
}

impl LogMover {
    pub fn start() -> std::io::Result<LogMover> {
        let (wake, woken) = mpsc::sync_channel::<Weak<Broker>>(1);
        std::thread::Builder::new()
            .name("strand-log-mover".into())
            .spawn(move || {
                for broker in woken {
                    if let Some(broker) = broker.upgrade() {
                        run_queued(&broker);
                    }
                }
            })?;
        Ok(LogMover {
            wake: Mutex::new(wake),
        })
    }

    /// Makes the thread take the queued moves. A wake-up already pending covers this one
    /// (the thread drains the queue after taking it).
    pub fn wake(&self, broker: Weak<Broker>) {
        let wake = self.wake.lock().unwrap_or_else(|p| p.into_inner());
        let _ = wake.try_send(broker);
    }
}

fn run_queued(broker: &Broker) {
    while let Some(job) = broker.next_log_move() {
        let rate = broker
            .dynamic
            .get(MOVE_RATE_CONFIG)
            .and_then(|value| value.trim().parse::<i64>().ok())
            .filter(|rate| *rate > 0 && *rate < i64::MAX)
            .map(|rate| rate as u64);
        let log_move = &job.log_move;
        tracing::info!(partition = %log_move.tp, to = %log_move.destination.display(), ?rate, "moving a log to another log directory");
        let outcome = job.run(rate);
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
        broker.finish_log_move(&job, &outcome);
    }
}
