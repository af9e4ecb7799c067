//! Dynamic broker configs, as `kafka-configs --entity-type brokers` sets them: per broker
//! (`--entity-name 1`) or cluster-wide (`--entity-default`, the BROKER resource ""). The
//! checks are Kafka's (DynamicBrokerConfig.validateConfigs), in its order and words, with
//! its table of which names may change at runtime (kafka_broker_configs.tsv, generated
//! from Kafka 4.4.0):
//!
//! - a name Kafka reads only at start: INVALID_REQUEST "Cannot update these configs
//!   dynamically: [names]";
//! - an ssl.* setting without its listener prefix: INVALID_REQUEST;
//! - a value not of the config's type (or below its minimum): INVALID_REQUEST with Kafka's
//!   "Invalid value ..." message;
//! - a per-broker name on the cluster default: INVALID_REQUEST.
//!
//! Names Kafka does not know are accepted and stored, as Kafka accepts custom configs.
//!
//! What Strand does with them: the replication throttles take effect at once
//! (`replication_throttle.rs`), and so do the topic defaults message.max.bytes,
//! log.segment.bytes, log.retention.bytes, log.retention.ms and log.roll.ms
//! (`TOPIC_DEFAULTS`: every topic without its own value gets the new log settings, and
//! DescribeConfigs lists the dynamic values first as Kafka does). Kafka's other dynamic
//! names that Strand implements only as start settings (log.flush.interval.messages, the
//! connection limits, listeners, ...) are refused with a message saying so rather than
//! stored without effect. The other names Kafka may change
//! at runtime tune parts Strand does not have (num.io.threads, log.cleaner.threads,
//! background.threads, ...): stored and reported, as Kafka would, with no effect.
//!
//! Where they live: in a cluster, the metadata log (`SetBrokerConfigs`), so every broker
//! and every restart sees them; on a single node, `dynamic_broker_configs.json` in the
//! data directory.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, RwLock};

use serde::{Deserialize, Serialize};
use strand_metadata::{eligible_leaders, ControllerCommand};

use crate::broker::{ApiError, Broker};
use crate::broker_configs::broker_config;
use crate::config::BrokerConfig;
use crate::error_code;
use crate::local_json;
use crate::replication_throttle::ReplicationThrottle;
use crate::topic_config::ConfigType;

/// The single node's file of dynamic configs.
pub const DYNAMIC_CONFIGS_FILE: &str = "dynamic_broker_configs.json";

/// leader.replication.throttled.rate: bytes/s a leader sends to throttled replicas.
pub const LEADER_THROTTLED_RATE: &str = "leader.replication.throttled.rate";
/// follower.replication.throttled.rate: bytes/s a follower fetches for throttled replicas.
pub const FOLLOWER_THROTTLED_RATE: &str = "follower.replication.throttled.rate";

/// Broker configs that are the defaults of topic configs (max.message.bytes,
/// segment.bytes, retention.bytes): set dynamically, they reach every topic without its
/// own value at once, as on Kafka.
pub const TOPIC_DEFAULTS: &[&str] = &[
    "message.max.bytes",
    "log.segment.bytes",
    "log.retention.bytes",
    "min.insync.replicas",
    // Kafka takes only the finest unit at runtime (log.retention.hours and .minutes,
    // log.roll.hours are start settings there), and a dynamic one wins over any given unit.
    "log.retention.ms",
    "log.roll.ms",
];

/// The unit Kafka's default of a time topic default is given in (it lists that default
/// behind a dynamic value): log.retention.hours=168, log.roll.hours=168.
pub fn coarsest_unit(name: &str) -> Option<&'static str> {
    match name {
        "log.retention.ms" => Some("log.retention.hours"),
        "log.roll.ms" => Some("log.roll.hours"),
        _ => None,
    }
}

/// The replication throttles' rates.
const THROTTLE_RATES: &[&str] = &[LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE];

/// Dynamic configs Strand applies while running.
fn applied_live(name: &str) -> bool {
    THROTTLE_RATES.contains(&name) || TOPIC_DEFAULTS.contains(&name)
}

