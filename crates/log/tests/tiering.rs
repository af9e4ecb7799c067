//! Tiered storage's local half: which sealed segments may be copied, and local retention
//! deleting only what the remote store holds.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, ManualClock};

fn tiered(local_retention_ms: Option<i64>, local_retention_bytes: Option<u64>) -> LogConfig {
    LogConfig {
        remote_storage: true,
        retention_ms: None,
        local_retention_ms,
        local_retention_bytes,
        message_timestamp_after_max_ms: i64::MAX,
        ..small_config()
    }
}

/// 100 batches of 3 records; batch n has timestamps 1_000 * n.
fn filled(config: LogConfig, high_watermark: Option<i64>) -> (tempfile::TempDir, strand_log::Log) {
    filled_with_clock(config, high_watermark, Arc::new(ManualClock::new(0)))
}

fn filled_with_clock(
    config: LogConfig,
    high_watermark: Option<i64>,
    clock: Arc<ManualClock>,
) -> (tempfile::TempDir, strand_log::Log) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config, clock);
    for n in 0..100 {
        log.append_as_leader(&mut batch(3, 40, 1_000 * n), 3)
            .unwrap();
    }
    let end = log.log_end_offset();
    log.set_high_watermark(high_watermark.unwrap_or(end));
    (dir, log)
}

#[test]
fn only_sealed_segments_below_the_high_watermark_are_copy_candidates() {
    let (_dir, log) = filled(tiered(None, None), Some(150));
    let all = log.copy_candidates(0, usize::MAX).unwrap();
    assert!(!all.is_empty());
    assert_eq!(all[0].base_offset, 0);
    for pair in all.windows(2) {
        assert_eq!(pair[0].next_offset, pair[1].base_offset, "contiguous");
    }
    let last = all.last().unwrap();
    assert!(last.next_offset <= 150, "nothing above the high watermark");
    let summaries = log.segment_summaries();
    assert!(all.len() < summaries.len(), "never the active segment");
    for segment in &all {
        assert!(segment.size_bytes > 0 && segment.offset_index_bytes % 8 == 0);
        assert_eq!(segment.leader_epochs, vec![(3, segment.base_offset)]);
        let mut bytes = vec![0u8; segment.size_bytes as usize];
        std::os::unix::fs::FileExt::read_exact_at(&segment.files.log, &mut bytes, 0).unwrap();
        assert_eq!(
            i64::from_be_bytes(bytes[..8].try_into().unwrap()),
            segment.base_offset,
            "the file starts with the segment's first batch"
        );
    }
    // From the middle of a segment: that segment again (it holds offsets not yet copied).
    let from = all[1].base_offset + 1;
    let rest = log.copy_candidates(from, 2).unwrap();
    assert_eq!(rest.len(), 2.min(all.len() - 1));
    assert_eq!(rest[0].base_offset, all[1].base_offset);
}

#[test]
fn copies_wait_for_remote_copy_lag_by_time_or_by_newer_bytes() {
    let lagging = |lag_ms: Option<i64>, lag_bytes: Option<u64>| LogConfig {
        remote_copy_lag_ms: lag_ms,
        remote_copy_lag_bytes: lag_bytes,
        ..tiered(None, None)
    };
    // The newest record is at 99_000; the clock at 100_000.
    let clock = Arc::new(ManualClock::new(100_000));
    let (_dir, log) = filled_with_clock(lagging(Some(0), None), None, clock.clone());
    let all = log.copy_candidates(0, usize::MAX).unwrap();
    assert!(all.len() > 3, "lag 0: every sealed segment");

    // By time: only segments whose newest record is at least 30 s old, and never one
    // after a segment that is not (copies stay contiguous).
    let (_dir, log) = filled_with_clock(lagging(Some(30_000), None), None, clock.clone());
    let old_enough = log.copy_candidates(0, usize::MAX).unwrap();
    assert!(!old_enough.is_empty() && old_enough.len() < all.len());
    assert!(old_enough.iter().all(|s| s.max_timestamp <= 70_000));
    let next = &all[old_enough.len()];
    assert!(
        next.max_timestamp > 70_000,
        "stopped at the first too young"
    );
    clock.advance_ms(1_000_000);
    assert_eq!(log.copy_candidates(0, usize::MAX).unwrap().len(), all.len());

    // By size: only segments with at least this many bytes of the log newer than them.
    let total = log.size_bytes();
    let lag_bytes = total / 2;
    let (_dir, log) = filled_with_clock(lagging(None, Some(lag_bytes)), None, clock.clone());
    let far_enough = log.copy_candidates(0, usize::MAX).unwrap();
    assert!(!far_enough.is_empty() && far_enough.len() < all.len());
    let copied: u64 = far_enough.iter().map(|s| s.size_bytes).sum();
    assert!(total - copied >= lag_bytes);
    assert!(total - copied - all[far_enough.len()].size_bytes < lag_bytes);
    // Counted from `from`: what is already copied is not "newer".
    let from = far_enough[0].next_offset;
    let rest = log.copy_candidates(from, usize::MAX).unwrap();
    assert_eq!(rest.len(), far_enough.len() - 1);

    // Either check passing is enough; neither set (-1 under unlimited local retention,
    // as Kafka resolves it): nothing is ever copied.
    let (_dir, log) = filled_with_clock(
        lagging(Some(i64::MAX), Some(lag_bytes)),
        None,
        clock.clone(),
    );
    assert_eq!(
        log.copy_candidates(0, usize::MAX).unwrap().len(),
        far_enough.len()
    );
    let (_dir, log) = filled_with_clock(lagging(None, None), None, clock);
    assert!(log.copy_candidates(0, usize::MAX).unwrap().is_empty());
}

