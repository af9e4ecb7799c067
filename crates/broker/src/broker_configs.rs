//! Broker settings by Kafka's names: one table ([`BROKER_CONFIGS`]) saying which Kafka
//! broker config sets which `BrokerConfig` field (and its TOML key), how its value is
//! checked, and how DescribeConfigs reports it. `strand serve --config server.properties`
//! reads a Kafka server.properties through it: the names Strand implements take effect,
//! the others are listed in one warning, and a nonsense value stops the start with the
//! name and Kafka's message.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};

use crate::config::{BrokerConfig, ExtraListener, FlushMode};
use crate::topic_config::ConfigType;

/// The properties of a server.properties file, by name.
pub type Properties = BTreeMap<String, String>;

/// One Kafka broker config Strand implements.
pub struct BrokerConfigDef {
    pub name: &'static str,
    /// The key of the same setting in Strand's TOML config file.
    pub toml_key: &'static str,
    pub config_type: ConfigType,
    /// Applies a value (with the whole file, for settings that read others); Err(why).
    set: fn(&mut BrokerConfig, &str, &Properties) -> Result<(), String>,
    /// The value DescribeConfigs reports (None: null, as Kafka shows an unset one).
    get: fn(&BrokerConfig) -> Option<String>,
}

/// Finer units of a time Kafka reports as null unless they were given themselves (its
/// defaults live in the coarsest: log.retention.hours=168, log.roll.hours=168).
const NULL_UNLESS_GIVEN: &[&str] = &["log.retention.ms", "log.retention.minutes", "log.roll.ms"];

impl BrokerConfigDef {
    /// Checks a value as the start does (on a scratch config): Err(Kafka's reason).
    pub fn check(&self, value: &str) -> Result<(), String> {
        self.set_value(&mut BrokerConfig::default(), value)
    }

    /// Sets `value` on `config` (a dynamic value over the start's): Err(Kafka's reason).
    pub fn set_value(&self, config: &mut BrokerConfig, value: &str) -> Result<(), String> {
        (self.set)(config, value, &Properties::new())
    }

    /// The value DescribeConfigs reports for `config`.
    pub fn value(&self, config: &BrokerConfig) -> Option<String> {
        if NULL_UNLESS_GIVEN.contains(&self.name) && !config.explicit.contains(self.name) {
            return None;
        }
        (self.get)(config)
    }
}

fn parse<T: std::str::FromStr>(value: &str, type_name: &str) -> Result<T, String> {
    value
        .trim()
        .parse()
        .map_err(|_| format!("Not a number of type {type_name}"))
}

fn boolean(value: &str) -> Result<bool, String> {
    match value.trim().to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err("Expected value to be either true or false".into()),
    }
}

fn at_least<T: PartialOrd + std::fmt::Display>(value: T, min: T) -> Result<T, String> {
    if value < min {
        Err(format!("Value must be at least {min}"))
    } else {
        Ok(value)
    }
}

/// A numeric or boolean setting stored in one field.
macro_rules! field {
    ($name:literal, $field:ident, Int, $min:expr) => {
        BrokerConfigDef {
            name: $name,
            toml_key: stringify!($field),
            config_type: ConfigType::Int,
            set: |c, v, _| {
                c.$field = at_least(parse::<i64>(v, "INT")?, $min)?
                    .try_into()
                    .map_err(|_| "Not a number of type INT".to_string())?;
                Ok(())
            },
            get: |c| Some(c.$field.to_string()),
        }
    };
    ($name:literal, $field:ident, Long, $min:expr) => {
        BrokerConfigDef {
            name: $name,
            toml_key: stringify!($field),
            config_type: ConfigType::Long,
            set: |c, v, _| {
                c.$field = at_least(parse::<i64>(v, "LONG")?, $min)?
                    .try_into()
                    .map_err(|_| "Not a number of type LONG".to_string())?;
                Ok(())
            },
            get: |c| Some(c.$field.to_string()),
        }
    };
    ($name:literal, $field:ident, Boolean) => {
        BrokerConfigDef {
            name: $name,
            toml_key: stringify!($field),
            config_type: ConfigType::Boolean,
            set: |c, v, _| {
                c.$field = boolean(v)?;
                Ok(())
            },
            get: |c| Some(c.$field.to_string()),
        }
    };
}

