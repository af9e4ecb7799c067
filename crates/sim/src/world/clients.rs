//! The simulation's producers: idempotent and transactional clients sending Produce over
//! the simulated network to whichever node the controller names leader, one request in
//! flight each (a batch is resent, same sequence, until it is answered), as Java's
//! producer does with max.in.flight.requests.per.connection=1. The leader runs the
//! produce handler's steps on the real partition (idempotent deduplication, KIP-890
//! verification's guard, transaction markers) and answers once the batch is on every
//! in-sync replica (acks=all).
//!
//! The transaction coordinator is modelled, not run (its state lives in the
//! coordinator crate's async shards): it decides commit or abort, bumps the producer's
//! epoch as transaction version 2 does, and writes the marker to the partition's leader
//! until one is acknowledged. What runs for real is everything a partition does with
//! transactions: the producer state, the last stable offset, the aborted-transaction
//! index, markers replicated, truncated and recovered.

use rand::Rng;
use strand_broker::error_code;
use strand_records::{BatchBuilder, BatchView, EndTxnMarker, Record, TxnResult};

use strand_broker::partition::Partition;

use super::{CorruptWhere, Message, World, CLIENT_BASE, DATA, EPOCH_MS, FETCH_MAX_BYTES};

/// A client gives up on an answer after this long and sends the request again (the
/// producer's request.timeout.ms, shortened to the simulation's pace).
const CLIENT_TIMEOUT_MS: i64 = 1_000;

/// Idempotent producers, then transactional ones.
pub(super) const IDEMPOTENT_PRODUCERS: usize = 2;
pub(super) const TRANSACTIONAL_PRODUCERS: usize = 2;

#[derive(Debug, Clone)]
pub(super) enum Request {
    Data {
        first_id: i64,
        count: i64,
        batch: Vec<u8>,
    },
    /// The coordinator's WriteTxnMarkers for the producer's transaction, at its bumped
    /// epoch.
    Marker { commit: bool },
}

#[derive(Debug)]
pub(super) struct Outstanding {
    request: Request,
    /// When it last went out and its correlation number (None: to send).
    sent: Option<(i64, u64)>,
    retries: u32,
}

#[derive(Debug)]
pub(super) struct Producer {
    client: i32,
    producer_id: i64,
    epoch: i16,
    transactional: bool,
    next_sequence: i32,
    outstanding: Option<Outstanding>,
    /// Its open transaction (an index into `World::txns`).
    txn: Option<usize>,
}

/// A transaction as the coordinator knows it.
#[derive(Debug)]
pub(super) struct Txn {
    pub producer_id: i64,
    /// Record ids of every batch it sent (acknowledged or not).
    pub ids: Vec<i64>,
    /// The coordinator's decision: commit or abort.
    pub decided: Option<bool>,
    /// Its marker is acknowledged (on every in-sync replica).
    pub marked: bool,
}

/// A leader's answer held until its batch is on every in-sync replica (acks=all).
#[derive(Debug)]
pub(super) struct Waiting {
    leader: i32,
    leader_epoch: i32,
    end: i64,
    first_offset: i64,
    client: i32,
    correlation: u64,
}

pub(super) fn producers() -> Vec<Producer> {
    (0..IDEMPOTENT_PRODUCERS + TRANSACTIONAL_PRODUCERS)
        .map(|index| Producer {
            client: CLIENT_BASE + index as i32,
            producer_id: 1_000 + index as i64,
            epoch: 0,
            transactional: index >= IDEMPOTENT_PRODUCERS,
            next_sequence: 0,
            outstanding: None,
            txn: None,
        })
        .collect()
}

/// Errors a producer retries (the same batch, the same sequence).
fn retriable(code: i16) -> bool {
    matches!(
        code,
        error_code::NOT_LEADER_OR_FOLLOWER
            | error_code::REQUEST_TIMED_OUT
            | error_code::UNKNOWN_TOPIC_OR_PARTITION
            | error_code::NOT_ENOUGH_REPLICAS
            | error_code::NOT_ENOUGH_REPLICAS_AFTER_APPEND
            | error_code::KAFKA_STORAGE_ERROR
            | error_code::CONCURRENT_TRANSACTIONS
    )
}

