//! Topic-level configs: every topic config Kafka 4.4 has, by its name, with Kafka's
//! type, validation and messages (INVALID_CONFIG otherwise, unknown names included), its
//! default and the broker config behind it (DescribeConfigs' synonyms), and how the set
//! becomes a `LogConfig`. One table ([`TOPIC_CONFIGS`]) serves validation, DescribeConfigs
//! and the log; docs/COMPATIBILITY.md says which configs are enforced and which are only
//! accepted (tiered storage, throttled replicas, broker-side recompression).

use std::collections::BTreeMap;

use strand_log::{Durability, LogConfig};
use strand_records::{TimestampType, WalkLimits};

use crate::config::{BrokerConfig, FlushMode};

/// Kafka's ConfigType (DescribeConfigs v3+).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigType {
    Boolean = 1,
    String = 2,
    Int = 3,
    Long = 5,
    Double = 6,
    List = 7,
}

/// How a value is checked, with Kafka's validator for each config.
#[derive(Debug, Clone, Copy)]
enum Rule {
    Boolean,
    OneOf(&'static [&'static str]),
    Int {
        min: i64,
        max: i64,
    },
    Long {
        min: i64,
    },
    Ratio,
    /// gzip: 1..=9 or -1 (Kafka's GzipCompression level validator).
    GzipLevel,
    CleanupPolicy,
    /// `*` or `partition:broker,...` (leader/follower.replication.throttled.replicas).
    ThrottledReplicas,
}

/// One topic config: its name, type, rule, the broker config Kafka names as its synonym
/// (listed by DescribeConfigs with the broker's value), its default, and what it does.
pub struct TopicConfigDef {
    pub name: &'static str,
    pub config_type: ConfigType,
    rule: Rule,
    /// The broker config behind the default, as DescribeConfigs lists it.
    pub synonym: Option<&'static str>,
    default: fn(&BrokerConfig) -> String,
    pub doc: &'static str,
}

const fn def(
    name: &'static str,
    config_type: ConfigType,
    rule: Rule,
    synonym: Option<&'static str>,
    default: fn(&BrokerConfig) -> String,
    doc: &'static str,
) -> TopicConfigDef {
    TopicConfigDef {
        name,
        config_type,
        rule,
        synonym,
        default,
        doc,
    }
}

const INT_MAX: i64 = i32::MAX as i64;
const COMPRESSION_TYPES: &[&str] = &["uncompressed", "zstd", "lz4", "snappy", "gzip", "producer"];

/// segment.bytes' floor since Kafka 4.0 (KIP-1030); `internal.segment.bytes` (Kafka's
/// test-only override, not listed by DescribeConfigs) goes lower.
const SEGMENT_BYTES_MIN: i64 = 1024 * 1024;
/// Kafka's hidden topic config for tests that need small segments.
pub const INTERNAL_SEGMENT_BYTES: &str = "internal.segment.bytes";

use ConfigType::{Boolean, Double, Int, List, Long, String as Str};