/// A time setting Kafka also takes in coarser units (log.retention.hours / .minutes / .ms):
/// the finest given wins, as in Kafka.
macro_rules! scaled_ms {
    ($name:literal, $field:ident, $factor:expr, $finer:expr) => {
        BrokerConfigDef {
            name: $name,
            toml_key: stringify!($field),
            config_type: ConfigType::Long,
            set: |c, v, props| {
                let given: i64 = parse(v, "LONG")?;
                let finer: &[&str] = $finer;
                if !finer.iter().any(|name| props.contains_key(*name)) {
                    c.$field = if given < 0 {
                        -1
                    } else {
                        given.saturating_mul($factor)
                    };
                }
                Ok(())
            },
            get: |c| {
                let ms: i64 = c.$field;
                if $factor == 1 {
                    Some(ms.to_string())
                } else if ms < 0 {
                    Some("-1".into())
                } else {
                    Some((ms / $factor).to_string())
                }
            },
        }
    };
}

const HOUR_MS: i64 = 3_600_000;

/// The authorizer Kafka's authorizer.class.name names to turn ACLs on.
pub const STANDARD_AUTHORIZER: &str = "org.apache.kafka.metadata.authorizer.StandardAuthorizer";

/// The Kafka broker configs Strand implements, in the order a file is applied.
pub const BROKER_CONFIGS: &[BrokerConfigDef] = &[
    BrokerConfigDef {
        name: "authorizer.class.name",
        toml_key: "authorizer_class_name",
        config_type: ConfigType::String,
        set: |c, v, _| {
            let v = v.trim();
            if !v.is_empty() && v != STANDARD_AUTHORIZER {
                return Err(format!(
                    "Class {v} cannot be found (Strand's authorizer is {STANDARD_AUTHORIZER})"
                ));
            }
            c.authorizer_class_name = v.to_string();
            Ok(())
        },
        get: |c| Some(c.authorizer_class_name.clone()),
    },
    field!("node.id", node_id, Int, 0),
    field!("broker.id", node_id, Int, 0),
    BrokerConfigDef {
        name: "process.roles",
        toml_key: "process_roles",
        config_type: ConfigType::List,
        set: |c, v, _| {
            c.process_roles = Some(v.trim().to_string());
            Ok(())
        },
        get: |c| c.process_roles.clone(),
    },
    BrokerConfigDef {
        name: "controller.quorum.voters",
        toml_key: "controllers",
        config_type: ConfigType::List,
        set: |c, v, _| {
            c.controllers = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            Ok(())
        },
        get: |c| c.controllers.clone(),
    },
    BrokerConfigDef {
        name: "listeners",
        toml_key: "listen",
        config_type: ConfigType::List,
        set: set_listeners,
        get: |c| {
            let listeners = c.listeners().ok()?;
            Some(
                listeners
                    .iter()
                    .map(|l| format!("{}://{}", l.name, l.listen))
                    .collect::<Vec<_>>()
                    .join(","),
            )
        },
    },
    BrokerConfigDef {
        name: "advertised.listeners",
        toml_key: "advertise",
        config_type: ConfigType::List,
        set: set_advertised_listeners,
        get: |c| {
            let listeners = c.listeners().ok()?;
            Some(
                listeners
                    .iter()
                    .map(|l| format!("{}://{}:{}", l.name, l.advertised_host, l.advertised_port))
                    .collect::<Vec<_>>()
                    .join(","),
            )
        },
    },
    BrokerConfigDef {
        name: "log.dirs",
        toml_key: "data_dir",
        config_type: ConfigType::List,
        set: set_log_dirs,
        get: |c| Some(join_paths(&c.log_dirs())),
    },
    BrokerConfigDef {
        name: "log.dir",
        toml_key: "data_dir",
        config_type: ConfigType::String,
        set: |c, v, props| {
            if props.contains_key("log.dirs") {
                return Ok(());
            }
            set_log_dirs(c, v, props)
        },
        get: |c| Some(c.data_dir.display().to_string()),
    },
    BrokerConfigDef {
        name: "broker.rack",
        toml_key: "rack",
        config_type: ConfigType::String,
        set: |c, v, _| {
            c.rack = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            Ok(())
        },
        get: |c| c.rack.clone(),
    },
    field!("auto.create.topics.enable", auto_create_topics, Boolean),
    field!(
        "remote.log.storage.system.enable",
        remote_log_storage_system_enable,
        Boolean
    ),
    field!(
        "remote.log.manager.task.interval.ms",
        remote_log_manager_task_interval_ms,
        Long,
        1
    ),
    field!(
        "remote.log.manager.copier.thread.pool.size",
        remote_log_manager_copier_thread_pool_size,
        Int,
        1
    ),
    field!(
        "remote.log.manager.copy.max.bytes.per.second",
        remote_log_manager_copy_max_bytes_per_second,
        Long,
        1
    ),
    BrokerConfigDef {
        name: "strand.remote.storage.url",
        toml_key: "remote_storage_url",
        config_type: ConfigType::String,
        set: |c, v, _| {
            c.remote_storage_url = Some(v.trim().to_string()).filter(|v| !v.is_empty());
            Ok(())
        },
        get: |c| c.remote_storage_url.clone(),
    },
    field!("num.partitions", num_partitions, Int, 1),
    field!(
        "default.replication.factor",
        default_replication_factor,
        Int,
        1
    ),
    field!("message.max.bytes", message_max_bytes, Int, 0),
    field!("min.insync.replicas", min_insync_replicas, Int, 1),
    field!("log.segment.bytes", segment_bytes, Int, 14),
    scaled_ms!("log.roll.hours", segment_ms, HOUR_MS, &["log.roll.ms"]),
    scaled_ms!("log.roll.ms", segment_ms, 1, &[]),
    scaled_ms!(
        "log.retention.hours",
        retention_ms,
        HOUR_MS,
        &["log.retention.minutes", "log.retention.ms"]
    ),
    scaled_ms!(
        "log.retention.minutes",
        retention_ms,
        60_000,
        &["log.retention.ms"]
    ),
    scaled_ms!("log.retention.ms", retention_ms, 1, &[]),
    field!("log.retention.bytes", retention_bytes, Long, i64::MIN),
    BrokerConfigDef {
        name: "log.flush.interval.messages",
        toml_key: "flush",
        config_type: ConfigType::Long,
        set: |c, v, _| {
            c.flush = match at_least(parse::<i64>(v, "LONG")?, 1)? {
                1 => FlushMode::EveryBatch,
                i64::MAX => FlushMode::PageCache,
                _ => {
                    return Err(
                        "Strand takes 1 (fsync before every acknowledgement) or the default here; set flush.messages on topics for other counts"
                            .into(),
                    )
                }
            };
            Ok(())
        },
        get: |c| {
            Some(match c.flush {
                FlushMode::EveryBatch => "1".into(),
                FlushMode::PageCache => i64::MAX.to_string(),
            })
        },
    },
    field!("socket.request.max.bytes", socket_request_max_bytes, Int, 1),
    field!(
        "socket.send.buffer.bytes",
        socket_send_buffer_bytes,
        Int,
        -1
    ),
    field!("max.connections", max_connections, Int, 0),
    field!("max.connections.per.ip", max_connections_per_ip, Int, 0),
    BrokerConfigDef {
        name: "max.connections.per.ip.overrides",
        toml_key: "max_connections_per_ip_overrides",
        config_type: ConfigType::String,
        set: |c, v, _| {
            c.max_connections_per_ip_overrides = v.trim().to_string();
            Ok(())
        },
        get: |c| Some(c.max_connections_per_ip_overrides.clone()),
    },
    field!(
        "connections.max.idle.ms",
        connections_max_idle_ms,
        Long,
        i64::MIN
    ),
    field!(
        "queued.max.request.bytes",
        queued_request_max_bytes,
        Long,
        i64::MIN
    ),
    field!(
        "log.retention.check.interval.ms",
        retention_check_interval_ms,
        Long,
        1
    ),
    field!("log.cleaner.backoff.ms", cleaner_backoff_ms, Long, 0),
    BrokerConfigDef {
        name: "log.cleaner.io.max.bytes.per.second",
        toml_key: "cleaner_io_max_bytes_per_second",
        config_type: ConfigType::Double,
        set: |c, v, _| {
            let rate: f64 = parse(v, "DOUBLE")?;
            c.cleaner_io_max_bytes_per_second =
                (rate.is_finite() && rate > 0.0 && rate < u64::MAX as f64).then_some(rate as u64);
            Ok(())
        },
        get: |c| {
            Some(
                c.cleaner_io_max_bytes_per_second
                    .map_or("1.7976931348623157E308".into(), |rate| format!("{rate}.0")),
            )
        },
    },
    field!(
        "group.initial.rebalance.delay.ms",
        group_initial_rebalance_delay_ms,
        Int,
        0
    ),
    field!(
        "group.min.session.timeout.ms",
        group_min_session_timeout_ms,
        Int,
        0
    ),
    field!(
        "group.max.session.timeout.ms",
        group_max_session_timeout_ms,
        Int,
        0
    ),
    field!("group.max.size", group_max_size, Int, 1),
    field!(
        "offsets.retention.minutes",
        offsets_retention_minutes,
        Int,
        1
    ),
    field!(
        "offsets.retention.check.interval.ms",
        offsets_retention_check_interval_ms,
        Long,
        1
    ),
    field!(
        "transaction.max.timeout.ms",
        transaction_max_timeout_ms,
        Int,
        1
    ),
    field!(
        "transactional.id.expiration.ms",
        transactional_id_expiration_ms,
        Int,
        1
    ),
    field!(
        "transaction.abort.timed.out.transaction.cleanup.interval.ms",
        transaction_abort_timed_out_transaction_cleanup_interval_ms,
        Int,
        1
    ),
    field!(
        "transaction.remove.expired.transaction.cleanup.interval.ms",
        transaction_remove_expired_transaction_cleanup_interval_ms,
        Int,
        1
    ),
    field!(
        "group.consumer.session.timeout.ms",
        group_consumer_session_timeout_ms,
        Int,
        1
    ),
    field!(
        "group.consumer.heartbeat.interval.ms",
        group_consumer_heartbeat_interval_ms,
        Int,
        1
    ),
    field!(
        "group.share.session.timeout.ms",
        group_share_session_timeout_ms,
        Int,
        1
    ),
    field!(
        "group.share.heartbeat.interval.ms",
        group_share_heartbeat_interval_ms,
        Int,
        1
    ),
    field!("group.share.max.size", group_share_max_size, Int, 1),
    field!(
        "group.share.record.lock.duration.ms",
        group_share_record_lock_duration_ms,
        Int,
        1000
    ),
    field!(
        "group.share.delivery.count.limit",
        group_share_delivery_count_limit,
        Int,
        2
    ),
    field!(
        "group.share.partition.max.record.locks",
        group_share_partition_max_record_locks,
        Int,
        100
    ),
    field!(
        "group.share.max.share.sessions",
        group_share_max_share_sessions,
        Int,
        1
    ),
    field!(
        "group.streams.session.timeout.ms",
        group_streams_session_timeout_ms,
        Int,
        1
    ),
    field!(
        "group.streams.heartbeat.interval.ms",
        group_streams_heartbeat_interval_ms,
        Int,
        1
    ),
    field!("group.streams.max.size", group_streams_max_size, Int, 1),
    field!(
        "group.streams.num.standby.replicas",
        group_streams_num_standby_replicas,
        Int,
        0
    ),
    field!(
        "group.streams.initial.rebalance.delay.ms",
        group_streams_initial_rebalance_delay_ms,
        Int,
        0
    ),
    field!(
        "group.streams.assignment.interval.ms",
        group_streams_assignment_interval_ms,
        Int,
        0
    ),
    field!(
        "broker.heartbeat.interval.ms",
        broker_heartbeat_interval_ms,
        Int,
        1
    ),
    field!(
        "broker.session.timeout.ms",
        broker_session_timeout_ms,
        Int,
        1
    ),
    field!("replica.lag.time.max.ms", replica_lag_time_max_ms, Long, 1),
    field!(
        "auto.leader.rebalance.enable",
        auto_leader_rebalance_enable,
        Boolean
    ),
    field!(
        "leader.imbalance.check.interval.seconds",
        leader_imbalance_check_interval_seconds,
        Long,
        1
    ),
];

