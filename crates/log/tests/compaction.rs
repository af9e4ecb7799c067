//! Compaction: the latest record per key survives with its offset, nothing else it should
//! keep is removed, tombstones go after delete.retention.ms, and a crash at any step of a
//! segment swap leaves a log that reads correctly.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;
use strand_log::{CleanerLimits, CleanerStep, Log, LogConfig, LogOpenState, ManualClock};
use strand_records::{
    walk_stored_records, BatchBuilder, BatchView, Compression, Record, WalkLimits,
};

use common::*;

fn config() -> LogConfig {
    LogConfig {
        segment_bytes: 1_024,
        index_interval_bytes: 128,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        min_compaction_lag_ms: 0,
        delete_retention_ms: 1_000_000,
        ..LogConfig::default()
    }
}

/// (offset, key, value) of every record in the log.
/// (offset, key, value) rows.
type Contents = Vec<(i64, Option<Vec<u8>>, Option<Vec<u8>>)>;
/// Batches to write: codec and (key, value) pairs, a None value being a tombstone.
type Batches = [(Compression, Vec<(u8, Option<u8>)>)];

fn contents(log: &Log) -> Contents {
    let mut out = Vec::new();
    let end = log.log_end_offset();
    let mut next = log.log_start_offset();
    while next < end {
        let Some(slice) = log.read(next, 1 << 20, end, true).unwrap().slice else {
            break;
        };
        let bytes = slice.read_to_vec().unwrap();
        let mut rest = &bytes[..];
        let before = next;
        while let Ok(view) = BatchView::parse(rest) {
            let header = view.header;
            walk_stored_records(&view, WalkLimits::default(), |r| {
                let offset = header.base_offset + r.offset_delta as i64;
                if offset >= next {
                    out.push((
                        offset,
                        r.key.map(<[u8]>::to_vec),
                        r.value.map(<[u8]>::to_vec),
                    ));
                }
            })
            .unwrap();
            next = next.max(header.next_offset());
            rest = &rest[view.bytes.len()..];
        }
        assert!(next > before);
    }
    out
}

/// A written record: (offset, key, value).
type WrittenRecord = (i64, Vec<u8>, Option<Vec<u8>>);
type Written = Vec<WrittenRecord>;

/// Appends batches of (key, value) records; returns every record with its offset.
fn write(log: &mut Log, batches: &Batches, timestamp: i64) -> Written {
    let mut written = Vec::new();
    for (codec, records) in batches {
        let mut builder = BatchBuilder::new(0, timestamp).compression(*codec);
        for (key, value) in records {
            builder.push(Record::new(
                Some(vec![b'k', *key]),
                value.map(|v| vec![v; 20]),
                timestamp,
            ));
        }
        let info = log.append_as_leader(&mut builder.build(), 0).unwrap();
        for (i, (key, value)) in records.iter().enumerate() {
            written.push((
                info.first_offset + i as i64,
                vec![b'k', *key],
                value.map(|v| vec![v; 20]),
            ));
        }
    }
    written
}

