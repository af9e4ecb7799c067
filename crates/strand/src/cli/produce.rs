//! `strand produce TOPIC`: records from standard input (or a file), one per line, to a
//! topic, as kafka-console-producer does: a line is a value, or KEY<SEP>VALUE with
//! --key-separator, or a JSON object with --format json. Records are batched while input
//! is ready and sent to each partition's leader with acks=all by default (Kafka's
//! producer default); keyed records go where Kafka's default partitioner puts them.

use std::collections::BTreeMap;
use std::io::BufRead;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{bail, Context};
use bytes::Bytes;
use kafka_protocol::messages::produce_request::{PartitionProduceData, TopicProduceData};
use kafka_protocol::messages::{ApiKey, ProduceRequest, ProduceResponse};
use serde_json::json;
use strand_records::{BatchBuilder, Compression, Header, Record};

use super::client::{check, error_name, retriable, topic_name, Client, RETRY_DEADLINE};
use super::output::print_json;
use super::partitioner::Partitioner;
use super::Target;

/// A batch request goes out once this many records or bytes are waiting.
const BATCH_RECORDS: usize = 10_000;
const BATCH_BYTES: usize = 1024 * 1024;
/// Lines read ahead of the producer (a bound on memory).
const INPUT_QUEUE: usize = 10_000;

#[derive(clap::Args, Debug)]
pub struct ProduceArgs {
    #[command(flatten)]
    target: Target,
    topic: String,
    /// Split each line at the first SEP into key and value (kafka-console-producer's
    /// parse.key with key.separator).
    #[arg(long)]
    key_separator: Option<String>,
    /// A header added to every record, KEY=VALUE.
    #[arg(short = 'H', long = "header", value_parser = super::topic::parse_setting)]
    headers: Vec<(String, String)>,
    /// Read records from this file instead of standard input.
    #[arg(long)]
    file: Option<PathBuf>,
    /// Send every record to this partition.
    #[arg(short, long)]
    partition: Option<i32>,
    /// 0, 1 or all (-1).
    #[arg(long, default_value = "all", value_parser = parse_acks)]
    acks: i16,
    /// none, gzip, snappy, lz4 or zstd.
    #[arg(short = 'z', long, default_value = "none", value_parser = parse_compression)]
    compression: Compression,
    /// text: a line is a value (or KEY<SEP>VALUE); json: {"key","value","headers","partition"}.
    #[arg(short, long, default_value = "text", value_parser = ["text", "json"])]
    format: String,
}

pub fn parse_acks(value: &str) -> Result<i16, String> {
    match value {
        "all" | "-1" => Ok(-1),
        "0" => Ok(0),
        "1" => Ok(1),
        other => Err(format!("acks must be 0, 1 or all, not {other:?}")),
    }
}

pub fn parse_compression(value: &str) -> Result<Compression, String> {
    match value {
        "none" => Ok(Compression::None),
        "gzip" => Ok(Compression::Gzip),
        "snappy" => Ok(Compression::Snappy),
        "lz4" => Ok(Compression::Lz4),
        "zstd" => Ok(Compression::Zstd),
        other => Err(format!("unknown compression {other:?}")),
    }
}

/// One input line as a record, with the partition it asked for (JSON input may).
#[derive(Debug, PartialEq)]
struct InputRecord {
    key: Option<Vec<u8>>,
    value: Option<Vec<u8>>,
    headers: Vec<(String, Option<String>)>,
    partition: Option<i32>,
}

impl InputRecord {
    fn size(&self) -> usize {
        self.key.as_ref().map_or(0, Vec::len) + self.value.as_ref().map_or(0, Vec::len) + 16
    }
}

fn parse_line(
    line: &str,
    json_format: bool,
    separator: Option<&str>,
) -> anyhow::Result<InputRecord> {
    if json_format {
        let value: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("not a JSON object: {line}"))?;
        let field = |name: &str| -> anyhow::Result<Option<Vec<u8>>> {
            match value.get(name) {
                None | Some(serde_json::Value::Null) => Ok(None),
                Some(serde_json::Value::String(text)) => Ok(Some(text.as_bytes().to_vec())),
                Some(other) => bail!("\"{name}\" must be a string or null, not {other}"),
            }
        };
        let mut headers = Vec::new();
        if let Some(object) = value.get("headers") {
            let object = object
                .as_object()
                .context("\"headers\" must be an object of strings")?;
            for (key, value) in object {
                headers.push((key.clone(), value.as_str().map(str::to_string)));
            }
        }
        let partition = match value.get("partition") {
            None | Some(serde_json::Value::Null) => None,
            Some(number) => Some(
                number
                    .as_i64()
                    .and_then(|n| i32::try_from(n).ok())
                    .context("\"partition\" must be a number")?,
            ),
        };
        return Ok(InputRecord {
            key: field("key")?,
            value: field("value")?,
            headers,
            partition,
        });
    }
    let (key, value) = match separator.and_then(|sep| line.split_once(sep)) {
        Some((key, value)) => (Some(key.as_bytes().to_vec()), value),
        None if separator.is_some() => bail!("no key separator in line: {line}"),
        None => (None, line),
    };
    Ok(InputRecord {
        key,
        value: Some(value.as_bytes().to_vec()),
        headers: Vec::new(),
        partition: None,
    })
}

