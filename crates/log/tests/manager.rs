//! The log manager: discovery, checkpoints, the clean-shutdown marker, the directory lock,
//! deletion.

mod common;

use std::sync::Arc;

use common::*;
use strand_log::log_manager::{CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE};
use strand_log::{LogConfig, LogManager, LogManagerOptions, TopicPartition};

fn options() -> LogManagerOptions {
    LogManagerOptions {
        default_config: Arc::new(small_config()),
        ..LogManagerOptions::default()
    }
}

#[test]
fn clean_shutdown_writes_the_marker_and_reopen_skips_recovery() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let orders = TopicPartition::new("orders-eu", 3);
    let log = manager.get_or_create(&orders, None).unwrap();
    for n in 0..40 {
        log.lock()
            .unwrap()
            .append_as_leader(&mut batch(2, 40, n), 0)
            .unwrap();
    }
    log.lock().unwrap().set_high_watermark(60);
    drop(log);
    manager.shutdown().unwrap();
    drop(manager);
    assert!(dir.path().join(CLEAN_SHUTDOWN_FILE).exists());
    let checkpoint =
        std::fs::read_to_string(dir.path().join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();
    assert_eq!(checkpoint, "0\n1\norders-eu 3 80\n");

    let (manager, reports) = LogManager::open(&[dir.path()], options()).unwrap();
    assert!(manager.previous_shutdown_clean());
    assert!(reports.is_empty(), "{reports:?}");
    assert!(
        !dir.path().join(CLEAN_SHUTDOWN_FILE).exists(),
        "the marker is consumed at start"
    );
    let log = manager.get(&orders).unwrap();
    let log = log.lock().unwrap();
    assert_eq!((log.log_end_offset(), log.high_watermark()), (80, 60));
    assert_eq!(read_records(&log, 0).len(), 80);
}

#[test]
fn unclean_stop_recovers_from_the_checkpointed_recovery_point() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None).unwrap();
    for n in 0..40 {
        log.lock()
            .unwrap()
            .append_as_leader(&mut batch(2, 40, n), 0)
            .unwrap();
    }
    manager.flush_all().unwrap();
    for n in 0..10 {
        log.lock()
            .unwrap()
            .append_as_leader(&mut batch(2, 40, n), 0)
            .unwrap();
    }
    drop(log);
    drop(manager); // crash: no shutdown
    let (manager, reports) = LogManager::open(&[dir.path()], options()).unwrap();
    assert!(!manager.previous_shutdown_clean());
    assert_eq!(reports.len(), 1);
    assert!(reports[0].1.segments_recovered >= 1);
    assert_eq!(
        manager.get(&tp).unwrap().lock().unwrap().log_end_offset(),
        100
    );
}

#[test]
fn a_data_directory_is_used_by_one_process_at_a_time() {
    let dir = tempfile::tempdir().unwrap();
    let (_manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let error = LogManager::open(&[dir.path()], options()).unwrap_err();
    assert!(error.to_string().contains("in use"), "{error}");
}

#[test]
fn delete_removes_the_partition_and_it_stays_gone() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let tp = TopicPartition::new("gone", 0);
    manager
        .get_or_create(&tp, None)
        .unwrap()
        .lock()
        .unwrap()
        .append_as_leader(&mut batch(1, 1, 0), 0)
        .unwrap();
    assert!(manager.delete(&tp).unwrap());
    assert!(!dir.path().join("gone-0").exists());
    manager.shutdown().unwrap();
    drop(manager);
    let (manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    assert!(manager.get(&tp).is_none());
}

#[test]
fn per_partition_config_is_used() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let strict = Arc::new(LogConfig {
        max_message_bytes: 100,
        ..LogConfig::default()
    });
    let log = manager
        .get_or_create(&TopicPartition::new("strict", 0), Some(strict))
        .unwrap();
    let error = log
        .lock()
        .unwrap()
        .append_as_leader(&mut batch(1, 500, 0), 0)
        .unwrap_err();
    assert_eq!(error.kafka_error_code(), 10);
}

