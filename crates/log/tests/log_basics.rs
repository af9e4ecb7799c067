//! Behaviour of one partition log: offsets, reads, rolls, indexes, timestamps, epochs,
//! truncation, log start offset, validation errors.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, LogError, LogOpenState, ManualClock};
use strand_records::{BatchView, Compression, RecordsError, TimestampType};

#[test]
fn appends_assign_consecutive_offsets_and_read_back() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    for n in 0..10 {
        let mut bytes = batch(3, 10, 1_000 + n);
        let info = log.append_as_leader(&mut bytes, 0).unwrap();
        assert_eq!(info.first_offset, n * 3);
        assert_eq!(info.last_offset, n * 3 + 2);
        assert_eq!(info.log_append_time_ms, -1);
    }
    assert_eq!(log.log_end_offset(), 30);
    let records = read_records(&log, 0);
    assert_eq!(records.len(), 30);
    assert!(records.iter().enumerate().all(|(i, r)| r.0 == i as i64));
    // Reading from the middle of a batch starts at that batch.
    let from_middle = log.read(4, 1 << 20, 30, true).unwrap().slice.unwrap();
    let bytes = from_middle.read_to_vec().unwrap();
    let view = BatchView::parse(&bytes).unwrap();
    assert_eq!(view.header.base_offset, 3);
}

#[test]
fn rolls_by_size_and_finds_offsets_through_the_index() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), small_config(), Arc::new(ManualClock::new(0)));
    for n in 0..200 {
        log.append_as_leader(&mut batch(2, 50, n), 0).unwrap();
    }
    assert!(log.segment_count() > 5, "segments: {}", log.segment_count());
    for (base, size) in log.segment_summaries() {
        assert!(size <= 4 * 1024, "segment {base} is {size} bytes");
        assert!(dir.path().join(format!("{base:020}.log")).exists());
        assert!(dir.path().join(format!("{base:020}.index")).exists());
        assert!(dir.path().join(format!("{base:020}.timeindex")).exists());
    }
    for target in [0, 1, 57, 211, 399] {
        let slice = log.read(target, 1, 400, true).unwrap().slice.unwrap();
        let bytes = slice.read_to_vec().unwrap();
        let view = BatchView::parse(&bytes).unwrap();
        assert!(
            view.header.base_offset <= target && target <= view.header.last_offset(),
            "target {target}"
        );
    }
    assert_eq!(read_records(&log, 0).len(), 400);
}

#[test]
fn rolls_by_segment_ms_from_the_first_batch_timestamp() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(10_000));
    let config = LogConfig {
        segment_ms: 1_000,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, clock.clone());
    log.append_as_leader(&mut batch(1, 10, 10_000), 0).unwrap();
    clock.advance_ms(500);
    log.append_as_leader(&mut batch(1, 10, 10_500), 0).unwrap();
    assert_eq!(log.segment_count(), 1);
    clock.advance_ms(600);
    log.append_as_leader(&mut batch(1, 10, 11_100), 0).unwrap();
    assert_eq!(log.segment_count(), 2);
}

#[test]
fn old_producer_timestamps_do_not_roll_a_segment_per_batch() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000_000_000));
    let config = LogConfig {
        segment_ms: 1_000,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, clock.clone());
    for _ in 0..10 {
        log.append_as_leader(&mut batch(1, 10, 5), 0).unwrap();
    }
    assert_eq!(log.segment_count(), 1);
    clock.advance_ms(1_001);
    log.append_as_leader(&mut batch(1, 10, 5), 0).unwrap();
    assert_eq!(log.segment_count(), 2, "wall-clock age still rolls");
}