pub async fn run(args: ProduceArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    let mut leaders = client.leaders(&args.topic, true).await?;
    let partitions = leaders.len() as i32;
    if let Some(partition) = args.partition {
        if !leaders.contains_key(&partition) {
            bail!(
                "{} has no partition {partition} (it has {partitions})",
                args.topic
            );
        }
    }
    let version = client.version(ApiKey::Produce, 9)?;
    let input: Box<dyn std::io::Read + Send> = match &args.file {
        Some(path) => Box::new(
            std::fs::File::open(path).with_context(|| format!("opening {}", path.display()))?,
        ),
        None => Box::new(std::io::stdin()),
    };
    let (sender, mut receiver) =
        tokio::sync::mpsc::channel::<anyhow::Result<InputRecord>>(INPUT_QUEUE);
    let json_format = args.format == "json";
    let separator = args.key_separator.clone();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(input).lines() {
            let parsed = line
                .context("reading input")
                .and_then(|line| parse_line(&line, json_format, separator.as_deref()));
            let failed = parsed.is_err();
            if sender.blocking_send(parsed).is_err() || failed {
                return;
            }
        }
    });
    let mut partitioner = Partitioner::new(
        partitions,
        (SystemTime::now().duration_since(UNIX_EPOCH)?.subsec_nanos() % 1024) as i32,
    );
    let mut produced = 0u64;
    while let Some(first) = receiver.recv().await {
        let mut pending = vec![first?];
        let mut bytes = pending[0].size();
        while pending.len() < BATCH_RECORDS && bytes < BATCH_BYTES {
            match receiver.try_recv() {
                Ok(record) => {
                    let record = record?;
                    bytes += record.size();
                    pending.push(record);
                }
                Err(_) => break,
            }
        }
        // partition -> the records going there, in input order.
        let mut batches: BTreeMap<i32, Vec<InputRecord>> = BTreeMap::new();
        // Each input record's partition and place in that partition's batch, in input
        // order, so that --json reports records in the order they were read.
        let mut placed: Vec<(i32, i64)> = Vec::with_capacity(pending.len());
        for record in pending {
            let partition = match record.partition.or(args.partition) {
                Some(partition) if leaders.contains_key(&partition) => partition,
                Some(partition) => bail!("{} has no partition {partition}", args.topic),
                None => partitioner.partition(record.key.as_deref(), record.size()),
            };
            let batch = batches.entry(partition).or_default();
            placed.push((partition, batch.len() as i64));
            batch.push(record);
        }
        partitioner.next_batch();
        let offsets = send(&client, &args, version, &mut leaders, &batches).await?;
        if args.target.json {
            for (partition, index) in &placed {
                let base = offsets.get(partition).copied().unwrap_or(-1);
                let offset = if base < 0 { -1 } else { base + index };
                print_json(&json!({"partition": partition, "offset": offset}));
            }
        }
        produced += placed.len() as u64;
    }
    if !args.target.json {
        eprintln!("produced {produced} records to {}", args.topic);
    }
    Ok(())
}

