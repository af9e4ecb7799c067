//! One share-partition (KIP-932): the records of one topic partition as one share group
//! consumes them. Each record between the start offset (SPSO) and the end offset (SPEO)
//! is in flight: available to be acquired, acquired by a member under a time lock, or
//! settled (acknowledged, or archived: rejected, a gap, delivered too often). Members
//! acquire records with ShareFetch and settle them with acknowledgements; the start offset
//! moves past every settled record.
//!
//! Only unsettled records are held, one entry each: an offset between the start and end
//! offsets without an entry is settled (or was never a record: compacted away, a
//! transaction marker, an aborted batch under read_committed). So the state held is
//! bounded by the in-flight limit (group.share.partition.max.record.locks), whatever the
//! gaps in the log.
//!
//! A plain state machine: the log's batches and the time are passed in; the caller keeps
//! the state durable (`persisted`) and reads the log.

use std::collections::BTreeMap;

use strand_types::error_code;

/// Kafka's record states, with their ids in the share state (ShareSnapshot's StateBatches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordState {
    Available,
    Acquired,
    Acknowledged,
    Archived,
}

impl RecordState {
    pub fn id(self) -> i8 {
        match self {
            RecordState::Available => 0,
            RecordState::Acquired => 1,
            RecordState::Acknowledged => 2,
            RecordState::Archived => 4,
        }
    }

    pub fn from_id(id: i8) -> Option<RecordState> {
        match id {
            0 => Some(RecordState::Available),
            1 => Some(RecordState::Acquired),
            2 => Some(RecordState::Acknowledged),
            4 => Some(RecordState::Archived),
            _ => None,
        }
    }

    fn settled(self) -> bool {
        matches!(self, RecordState::Acknowledged | RecordState::Archived)
    }
}

/// Acknowledgement types of ShareFetch and ShareAcknowledge.
pub const ACK_GAP: i8 = 0;
pub const ACK_ACCEPT: i8 = 1;
pub const ACK_RELEASE: i8 = 2;
pub const ACK_REJECT: i8 = 3;
/// KIP-1222: keep the records and renew their lock (share.renew.acknowledge.enable).
pub const ACK_RENEW: i8 = 4;

/// Checks the shape of a request's acknowledgements as Kafka's
/// validateAcknowledgementBatches does (INVALID_REQUEST): ranges in order and not
/// inverted, one type or one per offset, types known at the request's version (RENEW
/// only in a v2 request marked IsRenewAck).
pub fn check_batches(batches: &[(i64, i64, Vec<i8>)], renew_allowed: bool) -> Result<(), i16> {
    let top = if renew_allowed { ACK_RENEW } else { ACK_REJECT };
    let mut previous_last = i64::MIN;
    for (first, last, types) in batches {
        let count = last.checked_sub(*first).and_then(|d| d.checked_add(1));
        let valid = first <= last
            && *first > previous_last
            && !types.is_empty()
            && (types.len() == 1 || count == Some(types.len() as i64))
            && types.iter().all(|t| (ACK_GAP..=top).contains(t));
        if !valid {
            return Err(error_code::INVALID_REQUEST);
        }
        previous_last = *last;
    }
    Ok(())
}

/// The settings a share-partition runs under (group.share.* and the group's configs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShareLimits {
    /// share.record.lock.duration.ms
    pub lock_duration_ms: i64,
    /// share.delivery.count.limit
    pub delivery_count_limit: i16,
    /// share.partition.max.record.locks: offsets between the start and end offsets.
    pub max_in_flight: i64,
}

impl Default for ShareLimits {
    fn default() -> Self {
        ShareLimits {
            lock_duration_ms: 30_000,
            delivery_count_limit: 5,
            max_in_flight: 2_000,
        }
    }
}

/// The most offsets a restored state may span past its start offset (a sanity bound on
/// what the share coordinator hands back; Kafka's own limit is 10,000).
const RESTORED_SPAN_MAX: i64 = 100_000;

/// An unsettled record.
#[derive(Debug, Clone, PartialEq, Eq)]
struct InFlight {
    acquired: Option<Holder>,
    delivery_count: i16,
}

/// Who holds an acquired record, and until when.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Holder {
    member: String,
    /// The connection of the share session it was acquired in: a session closing with
    /// its connection releases only what it acquired, not what the same member acquired
    /// since on a new connection.
    connection: u64,
    lock_deadline_ms: i64,
}

