//! Topic-level configs: which Kafka topic configs Strand accepts, how each is validated
//! (INVALID_CONFIG otherwise, as Kafka does, including for unknown names), their broker
//! defaults, and how they become a `LogConfig`.

use std::collections::BTreeMap;

use strand_log::{Durability, LogConfig};
use strand_records::TimestampType;

use crate::config::{BrokerConfig, FlushMode};

/// Names Strand accepts. `cleanup.policy`, `retention.*` and `min.insync.replicas` are
/// stored and reported; retention and compaction are enforced by the retention issue's
/// work, not yet (see docs/COMPATIBILITY.md).
pub const TOPIC_CONFIG_NAMES: &[&str] = &[
    "cleanup.policy",
    "retention.ms",
    "retention.bytes",
    "segment.bytes",
    "segment.ms",
    "segment.index.bytes",
    "index.interval.bytes",
    "max.message.bytes",
    "message.timestamp.type",
    "flush.messages",
    "flush.ms",
    "min.insync.replicas",
    "delete.retention.ms",
    "min.compaction.lag.ms",
    "min.cleanable.dirty.ratio",
    "compression.type",
    "preallocate",
];

/// Checks one config; `Err` carries Kafka's style of message.
pub fn validate_topic_config(name: &str, value: Option<&str>) -> Result<(), String> {
    let Some(value) = value else {
        return Err(format!(
            "Null value not supported for topic configs: {name}"
        ));
    };
    let long = |min: i64| -> Result<(), String> {
        match value.trim().parse::<i64>() {
            Ok(parsed) if parsed >= min => Ok(()),
            Ok(_) => Err(format!(
                "Invalid value {value} for configuration {name}: Value must be at least {min}"
            )),
            Err(_) => Err(format!(
                "Invalid value {value} for configuration {name}: Not a number of type LONG"
            )),
        }
    };
    let int = |min: i64| -> Result<(), String> {
        match value.trim().parse::<i32>() {
            Ok(parsed) if parsed as i64 >= min => Ok(()),
            Ok(_) => Err(format!(
                "Invalid value {value} for configuration {name}: Value must be at least {min}"
            )),
            Err(_) => Err(format!(
                "Invalid value {value} for configuration {name}: Not a number of type INT"
            )),
        }
    };
    let one_of = |allowed: &[&str]| -> Result<(), String> {
        if allowed.contains(&value) {
            Ok(())
        } else {
            Err(format!(
                "Invalid value {value} for configuration {name}: String must be one of: {}",
                allowed.join(", ")
            ))
        }
    };
    match name {
        "cleanup.policy" => {
            let valid = value
                .split(',')
                .map(str::trim)
                .all(|policy| policy == "delete" || policy == "compact");
            if valid && !value.trim().is_empty() {
                Ok(())
            } else {
                Err(format!("Invalid value {value} for configuration {name}: String must be one of: compact, delete"))
            }
        }
        "retention.ms" | "retention.bytes" => long(-1),
        "segment.bytes" => int(14),
        "segment.ms" => long(1),
        "segment.index.bytes" => int(4),
        "index.interval.bytes" | "max.message.bytes" => int(0),
        "message.timestamp.type" => one_of(&["CreateTime", "LogAppendTime"]),
        "flush.messages" => long(1),
        "flush.ms" | "delete.retention.ms" | "min.compaction.lag.ms" => long(0),
        "min.insync.replicas" => int(1),
        "min.cleanable.dirty.ratio" => match value.parse::<f64>() {
            Ok(ratio) if (0.0..=1.0).contains(&ratio) => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: Value must be between 0 and 1"
            )),
        },
        // Accepted for compatibility: Strand always reserves blocks a little ahead of the
        // active segment's end (strand_log::preallocation), whatever this says.
        "preallocate" => match value.trim().to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err(format!(
                "Invalid value {value} for configuration {name}: Expected value to be either true or false"
            )),
        },
        "compression.type" => {
            one_of(&["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"])
        }
        _ => Err(format!("Unknown topic config name: {name}")),
    }
}

/// Kafka's ConfigType of each config (DescribeConfigs v3+): 1 BOOLEAN, 2 STRING, 3 INT,
/// 5 LONG, 6 DOUBLE, 7 LIST.
pub fn topic_config_type(name: &str) -> i8 {
    match name {
        "preallocate" => 1,
        "cleanup.policy" => 7,
        "segment.bytes"
        | "segment.index.bytes"
        | "index.interval.bytes"
        | "max.message.bytes"
        | "min.insync.replicas" => 3,
        "message.timestamp.type" | "compression.type" => 2,
        "min.cleanable.dirty.ratio" => 6,
        _ => 5,
    }
}

