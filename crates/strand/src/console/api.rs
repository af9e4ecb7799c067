//! The console's JSON API (docs/CONSOLE.md): each path answered with the CLI's client
//! functions plus what the sampler has seen.

use std::collections::HashMap;

use hyper::{Method, StatusCode};
use serde_json::{json, Value};

use super::Console;
use crate::cli::cluster::{cluster_state, health, Health};
use crate::cli::groups::{describe as describe_group, list_groups};
use crate::cli::topic::{
    alter_topic_configs, create_topic, delete_topics, describe_topic, name_of, ListedTopic,
};

/// Partitions listed by the overview in each of its lists.
const LISTED_PARTITIONS_MAX: usize = 100;
const PAGE_DEFAULT: usize = 50;
const PAGE_MAX: usize = 500;
/// Topics /api/throughput reports, the busiest first.
const BUSIEST_TOPICS: usize = 20;

pub type Answer = anyhow::Result<(StatusCode, Value)>;

fn refused(status: StatusCode, why: impl Into<String>) -> Answer {
    Ok((status, json!({ "error": why.into() })))
}

pub async fn answer(
    console: &Console,
    client: &crate::cli::client::Client,
    method: &Method,
    path: &[String],
    query: &HashMap<String, String>,
    body: Option<Value>,
) -> Answer {
    let changes = method == Method::POST || method == Method::DELETE;
    if changes && console.read_only {
        return refused(
            StatusCode::FORBIDDEN,
            "the console is read-only (--console read-only)",
        );
    }
    let path: Vec<&str> = path.iter().map(String::as_str).collect();
    match (method.clone(), path.as_slice()) {
        (Method::GET, ["overview"]) => overview(console, client).await,
        (Method::GET, ["topics"]) => topics(console, client, query).await,
        (Method::POST, ["topics"]) => create(client, body.unwrap_or_default()).await,
        (Method::GET, ["topics", name]) => topic(console, client, name).await,
        (Method::POST, ["topics", name, "configs"]) => {
            alter_configs(client, name, body.unwrap_or_default()).await
        }
        (Method::DELETE, ["topics", name]) => {
            let results = delete_topics(client, &[name.to_string()]).await?;
            for (_, result) in results {
                result?;
            }
            Ok((StatusCode::OK, json!({})))
        }
        (Method::GET, ["topics", name, "messages"]) => {
            match super::browse::Browse::from_query(query) {
                Ok(browse) => Ok((StatusCode::OK, browse.run(client, name).await?)),
                Err(why) => refused(StatusCode::BAD_REQUEST, why),
            }
        }
        (Method::GET, ["groups"]) => groups(console, client, query).await,
        (Method::GET, ["groups", group]) => {
            let mut described = describe_group(client, group).await?.to_json();
            // [[unix ms, lag], ...], as a series serializes.
            described["lag_history"] = json!(console
                .samples
                .lock()
                .unwrap()
                .group_lag
                .get(*group)
                .unwrap_or(&Default::default()));
            Ok((StatusCode::OK, described))
        }
        (Method::GET, ["throughput"]) => throughput(console, client).await,
        _ => refused(
            StatusCode::NOT_FOUND,
            format!("no API at {method} /api/{}", path.join("/")),
        ),
    }
}

async fn overview(console: &Console, client: &crate::cli::client::Client) -> Answer {
    let state = cluster_state(client).await?;
    let mut value = serde_json::to_value(&state)?;
    let samples = console.samples.lock().unwrap();
    if let Some(brokers) = value["brokers"].as_array_mut() {
        for broker in brokers {
            let id = broker["id"].as_i64().unwrap_or(-1) as i32;
            broker["controller"] = json!(id == state.controller);
            broker["disk_bytes"] = json!(samples.broker_bytes.get(&id));
        }
    }
    value["node_id"] = json!(console.node_id);
    value["version"] = json!(env!("CARGO_PKG_VERSION"));
    value["read_only"] = json!(console.read_only);
    value["under_replicated_count"] = json!(state.under_replicated.len());
    value["offline_count"] = json!(state.offline.len());
    for list in ["under_replicated", "offline"] {
        if let Some(entries) = value[list].as_array_mut() {
            entries.truncate(LISTED_PARTITIONS_MAX);
        }
    }
    Ok((StatusCode::OK, value))
}

