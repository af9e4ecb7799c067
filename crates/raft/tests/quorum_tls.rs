//! The quorum over mutual TLS: members (certificates their trust store signs) form it and
//! are answered; a process with another CA's certificate, or none, is not.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

mod common;

use common::{free_port, start_node};
use strand_raft::client::QuorumClient;
use strand_raft::network::QuorumTls;
use strand_raft::node::QuorumNode;
use strand_raft::rpc::{ControllerRequest, ControllerResponse};
use strand_security::tls::{ReloadingClientConfig, ReloadingServerConfig, TlsSettings};

/// The ssl.* settings of a controller listener: a certificate for 127.0.0.1 with the
/// subject CN=`name` that `ca` signed, trusting `trusted` (PEM).
fn named_settings(
    name: &str,
    ca_key: &rcgen::KeyPair,
    ca: &rcgen::Certificate,
    trusted: &str,
) -> TlsSettings {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.distinguished_name = rcgen::DistinguishedName::new();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, name);
    let cert = params.signed_by(&key, ca, ca_key).unwrap();
    let settings: HashMap<&str, String> = HashMap::from([
        ("ssl.keystore.key", key.serialize_pem()),
        ("ssl.keystore.certificate.chain", cert.pem()),
        ("ssl.truststore.certificates", trusted.to_string()),
        ("ssl.client.auth", "required".to_string()),
    ]);
    TlsSettings::from_config(&|name| settings.get(name).cloned()).unwrap()
}

fn signed_settings(ca_key: &rcgen::KeyPair, ca: &rcgen::Certificate, trusted: &str) -> TlsSettings {
    named_settings("node", ca_key, ca, trusted)
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
        members: None,
    }
}

/// As with ACLs on: only the nodes' principal is a member.
fn members_only(settings: TlsSettings) -> QuorumTls {
    QuorumTls {
        members: Some(Arc::new(["User:CN=node".to_string()].into())),
        ..quorum_tls(settings)
    }
}

async fn start_voters(
    root: &std::path::Path,
    tls: impl Fn() -> QuorumTls,
) -> (BTreeMap<u64, String>, Vec<QuorumNode>) {
    let voters: BTreeMap<u64, String> = (1..=3)
        .map(|id| (id, format!("127.0.0.1:{}", free_port())))
        .collect();
    let mut nodes = Vec::new();
    for id in 1..=3 {
        nodes.push(start_node(id, &voters, root, Some(tls())).await);
    }
    (voters, nodes)
}

async fn describe(client: &QuorumClient, deadline: Duration) -> anyhow::Result<ControllerResponse> {
    client
        .request(ControllerRequest::DescribeQuorum, deadline)
        .await
}

async fn assert_answered(client: &QuorumClient, deadline: Duration) {
    let answer = describe(client, deadline).await;
    assert!(
        matches!(answer, Ok(ControllerResponse::Quorum(_))),
        "{answer:?}"
    );
}

/// Three voters with `tls()`, once a member with the same kind of TLS is answered.
async fn formed_quorum(
    root: &std::path::Path,
    tls: impl Fn() -> QuorumTls,
) -> (BTreeMap<u64, String>, Vec<QuorumNode>) {
    let (voters, nodes) = start_voters(root, &tls).await;
    let member = QuorumClient::new(voters.clone(), Some(tls()));
    assert_answered(&member, Duration::from_secs(20)).await;
    (voters, nodes)
}

async fn shutdown(nodes: Vec<QuorumNode>) {
    for node in nodes {
        node.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_members_certificates_reach_the_quorum() {
    let root = tempfile::tempdir().unwrap();
    let (ca_key, ca) = authority();
    let (voters, nodes) =
        start_voters(root.path(), || quorum_tls(member_settings(&ca_key, &ca))).await;
    // A member (another certificate of the same CA) is answered: the voters elected a
    // leader over TLS among themselves.
    let member = QuorumClient::new(
        voters.clone(),
        Some(quorum_tls(member_settings(&ca_key, &ca))),
    );
    assert_answered(&member, Duration::from_secs(20)).await;
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
    assert_answered(&member, Duration::from_secs(20)).await;
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_acls_on_only_super_users_certificates_are_members() {
    let root = tempfile::tempdir().unwrap();
    let (ca_key, ca) = authority();
    let (voters, nodes) =
        formed_quorum(root.path(), || members_only(member_settings(&ca_key, &ca))).await;
    // A client certificate of the same CA (User:CN=alice) is not a member.
    let alice = named_settings("alice", &ca_key, &ca, &ca.pem());
    let refused = describe(
        &QuorumClient::new(voters.clone(), Some(quorum_tls(alice))),
        Duration::from_secs(3),
    )
    .await;
    assert!(
        refused.is_err(),
        "a client certificate was answered: {refused:?}"
    );
    shutdown(nodes).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_handshakes_do_not_lock_members_out() {
    let root = tempfile::tempdir().unwrap();
    let (ca_key, ca) = authority();
    let (voters, nodes) =
        formed_quorum(root.path(), || quorum_tls(member_settings(&ca_key, &ca))).await;
    // More connections than a quorum port admits, none of them starting its handshake.
    let mut silent = Vec::new();
    for address in voters.values() {
        for _ in 0..1_100 / voters.len() + 1 {
            silent.push(tokio::net::TcpStream::connect(address).await.unwrap());
        }
    }
    // Long enough for them to count as idle: a member's connection evicts the idlest.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    let fresh = QuorumClient::new(
        voters.clone(),
        Some(quorum_tls(member_settings(&ca_key, &ca))),
    );
    assert_answered(&fresh, Duration::from_secs(10)).await;
    drop(silent);
    shutdown(nodes).await;
}
