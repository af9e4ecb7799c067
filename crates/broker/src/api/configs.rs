//! DescribeConfigs (32), AlterConfigs (33) and IncrementalAlterConfigs (44) for topics,
//! brokers and groups (group_configs.rs). Topic configs are validated as Kafka validates them (INVALID_CONFIG,
//! including unknown names) and take effect at once, without a restart. A BROKER resource
//! (this broker's id, or "" for the cluster-wide default) takes dynamic broker configs
//! (dynamic_broker_configs.rs); start settings answer as Kafka does for a static config.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use kafka_protocol::messages::describe_configs_response::{
    DescribeConfigsResourceResult, DescribeConfigsResult, DescribeConfigsSynonym,
};
use kafka_protocol::messages::{
    alter_configs_response, incremental_alter_configs_response, AlterConfigsRequest,
    AlterConfigsResponse, DescribeConfigsRequest, DescribeConfigsResponse,
    IncrementalAlterConfigsRequest, IncrementalAlterConfigsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::str_bytes;
use crate::authorization::{AclOperation, Authorization};
use crate::broker::{ApiError, Broker};
use crate::broker_configs::{broker_config, BROKER_CONFIGS};
use crate::config::BrokerConfig;
use crate::dynamic_broker_configs::{
    coarsest_unit, config_type_code, listener_base, UpdateMode, KAFKA_BROKER_CONFIGS,
    TOPIC_DEFAULTS,
};
use crate::error_code;
use crate::group_configs::{group_config, GROUP_CONFIGS};
use crate::net::RequestContext;
use crate::router::{decode, respond, Outcome};
use crate::topic_config::{effective_topic_configs, topic_config_type, topic_config_value};

const RESOURCE_TOPIC: i8 = 2;
const RESOURCE_BROKER: i8 = 4;
const RESOURCE_GROUP: i8 = 32;
const RESOURCE_BROKER_LOGGER: i8 = 8;
/// Kafka's ConfigSource values.
const SOURCE_DYNAMIC_TOPIC: i8 = 1;
const SOURCE_DYNAMIC_BROKER: i8 = 2;
const SOURCE_DYNAMIC_DEFAULT_BROKER: i8 = 3;
const SOURCE_STATIC_BROKER: i8 = 4;
const SOURCE_DEFAULT: i8 = 5;
const SOURCE_GROUP: i8 = 8;
const OP_SET: i8 = 0;
const OP_DELETE: i8 = 1;
const OP_APPEND: i8 = 2;
const OP_SUBTRACT: i8 = 3;

/// Kafka's check of a config resource: `operation` (DESCRIBE_CONFIGS or ALTER_CONFIGS) on
/// the cluster for a broker or broker logger, on the topic or group otherwise, refused
/// with the type's authorization error and no message.
fn authorize_resource(
    authorization: &Authorization<'_>,
    operation: AclOperation,
    resource_type: i8,
    name: &str,
) -> Result<(), ApiError> {
    let (allowed, code) = match resource_type {
        RESOURCE_TOPIC => (
            authorization.allows_topic(operation, name),
            error_code::TOPIC_AUTHORIZATION_FAILED,
        ),
        RESOURCE_GROUP => (
            authorization.allows_group(operation, name),
            error_code::GROUP_AUTHORIZATION_FAILED,
        ),
        RESOURCE_BROKER | RESOURCE_BROKER_LOGGER => (
            authorization.allows_cluster(operation),
            error_code::CLUSTER_AUTHORIZATION_FAILED,
        ),
        _ => (true, error_code::NONE),
    };
    if allowed {
        Ok(())
    } else {
        Err(ApiError {
            code,
            message: None,
        })
    }
}

pub fn describe(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: DescribeConfigsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let authorization = broker.authorization(context);
    let results = body
        .resources
        .iter()
        .map(|resource| {
            let wanted: Option<HashSet<&str>> = resource
                .configuration_keys
                .as_ref()
                .map(|keys| keys.iter().map(|k| k.as_str()).collect());
            let result = DescribeConfigsResult::default()
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone());
            let name = resource.resource_name.as_str();
            let described = authorize_resource(
                &authorization,
                AclOperation::DescribeConfigs,
                resource.resource_type,
                name,
            )
            .and_then(|()| entries(broker, resource.resource_type, name));
            match described {
                Ok(entries) => {
                    let configs = entries
                        .into_iter()
                        .filter(|entry| {
                            wanted
                                .as_ref()
                                .is_none_or(|w| w.contains(entry.name.as_str()))
                        })
                        .map(|entry| {
                            entry.into_result(body.include_synonyms, body.include_documentation)
                        })
                        .collect();
                    result
                        .with_error_code(error_code::NONE)
                        .with_configs(configs)
                }
                Err(error) => result
                    .with_error_code(error.code)
                    .with_error_message(error.message.map(str_bytes)),
            }
        })
        .collect();
    respond(
        &request,
        &DescribeConfigsResponse::default().with_results(results),
    )
}

