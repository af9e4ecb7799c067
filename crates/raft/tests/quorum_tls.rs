//! The quorum over mutual TLS: members (certificates their trust store signs) form it and
//! are answered; a process with another CA's certificate, or none, is not.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

use strand_raft::client::QuorumClient;
use strand_raft::controller_service::ServiceConfig;
use strand_raft::network::QuorumTls;
use strand_raft::node::{QuorumConfig, QuorumNode};
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use strand_security::tls::{ReloadingClientConfig, ReloadingServerConfig, TlsSettings};

/// The ssl.* settings of a controller listener: a certificate for 127.0.0.1 that `ca`
/// signed, trusting `trusted` (PEM).
fn signed_settings(ca_key: &rcgen::KeyPair, ca: &rcgen::Certificate, trusted: &str) -> TlsSettings {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()])
        .unwrap()
        .signed_by(&key, ca, ca_key)
        .unwrap();
    let settings: HashMap<&str, String> = HashMap::from([
        ("ssl.keystore.key", key.serialize_pem()),
        ("ssl.keystore.certificate.chain", cert.pem()),
        ("ssl.truststore.certificates", trusted.to_string()),
        ("ssl.client.auth", "required".to_string()),
    ]);
    TlsSettings::from_config(&|name| settings.get(name).cloned()).unwrap()
}

fn member_settings(ca_key: &rcgen::KeyPair, ca: &rcgen::Certificate) -> TlsSettings {
    signed_settings(ca_key, ca, &ca.pem())
}

fn authority() -> (rcgen::KeyPair, rcgen::Certificate) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    (key, ca)
}

fn quorum_tls(settings: TlsSettings) -> QuorumTls {
    QuorumTls {
        server: Arc::new(ReloadingServerConfig::new(settings.clone()).unwrap()),
        client: Arc::new(ReloadingClientConfig::client(settings).unwrap()),
    }
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

async fn describe(client: &QuorumClient, deadline: Duration) -> anyhow::Result<ControllerResponse> {
    client
        .request(ControllerRequest::DescribeQuorum, deadline)
        .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_members_certificates_reach_the_quorum() {
    let root = tempfile::tempdir().unwrap();
    let (ca_key, ca) = authority();
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(
            QuorumNode::start(QuorumConfig {
                node_id: id,
                voters: voters.clone(),
                listen: voters[&id].parse().unwrap(),
                dir: root.path().join(format!("node-{id}")),
                service: ServiceConfig {
                    session_timeout: Duration::from_millis(1500),
                    preferred_leader_check: None,
                },
                heartbeat_interval: Duration::from_millis(50),
                tls: Some(quorum_tls(member_settings(&ca_key, &ca))),
            })
            .await
            .unwrap(),
        );
    }
    // A member (another certificate of the same CA) is answered: the voters elected a
    // leader over TLS among themselves.
    let member = QuorumClient::new(
        voters.clone(),
        Some(quorum_tls(member_settings(&ca_key, &ca))),
    );
    let answer = describe(&member, Duration::from_secs(20)).await;
    assert!(
        matches!(answer, Ok(ControllerResponse::Quorum(_))),
        "{answer:?}"
    );
    // A stranger whose certificate another CA signed (trusting the quorum's CA, so the
    // refusal is the quorum's) is not answered; nor is a client without TLS.
    let (other_key, other_ca) = authority();
    let both = format!("{}{}", ca.pem(), other_ca.pem());
    let stranger_settings = signed_settings(&other_key, &other_ca, &both);
    let stranger = QuorumClient::new(voters.clone(), Some(quorum_tls(stranger_settings)));
    let refused = describe(&stranger, Duration::from_secs(3)).await;
    assert!(refused.is_err(), "a stranger was answered: {refused:?}");
    let plain = QuorumClient::new(voters.clone(), None);
    let refused = describe(&plain, Duration::from_secs(3)).await;
    assert!(
        refused.is_err(),
        "a client without TLS was answered: {refused:?}"
    );
    // The member is still answered after the strangers tried.
    let answer = describe(&member, Duration::from_secs(20)).await;
    assert!(
        matches!(answer, Ok(ControllerResponse::Quorum(_))),
        "{answer:?}"
    );
    for node in nodes {
        node.shutdown().await;
    }
}