#[test]
fn first_batch_larger_than_max_bytes_is_returned_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    let mut big = batch(10, 1_000, 0);
    let big_len = big.len() as u64;
    log.append_as_leader(&mut big, 0).unwrap();
    log.append_as_leader(&mut batch(1, 10, 0), 0).unwrap();
    let slice = log.read(0, 100, 11, true).unwrap().slice.unwrap();
    assert_eq!(slice.length, big_len);
    // Without min_one_batch the budget is honoured (a partial batch, as Kafka sends).
    assert_eq!(
        log.read(0, 100, 11, false).unwrap().slice.unwrap().length,
        100
    );
}

#[test]
fn reads_stop_at_the_upper_bound() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    let mut lengths = Vec::new();
    for _ in 0..3 {
        let mut bytes = batch(5, 10, 0);
        lengths.push(bytes.len() as u64);
        log.append_as_leader(&mut bytes, 0).unwrap();
    }
    let slice = log.read(0, 1 << 20, 10, true).unwrap().slice.unwrap();
    assert_eq!(slice.length, lengths[0] + lengths[1]);
    assert!(log.read(10, 1 << 20, 10, true).unwrap().slice.is_none());
    assert!(
        log.read(15, 1 << 20, 15, true).unwrap().slice.is_none(),
        "at the log end"
    );
    assert!(matches!(
        log.read(16, 1 << 20, 15, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
}

#[test]
fn offset_for_timestamp_finds_the_first_record_at_or_after() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), small_config(), Arc::new(ManualClock::new(0)));
    // Batch n holds records with timestamps 1000*n .. 1000*n+3.
    for n in 0..100 {
        log.append_as_leader(&mut batch(4, 40, 1_000 * n), 0)
            .unwrap();
    }
    let found = log.offset_for_timestamp(42_002).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (42 * 4 + 2, 42_002));
    let found = log.offset_for_timestamp(42_004).unwrap().unwrap();
    assert_eq!((found.offset, found.timestamp), (43 * 4, 43_000));
    assert_eq!(log.offset_for_timestamp(0).unwrap().unwrap().offset, 0);
    assert_eq!(log.offset_for_timestamp(99_004).unwrap(), None);
    let max = log.max_timestamp_offset().unwrap().unwrap();
    assert_eq!((max.offset, max.timestamp), (399, 99_003));
}

#[test]
fn offset_for_timestamp_works_in_compressed_batches_and_after_reopen() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), small_config(), Arc::new(ManualClock::new(0)));
    for n in 0..50 {
        log.append_as_leader(&mut batch_with(4, 40, 1_000 * n, Compression::Zstd), 0)
            .unwrap();
    }
    log.close().unwrap();
    let state = LogOpenState {
        recovery_point: log.log_end_offset(),
        clean_shutdown: true,
        ..Default::default()
    };
    drop(log);
    let (log, _) = reopen(dir.path(), small_config(), state);
    let found = log.offset_for_timestamp(17_003).unwrap().unwrap();
    assert_eq!(found.offset, 17 * 4 + 3);
}

#[test]
fn log_append_time_is_stamped() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        message_timestamp_type: TimestampType::LogAppendTime,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(77_000)));
    let info = log.append_as_leader(&mut batch(2, 10, 5), 0).unwrap();
    assert_eq!(info.log_append_time_ms, 77_000);
    let slice = log.read(0, 1 << 20, 2, true).unwrap().slice.unwrap();
    let bytes = slice.read_to_vec().unwrap();
    let view = BatchView::parse(&bytes).unwrap();
    assert_eq!(view.header.max_timestamp, 77_000);
    assert_eq!(
        view.header.attributes.timestamp_type(),
        TimestampType::LogAppendTime
    );
    assert_eq!(log.offset_for_timestamp(77_000).unwrap().unwrap().offset, 0);
}

