//! Idempotent-producer state kept by the log: duplicates answered with their original
//! offsets across clean and unclean restarts, truncation rolling the state back,
//! Kafka's errors for gaps, stale epochs and unknown producers.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, LogError, LogOpenState, ManualClock, ProducerError};
use strand_records::{BatchBuilder, Record};

fn producer_batch(producer_id: i64, epoch: i16, sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 1_000).producer(producer_id, epoch, sequence);
    for n in 0..count {
        builder.push(Record::new(
            None,
            Some(format!("{producer_id}-{sequence}-{n}").into_bytes()),
            1_000,
        ));
    }
    builder.build()
}

fn state(log: &strand_log::Log, clean: bool) -> LogOpenState {
    LogOpenState {
        recovery_point: log.recovery_point(),
        log_start_offset: log.log_start_offset(),
        high_watermark: log.high_watermark(),
        clean_shutdown: clean,
    }
}

#[test]
fn a_retried_batch_gets_its_original_offsets_and_is_not_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    let first = log
        .append_as_leader(&mut producer_batch(7, 0, 0, 3), 0)
        .unwrap();
    log.append_as_leader(&mut batch(2, 10, 0), 0).unwrap();
    let retry = log
        .append_as_leader(&mut producer_batch(7, 0, 0, 3), 0)
        .unwrap();
    assert!(retry.duplicate);
    assert_eq!(
        (retry.first_offset, retry.last_offset),
        (first.first_offset, first.last_offset)
    );
    assert_eq!(log.log_end_offset(), 5, "the retry wrote nothing");
}

#[test]
fn kafka_errors_for_gaps_stale_epochs_and_unknown_producers() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    // An unknown producer's first batch is accepted at any sequence (Kafka 4.x); its
    // state then holds that sequence, so going back to 0 is out of order.
    log.append_as_leader(&mut producer_batch(8, 0, 5, 1), 0)
        .unwrap();
    let back = log
        .append_as_leader(&mut producer_batch(8, 0, 0, 1), 0)
        .unwrap_err();
    assert!(matches!(
        back,
        LogError::Producer(ProducerError::OutOfOrderSequence { .. })
    ));
    log.append_as_leader(&mut producer_batch(9, 0, 0, 2), 0)
        .unwrap();
    let gap = log
        .append_as_leader(&mut producer_batch(9, 0, 3, 1), 0)
        .unwrap_err();
    assert_eq!(gap.kafka_error_code(), 45, "OUT_OF_ORDER_SEQUENCE_NUMBER");
    log.append_as_leader(&mut producer_batch(9, 1, 0, 1), 0)
        .unwrap();
    let stale = log
        .append_as_leader(&mut producer_batch(9, 0, 2, 1), 0)
        .unwrap_err();
    assert_eq!(stale.kafka_error_code(), 47, "INVALID_PRODUCER_EPOCH");
    assert_eq!(
        log.log_end_offset(),
        4,
        "only the four accepted records were written"
    );
}

#[test]
fn duplicates_are_detected_after_clean_and_unclean_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig {
        segment_bytes: 2_048,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    let mut last = None;
    for sequence in (0..200).step_by(2) {
        last = Some(
            log.append_as_leader(&mut producer_batch(1, 0, sequence, 2), 0)
                .unwrap(),
        );
    }
    assert!(log.segment_count() > 3, "rolls took snapshots");
    log.close().unwrap();
    let clean = state(&log, true);
    drop(log);
    let (mut log, _) = reopen(dir.path(), config(), clean);
    let retry = log
        .append_as_leader(&mut producer_batch(1, 0, 198, 2), 0)
        .unwrap();
    assert!(
        retry.duplicate && retry.first_offset == last.unwrap().first_offset,
        "after a clean restart"
    );

    // More batches, then a crash (no close): recovery replays from the last snapshot.
    for sequence in (200..260).step_by(2) {
        last = Some(
            log.append_as_leader(&mut producer_batch(1, 0, sequence, 2), 0)
                .unwrap(),
        );
    }
    let unclean = state(&log, false);
    drop(log);
    let (mut log, _) = reopen(dir.path(), config(), unclean);
    let retry = log
        .append_as_leader(&mut producer_batch(1, 0, 258, 2), 0)
        .unwrap();
    assert!(
        retry.duplicate && retry.first_offset == last.unwrap().first_offset,
        "after a crash"
    );
    assert_eq!(
        log.append_as_leader(&mut producer_batch(1, 0, 260, 2), 0)
            .unwrap()
            .first_offset,
        260
    );
}

#[test]
fn truncation_rolls_producer_state_back() {
    let dir = tempfile::tempdir().unwrap();
    let config = || LogConfig {
        segment_bytes: 1_024,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config(), Arc::new(ManualClock::new(0)));
    for sequence in 0..40 {
        log.append_as_leader(&mut producer_batch(3, 0, sequence, 1), 0)
            .unwrap();
    }
    log.truncate_to(30).unwrap();
    // Sequence 29 is the last one kept; 30 is new again, 29 is a duplicate.
    assert!(
        log.append_as_leader(&mut producer_batch(3, 0, 29, 1), 0)
            .unwrap()
            .duplicate
    );
    let again = log
        .append_as_leader(&mut producer_batch(3, 0, 30, 1), 0)
        .unwrap();
    assert!(!again.duplicate);
    assert_eq!(again.first_offset, 30);
    // Truncating everything forgets the producer.
    log.truncate_to(0).unwrap();
    assert!(log.producer_state().is_empty());
    // ...so a retry of an old sequence is new again (nothing left to duplicate).
    let after = log
        .append_as_leader(&mut producer_batch(3, 0, 29, 1), 0)
        .unwrap();
    assert!(!after.duplicate);
    assert_eq!(after.first_offset, 0);
}

#[test]
fn idle_producers_expire() {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(1_000));
    let config = LogConfig {
        producer_id_expiration_ms: 10_000,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config, clock.clone());
    log.append_as_leader(&mut producer_batch(5, 0, 0, 1), 0)
        .unwrap();
    clock.advance_ms(10_000);
    log.flush_due(); // periodic work expires idle producers
    assert!(log.producer_state().get(5).is_none());
}