/// Every topic config of Kafka 4.4, in Kafka's (alphabetical) order.
pub const TOPIC_CONFIGS: &[TopicConfigDef] = &[
    def("cleanup.policy", List, Rule::CleanupPolicy, Some("log.cleanup.policy"), |_| "delete".into(),
        "delete: old segments go by retention.ms / retention.bytes; compact: the latest record per key is kept; both, or none (empty: kept forever)."),
    def("compression.gzip.level", Int, Rule::GzipLevel, Some("compression.gzip.level"), |_| "-1".into(),
        "The gzip level used when compression.type is gzip (accepted; Strand stores batches as produced)."),
    def("compression.lz4.level", Int, Rule::Int { min: 1, max: 17 }, Some("compression.lz4.level"), |_| "9".into(),
        "The lz4 level used when compression.type is lz4 (accepted; Strand stores batches as produced)."),
    def("compression.type", Str, Rule::OneOf(COMPRESSION_TYPES), Some("compression.type"), |_| "producer".into(),
        "The codec of stored batches; producer keeps the producer's (Strand stores batches as produced whatever this says)."),
    def("compression.zstd.level", Int, Rule::Int { min: -131072, max: 22 }, Some("compression.zstd.level"), |_| "3".into(),
        "The zstd level used when compression.type is zstd (accepted; Strand stores batches as produced)."),
    def("delete.retention.ms", Long, Rule::Long { min: 0 }, Some("log.cleaner.delete.retention.ms"), |_| "86400000".into(),
        "How long compaction keeps tombstones (and transaction markers) after the records they delete."),
    def("errors.deadletterqueue.group.enable", Boolean, Rule::Boolean, None, |_| "false".into(),
        "Whether groups may use this topic as a dead-letter queue (accepted; Strand has no share or streams groups)."),
    def("file.delete.delay.ms", Long, Rule::Long { min: 0 }, Some("log.segment.delete.delay.ms"), |_| "60000".into(),
        "How long a deleted segment's files linger (accepted; Strand removes them once no read holds them)."),
    def("flush.messages", Long, Rule::Long { min: 1 }, Some("log.flush.interval.messages"),
        |b| match b.flush { FlushMode::EveryBatch => "1".into(), FlushMode::PageCache => i64::MAX.to_string() },
        "fsync after this many messages; 1 makes every acknowledged batch durable first (group commit)."),
    def("flush.ms", Long, Rule::Long { min: 0 }, None, |_| i64::MAX.to_string(),
        "fsync when the oldest unflushed data is this old."),
    def("follower.replication.throttled.replicas", List, Rule::ThrottledReplicas, None, |_| String::new(),
        "Replicas whose follower fetches are throttled during a reassignment, at follower.replication.throttled.rate while outside the ISR (partition:broker pairs, or *)."),
    def("index.interval.bytes", Int, Rule::Int { min: 0, max: INT_MAX }, Some("log.index.interval.bytes"), |_| "4096".into(),
        "Bytes between entries of the sparse offset and time indexes."),
    def("leader.replication.throttled.replicas", List, Rule::ThrottledReplicas, None, |_| String::new(),
        "Replicas whose leader side is throttled during a reassignment, at leader.replication.throttled.rate while outside the ISR (partition:broker pairs, or *)."),
    def("local.retention.bytes", Long, Rule::Long { min: -2 }, Some("log.local.retention.bytes"), |_| "-2".into(),
        "Bytes kept on local disk when tiered storage is on (-2: retention.bytes)."),
    def("local.retention.ms", Long, Rule::Long { min: -2 }, Some("log.local.retention.ms"), |_| "-2".into(),
        "Time kept on local disk when tiered storage is on (-2: retention.ms)."),
    def("max.compaction.lag.ms", Long, Rule::Long { min: 1 }, Some("log.cleaner.max.compaction.lag.ms"), |_| i64::MAX.to_string(),
        "The longest a record stays uncompacted: past it the log is cleaned whatever its dirty ratio, and the active segment rolls."),
    def("max.decompressed.message.bytes", Int, Rule::Int { min: 1, max: INT_MAX }, Some("max.decompressed.message.bytes"), |_| "2147483639".into(),
        "The largest decoded size of a produced compressed batch (INVALID_RECORD above it)."),
    def("max.message.bytes", Int, Rule::Int { min: 0, max: INT_MAX }, Some("message.max.bytes"), |b| b.message_max_bytes.to_string(),
        "The largest batch accepted (MESSAGE_TOO_LARGE above it)."),
    def("message.timestamp.after.max.ms", Long, Rule::Long { min: 0 }, Some("log.message.timestamp.after.max.ms"), |_| "3600000".into(),
        "How far in the future a CreateTime record may be (INVALID_TIMESTAMP beyond)."),
    def("message.timestamp.before.max.ms", Long, Rule::Long { min: 0 }, Some("log.message.timestamp.before.max.ms"), |_| i64::MAX.to_string(),
        "How far in the past a CreateTime record may be (INVALID_TIMESTAMP beyond)."),
    def("message.timestamp.type", Str, Rule::OneOf(&["CreateTime", "LogAppendTime"]), Some("log.message.timestamp.type"), |_| "CreateTime".into(),
        "CreateTime keeps the producer's timestamps; LogAppendTime stamps batches with the broker's clock."),
    def("min.cleanable.dirty.ratio", Double, Rule::Ratio, Some("log.cleaner.min.cleanable.ratio"), |_| "0.5".into(),
        "The share of uncompacted bytes at which a compacted log is cleaned."),
    def("min.compaction.lag.ms", Long, Rule::Long { min: 0 }, Some("log.cleaner.min.compaction.lag.ms"), |_| "0".into(),
        "Records younger than this are not compacted."),
    def("min.insync.replicas", Int, Rule::Int { min: 1, max: INT_MAX }, Some("min.insync.replicas"), |b| b.min_insync_replicas.to_string(),
        "acks=all needs at least this many in-sync replicas (NOT_ENOUGH_REPLICAS otherwise)."),
    def("preallocate", Boolean, Rule::Boolean, Some("log.preallocate"), |_| "false".into(),
        "Preallocate segment files (accepted; Strand always reserves blocks a little ahead of the active segment's end)."),
    def("remote.copy.lag.bytes", Long, Rule::Long { min: -1 }, Some("log.remote.copy.lag.bytes"), |_| "-1".into(),
        "Tiered storage: a sealed segment is copied once this many bytes of the log are newer (0: at once; -1: local.retention.bytes; either lag passing is enough)."),
    def("remote.copy.lag.ms", Long, Rule::Long { min: -1 }, Some("log.remote.copy.lag.ms"), |_| "0".into(),
        "Tiered storage: a sealed segment is copied once its newest record is this old (0: at once; -1: local.retention.ms; either lag passing is enough)."),
    def("remote.log.copy.disable", Boolean, Rule::Boolean, None, |_| "false".into(),
        "Tiered storage: stop copying; local and remote data then go by retention.ms / retention.bytes."),
    def("remote.log.delete.on.disable", Boolean, Rule::Boolean, None, |_| "false".into(),
        "Tiered storage: delete remote data when tiering is turned off."),
    def("remote.storage.enable", Boolean, Rule::Boolean, None, |_| "false".into(),
        "Tiered storage for this topic: sealed segments copied to the remote store (needs the broker's remote.log.storage.system.enable)."),
    def("retention.bytes", Long, Rule::Long { min: i64::MIN }, Some("log.retention.bytes"), |b| b.retention_bytes.to_string(),
        "The most bytes a partition keeps; older segments are deleted (-1: unlimited)."),
    def("retention.ms", Long, Rule::Long { min: -1 }, Some("log.retention.ms"), |b| b.retention_ms.to_string(),
        "How long a segment is kept after its newest record (-1: forever)."),
    def("segment.bytes", Int, Rule::Int { min: SEGMENT_BYTES_MIN, max: INT_MAX }, Some("log.segment.bytes"), |b| b.segment_bytes.to_string(),
        "The size at which the active segment rolls."),
    def("segment.index.bytes", Int, Rule::Int { min: 4, max: INT_MAX }, Some("log.index.size.max.bytes"), |_| (10 * 1024 * 1024).to_string(),
        "The most bytes of a segment's offset index; a full index rolls the segment."),
    def("segment.jitter.ms", Long, Rule::Long { min: 0 }, None, |_| "0".into(),
        "Each segment rolls up to this much before segment.ms, so partitions do not all roll at once."),
    def("segment.ms", Long, Rule::Long { min: 1 }, Some("log.roll.ms"), |b| b.segment_ms.to_string(),
        "The age at which the active segment rolls."),
    def("unclean.leader.election.enable", Boolean, Rule::Boolean, Some("unclean.leader.election.enable"), |_| "false".into(),
        "Whether a replica outside the ISR may become leader when no in-sync one is left (accepted; Strand elects only from the ISR)."),
];

