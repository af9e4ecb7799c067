//! Fuzzed SASL exchanges on a SASL_PLAINTEXT listener serving PLAIN, SCRAM-SHA-256 and
//! OAUTHBEARER: random tokens after a handshake of each mechanism (v1 framing, and v0's
//! bare tokens), and random frames before any handshake. Each is answered whole or closes
//! the connection; none hangs, and the broker still authenticates a good client after.

mod common;

use bytes::{BufMut, Bytes, BytesMut};
use common::listeners::{plain_login, start};
use common::{call, encode_request, HANG_GUARD};
use kafka_protocol::messages::{
    ApiKey, MetadataRequest, MetadataResponse, RequestHeader, SaslAuthenticateRequest,
    SaslHandshakeRequest, SaslHandshakeResponse,
};
use kafka_protocol::protocol::{Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const JAAS_PLAIN: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required user_alice="alice-secret";"#;
const JAAS_OAUTH: &str =
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;";
const MECHANISMS: [&str; 3] = ["PLAIN", "SCRAM-SHA-256", "OAUTHBEARER"];

/// A deterministic xorshift stream, so a failure replays.
fn random(seed: u64) -> impl FnMut() -> u64 {
    let mut state = seed;
    move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    }
}

/// Reads one frame, or None once the broker closed the connection; never hangs.
async fn answer_or_close(stream: &mut TcpStream) -> Option<Vec<u8>> {
    let read = async {
        let size = stream.read_i32().await.ok()?;
        assert!(size >= 0, "a negative frame size");
        let mut frame = vec![0u8; size as usize];
        stream.read_exact(&mut frame).await.ok()?;
        Some(frame)
    };
    tokio::time::timeout(HANG_GUARD, read)
        .await
        .expect("answered or closed, no hang")
}

#[tokio::test]
async fn fuzzed_sasl_tokens_and_frames_are_answered_or_closed() {
    let broker = start(&[
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
        ("sasl.enabled.mechanisms", "PLAIN,SCRAM-SHA-256,OAUTHBEARER"),
        (
            "listener.name.sasl_plaintext.plain.sasl.jaas.config",
            JAAS_PLAIN,
        ),
        (
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            JAAS_OAUTH,
        ),
        // Failed exchanges close at once, so the rounds do not wait.
        ("connection.failed.authentication.delay.ms", "0"),
    ])
    .await;
    let address = broker.address("SASL_PLAINTEXT");
    let mut next = random(0x5A51_F022_D00D_F00D);
    let mut outcomes = (0u32, 0u32);
    for round in 0..240 {
        let mut stream = TcpStream::connect(address).await.unwrap();
        let token: Vec<u8> = (0..next() % 300).map(|_| next() as u8).collect();
        let framing = round % 3;
        if framing < 2 {
            // A handshake of one mechanism, then a random token: in SaslAuthenticate
            // (v1 framing) or bare (v0).
            let mechanism = MECHANISMS[(next() % 3) as usize];
            let version = if framing == 0 { 1 } else { 0 };
            let answer: SaslHandshakeResponse = call(
                &mut stream,
                ApiKey::SaslHandshake,
                version,
                &SaslHandshakeRequest::default()
                    .with_mechanism(StrBytes::from_static_str(mechanism)),
            )
            .await;
            assert_eq!(answer.error_code, 0);
            if framing == 0 {
                stream
                    .write_all(&encode_request(
                        ApiKey::SaslAuthenticate,
                        (next() % 3) as i16,
                        round,
                        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(token)),
                    ))
                    .await
                    .unwrap();
            } else {
                let mut frame = BytesMut::new();
                frame.put_i32(token.len() as i32);
                frame.extend_from_slice(&token);
                stream.write_all(&frame).await.unwrap();
            }
        } else {
            // Before any handshake: a random API key and version with a random body.
            let header = RequestHeader::default()
                .with_request_api_key((next() % 80) as i16)
                .with_request_api_version((next() % 8) as i16)
                .with_correlation_id(round);
            let mut payload = BytesMut::new();
            header.encode(&mut payload, 1).unwrap();
            payload.extend_from_slice(&token);
            let mut frame = BytesMut::new();
            frame.put_i32(payload.len() as i32);
            frame.extend_from_slice(&payload);
            stream.write_all(&frame).await.unwrap();
        }
        match answer_or_close(&mut stream).await {
            Some(_) => outcomes.0 += 1,
            None => outcomes.1 += 1,
        }
    }
    assert!(
        outcomes.0 > 0 && outcomes.1 > 0,
        "answered, closed: {outcomes:?}"
    );
    // The broker still authenticates and serves a good client.
    let mut good = plain_login(address, "alice", "alice-secret").await;
    let metadata: MetadataResponse =
        call(&mut good, ApiKey::Metadata, 12, &MetadataRequest::default()).await;
    assert_eq!(metadata.brokers.len(), 1);
}