/// Checks the compaction invariants against what was written: every record present is
/// the one written at its offset; a record must stay unless a later record with its key
/// lies below `cleaned_end` (the keys the cleaner saw); when `strict`, such superseded
/// records must be gone (a crashed pass may have left them).
fn check_compacted(log: &Log, written: &Written, cleaned_end: i64, strict: bool) {
    let got = contents(log);
    let by_offset: BTreeMap<i64, &WrittenRecord> = written.iter().map(|w| (w.0, w)).collect();
    let mut latest_below_end: BTreeMap<&Vec<u8>, i64> = BTreeMap::new();
    for (offset, key, _) in written.iter().filter(|w| w.0 < cleaned_end) {
        latest_below_end.insert(key, *offset);
    }
    for (offset, key, value) in &got {
        let original = by_offset[offset];
        assert_eq!(
            (key.as_ref(), value),
            (Some(&original.1), &original.2),
            "offset {offset}"
        );
    }
    let kept: std::collections::BTreeSet<i64> = got.iter().map(|g| g.0).collect();
    for (offset, key, _) in written {
        let superseded = latest_below_end
            .get(key)
            .is_some_and(|latest| latest > offset);
        if !superseded {
            assert!(kept.contains(offset), "offset {offset} must be kept");
        } else if strict {
            assert!(
                !kept.contains(offset),
                "offset {offset} was superseded and should be gone"
            );
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn compaction_keeps_the_latest_record_per_key_and_every_offset(
        batches in proptest::collection::vec(
            (prop_oneof![Just(Compression::None), Just(Compression::Gzip), Just(Compression::Snappy), Just(Compression::Lz4), Just(Compression::Zstd)],
             proptest::collection::vec((0u8..12, proptest::option::weighted(0.85, any::<u8>())), 1..8)),
            1..40)
    ) {
        let dir = tempfile::tempdir().unwrap();
        let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
        let written = write(&mut log, &batches, 0);
        let end = log.log_end_offset();
        let active_base = log.segment_summaries().last().unwrap().0;
        log.clean(0, CleanerLimits::default(), None).unwrap();
        check_compacted(&log, &written, active_base, true);
        prop_assert_eq!(log.log_end_offset(), end);
        // A second pass changes nothing, and a reopen reads the same.
        let before = contents(&log);
        log.clean(0, CleanerLimits::default(), None).unwrap();
        prop_assert_eq!(contents(&log), before.clone());
        drop(log);
        let (log, _) = reopen(dir.path(), config(), LogOpenState::default());
        prop_assert_eq!(contents(&log), before);
    }
}

fn many_versions() -> Box<Batches> {
    (0..60)
        .map(|n| {
            (
                if n % 2 == 0 {
                    Compression::Zstd
                } else {
                    Compression::None
                },
                vec![
                    ((n % 5) as u8, Some(n as u8)),
                    ((n % 3) as u8, Some(n as u8)),
                ],
            )
        })
        .collect()
}

#[test]
fn a_crash_at_any_step_of_a_swap_leaves_a_log_that_reads_correctly() {
    for step in [
        CleanerStep::WroteCleaned,
        CleanerStep::RenamedToSwap,
        CleanerStep::DeletedIndexes,
        CleanerStep::Swapped,
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
        let written = write(&mut log, &many_versions(), 0);
        let original = contents(&log);
        assert!(
            log.clean(0, CleanerLimits::default(), Some(step)).is_err(),
            "{step:?}"
        );
        drop(log); // crash: no close
        let (mut log, _) = reopen(dir.path(), config(), LogOpenState::default());
        let after = contents(&log);
        // Either segment version is fine; nothing else: every record is an original one,
        // the latest per key is there, and offsets did not move.
        let active_base = log.segment_summaries().last().unwrap().0;
        check_compacted(&log, &written, active_base, false);
        assert!(after.len() <= original.len());
        assert_eq!(log.log_end_offset(), written.last().unwrap().0 + 1);
        assert!(std::fs::read_dir(dir.path()).unwrap().all(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            !name.ends_with(".cleaned") && !name.ends_with(".swap")
        }));
        // Cleaning again finishes the job.
        log.clean(0, CleanerLimits::default(), None).unwrap();
        check_compacted(&log, &written, active_base, true);
    }
}

#[test]
fn tombstones_stay_until_delete_retention_then_go() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        delete_retention_ms: 10_000,
        ..config()
    };
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(0)));
    let mut batches = vec![
        (Compression::None, vec![(1, Some(1)), (2, Some(2))]),
        (Compression::None, vec![(1, None)]),
    ];
    batches.extend((0..40).map(|n| (Compression::None, vec![(3, Some(n as u8))])));
    write(&mut log, &batches, 1_000);
    log.clean(2_000, CleanerLimits::default(), None).unwrap();
    let has_tombstone = |log: &Log| {
        contents(log)
            .iter()
            .any(|(_, k, v)| k.as_deref() == Some(b"k\x01") && v.is_none())
    };
    assert!(has_tombstone(&log), "a fresh tombstone stays");
    assert!(
        !contents(&log)
            .iter()
            .any(|(_, k, v)| k.as_deref() == Some(b"k\x01") && v.is_some()),
        "the value it deleted is gone"
    );
    // More writes make the log dirty again; past delete.retention.ms the tombstone goes.
    write(
        &mut log,
        &(0..40)
            .map(|n| (Compression::None, vec![(4, Some(n as u8))]))
            .collect::<Vec<_>>(),
        20_000,
    );
    log.clean(20_000, CleanerLimits::default(), None).unwrap();
    assert!(!has_tombstone(&log));
}

#[test]
fn min_compaction_lag_and_dirty_ratio_are_honoured() {
    let dir = tempfile::tempdir().unwrap();
    let lagging = LogConfig {
        min_compaction_lag_ms: 60_000,
        ..config()
    };
    let mut log = new_log(dir.path(), lagging, Arc::new(ManualClock::new(0)));
    write(&mut log, &many_versions(), 100_000);
    assert_eq!(
        log.clean(120_000, CleanerLimits::default(), None)
            .unwrap()
            .segments_rewritten,
        0,
        "too young"
    );
    assert!(
        log.clean(200_000, CleanerLimits::default(), None)
            .unwrap()
            .segments_rewritten
            > 0
    );

    let dir = tempfile::tempdir().unwrap();
    let picky = LogConfig {
        min_cleanable_dirty_ratio: 0.99,
        ..config()
    };
    let mut log = new_log(dir.path(), picky, Arc::new(ManualClock::new(0)));
    write(&mut log, &many_versions(), 0);
    log.clean(0, CleanerLimits::default(), None).unwrap();
    let first = log.cleaner_checkpoint();
    write(&mut log, &many_versions()[..4], 0);
    let outcome = log.clean(0, CleanerLimits::default(), None).unwrap();
    assert_eq!(
        outcome.segments_rewritten, 0,
        "ratio {} below 0.99",
        outcome.dirty_ratio
    );
    assert_eq!(log.cleaner_checkpoint(), first);
}