#[test]
fn bad_batches_are_refused_with_distinct_errors() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        max_message_bytes: 2_000,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(0)));

    let mut too_large = batch(5, 1_000, 0);
    let error = log.append_as_leader(&mut too_large, 0).unwrap_err();
    assert!(matches!(
        error,
        LogError::Records(RecordsError::TooLarge { .. })
    ));
    assert_eq!(error.kafka_error_code(), 10);

    let mut corrupt = batch(2, 10, 0);
    let last = corrupt.len() - 1;
    corrupt[last] ^= 1;
    let error = log.append_as_leader(&mut corrupt, 0).unwrap_err();
    assert_eq!(error.kafka_error_code(), 2, "{error}");

    let mut truncated = batch(2, 10, 0);
    truncated.truncate(truncated.len() - 4);
    assert_eq!(
        log.append_as_leader(&mut truncated, 0)
            .unwrap_err()
            .kafka_error_code(),
        2
    );

    let mut old_magic = batch(2, 10, 0);
    old_magic[16] = 1;
    let error = log.append_as_leader(&mut old_magic, 0).unwrap_err();
    assert!(matches!(
        error,
        LogError::Records(RecordsError::UnsupportedMagic(1))
    ));
    assert_eq!(error.kafka_error_code(), 87, "Kafka 4.x: INVALID_RECORD");

    let mut two_batches = batch(1, 10, 0);
    two_batches.extend(batch(1, 10, 0));
    assert_eq!(
        log.append_as_leader(&mut two_batches, 0)
            .unwrap_err()
            .kafka_error_code(),
        87
    );

    assert_eq!(log.log_end_offset(), 0, "nothing refused was written");
    assert_eq!(log.size_bytes(), 0);
}

#[test]
fn leader_epochs_are_cached_checkpointed_and_answer_offset_for_leader_epoch() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    for (epoch, batches) in [(1, 3), (2, 2), (5, 4)] {
        for _ in 0..batches {
            log.append_as_leader(&mut batch(2, 10, 0), epoch).unwrap();
        }
    }
    assert_eq!(log.end_offset_for_epoch(1), (1, 6));
    assert_eq!(log.end_offset_for_epoch(2), (2, 10));
    assert_eq!(log.end_offset_for_epoch(3), (2, 10));
    assert_eq!(log.end_offset_for_epoch(5), (5, 18));
    assert_eq!(log.end_offset_for_epoch(9), (-1, -1));
    let checkpoint = std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(checkpoint, "0\n3\n1 0\n2 6\n5 10\n");

    log.truncate_to(8).unwrap();
    assert_eq!(log.log_end_offset(), 8);
    assert_eq!(log.end_offset_for_epoch(2), (2, 8));
    assert_eq!(log.end_offset_for_epoch(5), (-1, -1));
    let checkpoint = std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(checkpoint, "0\n2\n1 0\n2 6\n");
}

/// A leader's epoch is cached when it takes over, before any append in it; a follower
/// again, it drops that epoch when cut to its log end (which cuts nothing), or every
/// fetch would diverge at that epoch for ever (the simulator found the livelock).
#[test]
fn an_epoch_begun_without_appends_is_dropped_by_a_truncation_to_the_end() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    log.append_as_leader(&mut batch(2, 10, 0), 3).unwrap();
    log.begin_leader_epoch(4).unwrap();
    assert_eq!(
        log.end_offset_for_epoch(3),
        (3, 2),
        "epoch 4 begins at the end"
    );
    assert_eq!(log.end_offset_for_epoch(4), (4, 2));
    assert!(!log.truncate_to(2).unwrap(), "nothing to cut");
    assert_eq!(log.leader_epochs().latest().map(|e| e.epoch), Some(3));
    let checkpoint = std::fs::read_to_string(dir.path().join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(checkpoint, "0\n1\n3 0\n");
}

