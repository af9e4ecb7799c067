//! A streams group's topology as the broker configures it (KIP-1071): from the topology a
//! Kafka Streams application sends and the topics that exist, the partition count of
//! every internal (repartition and changelog) topic, the number of tasks of each
//! subtopology, and which topics the broker must create before the group is ready.
//! Kafka's InternalTopicManager.configureTopics, in our own words
//! (docs/design/streams-groups.md, 2.6). A pure function of its inputs.

use std::collections::{BTreeMap, BTreeSet};

use strand_types::error_code;

use super::consumer::TopicView;
use super::streams_records::{StoredSubtopology, StoredTopicInfo, StoredTopology};

/// The status codes of a StreamsGroupHeartbeat answer that concern topics.
pub const STATUS_MISSING_SOURCE_TOPICS: i8 = 1;
pub const STATUS_INCORRECTLY_PARTITIONED_TOPICS: i8 = 2;
pub const STATUS_MISSING_INTERNAL_TOPICS: i8 = 3;

/// An internal topic the group needs and the broker creates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicToCreate {
    pub name: String,
    pub partitions: i32,
    /// -1: the broker's default.
    pub replication_factor: i16,
    pub configs: Vec<(String, String)>,
}

/// One subtopology with its decided partition counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfiguredSubtopology {
    /// Tasks = the largest partition count among its source and repartition-source topics.
    pub tasks: i32,
    pub source_topics: BTreeSet<String>,
    /// Repartition-source topic -> partitions.
    pub repartition_source_topics: BTreeMap<String, i32>,
    /// Changelog topic -> partitions (one per task).
    pub changelog_topics: BTreeMap<String, i32>,
    pub repartition_sink_topics: BTreeSet<String>,
}

impl ConfiguredSubtopology {
    /// Whether the subtopology keeps state (standby tasks are only for those).
    pub fn stateful(&self) -> bool {
        !self.changelog_topics.is_empty()
    }

    /// The partitions task `partition` reads: that partition of each input topic that has
    /// it.
    pub fn partitions_of_task<'a>(
        &'a self,
        partition: i32,
        topics: &'a dyn TopicView,
    ) -> impl Iterator<Item = String> + 'a {
        let sources = self
            .source_topics
            .iter()
            .filter(move |t| topics.partitions(t).is_some_and(|count| partition < count));
        let repartition = self
            .repartition_source_topics
            .iter()
            .filter(move |(_, count)| partition < **count)
            .map(|(t, _)| t);
        sources.chain(repartition).cloned()
    }
}

/// The outcome of configuring a topology against the current topics.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConfiguredTopology {
    /// Present unless source topics are missing.
    pub subtopologies: BTreeMap<String, ConfiguredSubtopology>,
    /// Every topic exists with the right partition count: tasks can be assigned.
    pub ready: bool,
    /// A topic status for the heartbeat answer (code, detail).
    pub status: Option<(i8, String)>,
    /// Internal topics to create (only with MISSING_INTERNAL_TOPICS).
    pub topics_to_create: Vec<TopicToCreate>,
}

/// A topology the broker refuses (STREAMS_INVALID_TOPOLOGY, a heartbeat error).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidTopology(pub String);

impl InvalidTopology {
    pub fn code(&self) -> i16 {
        error_code::STREAMS_INVALID_TOPOLOGY
    }
}

/// "a, b, c and N additional topics": at most three named, sorted.
fn name_some(topics: &BTreeSet<String>) -> String {
    let named: Vec<&str> = topics.iter().take(3).map(String::as_str).collect();
    let mut text = named.join(", ");
    if topics.len() > 3 {
        text.push_str(&format!(" and {} additional topics", topics.len() - 3));
    }
    text
}