/// Kafka's minimum for configs Strand applies (the quota rates are at least 0).
fn minimum(name: &str) -> Option<i64> {
    THROTTLE_RATES.contains(&name).then_some(0)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpdateMode {
    /// Read at start only.
    Static,
    /// On a broker or as the cluster default.
    ClusterWide,
    /// On a broker only.
    PerBroker,
}

#[derive(Debug, Clone)]
pub struct KafkaBrokerConfig {
    /// Kafka's type name (INT, LONG, ...; UNKNOWN where the capture has none).
    pub type_name: &'static str,
    pub mode: UpdateMode,
    /// The DEFAULT_CONFIG value Kafka describes (None: it describes none).
    pub default: Option<String>,
}

/// Kafka 4.4.0's broker configs by name.
pub static KAFKA_BROKER_CONFIGS: LazyLock<HashMap<&'static str, KafkaBrokerConfig>> =
    LazyLock::new(|| {
        include_str!("kafka_broker_configs.tsv")
            .lines()
            .filter(|line| !line.starts_with('#') && !line.trim().is_empty())
            .filter_map(|line| {
                let mut fields = line.split('\t');
                let name = fields.next()?;
                let type_name = fields.next()?;
                let mode = match fields.next()? {
                    "cluster-wide" => UpdateMode::ClusterWide,
                    "per-broker" => UpdateMode::PerBroker,
                    _ => UpdateMode::Static,
                };
                let default = fields
                    .next()
                    .and_then(|json| serde_json::from_str::<Option<String>>(json).ok())
                    .flatten();
                Some((
                    name,
                    KafkaBrokerConfig {
                        type_name,
                        mode,
                        default,
                    },
                ))
            })
            .collect()
    });

/// The config a `listener.name.<listener>.<config>` name sets for one listener.
pub fn listener_base(name: &str) -> Option<&str> {
    name.strip_prefix("listener.name.")
        .and_then(|rest| rest.split_once('.'))
        .map(|(_, base)| base)
}

/// Kafka's DescribeConfigs type code for a broker config (0: unknown); a listener-prefixed
/// name has its base config's.
pub fn config_type_code(name: &str) -> i8 {
    let name = listener_base(name).unwrap_or(name);
    match KAFKA_BROKER_CONFIGS
        .get(name)
        .map_or("UNKNOWN", |c| c.type_name)
    {
        "BOOLEAN" => 1,
        "STRING" => 2,
        "INT" => 3,
        "SHORT" => 4,
        "LONG" => 5,
        "DOUBLE" => 6,
        "LIST" => 7,
        "CLASS" => 8,
        "PASSWORD" => 9,
        _ => 0,
    }
}

/// How `name` may be updated: a `listener.name.<listener>.<config>` form is dynamic (per
/// broker, except the cluster-level connection limits), others by Kafka's table.
fn update_mode(name: &str) -> Option<UpdateMode> {
    if name.starts_with("listener.name.") {
        let base = listener_base(name).unwrap_or("");
        let cluster_level = [
            "max.connections",
            "max.connection.creation.rate",
            "num.network.threads",
        ];
        return Some(if cluster_level.contains(&base) {
            UpdateMode::ClusterWide
        } else {
            UpdateMode::PerBroker
        });
    }
    KAFKA_BROKER_CONFIGS.get(name).map(|c| c.mode)
}

/// Kafka's rendering of a set of names: `[a, b]`.
fn listed(names: &[&str]) -> String {
    format!("[{}]", names.join(", "))
}

fn invalid(message: String) -> ApiError {
    ApiError::new(error_code::INVALID_REQUEST, message)
}

/// Checks the configs a BROKER resource is to have (its whole new set), as Kafka does.
pub fn validate(configs: &BTreeMap<String, String>, cluster_default: bool) -> Result<(), ApiError> {
    let names: Vec<&str> = configs.keys().map(String::as_str).collect();
    let read_at_start: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| update_mode(name) == Some(UpdateMode::Static))
        .collect();
    if !read_at_start.is_empty() {
        return Err(invalid(format!(
            "Cannot update these configs dynamically: {}",
            listed(&read_at_start)
        )));
    }
    let unprefixed_security: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| name.starts_with("ssl.") && update_mode(name) == Some(UpdateMode::PerBroker))
        .collect();
    if !unprefixed_security.is_empty() {
        return Err(invalid(format!(
            "These security configs can be dynamically updated only per-listener using the listener prefix: {}",
            listed(&unprefixed_security)
        )));
    }
    for (name, value) in configs {
        check_type(name, value).map_err(|why| {
            invalid(format!(
                "Invalid value {value} for configuration {name}: {why}"
            ))
        })?;
    }
    if cluster_default {
        let per_broker: Vec<&str> = names
            .iter()
            .copied()
            .filter(|name| update_mode(name) == Some(UpdateMode::PerBroker))
            .collect();
        if !per_broker.is_empty() {
            return Err(invalid(format!(
                "Cannot update these configs at default cluster level, broker id must be specified: {}",
                listed(&per_broker)
            )));
        }
    }
    // Kafka would take these at runtime; Strand reads them at start only (so far).
    let start_only: Vec<&str> = names
        .iter()
        .copied()
        .filter(|name| broker_config(name).is_some() && !applied_live(name))
        .collect();
    if !start_only.is_empty() {
        return Err(invalid(format!(
            "Strand reads these configs at start only: set them in server.properties and \
             restart: {}",
            listed(&start_only)
        )));
    }
    Ok(())
}

