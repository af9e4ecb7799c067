//! Durability: group commit in flush-before-ack mode, and storage failures (a full disk)
//! that must surface as errors without leaving a half batch behind.

mod common;
#[path = "common/small_disk.rs"]
mod small_disk;

use std::os::unix::fs::FileExt;
use std::sync::{Arc, Mutex};
use std::thread;

use common::*;
use small_disk::SmallDisk;
use strand_log::{
    append_durably, Durability, DurableState, FileCache, LogConfig, LogError, LogOpenState,
    ManualClock, SyncGate,
};

/// A gate over one empty segment in `dir`: the segment's id, its files, the gate.
fn one_segment_gate(
    dir: &std::path::Path,
) -> (
    strand_log::file_cache::SegmentId,
    Arc<strand_log::file_cache::SegmentFiles>,
    Arc<SyncGate>,
) {
    let cache = FileCache::new(4);
    let paths = strand_log::file_cache::SegmentPaths::new(dir, 0);
    for path in [&paths.log, &paths.offset_index, &paths.time_index] {
        std::fs::File::create(path).unwrap();
    }
    let id = cache.new_segment_id();
    let files = cache.get(id, &paths).unwrap();
    (id, files, SyncGate::new(dir.to_path_buf(), cache, 0))
}

#[test]
fn concurrent_waiters_share_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (id, files, gate) = one_segment_gate(dir.path());
    // Eight appenders have written; then all ask for durability at once.
    for end in 1..=8 {
        files.log.write_all_at(&[end as u8], end as u64).unwrap();
        gate.note_written(id, 0, end);
    }
    thread::scope(|scope| {
        for end in 1..=8 {
            let gate = &gate;
            scope.spawn(move || gate.wait_durable(end).unwrap());
        }
    });
    assert_eq!(
        gate.syncs_done(),
        1,
        "one fdatasync covered all eight appends"
    );
    assert_eq!(gate.durable_end_offset(), 8);
}

/// A waker that counts its wakes.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

#[test]
fn async_waiters_hold_no_thread_and_share_one_sync() {
    let dir = tempfile::tempdir().unwrap();
    let (id, files, gate) = one_segment_gate(dir.path());
    files.log.write_all_at(&[1], 0).unwrap();
    gate.note_written(id, 0, 1);
    let counter = Arc::new(CountingWaker(Default::default()));
    let waker = std::task::Waker::from(counter.clone());

    // The first waiter is handed the sync; the next 10,000 (on this one thread) park.
    let DurableState::SyncNow(ticket) = gate.poll_durable(1, &waker) else {
        panic!("nobody syncs yet: the first waiter must")
    };
    files.log.write_all_at(&[2], 1).unwrap();
    gate.note_written(id, 0, 2);
    for _ in 0..10_000 {
        assert!(matches!(
            gate.poll_durable(2, &waker),
            DurableState::Pending
        ));
    }
    // A blocking waiter meanwhile waits for the same sync, not a second one.
    ticket.run();
    assert!(
        counter.0.load(std::sync::atomic::Ordering::SeqCst) >= 1,
        "parked waiters woken"
    );
    assert_eq!(gate.syncs_done(), 1);
    // Offset 1 was written after the sync began: the next poll runs the next sync.
    assert!(matches!(
        gate.poll_durable(1, &waker),
        DurableState::Ready(Ok(()))
    ));
    let DurableState::SyncNow(ticket) = gate.poll_durable(2, &waker) else {
        panic!("what the first sync did not cover needs another")
    };
    assert!(matches!(
        gate.poll_durable(2, &waker),
        DurableState::Pending
    ));
    drop(ticket); // an unrun ticket still syncs, or every waiter would park forever
    assert!(matches!(
        gate.poll_durable(2, &waker),
        DurableState::Ready(Ok(()))
    ));
    assert_eq!(gate.syncs_done(), 2);
}

#[test]
fn a_wait_for_offsets_truncated_before_their_sync_fails_instead_of_spinning() {
    let dir = tempfile::tempdir().unwrap();
    let (id, files, gate) = one_segment_gate(dir.path());
    files.log.write_all_at(&[1, 2, 3], 0).unwrap();
    gate.note_written(id, 0, 3);
    // A demoted leader's unsynced tail is cut back to offset 1.
    gate.note_truncated(1);
    let waker = std::task::Waker::from(Arc::new(CountingWaker(Default::default())));
    assert!(matches!(
        gate.poll_durable(3, &waker),
        DurableState::Ready(Err(_))
    ));
}

#[test]
fn flush_before_ack_acknowledges_only_durable_offsets() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        durability: Durability::FlushBeforeAck,
        ..LogConfig::default()
    };
    let log = Arc::new(Mutex::new(new_log(
        dir.path(),
        config,
        Arc::new(ManualClock::new(0)),
    )));
    let gate = log.lock().unwrap().sync_gate();
    let appends_per_thread = 50;
    let threads = 4;
    thread::scope(|scope| {
        for _ in 0..threads {
            let (log, gate) = (log.clone(), gate.clone());
            scope.spawn(move || {
                for _ in 0..appends_per_thread {
                    let info = append_durably(&log, &mut batch(4, 256, 0), 0).unwrap();
                    assert!(
                        gate.durable_end_offset() > info.last_offset,
                        "acknowledged before durable"
                    );
                }
            });
        }
    });
    let total = (threads * appends_per_thread) as u64;
    let syncs = gate.syncs_done();
    println!("{total} durable appends took {syncs} syncs");
    assert!(syncs >= 1 && syncs <= total);
    assert_eq!(log.lock().unwrap().log_end_offset(), total as i64 * 4);
}

