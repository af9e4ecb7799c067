//! The client port: with `strand serve --listen HOST:0` the OS picks it and the broker
//! advertises it (start-up line and Metadata), as Kafka does with `listeners=...:0`; and
//! it is reserved from the start but refuses connections until the broker is ready.

use std::io::{BufRead, BufReader};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use kafka_protocol::messages::{ApiKey, MetadataRequest, MetadataResponse};
use strand_protocol::client::Connection;

/// Kills the broker when the test ends, passed or not.
struct Broker(Child);

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// "... listening on 127.0.0.1:P (advertised 127.0.0.1:Q), ..." -> (P, Q)
fn ports(line: &str) -> Option<(u16, u16)> {
    let port_after = |marker: &str| -> Option<u16> {
        let rest = &line[line.find(marker)? + marker.len()..];
        let address: String = rest
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
            .collect();
        address.rsplit(':').next()?.parse().ok()
    };
    Some((port_after("listening on ")?, port_after("(advertised ")?))
}

#[tokio::test]
async fn port_zero_advertises_the_bound_port() {
    let data = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
        .arg(data.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let _broker = Broker(child);
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find(|line| line.contains("listening on"))
        .expect("the broker printed its address");
    let (bound, advertised) = ports(&line).unwrap_or_else(|| panic!("unparsed: {line}"));
    assert_ne!(bound, 0, "{line}");
    assert_eq!(advertised, bound, "{line}");

    let connection = Connection::connect(&format!("127.0.0.1:{bound}"), 1)
        .await
        .unwrap();
    let response: MetadataResponse = connection
        .call(ApiKey::Metadata, 12, &MetadataRequest::default())
        .await
        .unwrap();
    let ports: Vec<i32> = response.brokers.iter().map(|broker| broker.port).collect();
    assert_eq!(ports, vec![i32::from(bound)]);
}

/// A broker-only node whose metadata quorum never answers is never unfenced, so never
/// ready: its port must be taken (bound) and yet refuse clients, rather than accept
/// connections that would hang (what made a benchmark create a topic on 2 of 3 nodes).
#[tokio::test]
async fn a_broker_that_is_not_ready_refuses_clients_on_its_reserved_port() {
    let free_port = || {
        TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    };
    let (port, quorum_port, absent_controller_port) = (free_port(), free_port(), free_port());
    let data = tempfile::tempdir().unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args(["serve", "--node-id", "2", "--listen"])
        .arg(format!("127.0.0.1:{port}"))
        .arg("--quorum-listen")
        .arg(format!("127.0.0.1:{quorum_port}"))
        .arg("--controllers")
        .arg(format!("1@127.0.0.1:{absent_controller_port}"))
        .arg("--data-dir")
        .arg(data.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut broker = Broker(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    // Without SO_REUSEADDR a bind conflicts with the broker's bound (not listening)
    // socket; std's bind sets it and would not.
    let port_free = || {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(([127, 0, 0, 1], port).into()).is_ok()
    };
    while port_free() {
        assert!(
            broker.0.try_wait().unwrap().is_none(),
            "the broker exited before binding its port"
        );
        assert!(Instant::now() < deadline, "the broker never bound its port");
        std::thread::sleep(Duration::from_millis(50));
    }
    let refused = TcpStream::connect(("127.0.0.1", port)).unwrap_err();
    assert_eq!(refused.kind(), std::io::ErrorKind::ConnectionRefused);
}
