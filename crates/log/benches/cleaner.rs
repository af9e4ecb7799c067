//! Compaction throughput: one pass over a log of 64 MiB of closed segments holding 10
//! versions of each of 10,000 keys (1 KiB values, zstd batches of 16 records), reported
//! as MB/s of log read. Run: `cargo bench -p strand-log --bench cleaner`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use strand_log::{CleanerLimits, FileCache, Log, LogConfig, SystemClock};
use strand_records::{BatchBuilder, Compression, Record};

const KEYS: usize = 10_000;
const VERSIONS: usize = 10;
const VALUE_BYTES: usize = 1024;

fn filled_log(dir: &std::path::Path) -> Log {
    let config = LogConfig {
        segment_bytes: 8 * 1024 * 1024,
        cleanup_compact: true,
        cleanup_delete: false,
        min_cleanable_dirty_ratio: 0.0,
        ..LogConfig::default()
    };
    let mut log = Log::create(
        dir,
        Arc::new(config),
        FileCache::new(64),
        Arc::new(SystemClock),
        0,
    )
    .unwrap();
    let value: Vec<u8> = (0..VALUE_BYTES).map(|i| (i * 7 % 251) as u8).collect();
    for version in 0..VERSIONS {
        for chunk in (0..KEYS).collect::<Vec<_>>().chunks(16) {
            let mut builder =
                BatchBuilder::new(0, 1_700_000_000_000).compression(Compression::Zstd);
            for key in chunk {
                let mut v = value.clone();
                v[0] = version as u8;
                builder.push(Record::new(
                    Some(format!("key-{key}").into_bytes()),
                    Some(v),
                    1_700_000_000_000,
                ));
            }
            log.append_as_leader(&mut builder.build(), 0).unwrap();
        }
    }
    let end = log.log_end_offset();
    log.roll(end).unwrap();
    log
}

fn clean(c: &mut Criterion) {
    let mut group = c.benchmark_group("cleaner");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(20))
        .warm_up_time(Duration::from_secs(1));
    // Throughput is the uncompressed record bytes one pass goes through.
    group.throughput(Throughput::Bytes((KEYS * VERSIONS * VALUE_BYTES) as u64));
    group.bench_function("one_pass_10_versions_per_key", |b| {
        b.iter_custom(|iterations| {
            let mut total = Duration::ZERO;
            for _ in 0..iterations {
                let dir = tempfile::tempdir().unwrap();
                let mut log = filled_log(dir.path());
                let started = Instant::now();
                let outcome = log
                    .clean(i64::MAX / 2, CleanerLimits::default(), None)
                    .unwrap();
                total += started.elapsed();
                assert!(outcome.records_removed as usize >= KEYS * (VERSIONS - 2));
            }
            total
        })
    });
    group.finish();
}

criterion_group!(benches, clean);
criterion_main!(benches);
