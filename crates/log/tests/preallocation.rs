//! Blocks reserved ahead of the active segment: the file size stays the log end, the
//! reservation grows with the segment, and sealing (a roll) or a clean close gives back
//! what was not used. Reopening sees exactly the batches written.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use common::*;
use strand_log::{LogConfig, LogOpenState, ManualClock};

/// (size, bytes the file system allocated) of each segment file, oldest first.
fn segment_files(dir: &Path) -> Vec<(PathBuf, u64, u64)> {
    let mut files: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "log"))
        .collect();
    files.sort();
    files
        .into_iter()
        .map(|path| {
            let meta = fs::metadata(&path).unwrap();
            (path, meta.len(), meta.blocks() * 512)
        })
        .collect()
}

/// At most a block of slack over the size (a file system allocates whole blocks).
fn holds_no_reservation(size: u64, allocated: u64) -> bool {
    allocated <= size.next_multiple_of(4096) + 4096
}

#[test]
fn the_active_segment_reserves_ahead_and_gives_back_what_it_did_not_use() {
    let dir = tempfile::tempdir().unwrap();
    let config = LogConfig {
        segment_bytes: 1 << 20,
        ..LogConfig::default()
    };
    let mut log = new_log(dir.path(), config.clone(), Arc::new(ManualClock::new(0)));
    let one_batch = batch(16, 4000, 0).len() as u64;
    for _ in 0..8 {
        log.append_as_leader(&mut batch(16, 4000, 0), 0).unwrap();
    }
    let files = segment_files(dir.path());
    assert_eq!(files.len(), 1);
    let (_, size, allocated) = files[0].clone();
    assert_eq!(
        size,
        8 * one_batch,
        "the size is the log end, not the reservation"
    );
    // Each reservation reaches as far ahead as the segment holds: the one made at the
    // seventh batch reaches 14 batches.
    assert!(
        allocated >= size + size / 2,
        "{allocated} bytes allocated for {size} written: nothing reserved ahead"
    );

    // Past 1 MiB the log rolls: the sealed segment gives its reservation back.
    while log.segment_count() < 2 {
        log.append_as_leader(&mut batch(16, 4000, 0), 0).unwrap();
    }
    let files = segment_files(dir.path());
    let (sealed, size, allocated) = files[0].clone();
    assert!(
        holds_no_reservation(size, allocated),
        "sealed {} keeps {allocated} bytes for {size}",
        sealed.display()
    );
    let (_, active_size, active_allocated) = files[1].clone();
    assert!(active_allocated > active_size.next_multiple_of(4096));

    // A clean close gives back the active segment's reservation too.
    let end = log.log_end_offset();
    log.close().unwrap();
    drop(log);
    for (path, size, allocated) in segment_files(dir.path()) {
        assert!(
            holds_no_reservation(size, allocated),
            "{} keeps {allocated} bytes for {size} after close",
            path.display()
        );
    }
    let state = LogOpenState {
        recovery_point: end,
        log_start_offset: 0,
        high_watermark: end,
        clean_shutdown: true,
    };
    let (log, report) = reopen(dir.path(), config, state);
    assert_eq!(report.bytes_truncated, 0);
    assert_eq!(log.log_end_offset(), end);
    assert_eq!(read_records(&log, 0).len() as i64, end);
}

#[test]
fn a_crash_with_a_reservation_recovers_exactly_the_written_batches() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(
        dir.path(),
        LogConfig::default(),
        Arc::new(ManualClock::new(0)),
    );
    for _ in 0..10 {
        log.append_as_leader(&mut batch(16, 4000, 0), 0).unwrap();
    }
    let end = log.log_end_offset();
    drop(log); // no close: the reservation stays, as after kill -9
    let unclean = LogOpenState {
        recovery_point: 0,
        log_start_offset: 0,
        high_watermark: 0,
        clean_shutdown: false,
    };
    let (log, report) = reopen(dir.path(), LogConfig::default(), unclean);
    assert_eq!(report.bytes_truncated, 0, "{report:?}");
    assert_eq!(report.invalid_reason, None);
    assert_eq!(log.log_end_offset(), end);
}
