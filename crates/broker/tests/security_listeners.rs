//! Several listeners configured by Kafka's names, each speaking its protocol: PLAINTEXT,
//! SASL_PLAINTEXT with PLAIN, SSL with and without client certificates. What the client
//! sees on the wire: the SASL exchange (v1 and the older v0 framing), its failures,
//! re-authentication, Metadata answering the addresses of the listener the request came
//! on, and produce/fetch under TLS (the fetched file regions go through rustls).

mod common;

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{BufMut, Bytes, BytesMut};
use common::listeners::start;
use common::{encode_request, fetch_request, produce_request, HANG_GUARD};
use kafka_protocol::messages::metadata_request::MetadataRequestTopic;
use kafka_protocol::messages::{
    ApiKey, ApiVersionsRequest, ApiVersionsResponse, FetchResponse, MetadataRequest,
    MetadataResponse, ProduceResponse, ResponseHeader, SaslAuthenticateRequest,
    SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse, TopicName,
};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

const ILLEGAL_SASL_STATE: i16 = 34;
const UNSUPPORTED_SASL_MECHANISM: i16 = 33;
const SASL_AUTHENTICATION_FAILED: i16 = 58;

struct Certificates {
    ca_pem: String,
    ca: rcgen::Certificate,
    ca_key: rcgen::KeyPair,
}

impl Certificates {
    fn new() -> Certificates {
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "Strand Test CA");
        let ca = params.self_signed(&ca_key).unwrap();
        Certificates {
            ca_pem: ca.pem(),
            ca,
            ca_key,
        }
    }

    /// (key PEM, certificate PEM) signed by the CA.
    fn issue(&self, common_name: &str, server: bool) -> (String, String) {
        let key = rcgen::KeyPair::generate().unwrap();
        let names = if server {
            vec!["localhost".to_string(), "127.0.0.1".to_string()]
        } else {
            vec![]
        };
        let mut params = rcgen::CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, common_name);
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "Strand");
        let cert = params.signed_by(&key, &self.ca, &self.ca_key).unwrap();
        (key.serialize_pem(), cert.pem())
    }
}

const JAAS: &str = r#"org.apache.kafka.common.security.plain.PlainLoginModule required username="admin" password="admin-secret" user_admin="admin-secret" user_alice="alice-secret";"#;

fn sasl_properties() -> Vec<(&'static str, &'static str)> {
    vec![
        (
            "listeners",
            "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        ),
        ("sasl.enabled.mechanisms", "PLAIN"),
        ("listener.name.sasl_plaintext.plain.sasl.jaas.config", JAAS),
    ]
}

async fn send<S: AsyncWrite + Unpin, T: Encodable>(
    stream: &mut S,
    key: ApiKey,
    version: i16,
    body: &T,
) {
    stream
        .write_all(&encode_request(key, version, 7, body))
        .await
        .unwrap();
}

/// The next response frame's body (after its header), or None once the broker closed
/// the connection.
async fn receive<S: AsyncRead + Unpin>(stream: &mut S, key: ApiKey, version: i16) -> Option<Bytes> {
    let read = async {
        let size = stream.read_i32().await.ok()?;
        let mut frame = vec![0u8; size as usize];
        stream.read_exact(&mut frame).await.ok()?;
        let mut frame = Bytes::from(frame);
        ResponseHeader::decode(&mut frame, key.response_header_version(version)).unwrap();
        Some(frame)
    };
    tokio::time::timeout(HANG_GUARD, read)
        .await
        .expect("no hang")
}

async fn call<S: AsyncRead + AsyncWrite + Unpin, Req: Encodable, Resp: Decodable>(
    stream: &mut S,
    key: ApiKey,
    version: i16,
    body: &Req,
) -> Resp {
    send(stream, key, version, body).await;
    let mut bytes = receive(stream, key, version).await.expect("a response");
    Resp::decode(&mut bytes, version).unwrap()
}

/// The broker closed the connection: the next read ends.
async fn assert_closed<S: AsyncRead + Unpin>(stream: &mut S) {
    let mut byte = [0u8; 1];
    let read = tokio::time::timeout(HANG_GUARD, stream.read(&mut byte))
        .await
        .expect("the broker closes the connection");
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
}

async fn handshake<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    version: i16,
    mechanism: &str,
) -> SaslHandshakeResponse {
    call(
        stream,
        ApiKey::SaslHandshake,
        version,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_string(mechanism.into())),
    )
    .await
}