struct Entry {
    name: String,
    value: Option<String>,
    source: i8,
    read_only: bool,
    /// Values of sensitive configs (names Kafka does not know: it cannot tell) are null.
    sensitive: bool,
    config_type: i8,
    /// DescribeConfigs' synonyms after the entry's own: (name, value, source), in
    /// Kafka's order of precedence.
    synonyms: Vec<(String, Option<String>, i8)>,
    documentation: Option<&'static str>,
}

impl Entry {
    fn into_result(
        self,
        include_synonyms: bool,
        include_docs: bool,
    ) -> DescribeConfigsResourceResult {
        let synonyms = if include_synonyms {
            self.synonyms
                .into_iter()
                .map(|(name, value, source)| {
                    DescribeConfigsSynonym::default()
                        .with_name(str_bytes(name))
                        .with_value(value.map(str_bytes))
                        .with_source(source)
                })
                .collect()
        } else {
            Vec::new()
        };
        DescribeConfigsResourceResult::default()
            .with_name(str_bytes(self.name))
            .with_value(self.value.map(str_bytes))
            .with_read_only(self.read_only)
            .with_config_source(self.source)
            .with_is_sensitive(self.sensitive)
            .with_synonyms(synonyms)
            .with_config_type(self.config_type)
            .with_documentation(
                self.documentation
                    .filter(|_| include_docs)
                    .map(|doc| str_bytes(doc.to_string())),
            )
    }
}

fn entries(broker: &Arc<Broker>, resource_type: i8, name: &str) -> Result<Vec<Entry>, ApiError> {
    match resource_type {
        RESOURCE_TOPIC => {
            // Kafka's DescribeConfigs answers an unknown topic with an empty message.
            let topic = broker.topic(name).ok_or_else(|| {
                ApiError::new(error_code::UNKNOWN_TOPIC_OR_PARTITION, String::new())
            })?;
            // Values come from the topic defaults in force (dynamic over static); the
            // static layer's synonyms from the start's settings.
            let effective = effective_topic_configs(&broker.topic_defaults(), &topic.configs);
            let statics = effective_topic_configs(&broker.config, &topic.configs);
            Ok(effective
                .into_iter()
                .zip(statics)
                .map(|(config, static_layer)| {
                    let dynamic = config
                        .def
                        .synonym
                        .map(|name| dynamic_layers(broker, name))
                        .unwrap_or_default();
                    let broker_given = config.broker_synonym.as_ref().is_some_and(|b| b.given);
                    let source = match (config.overridden, dynamic.first(), broker_given) {
                        (true, _, _) => SOURCE_DYNAMIC_TOPIC,
                        (false, Some((_, _, source)), _) => *source,
                        (false, None, true) => SOURCE_STATIC_BROKER,
                        (false, None, false) => SOURCE_DEFAULT,
                    };
                    // Kafka lists the topic's own value, then the broker config behind it
                    // (this broker's dynamic value, the cluster default, the given one,
                    // Kafka's default).
                    let mut synonyms = Vec::new();
                    if config.overridden {
                        synonyms.push((
                            config.def.name.to_string(),
                            Some(config.value.clone()),
                            source,
                        ));
                    }
                    let dynamically_set = !dynamic.is_empty();
                    synonyms.extend(dynamic);
                    // Kafka lists a time default's coarsest unit behind a dynamic value
                    // (log.retention.hours=168) even where it lists nothing otherwise.
                    let unit_default = config
                        .def
                        .synonym
                        .and_then(coarsest_unit)
                        .filter(|_| dynamically_set && static_layer.broker_synonym.is_none())
                        .and_then(|unit| {
                            let default = KAFKA_BROKER_CONFIGS.get(unit)?.default.clone();
                            Some((unit.to_string(), default, SOURCE_DEFAULT))
                        });
                    synonyms.extend(unit_default);
                    if let Some(synonym) = static_layer.broker_synonym {
                        let name = synonym.name.to_string();
                        if synonym.given {
                            synonyms.push((
                                name.clone(),
                                Some(synonym.value),
                                SOURCE_STATIC_BROKER,
                            ));
                            if let Some(default) = synonym.default {
                                synonyms.push((name, Some(default), SOURCE_DEFAULT));
                            }
                        } else {
                            synonyms.push((name, Some(synonym.value), SOURCE_DEFAULT));
                        }
                    }
                    Entry {
                        name: config.def.name.to_string(),
                        value: Some(config.value),
                        source,
                        read_only: false,
                        sensitive: false,
                        config_type: config.def.config_type as i8,
                        synonyms,
                        documentation: Some(config.def.doc),
                    }
                })
                .collect())
        }
        RESOURCE_BROKER => {
            check_broker_name(broker, name, " or empty string")?;
            // The cluster-wide default entity lists the dynamic defaults only.
            if name.is_empty() {
                return Ok(dynamic_entries(broker, None));
            }
            let mut entries = broker_entries(broker);
            entries.extend(dynamic_entries(broker, Some(broker.node_id())));
            Ok(entries)
        }
        RESOURCE_GROUP => Ok(group_entries(broker, name)),
        other => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!("Unsupported resource type {other}"),
        )),
    }
}

