//! The web console's JSON API (docs/CONSOLE.md) on a real `strand serve`: a topic created,
//! listed, described and browsed, its config altered and the topic deleted; what may not
//! change anything is refused (a body that is not JSON, any change in read-only mode),
//! and errors carry Kafka's error names with a fitting HTTP status. The page itself is
//! driven in a browser by interop/python/console_test.py.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// Kills the broker when the test ends, passed or not.
struct Broker {
    child: Child,
    kafka: String,
    http: String,
    _data: tempfile::TempDir,
}

impl Drop for Broker {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn address_after(line: &str, marker: &str) -> Option<String> {
    let rest = &line[line.find(marker)? + marker.len()..];
    Some(
        rest.chars()
            .take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':')
            .collect(),
    )
}

fn start(extra: &[&str]) -> Broker {
    let data = tempfile::tempdir().unwrap();
    let data_dir = data.path().to_path_buf();
    start_with(
        &[extra, &["--data-dir", data_dir.to_str().unwrap()]].concat(),
        data,
    )
}

fn start_with(extra: &[&str], data: tempfile::TempDir) -> Broker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args([
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--http-listen",
            "127.0.0.1:0",
        ])
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (mut kafka, mut http) = (None, None);
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        kafka = kafka.or_else(|| address_after(&line, "listening on "));
        http = http.or_else(|| address_after(&line, "serving HTTP on "));
        if http.is_some() {
            assert!(line.contains("console at /"), "{line}");
            break;
        }
    }
    Broker {
        child,
        kafka: kafka.expect("the broker printed its Kafka address"),
        http: http.expect("the broker printed its HTTP address"),
        _data: data,
    }
}

/// One HTTP/1.1 request: (status, JSON body or Null).
fn call(http: &str, method: &str, path: &str, body: Option<(&str, &str)>) -> (u16, Value) {
    let (content_type, body) = body.unwrap_or(("application/json", ""));
    request(
        http,
        method,
        path,
        &format!("Content-Type: {content_type}\r\n"),
        body,
    )
}

/// A JSON request signed in with `authorization`.
fn call_as(http: &str, method: &str, path: &str, authorization: &str, body: &str) -> (u16, Value) {
    let headers = format!("Content-Type: application/json\r\nAuthorization: {authorization}\r\n");
    request(http, method, path, &headers, body)
}

fn request(http: &str, method: &str, path: &str, headers: &str, body: &str) -> (u16, Value) {
    let mut stream = TcpStream::connect(http).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n{headers}Content-Length: {}\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let status = answer[9..12].parse().unwrap();
    let (_, body) = answer.split_once("\r\n\r\n").unwrap();
    (status, serde_json::from_str(body).unwrap_or(Value::Null))
}