async fn authenticate<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    user: &str,
    password: &str,
) -> SaslAuthenticateResponse {
    call(
        stream,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(format!("\0{user}\0{password}"))),
    )
    .await
}

async fn metadata<S: AsyncRead + AsyncWrite + Unpin>(
    stream: &mut S,
    topic: &str,
) -> MetadataResponse {
    call(
        stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default()
            .with_topics(Some(vec![MetadataRequestTopic::default()
                .with_name(Some(TopicName(StrBytes::from_string(topic.into()))))]))
            .with_allow_auto_topic_creation(true),
    )
    .await
}

fn broker_ports(response: &MetadataResponse) -> Vec<i32> {
    response.brokers.iter().map(|b| b.port).collect()
}

#[tokio::test]
async fn plain_authenticates_and_metadata_names_the_listener_it_came_on() {
    let cluster = start(&sasl_properties()).await;
    let sasl = cluster.address("SASL_PLAINTEXT");
    let plaintext = cluster.address("PLAINTEXT");
    assert_ne!(sasl.port(), plaintext.port());

    let mut stream = TcpStream::connect(sasl).await.unwrap();
    // ApiVersions comes before the handshake (and lists the SASL APIs).
    let versions: ApiVersionsResponse = call(
        &mut stream,
        ApiKey::ApiVersions,
        3,
        &ApiVersionsRequest::default(),
    )
    .await;
    assert_eq!(versions.error_code, 0);
    let listed = |key: ApiKey| {
        versions
            .api_keys
            .iter()
            .find(|k| k.api_key == key as i16)
            .map(|k| (k.min_version, k.max_version))
    };
    assert_eq!(listed(ApiKey::SaslHandshake), Some((0, 1)));
    assert_eq!(listed(ApiKey::SaslAuthenticate), Some((0, 2)));
    let answer = handshake(&mut stream, 1, "PLAIN").await;
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);
    let answer = authenticate(&mut stream, "alice", "alice-secret").await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert_eq!(
        answer.session_lifetime_ms, 0,
        "no connections.max.reauth.ms"
    );
    let response = metadata(&mut stream, "t").await;
    assert_eq!(broker_ports(&response), vec![sasl.port() as i32]);
    // Authenticated: a SaslAuthenticate is out of place, as on Kafka.
    let out_of_place = authenticate(&mut stream, "alice", "alice-secret").await;
    assert_eq!(out_of_place.error_code, ILLEGAL_SASL_STATE);

    // The PLAINTEXT listener needs nothing, names its own port, and has no SASL state.
    let mut stream = TcpStream::connect(plaintext).await.unwrap();
    let response = metadata(&mut stream, "t").await;
    assert_eq!(broker_ports(&response), vec![plaintext.port() as i32]);
    let answer = handshake(&mut stream, 1, "PLAIN").await;
    assert_eq!(answer.error_code, ILLEGAL_SASL_STATE);
}

#[tokio::test]
async fn a_wrong_password_fails_with_kafkas_message_and_closes_the_connection() {
    let cluster = start(&sasl_properties()).await;
    // A wrong password, and an unknown user failing the same way (nothing tells users
    // apart).
    for (user, password) in [("alice", "guess"), ("mallory", "alice-secret")] {
        let mut stream = TcpStream::connect(cluster.address("SASL_PLAINTEXT"))
            .await
            .unwrap();
        assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
        let answer = authenticate(&mut stream, user, password).await;
        assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
        assert_eq!(
            answer.error_message.as_deref(),
            Some("Authentication failed: Invalid username or password")
        );
        assert_closed(&mut stream).await;
    }
}

#[tokio::test]
async fn nothing_but_the_handshake_is_served_before_authentication() {
    let cluster = start(&sasl_properties()).await;
    let sasl = cluster.address("SASL_PLAINTEXT");

    // A request before the handshake closes the connection unanswered.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    send(
        &mut stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default(),
    )
    .await;
    assert_closed(&mut stream).await;

    // A request between the handshake and authentication too.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
    send(
        &mut stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default(),
    )
    .await;
    assert_closed(&mut stream).await;

    // A mechanism the listener does not enable: the list it does, then closed.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let answer = handshake(&mut stream, 1, "SCRAM-SHA-256").await;
    assert_eq!(answer.error_code, UNSUPPORTED_SASL_MECHANISM);
    assert_eq!(answer.mechanisms, vec![StrBytes::from_static_str("PLAIN")]);
    assert_closed(&mut stream).await;

    // A frame larger than sasl.server.max.receive.size before authentication.
    let mut stream = TcpStream::connect(sasl).await.unwrap();
    let mut frame = BytesMut::new();
    frame.put_i32(1 << 20);
    frame.put_bytes(0, 64);
    stream.write_all(&frame).await.unwrap();
    assert_closed(&mut stream).await;
}