/// A topic default's dynamic values as synonyms: this broker's own, then the cluster
/// default (empty for a config that is not a topic default).
fn dynamic_layers(broker: &Arc<Broker>, name: &str) -> Vec<(String, Option<String>, i8)> {
    if !TOPIC_DEFAULTS.contains(&name) {
        return Vec::new();
    }
    let own = broker.dynamic_configs_of(Some(broker.node_id()));
    let cluster_default = broker.dynamic_configs_of(None);
    [
        (own.get(name), SOURCE_DYNAMIC_BROKER),
        (cluster_default.get(name), SOURCE_DYNAMIC_DEFAULT_BROKER),
    ]
    .into_iter()
    .filter_map(|(value, source)| Some((name.to_string(), Some(value?.clone()), source)))
    .collect()
}

/// `or_empty`: DescribeConfigs' message names the empty (default) entity too, Kafka's
/// alterations' does not.
fn check_broker_name(broker: &Arc<Broker>, name: &str, or_empty: &str) -> Result<(), ApiError> {
    // An empty name is the cluster-wide default entity.
    if name.is_empty() || name == broker.node_id().to_string() {
        Ok(())
    } else {
        Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!(
                "Unexpected broker id, expected {}{or_empty}, but received {name}",
                broker.node_id()
            ),
        ))
    }
}

/// A group's configs (group_configs.rs): Kafka's 21, each its group value (GROUP_CONFIG)
/// over the broker config that gives its default.
fn group_entries(broker: &Arc<Broker>, group: &str) -> Vec<Entry> {
    let set = broker.group_configs_of(group);
    GROUP_CONFIGS
        .iter()
        .map(|def| {
            let default_source = if broker.config.explicit.contains(def.broker_synonym) {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            };
            let default = (
                def.broker_synonym.to_string(),
                Some(def.default_on(&broker.config)),
                default_source,
            );
            let (value, source, synonyms) = match set.get(def.name) {
                Some(value) => (
                    value.clone(),
                    SOURCE_GROUP,
                    vec![
                        (def.name.to_string(), Some(value.clone()), SOURCE_GROUP),
                        default,
                    ],
                ),
                None => (
                    def.default_on(&broker.config),
                    default_source,
                    vec![default],
                ),
            };
            Entry {
                name: def.name.to_string(),
                value: Some(value),
                source,
                read_only: false,
                sensitive: false,
                config_type: def.type_code(),
                synonyms,
                documentation: Some(def.documentation.as_str()),
            }
        })
        .collect()
}

