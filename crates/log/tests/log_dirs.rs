//! Several log directories (Kafka's log.dirs): placement, reopening, refusing a partition
//! found twice, and a directory going offline while the others serve.

mod common;

use std::path::Path;
use std::sync::Arc;

use common::*;
use strand_log::log_manager::{CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE};
use strand_log::{LogError, LogManager, LogManagerOptions, TopicPartition};

fn options() -> LogManagerOptions {
    LogManagerOptions {
        default_config: Arc::new(small_config()),
        ..LogManagerOptions::default()
    }
}

fn append(manager: &LogManager, tp: &TopicPartition, n: i64) -> Result<(), LogError> {
    let log = manager.get(tp).unwrap();
    let mut log = log.lock().unwrap();
    log.append_as_leader(&mut batch(2, 40, n), 0).map(|_| ())
}

/// Creates `tp` in the first of `dirs` with 10 batches of 2 records, then shuts down
/// cleanly (with no move queued).
fn write_and_stop(dirs: &[std::path::PathBuf], tp: &TopicPartition) {
    let (mut manager, _) = LogManager::open(dirs, options()).unwrap();
    manager.get_or_create(tp, None).unwrap();
    for n in 0..10 {
        append(&manager, tp, n).unwrap();
    }
    assert!(!manager.has_queued_moves());
    manager.shutdown().unwrap();
}

/// Directories in `dir` named after a partition (or a copy of one).
fn partition_dirs(dir: &Path) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| e.as_ref().unwrap().file_type().unwrap().is_dir())
        .count()
}

#[test]
fn partitions_spread_over_the_directories_and_stay_where_they_are() {
    let root = tempfile::tempdir().unwrap();
    let dirs: Vec<_> = (0..3).map(|i| root.path().join(format!("d{i}"))).collect();
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    let tps: Vec<_> = (0..6).map(|p| TopicPartition::new("orders", p)).collect();
    for tp in &tps {
        manager.get_or_create(tp, None).unwrap();
        append(&manager, tp, 0).unwrap();
    }
    let mut per_dir = [0; 3];
    let mut placed = Vec::new();
    for tp in &tps {
        let dir = manager.dir_of(tp).unwrap().to_path_buf();
        assert!(dir
            .join(tp.to_string())
            .join("00000000000000000000.log")
            .exists());
        per_dir[dirs.iter().position(|d| *d == dir).unwrap()] += 1;
        placed.push(dir);
    }
    assert_eq!(
        per_dir,
        [2, 2, 2],
        "the directory with the fewest logs is chosen"
    );
    manager.shutdown().unwrap();
    drop(manager);
    for dir in &dirs {
        assert!(dir.join(CLEAN_SHUTDOWN_FILE).exists());
    }

    let (manager, reports) = LogManager::open(&dirs, options()).unwrap();
    assert!(manager.previous_shutdown_clean());
    assert!(reports.is_empty(), "{reports:?}");
    for (tp, dir) in tps.iter().zip(&placed) {
        assert_eq!(manager.dir_of(tp), Some(dir.as_path()));
        let log = manager.get(tp).unwrap();
        assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 2);
    }
    let checkpoint = std::fs::read_to_string(dirs[0].join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();
    assert_eq!(
        checkpoint.lines().count(),
        2 + 2,
        "a directory lists its own logs"
    );
}

#[test]
fn a_partition_found_in_two_directories_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    for dir in &dirs {
        let (mut manager, _) = LogManager::open(&[dir], options()).unwrap();
        manager
            .get_or_create(&TopicPartition::new("t", 0), None)
            .unwrap();
        manager.shutdown().unwrap();
    }
    let error = LogManager::open(&dirs, options()).unwrap_err().to_string();
    assert!(
        error.contains("t-0") && error.contains("also in"),
        "{error}"
    );

    let error = LogManager::open(&[&dirs[0], &dirs[0]], options())
        .unwrap_err()
        .to_string();
    assert!(error.contains("listed twice"), "{error}");
}