/// A value of the config's Kafka type, at least its minimum, and (for configs Strand
/// implements, and those with a topic config of the same name and rule, such as
/// compression.type) passing the same check as at start.
fn check_type(name: &str, value: &str) -> Result<(), String> {
    // Strand's own checks of numbers and booleans (Kafka's ranges and words); lists such as
    // listeners are refused later as start settings, unchecked here: checking them would
    // resolve host names a client chose.
    if let Some(def) = broker_config(name).filter(|def| def.config_type != ConfigType::List) {
        return def.check(value);
    }
    if matches!(
        name,
        "compression.type"
            | "compression.gzip.level"
            | "compression.lz4.level"
            | "compression.zstd.level"
    ) {
        let prefix = format!("Invalid value {value} for configuration {name}: ");
        return crate::topic_config::validate_topic_config(name, Some(value)).map_err(|message| {
            message
                .strip_prefix(&prefix)
                .unwrap_or(&message)
                .to_string()
        });
    }
    let type_name = KAFKA_BROKER_CONFIGS
        .get(name)
        .map_or("UNKNOWN", |c| c.type_name);
    let number = |parsed: Option<i64>| -> Result<(), String> {
        let Some(number) = parsed else {
            return Err(format!("Not a number of type {type_name}"));
        };
        match minimum(name) {
            Some(min) if number < min => Err(format!("Value must be at least {min}")),
            _ => Ok(()),
        }
    };
    let trimmed = value.trim();
    match type_name {
        "INT" => number(trimmed.parse::<i32>().ok().map(i64::from)),
        "SHORT" => number(trimmed.parse::<i16>().ok().map(i64::from)),
        "LONG" => number(trimmed.parse::<i64>().ok()),
        "DOUBLE" => trimmed
            .parse::<f64>()
            .map(|_| ())
            .map_err(|_| "Not a number of type DOUBLE".into()),
        "BOOLEAN" => match trimmed.to_ascii_lowercase().as_str() {
            "true" | "false" => Ok(()),
            _ => Err("Expected value to be either true or false".into()),
        },
        _ => Ok(()),
    }
}

/// The dynamic configs a single node keeps (a cluster keeps them in its metadata log).
#[derive(Debug, Default, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LocalDynamicConfigs {
    /// The cluster-wide default entity's.
    #[serde(default)]
    pub default: BTreeMap<String, String>,
    /// This broker's own.
    #[serde(default)]
    pub broker: BTreeMap<String, String>,
}

impl LocalDynamicConfigs {
    pub fn path(data_dir: &Path) -> PathBuf {
        data_dir.join(DYNAMIC_CONFIGS_FILE)
    }

    /// This broker's effective dynamic configs: its own over the defaults.
    pub fn effective(&self) -> BTreeMap<String, String> {
        let mut configs = self.default.clone();
        configs.extend(self.broker.clone());
        configs
    }
}

/// A broker's dynamic configs as they stand, and what applies them.
#[derive(Debug, Default)]
pub struct DynamicConfigs {
    /// This broker's effective set (its own over the cluster defaults).
    effective: RwLock<BTreeMap<String, String>>,
    /// On a single node, the stored sets (a cluster's are in its image); never held across
    /// a file write.
    local: Mutex<LocalDynamicConfigs>,
    /// One change at a time writes the file.
    writer: tokio::sync::Mutex<()>,
    /// What this broker sends to throttled followers as their leader.
    pub leader_throttle: ReplicationThrottle,
    /// What this broker fetches for its throttled replicas (its fetchers share it).
    pub follower_throttle: Arc<ReplicationThrottle>,
}

