//! The simulation's producers: idempotent and transactional clients sending Produce over
//! the simulated network to whichever node the controller names leader. They pipeline up
//! to five batches (Java's default max.in.flight.requests.per.connection) over a
//! connection that delivers in order and breaks rather than losing one message (TCP); on
//! an error or a timeout they resend every batch in flight, in order, with the same
//! sequences, as Java's producer does. A transactional producer's requests to the
//! coordinator go alone, and it ends a transaction only once every batch in flight is
//! answered (Java's commit and abort flush first). The leader runs the produce handler's
//! steps on the real partition (idempotent deduplication, KIP-890
//! verification's guard, transaction markers) and answers once the batch is on every
//! in-sync replica (acks=all).
//!
//! The transactional producers take their producer id and epoch from the real
//! transaction coordinator (txn.rs) and end their transactions there (EndTxn v5, which
//! bumps the epoch); before a transaction's batch the leader asks the coordinator to add
//! the partition (AddPartitionsToTxn v5, KIP-890) and appends only on its yes, guarded by
//! what the partition knew of the producer then. A producer whose transaction was fenced
//! (the coordinator aborted it past its timeout, or a request of an older epoch) gives it
//! up and recovers with InitProducerId carrying its id and epoch (KIP-360).

use std::collections::VecDeque;

use rand::Rng;
use strand_broker::error_code;
use strand_records::{BatchBuilder, BatchView, EndTxnMarker, Record, TxnResult};

use strand_broker::partition::Partition;

use super::txn::transactional_id;
use super::{CorruptWhere, Message, World, CLIENT_BASE, DATA, EPOCH_MS, FETCH_MAX_BYTES, TXN};

/// A client gives up on an answer after this long and sends the request again (the
/// producer's request.timeout.ms, shortened to the simulation's pace).
const CLIENT_TIMEOUT_MS: i64 = 1_000;

/// Idempotent producers, then transactional ones.
pub(super) const IDEMPOTENT_PRODUCERS: usize = 2;
/// Batches a producer has in flight at most (what the log's producer state remembers per
/// producer to recognise a retry: Kafka's five).
const PIPELINED_MAX: usize = 5;
pub(super) const TRANSACTIONAL_PRODUCERS: usize = 2;

#[derive(Debug, Clone)]
pub(super) enum Request {
    Data {
        first_id: i64,
        count: i64,
        batch: Vec<u8>,
    },
    /// InitProducerId to the transaction coordinator, with the id and epoch the producer
    /// had when it recovers from a fenced transaction (KIP-360).
    InitProducerId { expected: Option<(i64, i16)> },
    /// EndTxn v5: the coordinator answers the producer's next epoch.
    EndTxn { commit: bool },
}

#[derive(Debug)]
pub(super) struct Outstanding {
    request: Request,
    /// When it last went out, its correlation number and the node it went to (None: to
    /// send).
    sent: Option<(i64, u64, i32)>,
    retries: u32,
}

#[derive(Debug)]
pub(super) struct Producer {
    pub(super) client: i32,
    /// -1 for a transactional producer until the coordinator gave it one.
    producer_id: i64,
    epoch: i16,
    transactional: bool,
    /// The sequence of its next batch (assigned when the batch is made).
    next_sequence: i32,
    /// Its requests in flight or to send, oldest first.
    outstanding: VecDeque<Outstanding>,
    /// How many it may have (more than one: pipelined, over an ordered connection).
    max_in_flight: usize,
    /// A batch was given up out of sequence: the epoch is bumped once nothing is in
    /// flight.
    bump_epoch: bool,
    /// Its open transaction (an index into `World::txns`).
    txn: Option<usize>,
    /// The application asked to end it (commit: true): no batch joins it any more, and
    /// EndTxn goes once none is in flight.
    ending: Option<bool>,
}

/// A transaction as the coordinator knows it.
#[derive(Debug)]
pub(super) struct Txn {
    pub producer_id: i64,
    /// The producer's epoch in it (its batches'; the coordinator prepares it at the next).
    pub epoch: i16,
    /// Record ids of every batch it sent (acknowledged or not).
    pub ids: Vec<i64>,
    /// The coordinator's decision once a coordinator prepared it: commit or abort.
    pub decided: Option<bool>,
    /// The producer's EndTxn was answered.
    pub ended: bool,
}