/// Dynamic broker configs set for `broker` (None: the cluster default entity), with the
/// cluster default behind a broker's own. Strand's own start settings are never among
/// them (dynamic_broker_configs.rs refuses those), so these add to `broker_entries`.
fn dynamic_entries(broker: &Arc<Broker>, id: Option<i32>) -> Vec<Entry> {
    let defaults = broker.dynamic_configs_of(None);
    let own = match id {
        Some(id) => broker.dynamic_configs_of(Some(id)),
        None => BTreeMap::new(),
    };
    let mut names: Vec<&String> = own.keys().chain(defaults.keys()).collect();
    names.sort();
    names.dedup();
    names
        .into_iter()
        // A broker's own entry lists the configs Strand implements (broker_entries,
        // dynamic values first); the cluster default entity lists every dynamic default.
        .filter(|name| id.is_none() || broker_config(name).is_none())
        .map(|name| {
            // Kafka describes a name it does not know as sensitive (its value hidden) and
            // read-only, and a listener-prefixed one as read-only with its base's type.
            let known = KAFKA_BROKER_CONFIGS.get(name.as_str());
            let sensitive = known.is_none() && config_type_code(name) == 0;
            let shown = |value: &String| (!sensitive).then(|| value.clone());
            let mut synonyms = Vec::new();
            if let Some(value) = own.get(name) {
                synonyms.push((name.clone(), shown(value), SOURCE_DYNAMIC_BROKER));
            }
            if let Some(value) = defaults.get(name) {
                synonyms.push((name.clone(), shown(value), SOURCE_DYNAMIC_DEFAULT_BROKER));
            }
            // A broker's entry ends with Kafka's default (a listener-prefixed name's base
            // config's); the cluster default entity lists its own values only.
            let base = listener_base(name).unwrap_or(name);
            let default = KAFKA_BROKER_CONFIGS
                .get(base)
                .and_then(|k| k.default.clone());
            if let (Some(default), Some(_)) = (default, id) {
                synonyms.push((base.to_string(), Some(default), SOURCE_DEFAULT));
            }
            let (_, value, source) = synonyms[0].clone();
            Entry {
                name: name.clone(),
                value,
                source,
                read_only: known.is_none_or(|k| k.mode == UpdateMode::Static),
                sensitive,
                config_type: config_type_code(name),
                synonyms,
                documentation: None,
            }
        })
        .collect()
}

/// The broker's settings by Kafka's names: given ones (file, command line) are
/// STATIC_BROKER_CONFIG with Kafka's default behind them, the rest DEFAULT_CONFIG. All
/// read-only: Strand reads them at start.
fn broker_entries(broker: &Arc<Broker>) -> Vec<Entry> {
    let config = &broker.config;
    let defaults = BrokerConfig::default();
    BROKER_CONFIGS
        .iter()
        .map(|def| {
            let value = def.value(config);
            let given = config.explicit.contains(def.name);
            let source = if given {
                SOURCE_STATIC_BROKER
            } else {
                SOURCE_DEFAULT
            };
            // A topic default set dynamically comes first (broker, cluster default).
            let mut synonyms = dynamic_layers(broker, def.name);
            // Behind a dynamic value, an unset one (null) is not listed, as on Kafka.
            if value.is_some() || synonyms.is_empty() {
                synonyms.push((def.name.to_string(), value, source));
            }
            if given {
                synonyms.push((def.name.to_string(), def.value(&defaults), SOURCE_DEFAULT));
            }
            let (_, value, source) = synonyms[0].clone();
            Entry {
                name: def.name.to_string(),
                value,
                source,
                // Kafka's dynamic configs Strand applies at runtime may change.
                read_only: !TOPIC_DEFAULTS.contains(&def.name),
                sensitive: false,
                config_type: def.config_type as i8,
                synonyms,
                documentation: None,
            }
        })
        .collect()
}

