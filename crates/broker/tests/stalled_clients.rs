//! Misbehaving clients hurt only their own connection: peers that announce huge requests
//! and stall, bodies that never arrive, idle sockets, and more connections than the
//! limits allow. Every wait here is a guard against a hang, not a performance assertion.

use std::time::Duration;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, ProduceResponse,
};
use kafka_protocol::protocol::Decodable;
use strand_protocol::SOCKET_REQUEST_MAX_BYTES_DEFAULT;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

mod common;
use common::*;

/// Long enough for any healthy answer on a loaded machine; a broker stalled by other
/// connections answers never.
const ANSWER_GUARD: Duration = Duration::from_secs(10);

async fn api_versions(stream: &mut TcpStream, correlation_id: i32) {
    stream
        .write_all(&encode_request(
            ApiKey::ApiVersions,
            3,
            correlation_id,
            &ApiVersionsRequest::default(),
        ))
        .await
        .unwrap();
    let (id, mut body) = tokio::time::timeout(ANSWER_GUARD, read_response(stream, 0))
        .await
        .expect("ApiVersions answered")
        .expect("connection open");
    assert_eq!(id, correlation_id);
    let response = ApiVersionsResponse::decode(&mut body, 3).unwrap();
    assert_eq!(response.error_code, 0);
}

/// Waits for the broker to close `stream`: true if it did within `guard`.
async fn closed_within(stream: &mut TcpStream, guard: Duration) -> bool {
    let mut buffer = [0u8; 64];
    matches!(
        tokio::time::timeout(guard, stream.read(&mut buffer)).await,
        Ok(Ok(0)) | Ok(Err(_))
    )
}

/// A fresh client creates a topic, produces a record and fetches it back.
async fn produce_and_consume(address: std::net::SocketAddr, topic: &str) {
    let mut client = tokio::time::timeout(ANSWER_GUARD, TcpStream::connect(address))
        .await
        .expect("connected")
        .unwrap();
    tokio::time::timeout(ANSWER_GUARD, metadata(&mut client, topic, 1))
        .await
        .expect("Metadata answered");
    let request = encode_request(
        ApiKey::Produce,
        9,
        2,
        &produce_request(topic, 0, 1, b"through"),
    );
    client.write_all(&request).await.unwrap();
    let (_, mut body) = tokio::time::timeout(ANSWER_GUARD, read_response(&mut client, 1))
        .await
        .expect("Produce answered")
        .unwrap();
    let produced = ProduceResponse::decode(&mut body, 9).unwrap();
    assert_eq!(produced.responses[0].partition_responses[0].error_code, 0);
    let request = encode_request(ApiKey::Fetch, 12, 3, &fetch_request(topic, 0, 500));
    client.write_all(&request).await.unwrap();
    let (_, mut body) = tokio::time::timeout(ANSWER_GUARD, read_response(&mut client, 1))
        .await
        .expect("Fetch answered")
        .unwrap();
    let fetched = FetchResponse::decode(&mut body, 12).unwrap();
    let records: Bytes = fetched.responses[0].partitions[0]
        .records
        .clone()
        .expect("records");
    assert!(
        records.windows(7).any(|w| w == b"through"),
        "the record comes back"
    );
}

/// The denial of service the issue found: six connections announcing 100 MiB requests
/// and stalling froze every other connection, because each reserved its whole size from
/// the request-memory pool (512 MiB) before reading, and a waiting reservation blocked
/// every later one.
#[tokio::test]
async fn stalled_senders_of_huge_requests_do_not_stall_other_clients() {
    let broker = start().await;
    let mut already_open = TcpStream::connect(broker.address).await.unwrap();
    api_versions(&mut already_open, 1).await;
    let mut attackers = Vec::new();
    for _ in 0..20 {
        let mut attacker = TcpStream::connect(broker.address).await.unwrap();
        let size = SOCKET_REQUEST_MAX_BYTES_DEFAULT as i32;
        attacker.write_all(&size.to_be_bytes()).await.unwrap();
        attacker.write_all(&[0u8; 1]).await.unwrap();
        attackers.push(attacker);
    }
    // Many smaller prefixes, too (560 of 1 MiB froze the broker as well).
    for _ in 0..600 {
        let mut attacker = TcpStream::connect(broker.address).await.unwrap();
        attacker
            .write_all(&(1024 * 1024i32).to_be_bytes())
            .await
            .unwrap();
        attackers.push(attacker);
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    api_versions(&mut already_open, 2).await;
    produce_and_consume(broker.address, "past-the-stall").await;
    drop(attackers);
}

#[tokio::test]
async fn a_body_that_does_not_arrive_in_time_closes_its_connection() {
    let broker = start_with(|config| config.request_read_timeout_ms = 300).await;
    let mut slow = TcpStream::connect(broker.address).await.unwrap();
    slow.write_all(&100_000i32.to_be_bytes()).await.unwrap();
    slow.write_all(&[0u8; 5_000]).await.unwrap();
    assert!(
        closed_within(&mut slow, ANSWER_GUARD).await,
        "closed at the read deadline"
    );
    produce_and_consume(broker.address, "after-the-slow-one").await;
}

#[tokio::test]
async fn idle_connections_are_closed_but_not_while_a_long_poll_waits() {
    let broker = start_with(|config| config.connections_max_idle_ms = 400).await;
    let mut idle = TcpStream::connect(broker.address).await.unwrap();
    api_versions(&mut idle, 1).await;
    let mut polling = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut polling, "long-poll", 1).await;
    // Nothing to fetch: the broker parks the request for its whole max wait, 1.5 s,
    // longer than the idle limit.
    let request = encode_request(ApiKey::Fetch, 12, 2, &fetch_request("long-poll", 0, 1_500));
    polling.write_all(&request).await.unwrap();
    assert!(
        closed_within(&mut idle, ANSWER_GUARD).await,
        "an idle connection is closed after connections.max.idle.ms"
    );
    let (id, _) = tokio::time::timeout(ANSWER_GUARD, read_response(&mut polling, 1))
        .await
        .expect("the parked fetch is answered")
        .expect("on a connection still open");
    assert_eq!(id, 2);
    assert!(
        closed_within(&mut polling, ANSWER_GUARD).await,
        "then it idles and is closed too"
    );
}