#[test]
fn local_retention_deletes_only_what_the_remote_store_holds() {
    let (_dir, mut log) = filled(tiered(Some(0), None), None);
    // Unknown remote end: nothing goes, however old.
    assert_eq!(log.apply_retention(10_000_000).unwrap().segments_deleted, 0);
    let copied = log.copy_candidates(0, 3).unwrap();
    let end = copied.last().unwrap().next_offset;
    log.set_remote_end(Some(end));
    let outcome = log.apply_retention(10_000_000).unwrap();
    assert_eq!(outcome.segments_deleted, 3);
    assert_eq!(log.log_start_offset(), end);
    // The store reaching further lets retention go further, never past it.
    log.set_remote_end(Some(end + 1));
    assert_eq!(log.apply_retention(10_000_000).unwrap().segments_deleted, 0);
}

#[test]
fn retention_says_when_it_waits_on_a_copy_the_log_does_not_know_of() {
    // Local retention 0 and a clock far past every record: every sealed segment is due.
    let clock = Arc::new(ManualClock::new(10_000_000));
    let (_dir, mut log) = filled_with_clock(tiered(Some(0), None), None, clock.clone());
    assert!(
        log.retention_waits_on_remote(),
        "due, but the store is unknown"
    );
    let sealed = log.copy_candidates(0, usize::MAX).unwrap();
    log.set_remote_end(Some(sealed[1].next_offset));
    assert!(
        log.retention_waits_on_remote(),
        "the store holds two of them"
    );
    log.set_remote_end(Some(sealed.last().unwrap().next_offset));
    assert!(!log.retention_waits_on_remote(), "it holds all that is due");
    log.apply_retention(10_000_000).unwrap();
    assert!(!log.retention_waits_on_remote());
    // Nothing due: no listing needed, whatever the store holds.
    let (_dir, mut young) = filled_with_clock(tiered(Some(i64::MAX / 2), None), None, clock);
    young.set_remote_end(None);
    assert!(!young.retention_waits_on_remote());
    // Untiered logs never wait on a store.
    let (_dir, plain) = filled(
        LogConfig {
            retention_ms: Some(0),
            ..small_config()
        },
        None,
    );
    assert!(!plain.retention_waits_on_remote());
}

#[test]
fn local_retention_bytes_keeps_the_newest_local_bytes_once_copied() {
    let (_dir, mut log) = filled(tiered(None, Some(1)), None);
    let everything = log.copy_candidates(0, usize::MAX).unwrap();
    log.set_remote_end(Some(everything.last().unwrap().next_offset));
    log.apply_retention(0).unwrap();
    assert_eq!(log.segment_count(), 1, "only the active segment is left");
}

#[test]
fn with_copies_disabled_local_segments_go_by_total_retention() {
    let config = LogConfig {
        remote_copy_disabled: true,
        retention_ms: Some(50_000),
        ..tiered(Some(0), None)
    };
    let (_dir, mut log) = filled(config, None);
    let outcome = log.apply_retention(100_000).unwrap();
    assert!(outcome.segments_deleted > 0, "no copy to wait for");
    assert!(
        log.log_start_offset() < 150,
        "by retention.ms, not local.retention.ms=0"
    );
}

#[test]
fn a_follower_starting_after_the_remote_copy_keeps_its_epochs_and_producers() {
    use strand_records::{BatchBuilder, Record};
    // The leader's log: producer 42 writes in epoch 3, then epoch 5 begins at offset 10.
    let leader_dir = tempfile::tempdir().unwrap();
    let mut leader = new_log(
        leader_dir.path(),
        tiered(None, None),
        Arc::new(ManualClock::new(0)),
    );
    for (sequence, epoch) in [(0, 3), (5, 3), (10, 5)] {
        let mut builder = BatchBuilder::new(0, 1_000).producer(42, 0, sequence);
        builder.push(Record::new(None, Some(vec![1u8; 10]), 1_000));
        for _ in 0..4 {
            builder.push(Record::new(None, Some(vec![2u8; 10]), 1_000));
        }
        leader
            .append_as_leader(&mut builder.build(), epoch)
            .unwrap();
    }
    let end = leader.log_end_offset();
    let snapshot_path = leader
        .producer_state()
        .take_snapshot(leader_dir.path(), end)
        .unwrap();
    let snapshot = std::fs::read(snapshot_path).unwrap();
    let epochs: Vec<(i32, i64)> = leader
        .leader_epochs()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(epochs, vec![(3, 0), (5, 10)]);

    // A follower with an unrelated old log starts where the copy ends.
    let dir = tempfile::tempdir().unwrap();
    let mut follower = new_log(
        dir.path(),
        tiered(None, None),
        Arc::new(ManualClock::new(0)),
    );
    follower
        .append_as_leader(&mut batch(3, 10, 1_000), 1)
        .unwrap();
    follower
        .start_after_remote(end, &epochs, Some(&snapshot))
        .unwrap();
    assert_eq!(
        (follower.log_start_offset(), follower.log_end_offset()),
        (end, end)
    );
    let restored: Vec<(i32, i64)> = follower
        .leader_epochs()
        .entries()
        .iter()
        .map(|e| (e.epoch, e.start_offset))
        .collect();
    assert_eq!(
        restored,
        vec![(5, end)],
        "the epoch the log start is in, from its start"
    );
    assert_eq!(follower.end_offset_for_epoch(5), (5, end));
    let producer = follower
        .producer_state()
        .get(42)
        .expect("producer 42 known");
    assert_eq!(
        producer.last_sequence(),
        Some(14),
        "its last sequence, from the snapshot"
    );
}