/// Checks a resource to alter before any change is made: ALTER_CONFIGS on it, then
/// duplicates and unsupported types; the error for the resource, if any.
fn precheck(
    broker: &Arc<Broker>,
    authorization: &Authorization<'_>,
    resource_type: i8,
    name: &str,
    duplicated: bool,
) -> Result<(), ApiError> {
    authorize_resource(
        authorization,
        AclOperation::AlterConfigs,
        resource_type,
        name,
    )?;
    if duplicated {
        return Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!("Error due to duplicate config keys or resources for {name}"),
        ));
    }
    match resource_type {
        RESOURCE_GROUP if name.is_empty() => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Default group resources are not allowed.",
        )),
        RESOURCE_GROUP => Ok(()),
        RESOURCE_TOPIC if name.is_empty() => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Default topic resources are not allowed.",
        )),
        RESOURCE_TOPIC => Ok(()),
        RESOURCE_BROKER => check_broker_name(broker, name, ""),
        other => Err(ApiError::new(
            error_code::INVALID_REQUEST,
            format!("Unsupported resource type {other}"),
        )),
    }
}

/// A resource naming a config twice: INVALID_REQUEST, as Kafka's ConfigAdminManager.
fn refuse_duplicate_keys<'a>(mut names: impl Iterator<Item = &'a str>) -> Result<(), ApiError> {
    let mut seen = HashSet::new();
    if names.any(|name| !seen.insert(name)) {
        Err(ApiError::new(
            error_code::INVALID_REQUEST,
            "Error due to duplicate config keys",
        ))
    } else {
        Ok(())
    }
}

fn duplicates<'a>(resources: impl Iterator<Item = (i8, &'a StrBytes)>) -> HashSet<(i8, String)> {
    let mut seen = HashSet::new();
    resources
        .filter(|(t, n)| !seen.insert((*t, n.as_str().to_string())))
        .map(|(t, n)| (t, n.as_str().to_string()))
        .collect()
}

