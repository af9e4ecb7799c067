//! `strand consume TOPIC`: records of a topic on standard output, as
//! kafka-console-consumer prints them: from the start, the end, an offset or a timestamp,
//! of chosen partitions or as a member of a consumer group (which commits what it
//! printed), as text, JSON lines or hex. Without -n or --timeout-ms it follows the topic
//! until interrupted.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use kafka_protocol::messages::fetch_request::{FetchPartition, FetchTopic};
use kafka_protocol::messages::{ApiKey, BrokerId, FetchRequest, FetchResponse};
use serde_json::json;

use super::client::{check, error_name, topic_name, Client};
use super::group_member::GroupMember;
use super::group_offsets::{self, Offsets};
use super::offsets::{list_offsets, EARLIEST, LATEST};
use super::records::{decode, AbortedTransaction, ConsumedRecord};
use super::Target;

/// How long a broker holds a Fetch with nothing new (Kafka's fetch.max.wait.ms).
const FETCH_MAX_WAIT_MS: i32 = 500;
const FETCH_MAX_BYTES: i32 = 50 * 1024 * 1024;
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// Kafka's consumer commits every 5 s (auto.commit.interval.ms).
const COMMIT_INTERVAL: Duration = Duration::from_secs(5);

#[derive(clap::Args, Debug)]
pub struct ConsumeArgs {
    #[command(flatten)]
    target: Target,
    topic: String,
    /// Only this partition (repeatable); all of them by default.
    #[arg(short, long = "partition", conflicts_with = "group")]
    partitions: Vec<i32>,
    /// Where to start: start, end, or an offset. With -g: where partitions without a
    /// committed offset start (start or end), or an offset to seek every partition to.
    /// Default: end (Kafka's auto.offset.reset=latest).
    #[arg(short, long, value_parser = parse_start)]
    offset: Option<Start>,
    /// Start at the first record at or after this time (ms since the epoch).
    #[arg(long, conflicts_with = "offset")]
    timestamp: Option<i64>,
    /// Consume as a member of this consumer group, committing what is printed.
    #[arg(short, long)]
    group: Option<String>,
    /// Exit after this many records.
    #[arg(short = 'n', long)]
    max_messages: Option<u64>,
    /// Exit when no record has arrived for this long.
    #[arg(long)]
    timeout_ms: Option<u64>,
    /// text (the value, one per line), json (one object per record) or hex.
    #[arg(short, long, default_value = "text", value_parser = ["text", "json", "hex"])]
    format: String,
    /// Print KEY<TAB>VALUE (text and hex formats).
    #[arg(long)]
    print_key: bool,
    /// Only records of committed transactions (isolation.level=read_committed).
    #[arg(long)]
    read_committed: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    Earliest,
    Latest,
    Offset(i64),
}

fn parse_start(value: &str) -> Result<Start, String> {
    match value {
        "start" | "beginning" | "earliest" => Ok(Start::Earliest),
        "end" | "latest" => Ok(Start::Latest),
        number => match number.parse::<i64>() {
            Ok(offset) if offset >= 0 => Ok(Start::Offset(offset)),
            _ => Err(format!(
                "{value:?} is not start, end or an offset (a number from 0)"
            )),
        },
    }
}

/// Where each consumed partition is: the next offset to fetch and print.
struct Positions {
    topic: String,
    next: BTreeMap<i32, i64>,
}

impl Positions {
    fn as_offsets(&self) -> Offsets {
        self.next
            .iter()
            .map(|(&partition, &offset)| ((self.topic.clone(), partition), offset))
            .collect()
    }
}