/// (offset, record id) of every record a read_committed consumer returns from `bytes`
/// (whole batches, CRCs checked by the caller), and the offset after the last batch:
/// the filter Java's consumer applies with the fetch's aborted transactions (a
/// transactional batch of a producer whose aborted transaction began at or before it
/// is skipped, until that producer's abort marker).
pub(super) fn read_committed(
    bytes: &[u8],
    from: i64,
    aborted: &[(i64, i64)],
) -> (Vec<(i64, i64)>, Option<i64>) {
    let mut aborted = aborted.to_vec();
    aborted.sort_by_key(|&(_, first)| first);
    let mut aborted = aborted.into_iter().peekable();
    let mut aborting = std::collections::BTreeSet::new();
    let (mut out, mut next) = (Vec::new(), None);
    let mut rest = bytes;
    while let Ok(view) = BatchView::parse(rest) {
        rest = &rest[view.bytes.len()..];
        let header = view.header;
        next = Some(header.last_offset() + 1);
        if header.last_offset() < from {
            continue;
        }
        // As Java's CompletedFetch: for every batch with a producer id, control batches
        // included, the aborted transactions begun by its last offset first.
        if header.producer_id >= 0 {
            while let Some((producer_id, _)) =
                aborted.next_if(|&(_, first)| first <= header.last_offset())
            {
                aborting.insert(producer_id);
            }
        }
        if header.attributes.is_control() {
            let abort = strand_records::read_end_txn_marker(&view)
                .ok()
                .flatten()
                .is_some_and(|m| m.result == TxnResult::Abort);
            if abort {
                aborting.remove(&header.producer_id);
            }
            continue;
        }
        if header.attributes.is_transactional() && aborting.contains(&header.producer_id) {
            continue;
        }
        for delta in 0..header.records_count.max(0) as i64 {
            let offset = header.base_offset + delta;
            if offset >= from {
                out.push((offset, header.base_timestamp - EPOCH_MS + delta));
            }
        }
    }
    (out, next)
}

impl World {
    /// A producer's turn: it sends its outstanding request again if the answer is
    /// overdue or asked for a retry; otherwise, if `new_work`, it starts its next batch
    /// (or, transactional, ends its transaction now and then: the coordinator decides,
    /// bumps the epoch and writes the marker). Without `new_work` (the faults stopped),
    /// an open transaction is ended, as the coordinator's timeout would.
    pub(super) fn client_step(&mut self, index: usize, new_work: bool) {
        let now = self.now_ms;
        let producer = &self.producers[index];
        if let Some(outstanding) = &producer.outstanding {
            let due = outstanding
                .sent
                .is_none_or(|(at, _)| now - at >= CLIENT_TIMEOUT_MS);
            if due {
                self.client_send(index);
            }
            return;
        }
        let open = producer.txn;
        let end_now = match open {
            Some(_) if !new_work => true,
            Some(_) => self.rng.gen_bool(0.3),
            None => false,
        };
        if let (Some(txn), true) = (open, end_now) {
            let commit = self.rng.gen_bool(0.7);
            self.txns[txn].decided = Some(commit);
            let producer = &mut self.producers[index];
            // Transaction version 2: the coordinator bumps the epoch and writes the
            // markers with it; the producer's next transaction starts at sequence 0.
            producer.epoch += 1;
            producer.next_sequence = 0;
            producer.outstanding = Some(Outstanding {
                request: Request::Marker { commit },
                sent: None,
                retries: 0,
            });
            let producer_id = producer.producer_id;
            self.trace(&("txn decided", producer_id, commit));
            self.client_send(index);
            return;
        }
        if !new_work {
            return;
        }
        let count = self.rng.gen_range(1..=3);
        let first_id = self.next_id;
        self.next_id += count;
        let producer = &self.producers[index];
        let mut builder = BatchBuilder::new(0, EPOCH_MS + first_id).producer(
            producer.producer_id,
            producer.epoch,
            producer.next_sequence,
        );
        if producer.transactional {
            builder = builder.transactional();
            let txn = match producer.txn {
                Some(txn) => txn,
                None => {
                    self.txns.push(Txn {
                        producer_id: producer.producer_id,
                        ids: Vec::new(),
                        decided: None,
                        marked: false,
                    });
                    self.txns.len() - 1
                }
            };
            self.txns[txn].ids.extend(first_id..first_id + count);
            for id in first_id..first_id + count {
                self.txn_of.insert(id, txn);
            }
            self.producers[index].txn = Some(txn);
        }
        for delta in 0..count {
            builder.push(Record::new(
                None,
                Some(vec![1u8; 16]),
                EPOCH_MS + first_id + delta,
            ));
        }
        let producer = &mut self.producers[index];
        producer.outstanding = Some(Outstanding {
            request: Request::Data {
                first_id,
                count,
                batch: builder.build(),
            },
            sent: None,
            retries: 0,
        });
        self.client_send(index);
    }

