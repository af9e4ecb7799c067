//! Helpers shared by the log's integration tests.
#![allow(dead_code)]

use std::path::Path;
use std::sync::Arc;

use strand_log::{Clock, FileCache, Log, LogConfig, LogOpenState, ManualClock, RecoveryReport};
use strand_records::{
    walk_stored_records, BatchBuilder, BatchView, Compression, Record, WalkLimits,
};

/// A batch of `count` records whose values are `value_len` bytes; keys are `key-<n>` and
/// timestamps `timestamp + n`.
pub fn batch(count: usize, value_len: usize, timestamp: i64) -> Vec<u8> {
    batch_with(count, value_len, timestamp, Compression::None)
}

pub fn batch_with(count: usize, value_len: usize, timestamp: i64, codec: Compression) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, timestamp).compression(codec);
    for n in 0..count {
        builder.push(Record::new(
            Some(format!("key-{n}").into_bytes()),
            Some(vec![(n % 251) as u8; value_len]),
            timestamp + n as i64,
        ));
    }
    builder.build()
}

pub fn small_config() -> LogConfig {
    LogConfig {
        segment_bytes: 4 * 1024,
        index_interval_bytes: 256,
        ..LogConfig::default()
    }
}

pub fn new_log(dir: &Path, config: LogConfig, clock: Arc<ManualClock>) -> Log {
    Log::create(
        dir,
        Arc::new(config),
        FileCache::new(64),
        clock as Arc<dyn Clock>,
        0,
    )
    .unwrap()
}

pub fn reopen(dir: &Path, config: LogConfig, state: LogOpenState) -> (Log, RecoveryReport) {
    Log::open(
        dir,
        Arc::new(config),
        FileCache::new(64),
        Arc::new(ManualClock::new(1_000)),
        state,
    )
    .unwrap()
}

/// Every record readable from `from` to the log end, as (offset, timestamp, value length,
/// first value byte), by reading slices the way a consumer would.
pub fn read_records(log: &Log, from: i64) -> Vec<(i64, i64, usize)> {
    let mut records = Vec::new();
    let mut next = from;
    let end = log.log_end_offset();
    while next < end {
        let result = log.read(next, 1024, end, true).unwrap();
        let Some(slice) = result.slice else { break };
        let bytes = slice.read_to_vec().unwrap();
        let mut rest = &bytes[..];
        let before = next;
        while let Ok(view) = BatchView::parse(rest) {
            let header = view.header;
            walk_stored_records(&view, WalkLimits::default(), |record| {
                let offset = header.base_offset + record.offset_delta as i64;
                if offset >= next {
                    records.push((
                        offset,
                        header.base_timestamp + record.timestamp_delta,
                        record.value.map_or(0, |v| v.len()),
                    ));
                }
            })
            .unwrap();
            next = next.max(header.next_offset());
            rest = &rest[view.bytes.len()..];
        }
        assert!(next > before, "read made no progress at {next}");
    }
    records
}

/// How many names in `dir` end with `suffix`.
pub fn files_ending(dir: &Path, suffix: &str) -> usize {
    std::fs::read_dir(dir)
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .unwrap()
                .file_name()
                .to_string_lossy()
                .ends_with(suffix)
        })
        .count()
}