impl DynamicConfigs {
    /// A single node's, from its data directory; a cluster member's start empty and
    /// follow the image.
    pub fn open(data_dir: &Path, single_node: bool) -> anyhow::Result<DynamicConfigs> {
        let configs = DynamicConfigs::default();
        if single_node {
            let local: LocalDynamicConfigs =
                local_json::load(&LocalDynamicConfigs::path(data_dir))?;
            configs.apply(local.effective());
            *configs.local.lock().unwrap_or_else(|p| p.into_inner()) = local;
        }
        Ok(configs)
    }

    /// Takes a new effective set: the throttles change at once. Returns whether a topic
    /// default changed (the topics' log settings are then computed again).
    pub fn apply(&self, effective: BTreeMap<String, String>) -> bool {
        self.leader_throttle
            .set_rate(effective.get(LEADER_THROTTLED_RATE).map(String::as_str));
        self.follower_throttle
            .set_rate(effective.get(FOLLOWER_THROTTLED_RATE).map(String::as_str));
        let mut current = self.effective.write().unwrap_or_else(|p| p.into_inner());
        let changed = TOPIC_DEFAULTS
            .iter()
            .any(|name| current.get(*name) != effective.get(*name));
        *current = effective;
        changed
    }

    /// `base` (the settings given at start) with the topic defaults set dynamically.
    pub fn topic_defaults(&self, base: &BrokerConfig) -> BrokerConfig {
        let mut config = base.clone();
        for name in TOPIC_DEFAULTS {
            if let (Some(value), Some(def)) = (self.get(name), broker_config(name)) {
                // Checked when it was set; a value that fails now keeps the start's.
                if let Err(why) = def.set_value(&mut config, &value) {
                    tracing::warn!(name, value, why, "dynamic broker config not applied");
                }
            }
        }
        config
    }

    /// The effective value of `name`, if set dynamically.
    pub fn get(&self, name: &str) -> Option<String> {
        self.effective
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .get(name)
            .cloned()
    }
}

impl Broker {
    /// The dynamic configs stored for a BROKER resource: this broker's own (`Some(id)`)
    /// or the cluster default (`None`).
    pub fn dynamic_configs_of(&self, broker: Option<i32>) -> BTreeMap<String, String> {
        if let Some(cluster) = self.cluster() {
            let image = cluster.image();
            return match broker {
                None => image.default_broker_configs.clone(),
                Some(id) => image.broker_configs.get(&id).cloned().unwrap_or_default(),
            };
        }
        let local = self.dynamic.local.lock().unwrap_or_else(|p| p.into_inner());
        match broker {
            None => local.default.clone(),
            Some(_) => local.broker.clone(),
        }
    }