#[test]
fn an_offline_directory_refuses_writes_while_the_others_serve() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    let (in_a, in_b) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
    for tp in [&in_a, &in_b] {
        manager.get_or_create(tp, None).unwrap();
        append(&manager, tp, 0).unwrap();
    }
    assert_eq!(manager.dir_of(&in_a), Some(dirs[0].as_path()));
    assert_eq!(manager.dir_of(&in_b), Some(dirs[1].as_path()));
    manager.checkpoint().unwrap();
    std::fs::remove_file(dirs[1].join(RECOVERY_POINT_CHECKPOINT_FILE)).unwrap();

    assert!(manager.fail_dir(&dirs[1], "the disk is gone"));
    let states = manager.dirs();
    assert_eq!(states[0].failure(), None);
    assert_eq!(states[1].failure(), Some("the disk is gone"));
    let error = append(&manager, &in_b, 1).unwrap_err();
    assert!(matches!(error, LogError::Offline(_)), "{error:?}");
    {
        let log = manager.get(&in_b).unwrap();
        let log = log.lock().unwrap();
        assert!(log.is_offline());
        assert!(log.failure().unwrap().contains("the disk is gone"));
        assert_eq!(read_records(&log, 0).len(), 2, "reads go on");
    }
    append(&manager, &in_a, 1).unwrap();
    let new = TopicPartition::new("t", 2);
    manager.get_or_create(&new, None).unwrap();
    assert_eq!(
        manager.dir_of(&new),
        Some(dirs[0].as_path()),
        "nothing new goes to an offline directory"
    );
    manager.checkpoint().unwrap();
    assert!(!dirs[1].join(RECOVERY_POINT_CHECKPOINT_FILE).exists());
    manager.shutdown().unwrap();
    assert!(dirs[0].join(CLEAN_SHUTDOWN_FILE).exists());
    assert!(
        !dirs[1].join(CLEAN_SHUTDOWN_FILE).exists(),
        "the offline directory is recovered at the next start"
    );
    drop(manager);

    let (manager, _) = LogManager::open(&dirs, options()).unwrap();
    assert!(!manager.previous_shutdown_clean());
    assert!(manager.dirs().iter().all(|dir| dir.failure().is_none()));
    append(&manager, &in_b, 2).unwrap();
    let log = manager.get(&in_b).unwrap();
    assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 4);
}

#[test]
fn a_directory_that_cannot_be_opened_starts_offline_unless_it_is_the_first() {
    let root = tempfile::tempdir().unwrap();
    let good = root.path().join("good");
    let broken = root.path().join("broken");
    std::fs::write(&broken, b"a file where a directory should be").unwrap();
    let (mut manager, _) = LogManager::open(&[&good, &broken], options()).unwrap();
    let states = manager.dirs();
    assert_eq!(states[0].failure(), None);
    assert!(states[1].failure().is_some(), "{states:?}");
    assert!(manager.dirs().iter().any(|dir| dir.failure().is_none()));
    let tp = TopicPartition::new("t", 0);
    manager.get_or_create(&tp, None).unwrap();
    assert_eq!(manager.dir_of(&tp), Some(good.as_path()));

    let error = LogManager::open(&[broken.as_path(), Path::new(&good)], options());
    assert!(error.is_err(), "the first directory holds the metadata");
}

