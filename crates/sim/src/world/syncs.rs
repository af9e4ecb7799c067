//! Disk latency: a flush-before-ack sync takes virtual time. The broker hands a log's
//! sync to a blocking thread (the sync gate's `SyncTicket`) and its waiters (a produce
//! held for acks=all, a follower's next fetch, a coordinator's write) wait meanwhile,
//! while appends, truncations and elections go on. Here the ticket is queued on its
//! node's disk and run when the seed's latency has passed: usually 0-3 ms, for a while
//! on one node 50 ms to 1.5 s (a latency spike: a disk busy with another tenant,
//! write-back storms, a RAID rebuild). Waiters poll the gate (`Durable::poll`), as the
//! broker's async waiters do, so the gate's own bookkeeping decides: a sync covers what
//! was written when it started, one at a time per log, a truncation meanwhile voids it,
//! an offset cut before it was synced never will be. A node that crashes loses its
//! queued syncs unrun (`SyncTicket::abandon`): their data may be gone at a power cut.

use rand::Rng;
use strand_broker::partition::Durable;
use strand_log::{DurableState, SyncTicket};

use super::World;

/// A latency spike's syncs take this long (virtual ms)...
const SPIKE_LATENCY_MS: std::ops::RangeInclusive<i64> = 50..=1_500;
/// ...for this long on one node.
const SPIKE_DURATION_MS: std::ops::RangeInclusive<i64> = 500..=5_000;
/// An ordinary sync's latency.
const LATENCY_MS: std::ops::RangeInclusive<i64> = 0..=3;

/// A sync queued on a node's disk.
#[derive(Debug)]
pub(super) struct QueuedSync {
    node: i32,
    due_ms: i64,
    ticket: SyncTicket,
}

/// One node's disk is slow until then.
#[derive(Debug, Clone, Copy)]
pub(super) struct Spike {
    node: i32,
    until_ms: i64,
}

impl World {
    /// Whether `durable` is on disk: Some(outcome), or None while its sync is queued or
    /// another sync of the log runs (the caller polls again at a later step).
    pub(super) fn poll_durable(
        &mut self,
        node: i32,
        durable: &Durable,
    ) -> Option<std::io::Result<()>> {
        loop {
            match durable.poll(std::task::Waker::noop()) {
                DurableState::Ready(result) => return Some(result),
                DurableState::Pending => return None,
                DurableState::SyncNow(ticket) => {
                    let latency = self.sync_latency(node);
                    if latency == 0 {
                        ticket.run();
                        self.after_sync(node);
                        continue;
                    }
                    let due_ms = self.now_ms + latency;
                    self.trace(&("sync queued", node, due_ms));
                    self.outcome.syncs_queued += 1;
                    self.queued_syncs.push(QueuedSync {
                        node,
                        due_ms,
                        ticket,
                    });
                    return None;
                }
            }
        }
    }

    /// `poll_durable` for a leader's append: once synced its high watermark counts it,
    /// as `Durable::start_for` does in the broker.
    pub(super) fn poll_leader_sync(
        &mut self,
        node: i32,
        partition: usize,
        durable: &Durable,
    ) -> Option<std::io::Result<()>> {
        let polled = self.poll_durable(node, durable);
        if let (Some(Ok(())), Some(replica)) = (&polled, self.replica(node, partition)) {
            replica.advance_high_watermark();
        }
        polled
    }

    fn sync_latency(&mut self, node: i32) -> i64 {
        let spiking = self
            .disk_spike
            .is_some_and(|s| s.node == node && s.until_ms > self.now_ms);
        match spiking {
            true => self.rng.gen_range(SPIKE_LATENCY_MS),
            false => self.rng.gen_range(LATENCY_MS),
        }
    }

    /// Runs the syncs whose time has come, oldest first.
    pub(super) fn run_due_syncs(&mut self) {
        let now = self.now_ms;
        let (due, queued): (Vec<_>, Vec<_>) = std::mem::take(&mut self.queued_syncs)
            .into_iter()
            .partition(|s| s.due_ms <= now);
        self.queued_syncs = queued;
        for sync in due {
            sync.ticket.run();
            self.trace(&("synced", sync.node));
            self.after_sync(sync.node);
        }
        if self.disk_spike.is_some_and(|s| s.until_ms <= now) {
            self.disk_spike = None;
            self.trace(&"disk latency back to normal");
        }
    }

    /// A sync that failed (EIO) took its log offline: the node reports its replicas
    /// failed, as the broker does when its log directory fails.
    fn after_sync(&mut self, node: i32) {
        let offline = (0..super::PARTITIONS)
            .filter_map(|index| self.replica(node, index))
            .any(|partition| partition.log().is_offline());
        if offline {
            self.replica_failed(node);
        }
    }

    /// A node's disk turns slow for a while (at most one at a time).
    pub(super) fn start_latency_spike(&mut self, node: i32) {
        if self.disk_spike.is_some() {
            return;
        }
        let until_ms = self.now_ms + self.rng.gen_range(SPIKE_DURATION_MS);
        self.trace(&("disk slow", node, until_ms));
        self.disk_spike = Some(Spike { node, until_ms });
        self.outcome.latency_spikes += 1;
    }

    /// A sync nobody waits for any more (its coordinator's epoch ended, its follower
    /// elected) still runs, as the broker's spawned wait runs it, and then the
    /// partition's high watermark counts it (`Durable::start_for`,
    /// `Partition::follow_unsynced_tail`); polled until done.
    pub(super) fn sync_in_background(&mut self, node: i32, partition: usize, durable: Durable) {
        self.background_syncs.push((node, partition, durable));
    }

    pub(super) fn poll_background_syncs(&mut self) {
        for (node, partition, durable) in std::mem::take(&mut self.background_syncs) {
            if self.poll_leader_sync(node, partition, &durable).is_none() {
                self.background_syncs.push((node, partition, durable));
            }
        }
    }

    /// The node's process died: its queued syncs never reach the disk.
    pub(super) fn abandon_syncs(&mut self, node: i32) {
        self.background_syncs.retain(|(n, _, _)| *n != node);
        let (lost, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut self.queued_syncs)
            .into_iter()
            .partition(|s| s.node == node);
        self.queued_syncs = kept;
        for sync in lost {
            sync.ticket.abandon();
        }
    }

    /// Faults stop: the disks are fast again.
    pub(super) fn end_latency_spike(&mut self) {
        self.disk_spike = None;
    }
}
