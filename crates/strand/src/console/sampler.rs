//! What the console shows over time, sampled by asking the cluster as any client would:
//! each topic's end offsets (its messages per second), each group's committed offsets
//! (its lag) and, less often, every broker's log directories (sizes on disk).
//!
//! Bounded: five minutes of rates per topic, an hour of lag for at most `GROUPS_MAX`
//! groups; topics and groups that disappear are forgotten at the next sample.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use kafka_protocol::messages::{ApiKey, DescribeLogDirsRequest, DescribeLogDirsResponse};

use crate::cli::client::Client;
use crate::cli::groups::list_groups;
use crate::cli::offsets::{list_offsets_of, LATEST};

pub const SAMPLE_INTERVAL: Duration = Duration::from_secs(5);
/// Sizes on disk are read every this many samples (DescribeLogDirs walks every replica),
/// and whenever partitions came or went.
const SIZES_EVERY: u64 = 6;
const RATE_HISTORY: Duration = Duration::from_secs(5 * 60);
const LAG_HISTORY: Duration = Duration::from_secs(60 * 60);
/// Groups whose lag is followed (the first by name); the others show none.
pub const GROUPS_MAX: usize = 1_000;

/// (unix ms, value) points, oldest first.
pub type Series<T> = VecDeque<(i64, T)>;
/// (topic, partition) -> offset.
type Offsets = BTreeMap<(String, i32), i64>;

#[derive(Default)]
pub struct Samples {
    /// topic -> messages per second.
    pub topic_rates: HashMap<String, Series<f64>>,
    /// (topic, partition) -> log end offset, and when it was read.
    ends: Option<(Instant, Offsets)>,
    /// (topic, partition) -> bytes on disk (the largest of its replicas).
    pub partition_bytes: HashMap<(String, i32), i64>,
    /// broker -> bytes of its log directories.
    pub broker_bytes: HashMap<i32, i64>,
    /// group -> total lag (log end - committed, over its committed partitions).
    pub group_lag: HashMap<String, Series<i64>>,
    /// group -> its coordinator, as last found.
    coordinators: HashMap<String, i32>,
    taken: u64,
    /// How many partitions the cluster had when sizes were last read.
    partitions_sized: usize,
}

impl Samples {
    pub fn latest_rate(&self, topic: &str) -> Option<f64> {
        self.topic_rates.get(topic)?.back().map(|&(_, rate)| rate)
    }

    pub fn latest_lag(&self, group: &str) -> Option<i64> {
        self.group_lag.get(group)?.back().map(|&(_, lag)| lag)
    }

    pub fn topic_bytes(&self, topic: &str, partitions: usize) -> Option<i64> {
        let sizes: Vec<i64> = (0..partitions as i32)
            .filter_map(|p| self.partition_bytes.get(&(topic.to_string(), p)).copied())
            .collect();
        (!sizes.is_empty()).then(|| sizes.iter().sum())
    }

    /// Records log end offsets read at `at`: each topic's rate since the last read.
    fn record_ends(&mut self, at: Instant, now_ms: i64, ends: Offsets) {
        if let Some((before, previous)) = &self.ends {
            let seconds = at.duration_since(*before).as_secs_f64().max(0.001);
            let mut grown: HashMap<&str, i64> = HashMap::new();
            for ((topic, partition), end) in &ends {
                let growth = grown.entry(topic.as_str()).or_default();
                if let Some(was) = previous.get(&(topic.clone(), *partition)) {
                    *growth += (end - was).max(0);
                }
            }
            for (topic, growth) in grown {
                let series = self.topic_rates.entry(topic.to_string()).or_default();
                series.push_back((now_ms, growth as f64 / seconds));
                trim(series, now_ms, RATE_HISTORY);
            }
        }
        let present: HashSet<&str> = ends.keys().map(|(topic, _)| topic.as_str()).collect();
        self.topic_rates
            .retain(|topic, _| present.contains(topic.as_str()));
        self.ends = Some((at, ends));
    }

    fn record_lag(&mut self, now_ms: i64, group: &str, lag: i64) {
        let series = self.group_lag.entry(group.to_string()).or_default();
        series.push_back((now_ms, lag));
        trim(series, now_ms, LAG_HISTORY);
    }
}

fn trim<T>(series: &mut Series<T>, now_ms: i64, kept: Duration) {
    let oldest = now_ms - kept.as_millis() as i64;
    while series.front().is_some_and(|&(at, _)| at < oldest) {
        series.pop_front();
    }
}