    /// Sends the producer's outstanding request to the leader it knows of (none: it
    /// waits for the next turn).
    fn client_send(&mut self, index: usize) {
        let leader = self.controller.assignment(DATA).leader;
        if leader <= 0 {
            return;
        }
        let correlation = self.next_correlation();
        let producer = &mut self.producers[index];
        let Some(outstanding) = producer.outstanding.as_mut() else {
            return;
        };
        if outstanding.sent.is_some() {
            outstanding.retries += 1;
        }
        outstanding.sent = Some((self.now_ms, correlation));
        let (client, producer_id, epoch) = (producer.client, producer.producer_id, producer.epoch);
        let message = match &outstanding.request {
            Request::Data {
                first_id,
                count,
                batch,
                ..
            } => {
                let batch = if self.bugs.retries_without_idempotence && !producer.transactional {
                    // A producer retrying without idempotence: the same records, no
                    // producer id or sequence for the leader to recognise a retry by.
                    let mut builder = BatchBuilder::new(0, EPOCH_MS + first_id);
                    for id in *first_id..first_id + count {
                        builder.push(Record::new(None, Some(vec![1u8; 16]), EPOCH_MS + id));
                    }
                    builder.build()
                } else {
                    batch.clone()
                };
                Message::Produce {
                    batch,
                    transactional: producer.transactional,
                }
            }
            Request::Marker { commit } => Message::Marker {
                producer_id,
                epoch,
                commit: *commit,
            },
        };
        self.outcome.client_requests += 1;
        self.send(client, leader, correlation, DATA, message);
    }