/// A new partition's log exists in memory until its files are made (in the background,
/// or by the first write); its leader's epoch, begun before, is kept and checkpointed
/// with them. Writing the checkpoint at once failed: CI's benchmark logged "No such file
/// or directory" for every new partition's leader.
#[test]
fn an_epoch_begun_before_the_log_is_on_disk_is_checkpointed_with_its_files() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("lazy-0");
    let mut log = strand_log::Log::create_deferred(
        &dir,
        Arc::new(LogConfig::default()),
        strand_log::FileCache::new(64),
        Arc::new(ManualClock::new(0)),
        0,
    );
    log.begin_leader_epoch(7).unwrap();
    assert!(!dir.exists(), "nothing on disk yet");
    assert_eq!(log.end_offset_for_epoch(7), (7, 0));
    log.materialize().unwrap();
    let checkpoint = std::fs::read_to_string(dir.join("leader-epoch-checkpoint")).unwrap();
    assert_eq!(checkpoint, "0\n1\n7 0\n");
    log.append_as_leader(&mut batch(2, 10, 0), 7).unwrap();
    log.close().unwrap();
    let (reopened, _) = reopen(&dir, LogConfig::default(), LogOpenState::default());
    assert_eq!(reopened.end_offset_for_epoch(7), (7, 2));
}

/// A follower reset to its leader's log start (or to where the remote store ends) has
/// nothing below it to sync: with flush before ack the log counts as durable up to it,
/// or the fetcher would wait for a sync of offsets that no longer exist.
#[test]
fn a_log_started_again_at_an_offset_is_durable_up_to_it() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: strand_log::Durability::FlushBeforeAck,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(0)));
    log.append_as_leader(&mut batch(3, 10, 0), 0).unwrap();
    assert_eq!(log.durable_end_offset(), 0, "not synced");
    log.truncate_fully_and_start_at(50).unwrap();
    assert_eq!(log.log_end_offset(), 50);
    assert_eq!(log.durable_end_offset(), 50);
}

#[test]
fn truncate_removes_whole_batches_and_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), small_config(), Arc::new(ManualClock::new(0)));
    for n in 0..100 {
        log.append_as_leader(&mut batch(3, 40, n), 0).unwrap();
    }
    let segments_before = log.segment_count();
    log.truncate_to(31).unwrap(); // inside the batch 30..32
    assert_eq!(log.log_end_offset(), 30);
    assert!(log.segment_count() < segments_before);
    assert_eq!(read_records(&log, 0).len(), 30);
    let info = log.append_as_leader(&mut batch(1, 10, 0), 0).unwrap();
    assert_eq!(info.first_offset, 30);
    // A negative offset is refused and changes nothing (it once left a log ending at -1).
    assert!(log.truncate_to(-1).is_err());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 31));
    // Truncating below the first segment restarts the log.
    log.truncate_to(0).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.segment_count()
        ),
        (0, 0, 1)
    );
}

