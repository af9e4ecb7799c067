//! Fetch and ListOffsets under read_committed, on the wire: transactional batches and
//! markers written as the transaction coordinator will write them (through the partition,
//! producers cannot send them yet), then raw Fetch v11 / ListOffsets v7 requests. The
//! last stable offset holds at an open transaction; aborted transactions come sorted by
//! first offset; read_uncommitted reads on to the high watermark.

use std::collections::BTreeMap;

use bytes::Bytes;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::{
    ApiKey, FetchResponse, ListOffsetsRequest, ListOffsetsResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, StrBytes};
use strand_broker::serve;
use strand_log::TopicPartition;
use strand_records::{BatchBuilder, BatchView, EndTxnMarker, Record, TxnResult};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::{encode_request, fetch_request, open_broker, read_response};

fn txn_batch(producer_id: i64, sequence: i32, count: usize) -> Vec<u8> {
    let mut builder = BatchBuilder::new(0, 1_000)
        .producer(producer_id, 0, sequence)
        .transactional();
    for n in 0..count {
        builder.push(Record::new(None, Some(vec![n as u8; 10]), 1_000));
    }
    builder.build()
}

fn abort() -> EndTxnMarker {
    EndTxnMarker {
        result: TxnResult::Abort,
        coordinator_epoch: 0,
    }
}

/// (last stable offset, high watermark, aborted (producer, first offset), base offsets of
/// the batches returned).
async fn fetch(
    client: &mut TcpStream,
    isolation: i8,
    correlation_id: i32,
) -> (i64, i64, Option<Vec<(i64, i64)>>, Vec<i64>) {
    let request = fetch_request("t", 0, 0).with_isolation_level(isolation);
    let frame = encode_request(ApiKey::Fetch, 11, correlation_id, &request);
    client.write_all(&frame).await.unwrap();
    let (_, mut body) = read_response(client, 0).await.unwrap();
    let response = FetchResponse::decode(&mut body, 11).unwrap();
    let partition = &response.responses[0].partitions[0];
    assert_eq!(partition.error_code, 0);
    let aborted = partition.aborted_transactions.as_ref().map(|list| {
        list.iter()
            .map(|a| (a.producer_id.0, a.first_offset))
            .collect()
    });
    let mut bases = Vec::new();
    let mut records: Bytes = partition.records.clone().unwrap_or_default();
    while records.len() >= 61 {
        let Ok(view) = BatchView::parse(&records) else {
            break;
        };
        bases.push(view.header.base_offset);
        let length = view.bytes.len();
        records = records.slice(length..);
    }
    (
        partition.last_stable_offset,
        partition.high_watermark,
        aborted,
        bases,
    )
}

async fn latest(client: &mut TcpStream, isolation: i8, correlation_id: i32) -> i64 {
    let request = ListOffsetsRequest::default()
        .with_replica_id(kafka_protocol::messages::BrokerId(-1))
        .with_isolation_level(isolation)
        .with_topics(vec![ListOffsetsTopic::default()
            .with_name(TopicName(StrBytes::from_static_str("t")))
            .with_partitions(vec![ListOffsetsPartition::default()
                .with_partition_index(0)
                .with_timestamp(-1)])]);
    let frame = encode_request(ApiKey::ListOffsets, 7, correlation_id, &request);
    client.write_all(&frame).await.unwrap();
    let (_, mut body) = read_response(client, 1).await.unwrap();
    ListOffsetsResponse::decode(&mut body, 7).unwrap().topics[0].partitions[0].offset
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_committed_stops_at_an_open_transaction_and_lists_aborted_ones() {
    let dir = tempfile::tempdir().unwrap();
    let broker = open_broker(dir.path(), |_| {});
    broker
        .create_topic("t", 1, 1, Vec::new(), BTreeMap::new(), false)
        .await
        .unwrap();
    let partition = broker.partition(&TopicPartition::new("t", 0)).unwrap();
    // Producer 2: 0..=1, aborted at 4. Producer 1: 2..=3, aborted at 5. Producer 3: 6,
    // still open; producer 4: 7, also open.
    partition.append_unsynced(txn_batch(2, 0, 2), 1).unwrap();
    partition.append_unsynced(txn_batch(1, 0, 2), 1).unwrap();
    partition.append_marker(2, 0, abort()).unwrap();
    partition.append_marker(1, 0, abort()).unwrap();
    partition.append_unsynced(txn_batch(3, 0, 1), 1).unwrap();
    partition.append_unsynced(txn_batch(4, 0, 1), 1).unwrap();
    let (address, handle, server) = serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let mut client = TcpStream::connect(address).await.unwrap();

    let (lso, hw, aborted, bases) = fetch(&mut client, 1, 1).await;
    assert_eq!((lso, hw), (6, 8));
    // Aborted in marker order 2 then 1, listed by first offset.
    assert_eq!(aborted, Some(vec![(2, 0), (1, 2)]));
    assert_eq!(bases, vec![0, 2, 4, 5], "nothing from the open transaction");
    assert_eq!(latest(&mut client, 1, 2).await, 6);

    let (lso, _, aborted, bases) = fetch(&mut client, 0, 3).await;
    assert_eq!(
        lso, 6,
        "read_uncommitted answers the last stable offset too"
    );
    assert_eq!(aborted, None);
    assert_eq!(bases, vec![0, 2, 4, 5, 6, 7]);
    assert_eq!(latest(&mut client, 0, 4).await, 8);

    // Producer 3 commits: the stable end moves to producer 4's open transaction.
    let commit = EndTxnMarker {
        result: TxnResult::Commit,
        coordinator_epoch: 0,
    };
    partition.append_marker(3, 0, commit).unwrap();
    let (lso, _, _, bases) = fetch(&mut client, 1, 5).await;
    assert_eq!(lso, 7);
    assert_eq!(bases, vec![0, 2, 4, 5, 6]);
    drop(handle);
}