pub async fn run(args: ConsumeArgs) -> anyhow::Result<()> {
    let client = Client::connect(&args.target.bootstrap_server).await?;
    let mut leaders = client.leaders(&args.topic, false).await?;
    let mut member = match &args.group {
        Some(group) => Some(GroupMember::join(&client, group, &args.topic).await?),
        None => None,
    };
    let partitions = match &member {
        Some(member) => member.assignment.clone(),
        None if args.partitions.is_empty() => leaders.keys().copied().collect(),
        None => {
            for partition in &args.partitions {
                if !leaders.contains_key(partition) {
                    bail!(
                        "{} has no partition {partition} (it has {})",
                        args.topic,
                        leaders.len()
                    );
                }
            }
            args.partitions.clone()
        }
    };
    let mut positions = Positions {
        topic: args.topic.clone(),
        next: start_positions(&client, &args, &leaders, member.as_ref(), &partitions).await?,
    };
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut printed = 0u64;
    let mut last_record = Instant::now();
    let mut last_commit = Instant::now();
    let interrupted = tokio::signal::ctrl_c();
    tokio::pin!(interrupted);
    let result: anyhow::Result<()> = async {
        loop {
            if args.max_messages.is_some_and(|max| printed >= max) {
                return Ok(());
            }
            if let Some(timeout) = args.timeout_ms {
                if last_record.elapsed() >= Duration::from_millis(timeout) {
                    return Ok(());
                }
            }
            if let Some(member) = member.as_mut() {
                if member.keep_alive(&positions.as_offsets()).await? {
                    let owned = member.assignment.clone();
                    positions.next =
                        start_positions(&client, &args, &leaders, Some(member), &owned).await?;
                }
                if last_commit.elapsed() >= COMMIT_INTERVAL {
                    member.commit(&positions.as_offsets()).await;
                    last_commit = Instant::now();
                }
            }
            let round = tokio::select! {
                round = fetch_round(&client, &args, &leaders, &mut positions) => round?,
                _ = &mut interrupted => return Ok(()),
            };
            if round.stale_leaders {
                tokio::time::sleep(Duration::from_millis(200)).await;
                leaders = client.leaders(&args.topic, false).await?;
            }
            if positions.next.is_empty() {
                // A member without partitions (more members than partitions) waits.
                tokio::time::sleep(Duration::from_millis(FETCH_MAX_WAIT_MS as u64)).await;
            }
            for record in round.records {
                if args.max_messages.is_some_and(|max| printed >= max) {
                    break;
                }
                positions.next.insert(record.partition, record.offset + 1);
                if print(&mut out, &args, &record).is_err() {
                    return Ok(()); // the reader went away (a closed pipe): stop quietly
                }
                printed += 1;
                last_record = Instant::now();
            }
            if args.max_messages.is_none_or(|max| printed < max) {
                for (partition, next) in round.caught_up {
                    let position = positions.next.entry(partition).or_insert(next);
                    *position = (*position).max(next);
                }
            }
            if out.flush().is_err() {
                return Ok(());
            }
        }
    }
    .await;
    let _ = out.flush();
    if let Some(member) = member {
        member.commit(&positions.as_offsets()).await;
        member.leave().await?;
    }
    result
}

/// The offsets `partitions` start at: the group's commits (when a member), then -o /
/// --timestamp, then the end.
async fn start_positions(
    client: &Client,
    args: &ConsumeArgs,
    leaders: &BTreeMap<i32, i32>,
    member: Option<&GroupMember<'_>>,
    partitions: &[i32],
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let chosen: BTreeMap<i32, i32> = partitions
        .iter()
        .filter_map(|p| Some((*p, *leaders.get(p)?)))
        .collect();
    if chosen.is_empty() {
        return Ok(BTreeMap::new());
    }
    if let Some(timestamp) = args.timestamp {
        let found = list_offsets(client, &args.topic, &chosen, timestamp).await?;
        let ends = list_offsets(client, &args.topic, &chosen, LATEST).await?;
        // No record at or after the time: the end.
        return found
            .into_iter()
            .map(|(p, offset)| match offset {
                0.. => Ok((p, offset)),
                _ => Ok((p, answered(&ends, p)?)),
            })
            .collect();
    }
    if let Some(Start::Offset(offset)) = args.offset {
        return Ok(chosen.keys().map(|&p| (p, offset)).collect());
    }
    let reset = match args.offset {
        Some(Start::Earliest) => EARLIEST,
        _ => LATEST,
    };
    let mut starts = list_offsets(client, &args.topic, &chosen, reset).await?;
    if let (Some(member), Some(group)) = (member, &args.group) {
        let wanted = BTreeMap::from([(args.topic.clone(), partitions.to_vec())]);
        let committed =
            group_offsets::fetch_committed(client, member.coordinator(), group, Some(&wanted))
                .await?;
        for ((_, partition), offset) in committed {
            starts.insert(partition, offset);
        }
    }
    Ok(starts)
}

