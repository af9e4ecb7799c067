//! Flush-before-ack waits hold no thread: thousands of produces waiting for one
//! partition's disk cost the blocking pool at most one thread (the one running the
//! sync), not one each (before, each wait was a blocking task: a flood of them grew the
//! pool to its 512-thread limit and queued the rest without bound).

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;

use strand_broker::FlushMode;

mod common;
use common::open_broker;
use strand_log::TopicPartition;
use strand_records::{BatchBuilder, Record};

fn threads() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("Threads:"))
        .and_then(|n| n.trim().parse().ok())
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thousands_of_durability_waits_hold_no_threads() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |config| config.flush = FlushMode::EveryBatch);
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let partition = broker.partition(&TopicPartition::new("t", 0)).unwrap();
    // Warm up: the first sync creates the directory's entries.
    let (_, durable) = partition.append_unsynced(batch(), 1).unwrap();
    durable.expect("flush-before-ack").wait().await.unwrap();

    let before = threads();
    let peak = Arc::new(AtomicUsize::new(before));
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (peak, done) = (peak.clone(), done.clone());
        std::thread::spawn(move || {
            while !done.load(Ordering::SeqCst) {
                peak.fetch_max(threads(), Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_micros(200));
            }
        })
    };
    let mut waits = tokio::task::JoinSet::new();
    for _ in 0..3000 {
        let partition = partition.clone();
        waits.spawn(async move {
            let (_, durable) = partition.append_unsynced(batch(), 1).unwrap();
            durable.expect("flush-before-ack").wait().await.unwrap();
        });
    }
    while let Some(finished) = waits.join_next().await {
        finished.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    sampler.join().unwrap();
    let grown = peak.load(Ordering::SeqCst) - before;
    // The sampler thread is one; the sync's blocking thread another; a little slack.
    assert!(
        grown <= 4,
        "3000 waits grew the process by {grown} threads ({before} before)"
    );
    broker.shutdown().unwrap();
}

fn batch() -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 0);
    builder.push(Record::new(None, Some(vec![7u8; 100]), 0));
    builder.build()
}
