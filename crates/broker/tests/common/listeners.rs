//! A single broker configured from server.properties entries, serving each of its
//! listeners on its own port (the security tests' broker), and SASL PLAIN logins.

use std::net::SocketAddr;
use std::path::Path;

use bytes::Bytes;
use kafka_protocol::messages::{
    ApiKey, SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest,
    SaslHandshakeResponse,
};
use kafka_protocol::protocol::StrBytes;
use strand_broker::broker_configs::{apply_properties, Properties};
use strand_broker::{serve_listeners, Broker, BrokerConfig};
use tokio::net::TcpStream;

pub struct ListenerBroker {
    addresses: Vec<(String, SocketAddr)>,
    _dir: Option<tempfile::TempDir>,
    handle: strand_broker::ServerHandle,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl ListenerBroker {
    pub fn address(&self, name: &str) -> SocketAddr {
        self.addresses
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, a)| *a)
            .unwrap()
    }

    /// Stops serving and waits until the broker has let go of its data directory (which
    /// stays, for a restart on it).
    pub async fn stop(mut self) {
        self.handle.shutdown();
        if let Some(served) = self.served.take() {
            tokio::time::timeout(super::HANG_GUARD, served)
                .await
                .expect("the broker stops")
                .unwrap();
        }
    }
}

impl Drop for ListenerBroker {
    fn drop(&mut self) {
        self.handle.shutdown();
    }
}

/// A broker in a fresh temporary directory.
pub async fn start(properties: &[(&str, &str)]) -> ListenerBroker {
    let dir = tempfile::tempdir().unwrap();
    let mut broker = start_in(dir.path(), properties).await;
    broker._dir = Some(dir);
    broker
}

/// A broker on the data directory `dir` (which outlives it).
pub async fn start_in(dir: &Path, properties: &[(&str, &str)]) -> ListenerBroker {
    let mut config = BrokerConfig {
        data_dir: dir.to_path_buf(),
        group_initial_rebalance_delay_ms: 0,
        ..BrokerConfig::default()
    };
    let props: Properties = properties
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let unknown = apply_properties(&mut config, &props).unwrap();
    assert!(unknown.is_empty(), "{unknown:?}");
    let bound = strand_broker::server::bind_listeners(&mut config).unwrap();
    let names: Vec<String> = bound.iter().map(|(l, _)| l.spec.name.clone()).collect();
    let broker = Broker::open(config).unwrap();
    let (addresses, handle, server) = serve_listeners(broker, bound).unwrap();
    let served = tokio::spawn(async move {
        let _ = server.await;
    });
    ListenerBroker {
        addresses: names.into_iter().zip(addresses).collect(),
        _dir: None,
        handle,
        served: Some(served),
    }
}

/// A connection to `address` logged in with SASL PLAIN (handshake v1, authenticate v2).
pub async fn plain_login(address: SocketAddr, user: &str, password: &str) -> TcpStream {
    let mut stream = TcpStream::connect(address).await.unwrap();
    let handshake: SaslHandshakeResponse = super::call(
        &mut stream,
        ApiKey::SaslHandshake,
        1,
        &SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str("PLAIN")),
    )
    .await;
    assert_eq!(handshake.error_code, 0);
    let authenticated: SaslAuthenticateResponse = super::call(
        &mut stream,
        ApiKey::SaslAuthenticate,
        2,
        &SaslAuthenticateRequest::default()
            .with_auth_bytes(Bytes::from(format!("\0{user}\0{password}"))),
    )
    .await;
    assert_eq!(
        authenticated.error_code, 0,
        "{:?}",
        authenticated.error_message
    );
    stream
}