/// offset, limit and filter of a paged list.
struct Page {
    offset: usize,
    limit: usize,
    filter: String,
}

impl Page {
    fn of(query: &HashMap<String, String>) -> Page {
        let number = |name: &str, default: usize| {
            query
                .get(name)
                .and_then(|v| v.parse().ok())
                .unwrap_or(default)
        };
        Page {
            offset: number("offset", 0),
            limit: number("limit", PAGE_DEFAULT).clamp(1, PAGE_MAX),
            filter: query
                .get("filter")
                .map(|f| f.to_lowercase())
                .unwrap_or_default(),
        }
    }

    /// How many `items` there are, and those of this page.
    fn window<T>(&self, items: Vec<T>) -> (usize, impl Iterator<Item = T>) {
        (
            items.len(),
            items.into_iter().skip(self.offset).take(self.limit),
        )
    }

    fn matches(&self, name: &str) -> bool {
        self.filter.is_empty() || name.to_lowercase().contains(&self.filter)
    }

    fn answer(&self, key: &str, total: usize, items: Vec<Value>) -> Value {
        json!({ "total": total, "offset": self.offset, "limit": self.limit, key: items })
    }
}

async fn topics(
    console: &Console,
    client: &crate::cli::client::Client,
    query: &HashMap<String, String>,
) -> Answer {
    let page = Page::of(query);
    let internal = query.get("internal").is_some_and(|v| v == "true");
    let metadata = client.metadata(None).await?;
    let mut listed: Vec<_> = metadata
        .topics
        .iter()
        .filter(|t| t.error_code == 0 && (internal || !t.is_internal))
        .filter(|t| page.matches(&name_of(t)))
        .collect();
    listed.sort_by_key(|t| name_of(t));
    let (total, shown) = page.window(listed);
    let samples = console.samples.lock().unwrap();
    let items = shown
        .map(|topic| {
            let described = ListedTopic::of(topic);
            let count = |wanted: Health| {
                topic
                    .partitions
                    .iter()
                    .filter(|p| health(p) == wanted)
                    .count()
            };
            let (under_replicated, offline) =
                (count(Health::UnderReplicated), count(Health::Offline));
            let mut value = serde_json::to_value(&described).unwrap_or_default();
            value["under_replicated"] = json!(under_replicated);
            value["offline"] = json!(offline);
            value["bytes"] = json!(samples.topic_bytes(&described.name, described.partitions));
            value["messages_per_sec"] = json!(samples.latest_rate(&described.name));
            value
        })
        .collect();
    Ok((StatusCode::OK, page.answer("topics", total, items)))
}

async fn create(client: &crate::cli::client::Client, body: Value) -> Answer {
    let Some(name) = body["name"].as_str().filter(|n| !n.is_empty()) else {
        return refused(StatusCode::BAD_REQUEST, "a topic needs a name");
    };
    let (Some(partitions), Some(replication_factor)) = (
        json_number::<i32>(&body["partitions"]),
        json_number::<i16>(&body["replication_factor"]),
    ) else {
        return refused(
            StatusCode::BAD_REQUEST,
            "partitions and replication_factor must be whole numbers (-1: the broker's default)",
        );
    };
    let configs = match string_map(&body["configs"]) {
        Ok(configs) => configs,
        Err(why) => return refused(StatusCode::BAD_REQUEST, why),
    };
    let created = create_topic(client, name, partitions, replication_factor, configs).await?;
    Ok((StatusCode::CREATED, serde_json::to_value(&created)?))
}

/// A whole number of type T from a JSON field; absent is -1 (the broker's default).
fn json_number<T: TryFrom<i64>>(value: &Value) -> Option<T> {
    match value {
        Value::Null => T::try_from(-1).ok(),
        value => T::try_from(value.as_i64()?).ok(),
    }
}

