//! Transactions end to end on one broker, on the wire as a transactional producer speaks
//! (transaction version 0: FindCoordinator, InitProducerId, AddPartitionsToTxn v3,
//! AddOffsetsToTxn, Produce, TxnOffsetCommit, EndTxn), and a coordinator restarted with a
//! commit decided but its markers not written.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTopic;
use kafka_protocol::messages::list_offsets_request::{ListOffsetsPartition, ListOffsetsTopic};
use kafka_protocol::messages::offset_fetch_request::OffsetFetchRequestTopic;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::txn_offset_commit_request::{
    TxnOffsetCommitRequestPartition, TxnOffsetCommitRequestTopic,
};
use kafka_protocol::messages::*;
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use strand_broker::{serve, Broker, BrokerConfig};
use strand_coordinator::codec::partition_for;
use strand_coordinator::txn::records::{self as txn_records, StoredTxn};
use strand_coordinator::txn::state::TxnState;
use strand_log::TopicPartition;
use strand_records::{BatchBuilder, Record};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

mod common;
use common::{encode_request, read_response, HANG_GUARD};

fn s(text: &str) -> StrBytes {
    StrBytes::from_string(text.to_string())
}

struct Client {
    stream: TcpStream,
    correlation_id: i32,
}

impl Client {
    async fn connect(address: std::net::SocketAddr) -> Client {
        Client {
            stream: TcpStream::connect(address).await.unwrap(),
            correlation_id: 0,
        }
    }

    async fn call<Req: Encodable, Resp: Decodable>(
        &mut self,
        key: ApiKey,
        version: i16,
        request: &Req,
    ) -> Resp {
        self.correlation_id += 1;
        let frame = encode_request(key, version, self.correlation_id, request);
        self.stream.write_all(&frame).await.unwrap();
        let answer = tokio::time::timeout(
            HANG_GUARD,
            read_response(&mut self.stream, key.response_header_version(version)),
        )
        .await
        .expect("answered")
        .expect("a response frame");
        let (_, mut body) = answer;
        Resp::decode(&mut body, version).unwrap()
    }

    async fn init(&mut self, transactional_id: &str) -> (i64, i16) {
        let response: InitProducerIdResponse = self
            .call(
                ApiKey::InitProducerId,
                4,
                &InitProducerIdRequest::default()
                    .with_transactional_id(Some(TransactionalId(s(transactional_id))))
                    .with_transaction_timeout_ms(60_000)
                    .with_producer_id(ProducerId(-1))
                    .with_producer_epoch(-1),
            )
            .await;
        assert_eq!(response.error_code, 0);
        (response.producer_id.0, response.producer_epoch)
    }

