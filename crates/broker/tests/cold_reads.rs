//! A disk that stalls under one partition's reads stalls that partition's fetches only.
//! Fetch reads on the runtime's workers without waiting for the disk; data the page cache
//! lacks is read into it on a blocking thread, holding no lock, and the fetch answers when
//! it is there. Before, four consumer fetches of a partition whose reads stalled held both
//! workers (one inside the read, under the partition's lock) and the whole broker stopped:
//! no produce, no fetch, no ApiVersions anywhere.

use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, ProduceResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use strand_log::fault_injection::set_read_hook;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::*;

/// The read hook is process-wide: these tests take turns.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Reads of files under a path containing `needle` count as uncached, and reads that may
/// wait for the disk block while the stall is on.
struct ReadStall {
    on: Mutex<bool>,
    released: Condvar,
    stalled_reads: AtomicUsize,
    missed_reads: AtomicUsize,
}

impl ReadStall {
    fn install(needle: &'static str) -> Arc<ReadStall> {
        let stall = Arc::new(ReadStall {
            on: Mutex::new(true),
            released: Condvar::new(),
            stalled_reads: AtomicUsize::new(0),
            missed_reads: AtomicUsize::new(0),
        });
        let hook = stall.clone();
        set_read_hook(Some(Box::new(move |file, no_wait| {
            let path = std::fs::read_link(format!("/proc/self/fd/{}", file.as_raw_fd()))
                .unwrap_or_default();
            if !path.to_string_lossy().contains(needle) {
                return true;
            }
            let mut on = hook.on.lock().unwrap();
            if !*on {
                return true;
            }
            if no_wait {
                hook.missed_reads.fetch_add(1, Ordering::SeqCst);
                return false;
            }
            hook.stalled_reads.fetch_add(1, Ordering::SeqCst);
            while *on {
                on = hook.released.wait(on).unwrap();
            }
            true
        })));
        stall
    }

    fn release(&self) {
        *self.on.lock().unwrap() = false;
        self.released.notify_all();
    }
}

async fn produce(client: &mut TcpStream, topic: &str, correlation_id: i32) {
    let request = encode_request(
        ApiKey::Produce,
        9,
        correlation_id,
        &produce_request(topic, 0, 1, &[7u8; 1000]),
    );
    client.write_all(&request).await.unwrap();
    let (_, mut body) = read_response(client, 1).await.expect("produce answered");
    let response = ProduceResponse::decode(&mut body, 9).unwrap();
    let code = response.responses[0].partition_responses[0].error_code;
    assert_eq!(code, 0, "produce to {topic}");
}

/// Bytes of records a fetch of `topic` returns.
async fn fetch(
    client: &mut TcpStream,
    topic: &str,
    max_wait_ms: i32,
    correlation_id: i32,
) -> usize {
    let request = encode_request(
        ApiKey::Fetch,
        11,
        correlation_id,
        &fetch_request(topic, 0, max_wait_ms),
    );
    client.write_all(&request).await.unwrap();
    let (_, mut body) = read_response(client, 0).await.expect("fetch answered");
    let response = FetchResponse::decode(&mut body, 11).unwrap();
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0, "fetch of {topic}");
    partition.records.as_ref().map_or(0, |r| r.len())
}

/// ListOffsets by timestamp 0: (error code, offset).
async fn offset_for_time(client: &mut TcpStream, topic: &str, correlation_id: i32) -> (i16, i64) {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_string(topic.to_string())))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(0)])]);
    let request = encode_request(ApiKey::ListOffsets, 7, correlation_id, &request);
    client.write_all(&request).await.unwrap();
    let (_, mut body) = read_response(client, 1)
        .await
        .expect("list offsets answered");
    let response = ListOffsetsResponse::decode(&mut body, 7).unwrap();
    let partition = &response.topics[0].partitions[0];
    (partition.error_code, partition.offset)
}

/// A fresh client produces to and fetches from `hot`, and produces to `cold`; waited for
/// on this (non-worker) thread, so a frozen runtime cannot hide it.
fn served_meanwhile(broker: &TestBroker) -> Result<(usize, Duration), mpsc::RecvTimeoutError> {
    let (done, finished) = mpsc::channel();
    let address = broker.address;
    tokio::spawn(async move {
        let started = Instant::now();
        let mut fresh = TcpStream::connect(address).await.unwrap();
        for (i, topic) in ["hot", "cold"].into_iter().enumerate() {
            metadata(&mut fresh, topic, i as i32).await;
        }
        produce(&mut fresh, "hot", 10).await;
        let bytes = fetch(&mut fresh, "hot", 0, 11).await;
        produce(&mut fresh, "cold", 12).await;
        let _ = done.send((bytes, started.elapsed()));
    });
    finished.recv_timeout(Duration::from_secs(15))
}