#[test]
fn max_compaction_lag_cleans_whatever_the_dirty_ratio() {
    let dir = tempfile::tempdir().unwrap();
    let overdue = LogConfig {
        min_cleanable_dirty_ratio: 0.99,
        max_compaction_lag_ms: 50_000,
        ..config()
    };
    let mut log = new_log(dir.path(), overdue, Arc::new(ManualClock::new(0)));
    write(&mut log, &many_versions(), 0);
    log.clean(0, CleanerLimits::default(), None).unwrap();
    let first = log.cleaner_checkpoint();
    write(&mut log, &many_versions()[..4], 10_000);
    let early = log.clean(20_000, CleanerLimits::default(), None).unwrap();
    assert_eq!(
        early.segments_rewritten, 0,
        "below the ratio and not yet overdue"
    );
    let late = log.clean(70_000, CleanerLimits::default(), None).unwrap();
    assert!(
        late.segments_rewritten > 0 && log.cleaner_checkpoint() > first,
        "the oldest dirty batch waited past max.compaction.lag.ms (ratio {})",
        late.dirty_ratio
    );
}

#[test]
fn a_small_key_map_cleans_in_several_passes() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    let batches: Vec<_> = (0..60u8)
        .map(|n| (Compression::None, vec![(n % 30, Some(n))]))
        .collect();
    let written = write(&mut log, &batches, 0);
    let limits = CleanerLimits {
        key_map_max_bytes: 10 * 11,
        ..CleanerLimits::default()
    };
    let mut passes = 0;
    let active_base = log.segment_summaries().last().unwrap().0;
    while log.cleaner_checkpoint() < active_base && passes < 50 {
        log.clean(0, limits, None).unwrap();
        passes += 1;
    }
    assert!(passes > 1, "the bounded map needed several passes");
    let _ = written;
    // Each key's latest record survives.
    let got = contents(&log);
    for key in 0..30u8 {
        assert!(got
            .iter()
            .any(|(_, k, v)| k.as_deref() == Some(&[b'k', key][..])
                && v.as_deref().map(|v| v[0]) == Some(key + 30)));
    }
}

#[test]
fn a_compacted_topic_refuses_records_without_keys() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    log.append_as_leader(&mut batch(1, 10, 0), 0).unwrap(); // keyed: fine
    let mut builder = BatchBuilder::new(0, 0);
    builder.push(Record::new(Some(b"k".to_vec()), Some(b"v".to_vec()), 0));
    builder.push(Record::new(None, Some(b"v".to_vec()), 0));
    builder.push(Record::new(Some(b"k".to_vec()), Some(b"v".to_vec()), 0));
    builder.push(Record::new(None, Some(b"v".to_vec()), 0));
    let end = log.log_end_offset();
    let error = log.append_as_leader(&mut builder.build(), 0).unwrap_err();
    assert_eq!(
        error.kafka_error_code(),
        87,
        "INVALID_RECORD, as Kafka answers"
    );
    // KIP-467: the whole batch is refused, and the keyless records are named.
    let strand_log::LogError::RecordErrors {
        records, message, ..
    } = error
    else {
        panic!("record errors expected, got {error:?}")
    };
    let indexes: Vec<i32> = records.iter().map(|r| r.batch_index).collect();
    assert_eq!(indexes, vec![1, 3]);
    let partition = dir
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert_eq!(
        records[0].message,
        format!(
            "Compacted topic cannot accept message without key in topic partition {partition}."
        )
    );
    assert!(message.starts_with("One or more records have been rejected due to 2 record errors"));
    assert_eq!(
        log.log_end_offset(),
        end,
        "nothing of the batch was written"
    );
}

#[test]
fn create_time_outside_the_timestamp_bounds_is_refused_per_record() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_before_max_ms: 1_000,
        message_timestamp_after_max_ms: 500,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(10_000)));
    let mut builder = BatchBuilder::new(0, 9_000);
    for timestamp in [9_000, 8_999, 10_500, 10_501] {
        builder.push(Record::new(None, Some(b"v".to_vec()), timestamp));
    }
    let error = log.append_as_leader(&mut builder.build(), 0).unwrap_err();
    assert_eq!(error.kafka_error_code(), 32, "INVALID_TIMESTAMP");
    let strand_log::LogError::RecordErrors {
        records, message, ..
    } = error
    else {
        panic!("record errors expected")
    };
    assert_eq!(
        message,
        "One or more records have been rejected due to invalid timestamp"
    );
    assert_eq!(
        records
            .iter()
            .map(|r| (r.batch_index, r.message.as_str()))
            .collect::<Vec<_>>(),
        vec![
            (1, "Timestamp 8999 of message with offset 1 is out of range. The timestamp should be within [9000, 10500]"),
            (3, "Timestamp 10501 of message with offset 3 is out of range. The timestamp should be within [9000, 10500]"),
        ]
    );
    let mut fine = BatchBuilder::new(0, 9_000);
    fine.push(Record::new(None, Some(b"v".to_vec()), 10_500));
    log.append_as_leader(&mut fine.build(), 0).unwrap();
}