/// Every supported config with its effective value for a topic (set or broker default),
/// and whether it was set on the topic.
pub fn effective_topic_configs(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<(String, String, bool)> {
    TOPIC_CONFIG_NAMES
        .iter()
        .map(|name| match overrides.get(*name) {
            Some(value) => (name.to_string(), value.clone(), true),
            None => (name.to_string(), broker_default(broker, name), false),
        })
        .collect()
}

fn broker_default(broker: &BrokerConfig, name: &str) -> String {
    match name {
        "cleanup.policy" => "delete".into(),
        "retention.ms" => broker.retention_ms.to_string(),
        "retention.bytes" => broker.retention_bytes.to_string(),
        "segment.bytes" => broker.segment_bytes.to_string(),
        "segment.ms" => broker.segment_ms.to_string(),
        "segment.index.bytes" => (10 * 1024 * 1024).to_string(),
        "index.interval.bytes" => "4096".into(),
        "max.message.bytes" => broker.message_max_bytes.to_string(),
        "message.timestamp.type" => "CreateTime".into(),
        "flush.messages" => match broker.flush {
            FlushMode::EveryBatch => "1".into(),
            FlushMode::PageCache => i64::MAX.to_string(),
        },
        "flush.ms" => i64::MAX.to_string(),
        "min.insync.replicas" => "1".into(),
        "delete.retention.ms" => "86400000".into(),
        "min.compaction.lag.ms" => "0".into(),
        "min.cleanable.dirty.ratio" => "0.5".into(),
        "compression.type" => "producer".into(),
        "preallocate" => "false".into(),
        _ => String::new(),
    }
}

/// The log settings for a topic. Configs were validated when set.
pub fn log_config_for(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let value = |name: &str| {
        overrides
            .get(name)
            .cloned()
            .unwrap_or_else(|| broker_default(broker, name))
    };
    let long = |name: &str| value(name).trim().parse::<i64>().unwrap_or(i64::MAX);
    let flush_messages = long("flush.messages");
    let flush_ms = long("flush.ms");
    LogConfig {
        segment_bytes: long("segment.bytes").max(14) as u64,
        segment_ms: long("segment.ms").max(1),
        segment_index_bytes: long("segment.index.bytes").max(4) as u64,
        index_interval_bytes: long("index.interval.bytes").max(0) as u64,
        max_message_bytes: long("max.message.bytes").max(0) as usize,
        message_timestamp_type: if value("message.timestamp.type") == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        // flush.messages=1 is Kafka's "fsync every message": served by group commit.
        durability: if flush_messages <= 1 {
            Durability::FlushBeforeAck
        } else {
            Durability::PageCache
        },
        flush_messages: (flush_messages > 1 && flush_messages != i64::MAX)
            .then_some(flush_messages as u64),
        flush_ms: (flush_ms != i64::MAX).then_some(flush_ms),
        cleanup_delete: value("cleanup.policy")
            .split(',')
            .any(|p| p.trim() == "delete"),
        cleanup_compact: value("cleanup.policy")
            .split(',')
            .any(|p| p.trim() == "compact"),
        retention_ms: Some(long("retention.ms")).filter(|ms| *ms >= 0),
        retention_bytes: Some(long("retention.bytes"))
            .filter(|bytes| *bytes >= 0)
            .map(|bytes| bytes as u64),
        delete_retention_ms: long("delete.retention.ms").max(0),
        min_compaction_lag_ms: long("min.compaction.lag.ms").max(0),
        min_cleanable_dirty_ratio: value("min.cleanable.dirty.ratio")
            .trim()
            .parse()
            .unwrap_or(0.5),
        ..LogConfig::default()
    }
}

pub fn min_insync_replicas(overrides: &BTreeMap<String, String>) -> i32 {
    overrides
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_kafka() {
        assert!(validate_topic_config("retention.ms", Some("-1")).is_ok());
        assert!(validate_topic_config("retention.ms", Some("-2")).is_err());
        assert!(validate_topic_config("segment.bytes", Some("10")).is_err());
        assert!(validate_topic_config("segment.bytes", Some("abc")).is_err());
        assert!(validate_topic_config("cleanup.policy", Some("compact,delete")).is_ok());
        assert!(validate_topic_config("cleanup.policy", Some("forever")).is_err());
        assert!(validate_topic_config("no.such.config", Some("1"))
            .unwrap_err()
            .contains("Unknown topic config"));
        assert!(validate_topic_config("retention.ms", None).is_err());
        assert!(validate_topic_config("preallocate", Some("true")).is_ok());
        assert!(validate_topic_config("preallocate", Some("FALSE")).is_ok());
        assert!(validate_topic_config("preallocate", Some("1"))
            .unwrap_err()
            .contains("either true or false"));
        assert_eq!(topic_config_type("preallocate"), 1);
    }

    #[test]
    fn flush_messages_one_means_flush_before_ack() {
        let broker = BrokerConfig::default();
        let mut overrides = BTreeMap::new();
        assert_eq!(
            log_config_for(&broker, &overrides).durability,
            Durability::PageCache
        );
        overrides.insert("flush.messages".to_string(), "1".to_string());
        assert_eq!(
            log_config_for(&broker, &overrides).durability,
            Durability::FlushBeforeAck
        );
        overrides.insert("max.message.bytes".to_string(), "500".to_string());
        assert_eq!(log_config_for(&broker, &overrides).max_message_bytes, 500);
    }
}