/// A SASL token in SaslHandshake v0's framing: size-prefixed, no request header.
fn bare_frame(token: &[u8]) -> Bytes {
    let mut frame = BytesMut::new();
    frame.put_i32(token.len() as i32);
    frame.put_slice(token);
    frame.freeze()
}

#[tokio::test]
async fn the_older_framing_sends_bare_tokens_after_handshake_v0() {
    let cluster = start(&sasl_properties()).await;
    let mut stream = TcpStream::connect(cluster.address("SASL_PLAINTEXT"))
        .await
        .unwrap();
    assert_eq!(handshake(&mut stream, 0, "PLAIN").await.error_code, 0);
    stream
        .write_all(&bare_frame(b"\0alice\0alice-secret"))
        .await
        .unwrap();
    // PLAIN's final message is empty: a bare frame of size 0.
    let size = tokio::time::timeout(HANG_GUARD, stream.read_i32())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(size, 0);
    let response = metadata(&mut stream, "t").await;
    assert_eq!(response.brokers.len(), 1);

    // A wrong password in the older framing: closed, nothing sent.
    let mut stream = TcpStream::connect(cluster.address("SASL_PLAINTEXT"))
        .await
        .unwrap();
    assert_eq!(handshake(&mut stream, 0, "PLAIN").await.error_code, 0);
    stream
        .write_all(&bare_frame(b"\0alice\0wrong"))
        .await
        .unwrap();
    assert_closed(&mut stream).await;
}

#[tokio::test]
async fn sessions_are_reauthenticated_as_the_same_principal() {
    let mut properties = sasl_properties();
    properties.push(("connections.max.reauth.ms", "60000"));
    let cluster = start(&properties).await;
    let sasl = cluster.address("SASL_PLAINTEXT");

    let mut stream = TcpStream::connect(sasl).await.unwrap();
    assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
    let answer = authenticate(&mut stream, "alice", "alice-secret").await;
    assert_eq!(answer.session_lifetime_ms, 60_000);
    metadata(&mut stream, "t").await;
    // KIP-368: a new handshake on the authenticated connection, then the exchange.
    assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
    let answer = authenticate(&mut stream, "alice", "alice-secret").await;
    assert_eq!(answer.error_code, 0);
    assert_eq!(answer.session_lifetime_ms, 60_000);
    metadata(&mut stream, "t").await;
    // Someone else on the same connection is refused.
    assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
    let answer = authenticate(&mut stream, "admin", "admin-secret").await;
    assert_eq!(answer.error_code, SASL_AUTHENTICATION_FAILED);
    assert_eq!(
        answer.error_message.as_deref(),
        Some("Cannot change principals during re-authentication from User:alice: User:admin")
    );
    assert_closed(&mut stream).await;
}

#[tokio::test]
async fn a_session_past_its_lifetime_is_closed_at_its_next_request() {
    let mut properties = sasl_properties();
    properties.push(("connections.max.reauth.ms", "1"));
    let cluster = start(&properties).await;
    let mut stream = TcpStream::connect(cluster.address("SASL_PLAINTEXT"))
        .await
        .unwrap();
    assert_eq!(handshake(&mut stream, 1, "PLAIN").await.error_code, 0);
    let answer = authenticate(&mut stream, "alice", "alice-secret").await;
    assert_eq!(answer.session_lifetime_ms, 1);
    tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    send(
        &mut stream,
        ApiKey::Metadata,
        12,
        &MetadataRequest::default(),
    )
    .await;
    assert_closed(&mut stream).await;
}