    async fn add_partition(&mut self, id: &str, producer: (i64, i16), topic: &str) -> i16 {
        let response: AddPartitionsToTxnResponse = self
            .call(
                ApiKey::AddPartitionsToTxn,
                3,
                &AddPartitionsToTxnRequest::default()
                    .with_v3_and_below_transactional_id(TransactionalId(s(id)))
                    .with_v3_and_below_producer_id(ProducerId(producer.0))
                    .with_v3_and_below_producer_epoch(producer.1)
                    .with_v3_and_below_topics(vec![AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s(topic)))
                        .with_partitions(vec![0])]),
            )
            .await;
        response.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code
    }

    async fn produce(&mut self, id: &str, producer: (i64, i16), sequence: i32) -> i16 {
        self.produce_at(9, id, producer, sequence).await
    }

    /// Produce at `version`: v12+ is transaction version 2 (the leader adds the
    /// partition to the transaction).
    async fn produce_at(
        &mut self,
        version: i16,
        id: &str,
        producer: (i64, i16),
        sequence: i32,
    ) -> i16 {
        let mut builder = BatchBuilder::new(0, 1_000)
            .producer(producer.0, producer.1, sequence)
            .transactional();
        builder.push(Record::new(None, Some(b"in a transaction".to_vec()), 1_000));
        let request = ProduceRequest::default()
            .with_transactional_id(Some(TransactionalId(s(id))))
            .with_acks(-1)
            .with_timeout_ms(5_000)
            .with_topic_data(vec![TopicProduceData::default()
                .with_name(TopicName(s("t")))
                .with_partition_data(vec![PartitionProduceData::default()
                    .with_index(0)
                    .with_records(Some(Bytes::from(builder.build())))])]);
        let response: ProduceResponse = self.call(ApiKey::Produce, version, &request).await;
        response.responses[0].partition_responses[0].error_code
    }

    async fn end(&mut self, id: &str, producer: (i64, i16), commit: bool) -> i16 {
        let response: EndTxnResponse = self
            .call(
                ApiKey::EndTxn,
                3,
                &EndTxnRequest::default()
                    .with_transactional_id(TransactionalId(s(id)))
                    .with_producer_id(ProducerId(producer.0))
                    .with_producer_epoch(producer.1)
                    .with_committed(commit),
            )
            .await;
        response.error_code
    }

    /// The latest offset of t-0 under read_committed (isolation 1) or not (0).
    async fn latest(&mut self, isolation: i8) -> i64 {
        let request = ListOffsetsRequest::default()
            .with_replica_id(BrokerId(-1))
            .with_isolation_level(isolation)
            .with_topics(vec![ListOffsetsTopic::default()
                .with_name(TopicName(s("t")))
                .with_partitions(vec![ListOffsetsPartition::default()
                    .with_partition_index(0)
                    .with_timestamp(-1)])]);
        let response: ListOffsetsResponse = self.call(ApiKey::ListOffsets, 7, &request).await;
        response.topics[0].partitions[0].offset
    }

    /// OffsetFetch v7 of g's t-0 with require_stable: (error code, offset).
    async fn committed(&mut self, group: &str) -> (i16, i64) {
        let request = OffsetFetchRequest::default()
            .with_group_id(GroupId(s(group)))
            .with_require_stable(true)
            .with_topics(Some(vec![OffsetFetchRequestTopic::default()
                .with_name(TopicName(s("t")))
                .with_partition_indexes(vec![0])]));
        let response: OffsetFetchResponse = self.call(ApiKey::OffsetFetch, 7, &request).await;
        let partition = &response.topics[0].partitions[0];
        (partition.error_code, partition.committed_offset)
    }
}

async fn create_topic(client: &mut Client) {
    use kafka_protocol::messages::create_topics_request::CreatableTopic;
    let response: CreateTopicsResponse = client
        .call(
            ApiKey::CreateTopics,
            5,
            &CreateTopicsRequest::default()
                .with_timeout_ms(5_000)
                .with_topics(vec![CreatableTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_num_partitions(1)
                    .with_replication_factor(1)]),
        )
        .await;
    assert_eq!(response.topics[0].error_code, 0);
}

async fn find_transaction_coordinator(client: &mut Client, id: &str) {
    let response: FindCoordinatorResponse = client
        .call(
            ApiKey::FindCoordinator,
            4,
            &FindCoordinatorRequest::default()
                .with_key_type(1)
                .with_coordinator_keys(vec![s(id)]),
        )
        .await;
    assert_eq!(response.coordinators[0].error_code, 0);
}

