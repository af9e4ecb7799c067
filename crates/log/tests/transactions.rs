//! Transactions in the log: transactional batches open a producer's transaction, a marker
//! (control batch) closes it, and the last stable offset stays at the first offset of the
//! oldest transaction not yet stable, on the leader, on a follower copying its bytes, and
//! after an unclean restart that rebuilds the producer state from the log.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, LogError, LogOpenState, ManualClock, ProducerError};
use strand_records::{BatchBuilder, EndTxnMarker, Record, TxnResult};

fn txn_batch(producer_id: i64, epoch: i16, sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 1_000)
        .producer(producer_id, epoch, sequence)
        .transactional();
    for n in 0..count {
        builder.push(Record::new(None, Some(vec![n as u8; 10]), 1_000));
    }
    builder.build()
}

fn end(result: TxnResult, coordinator_epoch: i32) -> EndTxnMarker {
    EndTxnMarker {
        result,
        coordinator_epoch,
    }
}

fn unclean(log: &strand_log::Log) -> LogOpenState {
    LogOpenState {
        recovery_point: 0,
        log_start_offset: log.log_start_offset(),
        high_watermark: log.high_watermark(),
        clean_shutdown: false,
    }
}

#[test]
fn the_last_stable_offset_waits_for_the_oldest_open_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    log.append_as_leader(&mut batch(2, 10, 0), 0).unwrap(); // 0..=1, plain
    log.append_as_leader(&mut txn_batch(7, 0, 0, 3), 0).unwrap(); // 2..=4
    log.append_as_leader(&mut txn_batch(8, 0, 0, 1), 0).unwrap(); // 5
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), 2);

    let (info, closed) = log
        .append_marker(7, 0, end(TxnResult::Commit, 1), 0)
        .unwrap();
    assert_eq!(info.first_offset, 6);
    assert_eq!(
        closed.map(|t| (t.first_offset, t.last_offset)),
        Some((2, 6))
    );
    // Closed, but the marker is not replicated yet.
    assert_eq!(log.last_stable_offset(), 2);
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(
        log.last_stable_offset(),
        5,
        "producer 8's transaction is still open"
    );
    let (_, closed) = log
        .append_marker(8, 0, end(TxnResult::Abort, 1), 0)
        .unwrap();
    assert_eq!(closed.map(|t| t.result), Some(TxnResult::Abort));
    log.set_high_watermark(log.log_end_offset());
    assert_eq!(log.last_stable_offset(), log.high_watermark());
}

#[test]
fn markers_from_an_older_producer_or_coordinator_epoch_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    log.append_as_leader(&mut txn_batch(7, 3, 0, 1), 0).unwrap();
    log.append_marker(7, 3, end(TxnResult::Commit, 5), 0)
        .unwrap();
    let stale_producer = log.append_marker(7, 2, end(TxnResult::Abort, 5), 0);
    assert!(matches!(
        stale_producer,
        Err(LogError::Producer(
            ProducerError::InvalidProducerEpoch { .. }
        ))
    ));
    let stale_coordinator = log.append_marker(7, 3, end(TxnResult::Abort, 4), 0);
    match stale_coordinator {
        Err(LogError::Producer(error)) => assert_eq!(error.kafka_error_code(), 52),
        other => panic!("{other:?}"),
    }
    assert_eq!(
        log.log_end_offset(),
        2,
        "nothing written for refused markers"
    );
}

#[test]
fn a_follower_and_an_unclean_restart_track_the_same_transactions() {
    let leader_dir = tempfile::tempdir().unwrap();
    let follower_dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(ManualClock::new(0));
    let mut leader = new_log(leader_dir.path(), small_config(), clock.clone());
    let mut follower = new_log(follower_dir.path(), small_config(), clock);
    // Enough batches to roll segments (and take producer snapshots) on the way.
    for sequence in 0..80 {
        leader
            .append_as_leader(&mut txn_batch(1, 0, sequence, 1), 0)
            .unwrap();
    }
    leader
        .append_marker(1, 0, end(TxnResult::Abort, 2), 0)
        .unwrap();
    let open_at = leader.log_end_offset();
    leader
        .append_as_leader(&mut txn_batch(2, 0, 0, 2), 0)
        .unwrap();
    leader.append_as_leader(&mut batch(1, 10, 0), 0).unwrap();

    // The follower copies the leader's bytes, markers included.
    let mut offset = 0;
    while offset < leader.log_end_offset() {
        let read = leader
            .read(offset, 1 << 20, leader.log_end_offset(), true)
            .unwrap();
        let bytes = read.slice.unwrap().read_to_vec().unwrap();
        follower.append_as_follower(&bytes, 0).unwrap();
        offset = follower.log_end_offset();
    }
    for log in [&mut leader, &mut follower] {
        log.set_high_watermark(log.log_end_offset());
        assert_eq!(log.last_stable_offset(), open_at);
    }
    let aborted = leader.aborted_txns(0, leader.log_end_offset());
    assert_eq!(aborted.len(), 1);
    assert_eq!((aborted[0].producer_id, aborted[0].first_offset), (1, 0));
    assert_eq!(follower.aborted_txns(0, follower.log_end_offset()), aborted);

    // kill -9: reopened from the files, with recovery replaying the log.
    let state = unclean(&follower);
    drop(follower);
    let (mut recovered, _) = reopen(follower_dir.path(), small_config(), state);
    recovered.set_high_watermark(recovered.log_end_offset());
    assert_eq!(recovered.last_stable_offset(), open_at);
    assert_eq!(
        recovered.aborted_txns(0, recovered.log_end_offset()),
        aborted
    );
    assert_eq!(
        recovered.producer_state().get(1).unwrap().coordinator_epoch,
        2,
        "the marker's coordinator epoch is recovered"
    );
    let (_, closed) = recovered
        .append_marker(2, 0, end(TxnResult::Commit, 2), 0)
        .unwrap();
    assert_eq!(closed.map(|t| t.first_offset), Some(open_at));
}