/// {NAME: VALUE} as (name, value) pairs; values may be JSON strings, numbers or booleans.
fn string_map(value: &Value) -> Result<Vec<(String, String)>, String> {
    match value {
        Value::Null => Ok(Vec::new()),
        Value::Object(map) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(s) => Ok((name.clone(), s.clone())),
                Value::Number(n) => Ok((name.clone(), n.to_string())),
                Value::Bool(b) => Ok((name.clone(), b.to_string())),
                _ => Err(format!("config {name}: the value must be a string")),
            })
            .collect(),
        _ => Err("configs must be an object of NAME: VALUE".into()),
    }
}

async fn topic(console: &Console, client: &crate::cli::client::Client, name: &str) -> Answer {
    let described = describe_topic(client, name, true).await?;
    let mut value = serde_json::to_value(&described)?;
    let samples = console.samples.lock().unwrap();
    if let Some(partitions) = value["partitions"].as_array_mut() {
        for partition in partitions {
            let index = partition["partition"].as_i64().unwrap_or(-1) as i32;
            partition["bytes"] = json!(samples.partition_bytes.get(&(name.to_string(), index)));
        }
    }
    value["throughput"] = json!(samples.topic_rates.get(name).unwrap_or(&Default::default()));
    Ok((StatusCode::OK, value))
}

async fn alter_configs(client: &crate::cli::client::Client, name: &str, body: Value) -> Answer {
    let set = match string_map(&body["set"]) {
        Ok(set) => set,
        Err(why) => return refused(StatusCode::BAD_REQUEST, why),
    };
    let delete: Vec<String> = match &body["delete"] {
        Value::Null => Vec::new(),
        Value::Array(names) => names
            .iter()
            .filter_map(|n| n.as_str().map(str::to_string))
            .collect(),
        _ => return refused(StatusCode::BAD_REQUEST, "delete must be a list of names"),
    };
    if set.is_empty() && delete.is_empty() {
        return refused(StatusCode::BAD_REQUEST, "nothing to change");
    }
    alter_topic_configs(client, name, set, delete).await?;
    Ok((StatusCode::OK, json!({})))
}

async fn groups(
    console: &Console,
    client: &crate::cli::client::Client,
    query: &HashMap<String, String>,
) -> Answer {
    let page = Page::of(query);
    let listed: Vec<_> = list_groups(client)
        .await?
        .into_iter()
        .filter(|g| page.matches(&g.group))
        .collect();
    let (total, shown) = page.window(listed);
    let samples = console.samples.lock().unwrap();
    let items = shown
        .map(|group| {
            let lag = samples.latest_lag(&group.group);
            let mut value = serde_json::to_value(&group).unwrap_or_default();
            value["lag"] = json!(lag);
            value
        })
        .collect();
    Ok((StatusCode::OK, page.answer("groups", total, items)))
}

/// The busiest of the topics the caller may see (Metadata lists only those).
async fn throughput(console: &Console, client: &crate::cli::client::Client) -> Answer {
    let metadata = client.metadata(None).await?;
    let visible: std::collections::HashSet<String> = metadata.topics.iter().map(name_of).collect();
    let samples = console.samples.lock().unwrap();
    let mut busiest: Vec<(&String, f64)> = samples
        .topic_rates
        .iter()
        .filter(|(topic, _)| visible.contains(*topic))
        .filter_map(|(topic, series)| Some((topic, series.back()?.1)))
        .collect();
    busiest.sort_by(|a, b| b.1.total_cmp(&a.1).then_with(|| a.0.cmp(b.0)));
    let topics: Vec<Value> = busiest
        .into_iter()
        .take(BUSIEST_TOPICS)
        .map(|(topic, rate)| {
            let history = &samples.topic_rates[topic];
            json!({ "topic": topic, "messages_per_sec": rate, "history": history })
        })
        .collect();
    Ok((
        StatusCode::OK,
        json!({
            "interval_ms": super::sampler::SAMPLE_INTERVAL.as_millis() as u64,
            "topics": topics,
        }),
    ))
}

/// A number from the query, or why not.
pub fn query_number<T: std::str::FromStr>(
    query: &HashMap<String, String>,
    name: &str,
) -> Result<Option<T>, String> {
    match query.get(name).filter(|v| !v.is_empty()) {
        None => Ok(None),
        Some(value) => value
            .parse()
            .map(Some)
            .map_err(|_| format!("{name} must be a number")),
    }
}