/// OAUTHBEARER with Kafka's unsecured validator: the token's subject is the principal,
/// and under connections.max.reauth.ms the session ends no later than the token.
#[tokio::test]
async fn an_oauthbearer_session_ends_no_later_than_its_token() {
    use base64::Engine;
    let cluster = start(&[
        ("listeners", "SASL_PLAINTEXT://127.0.0.1:0"),
        ("sasl.enabled.mechanisms", "OAUTHBEARER"),
        (
            "listener.name.sasl_plaintext.oauthbearer.sasl.jaas.config",
            "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;",
        ),
        ("connections.max.reauth.ms", "3600000"),
    ])
    .await;
    let mut stream = TcpStream::connect(cluster.address("SASL_PLAINTEXT"))
        .await
        .unwrap();
    assert_eq!(handshake(&mut stream, 1, "OAUTHBEARER").await.error_code, 0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs();
    let part = |json: String| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(json);
    let token = format!(
        "{}.{}.",
        part(r#"{"alg":"none"}"#.to_string()),
        part(format!(r#"{{"sub":"alice","exp":{}}}"#, now + 60))
    );
    let answer: SaslAuthenticateResponse = call(
        &mut stream,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default().with_auth_bytes(Bytes::from(format!(
            "n,,\u{1}auth=Bearer {token}\u{1}\u{1}"
        ))),
    )
    .await;
    assert_eq!(answer.error_code, 0, "{:?}", answer.error_message);
    assert!(
        (1..=60_000).contains(&answer.session_lifetime_ms),
        "the token's minute, not the hour of connections.max.reauth.ms: {}",
        answer.session_lifetime_ms
    );
}

mod tls {
    use super::*;
    use rustls_pki_types::pem::PemObject;
    use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
    use tokio_rustls::rustls::{ClientConfig, RootCertStore};
    use tokio_rustls::TlsConnector;

    fn client(ca_pem: &str, identity: Option<(&str, &str)>) -> TlsConnector {
        let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
        let mut roots = RootCertStore::empty();
        for certificate in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
            roots.add(certificate.unwrap()).unwrap();
        }
        let builder = ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        let config = match identity {
            None => builder.with_no_client_auth(),
            Some((key, cert)) => {
                let chain = CertificateDer::pem_slice_iter(cert.as_bytes())
                    .map(|c| c.unwrap())
                    .collect();
                let key = PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap();
                builder.with_client_auth_cert(chain, key).unwrap()
            }
        };
        TlsConnector::from(Arc::new(config))
    }

    async fn connect(
        connector: &TlsConnector,
        address: SocketAddr,
    ) -> std::io::Result<tokio_rustls::client::TlsStream<TcpStream>> {
        let tcp = TcpStream::connect(address).await?;
        let name = ServerName::try_from("localhost").unwrap();
        let mut stream = connector.connect(name, tcp).await?;
        // A TLS 1.3 server checks the client's certificate after the client thinks the
        // handshake is done: a refusal shows on the first exchange.
        let _: ApiVersionsResponse = call(
            &mut stream,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .await;
        Ok(stream)
    }

    #[tokio::test]
    async fn produce_and_fetch_over_tls_with_metadata_naming_the_tls_listener() {
        let certificates = Certificates::new();
        let (key, cert) = certificates.issue("localhost", true);
        let dir = tempfile::tempdir().unwrap();
        let keystore = dir.path().join("server.pem");
        std::fs::write(&keystore, format!("{key}{cert}")).unwrap();
        let keystore = keystore.to_str().unwrap().to_string();
        let cluster = start(&[
            ("listeners", "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", &keystore),
        ])
        .await;
        let ssl = cluster.address("SSL");
        let mut stream = connect(&client(&certificates.ca_pem, None), ssl)
            .await
            .unwrap();
        let response = metadata(&mut stream, "secure").await;
        assert_eq!(broker_ports(&response), vec![ssl.port() as i32]);
        let mut produced = None;
        for _ in 0..50 {
            let answer: ProduceResponse = call(
                &mut stream,
                ApiKey::Produce,
                9,
                &produce_request("secure", 0, -1, &[7u8; 300_000]),
            )
            .await;
            let code = answer.responses[0].partition_responses[0].error_code;
            if code == 0 {
                produced = Some(());
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        produced.expect("the topic is created and takes the record");
        // 300 KB of record: more than one 256 KiB chunk through rustls.
        let answer: FetchResponse = call(
            &mut stream,
            ApiKey::Fetch,
            12,
            &fetch_request("secure", 0, 100),
        )
        .await;
        let partition = &answer.responses[0].partitions[0];
        assert_eq!(partition.error_code, 0);
        let records = partition.records.as_ref().expect("records");
        assert!(records.len() > 300_000, "{}", records.len());
        assert!(records.windows(1000).any(|w| w.iter().all(|b| *b == 7)));

        // A plaintext client on the TLS port gets no Kafka answer.
        let mut plain = TcpStream::connect(ssl).await.unwrap();
        send(
            &mut plain,
            ApiKey::ApiVersions,
            3,
            &ApiVersionsRequest::default(),
        )
        .await;
        assert!(receive(&mut plain, ApiKey::ApiVersions, 3).await.is_none());
    }

    #[tokio::test]
    async fn required_client_certificates_must_come_from_the_trusted_ca() {
        let certificates = Certificates::new();
        let (key, cert) = certificates.issue("localhost", true);
        let dir = tempfile::tempdir().unwrap();
        let keystore = dir.path().join("server.pem");
        std::fs::write(&keystore, format!("{key}{cert}")).unwrap();
        let truststore = dir.path().join("ca.pem");
        std::fs::write(&truststore, &certificates.ca_pem).unwrap();
        let cluster = start(&[
            ("listeners", "SSL://127.0.0.1:0"),
            ("ssl.keystore.type", "PEM"),
            ("ssl.keystore.location", keystore.to_str().unwrap()),
            ("ssl.truststore.type", "PEM"),
            ("ssl.truststore.location", truststore.to_str().unwrap()),
            ("ssl.client.auth", "required"),
            (
                "ssl.principal.mapping.rules",
                "RULE:^.*CN=([^,]*).*$/$1/L,DEFAULT",
            ),
        ])
        .await;
        let ssl = cluster.address("SSL");
        let (client_key, client_cert) = certificates.issue("Alice", false);
        let mut stream = connect(
            &client(&certificates.ca_pem, Some((&client_key, &client_cert))),
            ssl,
        )
        .await
        .unwrap();
        assert_eq!(metadata(&mut stream, "t").await.brokers.len(), 1);

        // Without a certificate: no connection.
        let refused = tokio::time::timeout(
            HANG_GUARD,
            connect_expecting_refusal(&client(&certificates.ca_pem, None), ssl),
        )
        .await
        .expect("no hang");
        assert!(refused, "a client without a certificate is refused");

        // With a certificate from another CA: no connection either.
        let stranger = Certificates::new();
        let (other_key, other_cert) = stranger.issue("Mallory", false);
        let refused = tokio::time::timeout(
            HANG_GUARD,
            connect_expecting_refusal(
                &client(&certificates.ca_pem, Some((&other_key, &other_cert))),
                ssl,
            ),
        )
        .await
        .expect("no hang");
        assert!(refused, "a certificate from an untrusted CA is refused");
    }

    /// True if the handshake or the first exchange fails.
    async fn connect_expecting_refusal(connector: &TlsConnector, address: SocketAddr) -> bool {
        let tcp = TcpStream::connect(address).await.unwrap();
        let name = ServerName::try_from("localhost").unwrap();
        let Ok(mut stream) = connector.connect(name, tcp).await else {
            return true;
        };
        let request = encode_request(ApiKey::ApiVersions, 3, 7, &ApiVersionsRequest::default());
        if stream.write_all(&request).await.is_err() {
            return true;
        }
        receive(&mut stream, ApiKey::ApiVersions, 3).await.is_none()
    }
}

mod scram {
    use super::*;
    use kafka_protocol::messages::alter_user_scram_credentials_request::{
        ScramCredentialDeletion, ScramCredentialUpsertion,
    };
    use kafka_protocol::messages::describe_user_scram_credentials_request::UserName;
    use kafka_protocol::messages::{
        AlterUserScramCredentialsRequest, AlterUserScramCredentialsResponse,
        DescribeUserScramCredentialsRequest, DescribeUserScramCredentialsResponse,
    };

    const SHA_256: i8 = 1;
    const SHA_512: i8 = 2;

    fn upsert(user: &str, mechanism: i8, iterations: i32) -> ScramCredentialUpsertion {
        ScramCredentialUpsertion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(mechanism)
            .with_iterations(iterations)
            .with_salt(Bytes::from_static(b"salt"))
            .with_salted_password(Bytes::from_static(&[1u8; 32]))
    }

    fn delete(user: &str, mechanism: i8) -> ScramCredentialDeletion {
        ScramCredentialDeletion::default()
            .with_name(StrBytes::from_string(user.into()))
            .with_mechanism(mechanism)
    }

    /// (user, error code, error message) of one result.
    fn outcome(
        user: &StrBytes,
        code: i16,
        message: &Option<StrBytes>,
    ) -> (String, i16, Option<String>) {
        (
            user.to_string(),
            code,
            message.as_ref().map(|m| m.to_string()),
        )
    }

    async fn alter(
        stream: &mut TcpStream,
        deletions: Vec<ScramCredentialDeletion>,
        upsertions: Vec<ScramCredentialUpsertion>,
    ) -> Vec<(String, i16, Option<String>)> {
        let response: AlterUserScramCredentialsResponse = call(
            stream,
            ApiKey::AlterUserScramCredentials,
            0,
            &AlterUserScramCredentialsRequest::default()
                .with_deletions(deletions)
                .with_upsertions(upsertions),
        )
        .await;
        let mut results: Vec<_> = response
            .results
            .iter()
            .map(|r| outcome(&r.user, r.error_code, &r.error_message))
            .collect();
        results.sort();
        results
    }

    async fn describe(
        stream: &mut TcpStream,
        users: Option<&[&str]>,
    ) -> DescribeUserScramCredentialsResponse {
        call(
            stream,
            ApiKey::DescribeUserScramCredentials,
            0,
            &DescribeUserScramCredentialsRequest::default().with_users(users.map(|users| {
                users
                    .iter()
                    .map(|u| UserName::default().with_name(StrBytes::from_string(u.to_string())))
                    .collect()
            })),
        )
        .await
    }

    #[tokio::test]
    async fn credentials_are_altered_and_described_with_kafkas_checks() {
        let cluster = start(&sasl_properties()).await;
        let mut stream = TcpStream::connect(cluster.address("PLAINTEXT"))
            .await
            .unwrap();
        let ok = |user: &str| (user.to_string(), 0i16, None);
        let refused = |user: &str, code: i16, message: &str| {
            (user.to_string(), code, Some(message.to_string()))
        };
        assert_eq!(
            alter(
                &mut stream,
                vec![],
                vec![
                    upsert("carol", SHA_256, 8192),
                    upsert("dave", SHA_512, 4096)
                ]
            )
            .await,
            vec![ok("carol"), ok("dave")]
        );
        assert_eq!(
            alter(
                &mut stream,
                vec![delete("nobody", SHA_256), delete("", SHA_256)],
                vec![
                    upsert("erin", SHA_256, 4095),
                    upsert("frank", SHA_256, 16385),
                    upsert("gina", 0, 8192),
                    upsert("carol", SHA_512, 8192),
                    upsert("carol", SHA_256, 8192),
                ]
            )
            .await,
            vec![
                refused("", 93, "Username must not be empty"),
                refused(
                    "carol",
                    92,
                    "A user credential cannot be altered twice in the same request"
                ),
                refused("erin", 93, "Too few iterations"),
                refused("frank", 93, "Too many iterations"),
                refused("gina", 33, "Unknown SCRAM mechanism"),
                refused(
                    "nobody",
                    91,
                    "Attempt to delete a user credential that does not exist"
                ),
            ]
        );
        let all = describe(&mut stream, None).await;
        let listed: Vec<(String, Vec<(i8, i32)>)> = all
            .results
            .iter()
            .map(|r| {
                (
                    r.user.to_string(),
                    r.credential_infos
                        .iter()
                        .map(|c| (c.mechanism, c.iterations))
                        .collect(),
                )
            })
            .collect();
        assert_eq!(
            listed,
            vec![
                ("carol".to_string(), vec![(SHA_256, 8192)]),
                ("dave".to_string(), vec![(SHA_512, 4096)])
            ]
        );
        let named = describe(&mut stream, Some(&["dave", "zed", "dave"])).await;
        let answers: Vec<(String, i16, Option<String>)> = named
            .results
            .iter()
            .map(|r| outcome(&r.user, r.error_code, &r.error_message))
            .collect();
        assert_eq!(
            answers,
            vec![
                refused(
                    "dave",
                    92,
                    "Cannot describe SCRAM credentials for the same user twice in a single request: dave"
                ),
                refused("zed", 91, "Attempt to describe a user credential that does not exist: zed"),
            ]
        );
        // Deleting the last mechanism forgets the user.
        assert_eq!(
            alter(&mut stream, vec![delete("dave", SHA_512)], vec![]).await,
            vec![ok("dave")]
        );
        let all = describe(&mut stream, None).await;
        assert_eq!(all.results.len(), 1);
        assert_eq!(all.results[0].user.as_str(), "carol");
    }
}