    /// A leader handles a producer's request: the produce handler's steps on the real
    /// partition, the answer held until acks=all is met.
    pub(super) fn handle_produce(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        message: Message,
    ) {
        let Some(leader_epoch) = partition.leader_epoch_if_leader() else {
            self.answer(
                to,
                from,
                correlation,
                Err(error_code::NOT_LEADER_OR_FOLLOWER),
            );
            return;
        };
        let appended = match message {
            Message::Produce {
                batch,
                transactional: false,
            } => partition.append_unsynced(batch, -1),
            Message::Produce {
                batch,
                transactional: true,
            } => {
                let Ok(header) = strand_records::BatchHeader::parse(&batch) else {
                    return;
                };
                // KIP-890 (transaction version 2): the leader asks the coordinator to
                // add the partition; it says yes only while the producer's transaction
                // is open at that epoch. The guard is what the partition knew of the
                // producer then.
                let producer = &self.producers[(from - CLIENT_BASE) as usize];
                let open = producer.epoch == header.producer_epoch
                    && producer
                        .txn
                        .is_some_and(|txn| self.txns[txn].decided.is_none());
                if !open {
                    self.answer(
                        to,
                        from,
                        correlation,
                        Err(error_code::INVALID_PRODUCER_EPOCH),
                    );
                    return;
                }
                let guard = partition
                    .log()
                    .producer_state()
                    .get(header.producer_id)
                    .map(|entry| entry.last_offset);
                partition.append_transactional(
                    batch,
                    -1,
                    (header.producer_id, header.producer_epoch, guard),
                )
            }
            Message::Marker {
                producer_id,
                epoch,
                commit,
            } => {
                let marker = EndTxnMarker {
                    result: if commit {
                        TxnResult::Commit
                    } else {
                        TxnResult::Abort
                    },
                    coordinator_epoch: 0,
                };
                partition.append_marker(producer_id, epoch, marker)
            }
            _ => return,
        };
        match appended {
            Ok((info, durable)) => {
                if let Some(Err(error)) = durable.map(|d| d.wait_blocking()) {
                    self.trace(&("sync failed", to, error.kafka_error_code()));
                    self.replica_failed(to);
                    self.answer(to, from, correlation, Err(error_code::KAFKA_STORAGE_ERROR));
                    return;
                }
                self.trace(&("client append", to, from, info.first_offset, info.duplicate));
                if info.duplicate {
                    self.outcome.duplicates += 1;
                }
                self.waiting.push(Waiting {
                    leader: to,
                    leader_epoch,
                    end: info.last_offset + 1,
                    first_offset: info.first_offset,
                    client: from,
                    correlation,
                });
            }
            Err(refusal) => {
                if partition.log().offline_reason().is_some() {
                    self.replica_failed(to);
                }
                self.answer(to, from, correlation, Err(refusal.code));
            }
        }
    }

    fn answer(&mut self, from: i32, to: i32, correlation: u64, result: Result<i64, i16>) {
        self.send(from, to, correlation, DATA, Message::Answer { result });
    }

    /// acks=all for held answers: sent once the high watermark passes the batch in the
    /// epoch it was taken in (NOT_LEADER_OR_FOLLOWER if leadership moved first).
    pub(super) fn answer_waiting(&mut self) {
        for waiting in std::mem::take(&mut self.waiting) {
            let result = match self.partition(waiting.leader) {
                None => continue, // crashed: the client times out
                Some(p) if p.leader_epoch_if_leader() != Some(waiting.leader_epoch) => {
                    Err(error_code::NOT_LEADER_OR_FOLLOWER)
                }
                Some(p) if p.high_watermark() >= waiting.end => Ok(waiting.first_offset),
                Some(_) => {
                    self.waiting.push(waiting);
                    continue;
                }
            };
            self.answer(waiting.leader, waiting.client, waiting.correlation, result);
        }
    }

    /// A producer reads the answer to its outstanding request (any other is stale).
    pub(super) fn client_answer(&mut self, to: i32, correlation: u64, result: Result<i64, i16>) {
        let index = (to - CLIENT_BASE) as usize;
        let producer = &mut self.producers[index];
        let Some(outstanding) = producer.outstanding.as_mut() else {
            return;
        };
        if outstanding.sent.map(|(_, c)| c) != Some(correlation) {
            return;
        }
        let producer_id = producer.producer_id;
        match result {
            Ok(first_offset) => {
                let request = producer.outstanding.take().expect("checked").request;
                match request {
                    Request::Data {
                        first_id, count, ..
                    } => {
                        producer.next_sequence += count as i32;
                        for delta in 0..count {
                            self.acked.insert(first_offset + delta, first_id + delta);
                        }
                        self.outcome.client_acked += count as usize;
                    }
                    Request::Marker { commit } => {
                        if let Some(txn) = producer.txn.take() {
                            self.txns[txn].marked = true;
                        }
                        if commit {
                            self.outcome.txns_committed += 1;
                        } else {
                            self.outcome.txns_aborted += 1;
                        }
                    }
                }
                self.trace(&("client acked", to, first_offset));
            }
            Err(code) if retriable(code) => {
                outstanding.sent = None;
                self.trace(&("client retries", to, code));
            }
            Err(code) => {
                let request = format!("{:?}", outstanding.request);
                producer.outstanding = None;
                self.violation(format!(
                    "producer {producer_id} was refused with error {code}, which it cannot retry: {}",
                    request.chars().take(120).collect::<String>()
                ));
            }
        }
    }