/// Kafka names that only say how the other settings are read (listener names and their
/// protocols): used by `listeners`, never reported on their own.
const READ_WITH_LISTENERS: &[&str] = &[
    "controller.listener.names",
    "listener.security.protocol.map",
    "inter.broker.listener.name",
    "security.inter.broker.protocol",
];

/// Security settings, kept by their Kafka names and read per listener (TLS stores, SASL
/// mechanisms and their JAAS entries, re-authentication).
fn is_security_setting(name: &str) -> bool {
    ["ssl.", "sasl.", "listener.name."]
        .iter()
        .any(|prefix| name.starts_with(prefix))
        || [
            "connections.max.reauth.ms",
            "connection.failed.authentication.delay.ms",
            "super.users",
            "allow.everyone.if.no.acl.found",
        ]
        .contains(&name)
}

/// The definition of a Kafka broker config Strand implements.
pub fn broker_config(name: &str) -> Option<&'static BrokerConfigDef> {
    BROKER_CONFIGS.iter().find(|def| def.name == name)
}

/// `NAME://HOST:PORT,...` as (listener name, host:port) pairs.
fn endpoints(value: &str) -> Result<Vec<(String, String)>, String> {
    value
        .split(',')
        .map(str::trim)
        .filter(|entry| !entry.is_empty())
        .map(|entry| {
            entry
                .split_once("://")
                .map(|(name, address)| (name.trim().to_string(), address.trim().to_string()))
                .ok_or_else(|| format!("Unable to parse {entry} to a broker endpoint"))
        })
        .collect()
}

