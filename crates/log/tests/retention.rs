//! Retention: whole segments go by age (largest timestamp) or total size, never past the
//! high watermark, only with cleanup.policy=delete.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, LogError, ManualClock};

fn config(retention_ms: Option<i64>, retention_bytes: Option<u64>) -> LogConfig {
    LogConfig {
        retention_ms,
        retention_bytes,
        // The clock stays at 0 while batches carry timestamps far ahead of it.
        message_timestamp_after_max_ms: i64::MAX,
        ..small_config()
    }
}

/// 100 batches of 3 records; batch n has timestamps 1_000 * n.
fn filled(config: LogConfig) -> (tempfile::TempDir, strand_log::Log) {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), config, Arc::new(ManualClock::new(0)));
    for n in 0..100 {
        log.append_as_leader(&mut batch(3, 40, 1_000 * n), 0)
            .unwrap();
    }
    let end = log.log_end_offset();
    log.set_high_watermark(end);
    (dir, log)
}

#[test]
fn expired_segments_go_and_the_log_start_follows() {
    let (_dir, mut log) = filled(config(Some(50_000), None));
    let segments = log.segment_count();
    // At t = 100_000 everything with timestamps below 50_000 has expired.
    let outcome = log.apply_retention(100_000).unwrap();
    assert!(outcome.segments_deleted > 0 && outcome.segments_deleted < segments);
    let start = log.log_start_offset();
    assert!(start > 0);
    assert_eq!(log.segment_summaries()[0].0, start);
    assert!(matches!(
        log.read(start - 1, 100, 300, true),
        Err(LogError::OffsetOutOfRange { .. })
    ));
    // No remaining segment holds only expired records.
    let records = read_records(&log, start);
    assert!(records.iter().any(|r| r.1 >= 50_000));
    assert_eq!(records.len() as i64, 300 - start);
    assert_eq!(
        log.apply_retention(100_000).unwrap().segments_deleted,
        0,
        "idempotent"
    );
}

#[test]
fn when_everything_expired_the_active_segment_goes_too() {
    let (_dir, mut log) = filled(config(Some(1_000), None));
    log.apply_retention(10_000_000).unwrap();
    assert_eq!(
        (
            log.log_start_offset(),
            log.log_end_offset(),
            log.size_bytes()
        ),
        (300, 300, 0)
    );
    let info = log
        .append_as_leader(&mut batch(1, 1, 20_000_000), 0)
        .unwrap();
    assert_eq!(info.first_offset, 300, "offsets carry on");
}

#[test]
fn size_retention_keeps_the_newest_bytes_and_the_active_segment() {
    let (_dir, mut log) = filled(config(None, Some(8 * 1024)));
    let total = log.size_bytes();
    log.apply_retention(0).unwrap();
    assert!(
        log.size_bytes() <= 8 * 1024 + 4 * 1024,
        "{} of {total} bytes left",
        log.size_bytes()
    );
    assert!(log.size_bytes() >= 4 * 1024);
    assert!(log.segment_count() >= 1);
}

#[test]
fn retention_never_passes_the_high_watermark() {
    let (_dir, mut log) = filled(config(Some(1_000), None));
    log.set_high_watermark(150);
    log.apply_retention(10_000_000).unwrap();
    assert!(log.log_start_offset() <= 150);
    assert!(log.log_end_offset() == 300);
}

#[test]
fn compact_only_topics_keep_everything() {
    let (_dir, mut log) = filled(LogConfig {
        cleanup_delete: false,
        cleanup_compact: true,
        ..config(Some(1), Some(1))
    });
    assert_eq!(log.apply_retention(10_000_000).unwrap().segments_deleted, 0);
    assert_eq!(log.log_start_offset(), 0);
}

#[test]
fn deleted_segments_are_renamed_at_once_and_removed_later_or_at_startup() {
    let (dir, mut log) = filled(config(None, None));
    let segments = log.segment_count();
    log.delete_before(150).unwrap();
    let deleted = segments - log.segment_count();
    assert!(deleted > 0);
    // The request path only renamed them: three files a segment wait for maintenance.
    assert_eq!(files_ending(dir.path(), ".deleted"), 3 * deleted);
    assert_eq!(
        read_records(&log, 150).len(),
        150,
        "the rest reads as before"
    );
    let doomed = log.take_doomed();
    assert_eq!(doomed.len(), 3 * deleted);
    assert!(log.take_doomed().is_empty(), "handed out once");

    // A crash before they were removed: the next start removes them.
    drop(log);
    let (log, _) = reopen(
        dir.path(),
        config(None, None),
        strand_log::LogOpenState {
            log_start_offset: 150,
            recovery_point: 0,
            high_watermark: 0,
            clean_shutdown: false,
        },
    );
    assert_eq!(files_ending(dir.path(), ".deleted"), 0);
    assert_eq!(log.log_start_offset(), 150);
}