/// The broker configs whose default Kafka does not list as a synonym (a topic's
/// retention.ms and segment.ms have none in DescribeConfigs: their broker configs come
/// in hours and milliseconds at once).
const UNLISTED_SYNONYMS: &[&str] = &["log.retention.ms", "log.roll.ms"];

/// The definition of `name`, if Kafka has such a topic config.
pub fn topic_config(name: &str) -> Option<&'static TopicConfigDef> {
    TOPIC_CONFIGS.iter().find(|def| def.name == name)
}

/// Checks one config; `Err` carries Kafka's message.
pub fn validate_topic_config(name: &str, value: Option<&str>) -> Result<(), String> {
    let Some(value) = value else {
        return Err(format!(
            "Null value not supported for topic configs: {name}"
        ));
    };
    if name == INTERNAL_SEGMENT_BYTES {
        return check(
            name,
            value,
            Rule::Int {
                min: 14,
                max: INT_MAX,
            },
        );
    }
    let def = topic_config(name).ok_or_else(|| format!("Unknown topic config name: {name}"))?;
    check(name, value, def.rule)
}

/// Kafka's checks of a topic's tiered storage settings taken together (LogConfig's
/// validate): `configs` are the topic's overrides after the change, `before` its overrides
/// before it (None: a new topic).
pub fn validate_tiering(
    broker: &BrokerConfig,
    configs: &BTreeMap<String, String>,
    before: Option<&BTreeMap<String, String>>,
) -> Result<(), String> {
    let value = |name: &str| topic_config_value(broker, configs, name);
    let flag = |name: &str| value(name).trim().eq_ignore_ascii_case("true");
    let long = |name: &str| value(name).trim().parse::<i64>().unwrap_or(i64::MAX);
    let was_enabled = before.is_some_and(|before| {
        topic_config_value(broker, before, "remote.storage.enable")
            .trim()
            .eq_ignore_ascii_case("true")
    });
    if !flag("remote.storage.enable") {
        if was_enabled && !flag("remote.log.delete.on.disable") {
            return Err("It is invalid to disable remote storage without deleting remote data. If you want to keep the remote data and turn to read only, please set `remote.storage.enable=true,remote.log.copy.disable=true`. If you want to disable remote storage and delete all remote data, please set `remote.storage.enable=false,remote.log.delete.on.disable=true`.".into());
        }
        return Ok(());
    }
    if !broker.remote_log_storage_system_enable {
        return Err("Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage.".into());
    }
    if list_items(&value("cleanup.policy")).contains(&"compact") {
        return Err("Remote log storage only supports topics with cleanup.policy=delete or cleanup.policy being an empty list.".into());
    }
    for (total_name, local_name) in [
        ("retention.ms", "local.retention.ms"),
        ("retention.bytes", "local.retention.bytes"),
    ] {
        let (total, local) = (long(total_name), long(local_name));
        if flag("remote.log.copy.disable") && local != -2 && local != total {
            let (local_short, total_short) = (local_name, total_name);
            return Err(format!("When `remote.log.copy.disable` is set to true, the `{local_short}` and `{total_short}` must be set to the identical value because there will be no more logs copied to the remote storage."));
        }
        if total == -1 || local == -2 {
            continue;
        }
        if local == -1 {
            return Err(format!("Invalid value -1 for configuration {local_name}: Value must not be -1 as {total_name} value is set as {total}."));
        }
        if local > total {
            return Err(format!("Invalid value {local} for configuration {local_name}: Value must not be more than {total_name} property value: {total}"));
        }
    }
    // Kafka checks the lags against the effective local retention after the above (its
    // validateRemoteCopyLagSize, then ...Time).
    for (total_name, local_name, lag_name) in [
        (
            "retention.bytes",
            "local.retention.bytes",
            "remote.copy.lag.bytes",
        ),
        ("retention.ms", "local.retention.ms", "remote.copy.lag.ms"),
    ] {
        let effective = match long(local_name) {
            -2 => long(total_name),
            local => local,
        };
        let lag = long(lag_name);
        if lag > 0 && effective >= 0 && lag > effective {
            return Err(format!("Invalid value {lag} for configuration {lag_name}: Value must not exceed {local_name} (effective value: {effective})"));
        }
    }
    Ok(())
}