/// An empty host is every interface, as in Kafka.
fn socket_address(address: &str) -> Result<SocketAddr, String> {
    let address = match address.strip_prefix(':') {
        Some(port) => format!("0.0.0.0:{port}"),
        None => address.to_string(),
    };
    address
        .to_socket_addrs()
        .ok()
        .and_then(|mut addresses| addresses.next())
        .ok_or_else(|| format!("cannot resolve the listener address {address}"))
}

/// `listeners`: the controller listener (controller.listener.names) is this node's
/// quorum address; of the others, the inter-broker one (inter.broker.listener.name, else
/// the one named as security.inter.broker.protocol, PLAINTEXT by default, else the
/// first) is `listen` and the rest are extra listeners, each served on its own port
/// with its own protocol (listener.security.protocol.map).
fn set_listeners(config: &mut BrokerConfig, value: &str, props: &Properties) -> Result<(), String> {
    let controller_names: Vec<&str> = props
        .get("controller.listener.names")
        .map(|names| names.split(',').map(str::trim).collect())
        .unwrap_or_default();
    config.listener_security_protocol_map = props.get("listener.security.protocol.map").cloned();
    // A broker-only node lists no controller listener but connects with its protocol.
    config.controller_listener_name = controller_names.first().map(|name| name.to_string());
    let mut listeners: Vec<ExtraListener> = Vec::new();
    for (name, address) in endpoints(value)? {
        if controller_names.contains(&name.as_str()) {
            config.quorum_listen = Some(socket_address(&address)?);
            continue;
        }
        config.protocol_of(&name)?;
        if listeners.iter().any(|l| l.name == name) {
            return Err(format!(
                "Each listener must have a different name, listeners: {value}"
            ));
        }
        listeners.push(ExtraListener {
            name,
            listen: socket_address(&address)?,
            advertise: None,
        });
    }
    if listeners.is_empty() {
        return Ok(());
    }
    let inter_broker = props
        .get("inter.broker.listener.name")
        .or_else(|| props.get("security.inter.broker.protocol"))
        .map(|name| name.trim().to_string())
        .unwrap_or_else(|| "PLAINTEXT".into());
    let first = listeners
        .iter()
        .position(|l| l.name == inter_broker)
        .unwrap_or(0);
    let primary = listeners.remove(first);
    config.listen = primary.listen;
    config.listener_name = primary.name;
    config.extra_listeners = listeners;
    Ok(())
}

