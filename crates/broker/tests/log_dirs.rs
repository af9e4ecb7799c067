//! Several log directories (log.dirs): partitions spread over them, DescribeLogDirs
//! reporting each, and a directory whose disk fails an fsync taken offline while the
//! broker goes on serving the other (a fault-injection hook fails the fsyncs under it);
//! a replica moved to the other directory by AlterReplicaLogDirs while it is written.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use common::*;
use kafka_protocol::messages::describe_log_dirs_response::DescribeLogDirsResult;
use kafka_protocol::messages::{
    ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse, FetchResponse, ProduceResponse,
};
use strand_broker::{serve, Broker};
use strand_log::fault_injection::set_sync_hook;
use strand_log::TopicPartition;
use tokio::net::TcpStream;

const NONE: i16 = 0;
const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const INVALID_TOPIC_EXCEPTION: i16 = 17;
const KAFKA_STORAGE_ERROR: i16 = 56;
const LOG_DIR_NOT_FOUND: i16 = 57;

async fn describe_log_dirs(stream: &mut TcpStream) -> Vec<DescribeLogDirsResult> {
    let response: DescribeLogDirsResponse = call(
        stream,
        ApiKey::DescribeLogDirs,
        4,
        &DescribeLogDirsRequest::default().with_topics(None),
    )
    .await;
    response.results
}

/// The partitions of `topic` each directory lists: (log dir, error, partitions).
fn layout(results: &[DescribeLogDirsResult], topic: &str) -> Vec<(PathBuf, i16, Vec<i32>)> {
    results
        .iter()
        .map(|result| {
            let mut partitions: Vec<i32> = result
                .topics
                .iter()
                .filter(|t| t.name.as_str() == topic)
                .flat_map(|t| t.partitions.iter().map(|p| p.partition_index))
                .collect();
            partitions.sort();
            (
                PathBuf::from(result.log_dir.as_str()),
                result.error_code,
                partitions,
            )
        })
        .collect()
}

async fn produce(stream: &mut TcpStream, topic: &str, partition: i32) -> i16 {
    let response: ProduceResponse = call(
        stream,
        ApiKey::Produce,
        9,
        &produce_request(topic, partition, 1, b"payload"),
    )
    .await;
    response.responses[0].partition_responses[0].error_code
}

async fn records_in(stream: &mut TcpStream, topic: &str, partition: i32) -> usize {
    let mut request = fetch_request(topic, 0, 0);
    request.topics[0].partitions[0].partition = partition;
    let response: FetchResponse = call(stream, ApiKey::Fetch, 11, &request).await;
    let data = &response.responses[0].partitions[0];
    assert_eq!(data.error_code, NONE, "reads go on");
    let records = data.records.clone().unwrap_or_default();
    let mut rest: &[u8] = &records;
    let mut count = 0;
    while !rest.is_empty() {
        let batch = strand_records::BatchView::parse(rest).unwrap();
        count += batch.header.records_count as usize;
        rest = &rest[batch.bytes.len()..];
    }
    count
}