fn check(name: &str, value: &str, rule: Rule) -> Result<(), String> {
    let invalid = |shown: &str, why: &str| {
        Err(format!(
            "Invalid value {shown} for configuration {name}: {why}"
        ))
    };
    let trimmed = value.trim();
    match rule {
        Rule::Boolean => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => invalid(value, "Expected value to be either true or false"),
        },
        Rule::OneOf(allowed) => {
            if allowed.contains(&trimmed) {
                Ok(())
            } else {
                invalid(
                    value,
                    &format!("String must be one of: {}", allowed.join(", ")),
                )
            }
        }
        Rule::Int { min, max } => match trimmed.parse::<i32>() {
            Ok(n) if i64::from(n) < min => invalid(value, &format!("Value must be at least {min}")),
            Ok(n) if i64::from(n) > max => {
                invalid(value, &format!("Value must be no more than {max}"))
            }
            Ok(_) => Ok(()),
            Err(_) => invalid(value, "Not a number of type INT"),
        },
        Rule::Long { min } => match trimmed.parse::<i64>() {
            Ok(n) if n < min => invalid(value, &format!("Value must be at least {min}")),
            Ok(_) => Ok(()),
            Err(_) => invalid(value, "Not a number of type LONG"),
        },
        Rule::Ratio => match trimmed.parse::<f64>() {
            Ok(ratio) if ratio.is_finite() => {
                if ratio < 0.0 {
                    invalid(&java_double(ratio), "Value must be at least 0")
                } else if ratio > 1.0 {
                    invalid(&java_double(ratio), "Value must be no more than 1")
                } else {
                    Ok(())
                }
            }
            _ => invalid(value, "Not a number of type DOUBLE"),
        },
        Rule::GzipLevel => match trimmed.parse::<i32>() {
            Ok(-1 | 1..=9) => Ok(()),
            Ok(_) => invalid(value, "Value must be between 1 and 9 or equal to -1"),
            Err(_) => invalid(value, "Not a number of type INT"),
        },
        Rule::CleanupPolicy => {
            let policies = list_items(value);
            match policies
                .iter()
                .find(|p| **p != "compact" && **p != "delete")
            {
                Some(bad) => invalid(bad, "String must be one of: compact, delete"),
                None => Ok(()),
            }
        }
        Rule::ThrottledReplicas => {
            let items = list_items(value);
            let replica = |item: &str| {
                item.split_once(':').is_some_and(|(p, b)| {
                    p.trim().parse::<u32>().is_ok() && b.trim().parse::<u32>().is_ok()
                })
            };
            if items == ["*"] || items.iter().all(|item| replica(item)) {
                Ok(())
            } else {
                invalid(
                    &format!("[{}]", items.join(", ")),
                    &format!("{name} must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."),
                )
            }
        }
    }
}