/// Polls `probe` until it holds (markers are written after EndTxn is answered).
async fn eventually<F, Fut>(mut probe: F)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while !probe().await {
        assert!(tokio::time::Instant::now() < deadline, "never happened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_committed_transaction_shows_its_records_and_offsets_only_once_it_ends() {
    let broker = common::start().await;
    let mut client = Client::connect(broker.address).await;
    create_topic(&mut client).await;
    find_transaction_coordinator(&mut client, "app").await;
    let producer = client.init("app").await;

    // Not added to the transaction: the leader's check with the coordinator refuses it.
    assert_eq!(
        client.produce("app", producer, 0).await,
        48,
        "INVALID_TXN_STATE"
    );
    assert_eq!(client.add_partition("app", producer, "t").await, 0);
    assert_eq!(client.produce("app", producer, 0).await, 0);
    assert_eq!(client.produce("app", producer, 1).await, 0);

    let added: AddOffsetsToTxnResponse = client
        .call(
            ApiKey::AddOffsetsToTxn,
            3,
            &AddOffsetsToTxnRequest::default()
                .with_transactional_id(TransactionalId(s("app")))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_group_id(GroupId(s("g"))),
        )
        .await;
    assert_eq!(added.error_code, 0);
    // What a group coordinator on another broker asks before writing the offsets
    // (AddPartitionsToTxn v4, verify only): internal topics are fine from a broker.
    let offsets_partition = partition_for("g", 50);
    let verified: AddPartitionsToTxnResponse = client
        .call(
            ApiKey::AddPartitionsToTxn,
            4,
            &AddPartitionsToTxnRequest::default().with_transactions(vec![
                kafka_protocol::messages::add_partitions_to_txn_request::AddPartitionsToTxnTransaction::default()
                    .with_transactional_id(TransactionalId(s("app")))
                    .with_producer_id(ProducerId(producer.0))
                    .with_producer_epoch(producer.1)
                    .with_verify_only(true)
                    .with_topics(vec![AddPartitionsToTxnTopic::default()
                        .with_name(TopicName(s("__consumer_offsets")))
                        .with_partitions(vec![offsets_partition])]),
            ]),
        )
        .await;
    assert_eq!(
        verified.results_by_transaction[0].topic_results[0].results_by_partition[0]
            .partition_error_code,
        0
    );
    let committed: TxnOffsetCommitResponse = client
        .call(
            ApiKey::TxnOffsetCommit,
            3,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(s("app")))
                .with_group_id(GroupId(s("g")))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(5)
                        .with_committed_leader_epoch(-1)])]),
        )
        .await;
    assert_eq!(committed.topics[0].partitions[0].error_code, 0);

    // Open: read_committed stops at the transaction's first record, the offset is pending.
    assert_eq!(client.latest(1).await, 0);
    assert_eq!(client.latest(0).await, 2);
    assert_eq!(
        client.committed("g").await,
        (88, -1),
        "UNSTABLE_OFFSET_COMMIT"
    );

    assert_eq!(client.end("app", producer, true).await, 0);
    let probe = std::sync::Arc::new(tokio::sync::Mutex::new(client));
    eventually(|| {
        let probe = probe.clone();
        async move { probe.lock().await.latest(1).await == 3 }
    })
    .await;
    let mut client = probe.lock().await;
    assert_eq!(client.latest(0).await, 3, "the commit marker took offset 2");
    eventually_committed(&mut client, (0, 5)).await;

    // A retried EndTxn after the commit is answered NONE; an abort now is refused.
    assert_eq!(client.end("app", producer, true).await, 0);
    assert_eq!(client.end("app", producer, false).await, 48);
    // A new instance fences the old one.
    let successor = client.init("app").await;
    assert_eq!(successor, (producer.0, producer.1 + 1));
    assert_eq!(
        client.add_partition("app", producer, "t").await,
        90,
        "PRODUCER_FENCED (v2+ can read it)"
    );
}