/// A transaction's batch the leader holds while it asks the coordinator to add the
/// partition (KIP-890), until the answer or the client's timeout.
#[derive(Debug)]
pub(super) struct Verifying {
    pub(super) leader: i32,
    leader_epoch: i32,
    pub(super) client: i32,
    correlation: u64,
    /// The number of the leader's question to the coordinator, and when it went.
    asked: u64,
    at: i64,
    batch: Vec<u8>,
}

/// A leader's answer held until its batch is on every in-sync replica (acks=all).
#[derive(Debug)]
pub(super) struct Waiting {
    pub(super) leader: i32,
    leader_epoch: i32,
    end: i64,
    first_offset: i64,
    pub(super) client: i32,
    correlation: u64,
    /// Flush before ack: until the batch is on the leader's disk.
    durable: Option<strand_broker::partition::Durable>,
}

pub(super) fn producers() -> Vec<Producer> {
    (0..IDEMPOTENT_PRODUCERS + TRANSACTIONAL_PRODUCERS)
        .map(|index| Producer {
            client: CLIENT_BASE + index as i32,
            producer_id: match index >= IDEMPOTENT_PRODUCERS {
                true => -1,
                false => 1_000 + index as i64,
            },
            epoch: 0,
            transactional: index >= IDEMPOTENT_PRODUCERS,
            next_sequence: 0,
            outstanding: VecDeque::new(),
            max_in_flight: PIPELINED_MAX,
            bump_epoch: false,
            txn: None,
            ending: None,
        })
        .collect()
}

/// Errors a producer retries (the same request: a batch with the same sequence).
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
            | error_code::NOT_COORDINATOR
            | error_code::COORDINATOR_NOT_AVAILABLE
            | error_code::COORDINATOR_LOAD_IN_PROGRESS
    )
}