/// `advertised.listeners`: what each listener of `listeners` tells its clients.
fn set_advertised_listeners(
    config: &mut BrokerConfig,
    value: &str,
    _: &Properties,
) -> Result<(), String> {
    for (name, address) in endpoints(value)? {
        if name == config.listener_name {
            config.advertise = Some(address);
        } else if let Some(extra) = config.extra_listeners.iter_mut().find(|l| l.name == name) {
            extra.advertise = Some(address);
        } else if config.protocol_of(&name).is_err() {
            return Err(format!("No security protocol defined for listener {name}"));
        }
        // A controller listener advertises nothing to clients.
    }
    Ok(())
}

/// log.dirs: the first directory also holds the broker's metadata (Kafka's
/// metadata.log.dir defaults to it too).
fn set_log_dirs(config: &mut BrokerConfig, value: &str, _: &Properties) -> Result<(), String> {
    let mut dirs = value
        .split(',')
        .map(str::trim)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from);
    let Some(first) = dirs.next() else {
        return Err("no log directory given".into());
    };
    let extra: Vec<PathBuf> = dirs.collect();
    if let Some(twice) = extra
        .iter()
        .enumerate()
        .find(|(i, dir)| **dir == first || extra[..*i].contains(dir))
    {
        return Err(format!("{} is listed twice", twice.1.display()));
    }
    config.data_dir = first;
    config.extra_log_dirs = extra;
    Ok(())
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(",")
}