/// Opens a connection and says whether the broker admitted it (answers ApiVersions)
/// rather than closing it.
async fn admitted(address: std::net::SocketAddr) -> Option<TcpStream> {
    let mut stream = TcpStream::connect(address).await.ok()?;
    let request = encode_request(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
    stream.write_all(&request).await.ok()?;
    match tokio::time::timeout(ANSWER_GUARD, read_response(&mut stream, 0)).await {
        Ok(Some(_)) => Some(stream),
        Ok(None) => None,
        Err(_) => panic!("an over-limit connection was left hanging instead of closed"),
    }
}

/// The broker frees a closed connection's place once its task has ended.
async fn admitted_eventually(address: std::net::SocketAddr) -> TcpStream {
    for _ in 0..100 {
        if let Some(stream) = admitted(address).await {
            return stream;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("a freed place was never given to a new connection");
}

#[tokio::test]
async fn connections_over_max_connections_per_ip_are_closed_at_once() {
    let broker = start_with(|config| config.max_connections_per_ip = 3).await;
    let mut open = Vec::new();
    for _ in 0..3 {
        open.push(admitted(broker.address).await.expect("within the limit"));
    }
    assert!(
        admitted(broker.address).await.is_none(),
        "the fourth is closed"
    );
    drop(open.pop());
    open.push(admitted_eventually(broker.address).await);
}

#[tokio::test]
async fn per_ip_overrides_and_max_connections_apply() {
    let broker = start_with(|config| {
        config.max_connections_per_ip = 1;
        config.max_connections_per_ip_overrides = "127.0.0.1:3".into();
        config.max_connections = 2;
    })
    .await;
    let first = admitted(broker.address).await.expect("override allows 3");
    let _second = admitted(broker.address).await.expect("override allows 3");
    assert!(
        admitted(broker.address).await.is_none(),
        "max.connections (2) is reached first"
    );
    drop(first);
    let _third = admitted_eventually(broker.address).await;
}

/// A peer that pipelines requests and never reads the answers: once the socket buffers
/// and the connection's answer queue are full nothing moves, and after
/// connections.max.idle.ms the connection is closed rather than held forever.
#[tokio::test]
async fn a_peer_that_never_reads_its_answers_is_closed_when_idle() {
    let broker = start_with(|config| config.connections_max_idle_ms = 500).await;
    let mut writer = TcpStream::connect(broker.address).await.unwrap();
    metadata(&mut writer, "unread", 1).await;
    let big = vec![7u8; 400_000];
    let request = encode_request(
        ApiKey::Produce,
        9,
        2,
        &produce_request("unread", 0, 1, &big),
    );
    writer.write_all(&request).await.unwrap();
    read_response(&mut writer, 1).await.unwrap();
    // Each fetch answer is ~400 KB; 100 of them overflow every buffer on the way.
    let fetch = encode_request(ApiKey::Fetch, 12, 3, &fetch_request("unread", 0, 0));
    let flood = async {
        for _ in 0..100 {
            if writer.write_all(&fetch).await.is_err() {
                break; // the broker closed: writes fail
            }
        }
    };
    let _ = tokio::time::timeout(ANSWER_GUARD, flood).await;
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    // Drain what was sent before the close: the stream ends before all 100 answers (a
    // broker that waited on this peer forever would send them all once it reads).
    let mut buffer = vec![0u8; 1 << 20];
    let mut drained = 0usize;
    let ended = tokio::time::timeout(ANSWER_GUARD, async {
        loop {
            match writer.read(&mut buffer).await {
                Ok(0) | Err(_) => return,
                Ok(read) => drained += read,
            }
        }
    })
    .await;
    assert!(ended.is_ok(), "the connection was never closed");
    assert!(
        drained < 50 * big.len(),
        "{drained} bytes of answers: the broker kept serving a peer idle past the limit"
    );
}
