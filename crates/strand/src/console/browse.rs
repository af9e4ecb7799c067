//! The message browser: records of one partition from an offset, a time, or the newest,
//! fetched from its leader as a consumer would: read_uncommitted by default, as
//! kafka-console-consumer; `isolation=read_committed` leaves out aborted transactions and
//! stops at the last stable offset, as a read_committed consumer sees the log. Keys, values and header values go out as base64,
//! each cut at `FIELD_MAX_BYTES`; the page shows them as text, JSON or hex.

use std::collections::{BTreeMap, HashMap};

use base64::Engine;
use kafka_protocol::messages::{ApiKey, FetchResponse};
use serde_json::{json, Value};

use super::api::query_number;
use crate::cli::client::{check, kafka_error, Client};
use crate::cli::consume::fetch_request;
use crate::cli::offsets::{list_offsets, EARLIEST, LATEST};
use crate::cli::records::{decode, AbortedTransaction, ConsumedRecord};

const UNKNOWN_TOPIC_OR_PARTITION: i16 = 3;
const LIMIT_DEFAULT: usize = 50;
const LIMIT_MAX: usize = 500;
const FIELD_MAX_BYTES: usize = 64 * 1024;
const PARTITION_MAX_BYTES: i32 = 1024 * 1024;
/// At most this much is fetched for one answer, however small the records.
const FETCHED_MAX_BYTES: usize = 8 * 1024 * 1024;

pub struct Browse {
    partition: i32,
    offset: Option<i64>,
    timestamp: Option<i64>,
    limit: usize,
    read_committed: bool,
}

impl Browse {
    pub fn from_query(query: &HashMap<String, String>) -> Result<Browse, String> {
        Ok(Browse {
            partition: query_number(query, "partition")?.unwrap_or(0),
            offset: query_number(query, "offset")?,
            timestamp: query_number(query, "timestamp")?,
            limit: query_number(query, "limit")?
                .unwrap_or(LIMIT_DEFAULT)
                .clamp(1, LIMIT_MAX),
            read_committed: match query.get("isolation").map(String::as_str) {
                None | Some("read_uncommitted") => false,
                Some("read_committed") => true,
                Some(other) => {
                    return Err(format!(
                        "isolation {other:?} is not read_uncommitted or read_committed"
                    ))
                }
            },
        })
    }

    pub async fn run(&self, client: &Client, topic: &str) -> anyhow::Result<Value> {
        let leaders = client.leaders(topic, false).await?;
        let Some(&leader) = leaders.get(&self.partition) else {
            return Err(kafka_error(
                UNKNOWN_TOPIC_OR_PARTITION,
                &format!(
                    "{topic} has no partition {} (it has {})",
                    self.partition,
                    leaders.len()
                ),
            ));
        };
        let one = BTreeMap::from([(self.partition, leader)]);
        let bound = |offsets: BTreeMap<i32, i64>| offsets.get(&self.partition).copied();
        let log_start = bound(list_offsets(client, topic, &one, EARLIEST).await?).unwrap_or(0);
        let high_watermark = bound(list_offsets(client, topic, &one, LATEST).await?).unwrap_or(0);
        let start = match (self.offset, self.timestamp) {
            (Some(offset), _) => offset,
            (None, Some(timestamp)) => {
                match bound(list_offsets(client, topic, &one, timestamp).await?) {
                    Some(found) if found >= 0 => found,
                    _ => high_watermark, // nothing at or after that time
                }
            }
            (None, None) => high_watermark - self.limit as i64,
        }
        .clamp(log_start, high_watermark);
        let (records, last_stable) = self
            .fetch(client, topic, leader, start, high_watermark)
            .await?;
        Ok(json!({
            "partition": self.partition,
            "isolation": if self.read_committed { "read_committed" } else { "read_uncommitted" },
            "log_start_offset": log_start,
            "high_watermark": high_watermark,
            "last_stable_offset": last_stable,
            "messages": records.iter().map(message).collect::<Vec<_>>(),
        }))
    }