/// Reads a Kafka server.properties: the settings it names apply over `config`. Returns
/// the names Strand does not implement (ignored; the caller warns once).
pub fn apply_properties_file(
    config: &mut BrokerConfig,
    path: &Path,
) -> Result<Vec<String>, String> {
    let file = std::fs::File::open(path)
        .map_err(|error| format!("cannot read config {}: {error}", path.display()))?;
    let props: Properties = java_properties::read(std::io::BufReader::new(file))
        .map_err(|error| format!("bad config {}: {error}", path.display()))?
        .into_iter()
        .collect();
    apply_properties(config, &props)
}

/// Applies `props` (Kafka broker config names) to `config`.
pub fn apply_properties(
    config: &mut BrokerConfig,
    props: &Properties,
) -> Result<Vec<String>, String> {
    for def in BROKER_CONFIGS {
        if let Some(value) = props.get(def.name) {
            (def.set)(config, value, props).map_err(|why| {
                format!(
                    "Invalid value {value} for configuration {}: {why}",
                    def.name
                )
            })?;
            config.explicit.insert(def.name.to_string());
        }
    }
    for (name, value) in props.iter().filter(|(name, _)| is_security_setting(name)) {
        config.security.insert(name.clone(), value.clone());
    }
    Ok(props
        .keys()
        .filter(|name| {
            broker_config(name).is_none()
                && !READ_WITH_LISTENERS.contains(&name.as_str())
                && !is_security_setting(name)
        })
        .cloned()
        .collect())
}