#[test]
fn a_full_disk_fails_appends_cleanly_and_writes_resume_once_space_is_freed() {
    let mount_point = tempfile::tempdir().unwrap();
    let Some(_disk) = SmallDisk::mount(mount_point.path(), 256) else {
        return; // needs root (CI runs as root); mount says SKIPPED
    };
    // Ballast the operator removes later to make room for recovery.
    let ballast = mount_point.path().join("ballast");
    std::fs::write(&ballast, vec![0u8; 64 * 1024]).unwrap();
    let dir = mount_point.path().join("t-0");
    let mut log = new_log(&dir, LogConfig::default(), Arc::new(ManualClock::new(0)));
    let mut acknowledged = 0i64;
    let error = loop {
        match log.append_as_leader(&mut batch(8, 1_000, 0), 0) {
            Ok(info) => acknowledged = info.last_offset + 1,
            Err(error) => break error,
        }
        assert!(acknowledged < 10_000, "the disk never filled");
    };
    assert!(matches!(error, LogError::Io(_)), "{error}");
    assert_eq!(error.kafka_error_code(), 56, "KAFKA_STORAGE_ERROR");
    // The failed write was cut back cleanly: the log stays online, and writes fail only
    // while the disk is full.
    assert!(!log.is_offline());
    assert!(matches!(
        log.append_as_leader(&mut batch(8, 1_000, 0), 0),
        Err(LogError::Io(_))
    ));
    assert_eq!(log.log_end_offset(), acknowledged);
    assert_eq!(
        read_records(&log, 0).len() as i64,
        acknowledged,
        "everything acknowledged still reads"
    );
    let size_on_disk = std::fs::metadata(dir.join("00000000000000000000.log"))
        .unwrap()
        .len();
    assert_eq!(
        size_on_disk,
        log.size_bytes(),
        "no partial batch left in the file"
    );
    // The operator frees space: writes succeed again without a restart.
    std::fs::remove_file(&ballast).unwrap();
    let info = log
        .append_as_leader(&mut batch(8, 1_000, 0), 0)
        .expect("a write succeeds once there is room");
    assert_eq!(info.first_offset, acknowledged);
    acknowledged = info.last_offset + 1;
    assert_eq!(read_records(&log, 0).len() as i64, acknowledged);
    drop(log);
    let (log, report) = reopen(&dir, LogConfig::default(), LogOpenState::default());
    assert_eq!(report.bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), acknowledged);
}

/// The same with segments rolling while the disk fills: a roll (new files, sealing the
/// old segment's indexes) that fails is undone too, and the log continues once there is
/// room.
#[test]
fn a_full_disk_during_rolls_leaves_the_log_whole_and_writable() {
    let mount_point = tempfile::tempdir().unwrap();
    let Some(_disk) = SmallDisk::mount(mount_point.path(), 256) else {
        return; // needs root; mount says SKIPPED
    };
    let ballast = mount_point.path().join("ballast");
    std::fs::write(&ballast, vec![0u8; 64 * 1024]).unwrap();
    let dir = mount_point.path().join("t-0");
    let config = LogConfig {
        segment_bytes: 9_000,
        index_interval_bytes: 1,
        ..LogConfig::default()
    };
    let mut log = new_log(&dir, config.clone(), Arc::new(ManualClock::new(0)));
    let mut acknowledged = 0i64;
    let mut failures = 0;
    for n in 0..10_000 {
        match log.append_as_leader(&mut batch(2, 1_000, n), 0) {
            Ok(info) => acknowledged = info.last_offset + 1,
            Err(error) => {
                assert_eq!(error.kafka_error_code(), 56, "{error}");
                failures += 1;
                if failures == 20 {
                    break;
                }
            }
        }
    }
    assert_eq!(failures, 20, "the disk never filled");
    assert!(!log.is_offline());
    assert!(log.segment_count() > 3, "rolled while filling");
    assert_eq!(log.log_end_offset(), acknowledged);
    assert_eq!(read_records(&log, 0).len() as i64, acknowledged);
    std::fs::remove_file(&ballast).unwrap();
    for n in 0..10 {
        let info = log
            .append_as_leader(&mut batch(2, 1_000, n), 0)
            .expect("writes resume once there is room");
        acknowledged = info.last_offset + 1;
    }
    assert_eq!(read_records(&log, 0).len() as i64, acknowledged);
    log.close().unwrap();
    drop(log);
    let state = LogOpenState {
        recovery_point: acknowledged,
        clean_shutdown: true,
        ..LogOpenState::default()
    };
    let (log, report) = reopen(&dir, config, state);
    assert_eq!(report, Default::default());
    assert_eq!(log.log_end_offset(), acknowledged);
    assert_eq!(read_records(&log, 0).len() as i64, acknowledged);
}