async fn eventually_committed(client: &mut Client, expected: (i16, i64)) {
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let got = client.committed("g").await;
        if got == expected {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "offset still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn an_aborted_transaction_drops_its_offsets_and_hides_its_records() {
    let broker = common::start().await;
    let mut client = Client::connect(broker.address).await;
    create_topic(&mut client).await;
    find_transaction_coordinator(&mut client, "app").await;
    let producer = client.init("app").await;
    assert_eq!(client.add_partition("app", producer, "t").await, 0);
    assert_eq!(client.produce("app", producer, 0).await, 0);
    assert_eq!(client.end("app", producer, false).await, 0);
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while client.latest(1).await != 2 {
        assert!(tokio::time::Instant::now() < deadline);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The next transaction of the same producer starts fresh.
    assert_eq!(
        client.produce("app", producer, 1).await,
        48,
        "not added yet"
    );
    assert_eq!(client.add_partition("app", producer, "t").await, 0);
    assert_eq!(client.produce("app", producer, 1).await, 0);
}

fn config(dir: &std::path::Path) -> BrokerConfig {
    BrokerConfig {
        listen: "127.0.0.1:0".parse().unwrap(),
        data_dir: dir.to_path_buf(),
        ..BrokerConfig::default()
    }
}

/// The coordinator decided a commit (PrepareCommit is in `__transaction_state`) and
/// stopped before writing any marker: the broker that loads the partition next writes
/// the markers and completes the transaction, so the producer's records become visible.
#[tokio::test]
async fn a_coordinator_loading_a_prepared_commit_completes_it() {
    let dir = tempfile::tempdir().unwrap();
    let producer = {
        let broker = Broker::open(config(dir.path())).unwrap();
        let (address, handle, server) = serve(broker.clone()).await.unwrap();
        let server = tokio::spawn(server);
        let mut client = Client::connect(address).await;
        create_topic(&mut client).await;
        find_transaction_coordinator(&mut client, "app").await;
        let producer = client.init("app").await;
        assert_eq!(client.add_partition("app", producer, "t").await, 0);
        assert_eq!(client.produce("app", producer, 0).await, 0);
        drop(client);
        handle.shutdown();
        let _ = server.await;
        broker.shutdown().unwrap();
        producer
    };
    // What EndTxn would have written before its markers, then a crash.
    {
        let broker = Broker::open(config(dir.path())).unwrap();
        let index = partition_for("app", txn_records::TRANSACTION_STATE_PARTITIONS);
        let partition = broker
            .partition(&TopicPartition::new(
                txn_records::TRANSACTION_STATE_TOPIC,
                index,
            ))
            .unwrap();
        let prepared = StoredTxn {
            producer_id: producer.0,
            producer_epoch: producer.1,
            timeout_ms: 60_000,
            state: TxnState::PrepareCommit,
            partitions: BTreeMap::from([("t".to_string(), [0].into())]),
            last_update_ms: 1,
            start_ms: 1,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 0,
        };
        let mut batch = BatchBuilder::new(0, 1);
        batch.push(Record::new(
            Some(txn_records::key("app")),
            Some(txn_records::value(&prepared, 0)),
            1,
        ));
        partition
            .append(batch.build(), true, Duration::from_secs(5))
            .await
            .unwrap();
        let data = broker.partition(&TopicPartition::new("t", 0)).unwrap();
        assert!(
            data.has_ongoing_txn(producer.0, producer.1),
            "no marker yet"
        );
        broker.shutdown().unwrap();
    }
    let broker = Broker::open(config(dir.path())).unwrap();
    let (address, _handle, server) = serve(broker.clone()).await.unwrap();
    tokio::spawn(server);
    let mut client = Client::connect(address).await;
    // Loading starts with the first request for the partition.
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    loop {
        let described: DescribeTransactionsResponse = client
            .call(
                ApiKey::DescribeTransactions,
                0,
                &DescribeTransactionsRequest::default()
                    .with_transactional_ids(vec![TransactionalId(s("app"))]),
            )
            .await;
        let state = &described.transaction_states[0];
        assert_eq!(state.error_code, 0);
        if state.transaction_state.as_str() == "CompleteCommit" {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still {:?}",
            state.transaction_state
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        client.latest(1).await,
        2,
        "the record and its commit marker"
    );
}

/// Transaction version 2 (KIP-890 part 2), as a Kafka 4 Java producer speaks it: no
/// AddPartitionsToTxn or AddOffsetsToTxn; Produce v12 and TxnOffsetCommit v5 add their
/// partitions through the leader, EndTxn v5 bumps the epoch and returns it, and the next
/// transaction starts at that epoch with sequence 0.
#[tokio::test]
async fn transaction_version_2_adds_partitions_by_producing_and_bumps_the_epoch() {
    let broker = common::start().await;
    let mut client = Client::connect(broker.address).await;
    let versions: ApiVersionsResponse = client
        .call(ApiKey::ApiVersions, 3, &ApiVersionsRequest::default())
        .await;
    let feature = versions
        .finalized_features
        .iter()
        .find(|f| f.name.as_str() == "transaction.version")
        .expect("transaction.version is finalized");
    assert_eq!(feature.max_version_level, 2);
    create_topic(&mut client).await;
    find_transaction_coordinator(&mut client, "app").await;
    let producer = client.init("app").await;

    assert_eq!(
        client.produce_at(12, "app", producer, 0).await,
        0,
        "added by the leader"
    );
    assert_eq!(client.produce_at(12, "app", producer, 1).await, 0);
    let committed: TxnOffsetCommitResponse = client
        .call(
            ApiKey::TxnOffsetCommit,
            5,
            &TxnOffsetCommitRequest::default()
                .with_transactional_id(TransactionalId(s("app")))
                .with_group_id(GroupId(s("g")))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_generation_id_or_member_epoch(-1)
                .with_topics(vec![TxnOffsetCommitRequestTopic::default()
                    .with_name(TopicName(s("t")))
                    .with_partitions(vec![TxnOffsetCommitRequestPartition::default()
                        .with_partition_index(0)
                        .with_committed_offset(2)
                        .with_committed_leader_epoch(-1)])]),
        )
        .await;
    assert_eq!(
        committed.topics[0].partitions[0].error_code, 0,
        "offsets partition added"
    );

    let ended: EndTxnResponse = client
        .call(
            ApiKey::EndTxn,
            5,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("app")))
                .with_producer_id(ProducerId(producer.0))
                .with_producer_epoch(producer.1)
                .with_committed(true),
        )
        .await;
    assert_eq!(ended.error_code, 0);
    let bumped = (ended.producer_id.0, ended.producer_epoch);
    assert_eq!(bumped, (producer.0, producer.1 + 1));
    eventually_committed(&mut client, (0, 2)).await;
    assert_eq!(client.latest(1).await, 3);

    // The old epoch is fenced; the new one starts the next transaction at sequence 0
    // (the leader retries while the coordinator finishes the last one's markers).
    assert_eq!(client.produce_at(12, "app", producer, 2).await, 47);
    assert_eq!(client.produce_at(12, "app", bumped, 0).await, 0);
    let aborted: EndTxnResponse = client
        .call(
            ApiKey::EndTxn,
            5,
            &EndTxnRequest::default()
                .with_transactional_id(TransactionalId(s("app")))
                .with_producer_id(ProducerId(bumped.0))
                .with_producer_epoch(bumped.1)
                .with_committed(false),
        )
        .await;
    assert_eq!(
        (aborted.error_code, aborted.producer_epoch),
        (0, bumped.1 + 1)
    );
    let deadline = tokio::time::Instant::now() + HANG_GUARD;
    while client.latest(1).await != 5 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the abort marker never came"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// KIP-890's hanging-transaction guard (docs/design/transactions.md §7.3): a batch the
/// coordinator verified while the producer's transaction was open, appended only after
/// that transaction's marker, would open a transaction no coordinator knows (and hold
/// the last stable offset forever). The leader refuses it: what it knew of the producer
/// when asking has changed.
#[tokio::test]
async fn a_verified_batch_that_lands_after_its_transactions_marker_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let broker = common::open_broker(dir.path(), |_| {});
    broker
        .create_topic("t", 1, 1, Vec::new(), Default::default(), false)
        .await
        .unwrap();
    let partition = broker.partition(&TopicPartition::new("t", 0)).unwrap();
    let batch = |sequence: i32| {
        let mut builder = BatchBuilder::new(0, 1_000)
            .producer(7, 0, sequence)
            .transactional();
        builder.push(Record::new(None, Some(b"v".to_vec()), 1_000));
        builder.build()
    };
    // Verified with the producer unknown here: opens the transaction.
    partition
        .append_transactional(batch(0), -1, (7, 0, None))
        .unwrap();
    // What a second in-flight batch's verification saw, before the abort lands.
    let stale = partition
        .log()
        .producer_state()
        .get(7)
        .map(|e| e.last_offset);
    partition
        .append_transactional(batch(1), -1, (7, 0, stale))
        .expect("joins the open transaction");
    let before_marker = partition
        .log()
        .producer_state()
        .get(7)
        .map(|e| e.last_offset);
    let marker = strand_records::EndTxnMarker {
        result: strand_records::TxnResult::Abort,
        coordinator_epoch: 0,
    };
    partition.append_marker(7, 0, marker).unwrap();
    let refused = partition.append_transactional(batch(2), -1, (7, 0, before_marker));
    assert_eq!(
        refused.err().map(|refusal| refusal.code),
        Some(48),
        "INVALID_TXN_STATE"
    );
    // Not verified at all: it may only join an open transaction.
    let unverified = partition.append_transactional(batch(2), -1, (7, 0, Some(i64::MIN)));
    assert_eq!(unverified.err().map(|refusal| refusal.code), Some(48));
    assert!(
        !partition.has_ongoing_txn(7, 0),
        "no transaction was opened"
    );
    // Verified after the marker: the next transaction opens.
    let fresh = partition
        .log()
        .producer_state()
        .get(7)
        .map(|e| e.last_offset);
    partition
        .append_transactional(batch(2), -1, (7, 0, fresh))
        .unwrap();
    assert!(partition.has_ongoing_txn(7, 0));
}