#[test]
fn a_log_moves_to_another_directory_while_it_is_written() {
    use strand_log::log_move::MoveOutcome;
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    let tp = TopicPartition::new("moving", 0);
    manager.get_or_create(&tp, None).unwrap();
    // Several segments (small_config rolls often), a producer snapshot, epochs.
    for n in 0..200 {
        append(&manager, &tp, n).unwrap();
    }
    let log = manager.get(&tp).unwrap();
    let segments_before = log.lock().unwrap().segment_count();
    assert!(segments_before > 2, "{segments_before}");
    log.lock().unwrap().set_high_watermark(400);

    assert!(
        manager.begin_move(&tp, &dirs[1]).unwrap(),
        "a move is queued"
    );
    let job = manager.next_move().expect("the queued move");
    assert!(manager.next_move().is_none());
    assert_eq!(manager.moves().len(), 1);
    // Appends go on while the bulk is copied (throttled to take about a second, so they
    // land between the first copy and the swap, which must bring them along).
    let size = log.lock().unwrap().size_bytes().max(1);
    let mover = std::thread::spawn(move || {
        let outcome = job.run(Some(size));
        (job, outcome)
    });
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while manager.moves()[0].2.bytes == 0 {
        assert!(
            std::time::Instant::now() < deadline,
            "the copy never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
    for n in 200..400 {
        log.lock()
            .unwrap()
            .append_as_leader(&mut batch(2, 40, n), 0)
            .unwrap();
    }
    let (job, outcome) = mover.join().unwrap();
    manager.finish_move(&job, &outcome);
    assert_eq!(outcome.unwrap(), MoveOutcome::Moved);
    assert!(manager.moves().is_empty());
    assert_eq!(manager.dir_of(&tp), Some(dirs[1].as_path()));
    assert!(
        !dirs[0].join("moving-0").exists(),
        "the old copy is removed"
    );
    {
        let log = log.lock().unwrap();
        assert!(log.dir().starts_with(&dirs[1]));
        assert_eq!(log.log_end_offset(), 800);
        assert_eq!(log.high_watermark(), 400);
        let records = read_records(&log, 0);
        assert_eq!(records.len(), 800);
        assert!(records.windows(2).all(|w| w[1].0 == w[0].0 + 1), "no gap");
    }
    append(&manager, &tp, 400).unwrap();
    manager.shutdown().unwrap();
    drop((manager, log));

    let (manager, reports) = LogManager::open(&dirs, options()).unwrap();
    assert!(reports.is_empty(), "{reports:?}");
    assert_eq!(manager.dir_of(&tp), Some(dirs[1].as_path()));
    let log = manager.get(&tp).unwrap();
    assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 802);
}

#[test]
fn moves_are_refused_cancelled_or_remembered_as_kafka_does() {
    use strand_log::log_manager::MoveRefused;
    use strand_log::log_move::MoveOutcome;
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    let tp = TopicPartition::new("t", 0);
    manager.get_or_create(&tp, None).unwrap();
    append(&manager, &tp, 0).unwrap();

    let elsewhere = root.path().join("not-a-log-dir");
    assert_eq!(
        manager.begin_move(&tp, &elsewhere).unwrap_err(),
        MoveRefused::UnknownDir
    );
    assert!(!manager.begin_move(&tp, &dirs[0]).unwrap(), "already there");

    // A move back to where the log is cancels the one under way.
    assert!(manager.begin_move(&tp, &dirs[1]).unwrap());
    let job = manager.next_move().unwrap();
    assert!(!manager.begin_move(&tp, &dirs[1]).unwrap(), "on its way");
    assert!(!manager.begin_move(&tp, &dirs[0]).unwrap());
    let outcome = job.run(None);
    manager.finish_move(&job, &outcome);
    assert_eq!(outcome.unwrap(), MoveOutcome::Cancelled);
    assert_eq!(manager.dir_of(&tp), Some(dirs[0].as_path()));
    assert_eq!(partition_dirs(&dirs[1]), 0, "no copy left behind");
    append(&manager, &tp, 1).unwrap();
    // A move cancelled before it ran leaves the queue: asked back and forth, at most one.
    for _ in 0..100 {
        manager.begin_move(&tp, &dirs[1]).unwrap();
        manager.begin_move(&tp, &dirs[0]).unwrap();
    }
    assert!(
        manager.next_move().is_none(),
        "cancelled moves leave the queue"
    );

    // A partition not here yet is created in the directory asked for.
    let later = TopicPartition::new("t", 1);
    assert_eq!(
        manager.begin_move(&later, &dirs[0]).unwrap_err(),
        MoveRefused::NotHosted
    );
    manager.prefer_dir(&later, &dirs[0]).unwrap();
    manager.get_or_create(&later, None).unwrap();
    assert_eq!(manager.dir_of(&later), Some(dirs[0].as_path()));

    manager.fail_dir(&dirs[1], "gone");
    assert_eq!(
        manager.begin_move(&tp, &dirs[1]).unwrap_err(),
        MoveRefused::Offline
    );
}

#[test]
fn a_move_interrupted_by_a_crash_keeps_one_complete_copy() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let tp = TopicPartition::new("t", 0);
    write_and_stop(&dirs, &tp);
    let copy_into = |name: &str| {
        let target = dirs[1].join(name);
        std::fs::create_dir_all(&target).unwrap();
        for entry in std::fs::read_dir(dirs[0].join("t-0")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), target.join(entry.file_name())).unwrap();
        }
    };
    // Crashed before the old directory was renamed away: the copy is dropped (and a
    // `-future` one too, its move queued again).
    copy_into("t-0.1x1-moved");
    copy_into("t-0.1x2-future");
    let (manager, _) = LogManager::open(&dirs, options()).unwrap();
    assert_eq!(manager.dir_of(&tp), Some(dirs[0].as_path()));
    // Nothing of the old copies stays: only the queued move's mark.
    let left: Vec<String> = std::fs::read_dir(&dirs[1])
        .unwrap()
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].starts_with("t-0.") && left[0].ends_with("-future"),
        "{left:?}"
    );
    assert!(manager.has_queued_moves());
    manager.shutdown().unwrap();
    drop(manager);

    // Crashed after it: the complete copy takes its place.
    copy_into("t-0.1x3-moved");
    std::fs::rename(dirs[0].join("t-0"), dirs[0].join("t-0.1x3-delete")).unwrap();
    let (manager, _) = LogManager::open(&dirs, options()).unwrap();
    assert_eq!(manager.dir_of(&tp), Some(dirs[1].as_path()));
    assert!(!dirs[0].join("t-0.1x3-delete").exists());
    let log = manager.get(&tp).unwrap();
    assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 20);
}