#[test]
fn delete_before_moves_the_log_start_and_drops_old_segments() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), small_config(), Arc::new(ManualClock::new(0)));
    for n in 0..100 {
        log.append_as_leader(&mut batch(3, 40, n), 0).unwrap();
    }
    let before = log.segment_count();
    assert!(log.delete_before(150).unwrap());
    assert_eq!(log.log_start_offset(), 150);
    assert!(log.segment_count() < before);
    assert!(log.segment_summaries()[0].0 <= 150);
    assert!(matches!(
        log.read(149, 100, 300, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    let records = read_records(&log, 150);
    assert_eq!(records.first().unwrap().0, 150);
    assert_eq!(records.len(), 150);
    assert!(
        !log.delete_before(10).unwrap(),
        "the start never moves back"
    );
    assert!(matches!(
        log.delete_before(301),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    assert_eq!(log.offset_for_timestamp(0).unwrap().unwrap().offset, 150);
}

/// A leader's log of `batches` batches of 2 records in epoch 3, and its bytes as a
/// follower fetches them.
fn leader_with_batches(batches: i64) -> (tempfile::TempDir, strand_log::Log, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let mut leader = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    for n in 0..batches {
        leader.append_as_leader(&mut batch(2, 10, n), 3).unwrap();
    }
    let bytes = read_from(&leader, 0);
    (dir, leader, bytes)
}

fn read_from(leader: &strand_log::Log, offset: i64) -> Vec<u8> {
    let end = leader.log_end_offset();
    let read = leader.read(offset, 1 << 20, end, true).unwrap();
    read.slice.unwrap().read_to_vec().unwrap()
}

fn empty_follower() -> (tempfile::TempDir, strand_log::Log) {
    let dir = tempfile::tempdir().unwrap();
    let log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    (dir, log)
}

#[test]
fn follower_appends_keep_offsets_and_epochs_and_ignore_a_partial_tail() {
    let (_leader_dir, _leader, bytes) = leader_with_batches(5);
    let (_follower_dir, mut follower) = empty_follower();
    let partial = &bytes[..bytes.len() - 5];
    let info = follower.append_as_follower(partial, 3).unwrap().unwrap();
    assert_eq!(
        (info.first_offset, info.last_offset, info.batches),
        (0, 7, 4)
    );
    follower
        .append_as_follower(&bytes[info.bytes as usize..], 3)
        .unwrap();
    assert_eq!(follower.log_end_offset(), 10);
    assert_eq!(follower.end_offset_for_epoch(3), (3, 10));
    // A batch that does not start at the log end is refused.
    assert!(matches!(
        follower.append_as_follower(&bytes, 3),
        Err(LogError::NonMonotonicOffset { .. })
    ));
}

#[test]
fn damaged_fetched_batches_are_refused_and_the_batches_before_them_kept() {
    let (_leader_dir, leader, mut bytes) = leader_with_batches(4);
    // The third batch's leader epoch damaged (bytes 12..16 of a batch: not under its CRC).
    let batch_bytes = bytes.len() / 4;
    let third = 2 * batch_bytes;
    bytes[third + 12..third + 16].copy_from_slice(&7i32.to_be_bytes());
    let (_follower_dir, mut follower) = empty_follower();
    let info = follower.append_as_follower(&bytes, 3).unwrap().unwrap();
    assert_eq!(
        (info.last_offset, info.batches),
        (3, 2),
        "the first two only"
    );
    assert_eq!(follower.log_end_offset(), 4);
    assert_eq!(
        follower.leader_epochs().latest().map(|e| e.epoch),
        Some(3),
        "epoch 7 never recorded"
    );
    // Fetched again undamaged, the rest goes in.
    let rest = read_from(&leader, 4);
    // Damaged the other ways: an epoch below the log's latest, a record byte under the
    // CRC, a base offset. Each time the batches before it go in, the rest is asked again;
    // a damaged first batch is an error.
    let damage: [(usize, &[u8]); 3] = [(12, &2i32.to_be_bytes()), (70, &[0xff]), (7, &[0x55])];
    for (at, with) in damage {
        let mut rest = rest.clone();
        let second = batch_bytes;
        rest[second + at..second + at + with.len()].copy_from_slice(with);
        let (_dir, mut copy) = empty_follower();
        copy.append_as_follower(&bytes[..2 * batch_bytes], 3)
            .unwrap();
        let info = copy.append_as_follower(&rest, 3).unwrap().unwrap();
        assert_eq!(
            (info.first_offset, info.batches),
            (4, 1),
            "damage at byte {at}"
        );
        assert_eq!(copy.log_end_offset(), 6);
        assert!(
            copy.append_as_follower(&rest[second..], 3).is_err(),
            "damage at byte {at} of a first batch"
        );
        assert_eq!(copy.log_end_offset(), 6);
    }
    follower.append_as_follower(&rest, 3).unwrap();
    assert_eq!(follower.log_end_offset(), 8);
    // A follower with an empty log has no latest epoch to compare with: an epoch no
    // format has (negative, not -1) is damage all the same (its sign bit flipped here).
    let mut first = bytes[..batch_bytes].to_vec();
    first[12..16].copy_from_slice(&i32::MIN.to_be_bytes());
    let (_dir, mut empty) = empty_follower();
    assert!(empty.append_as_follower(&first, 3).is_err());
    assert_eq!(empty.log_end_offset(), 0);
}