async fn client(broker: &TestBroker, topics: &[&str]) -> TcpStream {
    let mut client = TcpStream::connect(broker.address).await.unwrap();
    for (i, topic) in topics.iter().enumerate() {
        metadata(&mut client, topic, i as i32).await;
    }
    client
}

/// A broker with 20 records in `cold` and one in `hot`, and four clients that know `cold`.
async fn broker_with_data() -> (TestBroker, Vec<TcpStream>) {
    let broker = start().await;
    let mut setup = client(&broker, &["cold", "hot"]).await;
    for i in 0..20 {
        produce(&mut setup, "cold", 100 + i).await;
    }
    produce(&mut setup, "hot", 200).await;
    let mut clients = Vec::new();
    for _ in 0..4 {
        clients.push(client(&broker, &["cold"]).await);
    }
    (broker, clients)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partition_whose_reads_stall_holds_up_no_other_partition() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (broker, consumers) = broker_with_data().await;
    let stall = ReadStall::install("cold-0");
    // Four consumers fetch the stalled partition (more than there are workers).
    let mut cold_fetchers = Vec::new();
    for (i, mut consumer) in consumers.into_iter().enumerate() {
        let i = i as i32;
        cold_fetchers.push(tokio::spawn(async move {
            fetch(&mut consumer, "cold", 2_000, 300 + i).await;
            consumer
        }));
    }
    let deadline = Instant::now() + HANG_GUARD;
    while stall.missed_reads.load(Ordering::SeqCst) + stall.stalled_reads.load(Ordering::SeqCst)
        == 0
        && Instant::now() < deadline
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Meanwhile a fresh client produces to and fetches from the healthy partition, and
    // produces to the stalled one (its lock is free: appends do not read).
    let outcome = served_meanwhile(&broker);
    let stalled = stall.stalled_reads.load(Ordering::SeqCst);
    let missed = stall.missed_reads.load(Ordering::SeqCst);
    stall.release();
    let (hot_bytes, took) = outcome.unwrap_or_else(|_| {
        panic!("the healthy partition was not served within 15 s while another partition's reads stalled")
    });
    assert!(
        hot_bytes > 0,
        "the healthy partition's records were fetched"
    );
    assert!(
        missed > 0,
        "the stalled partition's reads were attempted ({missed} missed, {stalled} stalled)"
    );
    eprintln!("healthy partition served in {took:?} during a read stall ({missed} missed, {stalled} stalled reads)");

    // Once the disk answers, the stalled partition's consumers get its records.
    for fetcher in cold_fetchers {
        let mut consumer = tokio::time::timeout(HANG_GUARD, fetcher)
            .await
            .expect("the cold fetch was answered")
            .unwrap();
        let deadline = Instant::now() + HANG_GUARD;
        while fetch(&mut consumer, "cold", 500, 400).await == 0 {
            assert!(
                Instant::now() < deadline,
                "the stalled partition's records never came"
            );
        }
    }
    set_read_hook(None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lookup_by_time_on_a_partition_whose_reads_stall_holds_up_nothing_else() {
    let _turn = ONE_AT_A_TIME.lock().await;
    let (broker, clients) = broker_with_data().await;
    let stall = ReadStall::install("cold-0");
    let mut lookups = Vec::new();
    for (i, mut lookup) in clients.into_iter().enumerate() {
        lookups.push(tokio::spawn(async move {
            offset_for_time(&mut lookup, "cold", 300 + i as i32).await
        }));
    }
    let deadline = Instant::now() + HANG_GUARD;
    while stall.stalled_reads.load(Ordering::SeqCst) == 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let outcome = served_meanwhile(&broker);
    let stalled = stall.stalled_reads.load(Ordering::SeqCst);
    stall.release();
    let (hot_bytes, took) = outcome.unwrap_or_else(|_| {
        panic!("the healthy partition was not served within 15 s while lookups waited on a stalled disk")
    });
    assert!(hot_bytes > 0);
    assert!(stalled > 0, "a lookup's read reached the stalled disk");
    eprintln!(
        "healthy partition served in {took:?} while lookups waited ({stalled} stalled reads)"
    );
    for lookup in lookups {
        let (code, offset) = tokio::time::timeout(HANG_GUARD, lookup)
            .await
            .expect("the lookup was answered")
            .unwrap();
        // Answered once the disk came back, or timed out on it (retriable) if it took long.
        assert!(code == 0 && offset == 0 || code == 7, "{code} {offset}");
    }
    let mut after = client(&broker, &["cold"]).await;
    assert_eq!(offset_for_time(&mut after, "cold", 500).await, (0, 0));
    set_read_hook(None);
}