fn canonical(path: &Path) -> PathBuf {
    std::fs::canonicalize(path).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_directory_goes_offline_and_the_other_serves() {
    let root = tempfile::tempdir().unwrap();
    let (first, second) = (root.path().join("first"), root.path().join("second"));
    let open = || {
        let second = second.clone();
        open_broker(&first, move |config| config.extra_log_dirs = vec![second])
    };
    let broker = open();
    // flush.messages=1: every produce waits for its fsync, which the hook fails.
    let configs = BTreeMap::from([("flush.messages".to_string(), "1".to_string())]);
    broker
        .create_topic("spread", 4, 1, Vec::new(), configs, false)
        .await
        .unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let server = tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    for partition in 0..4 {
        assert_eq!(produce(&mut stream, "spread", partition).await, NONE);
    }

    let results = describe_log_dirs(&mut stream).await;
    let dirs = layout(&results, "spread");
    assert_eq!(dirs.len(), 2, "{results:?}");
    assert_eq!(dirs[0].0, canonical(&first));
    assert_eq!(dirs[1].0, canonical(&second));
    assert_eq!((dirs[0].1, dirs[0].2.len()), (NONE, 2));
    assert_eq!((dirs[1].1, dirs[1].2.len()), (NONE, 2));
    assert!(results
        .iter()
        .all(|r| r.total_bytes > 0 && r.usable_bytes > 0));
    let (in_first, in_second) = (dirs[0].2.clone(), dirs[1].2.clone());

    // The second directory's disk fails its fsyncs.
    let failing = canonical(&second);
    set_sync_hook(Some(Box::new(move |path| {
        let path = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        if path.starts_with(&failing) {
            return Err(std::io::Error::from_raw_os_error(libc::EIO));
        }
        Ok(())
    })));
    assert_eq!(
        produce(&mut stream, "spread", in_second[0]).await,
        KAFKA_STORAGE_ERROR
    );
    set_sync_hook(None);
    // The whole directory is offline now: its other partition refuses writes too,
    // though its own fsyncs would succeed.
    assert_eq!(
        produce(&mut stream, "spread", in_second[1]).await,
        KAFKA_STORAGE_ERROR
    );
    for &partition in &in_first {
        assert_eq!(produce(&mut stream, "spread", partition).await, NONE);
        assert_eq!(records_in(&mut stream, "spread", partition).await, 2);
    }
    assert!(records_in(&mut stream, "spread", in_second[1]).await >= 1);

    let results = describe_log_dirs(&mut stream).await;
    let dirs = layout(&results, "spread");
    assert_eq!((dirs[0].1, &dirs[0].2), (NONE, &in_first));
    assert_eq!((dirs[1].1, &dirs[1].2), (KAFKA_STORAGE_ERROR, &Vec::new()));
    assert_eq!((results[1].total_bytes, results[1].usable_bytes), (-1, -1));

    let metadata = metadata(&mut stream, "spread", 7).await;
    let mut offline: Vec<(i32, Vec<i32>)> = metadata.topics[0]
        .partitions
        .iter()
        .map(|p| {
            (
                p.partition_index,
                p.offline_replicas.iter().map(|id| id.0).collect(),
            )
        })
        .collect();
    offline.sort();
    for (partition, replicas) in offline {
        let expected = if in_second.contains(&partition) {
            vec![1]
        } else {
            vec![]
        };
        assert_eq!(replicas, expected, "partition {partition}");
    }

    // A new topic's partitions all go to the online directory.
    broker
        .create_topic("later", 3, 1, Vec::new(), BTreeMap::new(), false)
        .await
        .unwrap();
    for partition in 0..3 {
        assert_eq!(produce(&mut stream, "later", partition).await, NONE);
    }
    let dirs = layout(&describe_log_dirs(&mut stream).await, "later");
    assert_eq!(dirs[0].2, vec![0, 1, 2]);

    // A restart checks the directory again: it serves, with what was acknowledged.
    drop(stream);
    handle.shutdown();
    server.await.unwrap().unwrap();
    drop(broker);
    let broker: std::sync::Arc<Broker> = open();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let server = tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    let dirs = layout(&describe_log_dirs(&mut stream).await, "spread");
    assert_eq!((dirs[1].1, &dirs[1].2), (NONE, &in_second));
    for &partition in &in_second {
        assert!(records_in(&mut stream, "spread", partition).await >= 1);
        assert_eq!(produce(&mut stream, "spread", partition).await, NONE);
    }
    let tp = TopicPartition::new("spread", in_second[0]);
    assert!(!broker.partition(&tp).unwrap().log().is_offline());
    drop(stream);
    handle.shutdown();
    server.await.unwrap().unwrap();
}

async fn alter_replica_log_dirs(
    stream: &mut TcpStream,
    moves: &[(&Path, &str, i32)],
) -> Vec<(String, i32, i16)> {
    use kafka_protocol::messages::alter_replica_log_dirs_request::{
        AlterReplicaLogDir, AlterReplicaLogDirTopic,
    };
    use kafka_protocol::messages::TopicName;
    use kafka_protocol::messages::{AlterReplicaLogDirsRequest, AlterReplicaLogDirsResponse};
    use kafka_protocol::protocol::StrBytes;
    let dirs = moves
        .iter()
        .map(|(path, topic, partition)| {
            AlterReplicaLogDir::default()
                .with_path(StrBytes::from_string(path.display().to_string()))
                .with_topics(vec![AlterReplicaLogDirTopic::default()
                    .with_name(TopicName(StrBytes::from_string(topic.to_string())))
                    .with_partitions(vec![*partition])])
        })
        .collect();
    let response: AlterReplicaLogDirsResponse = call(
        stream,
        ApiKey::AlterReplicaLogDirs,
        2,
        &AlterReplicaLogDirsRequest::default().with_dirs(dirs),
    )
    .await;
    let mut codes: Vec<(String, i32, i16)> = response
        .results
        .iter()
        .flat_map(|t| {
            t.partitions
                .iter()
                .map(|p| (t.topic_name.to_string(), p.partition_index, p.error_code))
        })
        .collect();
    codes.sort();
    codes
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_moves_between_directories_while_it_serves() {
    let root = tempfile::tempdir().unwrap();
    let (first, second) = (root.path().join("first"), root.path().join("second"));
    let broker = {
        let second = second.clone();
        open_broker(&first, move |config| config.extra_log_dirs = vec![second])
    };
    broker
        .create_topic("mv", 2, 1, Vec::new(), BTreeMap::new(), false)
        .await
        .unwrap();
    // Copying at 256 KiB/s, the ~600 KB log takes a couple of seconds to move: long enough
    // to see it as a future replica in its destination.
    let rate = BTreeMap::from([(
        "replica.alter.log.dirs.io.max.bytes.per.second".to_string(),
        (256 * 1024).to_string(),
    )]);
    broker.set_dynamic_configs(None, rate, false).await.unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let server = tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    let value = vec![7u8; 10_000];
    for _ in 0..60 {
        for partition in 0..2 {
            let response: ProduceResponse = call(
                &mut stream,
                ApiKey::Produce,
                9,
                &produce_request("mv", partition, 1, &value),
            )
            .await;
            assert_eq!(
                response.responses[0].partition_responses[0].error_code,
                NONE
            );
        }
    }
    let dirs = layout(&describe_log_dirs(&mut stream).await, "mv");
    let (from, to, moving) = if dirs[0].2.contains(&0) {
        (&first, &second, 0)
    } else {
        (&second, &first, 0)
    };

    // Kafka's per-partition refusals, in Kafka's order of checks.
    let long = "x".repeat(230);
    let nowhere = root.path().join("nowhere");
    assert_eq!(
        alter_replica_log_dirs(
            &mut stream,
            &[
                (to, &long, 0),
                (&nowhere, "mv", 1),
                (to, "nosuch", 0),
                (to, "mv", 9)
            ],
        )
        .await,
        vec![
            ("mv".to_string(), 1, LOG_DIR_NOT_FOUND),
            ("mv".to_string(), 9, UNKNOWN_TOPIC_OR_PARTITION),
            ("nosuch".to_string(), 0, UNKNOWN_TOPIC_OR_PARTITION),
            (long.clone(), 0, INVALID_TOPIC_EXCEPTION),
        ]
    );
    assert_eq!(
        alter_replica_log_dirs(&mut stream, &[(from, "mv", moving)]).await,
        vec![("mv".to_string(), moving, NONE)],
        "already there: nothing to do"
    );

    assert_eq!(
        alter_replica_log_dirs(&mut stream, &[(to, "mv", moving)]).await,
        vec![("mv".to_string(), moving, NONE)]
    );
    // While it copies: the future replica in the destination, and writes go on.
    let results = describe_log_dirs(&mut stream).await;
    let target = results
        .iter()
        .find(|r| Path::new(r.log_dir.as_str()) == canonical(to))
        .unwrap();
    let future: Vec<_> = target
        .topics
        .iter()
        .flat_map(|t| t.partitions.iter())
        .filter(|p| p.is_future_key)
        .collect();
    assert_eq!(future.len(), 1, "{results:?}");
    assert_eq!(future[0].partition_index, moving);
    assert!(future[0].offset_lag > 0);
    let response: ProduceResponse = call(
        &mut stream,
        ApiKey::Produce,
        9,
        &produce_request("mv", moving, 1, &value),
    )
    .await;
    assert_eq!(
        response.responses[0].partition_responses[0].error_code,
        NONE
    );

    // Done within the hang guard: in the destination, no future replica left.
    let deadline = std::time::Instant::now() + HANG_GUARD;
    loop {
        let results = describe_log_dirs(&mut stream).await;
        let dirs = layout(&results, "mv");
        let futures = results
            .iter()
            .flat_map(|r| r.topics.iter().flat_map(|t| t.partitions.iter()))
            .filter(|p| p.is_future_key)
            .count();
        let there = dirs
            .iter()
            .any(|d| d.0 == canonical(to) && d.2.contains(&moving));
        if there && futures == 0 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{results:?}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    assert_eq!(records_in(&mut stream, "mv", moving).await, 61);
    assert!(!from.join(format!("mv-{moving}")).exists());

    // And it stays there across a restart.
    drop(stream);
    handle.shutdown();
    server.await.unwrap().unwrap();
    drop(broker);
    let broker = {
        let second = second.clone();
        open_broker(&first, move |config| config.extra_log_dirs = vec![second])
    };
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    let server = tokio::spawn(server);
    let mut stream = TcpStream::connect(address).await.unwrap();
    let dirs = layout(&describe_log_dirs(&mut stream).await, "mv");
    assert!(dirs
        .iter()
        .any(|d| d.0 == canonical(to) && d.2.contains(&moving)));
    assert_eq!(records_in(&mut stream, "mv", moving).await, 61);
    drop(stream);
    handle.shutdown();
    server.await.unwrap().unwrap();
}