    /// A read_committed consumer reading from the leader up to its last stable offset,
    /// with the aborted transactions the read reports (the fetch handler's
    /// `Partition::read`): it may see plain records and committed transactions' only,
    /// and the last stable offset may never pass the high watermark.
    pub(super) fn consume_committed(&mut self) -> anyhow::Result<()> {
        let Some((leader, partition)) = self.leader_partition() else {
            return Ok(());
        };
        if !partition.is_leader() {
            return Ok(());
        }
        let (stable, high_watermark) = {
            let log = partition.log();
            (log.last_stable_offset(), log.high_watermark())
        };
        if stable > high_watermark {
            self.violation(format!(
                "node {leader}'s last stable offset {stable} is past its high watermark {high_watermark}"
            ));
        }
        let from = self.committed_offset;
        if from >= stable {
            return Ok(());
        }
        let (slice, aborted) = match partition.read(from, FETCH_MAX_BYTES, true, true) {
            // (--bug aborted-list-dropped: a fetch that lost its aborted transactions.)
            Ok((read, _)) if self.bugs.aborted_list_dropped => (read.slice, Vec::new()),
            Ok((read, aborted)) => (read.slice, aborted),
            Err(error) => {
                self.trace(&("consume failed", leader, from, error.kafka_error_code()));
                return Ok(());
            }
        };
        let Some(slice) = slice else {
            return Ok(());
        };
        let mut bytes = slice.read_to_vec()?;
        self.corrupt_read(leader, &mut bytes, CorruptWhere::NotBaseOffsets);
        let mut valid = 0;
        while let Ok(view) = BatchView::parse(&bytes[valid..]) {
            valid += view.bytes.len();
        }
        let (records, next) = read_committed(&bytes[..valid], from, &aborted);
        for (offset, id) in records {
            if offset >= stable {
                self.violation(format!(
                    "a read_committed read from {from} returned offset {offset}, at or past the last stable offset {stable}"
                ));
            }
            if let Some(&txn) = self.txn_of.get(&id) {
                let decided = self.txns[txn].decided;
                if decided != Some(true) {
                    self.violation(format!(
                        "a read_committed consumer read record {id} at offset {offset} of producer {}'s transaction, which is {}",
                        self.txns[txn].producer_id,
                        match decided {
                            Some(false) => "aborted",
                            _ => "not decided",
                        }
                    ));
                }
            }
            if let Some(before) = self.consumed_committed.insert(offset, id) {
                if before != id {
                    self.violation(format!(
                        "read_committed: offset {offset} was read as record {before}, later as {id}"
                    ));
                }
            }
        }
        if let Some(next) = next {
            self.committed_offset = self.committed_offset.max(next);
        }
        Ok(())
    }

    /// Whether every producer is done: nothing outstanding, no transaction open.
    pub(super) fn clients_idle(&self) -> bool {
        self.producers
            .iter()
            .all(|p| p.outstanding.is_none() && p.txn.is_none())
    }

    /// The producers not done, for a liveness report.
    pub(super) fn clients_busy(&self) -> Vec<String> {
        self.producers
            .iter()
            .filter(|p| p.outstanding.is_some() || p.txn.is_some())
            .map(|p| {
                format!(
                    "{} (epoch {}, txn {:?}, {:?})",
                    p.producer_id,
                    p.epoch,
                    p.txn,
                    p.outstanding.as_ref().map(|o| (o.sent, o.retries))
                )
            })
            .collect()
    }

