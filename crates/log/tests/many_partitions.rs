//! Opening many partitions' logs: what it costs in memory and open files.
//! Alone in its own test binary so the RSS it reads is its own.

use std::sync::Arc;
use std::time::Instant;

use strand_log::{LogConfig, LogManager, LogManagerOptions, TopicPartition};
use strand_records::{BatchBuilder, Record};

const PARTITIONS: usize = 10_000;
const FILE_CACHE_SEGMENTS: usize = 256;

fn rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn open_fds() -> usize {
    std::fs::read_dir("/proc/self/fd").unwrap().count()
}

#[test]
fn ten_thousand_partitions_cost_little_memory_and_bounded_files() {
    let dir = tempfile::tempdir().unwrap();
    let options = || LogManagerOptions {
        default_config: Arc::new(LogConfig::default()),
        file_cache_segments: FILE_CACHE_SEGMENTS,
        ..LogManagerOptions::default()
    };
    let mut builder = BatchBuilder::new(0, 1_000);
    builder.push(Record::new(
        Some(b"k".to_vec()),
        Some(vec![0u8; 100]),
        1_000,
    ));
    let record = builder.build();

    let started = Instant::now();
    let (mut manager, _) = LogManager::open(&[dir.path()], options()).unwrap();
    for partition in 0..PARTITIONS {
        let tp = TopicPartition::new(
            format!("topic{}", partition % 100),
            (partition / 100) as i32,
        );
        let log = manager.get_or_create(&tp, None).unwrap();
        log.lock()
            .unwrap()
            .append_as_leader(&mut record.clone(), 0)
            .unwrap();
    }
    let created_in = started.elapsed();
    manager.shutdown().unwrap();
    drop(manager);

    let fds_before = open_fds();
    let rss_before = rss_kib();
    let started = Instant::now();
    let (manager, reports) = LogManager::open(&[dir.path()], options()).unwrap();
    let opened_in = started.elapsed();
    let rss_after = rss_kib();
    let fds_after = open_fds();
    assert!(reports.is_empty());
    assert_eq!(manager.len(), PARTITIONS);

    let per_partition_bytes = (rss_after.saturating_sub(rss_before)) * 1024 / PARTITIONS as u64;
    println!(
        "{PARTITIONS} partitions: created+appended in {created_in:?}, reopened in {opened_in:?}; \
         RSS +{} KiB ({per_partition_bytes} B/partition); open files +{} (cache holds {} segments)",
        rss_after.saturating_sub(rss_before),
        fds_after.saturating_sub(fds_before),
        manager.file_cache().open_segments(),
    );
    // Three descriptors per cached segment, plus the manager's lock file.
    assert!(
        fds_after - fds_before <= FILE_CACHE_SEGMENTS * 3 + 1,
        "open files not bounded by the cache"
    );
    assert!(
        per_partition_bytes < 8 * 1024,
        "an idle partition costs {per_partition_bytes} bytes"
    );

    // Reads still work for partitions whose files were evicted.
    for partition in [0usize, 5_000, 9_999] {
        let tp = TopicPartition::new(
            format!("topic{}", partition % 100),
            (partition / 100) as i32,
        );
        let log = manager.get(&tp).unwrap();
        let log = log.lock().unwrap();
        assert_eq!(log.log_end_offset(), 1);
        assert!(log.read(0, 1 << 20, 1, true).unwrap().slice.is_some());
    }
}