/// `partition`'s offset in a ListOffsets answer, which a broker may have left out.
fn answered(offsets: &BTreeMap<i32, i64>, partition: i32) -> anyhow::Result<i64> {
    offsets
        .get(&partition)
        .copied()
        .with_context(|| format!("ListOffsets answered nothing for partition {partition}"))
}

struct Round {
    records: Vec<ConsumedRecord>,
    /// partition -> the offset after the last whole batch fetched (past control batches
    /// and aborted records that print nothing), for the partitions that moved.
    caught_up: BTreeMap<i32, i64>,
    stale_leaders: bool,
}

/// One Fetch to each leader of the consumed partitions.
async fn fetch_round(
    client: &Client,
    args: &ConsumeArgs,
    leaders: &BTreeMap<i32, i32>,
    positions: &mut Positions,
) -> anyhow::Result<Round> {
    // v13 names topics by id; v12 is the last that names them.
    let version = client.version(ApiKey::Fetch, 12)?;
    let mut by_leader: BTreeMap<i32, Vec<i32>> = BTreeMap::new();
    for &partition in positions.next.keys() {
        by_leader
            .entry(leaders.get(&partition).copied().unwrap_or(-1))
            .or_default()
            .push(partition);
    }
    let mut round = Round {
        records: Vec::new(),
        caught_up: BTreeMap::new(),
        stale_leaders: by_leader.contains_key(&-1),
    };
    // Several leaders are fetched from in turn, so each waits less.
    let wait = FETCH_MAX_WAIT_MS / by_leader.len().max(1) as i32;
    for (leader, partitions) in by_leader.into_iter().filter(|(leader, _)| *leader >= 0) {
        let from: Vec<(i32, i64)> = partitions
            .iter()
            .map(|&p| (p, positions.next[&p]))
            .collect();
        let request = fetch_request(
            &args.topic,
            &from,
            wait,
            args.read_committed,
            PARTITION_MAX_BYTES,
        );
        let response: FetchResponse = client
            .call_node(leader, ApiKey::Fetch, version, &request)
            .await?;
        check(
            response.error_code,
            None,
            &format!("fetching from broker {leader}"),
        )?;
        for topic in response.responses {
            for partition in topic.partitions {
                let index = partition.partition_index;
                let Some(&from) = positions.next.get(&index) else {
                    continue;
                };
                match error_name(partition.error_code).as_str() {
                    "NONE" => {}
                    "OFFSET_OUT_OF_RANGE" => {
                        // As auto.offset.reset: before the log start goes to the start,
                        // past the end to the end.
                        let reset = if from < partition.log_start_offset {
                            EARLIEST
                        } else {
                            LATEST
                        };
                        let one = BTreeMap::from([(index, leader)]);
                        let offset = answered(
                            &list_offsets(client, &args.topic, &one, reset).await?,
                            index,
                        )?;
                        eprintln!(
                            "strand: {}-{index}: offset {from} is out of range; resetting to {offset}",
                            args.topic
                        );
                        positions.next.insert(index, offset);
                        continue;
                    }
                    "NOT_LEADER_OR_FOLLOWER"
                    | "LEADER_NOT_AVAILABLE"
                    | "FENCED_LEADER_EPOCH"
                    | "UNKNOWN_LEADER_EPOCH"
                    | "UNKNOWN_TOPIC_OR_PARTITION" => {
                        round.stale_leaders = true;
                        continue;
                    }
                    _ => check(
                        partition.error_code,
                        None,
                        &format!("fetching {}-{index}", args.topic),
                    )?,
                }
                let aborted = AbortedTransaction::of(&partition);
                let bytes = partition.records.unwrap_or_default();
                let decoded = decode(index, &bytes, from, aborted)?;
                round.records.extend(decoded.records);
                if decoded.next_offset > from {
                    round.caught_up.insert(index, decoded.next_offset);
                }
            }
        }
    }
    Ok(round)
}