    /// Atomicity over the final log as a read_committed consumer sees it from the log
    /// start: every record of a committed transaction, none of an aborted one.
    pub(super) fn check_transactions(
        &self,
        partition: &Partition,
        offsets: &std::collections::BTreeMap<i64, i64>,
    ) -> anyhow::Result<Vec<String>> {
        let mut visible = std::collections::BTreeSet::new();
        let mut offset = partition.log().log_start_offset();
        let mut all_aborted = Vec::new();
        loop {
            let (read, aborted) = partition.read(offset, FETCH_MAX_BYTES, true, true)?;
            let Some(slice) = read.slice else { break };
            let (records, next) = read_committed(&slice.read_to_vec()?, offset, &aborted);
            all_aborted.extend(aborted);
            visible.extend(records.into_iter().map(|(_, id)| id));
            match next {
                Some(next) if next > offset => offset = next,
                _ => break,
            }
        }
        let mut found = Vec::new();
        for txn in &self.txns {
            let seen = txn.ids.iter().filter(|id| visible.contains(id)).count();
            let wrong = match txn.decided {
                Some(true) => seen != txn.ids.len(),
                Some(false) => seen != 0,
                None => true, // every transaction ends once the faults stop
            };
            if wrong && found.len() < 3 {
                all_aborted.sort();
                all_aborted.dedup();
                found.push(format!(
                    "producer {}'s transaction of records {:?} at offsets {:?} ({}, marker {}): {seen} of its {} records visible to read_committed (aborted transactions read: {:?})",
                    txn.producer_id,
                    txn.ids.iter().take(6).collect::<Vec<_>>(),
                    txn.ids.iter().take(6).map(|id| offsets.get(id)).collect::<Vec<_>>(),
                    match txn.decided {
                        Some(true) => "committed",
                        Some(false) => "aborted",
                        None => "never ended",
                    },
                    if txn.marked { "acknowledged" } else { "not acknowledged" },
                    txn.ids.len(),
                    all_aborted.iter().filter(|(p, _)| *p == txn.producer_id).collect::<Vec<_>>()
                ));
            }
        }
        Ok(found)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn data(offset: i64, producer_id: i64, transactional: bool, id: i64) -> Vec<u8> {
        let mut builder =
            BatchBuilder::new(offset, EPOCH_MS + id).producer(producer_id, 0, offset as i32);
        if transactional {
            builder = builder.transactional();
        }
        builder.push(Record::new(None, Some(vec![1]), EPOCH_MS + id));
        builder.build()
    }

    fn marker(offset: i64, producer_id: i64, result: TxnResult) -> Vec<u8> {
        let mut batch = EndTxnMarker {
            result,
            coordinator_epoch: 0,
        }
        .batch(producer_id, 1, EPOCH_MS);
        strand_records::set_base_offset(&mut batch, offset);
        batch
    }

    /// The consumer's filter as Java's: an aborted transaction's batches are skipped up
    /// to its producer's abort marker, whichever comes first in the read (the abort
    /// marker of an earlier transaction, read before the producer's next batches, must
    /// not leave them skipped: the simulator's first filter did that).
    #[test]
    fn read_committed_skips_aborted_transactions_only() {
        let log = [
            data(0, 7, true, 100),           // aborted transaction of 7 from 0
            data(1, 8, false, 101),          // idempotent, plain
            marker(2, 7, TxnResult::Abort),  // ends it
            data(3, 7, true, 103),           // 7's next transaction, committed
            data(4, 9, true, 104),           // 9's, aborted
            marker(5, 7, TxnResult::Commit), //
            marker(6, 9, TxnResult::Abort),  //
            data(7, 8, false, 107),
        ]
        .concat();
        let aborted = [(9, 4), (7, 0)];
        let ids = |from| {
            read_committed(&log, from, &aborted)
                .0
                .into_iter()
                .map(|(_, id)| id)
                .collect::<Vec<_>>()
        };
        assert_eq!(ids(0), vec![101, 103, 107]);
        // A read from the abort marker on: the aborted list still names 7's
        // transaction (it overlaps the read), the marker comes first.
        assert_eq!(ids(2), vec![103, 107]);
        assert_eq!(read_committed(&log, 0, &aborted).1, Some(8));
    }
}