/// A batch of the log as the share-partition sees it: its offsets, and whether it is a
/// control batch (a transaction marker: never delivered) or of an aborted transaction
/// (never delivered under read_committed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogBatch {
    pub base_offset: i64,
    pub last_offset: i64,
    pub skip: bool,
}

/// Records a member acquired: `first..=last`, each delivered `delivery_count` times now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Acquired {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
}

/// A run of records with one state and delivery count, as the share state keeps it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateBatch {
    pub first: i64,
    pub last: i64,
    pub delivery_count: i16,
    pub state: RecordState,
}

/// What is kept durable: the start offset and the state of the records in flight, the
/// last batch ending at the end offset (an acquired record is kept as available: its lock
/// does not outlive the leader).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Persisted {
    pub start_offset: i64,
    pub batches: Vec<StateBatch>,
}

#[derive(Debug, Clone)]
pub struct SharePartition {
    start_offset: i64,
    end_offset: i64,
    /// The unsettled records in [start_offset, end_offset).
    records: BTreeMap<i64, InFlight>,
    limits: ShareLimits,
}

impl SharePartition {
    /// A share-partition starting at `start_offset` (share.auto.offset.reset decided it)
    /// or restored from its persisted state. Batches that make no sense (inverted, before
    /// the start, beyond a sane span) are left out: those offsets count as settled.
    pub fn new(persisted: &Persisted, limits: ShareLimits) -> SharePartition {
        let start = persisted.start_offset;
        let mut records = BTreeMap::new();
        let mut end_offset = start;
        for batch in &persisted.batches {
            if batch.last < batch.first || batch.last < start {
                continue;
            }
            // Settled runs only say where the end offset is, however far (markers and
            // aborted batches take offsets past the in-flight limit); unsettled ones are
            // held record by record, so a span no leader could have left is refused.
            if batch.state.settled() {
                end_offset = end_offset.max(batch.last.saturating_add(1));
                continue;
            }
            if batch.last.saturating_sub(start) >= RESTORED_SPAN_MAX {
                continue;
            }
            end_offset = end_offset.max(batch.last + 1);
            for offset in batch.first.max(start)..=batch.last {
                records.insert(
                    offset,
                    InFlight {
                        acquired: None,
                        delivery_count: batch.delivery_count.max(0),
                    },
                );
            }
        }
        let mut partition = SharePartition {
            start_offset: start,
            end_offset,
            records,
            limits,
        };
        partition.advance_start();
        partition
    }

    pub fn set_limits(&mut self, limits: ShareLimits) {
        self.limits = limits;
    }

    pub fn start_offset(&self) -> i64 {
        self.start_offset
    }

    pub fn end_offset(&self) -> i64 {
        self.end_offset
    }

    /// Where the next read of the log starts: the first available record in flight, or
    /// the end offset.
    pub fn next_fetch_offset(&self) -> i64 {
        self.records
            .iter()
            .find(|(_, r)| r.acquired.is_none())
            .map_or(self.end_offset, |(offset, _)| *offset)
    }

    /// Whether a fetch can acquire anything: a record in flight is available, or there
    /// is room for new ones.
    pub fn can_acquire(&self) -> bool {
        self.records.values().any(|r| r.acquired.is_none())
            || self.end_offset - self.start_offset < self.limits.max_in_flight
    }

    /// The earliest lock that will expire.
    pub fn next_lock_deadline(&self) -> Option<i64> {
        self.records
            .values()
            .filter_map(|r| r.acquired.as_ref().map(|h| h.lock_deadline_ms))
            .min()
    }

    /// The log's start moved past records in flight (retention, DeleteRecords): they
    /// are gone, settled or not.
    pub fn log_start_moved(&mut self, log_start: i64) {
        if log_start <= self.start_offset {
            return;
        }
        self.records = self.records.split_off(&log_start);
        self.start_offset = log_start;
        self.end_offset = self.end_offset.max(log_start);
        self.advance_start();
    }