/// Configures `topology` against the topics that exist now.
pub fn configure(
    topology: &StoredTopology,
    topics: &dyn TopicView,
) -> Result<ConfiguredTopology, InvalidTopology> {
    let subtopologies = &topology.subtopologies;
    // 1. Every external source topic must exist.
    let missing: BTreeSet<String> = subtopologies
        .iter()
        .flat_map(|s| s.source_topics.iter())
        .filter(|t| topics.partitions(t).is_none())
        .cloned()
        .collect();
    if !missing.is_empty() {
        return Ok(ConfiguredTopology {
            status: Some((
                STATUS_MISSING_SOURCE_TOPICS,
                format!("Source topics {} are missing.", name_some(&missing)),
            )),
            ..ConfiguredTopology::default()
        });
    }
    // 2. Repartition topics' partition counts.
    let mut repartition = repartition_counts(subtopologies, topics)?;
    // 3. Copartitioned topics agree.
    if let Err(status) = enforce_copartitioning(subtopologies, topics, &mut repartition)? {
        return Ok(ConfiguredTopology {
            status: Some((STATUS_INCORRECTLY_PARTITIONED_TOPICS, status)),
            ..ConfiguredTopology::default()
        });
    }
    // 4. Tasks and changelog partitions.
    let mut configured = BTreeMap::new();
    let mut internal: Vec<(&StoredTopicInfo, i32)> = Vec::new();
    for subtopology in subtopologies {
        let repartition_source_topics: BTreeMap<String, i32> = subtopology
            .repartition_source_topics
            .iter()
            .map(|t| (t.name.clone(), repartition[&t.name]))
            .collect();
        let tasks = subtopology
            .source_topics
            .iter()
            .filter_map(|t| topics.partitions(t))
            .chain(repartition_source_topics.values().copied())
            .max()
            .unwrap_or(0);
        for info in &subtopology.repartition_source_topics {
            internal.push((info, repartition[&info.name]));
        }
        for info in &subtopology.state_changelog_topics {
            internal.push((info, tasks));
        }
        configured.insert(
            subtopology.id.clone(),
            ConfiguredSubtopology {
                tasks,
                source_topics: subtopology.source_topics.iter().cloned().collect(),
                repartition_source_topics,
                changelog_topics: subtopology
                    .state_changelog_topics
                    .iter()
                    .map(|t| (t.name.clone(), tasks))
                    .collect(),
                repartition_sink_topics: subtopology
                    .repartition_sink_topics
                    .iter()
                    .cloned()
                    .collect(),
            },
        );
    }
    // 5. Internal topics that exist must have the decided count; the rest are created.
    let mut to_create: BTreeMap<String, TopicToCreate> = BTreeMap::new();
    for (info, partitions) in internal {
        match topics.partitions(&info.name) {
            Some(existing) if existing != partitions => {
                return Ok(ConfiguredTopology {
                    subtopologies: configured,
                    status: Some((
                        STATUS_INCORRECTLY_PARTITIONED_TOPICS,
                        format!(
                            "Existing topic {} has different number of partitions: expected {partitions}, found {existing}.",
                            info.name
                        ),
                    )),
                    ..ConfiguredTopology::default()
                });
            }
            Some(_) => {}
            None => {
                to_create.insert(
                    info.name.clone(),
                    TopicToCreate {
                        name: info.name.clone(),
                        partitions,
                        replication_factor: if info.replication_factor == 0 {
                            -1
                        } else {
                            info.replication_factor
                        },
                        configs: info.configs.clone(),
                    },
                );
            }
        }
    }
    if !to_create.is_empty() {
        let names: BTreeSet<String> = to_create.keys().cloned().collect();
        return Ok(ConfiguredTopology {
            subtopologies: configured,
            ready: false,
            status: Some((
                STATUS_MISSING_INTERNAL_TOPICS,
                format!("Internal topics are missing: {}", name_some(&names)),
            )),
            topics_to_create: to_create.into_values().collect(),
        });
    }
    Ok(ConfiguredTopology {
        subtopologies: configured,
        ready: true,
        status: None,
        topics_to_create: Vec::new(),
    })
}