/// A LIST config's items, as Kafka splits them (commas, surrounding blanks trimmed).
fn list_items(value: &str) -> Vec<&str> {
    value
        .split(',')
        .map(str::trim)
        .filter(|item| !item.is_empty())
        .collect()
}

/// A double as Java prints it (`-5.0`, `2.5`): Kafka's messages show the parsed value.
fn java_double(value: f64) -> String {
    if value.fract() == 0.0 && value.abs() < 1e7 {
        format!("{value:.1}")
    } else {
        value.to_string()
    }
}

/// Kafka's ConfigType number of `name` (DescribeConfigs v3+).
pub fn topic_config_type(name: &str) -> i8 {
    topic_config(name).map_or(ConfigType::String, |def| def.config_type) as i8
}

/// One topic config as DescribeConfigs reports it.
pub struct EffectiveConfig {
    pub def: &'static TopicConfigDef,
    pub value: String,
    /// Set on the topic (TOPIC_CONFIG), else the broker's default.
    pub overridden: bool,
    /// The broker config Kafka lists as a synonym, when it does.
    pub broker_synonym: Option<BrokerSynonym>,
}

/// The broker config behind a topic config's default.
pub struct BrokerSynonym {
    pub name: &'static str,
    pub value: String,
    /// Given in the broker's config (STATIC_BROKER_CONFIG), not Kafka's default.
    pub given: bool,
    /// Kafka's own default, listed after a given value (None: not listed).
    pub default: Option<String>,
}

/// The broker names whose setting makes `synonym` given (time configs come in units).
fn given_by(synonym: &str) -> &'static [&'static str] {
    match synonym {
        "log.retention.ms" => &[
            "log.retention.ms",
            "log.retention.minutes",
            "log.retention.hours",
        ],
        "log.roll.ms" => &["log.roll.ms", "log.roll.hours"],
        "log.segment.bytes" => &["log.segment.bytes"],
        "min.insync.replicas" => &["min.insync.replicas"],
        "message.max.bytes" => &["message.max.bytes"],
        "log.retention.bytes" => &["log.retention.bytes"],
        "log.flush.interval.messages" => &["log.flush.interval.messages"],
        _ => &[],
    }
}

/// Every topic config with its effective value for a topic (set or broker default).
pub fn effective_topic_configs(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
) -> Vec<EffectiveConfig> {
    TOPIC_CONFIGS
        .iter()
        .map(|def| {
            let default = (def.default)(broker);
            let broker_synonym = def.synonym.and_then(|name| {
                let given = given_by(name)
                    .iter()
                    .any(|given| broker.explicit.contains(*given));
                let listed = !UNLISTED_SYNONYMS.contains(&name);
                (given || listed).then(|| BrokerSynonym {
                    name,
                    value: default.clone(),
                    given,
                    default: (given && listed).then(|| (def.default)(&BrokerConfig::default())),
                })
            });
            match overrides.get(def.name) {
                Some(value) => EffectiveConfig {
                    def,
                    value: value.clone(),
                    overridden: true,
                    broker_synonym,
                },
                None => EffectiveConfig {
                    def,
                    value: default,
                    overridden: false,
                    broker_synonym,
                },
            }
        })
        .collect()
}

/// The value `name` has for a topic with `overrides`: its own, or the broker default.
pub fn topic_config_value(
    broker: &BrokerConfig,
    overrides: &BTreeMap<String, String>,
    name: &str,
) -> String {
    overrides
        .get(name)
        .cloned()
        .unwrap_or_else(|| topic_config(name).map_or_else(String::new, |def| (def.default)(broker)))
}

