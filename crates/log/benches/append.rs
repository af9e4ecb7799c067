//! Append and read throughput of the partition log, each beside its raw-I/O ceiling
//! measured in the same run:
//!
//! - `append/raw_write` vs `append/log_page_cache`: sequential writes of the same 16 KiB
//!   batches (16 records of 1 KiB) with a plain write loop, and through `Log::append_as_leader`.
//! - `append/raw_write_fdatasync` vs `append/log_flush_before_ack`: the same, with an
//!   fdatasync per batch, and through `append_durably` (flush-before-ack, one appender).
//! - `append/log_flush_before_ack_4_appenders`: four threads, showing group commit.
//! - `read/raw_pread` vs `read/log_read`: 1 MiB fetches from the page cache.
//!
//! Run: `cargo bench -p strand-log --bench append`; ratios: `scripts/bench-log-ratios`.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strand_log::{append_durably, Durability, FileCache, Log, LogConfig, SystemClock};
use strand_records::{BatchBuilder, Record};

const RECORDS_PER_BATCH: usize = 16;
const RECORD_VALUE_BYTES: usize = 1024;

fn batch() -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 1_700_000_000_000);
    for n in 0..RECORDS_PER_BATCH {
        let value: Vec<u8> = (0..RECORD_VALUE_BYTES)
            .map(|i| (i * 31 + n) as u8)
            .collect();
        builder.push(Record::new(
            Some(format!("key-{n}").into_bytes()),
            Some(value),
            1_700_000_000_000 + n as i64,
        ));
    }
    builder.build()
}

fn new_log(dir: &Path, durability: Durability) -> Log {
    let config = LogConfig {
        durability,
        ..LogConfig::default()
    };
    Log::create(
        dir,
        Arc::new(config),
        FileCache::new(64),
        Arc::new(SystemClock),
        0,
    )
    .unwrap()
}

fn append(c: &mut Criterion) {
    let template = batch();
    let mut group = c.benchmark_group("append");
    group.throughput(Throughput::Bytes(template.len() as u64));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));

    group.bench_function("raw_write", |b| {
        b.iter_custom(|iterations| {
            let dir = tempfile::tempdir().unwrap();
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("raw"))
                .unwrap();
            let started = Instant::now();
            for _ in 0..iterations {
                file.write_all(&template).unwrap();
            }
            started.elapsed()
        })
    });
    group.bench_function("log_page_cache", |b| {
        b.iter_custom(|iterations| {
            let dir = tempfile::tempdir().unwrap();
            let mut log = new_log(dir.path(), Durability::PageCache);
            let mut bytes = template.clone();
            let started = Instant::now();
            for _ in 0..iterations {
                log.append_as_leader(&mut bytes, 0).unwrap();
            }
            started.elapsed()
        })
    });
    group.bench_function("raw_write_fdatasync", |b| {
        b.iter_custom(|iterations| {
            let dir = tempfile::tempdir().unwrap();
            let mut file = OpenOptions::new()
                .create(true)
                .append(true)
                .open(dir.path().join("raw"))
                .unwrap();
            let started = Instant::now();
            for _ in 0..iterations {
                file.write_all(&template).unwrap();
                file.sync_data().unwrap();
            }
            started.elapsed()
        })
    });
    group.bench_function("log_flush_before_ack", |b| {
        b.iter_custom(|iterations| {
            let dir = tempfile::tempdir().unwrap();
            let log = Mutex::new(new_log(dir.path(), Durability::FlushBeforeAck));
            let mut bytes = template.clone();
            let started = Instant::now();
            for _ in 0..iterations {
                append_durably(&log, &mut bytes, 0).unwrap();
            }
            started.elapsed()
        })
    });
    group.bench_function("log_flush_before_ack_4_appenders", |b| {
        b.iter_custom(|iterations| {
            let dir = tempfile::tempdir().unwrap();
            let log = Mutex::new(new_log(dir.path(), Durability::FlushBeforeAck));
            let per_thread = iterations.div_ceil(4);
            let started = Instant::now();
            std::thread::scope(|scope| {
                for _ in 0..4 {
                    let (log, mut bytes) = (&log, template.clone());
                    scope.spawn(move || {
                        for _ in 0..per_thread {
                            append_durably(log, &mut bytes, 0).unwrap();
                        }
                    });
                }
            });
            started.elapsed()
        })
    });
    group.finish();
}

const READ_LOG_BYTES: u64 = 256 * 1024 * 1024;
const FETCH_BYTES: u64 = 1024 * 1024;

fn read(c: &mut Criterion) {
    let template = batch();
    let dir = tempfile::tempdir().unwrap();
    let mut log = new_log(dir.path(), Durability::PageCache);
    let mut bytes = template.clone();
    while log.size_bytes() < READ_LOG_BYTES {
        log.append_as_leader(&mut bytes, 0).unwrap();
    }
    let end = log.log_end_offset();
    let raw: File = File::open(dir.path().join("00000000000000000000.log")).unwrap();
    let raw_len = raw.metadata().unwrap().len();

    let mut group = c.benchmark_group("read");
    group.throughput(Throughput::Bytes(FETCH_BYTES));
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(4))
        .warm_up_time(Duration::from_secs(1));
    let mut buffer = vec![0u8; FETCH_BYTES as usize];
    let mut position = 0u64;
    group.bench_function("raw_pread", |b| {
        b.iter(|| {
            if position + FETCH_BYTES > raw_len {
                position = 0;
            }
            raw.read_exact_at(&mut buffer, position).unwrap();
            position += FETCH_BYTES;
        })
    });
    let mut next_offset = 0i64;
    group.bench_function("log_read", |b| {
        b.iter(|| {
            if next_offset >= end {
                next_offset = 0;
            }
            let slice = log
                .read(next_offset, FETCH_BYTES, end, true)
                .unwrap()
                .slice
                .unwrap();
            let length = slice.length as usize;
            slice
                .file()
                .read_exact_at(&mut buffer[..length], slice.position)
                .unwrap();
            // Advance by whole batches, as a consumer would.
            next_offset += (length / template.len()).max(1) as i64 * RECORDS_PER_BATCH as i64;
        })
    });
    group.finish();
}

criterion_group!(benches, append, read);
criterion_main!(benches);