#[test]
fn directory_names_parse_back_to_topic_partitions() {
    assert_eq!(
        TopicPartition::from_dir_name("a-b-c-12"),
        Some(TopicPartition::new("a-b-c", 12))
    );
    assert_eq!(
        TopicPartition::from_dir_name("__consumer_offsets-49"),
        Some(TopicPartition::new("__consumer_offsets", 49))
    );
    assert_eq!(TopicPartition::from_dir_name("nopartition"), None);
    assert_eq!(TopicPartition::from_dir_name("bad name-1"), None);
    assert_eq!(TopicPartition::from_dir_name("t-x"), None);
    assert_eq!(
        TopicPartition::from_dir_name("t--1"),
        Some(TopicPartition::new("t-", 1))
    );
}

#[test]
fn a_deferred_log_touches_the_disk_at_its_first_write() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let tp = TopicPartition::new("lazy", 0);
    let log = manager.get_or_create_deferred(&tp, None).unwrap();
    let partition_dir = dir.path().join("lazy-0");
    assert!(!partition_dir.exists(), "created in memory only");
    {
        // An empty log answers reads without its files.
        let log = log.lock().unwrap();
        assert!(!log.is_on_disk());
        assert_eq!((log.log_start_offset(), log.log_end_offset()), (0, 0));
        assert!(log.read(0, 1 << 20, 0, true).unwrap().slice.is_none());
        assert_eq!(log.offset_for_timestamp(-5).unwrap(), None);
        assert_eq!(log.offset_for_timestamp(0).unwrap(), None);
        assert_eq!(log.max_timestamp_offset().unwrap(), None);
    }
    manager.checkpoint().unwrap();
    assert!(!partition_dir.exists(), "checkpoints need no directory");

    let mut log = log.lock().unwrap();
    log.append_as_leader(&mut batch(3, 10, 0), 0).unwrap();
    assert!(log.is_on_disk());
    assert!(partition_dir.join("00000000000000000000.log").exists());
    log.set_high_watermark(3);
    assert_eq!(read_records(&log, 0).len(), 3);
}

#[test]
fn a_deferred_log_never_written_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let kept = TopicPartition::new("idle", 0);
    let doomed = TopicPartition::new("idle", 1);
    manager.get_or_create_deferred(&kept, None).unwrap();
    let doomed_log = manager.get_or_create_deferred(&doomed, None).unwrap();
    assert!(manager.delete(&doomed).unwrap());
    // A background materializer holding the log must not bring the directory back.
    assert!(doomed_log.lock().unwrap().materialize().is_err());
    assert!(!dir.path().join("idle-1").exists());

    manager.shutdown().unwrap();
    drop(manager);
    assert!(!dir.path().join("idle-0").exists(), "closing wrote nothing");
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    assert!(manager.get(&kept).is_none(), "nothing on disk to discover");
    // The owner (the broker's topic metadata) recreates it; materializing makes the files.
    let log = manager.get_or_create_deferred(&kept, None).unwrap();
    log.lock().unwrap().materialize().unwrap();
    assert!(dir
        .path()
        .join("idle-0")
        .join("00000000000000000000.index")
        .exists());
}

#[test]
fn a_follower_can_restart_a_deferred_log_at_the_leaders_start() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let tp = TopicPartition::new("follower", 0);
    let log = manager.get_or_create_deferred(&tp, None).unwrap();
    let mut log = log.lock().unwrap();
    log.truncate_fully_and_start_at(50).unwrap();
    assert!(log.is_on_disk());
    assert_eq!((log.log_start_offset(), log.log_end_offset()), (50, 50));
    assert!(dir
        .path()
        .join("follower-0")
        .join("00000000000000000050.log")
        .exists());
    assert!(!dir
        .path()
        .join("follower-0")
        .join("00000000000000000000.log")
        .exists());
}

#[test]
fn maintenance_removes_the_files_of_deleted_segments() {
    let dir = tempfile::tempdir().unwrap();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    let tp = TopicPartition::new("t", 0);
    let log = manager.get_or_create(&tp, None).unwrap();
    {
        let mut log = log.lock().unwrap();
        for n in 0..40 {
            log.append_as_leader(&mut batch(2, 40, n), 0).unwrap();
        }
        log.set_high_watermark(80);
        log.delete_before(60).unwrap();
    }
    let log_dir = log.lock().unwrap().dir().to_path_buf();
    assert!(files_ending(&log_dir, ".deleted") > 0, "renamed, waiting");
    manager.maintenance().unwrap();
    assert_eq!(files_ending(&log_dir, ".deleted"), 0);
}