/// The log settings for a topic. Configs were validated when set.
pub fn log_config_for(broker: &BrokerConfig, overrides: &BTreeMap<String, String>) -> LogConfig {
    let value = |name: &str| topic_config_value(broker, overrides, name);
    let long = |name: &str| value(name).trim().parse::<i64>().unwrap_or(i64::MAX);
    let flush_messages = long("flush.messages");
    let flush_ms = long("flush.ms");
    let segment_bytes = overrides
        .get(INTERNAL_SEGMENT_BYTES)
        .and_then(|v| v.trim().parse::<i64>().ok())
        .unwrap_or_else(|| long("segment.bytes"));
    let policy = value("cleanup.policy");
    // local.retention.* with -2 resolved to retention.* (-1: unlimited).
    let effective_local = |local: &str, total: &str| match long(local) {
        -2 => long(total),
        value => value,
    };
    let local_ms = effective_local("local.retention.ms", "retention.ms");
    let local_bytes = effective_local("local.retention.bytes", "retention.bytes");
    LogConfig {
        segment_bytes: segment_bytes.max(14) as u64,
        segment_ms: long("segment.ms").max(1),
        segment_jitter_ms: long("segment.jitter.ms").max(0),
        segment_index_bytes: long("segment.index.bytes").max(4) as u64,
        index_interval_bytes: long("index.interval.bytes").max(0) as u64,
        max_message_bytes: long("max.message.bytes").max(0) as usize,
        message_timestamp_type: if value("message.timestamp.type") == "LogAppendTime" {
            TimestampType::LogAppendTime
        } else {
            TimestampType::CreateTime
        },
        message_timestamp_before_max_ms: long("message.timestamp.before.max.ms").max(0),
        message_timestamp_after_max_ms: long("message.timestamp.after.max.ms").max(0),
        // flush.messages=1 is Kafka's "fsync every message": served by group commit.
        durability: if flush_messages <= 1 {
            Durability::FlushBeforeAck
        } else {
            Durability::PageCache
        },
        flush_messages: (flush_messages > 1 && flush_messages != i64::MAX)
            .then_some(flush_messages as u64),
        flush_ms: (flush_ms != i64::MAX).then_some(flush_ms),
        cleanup_delete: list_items(&policy).contains(&"delete"),
        cleanup_compact: list_items(&policy).contains(&"compact"),
        retention_ms: Some(long("retention.ms")).filter(|ms| *ms >= 0),
        retention_bytes: Some(long("retention.bytes"))
            .filter(|bytes| *bytes >= 0)
            .map(|bytes| bytes as u64),
        remote_storage: value("remote.storage.enable")
            .trim()
            .eq_ignore_ascii_case("true"),
        remote_copy_disabled: value("remote.log.copy.disable")
            .trim()
            .eq_ignore_ascii_case("true"),
        local_retention_ms: Some(local_ms).filter(|ms| *ms >= 0),
        local_retention_bytes: Some(local_bytes)
            .filter(|bytes| *bytes >= 0)
            .map(|bytes| bytes as u64),
        remote_copy_lag_ms: Some(match long("remote.copy.lag.ms") {
            -1 => local_ms,
            ms => ms,
        })
        .filter(|ms| *ms >= 0),
        remote_copy_lag_bytes: Some(match long("remote.copy.lag.bytes") {
            -1 => local_bytes,
            bytes => bytes,
        })
        .filter(|bytes| *bytes >= 0)
        .map(|bytes| bytes as u64),
        delete_retention_ms: long("delete.retention.ms").max(0),
        min_compaction_lag_ms: long("min.compaction.lag.ms").max(0),
        max_compaction_lag_ms: long("max.compaction.lag.ms").max(1),
        min_cleanable_dirty_ratio: value("min.cleanable.dirty.ratio")
            .trim()
            .parse()
            .unwrap_or(0.5),
        walk_limits: WalkLimits {
            decompressed_max_bytes: long("max.decompressed.message.bytes").clamp(1, i32::MAX as i64)
                as usize,
        },
        ..LogConfig::default()
    }
}