pub fn unix_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// Takes one sample into `samples` (locked only to store what was read).
pub async fn sample(client: &Client, samples: &std::sync::Mutex<Samples>) -> anyhow::Result<()> {
    let metadata = client.metadata(None).await?;
    let leaders: BTreeMap<(String, i32), i32> = metadata
        .topics
        .iter()
        .filter(|t| t.error_code == 0)
        .flat_map(|t| {
            let name = crate::cli::topic::name_of(t);
            t.partitions
                .iter()
                .map(move |p| ((name.clone(), p.partition_index), p.leader_id.0))
        })
        .collect();
    let at = Instant::now();
    let ends = list_offsets_of(client, &leaders, LATEST).await?;
    let now_ms = unix_ms();
    let (size_now, mut coordinators) = {
        let mut samples = samples.lock().unwrap();
        samples.taken += 1;
        let size_now =
            samples.taken % SIZES_EVERY == 1 || samples.partitions_sized != leaders.len();
        (size_now, samples.coordinators.clone())
    };
    if size_now {
        let brokers: Vec<i32> = metadata.brokers.iter().map(|b| b.node_id.0).collect();
        let (partition_bytes, broker_bytes) = sizes(client, &brokers).await?;
        let mut samples = samples.lock().unwrap();
        samples.partition_bytes = partition_bytes;
        samples.broker_bytes = broker_bytes;
        samples.partitions_sized = leaders.len();
    }
    let groups = list_groups(client).await?;
    let mut lags = Vec::new();
    for group in groups.iter().take(GROUPS_MAX) {
        let coordinator = match coordinators.get(&group.group) {
            Some(&coordinator) => coordinator,
            None => client.group_coordinator(&group.group).await?,
        };
        match crate::cli::group_offsets::fetch_committed(client, coordinator, &group.group, None)
            .await
        {
            // A group that has committed nothing has no lag to show (not a lag of 0).
            Ok(committed) if committed.is_empty() => {
                coordinators.insert(group.group.clone(), coordinator);
            }
            Ok(committed) => {
                coordinators.insert(group.group.clone(), coordinator);
                let lag = committed
                    .iter()
                    .filter_map(|(key, committed)| Some((ends.get(key)? - committed).max(0)))
                    .sum();
                lags.push((group.group.clone(), lag));
            }
            // The coordinator moved: found again next time.
            Err(_) => {
                coordinators.remove(&group.group);
            }
        }
    }
    let listed: HashSet<&str> = groups.iter().map(|g| g.group.as_str()).collect();
    let mut samples = samples.lock().unwrap();
    samples.record_ends(at, now_ms, ends);
    for (group, lag) in lags {
        samples.record_lag(now_ms, &group, lag);
    }
    samples
        .group_lag
        .retain(|group, _| listed.contains(group.as_str()));
    coordinators.retain(|group, _| listed.contains(group.as_str()));
    samples.coordinators = coordinators;
    Ok(())
}

type Sizes = (HashMap<(String, i32), i64>, HashMap<i32, i64>);

/// Every broker's log directories: each partition's largest replica, each broker's total.
async fn sizes(client: &Client, brokers: &[i32]) -> anyhow::Result<Sizes> {
    let mut partitions: HashMap<(String, i32), i64> = HashMap::new();
    let mut totals = HashMap::new();
    if !client.supports(ApiKey::DescribeLogDirs) {
        return Ok((partitions, totals));
    }
    let version = client.version(ApiKey::DescribeLogDirs, 4)?;
    for &broker in brokers {
        let response: DescribeLogDirsResponse = client
            .call_node(
                broker,
                ApiKey::DescribeLogDirs,
                version,
                &DescribeLogDirsRequest::default().with_topics(None),
            )
            .await?;
        let mut total = 0;
        for dir in response.results.iter().filter(|d| d.error_code == 0) {
            for topic in &dir.topics {
                for partition in topic.partitions.iter().filter(|p| !p.is_future_key) {
                    total += partition.partition_size;
                    let size = partitions
                        .entry((topic.name.0.to_string(), partition.partition_index))
                        .or_default();
                    *size = (*size).max(partition.partition_size);
                }
            }
        }
        totals.insert(broker, total);
    }
    Ok((partitions, totals))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ends(pairs: &[(&str, i32, i64)]) -> Offsets {
        pairs
            .iter()
            .map(|&(t, p, o)| ((t.to_string(), p), o))
            .collect()
    }

    #[test]
    fn a_topics_rate_is_its_partitions_growth_per_second() {
        let mut samples = Samples::default();
        let start = Instant::now();
        samples.record_ends(start, 0, ends(&[("a", 0, 10), ("a", 1, 10), ("b", 0, 5)]));
        assert_eq!(samples.latest_rate("a"), None, "one read gives no rate");
        samples.record_ends(
            start + Duration::from_secs(2),
            2_000,
            ends(&[("a", 0, 30), ("a", 1, 20), ("b", 0, 5)]),
        );
        assert_eq!(samples.latest_rate("a"), Some(15.0));
        assert_eq!(samples.latest_rate("b"), Some(0.0));
        // b deleted: forgotten; a truncated (offsets back): no negative rate.
        samples.record_ends(
            start + Duration::from_secs(4),
            4_000,
            ends(&[("a", 0, 0), ("a", 1, 20)]),
        );
        assert_eq!(samples.latest_rate("a"), Some(0.0));
        assert!(!samples.topic_rates.contains_key("b"));
    }

    #[test]
    fn history_is_bounded_in_time() {
        let mut samples = Samples::default();
        for minute in 0..120 {
            samples.record_lag(minute * 60_000, "g", minute);
        }
        let series = &samples.group_lag["g"];
        assert_eq!(
            series.front(),
            Some(&(59 * 60_000, 59)),
            "an hour back from the last"
        );
        assert_eq!(samples.latest_lag("g"), Some(119));
    }
}
