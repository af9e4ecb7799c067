//! `strand serve --listen HOST:0`: the OS picks the port, and the broker advertises that
//! port (in its start-up line and in Metadata), as Kafka does with `listeners=...:0`.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};

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