#[test]
fn a_move_a_stop_interrupted_while_copying_is_resumed_at_start() {
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let tp = TopicPartition::new("t", 0);
    write_and_stop(&dirs, &tp);
    // What a stop in the middle of the copy leaves: part of a `-future` copy.
    let future = dirs[1].join("t-0.7x9-future");
    std::fs::create_dir_all(&future).unwrap();
    std::fs::write(future.join("00000000000000000000.log"), b"partial").unwrap();
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    assert_eq!(manager.dir_of(&tp), Some(dirs[0].as_path()));
    assert!(!future.exists(), "the partial copy is dropped");
    assert!(manager.has_queued_moves());
    let job = manager
        .next_move()
        .expect("the interrupted move, queued again");
    assert_eq!(job.log_move.tp, tp);
    assert_eq!(job.log_move.destination, dirs[1]);
    let outcome = job.run(None);
    manager.finish_move(&job, &outcome);
    assert_eq!(manager.dir_of(&tp), Some(dirs[1].as_path()));
    let log = manager.get(&tp).unwrap();
    assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 20);
}

#[test]
fn moves_still_queued_when_the_broker_stopped_are_resumed_at_start() {
    use strand_log::log_move::MoveOutcome;
    let root = tempfile::tempdir().unwrap();
    let dirs = [root.path().join("a"), root.path().join("b")];
    let (first, second) = (TopicPartition::new("t", 0), TopicPartition::new("t", 1));
    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    for tp in [&first, &second] {
        manager.get_or_create(tp, None).unwrap();
        for n in 0..10 {
            append(&manager, tp, n).unwrap();
        }
    }
    // Each asked to move to the other directory; the mover never ran either.
    let other = |manager: &LogManager, tp: &TopicPartition| {
        let here = manager.dir_of(tp).unwrap().to_path_buf();
        dirs.iter().find(|d| **d != here).unwrap().clone()
    };
    let wanted = [
        (first.clone(), other(&manager, &first)),
        (second.clone(), other(&manager, &second)),
    ];
    for (tp, destination) in &wanted {
        assert!(manager.begin_move(tp, destination).unwrap());
    }
    manager.shutdown().unwrap();
    drop(manager);

    let (mut manager, _) = LogManager::open(&dirs, options()).unwrap();
    let mut resumed = Vec::new();
    while let Some(job) = manager.next_move() {
        resumed.push((job.log_move.tp.clone(), job.log_move.destination.clone()));
        let outcome = job.run(None);
        manager.finish_move(&job, &outcome);
        assert_eq!(outcome.unwrap(), MoveOutcome::Moved);
    }
    resumed.sort_by_key(|(tp, _)| tp.partition);
    assert_eq!(resumed, wanted, "both queued moves come back");
    for (tp, destination) in &wanted {
        assert_eq!(manager.dir_of(tp), Some(destination.as_path()));
        let log = manager.get(tp).unwrap();
        assert_eq!(read_records(&log.lock().unwrap(), 0).len(), 20);
    }
    // A move cancelled before it ran leaves no mark to resume.
    let back = other(&manager, &first);
    assert!(manager.begin_move(&first, &back).unwrap());
    let here = manager.dir_of(&first).unwrap().to_path_buf();
    assert!(!manager.begin_move(&first, &here).unwrap(), "cancelled");
    manager.shutdown().unwrap();
    drop(manager);
    let (manager, _) = LogManager::open(&dirs, options()).unwrap();
    assert!(!manager.has_queued_moves());
}