/// Errors that end a transactional producer's transaction without it (a newer epoch
/// owns the producer, or the coordinator no longer has the transaction open): it gives
/// the transaction up and recovers with InitProducerId.
fn fenced(code: i16) -> bool {
    matches!(
        code,
        error_code::INVALID_PRODUCER_EPOCH
            | error_code::PRODUCER_FENCED
            | error_code::INVALID_TXN_STATE
            | error_code::INVALID_PRODUCER_ID_MAPPING
            | error_code::TRANSACTION_ABORTABLE
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

impl Producer {
    /// The node its data requests in flight went to: all of them go to one node, and a
    /// new leader gets none until they are all answered or the connection is given up
    /// (librdkafka drains in-flight requests so on a leader change: a batch reaching a
    /// new leader ahead of earlier ones still in flight elsewhere would land out of
    /// order).
    fn connected(&self) -> Option<i32> {
        self.outstanding
            .iter()
            .find_map(|o| match (&o.request, o.sent) {
                (Request::Data { .. }, Some((_, _, node))) => Some(node),
                _ => None,
            })
    }
}

impl World {
    /// A producer's turn: it sends its outstanding request again if the answer is
    /// overdue or asked for a retry; otherwise, if `new_work`, it starts its next batch
    /// (transactional: first its producer id from the coordinator, and now and then it
    /// ends its transaction, committing or aborting). Without `new_work` (the faults
    /// stopped) an open transaction is ended.
    pub(super) fn client_step(&mut self, index: usize, new_work: bool) {
        let now = self.now_ms;
        let producer = &self.producers[index];
        let due = producer.outstanding.iter().any(|o| {
            o.sent
                .is_none_or(|(at, _, _)| now - at >= CLIENT_TIMEOUT_MS)
        });
        if due {
            // A request answered with an error or not at all: every request in flight
            // again, in order, over a new connection (Java's producer closes the old).
            self.client_reconnect(index);
            self.client_send(index);
            return;
        }
        let producer = &mut self.producers[index];
        if producer.bump_epoch && producer.outstanding.is_empty() {
            producer.bump_epoch = false;
            producer.epoch += 1;
            producer.next_sequence = 0;
        }
        let producer = &self.producers[index];
        let room = producer.outstanding.len() < producer.max_in_flight
            && !producer.bump_epoch
            && producer
                .connected()
                .is_none_or(|node| node == self.controller.assignment(DATA).leader);
        // Another batch may join those in flight (a pipelining producer with room), but
        // not a request to the coordinator: that goes alone.
        let only_batches = producer
            .outstanding
            .iter()
            .all(|o| matches!(o.request, Request::Data { .. }));
        let pipelines = room && new_work && only_batches;
        if !(producer.outstanding.is_empty() || pipelines) {
            return;
        }
        // The application ends its transaction: from then on no batch joins it, and
        // EndTxn goes once every batch in flight is answered (Java's commitTransaction
        // and abortTransaction flush first).
        if producer.txn.is_some()
            && producer.ending.is_none()
            && (!new_work || self.rng.gen_bool(0.5))
        {
            self.producers[index].ending = Some(self.rng.gen_bool(0.7));
        }
        let producer = &mut self.producers[index];
        if let Some(commit) = producer.ending {
            if producer.outstanding.is_empty() {
                producer.ending = None;
                self.start_request(index, Request::EndTxn { commit });
            }
            return;
        }
        if !new_work {
            return;
        }
        if producer.transactional && producer.producer_id < 0 {
            self.start_request(index, Request::InitProducerId { expected: None });
            return;
        }
        let count = self.rng.gen_range(1..=3);
        let first_id = self.next_id;
        self.next_id += count;
        let producer = &mut self.producers[index];
        let mut builder = BatchBuilder::new(0, EPOCH_MS + first_id).producer(
            producer.producer_id,
            producer.epoch,
            producer.next_sequence,
        );
        producer.next_sequence += count as i32;
        let key = (producer.client, producer.epoch);
        self.producer_of
            .extend((first_id..first_id + count).map(|id| (id, key)));
        let producer = &self.producers[index];
        if producer.transactional {
            builder = builder.transactional();
            let txn = match producer.txn {
                Some(txn) => txn,
                None => {
                    self.txns.push(Txn {
                        producer_id: producer.producer_id,
                        epoch: producer.epoch,
                        ids: Vec::new(),
                        decided: None,
                        ended: false,
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
        let batch = builder.build();
        self.start_request(
            index,
            Request::Data {
                first_id,
                count,
                batch,
            },
        );
    }

    fn start_request(&mut self, index: usize, request: Request) {
        self.producers[index].outstanding.push_back(Outstanding {
            request,
            sent: None,
            retries: 0,
        });
        self.client_send(index);
    }

    /// A new connection: what the old one still carried is gone (answers included, and
    /// those the leader still holds, which it can no longer send), and every request in
    /// flight is to be sent again.
    fn client_reconnect(&mut self, index: usize) {
        let client = self.producers[index].client;
        self.trace(&("client reconnects", client));
        self.network.retain(|f| f.from != client && f.to != client);
        self.waiting.retain(|w| w.client != client);
        self.broken_connections.remove(&client);
        for outstanding in &mut self.producers[index].outstanding {
            if outstanding.sent.take().is_some() {
                outstanding.retries += 1;
            }
        }
    }

    /// Sends the producer's requests not sent yet, in order, to the node each goes to:
    /// the data partition's leader, or the transaction coordinator (none known: they wait
    /// for the next turn).
    fn client_send(&mut self, index: usize) {
        while let Some(position) = self.producers[index]
            .outstanding
            .iter()
            .position(|o| o.sent.is_none())
        {
            if !self.client_send_one(index, position) {
                return;
            }
        }
    }

    /// Sends request `position`; false if there is nowhere to send it.
    fn client_send_one(&mut self, index: usize, position: usize) -> bool {
        let producer = &self.producers[index];
        let (partition, node) = match producer.outstanding[position].request {
            Request::Data { .. } => match producer.connected() {
                Some(node) => (DATA, node),
                None => (DATA, self.leader_as_seen(DATA)),
            },
            _ => (TXN, self.leader_as_seen(TXN)),
        };
        if node <= 0 {
            return false;
        }
        let correlation = self.next_correlation();
        let first = match &self.producers[index].outstanding[position].request {
            Request::Data { first_id, .. } => *first_id,
            _ => -1,
        };
        self.trace(&("client sends", index, position, node, correlation, first));
        let producer = &mut self.producers[index];
        let outstanding = &mut producer.outstanding[position];
        outstanding.sent = Some((self.now_ms, correlation, node));
        let (client, producer_id, epoch) = (producer.client, producer.producer_id, producer.epoch);
        let transactional_id = producer.transactional.then(|| transactional_id(client));
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
                    transactional_id,
                }
            }
            Request::InitProducerId { expected } => Message::InitProducerId {
                transactional_id: transactional_id.unwrap_or_default(),
                expected: *expected,
            },
            Request::EndTxn { commit } => Message::EndTxn {
                transactional_id: transactional_id.unwrap_or_default(),
                producer_id,
                epoch,
                commit: *commit,
            },
        };
        self.outcome.client_requests += 1;
        self.send(client, node, correlation, partition, message);
        true
    }

    /// A leader handles a producer's batch or the coordinator's marker: the produce
    /// handler's steps on the real partition, the answer held until acks=all is met. A
    /// transaction's batch waits for the coordinator to add the partition first.
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
                transactional_id: None,
            } => {
                let appended = partition.append_unsynced(batch.clone(), -1);
                if appended
                    .as_ref()
                    .is_err_and(|r| r.code == error_code::OUT_OF_ORDER_SEQUENCE_NUMBER)
                {
                    self.check_refused_out_of_sequence(to, &batch);
                }
                appended
            }
            Message::Produce {
                batch,
                transactional_id: Some(transactional_id),
            } => {
                let Ok(header) = strand_records::BatchHeader::parse(&batch) else {
                    return;
                };
                // KIP-890 (transaction version 2): the leader asks the coordinator to
                // add the partition to the producer's transaction.
                let coordinator = self.controller.assignment(TXN).leader;
                if coordinator <= 0 {
                    let code = error_code::NOT_ENOUGH_REPLICAS; // no coordinator
                    self.answer(to, from, correlation, Err(code));
                    return;
                }
                let asked = self.next_correlation();
                self.verifying.push(Verifying {
                    leader: to,
                    leader_epoch,
                    client: from,
                    correlation,
                    asked,
                    at: self.now_ms,
                    batch,
                });
                let question = Message::AddPartition {
                    transactional_id,
                    producer_id: header.producer_id,
                    epoch: header.producer_epoch,
                };
                self.send(to, coordinator, asked, TXN, question);
                return;
            }
            Message::Marker {
                producer_id,
                epoch,
                commit,
                coordinator_epoch,
            } => {
                let marker = EndTxnMarker {
                    result: if commit {
                        TxnResult::Commit
                    } else {
                        TxnResult::Abort
                    },
                    coordinator_epoch,
                };
                partition.append_marker(producer_id, epoch, marker)
            }
            _ => return,
        };
        self.appended(partition, from, to, correlation, leader_epoch, appended);
    }

    /// The coordinator answered a leader's question: on its yes the transaction's batch
    /// is appended, guarded by what the partition knows of the producer now (transaction
    /// version 2 takes the guard after the yes: KAFKA-18575); otherwise the client gets
    /// the produce handler's error for the answer (verification.rs's mapping).
    pub(super) fn add_answer(&mut self, leader: i32, asked: u64, code: i16) {
        let Some(index) = self
            .verifying
            .iter()
            .position(|v| v.leader == leader && v.asked == asked)
        else {
            return;
        };
        let verifying = self.verifying.swap_remove(index);
        let (client, correlation) = (verifying.client, verifying.correlation);
        let Some(partition) = self
            .partition(leader)
            .filter(|p| p.leader_epoch_if_leader() == Some(verifying.leader_epoch))
        else {
            let code = error_code::NOT_LEADER_OR_FOLLOWER;
            self.answer(leader, client, correlation, Err(code));
            return;
        };
        let refusal = match code {
            error_code::NONE => None,
            error_code::PRODUCER_FENCED => Some(error_code::INVALID_PRODUCER_EPOCH),
            error_code::TRANSACTION_ABORTABLE => Some(error_code::INVALID_TXN_STATE),
            error_code::CONCURRENT_TRANSACTIONS => Some(error_code::CONCURRENT_TRANSACTIONS),
            error_code::NETWORK_EXCEPTION
            | error_code::COORDINATOR_LOAD_IN_PROGRESS
            | error_code::COORDINATOR_NOT_AVAILABLE
            | error_code::NOT_COORDINATOR => Some(error_code::NOT_ENOUGH_REPLICAS),
            other => Some(other),
        };
        if let Some(code) = refusal {
            self.trace(&("add refused", leader, client, code));
            self.answer(leader, client, correlation, Err(code));
            return;
        }
        let Ok(header) = strand_records::BatchHeader::parse(&verifying.batch) else {
            return;
        };
        let guard = partition
            .log()
            .producer_state()
            .get(header.producer_id)
            .map(|entry| entry.last_offset);
        let appended = partition.append_transactional(
            verifying.batch,
            -1,
            (header.producer_id, header.producer_epoch, guard),
        );
        self.appended(
            &partition,
            client,
            leader,
            correlation,
            verifying.leader_epoch,
            appended,
        );
    }

    /// A leader's append for `from`: held for acks=all once durable (flush before ack),
    /// or answered with its refusal.
    fn appended(
        &mut self,
        partition: &Partition,
        from: i32,
        to: i32,
        correlation: u64,
        leader_epoch: i32,
        appended: Result<
            (
                strand_log::AppendInfo,
                Option<strand_broker::partition::Durable>,
            ),
            strand_broker::partition::Refusal,
        >,
    ) {
        match appended {
            Ok((info, durable)) => {
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
                    durable,
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
        self.trace(&("answer", from, to, correlation, result));
        self.send(from, to, correlation, DATA, Message::Answer { result });
    }

    /// acks=all for held answers: sent once the high watermark passes the batch in the
    /// epoch it was taken in (NOT_LEADER_OR_FOLLOWER if leadership moved first). Batches
    /// whose coordinator did not answer in time are dropped (their clients time out).
    pub(super) fn answer_waiting(&mut self) {
        let now = self.now_ms;
        self.verifying.retain(|v| now - v.at < CLIENT_TIMEOUT_MS);
        for mut waiting in std::mem::take(&mut self.waiting) {
            let Some(partition) = self.partition(waiting.leader) else {
                continue; // crashed: the client times out
            };
            // The produce handler waits for the sync first, then for the replicas.
            if let Some(durable) = &waiting.durable {
                match self.poll_leader_sync(waiting.leader, DATA, durable) {
                    None => {
                        self.waiting.push(waiting);
                        continue;
                    }
                    Some(Err(_)) => {
                        let error = Err(error_code::KAFKA_STORAGE_ERROR);
                        self.answer(waiting.leader, waiting.client, waiting.correlation, error);
                        continue;
                    }
                    Some(Ok(())) => waiting.durable = None,
                }
            }
            let result = if partition.leader_epoch_if_leader() != Some(waiting.leader_epoch) {
                Err(error_code::NOT_LEADER_OR_FOLLOWER)
            } else if partition.high_watermark() >= waiting.end {
                Ok(waiting.first_offset)
            } else {
                self.waiting.push(waiting);
                continue;
            };
            self.answer(waiting.leader, waiting.client, waiting.correlation, result);
        }
    }

    /// Producer `to` and the position of its request numbered `correlation` (none: a
    /// stale answer).
    fn answered(&mut self, to: i32, correlation: u64) -> Option<(usize, usize)> {
        let index = (to - CLIENT_BASE) as usize;
        let position = self.producers[index]
            .outstanding
            .iter()
            .position(|o| o.sent.map(|(_, c, _)| c) == Some(correlation))?;
        Some((index, position))
    }

    /// A producer reads the answer to a batch.
    pub(super) fn client_answer(&mut self, to: i32, correlation: u64, result: Result<i64, i16>) {
        let Some((index, position)) = self.answered(to, correlation) else {
            return;
        };
        let producer = &mut self.producers[index];
        match result {
            Ok(first_offset) => {
                let Some(Outstanding {
                    request:
                        Request::Data {
                            first_id, count, ..
                        },
                    ..
                }) = producer.outstanding.remove(position)
                else {
                    return;
                };
                for delta in 0..count {
                    self.acked.insert(first_offset + delta, first_id + delta);
                }
                self.outcome.client_acked += count as usize;
                self.trace(&("client acked", to, first_offset));
            }
            Err(code) => self.client_refused(index, position, code),
        }
    }

    /// A transactional producer reads the coordinator's answer to its InitProducerId
    /// or EndTxn: its producer id and epoch from now on.
    pub(super) fn client_producer_answer(
        &mut self,
        to: i32,
        correlation: u64,
        result: Result<(i64, i16), i16>,
    ) {
        let Some((index, position)) = self.answered(to, correlation) else {
            return;
        };
        let ((producer_id, epoch), request) = match result {
            Ok(answer) => (answer, self.producers[index].outstanding.remove(position)),
            Err(code) => return self.client_refused(index, position, code),
        };
        self.trace(&("producer id", to, producer_id, epoch));
        let producer = &mut self.producers[index];
        (producer.producer_id, producer.epoch) = (producer_id, epoch);
        producer.next_sequence = 0;
        let Some(Outstanding {
            request: Request::EndTxn { commit },
            ..
        }) = request
        else {
            return;
        };
        let Some(txn) = producer.txn.take() else {
            return;
        };
        self.txns[txn].ended = true;
        let decided = self.txns[txn].decided;
        if decided != Some(commit) {
            let producer_id = self.txns[txn].producer_id;
            self.violation(format!(
                "producer {producer_id}'s EndTxn ({}) was answered, but its transaction was {}",
                if commit { "commit" } else { "abort" },
                match decided {
                    Some(true) => "committed",
                    Some(false) => "aborted",
                    None => "never prepared",
                }
            ));
        }
    }

    /// A producer's request was refused: retried (with every request in flight after
    /// it), or (a transactional producer fenced) the transaction given up and the
    /// producer recovering; anything else is a violation (no client could go on).
    fn client_refused(&mut self, index: usize, position: usize, code: i16) {
        let producer = &mut self.producers[index];
        let (client, producer_id, epoch) = (producer.client, producer.producer_id, producer.epoch);
        let outstanding = &mut producer.outstanding[position];
        let expected = match outstanding.request {
            Request::InitProducerId { expected } => expected,
            _ => None,
        };
        // A pipelined batch out of sequence behind one that failed (Java retries it).
        let out_of_sequence = code == error_code::OUT_OF_ORDER_SEQUENCE_NUMBER;
        let head_out_of_sequence = out_of_sequence && position == 0;
        if head_out_of_sequence && !producer.transactional {
            self.sequence_reset(index);
        } else if retriable(code) || (out_of_sequence && !head_out_of_sequence) {
            // Sent again at the producer's next turn, with every request behind it.
            outstanding.sent = None;
            self.trace(&("client retries", client, code));
        } else if producer.transactional && (fenced(code) || head_out_of_sequence) {
            // Out of sequence at the head, a transactional producer's transaction is
            // abortable (Java); it recovers as from a fence, by InitProducerId with its
            // id and epoch, which aborts the transaction and bumps the epoch (KIP-360),
            // while the batches still in flight are left to KIP-890's guard.
            // A new InitProducerId: with the id and epoch held, unless those were just
            // refused (a new producer instance, then).
            let expected = match expected {
                Some(_) => None,
                None if producer_id >= 0 => Some((producer_id, epoch)),
                None => None,
            };
            producer.txn = None;
            producer.ending = None;
            producer.outstanding.clear();
            self.outcome.txns_given_up += 1;
            self.trace(&("transaction given up", client, code));
            self.start_request(index, Request::InitProducerId { expected });
        } else {
            let request = format!("{:?}", outstanding.request);
            producer.outstanding.clear();
            self.violation(format!(
                "producer {producer_id} was refused with error {code}, which it cannot retry: {}",
                request.chars().take(120).collect::<String>()
            ));
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

    /// A leader refused a batch as out of sequence: it must not hold it (a retry of a
    /// batch its log has, within the five its producer state remembers, is a duplicate;
    /// refusing it would fail a batch that is in the log). A copy held only by another
    /// replica may still win later (a follower that took it from an earlier leader and
    /// is elected once this leader's epoch is lost): Kafka promises nothing of a batch
    /// failed out of sequence, and neither does this check.
    fn check_refused_out_of_sequence(&mut self, leader: i32, batch: &[u8]) {
        let (ids, _) = super::record_ids(batch);
        let end = self
            .partition(leader)
            .map_or(0, |p| p.log().log_end_offset());
        let held = match self.records_of(leader, DATA, end) {
            Ok(held) => held,
            Err(error) => {
                self.violation(format!("reading node {leader}'s log failed: {error:#}"));
                return;
            }
        };
        let mut in_log = held
            .iter()
            .filter(|(_, (id, _))| ids.iter().any(|r| r.1 == *id));
        if let Some((offset, (id, _))) = in_log.next() {
            self.violation(format!(
                "node {leader} refused a batch out of sequence whose record {id} it holds at offset {offset}"
            ));
        }
    }

    /// The first batch in flight was refused out of sequence (a later one reached the
    /// leader first and, the producer unknown there, was taken: Kafka takes any sequence
    /// from a producer it does not know). As Java's producer: that batch fails (it is
    /// never acknowledged, and never in a log), and once nothing else is in flight the
    /// epoch is bumped and sequences start again from 0.
    fn sequence_reset(&mut self, index: usize) {
        let producer = &mut self.producers[index];
        let Some(Outstanding {
            request: Request::Data { first_id, .. },
            ..
        }) = producer.outstanding.pop_front()
        else {
            return;
        };
        producer.bump_epoch = true;
        let client = producer.client;
        self.outcome.sequence_resets += 1;
        self.trace(&("out of sequence", client, first_id));
    }

    /// Node `id`'s process died: its connections are reset (the kernel closes a killed
    /// process's sockets), so the producers connected to it resend what was in flight
    /// over a new connection at their next turn.
    pub(super) fn connections_reset(&mut self, id: i32) {
        for index in 0..self.producers.len() {
            if self.producers[index].connected() == Some(id) {
                self.client_reconnect(index);
            }
        }
    }

    /// Whether `id` is a producer pipelining its batches (over an ordered connection).
    pub(super) fn pipelined(&self, id: i32) -> bool {
        usize::try_from(id - CLIENT_BASE)
            .ok()
            .and_then(|index| self.producers.get(index))
            .is_some_and(|p| p.max_in_flight > 1)
    }

    /// Whether every producer is done: nothing outstanding, no transaction open.
    pub(super) fn clients_idle(&self) -> bool {
        self.producers
            .iter()
            .all(|p| p.outstanding.is_empty() && p.txn.is_none())
    }

    /// The producers not done, for a liveness report.
    pub(super) fn clients_busy(&self) -> Vec<String> {
        self.producers
            .iter()
            .filter(|p| !p.outstanding.is_empty() || p.txn.is_some())
            .map(|p| {
                format!(
                    "{} (epoch {}, txn {:?}, {:?})",
                    p.producer_id,
                    p.epoch,
                    p.txn,
                    p.outstanding
                        .iter()
                        .map(|o| (o.sent, o.retries))
                        .collect::<Vec<_>>()
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
                // Never prepared: none of it may be in the log (a transaction whose
                // batches the coordinator never took; an open one would hold the last
                // stable offset, which liveness checks).
                None => seen != 0,
            };
            if wrong && found.len() < 3 {
                all_aborted.sort();
                all_aborted.dedup();
                found.push(format!(
                    "producer {}'s transaction of records {:?} at offsets {:?} ({}, {}): {seen} of its {} records visible to read_committed (aborted transactions read: {:?})",
                    txn.producer_id,
                    txn.ids.iter().take(6).collect::<Vec<_>>(),
                    txn.ids.iter().take(6).map(|id| offsets.get(id)).collect::<Vec<_>>(),
                    match txn.decided {
                        Some(true) => "committed",
                        Some(false) => "aborted",
                        None => "never prepared",
                    },
                    if txn.ended { "EndTxn answered" } else { "EndTxn not answered" },
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