/// Sends one batch per partition, each to its leader; returns partition -> base offset
/// (-1 with acks=0). Errors that mean nothing was written (a moved leader, a topic still
/// being created) are retried against the new leader within the retry deadline.
async fn send(
    client: &Client,
    args: &ProduceArgs,
    version: i16,
    leaders: &mut BTreeMap<i32, i32>,
    batches: &BTreeMap<i32, Vec<InputRecord>>,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let now = SystemTime::now().duration_since(UNIX_EPOCH)?.as_millis() as i64;
    let encoded: BTreeMap<i32, Bytes> = batches
        .iter()
        .map(|(&partition, records)| {
            let mut builder = BatchBuilder::new(0, now).compression(args.compression);
            for input in records {
                let mut record = Record::new(input.key.clone(), input.value.clone(), now);
                for (key, value) in args
                    .headers
                    .iter()
                    .map(|(k, v)| (k.clone(), Some(v.clone())))
                    .chain(input.headers.iter().cloned())
                {
                    record = record.with_header(Header {
                        key: key.into_bytes(),
                        value: value.map(String::into_bytes),
                    });
                }
                builder.push(record);
            }
            (partition, Bytes::from(builder.build()))
        })
        .collect();
    let deadline = Instant::now() + RETRY_DEADLINE;
    let mut waiting: Vec<i32> = encoded.keys().copied().collect();
    let mut offsets = BTreeMap::new();
    while !waiting.is_empty() {
        let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
        for &partition in &waiting {
            // The topic may have been recreated with fewer partitions since.
            let leader = *leaders
                .get(&partition)
                .with_context(|| format!("{} has no partition {partition} now", args.topic))?;
            by_leader.entry(leader).or_default().push(partition);
        }
        let mut retry = Vec::new();
        for (leader, partitions) in by_leader {
            let request = ProduceRequest::default()
                .with_acks(args.acks)
                .with_timeout_ms(30_000)
                .with_topic_data(vec![TopicProduceData::default()
                    .with_name(topic_name(&args.topic))
                    .with_partition_data(
                        partitions
                            .iter()
                            .map(|p| {
                                PartitionProduceData::default()
                                    .with_index(*p)
                                    .with_records(Some(encoded[p].clone()))
                            })
                            .collect(),
                    )]);
            if args.acks == 0 {
                // No answer comes back: the request is written and that is all.
                client
                    .send_node(leader, ApiKey::Produce, version, &request)
                    .await?;
                offsets.extend(partitions.iter().map(|&p| (p, -1)));
                continue;
            }
            let response: ProduceResponse = client
                .call_node(leader, ApiKey::Produce, version, &request)
                .await?;
            for topic in response.responses {
                for partition in topic.partition_responses {
                    let code = partition.error_code;
                    if code == 0 {
                        offsets.insert(partition.index, partition.base_offset);
                    } else if unwritten(code) && Instant::now() < deadline {
                        retry.push(partition.index);
                    } else {
                        let details: Vec<String> = partition
                            .record_errors
                            .iter()
                            .map(|e| {
                                format!(
                                    "record {}: {}",
                                    e.batch_index,
                                    e.batch_index_error_message.as_deref().unwrap_or("")
                                )
                            })
                            .collect();
                        let mut message =
                            partition.error_message.as_deref().unwrap_or("").to_string();
                        if !details.is_empty() {
                            message = format!("{message} [{}]", details.join("; "));
                        }
                        check(
                            code,
                            Some(message.trim()),
                            &format!("producing to {}-{}", args.topic, partition.index),
                        )?;
                    }
                }
            }
        }
        if !retry.is_empty() {
            tokio::time::sleep(Duration::from_millis(200)).await;
            *leaders = client.leaders(&args.topic, true).await?;
        }
        waiting = retry;
    }
    Ok(offsets)
}

/// Errors after which the broker wrote nothing, so sending again cannot duplicate.
fn unwritten(code: i16) -> bool {
    let name = error_name(code);
    retriable(code)
        && matches!(
            name.as_str(),
            "NOT_LEADER_OR_FOLLOWER" | "LEADER_NOT_AVAILABLE" | "UNKNOWN_TOPIC_OR_PARTITION"
        )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_a_value_or_a_key_and_a_value() {
        let record = parse_line("hello", false, None).unwrap();
        assert_eq!(record.key, None);
        assert_eq!(record.value.as_deref(), Some(&b"hello"[..]));
        let record = parse_line("k1:v:1", false, Some(":")).unwrap();
        assert_eq!(record.key.as_deref(), Some(&b"k1"[..]));
        assert_eq!(record.value.as_deref(), Some(&b"v:1"[..]));
        assert!(parse_line("no separator", false, Some(":")).is_err());
    }

    #[test]
    fn json_lines_carry_keys_headers_and_partitions() {
        let record = parse_line(
            r#"{"key":"k","value":null,"headers":{"h":"1"},"partition":2}"#,
            true,
            None,
        )
        .unwrap();
        assert_eq!(
            record,
            InputRecord {
                key: Some(b"k".to_vec()),
                value: None,
                headers: vec![("h".into(), Some("1".into()))],
                partition: Some(2),
            }
        );
        assert!(parse_line(r#"{"key":1}"#, true, None).is_err());
        assert!(parse_line("not json", true, None).is_err());
    }
}