/// The headers of a GET answer, names lower-cased.
fn head(http: &str, path: &str) -> String {
    let mut stream = TcpStream::connect(http).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {http}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut answer = String::new();
    stream.read_to_string(&mut answer).unwrap();
    let (headers, _) = answer.split_once("\r\n\r\n").unwrap();
    headers
        .lines()
        .map(|line| match line.split_once(':') {
            Some((name, value)) => format!("{}:{value}", name.to_lowercase()),
            None => line.to_string(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn get(http: &str, path: &str) -> (u16, Value) {
    call(http, "GET", path, None)
}

/// GETs `path` until `done` holds for its answer (the sampler fills in figures every 5 s).
fn get_until(http: &str, path: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (status, value) = get(http, path);
        if status == 200 && done(&value) {
            return value;
        }
        assert!(Instant::now() < deadline, "{path}: {status} {value}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

#[test]
fn topics_are_created_browsed_altered_and_deleted_through_the_api() {
    let broker = start(&[]);
    let http = broker.http.as_str();
    // The console reaches its broker once the broker serves clients.
    let overview = get_until(http, "/api/overview", |v| v["brokers"].is_array());
    assert_eq!(overview["read_only"], json!(false));
    assert_eq!(
        overview["brokers"][0]["port"].to_string(),
        broker.kafka.rsplit(':').next().unwrap()
    );

    let (status, _) = call(
        http,
        "POST",
        "/api/topics",
        Some(("text/plain", r#"{"name":"web","partitions":2}"#)),
    );
    assert_eq!(status, 415, "a change not sent as JSON is refused");
    let huge = json!({"name": "web", "partitions": 1u64 << 33}).to_string();
    let (status, answer) = call(
        http,
        "POST",
        "/api/topics",
        Some(("application/json", &huge)),
    );
    assert_eq!(
        status, 400,
        "partitions beyond an i32 are refused, not wrapped: {answer}"
    );
    let created = json!({"name": "web", "partitions": 2, "replication_factor": 1,
                         "configs": {"retention.ms": 3600000}});
    let (status, answer) = call(
        http,
        "POST",
        "/api/topics",
        Some(("application/json", &created.to_string())),
    );
    assert_eq!(
        (status, &answer["partitions"]),
        (201, &json!(2)),
        "{answer}"
    );
    let (status, answer) = call(
        http,
        "POST",
        "/api/topics",
        Some(("application/json", &created.to_string())),
    );
    assert_eq!(status, 409, "{answer}");
    assert!(answer["error"]
        .as_str()
        .unwrap()
        .contains("TOPIC_ALREADY_EXISTS"));

    let (_, listed) = get(http, "/api/topics?filter=WE");
    assert_eq!(listed["total"], json!(1), "{listed}");
    assert_eq!(listed["topics"][0]["name"], json!("web"));
    let (_, listed) = get(http, "/api/topics?offset=1");
    assert_eq!(listed["topics"], json!([]), "paged past the only topic");

    // Records through the Kafka protocol, read back by the browser.
    let produced = Command::new(env!("CARGO_BIN_EXE_strand"))
        .args([
            "produce",
            "web",
            "-p",
            "1",
            "-H",
            "origin=test",
            "-b",
            &broker.kafka,
        ])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .and_then(|mut producer| {
            let lines: String = (0..30).map(|i| format!("{{\"n\":{i}}}\n")).collect();
            producer.stdin.take().unwrap().write_all(lines.as_bytes())?;
            producer.wait()
        })
        .unwrap();
    assert!(produced.success());
    let (_, newest) = get(http, "/api/topics/web/messages?partition=1&limit=5");
    assert_eq!(newest["high_watermark"], json!(30), "{newest}");
    let offsets: Vec<i64> = newest["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["offset"].as_i64().unwrap())
        .collect();
    assert_eq!(offsets, vec![25, 26, 27, 28, 29], "the newest five");
    let (_, from) = get(
        http,
        "/api/topics/web/messages?partition=1&offset=3&limit=2",
    );
    let first = &from["messages"][0];
    assert_eq!(first["offset"], json!(3));
    assert_eq!(
        first["value"],
        json!("eyJuIjozfQ=="),
        "{{\"n\":3}} as base64"
    );
    assert_eq!(
        first["headers"],
        json!([{"key": "origin", "value": "dGVzdA=="}])
    );
    let (status, answer) = get(http, "/api/topics/web/messages?partition=7");
    assert_eq!(status, 404, "{answer}");
    let (status, _) = get(http, "/api/topics/web/messages?offset=soon");
    assert_eq!(status, 400);

    let alter = json!({"set": {"retention.ms": "7200000"}, "delete": []}).to_string();
    let (status, answer) = call(
        http,
        "POST",
        "/api/topics/web/configs",
        Some(("application/json", &alter)),
    );
    assert_eq!(status, 200, "{answer}");
    let (_, described) = get(http, "/api/topics/web");
    let retention = described["configs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "retention.ms")
        .unwrap();
    assert_eq!(
        (&retention["value"], &retention["source"]),
        (&json!("7200000"), &json!("DYNAMIC_TOPIC_CONFIG"))
    );
    assert_eq!(described["partitions"][1]["high_watermark"], json!(30));

    // The sampler sees the topic's size and rate.
    get_until(http, "/api/topics", |v| {
        v["topics"][0]["bytes"].as_i64().unwrap_or(0) > 0
            && v["topics"][0]["messages_per_sec"].is_number()
    });

    let (status, _) = call(
        http,
        "DELETE",
        "/api/topics/web",
        Some(("application/json", "")),
    );
    assert_eq!(status, 200);
    let (status, answer) = get(http, "/api/topics/web");
    assert_eq!(status, 404, "{answer}");
    let (status, _) = get(http, "/api/nothing");
    assert_eq!(status, 404);
}

#[test]
fn a_read_only_console_changes_nothing() {
    let broker = start(&["--console", "read-only"]);
    let http = broker.http.as_str();
    let overview = get_until(http, "/api/overview", |v| v["brokers"].is_array());
    assert_eq!(overview["read_only"], json!(true));
    let body = json!({"name": "refused", "partitions": 1}).to_string();
    let (status, answer) = call(
        http,
        "POST",
        "/api/topics",
        Some(("application/json", &body)),
    );
    assert_eq!(status, 403, "{answer}");
    let (_, listed) = get(http, "/api/topics");
    assert_eq!(listed["total"], json!(0));
    let (status, page) = get(http, "/");
    assert_eq!(
        (status, page),
        (200, Value::Null),
        "the page (HTML) is served"
    );
    let headers = head(http, "/");
    assert!(
        headers.contains("x-frame-options: DENY") && headers.contains("frame-ancestors 'none'"),
        "the page may not be framed by another site: {headers}"
    );
}

/// A broker whose only listener is SASL_PLAINTEXT with PLAIN users and ACLs: the console
/// asks people to sign in with their Kafka password, refuses a wrong one, and acts as
/// whoever signed in (a super user creates a topic; a user without ACLs sees no topics
/// and may not create one, as Kafka would answer them).
#[test]
fn people_sign_in_with_their_kafka_password_and_act_as_themselves() {
    let data = tempfile::tempdir().unwrap();
    let controller = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let properties = data.path().join("server.properties");
    std::fs::write(
        &properties,
        [
            "process.roles=broker,controller".to_string(),
            "node.id=1".into(),
            format!("controller.quorum.voters=1@127.0.0.1:{controller}"),
            format!("listeners=SASL_PLAINTEXT://127.0.0.1:0,CONTROLLER://127.0.0.1:{controller}"),
            "controller.listener.names=CONTROLLER".into(),
            "inter.broker.listener.name=SASL_PLAINTEXT".into(),
            "listener.security.protocol.map=CONTROLLER:PLAINTEXT,SASL_PLAINTEXT:SASL_PLAINTEXT".into(),
            "sasl.enabled.mechanisms=PLAIN".into(),
            "sasl.mechanism.inter.broker.protocol=PLAIN".into(),
            "listener.name.sasl_plaintext.plain.sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required username=\"admin\" password=\"admin-secret\" user_admin=\"admin-secret\" user_alice=\"alice-secret\" user_bob=\"bob-secret\";".into(),
            "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer".into(),
            "super.users=User:admin;User:alice".into(),
            "offsets.topic.replication.factor=1".into(),
            format!("log.dirs={}", data.path().join("logs").display()),
        ]
        .join("\n"),
    )
    .unwrap();
    let mut broker = start_with(&["--config", properties.to_str().unwrap()], data);
    let http = broker.http.clone();
    let http = http.as_str();
    let basic = |user: &str, password: &str| {
        use base64::Engine;
        let encoded =
            base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        format!("Basic {encoded}")
    };
    let (status, _) = get(http, "/");
    assert_eq!(status, 401, "the page asks for a sign-in");
    let (status, answer) = get(http, "/api/overview");
    assert_eq!(status, 401, "{answer}");
    let (status, answer) = call_as(http, "GET", "/api/overview", &basic("alice", "wrong"), "");
    assert_eq!(status, 401, "a wrong password: {answer}");

    let alice = basic("alice", "alice-secret");
    let deadline = Instant::now() + Duration::from_secs(60);
    while call_as(http, "GET", "/api/overview", &alice, "").0 != 200 {
        assert!(Instant::now() < deadline, "alice never got in");
        std::thread::sleep(Duration::from_millis(250));
    }
    let body = json!({"name": "alices", "partitions": 1, "replication_factor": 1}).to_string();
    let (status, answer) = call_as(http, "POST", "/api/topics", &alice, &body);
    assert_eq!(status, 201, "{answer}");

    let bob = basic("bob", "bob-secret");
    let (status, listed) = call_as(http, "GET", "/api/topics", &bob, "");
    assert_eq!(
        (status, &listed["total"]),
        (200, &json!(0)),
        "bob may see no topic: {listed}"
    );
    let body = json!({"name": "bobs", "partitions": 1, "replication_factor": 1}).to_string();
    let (status, answer) = call_as(http, "POST", "/api/topics", &bob, &body);
    assert_eq!(status, 403, "{answer}");
    assert!(
        answer["error"]
            .as_str()
            .unwrap()
            .contains("AUTHORIZATION_FAILED"),
        "{answer}"
    );
    let (status, listed) = call_as(http, "GET", "/api/topics", &alice, "");
    assert_eq!((status, &listed["total"]), (200, &json!(1)), "{listed}");
    // /health stays open for probes.
    assert_eq!(get(http, "/health").0, 200);
    let _ = broker.child.kill();
}