    /// Up to `limit` records from `start`, stopping at `end` (the high watermark as it
    /// was read: no waiting for records that are not there), and the last stable offset
    /// the leader reported (None if it answered no fetch). Under read_committed the
    /// leader returns nothing past that offset.
    async fn fetch(
        &self,
        client: &Client,
        topic: &str,
        leader: i32,
        start: i64,
        end: i64,
    ) -> anyhow::Result<(Vec<ConsumedRecord>, Option<i64>)> {
        let version = client.version(ApiKey::Fetch, 12)?;
        let mut records = Vec::new();
        let mut last_stable = None;
        let mut position = start;
        let mut fetched = 0;
        while records.len() < self.limit && position < end && fetched < FETCHED_MAX_BYTES {
            let request = fetch_request(
                topic,
                &[(self.partition, position)],
                0,
                self.read_committed,
                PARTITION_MAX_BYTES,
            );
            let response: FetchResponse = client
                .call_node(leader, ApiKey::Fetch, version, &request)
                .await?;
            check(response.error_code, None, &format!("fetching {topic}"))?;
            let Some(answer) = response
                .responses
                .into_iter()
                .flat_map(|t| t.partitions)
                .find(|p| p.partition_index == self.partition)
            else {
                break;
            };
            check(
                answer.error_code,
                None,
                &format!("fetching {topic}-{}", self.partition),
            )?;
            last_stable = Some(answer.last_stable_offset);
            let aborted = AbortedTransaction::of(&answer);
            let bytes = answer.records.unwrap_or_default();
            fetched += bytes.len();
            let decoded = decode(self.partition, &bytes, position, aborted)?;
            let before = position;
            position = decoded.next_offset;
            records.extend(
                decoded
                    .records
                    .into_iter()
                    .take_while(|r| r.offset < end)
                    .take(self.limit - records.len()),
            );
            if position <= before {
                break; // nothing whole came back (a record over the partition limit, or
                       // the last stable offset reached)
            }
        }
        Ok((records, last_stable))
    }
}

fn message(record: &ConsumedRecord) -> Value {
    let mut truncated = false;
    let mut encode = |bytes: &Option<Vec<u8>>| -> Value {
        match bytes {
            None => Value::Null,
            Some(bytes) => {
                truncated |= bytes.len() > FIELD_MAX_BYTES;
                let shown = &bytes[..bytes.len().min(FIELD_MAX_BYTES)];
                Value::String(base64::engine::general_purpose::STANDARD.encode(shown))
            }
        }
    };
    let key = encode(&record.key);
    let value = encode(&record.value);
    let headers: Vec<Value> = record
        .headers
        .iter()
        .map(
            |(name, value)| json!({ "key": String::from_utf8_lossy(name), "value": encode(value) }),
        )
        .collect();
    json!({
        "partition": record.partition,
        "offset": record.offset,
        "timestamp": record.timestamp,
        "key": key,
        "value": value,
        "headers": headers,
        "truncated": truncated,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_are_base64_and_cut_at_the_limit() {
        let record = ConsumedRecord {
            partition: 0,
            offset: 7,
            timestamp: 1,
            key: None,
            value: Some(vec![b'x'; FIELD_MAX_BYTES + 10]),
            headers: vec![(b"h".to_vec(), Some(b"v".to_vec()))],
        };
        let shown = message(&record);
        assert_eq!(shown["key"], Value::Null);
        assert_eq!(shown["truncated"], json!(true));
        let value = base64::engine::general_purpose::STANDARD
            .decode(shown["value"].as_str().unwrap())
            .unwrap();
        assert_eq!(value.len(), FIELD_MAX_BYTES);
        assert_eq!(shown["headers"][0], json!({"key": "h", "value": "dg=="}));
    }

    #[test]
    fn a_bad_number_is_named() {
        let query = HashMap::from([("offset".to_string(), "soon".to_string())]);
        assert_eq!(
            Browse::from_query(&query).err(),
            Some("offset must be a number".to_string())
        );
    }
}