/// A topic's min.insync.replicas: its own, else the broker's default (start setting or
/// dynamic).
pub fn min_insync_replicas(defaults: &BrokerConfig, overrides: &BTreeMap<String, String>) -> i32 {
    overrides
        .get("min.insync.replicas")
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(defaults.min_insync_replicas)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation_follows_kafka() {
        let err = |name, value| validate_topic_config(name, Some(value)).unwrap_err();
        assert!(validate_topic_config("retention.ms", Some("-1")).is_ok());
        assert_eq!(
            err("retention.ms", "-5"),
            "Invalid value -5 for configuration retention.ms: Value must be at least -1"
        );
        assert_eq!(
            err("segment.bytes", "10"),
            "Invalid value 10 for configuration segment.bytes: Value must be at least 1048576"
        );
        assert!(validate_topic_config(INTERNAL_SEGMENT_BYTES, Some("1000")).is_ok());
        assert_eq!(
            err("segment.bytes", "1.5"),
            "Invalid value 1.5 for configuration segment.bytes: Not a number of type INT"
        );
        assert!(validate_topic_config("retention.bytes", Some("-5")).is_ok());
        assert!(validate_topic_config("cleanup.policy", Some("compact,delete")).is_ok());
        assert!(validate_topic_config("cleanup.policy", Some("")).is_ok());
        assert_eq!(
            err("cleanup.policy", "bogus,other"),
            "Invalid value bogus for configuration cleanup.policy: String must be one of: compact, delete"
        );
        assert_eq!(
            err("no.such.config", "1"),
            "Unknown topic config name: no.such.config"
        );
        assert_eq!(
            validate_topic_config("retention.ms", None).unwrap_err(),
            "Null value not supported for topic configs: retention.ms"
        );
        assert!(validate_topic_config("preallocate", Some("FALSE")).is_ok());
        assert_eq!(
            err("preallocate", "yes"),
            "Invalid value yes for configuration preallocate: Expected value to be either true or false"
        );
        assert_eq!(
            err("min.cleanable.dirty.ratio", "-5"),
            "Invalid value -5.0 for configuration min.cleanable.dirty.ratio: Value must be at least 0"
        );
        assert_eq!(
            err("min.cleanable.dirty.ratio", "2.5"),
            "Invalid value 2.5 for configuration min.cleanable.dirty.ratio: Value must be no more than 1"
        );
        assert_eq!(
            err("compression.gzip.level", "-5"),
            "Invalid value -5 for configuration compression.gzip.level: Value must be between 1 and 9 or equal to -1"
        );
        assert!(validate_topic_config("compression.zstd.level", Some("-5")).is_ok());
        assert!(
            validate_topic_config("leader.replication.throttled.replicas", Some("0:1, 1:2"))
                .is_ok()
        );
        assert!(validate_topic_config("leader.replication.throttled.replicas", Some("*")).is_ok());
        assert_eq!(
            err("follower.replication.throttled.replicas", "bogus,other"),
            "Invalid value [bogus, other] for configuration follower.replication.throttled.replicas: follower.replication.throttled.replicas must be the literal '*' or a list of replicas in the following format: [partitionId]:[brokerId],[partitionId]:[brokerId],..."
        );
        assert!(validate_topic_config("remote.storage.enable", Some("true")).is_ok());
        assert_eq!(topic_config_type("preallocate"), 1);
        assert_eq!(topic_config_type("cleanup.policy"), 7);
    }

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn tiering_is_checked_as_kafka_checks_it() {
        let off = BrokerConfig::default();
        let on = BrokerConfig {
            remote_log_storage_system_enable: true,
            ..BrokerConfig::default()
        };
        let tiered = configs(&[("remote.storage.enable", "true")]);
        assert_eq!(
            validate_tiering(&off, &tiered, None).unwrap_err(),
            "Tiered Storage functionality is disabled in the broker. Topic cannot be configured with remote log storage."
        );
        assert!(validate_tiering(&on, &tiered, None).is_ok());
        assert!(validate_tiering(&off, &configs(&[]), None).is_ok());
        let compacted = configs(&[
            ("remote.storage.enable", "true"),
            ("cleanup.policy", "compact,delete"),
        ]);
        assert!(validate_tiering(&on, &compacted, None)
            .unwrap_err()
            .starts_with("Remote log storage only supports topics with cleanup.policy=delete"));
        let local_longer = configs(&[
            ("remote.storage.enable", "true"),
            ("retention.ms", "1000"),
            ("local.retention.ms", "2000"),
        ]);
        assert_eq!(
            validate_tiering(&on, &local_longer, None).unwrap_err(),
            "Invalid value 2000 for configuration local.retention.ms: Value must not be more than retention.ms property value: 1000"
        );
        let local_forever = configs(&[
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "-1"),
        ]);
        assert_eq!(
            validate_tiering(&on, &local_forever, None).unwrap_err(),
            "Invalid value -1 for configuration local.retention.ms: Value must not be -1 as retention.ms value is set as 604800000."
        );
        let copy_off = configs(&[
            ("remote.storage.enable", "true"),
            ("remote.log.copy.disable", "true"),
            ("local.retention.bytes", "10"),
            ("retention.bytes", "100"),
        ]);
        assert!(validate_tiering(&on, &copy_off, None)
            .unwrap_err()
            .starts_with("When `remote.log.copy.disable` is set to true, the `local.retention.bytes` and `retention.bytes`"));
        // Turning it off keeps nothing remote: only with remote.log.delete.on.disable.
        let turned_off = configs(&[("remote.storage.enable", "false")]);
        assert!(validate_tiering(&on, &turned_off, Some(&tiered))
            .unwrap_err()
            .starts_with("It is invalid to disable remote storage without deleting remote data."));
        let deleting = configs(&[
            ("remote.storage.enable", "false"),
            ("remote.log.delete.on.disable", "true"),
        ]);
        assert!(validate_tiering(&on, &deleting, Some(&tiered)).is_ok());
        let log = log_config_for(
            &on,
            &configs(&[
                ("remote.storage.enable", "TRUE"),
                ("retention.ms", "5000"),
                ("local.retention.bytes", "77"),
            ]),
        );
        assert!(log.remote_storage && log.tiered());
        assert_eq!(log.local_retention_ms, Some(5000), "-2 is retention.ms");
        assert_eq!(log.local_retention_bytes, Some(77));
        assert_eq!(
            log.remote_copy_lag_ms,
            Some(0),
            "Kafka's default: copy at once"
        );
        assert_eq!(
            log.remote_copy_lag_bytes,
            Some(77),
            "-1 is local.retention.bytes"
        );
    }

    #[test]
    fn remote_copy_lags_are_checked_and_resolved_as_kafka_does() {
        let on = BrokerConfig {
            remote_log_storage_system_enable: true,
            ..BrokerConfig::default()
        };
        let lag_over_local = configs(&[
            ("remote.storage.enable", "true"),
            ("local.retention.ms", "1000"),
            ("remote.copy.lag.ms", "2000"),
        ]);
        assert_eq!(
            validate_tiering(&on, &lag_over_local, None).unwrap_err(),
            "Invalid value 2000 for configuration remote.copy.lag.ms: Value must not exceed local.retention.ms (effective value: 1000)"
        );
        // -2 local: the total retention is the bound.
        let lag_over_total = configs(&[
            ("remote.storage.enable", "true"),
            ("retention.bytes", "100"),
            ("remote.copy.lag.bytes", "101"),
        ]);
        assert_eq!(
            validate_tiering(&on, &lag_over_total, None).unwrap_err(),
            "Invalid value 101 for configuration remote.copy.lag.bytes: Value must not exceed local.retention.bytes (effective value: 100)"
        );
        // Unlimited local retention bounds nothing.
        let unbounded = configs(&[
            ("remote.storage.enable", "true"),
            ("remote.copy.lag.bytes", "1000000000"),
        ]);
        assert!(validate_tiering(&on, &unbounded, None).is_ok());
        let lagging = log_config_for(
            &on,
            &configs(&[
                ("remote.storage.enable", "true"),
                ("local.retention.ms", "60000"),
                ("remote.copy.lag.ms", "-1"),
                ("remote.copy.lag.bytes", "4096"),
            ]),
        );
        assert_eq!(
            lagging.remote_copy_lag_ms,
            Some(60_000),
            "-1 is local.retention.ms"
        );
        assert_eq!(lagging.remote_copy_lag_bytes, Some(4096));
        // -1 under unlimited local retention: that check never passes (Kafka's).
        let never = log_config_for(
            &on,
            &configs(&[
                ("remote.storage.enable", "true"),
                ("retention.ms", "-1"),
                ("remote.copy.lag.ms", "-1"),
            ]),
        );
        assert_eq!(
            (never.remote_copy_lag_ms, never.remote_copy_lag_bytes),
            (None, None)
        );
    }

    #[test]
    fn every_kafka_4_4_topic_config_is_known_with_a_valid_default() {
        assert_eq!(TOPIC_CONFIGS.len(), 37, "Kafka 4.4 lists 37 topic configs");
        let broker = BrokerConfig::default();
        for def in TOPIC_CONFIGS {
            let default = (def.default)(&broker);
            validate_topic_config(def.name, Some(&default))
                .unwrap_or_else(|e| panic!("{}'s default {default:?}: {e}", def.name));
        }
        let names: Vec<&str> = TOPIC_CONFIGS.iter().map(|d| d.name).collect();
        let mut sorted = names.clone();
        sorted.sort_unstable();
        assert_eq!(names, sorted, "in Kafka's order");
    }

    #[test]
    fn new_configs_reach_the_log() {
        let broker = BrokerConfig::default();
        let overrides: BTreeMap<String, String> = [
            ("message.timestamp.after.max.ms", "10"),
            ("message.timestamp.before.max.ms", "20"),
            ("segment.jitter.ms", "30"),
            ("max.compaction.lag.ms", "40"),
            ("max.decompressed.message.bytes", "50"),
            (INTERNAL_SEGMENT_BYTES, "1000"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        let log = log_config_for(&broker, &overrides);
        assert_eq!(log.message_timestamp_after_max_ms, 10);
        assert_eq!(log.message_timestamp_before_max_ms, 20);
        assert_eq!(log.segment_jitter_ms, 30);
        assert_eq!(log.max_compaction_lag_ms, 40);
        assert_eq!(log.walk_limits.decompressed_max_bytes, 50);
        assert_eq!(log.segment_bytes, 1000);
        let defaults = log_config_for(&broker, &BTreeMap::new());
        assert_eq!(defaults.message_timestamp_after_max_ms, 3_600_000);
        assert_eq!(defaults.walk_limits.decompressed_max_bytes, 2_147_483_639);
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