/// The partition count of every repartition topic: fixed ones as the topology says; the
/// others take the largest count among the inputs of the subtopology writing them,
/// repeated until every one is known.
fn repartition_counts(
    subtopologies: &[StoredSubtopology],
    topics: &dyn TopicView,
) -> Result<BTreeMap<String, i32>, InvalidTopology> {
    let mut counts: BTreeMap<String, i32> = BTreeMap::new();
    let mut unknown: BTreeSet<String> = BTreeSet::new();
    for info in subtopologies
        .iter()
        .flat_map(|s| s.repartition_source_topics.iter())
    {
        if info.partitions > 0 {
            counts.insert(info.name.clone(), info.partitions);
        } else {
            unknown.insert(info.name.clone());
        }
    }
    let sinks: BTreeSet<&String> = subtopologies
        .iter()
        .flat_map(|s| s.repartition_sink_topics.iter())
        .collect();
    if unknown.iter().any(|t| !sinks.contains(t)) {
        return Err(InvalidTopology(
            "Failed to compute number of partitions for all repartition topics, because a repartition source topic is never used as a sink topic.".into(),
        ));
    }
    while !unknown.is_empty() {
        let mut progress = false;
        for subtopology in subtopologies {
            let inputs = subtopology
                .source_topics
                .iter()
                .filter_map(|t| topics.partitions(t))
                .chain(
                    subtopology
                        .repartition_source_topics
                        .iter()
                        .filter_map(|t| counts.get(&t.name).copied()),
                )
                .max();
            let Some(count) = inputs else {
                continue;
            };
            for sink in &subtopology.repartition_sink_topics {
                if unknown.remove(sink) {
                    counts.insert(sink.clone(), count);
                    progress = true;
                }
            }
        }
        if !progress {
            return Err(InvalidTopology(
                "Failed to compute number of partitions for all repartition topics. There may be loops in the topology that cannot be resolved.".into(),
            ));
        }
    }
    Ok(counts)
}

/// Copartition groups: topics joined with one another must have as many partitions.
/// Repartition topics of a group follow its external topics (or each other); an
/// external mismatch is a status (Ok(Err(detail))), an unresolvable group an error.
fn enforce_copartitioning(
    subtopologies: &[StoredSubtopology],
    topics: &dyn TopicView,
    repartition: &mut BTreeMap<String, i32>,
) -> Result<Result<(), String>, InvalidTopology> {
    let fixed: BTreeMap<&str, i32> = subtopologies
        .iter()
        .flat_map(|s| s.repartition_source_topics.iter())
        .filter(|t| t.partitions > 0)
        .map(|t| (t.name.as_str(), t.partitions))
        .collect();
    for subtopology in subtopologies {
        for group in &subtopology.copartition_groups {
            let external: Vec<&String> = group
                .source_topics
                .iter()
                .filter_map(|&i| subtopology.source_topics.get(i as usize))
                .collect();
            let internal: Vec<&String> = group
                .repartition_source_topics
                .iter()
                .filter_map(|&i| subtopology.repartition_source_topics.get(i as usize))
                .map(|t| &t.name)
                .collect();
            let count = if external.is_empty() {
                let fixed_here: BTreeMap<&str, i32> = internal
                    .iter()
                    .filter_map(|t| fixed.get(t.as_str()).map(|c| (t.as_str(), *c)))
                    .collect();
                if let Some(&first) = fixed_here.values().next() {
                    if fixed_here.values().any(|c| *c != first) {
                        return Ok(Err(format!(
                            "Following topics do not have the same number of partitions: [{}]",
                            show_counts(fixed_here.iter().map(|(t, c)| (*t, *c)))
                        )));
                    }
                    first
                } else {
                    match internal.iter().filter_map(|t| repartition.get(*t)).max() {
                        Some(&max) => max,
                        None => {
                            return Err(InvalidTopology(format!(
                                "All topics in the copartition group had undefined partition number: {}",
                                internal.iter().map(|t| t.as_str()).collect::<Vec<_>>().join(", ")
                            )));
                        }
                    }
                }
            } else {
                let counts: BTreeMap<&str, i32> = external
                    .iter()
                    .filter_map(|t| topics.partitions(t).map(|c| (t.as_str(), c)))
                    .collect();
                let first = *counts.values().next().unwrap_or(&0);
                if counts.values().any(|c| *c != first) {
                    return Ok(Err(format!(
                        "Following topics do not have the same number of partitions: [{{{}}}]",
                        show_counts(counts.iter().map(|(t, c)| (*t, *c)))
                    )));
                }
                for topic in &internal {
                    if let Some(&fixed_count) = fixed.get(topic.as_str()) {
                        if fixed_count != first {
                            return Ok(Err(format!(
                                "Number of partitions [{fixed_count}] of repartition topic [{topic}] doesn't match number of partitions [{first}] of the source topic."
                            )));
                        }
                    }
                }
                first
            };
            for topic in internal {
                repartition.insert(topic.clone(), count);
            }
        }
    }
    Ok(Ok(()))
}