    /// Acquires for `member` (on `connection`) the records of `batches`, read from the log
    /// at `read_from` in order, that are available or new, up to `max_records` records
    /// (whole batches: Kafka's batch-optimized mode; `strict`, its record-limit mode,
    /// stops at exactly `max_records`) and within the in-flight limit. Available records
    /// the read skipped over (compacted away since) are settled.
    #[allow(clippy::too_many_arguments)]
    pub fn acquire(
        &mut self,
        member: &str,
        connection: u64,
        batches: &[LogBatch],
        read_from: i64,
        max_records: i64,
        strict: bool,
        now_ms: i64,
    ) -> Vec<Acquired> {
        self.expire_locks(now_ms);
        let deadline = now_ms + self.limits.lock_duration_ms;
        let limit = max_records.max(1);
        let mut acquired: Vec<Acquired> = Vec::new();
        let mut count = 0i64;
        let mut cursor = read_from.max(self.start_offset);
        'batches: for batch in batches {
            if count >= limit {
                break;
            }
            if batch.last_offset < cursor || batch.last_offset < batch.base_offset {
                continue;
            }
            // What the log no longer has between here and this batch is settled.
            self.settle_available(cursor, batch.base_offset);
            let from = batch.base_offset.max(cursor);
            if batch.skip {
                // A marker or an aborted batch: never delivered, settled as it is.
                self.settle_available(from, batch.last_offset.saturating_add(1));
                self.end_offset = self.end_offset.max(batch.last_offset + 1);
                cursor = batch.last_offset + 1;
                continue;
            }
            // Nothing in flight and the log jumps ahead (compaction): the gap is settled and
            // does not count against the in-flight limit.
            if self.records.is_empty() && from > self.end_offset {
                self.start_offset = from;
                self.end_offset = from;
            }
            // Records already in flight first, then new ones up to the in-flight limit.
            let held_to = batch.last_offset.min(self.end_offset - 1);
            let held: Vec<i64> = if from <= held_to {
                self.records
                    .range(from..=held_to)
                    .filter(|(_, r)| r.acquired.is_none())
                    .map(|(o, _)| *o)
                    .collect()
            } else {
                Vec::new()
            };
            let new_from = from.max(self.end_offset);
            let new_to = batch
                .last_offset
                .min(self.start_offset + self.limits.max_in_flight - 1);
            let fresh = (new_from <= new_to).then_some(new_from..=new_to);
            for offset in held.into_iter().chain(fresh.into_iter().flatten()) {
                if strict && count >= limit {
                    break 'batches;
                }
                if offset >= self.end_offset {
                    self.end_offset = offset + 1;
                }
                let record = self.records.entry(offset).or_insert(InFlight {
                    acquired: None,
                    delivery_count: 0,
                });
                record.delivery_count = record.delivery_count.saturating_add(1);
                record.acquired = Some(Holder {
                    member: member.to_string(),
                    connection,
                    lock_deadline_ms: deadline,
                });
                count += 1;
                match acquired.last_mut() {
                    Some(run)
                        if run.last + 1 == offset
                            && run.delivery_count == record.delivery_count =>
                    {
                        run.last = offset;
                    }
                    _ => acquired.push(Acquired {
                        first: offset,
                        last: offset,
                        delivery_count: record.delivery_count,
                    }),
                }
            }
            if batch.last_offset >= self.end_offset {
                // The in-flight limit stopped this batch: nothing past it this time.
                break;
            }
            cursor = batch.last_offset + 1;
        }
        self.advance_start();
        acquired
    }

    /// Available records in [from, to) are settled (they are no longer in the log).
    fn settle_available(&mut self, from: i64, to: i64) {
        let to = to.min(self.end_offset);
        if from >= to {
            return;
        }
        let gone: Vec<i64> = self
            .records
            .range(from..to)
            .filter(|(_, r)| r.acquired.is_none())
            .map(|(o, _)| *o)
            .collect();
        for offset in gone {
            self.records.remove(&offset);
        }
    }

    /// Applies a member's acknowledgements: for each `(first, last, types)`, one type for
    /// the whole range or one per offset (their shape checked by `check_batches`). All or
    /// nothing: a record not acquired by this member fails the lot with
    /// INVALID_RECORD_STATE; a range past the records in flight is INVALID_REQUEST;
    /// records below the start offset are settled already and skipped.
    pub fn acknowledge(
        &mut self,
        member: &str,
        batches: &[(i64, i64, Vec<i8>)],
        now_ms: i64,
    ) -> Result<(), i16> {
        self.expire_locks(now_ms);
        for (first, last, _) in batches {
            if *last < self.start_offset {
                continue;
            }
            if *first >= self.end_offset || *last >= self.end_offset {
                return Err(error_code::INVALID_REQUEST);
            }
            for offset in (*first).max(self.start_offset)..=*last {
                let holder = self.records.get(&offset).and_then(|r| r.acquired.as_ref());
                if holder.is_none_or(|h| h.member != member) {
                    return Err(error_code::INVALID_RECORD_STATE);
                }
            }
        }
        let limit = self.limits.delivery_count_limit;
        let renewed = now_ms + self.limits.lock_duration_ms;
        for (first, last, types) in batches {
            for offset in (*first).max(self.start_offset)..=*last {
                let kind = if types.len() == 1 {
                    types[0]
                } else {
                    types[(offset - first) as usize]
                };
                match kind {
                    ACK_ACCEPT | ACK_GAP | ACK_REJECT => {
                        self.records.remove(&offset);
                    }
                    ACK_RELEASE => self.release(offset, limit),
                    _ => {
                        if let Some(holder) = self
                            .records
                            .get_mut(&offset)
                            .and_then(|r| r.acquired.as_mut())
                        {
                            holder.lock_deadline_ms = renewed;
                        }
                    }
                }
            }
        }
        self.advance_start();
        Ok(())
    }

    /// Back to the others, or settled (archived) once delivered as often as allowed.
    fn release(&mut self, offset: i64, delivery_count_limit: i16) {
        let archive = match self.records.get_mut(&offset) {
            Some(record) => {
                record.acquired = None;
                record.delivery_count >= delivery_count_limit
            }
            None => false,
        };
        if archive {
            self.records.remove(&offset);
        }
    }

    /// What `member` acquired on `connection` (None: on any) goes back to the others (its
    /// share session closed). Whether anything did.
    pub fn release_member(&mut self, member: &str, connection: Option<u64>) -> bool {
        let limit = self.limits.delivery_count_limit;
        let held: Vec<i64> = self
            .records
            .iter()
            .filter(|(_, r)| {
                r.acquired.as_ref().is_some_and(|h| {
                    h.member == member && connection.is_none_or(|c| c == h.connection)
                })
            })
            .map(|(o, _)| *o)
            .collect();
        for offset in &held {
            self.release(*offset, limit);
        }
        self.advance_start();
        !held.is_empty()
    }

    /// Locks that ran out: their records are available again (or archived at the
    /// delivery limit). Whether any did.
    pub fn expire_locks(&mut self, now_ms: i64) -> bool {
        let limit = self.limits.delivery_count_limit;
        let expired: Vec<i64> = self
            .records
            .iter()
            .filter(|(_, r)| {
                r.acquired
                    .as_ref()
                    .is_some_and(|h| h.lock_deadline_ms <= now_ms)
            })
            .map(|(o, _)| *o)
            .collect();
        for offset in &expired {
            self.release(*offset, limit);
        }
        if !expired.is_empty() {
            self.advance_start();
        }
        !expired.is_empty()
    }

    /// The state to keep durable: the unsettled records (acquired ones as available) and
    /// the settled runs between them, up to the end offset.
    pub fn persisted(&self) -> Persisted {
        let mut batches: Vec<StateBatch> = Vec::new();
        let mut next = self.start_offset;
        for (&offset, record) in &self.records {
            if offset > next {
                batches.push(settled(next, offset - 1));
            }
            match batches.last_mut() {
                Some(batch)
                    if batch.last + 1 == offset
                        && batch.state == RecordState::Available
                        && batch.delivery_count == record.delivery_count =>
                {
                    batch.last = offset;
                }
                _ => batches.push(StateBatch {
                    first: offset,
                    last: offset,
                    delivery_count: record.delivery_count,
                    state: RecordState::Available,
                }),
            }
            next = offset + 1;
        }
        if self.end_offset > next {
            batches.push(settled(next, self.end_offset - 1));
        }
        Persisted {
            start_offset: self.start_offset,
            batches,
        }
    }

    /// Records settled between the start and end offsets (KIP-1226's DeliveryCompleteCount).
    pub fn delivery_complete_count(&self) -> i64 {
        (self.end_offset - self.start_offset) - self.records.len() as i64
    }

    /// Records in flight, unsettled (for tests): (offset, acquired, delivery count).
    pub fn in_flight(&self) -> Vec<(i64, bool, i16)> {
        self.records
            .iter()
            .map(|(o, r)| (*o, r.acquired.is_some(), r.delivery_count))
            .collect()
    }

    fn advance_start(&mut self) {
        self.start_offset = match self.records.keys().next() {
            // An offset without an entry is settled: the start moves to the first one left.
            Some(first) => (*first).max(self.start_offset),
            None => self.end_offset.max(self.start_offset),
        };
    }
}