/// A producer's transactional batch of keyed records.
fn keyed_txn_batch(producer_id: i64, sequence: i32, records: &[(u8, u8)]) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 1_000)
        .producer(producer_id, 0, sequence)
        .transactional();
    for (key, value) in records {
        builder.push(Record::new(
            Some(vec![b'k', *key]),
            Some(vec![*value]),
            1_000,
        ));
    }
    builder.build()
}

fn marker(result: strand_records::TxnResult) -> strand_records::EndTxnMarker {
    strand_records::EndTxnMarker {
        result,
        coordinator_epoch: 0,
    }
}

/// Kafka's cleaner rules for transactions: an aborted write neither survives nor
/// displaces the committed value before it, markers are kept (they share keys, so
/// compacting them by key would drop all but the last), and nothing of a transaction
/// still open is touched.
#[test]
fn compaction_drops_aborted_records_keeps_markers_and_stops_at_open_transactions() {
    use strand_records::TxnResult;
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    // Committed: k1=1 by producer 7.
    log.append_as_leader(&mut keyed_txn_batch(7, 0, &[(1, 1)]), 0)
        .unwrap(); // 0
    log.append_marker(7, 0, marker(TxnResult::Commit), 0)
        .unwrap(); // 1
                   // Aborted: k1=2 and k2=2 by producer 8.
    log.append_as_leader(&mut keyed_txn_batch(8, 0, &[(1, 2), (2, 2)]), 0)
        .unwrap(); // 2..=3
    log.append_marker(8, 0, marker(TxnResult::Abort), 0)
        .unwrap(); // 4
                   // A second committed transaction's marker, so two commit markers share a key.
    log.append_as_leader(&mut keyed_txn_batch(7, 1, &[(3, 3)]), 0)
        .unwrap(); // 5
    log.append_marker(7, 0, marker(TxnResult::Commit), 0)
        .unwrap(); // 6
                   // Segments are cleaned whole: the open transaction starts a segment of its own.
    log.roll(7).unwrap();
    // Open: k3=9 by producer 9, then plain records, all past the first unstable offset.
    log.append_as_leader(&mut keyed_txn_batch(9, 0, &[(3, 9)]), 0)
        .unwrap(); // 7
    write(
        &mut log,
        &[(Compression::None, vec![(3, Some(4)); 40])],
        1_000,
    );
    log.set_high_watermark(log.log_end_offset());
    let end = log.log_end_offset();
    log.roll(end).unwrap();
    let before = contents(&log);

    let outcome = log.clean(10_000, CleanerLimits::default(), None).unwrap();
    let after = contents(&log);
    let at = |rows: &Contents, offset: i64| rows.iter().any(|(o, _, _)| *o == offset);
    assert!(
        at(&after, 0),
        "the committed k1=1 survives the aborted k1=2"
    );
    assert!(!at(&after, 2) && !at(&after, 3), "aborted records are gone");
    assert!(
        at(&after, 1) && at(&after, 4) && at(&after, 6),
        "markers are kept"
    );
    assert!(
        at(&after, 5),
        "k3=3 is kept: every later k3 is past the open transaction"
    );
    for offset in 7..log.log_end_offset() {
        assert_eq!(
            at(&before, offset),
            at(&after, offset),
            "offset {offset} untouched"
        );
    }
    assert_eq!(outcome.records_removed, 2);
    // Read committed is unchanged by the pass.
    assert_eq!(log.last_stable_offset(), 7);

    // Once the open transaction commits, the next pass may compact what followed it.
    log.append_marker(9, 0, marker(TxnResult::Commit), 0)
        .unwrap();
    log.set_high_watermark(log.log_end_offset());
    let end = log.log_end_offset();
    log.roll(end).unwrap();
    log.clean(20_000, CleanerLimits::default(), None).unwrap();
    let compacted = contents(&log);
    let k3: Vec<i64> = compacted
        .iter()
        .filter(|(_, key, _)| key.as_deref() == Some(&b"k\x03"[..]))
        .map(|(o, _, _)| *o)
        .collect();
    assert_eq!(k3.len(), 1, "only the latest k3 is left: {k3:?}");
}