/// A consumer's Fetch (v12 and older: topics by name) of `partitions` ((partition,
/// offset)) of one topic, in a session of its own.
pub fn fetch_request(
    topic: &str,
    partitions: &[(i32, i64)],
    max_wait_ms: i32,
    read_committed: bool,
    partition_max_bytes: i32,
) -> FetchRequest {
    FetchRequest::default()
        .with_replica_id(BrokerId(-1))
        .with_max_wait_ms(max_wait_ms)
        .with_min_bytes(1)
        .with_max_bytes(FETCH_MAX_BYTES)
        .with_isolation_level(i8::from(read_committed))
        .with_session_id(0)
        .with_session_epoch(-1)
        .with_topics(vec![FetchTopic::default()
            .with_topic(topic_name(topic))
            .with_partitions(
                partitions
                    .iter()
                    .map(|&(partition, offset)| {
                        FetchPartition::default()
                            .with_partition(partition)
                            .with_current_leader_epoch(-1)
                            .with_fetch_offset(offset)
                            .with_last_fetched_epoch(-1)
                            .with_log_start_offset(-1)
                            .with_partition_max_bytes(partition_max_bytes)
                    })
                    .collect(),
            )])
}

fn print(out: &mut impl Write, args: &ConsumeArgs, record: &ConsumedRecord) -> std::io::Result<()> {
    let text = |bytes: &Option<Vec<u8>>| -> String {
        match bytes {
            Some(bytes) => String::from_utf8_lossy(bytes).into_owned(),
            None => "null".to_string(),
        }
    };
    let hex = |bytes: &Option<Vec<u8>>| -> String {
        match bytes {
            Some(bytes) => bytes.iter().map(|b| format!("{b:02x}")).collect(),
            None => "null".to_string(),
        }
    };
    match args.format.as_str() {
        "json" => {
            let string = |bytes: &Option<Vec<u8>>| {
                bytes
                    .as_ref()
                    .map(|b| String::from_utf8_lossy(b).into_owned())
            };
            let headers: Vec<serde_json::Value> = record
                .headers
                .iter()
                .map(|(key, value)| {
                    json!({"key": String::from_utf8_lossy(key), "value": string(value)})
                })
                .collect();
            let line = json!({
                "topic": args.topic,
                "partition": record.partition,
                "offset": record.offset,
                "timestamp": record.timestamp,
                "key": string(&record.key),
                "value": string(&record.value),
                "headers": headers,
            });
            writeln!(out, "{line}")
        }
        format => {
            let show = if format == "hex" { hex } else { text };
            if args.print_key {
                writeln!(out, "{}\t{}", show(&record.key), show(&record.value))
            } else {
                writeln!(out, "{}", show(&record.value))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_is_a_name_or_an_offset() {
        assert_eq!(parse_start("start"), Ok(Start::Earliest));
        assert_eq!(parse_start("beginning"), Ok(Start::Earliest));
        assert_eq!(parse_start("end"), Ok(Start::Latest));
        assert_eq!(parse_start("42"), Ok(Start::Offset(42)));
        assert!(parse_start("-1").is_err());
        assert!(parse_start("soon").is_err());
    }
}