pub async fn alter(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: AlterConfigsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let authorization = broker.authorization(context);
    let duplicated = duplicates(
        body.resources
            .iter()
            .map(|r| (r.resource_type, &r.resource_name)),
    );
    let mut responses = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let name = resource.resource_name.as_str();
        let prepared = precheck(
            broker,
            &authorization,
            resource.resource_type,
            name,
            duplicated.contains(&(resource.resource_type, name.to_string())),
        )
        .and_then(|()| {
            refuse_duplicate_keys(resource.configs.iter().map(|c| c.name.as_str()))?;
            let mut configs = BTreeMap::new();
            for config in &resource.configs {
                let value = config.value.as_ref().ok_or_else(|| {
                    ApiError::new(
                        error_code::INVALID_CONFIG,
                        format!(
                            "Null value not supported for topic configs: {}",
                            config.name.as_str()
                        ),
                    )
                })?;
                configs.insert(config.name.as_str().to_string(), value.as_str().to_string());
            }
            // AlterConfigs replaces the whole set of overrides.
            Ok(configs)
        });
        let (code, message) = set_prepared(
            broker,
            resource.resource_type,
            name,
            prepared,
            body.validate_only,
        )
        .await;
        responses.push(
            alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    respond(
        &request,
        &AlterConfigsResponse::default().with_responses(responses),
    )
}

/// Applies a resource's new configs if preparing them succeeded; the (code, message)
/// for its response entry.
async fn set_prepared(
    broker: &Arc<Broker>,
    resource_type: i8,
    name: &str,
    prepared: Result<BTreeMap<String, String>, ApiError>,
    validate_only: bool,
) -> (i16, Option<StrBytes>) {
    let result = match prepared {
        Ok(configs) if resource_type == RESOURCE_GROUP => {
            broker.set_group_configs(name, configs, validate_only).await
        }
        Ok(configs) if resource_type == RESOURCE_BROKER => {
            broker
                .set_dynamic_configs(broker_entity(name), configs, validate_only)
                .await
        }
        Ok(configs) => broker.set_topic_configs(name, configs, validate_only).await,
        Err(error) => Err(error),
    };
    split(result)
}

/// A BROKER resource's entity: None for "" (the cluster default), else the broker id
/// (checked by `check_broker_name` already).
fn broker_entity(name: &str) -> Option<i32> {
    name.parse().ok()
}

pub async fn incremental_alter(
    broker: &Arc<Broker>,
    request: strand_protocol::ParsedRequest,
    context: &RequestContext,
) -> Outcome {
    let body: IncrementalAlterConfigsRequest = match decode(&request) {
        Ok(body) => body,
        Err(outcome) => return outcome,
    };
    let authorization = broker.authorization(context);
    let duplicated = duplicates(
        body.resources
            .iter()
            .map(|r| (r.resource_type, &r.resource_name)),
    );
    let mut responses = Vec::with_capacity(body.resources.len());
    for resource in &body.resources {
        let name = resource.resource_name.as_str();
        let prepared = precheck(
            broker,
            &authorization,
            resource.resource_type,
            name,
            duplicated.contains(&(resource.resource_type, name.to_string())),
        )
        .and_then(|()| {
            refuse_duplicate_keys(resource.configs.iter().map(|op| op.name.as_str()))?;
            let mut configs = if resource.resource_type == RESOURCE_BROKER {
                broker.dynamic_configs_of(broker_entity(name))
            } else if resource.resource_type == RESOURCE_GROUP {
                broker.group_configs_of(name)
            } else {
                broker
                    .topic(name)
                    .ok_or_else(|| {
                        ApiError::new(
                            error_code::UNKNOWN_TOPIC_OR_PARTITION,
                            format!("The topic '{name}' does not exist."),
                        )
                    })?
                    .configs
            };
            for op in &resource.configs {
                apply_op(
                    broker,
                    resource.resource_type,
                    &mut configs,
                    op.name.as_str(),
                    op.config_operation,
                    op.value.as_ref().map(|v| v.as_str()),
                )?;
            }
            Ok(configs)
        });
        let (code, message) = set_prepared(
            broker,
            resource.resource_type,
            name,
            prepared,
            body.validate_only,
        )
        .await;
        responses.push(
            incremental_alter_configs_response::AlterConfigsResourceResponse::default()
                .with_error_code(code)
                .with_error_message(message)
                .with_resource_type(resource.resource_type)
                .with_resource_name(resource.resource_name.clone()),
        );
    }
    respond(
        &request,
        &IncrementalAlterConfigsResponse::default().with_responses(responses),
    )
}

fn apply_op(
    broker: &Arc<Broker>,
    resource_type: i8,
    configs: &mut BTreeMap<String, String>,
    name: &str,
    operation: i8,
    value: Option<&str>,
) -> Result<(), ApiError> {
    let is_list = if resource_type == RESOURCE_BROKER {
        config_type_code(name) == 7
    } else if resource_type == RESOURCE_GROUP {
        group_config(name).is_some_and(|def| def.type_code() == 7)
    } else {
        topic_config_type(name) == 7
    };
    match operation {
        OP_SET => {
            let value = value.ok_or_else(|| {
                ApiError::new(
                    error_code::INVALID_REQUEST,
                    format!("Null value not supported for : {name}"),
                )
            })?;
            configs.insert(name.to_string(), value.to_string());
        }
        OP_DELETE => {
            configs.remove(name);
        }
        OP_APPEND | OP_SUBTRACT => {
            if !is_list {
                let verb = if operation == OP_APPEND {
                    "APPEND"
                } else {
                    "SUBTRACT"
                };
                return Err(ApiError::new(
                    error_code::INVALID_CONFIG,
                    format!("Can't {verb} to key {name} because its type is not LIST."),
                ));
            }
            let current = if resource_type != RESOURCE_TOPIC {
                configs.get(name).cloned().unwrap_or_default()
            } else {
                topic_config_value(&broker.config, configs, name)
            };
            let mut items: Vec<String> = current
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect();
            for item in value
                .unwrap_or("")
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
            {
                if operation == OP_APPEND {
                    if !items.iter().any(|existing| existing == item) {
                        items.push(item.to_string());
                    }
                } else {
                    items.retain(|existing| existing != item);
                }
            }
            configs.insert(name.to_string(), items.join(","));
        }
        // Kafka fails an unknown operation's decoding: UNKNOWN_SERVER_ERROR, no message.
        _ => {
            return Err(ApiError {
                code: error_code::UNKNOWN_SERVER_ERROR,
                message: None,
            })
        }
    }
    Ok(())
}

fn split(result: Result<(), ApiError>) -> (i16, Option<StrBytes>) {
    match result {
        Ok(()) => (error_code::NONE, None),
        Err(error) => (error.code, error.message.map(str_bytes)),
    }
}