fn show_counts<'a>(counts: impl Iterator<Item = (&'a str, i32)>) -> String {
    counts
        .map(|(t, c)| format!("{t}={c}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// A hash of the partition counts and ids of the topics a topology needs (those that
/// exist): when it changes, the topology is configured again and tasks reassigned.
/// FNV-1a, so it is the same in every process that reads it from the log.
pub fn metadata_hash(topology: &StoredTopology, topics: &dyn TopicView) -> i64 {
    let mut names: BTreeSet<&str> = BTreeSet::new();
    for s in &topology.subtopologies {
        names.extend(s.source_topics.iter().map(String::as_str));
        names.extend(s.repartition_source_topics.iter().map(|t| t.name.as_str()));
        names.extend(s.state_changelog_topics.iter().map(|t| t.name.as_str()));
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    let mut feed = |bytes: &[u8]| {
        for byte in bytes {
            hash ^= u64::from(*byte);
            hash = hash.wrapping_mul(0x0100_0000_01b3);
        }
    };
    for name in names {
        let Some(partitions) = topics.partitions(name) else {
            continue;
        };
        feed(name.as_bytes());
        feed(&partitions.to_be_bytes());
        if let Some(id) = topics.id(name) {
            feed(id.as_bytes());
        }
    }
    hash as i64
}

/// Kafka's topic-name rules, for the topics a topology names.
pub fn valid_topic_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 249
        && name != "."
        && name != ".."
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// Every topic a topology names (sources, repartition sinks and sources, changelogs).
pub fn topology_topics(topology: &StoredTopology) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for s in &topology.subtopologies {
        out.extend(s.source_topics.iter().cloned());
        out.extend(s.repartition_sink_topics.iter().cloned());
        out.extend(s.repartition_source_topics.iter().map(|t| t.name.clone()));
        out.extend(s.state_changelog_topics.iter().map(|t| t.name.clone()));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    struct Topics(HashMap<String, i32>);

    impl TopicView for Topics {
        fn partitions(&self, topic: &str) -> Option<i32> {
            self.0.get(topic).copied()
        }
        fn names(&self) -> Vec<String> {
            self.0.keys().cloned().collect()
        }
        fn id(&self, _topic: &str) -> Option<uuid::Uuid> {
            None
        }
        fn name_of(&self, _id: uuid::Uuid) -> Option<String> {
            None
        }
    }

    fn info(name: &str, partitions: i32) -> StoredTopicInfo {
        StoredTopicInfo {
            name: name.into(),
            partitions,
            replication_factor: 0,
            configs: vec![("cleanup.policy".into(), "compact".into())],
        }
    }

    /// Kafka Streams' word count: groupBy (repartition) then count (a store).
    pub(crate) fn word_count() -> StoredTopology {
        StoredTopology {
            epoch: 0,
            subtopologies: vec![
                StoredSubtopology {
                    id: "0".into(),
                    source_topics: vec!["in".into()],
                    repartition_sink_topics: vec!["wc-counts-store-repartition".into()],
                    ..StoredSubtopology::default()
                },
                StoredSubtopology {
                    id: "1".into(),
                    repartition_source_topics: vec![info("wc-counts-store-repartition", 0)],
                    state_changelog_topics: vec![info("wc-counts-store-changelog", 0)],
                    ..StoredSubtopology::default()
                },
            ],
        }
    }

    fn topics(list: &[(&str, i32)]) -> Topics {
        Topics(list.iter().map(|(t, c)| (t.to_string(), *c)).collect())
    }

    #[test]
    fn missing_sources_come_first() {
        let configured = configure(&word_count(), &topics(&[])).unwrap();
        assert!(!configured.ready);
        assert!(configured.subtopologies.is_empty());
        assert_eq!(
            configured.status,
            Some((
                STATUS_MISSING_SOURCE_TOPICS,
                "Source topics in are missing.".into()
            ))
        );
    }

    #[test]
    fn internal_topics_follow_their_sources_and_are_created() {
        let configured = configure(&word_count(), &topics(&[("in", 3)])).unwrap();
        assert!(!configured.ready);
        assert_eq!(configured.subtopologies["0"].tasks, 3);
        assert_eq!(configured.subtopologies["1"].tasks, 3);
        let created: Vec<(&str, i32, i16)> = configured
            .topics_to_create
            .iter()
            .map(|t| (t.name.as_str(), t.partitions, t.replication_factor))
            .collect();
        assert_eq!(
            created,
            vec![
                ("wc-counts-store-changelog", 3, -1),
                ("wc-counts-store-repartition", 3, -1)
            ]
        );
        assert_eq!(configured.status.unwrap().0, STATUS_MISSING_INTERNAL_TOPICS);
        let ready = configure(
            &word_count(),
            &topics(&[
                ("in", 3),
                ("wc-counts-store-repartition", 3),
                ("wc-counts-store-changelog", 3),
            ]),
        )
        .unwrap();
        assert!(ready.ready && ready.status.is_none());
        assert!(ready.subtopologies["1"].stateful() && !ready.subtopologies["0"].stateful());
        let wrong = configure(
            &word_count(),
            &topics(&[
                ("in", 3),
                ("wc-counts-store-repartition", 2),
                ("wc-counts-store-changelog", 3),
            ]),
        )
        .unwrap();
        assert_eq!(
            wrong.status.unwrap(),
            (STATUS_INCORRECTLY_PARTITIONED_TOPICS, "Existing topic wc-counts-store-repartition has different number of partitions: expected 3, found 2.".into())
        );
    }

    #[test]
    fn loops_and_unused_repartition_sources_are_invalid() {
        let mut topology = word_count();
        topology.subtopologies[0].repartition_sink_topics.clear();
        assert!(configure(&topology, &topics(&[("in", 3)]))
            .unwrap_err()
            .0
            .contains("never used as a sink topic"));
        let looped = StoredTopology {
            epoch: 0,
            subtopologies: vec![StoredSubtopology {
                id: "0".into(),
                repartition_source_topics: vec![info("r", 0)],
                repartition_sink_topics: vec!["r".into()],
                ..StoredSubtopology::default()
            }],
        };
        assert!(configure(&looped, &topics(&[]))
            .unwrap_err()
            .0
            .contains("loops"));
    }

    #[test]
    fn copartitioned_sources_must_agree() {
        let topology = StoredTopology {
            epoch: 0,
            subtopologies: vec![StoredSubtopology {
                id: "0".into(),
                source_topics: vec!["a".into(), "b".into()],
                copartition_groups: vec![super::super::streams_records::StoredCopartitionGroup {
                    source_topics: vec![0, 1],
                    ..Default::default()
                }],
                ..StoredSubtopology::default()
            }],
        };
        let configured = configure(&topology, &topics(&[("a", 2), ("b", 3)])).unwrap();
        assert_eq!(
            configured.status.unwrap(),
            (
                STATUS_INCORRECTLY_PARTITIONED_TOPICS,
                "Following topics do not have the same number of partitions: [{a=2, b=3}]".into()
            )
        );
        assert!(
            configure(&topology, &topics(&[("a", 3), ("b", 3)]))
                .unwrap()
                .ready
        );
    }

    #[test]
    fn names_are_checked_as_kafka_does() {
        assert!(valid_topic_name("wc-counts_store.1"));
        assert!(!valid_topic_name(".."));
        assert!(!valid_topic_name("a b"));
        assert!(!valid_topic_name(&"x".repeat(250)));
    }
}