/// The Kafka names whose setting a TOML file gave (by their TOML keys).
pub fn explicit_from_toml(keys: &BTreeSet<String>) -> BTreeSet<String> {
    BROKER_CONFIGS
        .iter()
        .filter(|def| keys.contains(def.toml_key))
        .map(|def| def.name.to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_security::SecurityProtocol;

    #[test]
    fn several_listeners_each_with_its_protocol_and_advertised_address() {
        let mut config = BrokerConfig::default();
        let unknown = apply_properties(
            &mut config,
            &props(&[
                (
                    "listeners",
                    "CLIENT://127.0.0.1:19092,INTERNAL://127.0.0.1:19093,SECURE://127.0.0.1:19094,CONTROLLER://127.0.0.1:19095",
                ),
                (
                    "advertised.listeners",
                    "CLIENT://kafka.example:9092,INTERNAL://10.0.0.1:19093,SECURE://kafka.example:9094",
                ),
                (
                    "listener.security.protocol.map",
                    "CLIENT:SASL_PLAINTEXT,INTERNAL:PLAINTEXT,SECURE:SASL_SSL,CONTROLLER:PLAINTEXT",
                ),
                ("controller.listener.names", "CONTROLLER"),
                ("inter.broker.listener.name", "INTERNAL"),
                ("sasl.enabled.mechanisms", "PLAIN"),
                (
                    "listener.name.client.plain.sasl.jaas.config",
                    "org.apache.kafka.common.security.plain.PlainLoginModule required;",
                ),
                ("ssl.keystore.type", "PEM"),
            ]),
        )
        .unwrap();
        assert!(unknown.is_empty(), "{unknown:?}");
        let listeners = config.listeners().unwrap();
        let summary: Vec<(&str, SecurityProtocol, String, u16)> = listeners
            .iter()
            .map(|l| {
                (
                    l.name.as_str(),
                    l.protocol,
                    l.advertised_host.clone(),
                    l.advertised_port,
                )
            })
            .collect();
        assert_eq!(
            summary,
            [
                (
                    "INTERNAL",
                    SecurityProtocol::Plaintext,
                    "10.0.0.1".into(),
                    19093
                ),
                (
                    "CLIENT",
                    SecurityProtocol::SaslPlaintext,
                    "kafka.example".into(),
                    9092
                ),
                (
                    "SECURE",
                    SecurityProtocol::SaslSsl,
                    "kafka.example".into(),
                    9094
                ),
            ]
        );
        assert_eq!(
            config.quorum_listen,
            Some("127.0.0.1:19095".parse().unwrap())
        );
        assert_eq!(
            config
                .security_setting("CLIENT", "plain.sasl.jaas.config")
                .as_deref(),
            Some("org.apache.kafka.common.security.plain.PlainLoginModule required;")
        );
        assert_eq!(
            config.security_setting("SECURE", "plain.sasl.jaas.config"),
            None
        );
        assert_eq!(
            config
                .security_setting("SECURE", "ssl.keystore.type")
                .as_deref(),
            Some("PEM")
        );
        let def = broker_config("listeners").unwrap();
        assert_eq!(
            def.value(&config).unwrap(),
            "INTERNAL://127.0.0.1:19093,CLIENT://127.0.0.1:19092,SECURE://127.0.0.1:19094"
        );
        let error = apply_properties(
            &mut BrokerConfig::default(),
            &props(&[("listeners", "PLAINTEXT://:1,PLAINTEXT://:2")]),
        )
        .unwrap_err();
        assert!(error.contains("different name"), "{error}");
    }

    fn props(pairs: &[(&str, &str)]) -> Properties {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn a_kafka_server_properties_configures_the_broker() {
        let mut config = BrokerConfig::default();
        let unknown = apply_properties(
            &mut config,
            &props(&[
                ("process.roles", "broker,controller"),
                ("node.id", "3"),
                ("controller.quorum.voters", "3@127.0.0.1:19093"),
                (
                    "listeners",
                    "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093",
                ),
                ("controller.listener.names", "CONTROLLER"),
                (
                    "listener.security.protocol.map",
                    "CONTROLLER:PLAINTEXT,PLAINTEXT:PLAINTEXT",
                ),
                ("advertised.listeners", "PLAINTEXT://kafka.example:9092"),
                ("log.dirs", "/tmp/kraft-combined-logs"),
                ("num.partitions", "3"),
                ("log.retention.hours", "24"),
                ("log.segment.bytes", "1073741824"),
                ("num.network.threads", "3"),
                ("offsets.topic.replication.factor", "1"),
            ]),
        )
        .unwrap();
        assert_eq!(
            unknown,
            vec!["num.network.threads", "offsets.topic.replication.factor"]
        );
        assert_eq!(config.node_id, 3);
        assert_eq!(config.listen, "127.0.0.1:19092".parse().unwrap());
        assert_eq!(
            config.quorum_listen,
            Some("127.0.0.1:19093".parse().unwrap())
        );
        assert_eq!(config.advertise.as_deref(), Some("kafka.example:9092"));
        assert_eq!(config.data_dir, PathBuf::from("/tmp/kraft-combined-logs"));
        assert_eq!(config.num_partitions, 3);
        assert_eq!(config.retention_ms, 24 * HOUR_MS);
        assert!(config.explicit.contains("log.retention.hours"));
        assert!(!config.explicit.contains("log.retention.ms"));
        config.validate().unwrap();
    }

    #[test]
    fn the_finest_unit_wins_and_nonsense_is_refused_with_the_name() {
        let mut config = BrokerConfig::default();
        apply_properties(
            &mut config,
            &props(&[("log.retention.hours", "24"), ("log.retention.ms", "5000")]),
        )
        .unwrap();
        assert_eq!(config.retention_ms, 5000);
        let error =
            apply_properties(&mut config, &props(&[("num.partitions", "many")])).unwrap_err();
        assert_eq!(
            error,
            "Invalid value many for configuration num.partitions: Not a number of type INT"
        );
        let error = apply_properties(&mut config, &props(&[("num.partitions", "0")])).unwrap_err();
        assert!(error.ends_with("Value must be at least 1"), "{error}");
        let error =
            apply_properties(&mut config, &props(&[("listeners", "SECURE://:9093")])).unwrap_err();
        assert!(
            error.contains("No security protocol defined for listener SECURE"),
            "{error}"
        );
        let error = apply_properties(&mut config, &props(&[("log.dirs", "/a,/b,/a")])).unwrap_err();
        assert!(error.contains("/a is listed twice"), "{error}");
        apply_properties(&mut config, &props(&[("log.dirs", "/a, /b,/c")])).unwrap();
        assert_eq!(config.data_dir, PathBuf::from("/a"));
        assert_eq!(
            config.extra_log_dirs,
            [PathBuf::from("/b"), PathBuf::from("/c")]
        );
        assert_eq!(config.log_dirs().len(), 3);
    }

    #[test]
    fn every_toml_key_is_a_broker_config_field() {
        for def in BROKER_CONFIGS {
            // deny_unknown_fields: only a misnamed key fails as "unknown field".
            let error = toml::from_str::<BrokerConfig>(&format!("{} = []", def.toml_key))
                .unwrap_err()
                .to_string();
            assert!(!error.contains("unknown field"), "{}: {error}", def.name);
        }
        let explicit = explicit_from_toml(&["retention_ms".to_string()].into());
        assert!(explicit.contains("log.retention.ms") && explicit.contains("log.retention.hours"));
    }
}