    /// Replaces a BROKER resource's dynamic configs after Kafka's checks: in a cluster
    /// through the controller (answered once this broker's image has them), on a single
    /// node in its file.
    pub async fn set_dynamic_configs(
        &self,
        broker: Option<i32>,
        configs: BTreeMap<String, String>,
        validate_only: bool,
    ) -> Result<(), ApiError> {
        validate(&configs, broker.is_none())?;
        let min_isr = eligible_leaders::MIN_INSYNC_REPLICAS;
        let current = self.dynamic_configs_of(broker);
        eligible_leaders::check_min_isr_config(
            eligible_leaders::enabled(&self.finalized_features()),
            broker,
            current.get(min_isr).map(String::as_str),
            configs.get(min_isr).map(String::as_str),
        )
        .map_err(|message| ApiError::new(error_code::INVALID_CONFIG, message))?;
        if validate_only {
            return Ok(());
        }
        if let Some(cluster) = self.cluster() {
            let wanted = configs.clone();
            let command = ControllerCommand::SetBrokerConfigs { broker, configs };
            return cluster
                .write_and_wait(command, |image| match broker {
                    None => image.default_broker_configs == wanted,
                    Some(id) => {
                        image.broker_configs.get(&id).cloned().unwrap_or_default() == wanted
                    }
                })
                .await;
        }
        let _writer = self.dynamic.writer.lock().await;
        let mut next = self
            .dynamic
            .local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        match broker {
            None => next.default = configs,
            Some(_) => next.broker = configs,
        }
        let path = LocalDynamicConfigs::path(&self.config.data_dir);
        local_json::store(path, &next, "dynamic configs").await?;
        let defaults_changed = self.dynamic.apply(next.effective());
        *self.dynamic.local.lock().unwrap_or_else(|p| p.into_inner()) = next;
        if defaults_changed {
            self.reapply_topic_configs();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn configs(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn message(pairs: &[(&str, &str)], cluster_default: bool) -> Option<String> {
        validate(&configs(pairs), cluster_default)
            .err()
            .map(|e| e.message.unwrap_or_default())
    }

    /// Kafka 4.4.0's answers, from interop/kafka/reference-4.4/broker_configs.json.
    #[test]
    fn kafkas_checks_in_kafkas_words() {
        let cases: &[(&str, &str, bool, Option<&str>)] = &[
            ("log.dirs", "/x", false, Some("Cannot update these configs dynamically: [log.dirs]")),
            ("node.id", "1", true, Some("Cannot update these configs dynamically: [node.id]")),
            ("num.partitions", "2", false, Some("Cannot update these configs dynamically: [num.partitions]")),
            ("log.cleaner.threads", "abc", false, Some("Invalid value abc for configuration log.cleaner.threads: Not a number of type INT")),
            ("log.retention.bytes", "abc", false, Some("Invalid value abc for configuration log.retention.bytes: Not a number of type LONG")),
            ("ssl.keystore.type", "PKCS12", false, Some("These security configs can be dynamically updated only per-listener using the listener prefix: [ssl.keystore.type]")),
            ("cordoned.log.dirs", "", true, Some("Cannot update these configs at default cluster level, broker id must be specified: [cordoned.log.dirs]")),
            ("cordoned.log.dirs", "", false, None),
            ("leader.replication.throttled.rate", "1000", true, None),
            ("follower.replication.throttled.rate", "1000", false, None),
            ("leader.replication.throttled.rate", "-1", false, Some("Invalid value -1 for configuration leader.replication.throttled.rate: Value must be at least 0")),
            ("num.io.threads", "8", true, None),
            ("listener.name.plaintext.max.connections", "1000", true, None),
            ("no.such.broker.config", "1", true, None),
            ("leader.replication.throttled.replicas", "*", false, None),
            ("compression.type", "bogus", true, Some("Invalid value bogus for configuration compression.type: String must be one of: uncompressed, zstd, lz4, snappy, gzip, producer")),
            ("message.max.bytes", "-5", false, Some("Invalid value -5 for configuration message.max.bytes: Value must be at least 0")),
        ];
        for (name, value, cluster_default, expected) in cases {
            assert_eq!(
                message(&[(name, value)], *cluster_default).as_deref(),
                *expected,
                "{name}={value}"
            );
        }
    }

    #[test]
    fn start_settings_strand_cannot_change_live_are_refused_not_ignored() {
        let refused = message(&[("log.cleaner.backoff.ms", "2000")], false).unwrap();
        assert!(refused.contains("[log.cleaner.backoff.ms]"), "{refused}");
        // Kafka takes only the finest unit of a time at runtime.
        let refused = message(&[("log.retention.hours", "1")], true).unwrap();
        assert!(
            refused.contains("Cannot update these configs dynamically"),
            "{refused}"
        );
        // The topic defaults are taken live.
        for name in TOPIC_DEFAULTS {
            assert_eq!(message(&[(name, "2000000")], false), None, "{name}");
        }
    }

    #[tokio::test]
    async fn a_single_nodes_configs_survive_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let path = LocalDynamicConfigs::path(dir.path());
        let mut local: LocalDynamicConfigs = local_json::load(&path).unwrap();
        assert_eq!(local, LocalDynamicConfigs::default());
        local.default = configs(&[(LEADER_THROTTLED_RATE, "10")]);
        local.broker = configs(&[(LEADER_THROTTLED_RATE, "20"), ("num.io.threads", "4")]);
        local_json::store(path.clone(), &local, "dynamic configs")
            .await
            .unwrap();
        let loaded: LocalDynamicConfigs = local_json::load(&path).unwrap();
        assert_eq!(loaded, local);
        assert_eq!(loaded.effective()[LEADER_THROTTLED_RATE], "20");
    }
}