/// A settled run, as the share state writes it.
fn settled(first: i64, last: i64) -> StateBatch {
    StateBatch {
        first,
        last,
        delivery_count: 0,
        state: RecordState::Archived,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(base: i64, last: i64) -> LogBatch {
        LogBatch {
            base_offset: base,
            last_offset: last,
            skip: false,
        }
    }

    fn fresh(start: i64) -> SharePartition {
        SharePartition::new(
            &Persisted {
                start_offset: start,
                batches: Vec::new(),
            },
            ShareLimits::default(),
        )
    }

    fn run(first: i64, last: i64, delivery_count: i16) -> Acquired {
        Acquired {
            first,
            last,
            delivery_count,
        }
    }

    /// Acquires what a read at the next fetch offset would return (locks run out first,
    /// as `share::read_and_acquire` has them).
    fn take(
        sp: &mut SharePartition,
        member: &str,
        batches: &[LogBatch],
        max: i64,
        now: i64,
    ) -> Vec<Acquired> {
        sp.expire_locks(now);
        let from = sp.next_fetch_offset();
        sp.acquire(member, 1, batches, from, max, false, now)
    }

    #[test]
    fn members_never_hold_the_same_record_and_acks_move_the_start() {
        let mut sp = fresh(0);
        let got = take(&mut sp, "a", &[batch(0, 4), batch(5, 9)], 5, 0);
        assert_eq!(got, vec![run(0, 4, 1)]);
        assert_eq!(sp.next_fetch_offset(), 5);
        let got = take(&mut sp, "b", &[batch(5, 9)], 500, 0);
        assert_eq!(got, vec![run(5, 9, 1)]);
        // b may not settle a's records; a may.
        assert_eq!(
            sp.acknowledge("b", &[(0, 0, vec![ACK_ACCEPT])], 1),
            Err(error_code::INVALID_RECORD_STATE)
        );
        sp.acknowledge("b", &[(5, 9, vec![ACK_ACCEPT])], 1).unwrap();
        assert_eq!(sp.start_offset(), 0, "0..4 still held by a");
        assert_eq!(sp.delivery_complete_count(), 5);
        sp.acknowledge("a", &[(0, 4, vec![ACK_ACCEPT])], 1).unwrap();
        assert_eq!(sp.start_offset(), 10);
        assert!(sp.in_flight().is_empty());
    }

    #[test]
    fn released_records_are_delivered_again_until_the_limit() {
        let mut sp = fresh(0);
        for attempt in 1..=5 {
            let got = take(&mut sp, "a", &[batch(0, 1)], 500, 0);
            assert_eq!(got, vec![run(0, 1, attempt)]);
            sp.acknowledge("a", &[(0, 1, vec![ACK_RELEASE])], 0)
                .unwrap();
        }
        // The fifth release archives them: the start moves past.
        assert_eq!(sp.start_offset(), 2);
        assert!(take(&mut sp, "a", &[batch(0, 1)], 500, 0).is_empty());
    }

    #[test]
    fn a_lock_that_runs_out_hands_the_records_to_another_member() {
        let mut sp = fresh(0);
        take(&mut sp, "a", &[batch(0, 2)], 500, 0);
        assert_eq!(sp.next_lock_deadline(), Some(30_000));
        assert!(take(&mut sp, "b", &[batch(0, 2)], 500, 29_999).is_empty());
        let got = take(&mut sp, "b", &[batch(0, 2)], 500, 30_000);
        assert_eq!(got, vec![run(0, 2, 2)]);
        assert_eq!(
            sp.acknowledge("a", &[(0, 2, vec![ACK_ACCEPT])], 30_001),
            Err(error_code::INVALID_RECORD_STATE)
        );
    }

    #[test]
    fn per_offset_types_gaps_and_rejects_settle_and_releases_come_back() {
        let mut sp = fresh(10);
        take(&mut sp, "a", &[batch(10, 13)], 500, 0);
        sp.acknowledge(
            "a",
            &[(10, 13, vec![ACK_ACCEPT, ACK_GAP, ACK_RELEASE, ACK_REJECT])],
            0,
        )
        .unwrap();
        assert_eq!(sp.start_offset(), 12);
        assert_eq!(sp.next_fetch_offset(), 12);
        let got = take(&mut sp, "b", &[batch(10, 13)], 500, 0);
        assert_eq!(got, vec![run(12, 12, 2)]);
        assert_eq!(
            sp.acknowledge("b", &[(12, 13, vec![ACK_ACCEPT])], 0),
            Err(error_code::INVALID_RECORD_STATE),
            "13 is archived already"
        );
        assert_eq!(
            check_batches(&[(12, 12, vec![9])], true),
            Err(error_code::INVALID_REQUEST)
        );
        assert_eq!(
            check_batches(&[(12, 13, vec![ACK_ACCEPT, ACK_ACCEPT, ACK_ACCEPT])], true),
            Err(error_code::INVALID_REQUEST)
        );
        assert_eq!(
            check_batches(&[(12, 12, vec![ACK_RENEW])], false),
            Err(error_code::INVALID_REQUEST),
            "RENEW only in a renewing v2 request"
        );
        assert_eq!(
            check_batches(&[(12, 13, vec![1]), (13, 14, vec![1])], true),
            Err(error_code::INVALID_REQUEST),
            "overlapping ranges"
        );
        assert_eq!(
            check_batches(&[(i64::MIN, i64::MAX, vec![1, 1])], true),
            Err(error_code::INVALID_REQUEST),
            "no overflow on a hostile range"
        );
        assert_eq!(
            sp.acknowledge("b", &[(12, 20, vec![ACK_ACCEPT])], 0),
            Err(error_code::INVALID_REQUEST),
            "past the records in flight"
        );
    }

    #[test]
    fn the_in_flight_limit_bounds_new_records_and_max_records_is_batch_aligned() {
        let mut sp = fresh(0);
        sp.set_limits(ShareLimits {
            max_in_flight: 4,
            ..ShareLimits::default()
        });
        let got = take(&mut sp, "a", &[batch(0, 2), batch(3, 5)], 2, 0);
        assert_eq!(got, vec![run(0, 2, 1)], "the whole first batch");
        let got = take(&mut sp, "b", &[batch(3, 5)], 500, 0);
        assert_eq!(got, vec![run(3, 3, 1)], "only one more fits");
        assert!(!sp.can_acquire());
        sp.acknowledge("a", &[(0, 2, vec![ACK_ACCEPT])], 0).unwrap();
        assert!(sp.can_acquire());
    }

    #[test]
    fn the_record_limit_mode_stops_inside_a_batch() {
        let mut sp = fresh(0);
        let got = sp.acquire("a", 1, &[batch(0, 9)], 0, 3, true, 0);
        assert_eq!(got, vec![run(0, 2, 1)]);
        assert_eq!(sp.next_fetch_offset(), 3);
        let got = sp.acquire("b", 1, &[batch(0, 9)], 3, 3, true, 0);
        assert_eq!(got, vec![run(3, 5, 1)]);
    }

    #[test]
    fn markers_and_gaps_are_never_delivered_and_cost_nothing() {
        let mut sp = fresh(0);
        let marker = LogBatch {
            base_offset: 2,
            last_offset: 2,
            skip: true,
        };
        // A gap of a billion offsets (compaction) between 2 and the next batch.
        let far = 1_000_000_000;
        let got = take(
            &mut sp,
            "a",
            &[batch(0, 1), marker, batch(far, far + 1)],
            500,
            0,
        );
        assert_eq!(
            got,
            vec![run(0, 1, 1)],
            "the in-flight limit stops at the gap"
        );
        assert_eq!(sp.in_flight().len(), 2);
        sp.acknowledge("a", &[(0, 1, vec![ACK_ACCEPT])], 0).unwrap();
        assert_eq!(sp.start_offset(), 3);
        let got = take(&mut sp, "a", &[batch(far, far + 1)], 500, 0);
        assert_eq!(got, vec![run(far, far + 1, 1)]);
        sp.acknowledge("a", &[(far, far + 1, vec![ACK_ACCEPT])], 0)
            .unwrap();
        assert_eq!(sp.start_offset(), far + 2);
    }

    #[test]
    fn a_released_record_compacted_away_is_settled_not_waited_for() {
        let mut sp = fresh(0);
        take(&mut sp, "a", &[batch(0, 3)], 500, 0);
        sp.acknowledge(
            "a",
            &[(0, 3, vec![ACK_ACCEPT, ACK_RELEASE, ACK_ACCEPT, ACK_ACCEPT])],
            0,
        )
        .unwrap();
        assert_eq!(sp.next_fetch_offset(), 1);
        // The cleaner removed offset 1: the read from 1 starts at the next batch.
        let got = take(&mut sp, "b", &[batch(4, 5)], 500, 0);
        assert_eq!(got, vec![run(4, 5, 1)]);
        assert_eq!(sp.start_offset(), 4);
    }

    #[test]
    fn the_persisted_state_restores_what_was_settled_and_frees_what_was_held() {
        let mut sp = fresh(0);
        take(&mut sp, "a", &[batch(0, 5)], 500, 0);
        sp.acknowledge(
            "a",
            &[(1, 1, vec![ACK_ACCEPT]), (3, 3, vec![ACK_REJECT])],
            0,
        )
        .unwrap();
        sp.acknowledge("a", &[(5, 5, vec![ACK_ACCEPT])], 0).unwrap();
        let persisted = sp.persisted();
        assert_eq!(persisted.start_offset, 0);
        assert_eq!(
            persisted.batches.last().unwrap().last,
            5,
            "the end offset is kept"
        );
        let restored = SharePartition::new(&persisted, ShareLimits::default());
        assert_eq!(
            restored.in_flight(),
            vec![(0, false, 1), (2, false, 1), (4, false, 1)]
        );
        assert_eq!(restored.next_fetch_offset(), 0);
        assert_eq!(restored.end_offset(), 6);
        // A hostile or corrupt state is not trusted.
        let hostile = Persisted {
            start_offset: 10,
            batches: vec![
                StateBatch {
                    first: 10,
                    last: i64::MAX,
                    delivery_count: 1,
                    state: RecordState::Available,
                },
                StateBatch {
                    first: 20,
                    last: 12,
                    delivery_count: 1,
                    state: RecordState::Available,
                },
            ],
        };
        let restored = SharePartition::new(&hostile, ShareLimits::default());
        assert_eq!((restored.start_offset(), restored.end_offset()), (10, 10));
        // A long settled run (a big aborted transaction skipped) keeps the end offset.
        let skipped = Persisted {
            start_offset: 0,
            batches: vec![
                StateBatch {
                    first: 0,
                    last: 0,
                    delivery_count: 1,
                    state: RecordState::Available,
                },
                StateBatch {
                    first: 1,
                    last: 500_000,
                    delivery_count: 0,
                    state: RecordState::Archived,
                },
            ],
        };
        let restored = SharePartition::new(&skipped, ShareLimits::default());
        assert_eq!(
            (restored.next_fetch_offset(), restored.end_offset()),
            (0, 500_001)
        );
    }

    #[test]
    fn the_log_start_moving_drops_records_in_flight() {
        let mut sp = fresh(0);
        take(&mut sp, "a", &[batch(0, 9)], 500, 0);
        sp.log_start_moved(5);
        assert_eq!(sp.start_offset(), 5);
        // What is below the start offset is settled: only 5..9 are acknowledged.
        sp.acknowledge("a", &[(0, 9, vec![ACK_ACCEPT])], 0).unwrap();
        assert_eq!(sp.start_offset(), 10);
    }

    #[test]
    fn a_closed_session_releases_only_what_it_acquired() {
        let mut sp = fresh(0);
        sp.acquire("a", 1, &[batch(0, 1)], 0, 500, false, 0);
        // The member reconnected (connection 2) and acquired more before the old
        // connection's release ran.
        sp.acquire("a", 2, &[batch(2, 3)], 2, 500, false, 0);
        assert!(sp.release_member("a", Some(1)));
        assert_eq!(
            sp.in_flight(),
            vec![(0, false, 1), (1, false, 1), (2, true, 1), (3, true, 1)]
        );
        let got = take(&mut sp, "b", &[batch(0, 1)], 500, 0);
        assert_eq!(got, vec![run(0, 1, 2)]);
        assert!(sp.release_member("a", None));
    }
}
