//! A disk that stalls under one partition stalls that partition's fsyncs only: the
//! appends that trigger them (a roll's producer snapshot and epoch checkpoint, a
//! flush.messages flush) hand them to a blocking thread and return, so the runtime's
//! workers keep serving every other partition. Before, those fsyncs ran inline under the
//! partition's lock: two appends to the stalled partition held both workers (one in the
//! fsync, one waiting for the lock) and the whole broker stopped.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

mod common;
use common::open_broker;
use strand_log::fault_injection::set_sync_hook;
use strand_log::TopicPartition;
use strand_records::{BatchBuilder, Record};

/// Fsyncs under paths containing `needle` wait while the stall is on.
struct Stall {
    on: Mutex<bool>,
    released: Condvar,
    hits: AtomicUsize,
}

impl Stall {
    fn install(needle: &'static str) -> Arc<Stall> {
        let stall = Arc::new(Stall {
            on: Mutex::new(true),
            released: Condvar::new(),
            hits: AtomicUsize::new(0),
        });
        let hook = stall.clone();
        set_sync_hook(Some(Box::new(move |path| {
            if path.to_string_lossy().contains(needle) {
                hook.hits.fetch_add(1, Ordering::SeqCst);
                let mut on = hook.on.lock().unwrap();
                while *on {
                    on = hook.released.wait(on).unwrap();
                }
            }
            Ok(())
        })));
        stall
    }

    fn release(&self) {
        *self.on.lock().unwrap() = false;
        self.released.notify_all();
    }
}

fn batch() -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 0);
    builder.push(Record::new(None, Some(vec![1u8; 200]), 0));
    builder.build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_whose_disk_stalls_holds_up_no_other_partition() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    let mut slow_configs = BTreeMap::new();
    // A roll every few batches (each writes a producer snapshot), and a flush every 2.
    slow_configs.insert("internal.segment.bytes".to_string(), "1024".to_string());
    slow_configs.insert("flush.messages".to_string(), "2".to_string());
    for (name, configs) in [("slow", slow_configs), ("fast", BTreeMap::new())] {
        broker
            .create_topic(name, 1, 1, Vec::new(), configs, false)
            .await
            .unwrap();
    }
    let slow = broker.partition(&TopicPartition::new("slow", 0)).unwrap();
    let fast = broker.partition(&TopicPartition::new("fast", 0)).unwrap();
    // A first write makes each partition's directory.
    for partition in [&slow, &fast] {
        let (_, durable) = partition.append_unsynced(batch(), 1).unwrap();
        assert!(durable.is_none());
    }

    let stall = Stall::install("slow-0");
    let stop = Arc::new(AtomicBool::new(false));
    let slow_appends = Arc::new(AtomicUsize::new(0));
    let mut writers = Vec::new();
    for _ in 0..4 {
        let (slow, stop, count) = (slow.clone(), stop.clone(), slow_appends.clone());
        writers.push(tokio::spawn(async move {
            while !stop.load(Ordering::SeqCst) {
                slow.append_unsynced(batch(), 1).unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                tokio::task::yield_now().await;
            }
        }));
    }
    // Wait until the stalled partition's flush is stuck in its fsync.
    let deadline = Instant::now() + Duration::from_secs(30);
    while stall.hits.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    // On the runtime's workers, 200 appends to the healthy partition.
    let (done, finished) = mpsc::channel();
    let healthy = {
        let fast = fast.clone();
        tokio::spawn(async move {
            let mut slowest = Duration::ZERO;
            for _ in 0..200 {
                let started = Instant::now();
                let handle = {
                    let fast = fast.clone();
                    tokio::spawn(async move { fast.append_unsynced(batch(), 1).unwrap() })
                };
                handle.await.unwrap();
                slowest = slowest.max(started.elapsed());
            }
            let _ = done.send(slowest);
        })
    };
    // Waited for on this (non-worker) thread, so a frozen runtime cannot hide it.
    let outcome = finished.recv_timeout(Duration::from_secs(30));
    // The stalled partition itself goes on taking page-cache appends meanwhile.
    let deadline = Instant::now() + Duration::from_secs(30);
    while slow_appends.load(Ordering::SeqCst) < 100 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stalled_syncs = stall.hits.load(Ordering::SeqCst);
    let stalled_partition_appends = slow_appends.load(Ordering::SeqCst);
    stall.release();
    stop.store(true, Ordering::SeqCst);
    let slowest = outcome.unwrap_or_else(|_| {
        panic!("the healthy partition's appends did not finish in 30 s while the other partition's disk stalled")
    });
    healthy.await.unwrap();
    for writer in writers {
        writer.await.unwrap();
    }
    set_sync_hook(None);
    assert!(
        stalled_syncs >= 1,
        "the stalled partition's fsyncs were reached"
    );
    assert!(
        stalled_partition_appends >= 100,
        "the stalled partition kept taking page-cache appends ({stalled_partition_appends})"
    );
    eprintln!(
        "healthy partition: 200 appends, slowest {slowest:?}, during a stall of {stalled_syncs} fsyncs"
    );
    broker.shutdown().unwrap();
}
