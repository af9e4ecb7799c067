//! The internal topics streams groups need (repartition and changelog topics), created
//! by the broker on the group's behalf as Kafka 4.4 does: in the background, after the
//! heartbeat that found them missing was answered; a topic already being created is not
//! asked for again, and a failure is remembered for a while (Kafka: twice the heartbeat
//! interval) and reported in the group's MISSING_INTERNAL_TOPICS status instead of being
//! retried on every heartbeat.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use strand_coordinator::group::streams_topology::TopicToCreate;

use crate::broker::Broker;

/// How long a failed creation is remembered (twice Kafka's default heartbeat interval).
const FAILURE_KEPT: Duration = Duration::from_secs(10);
/// Bounds on what is tracked: a hostile client cannot grow these without limit.
const TRACKED_MAX: usize = 10_000;

#[derive(Debug, Default)]
struct State {
    in_flight: HashSet<String>,
    /// topic -> (when it failed, why)
    failed: HashMap<String, (Instant, String)>,
}

#[derive(Debug, Default, Clone)]
pub struct StreamsTopics {
    state: Arc<Mutex<State>>,
}

impl StreamsTopics {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Starts creating `topics` (those not in flight and not recently failed); returns
    /// the note for the status detail on recent failures ("; Creation failed: ...").
    pub fn create(&self, broker: &Arc<Broker>, topics: Vec<TopicToCreate>) -> Option<String> {
        let now = Instant::now();
        let mut failures = Vec::new();
        let mut start = Vec::new();
        {
            let mut state = self.state();
            state
                .failed
                .retain(|_, (at, _)| now.duration_since(*at) < FAILURE_KEPT);
            for topic in topics {
                if let Some((_, why)) = state.failed.get(&topic.name) {
                    failures.push(format!("{} ({why})", topic.name));
                } else if !state.in_flight.contains(&topic.name)
                    && state.in_flight.len() < TRACKED_MAX
                {
                    state.in_flight.insert(topic.name.clone());
                    start.push(topic);
                }
            }
        }
        if !start.is_empty() {
            let broker = broker.clone();
            let this = self.clone();
            tokio::spawn(async move {
                for topic in start {
                    let configs: BTreeMap<String, String> = topic.configs.into_iter().collect();
                    let created = broker
                        .create_topic(
                            &topic.name,
                            topic.partitions,
                            topic.replication_factor,
                            Vec::new(),
                            configs,
                            false,
                        )
                        .await;
                    let mut state = this.state();
                    state.in_flight.remove(&topic.name);
                    match created {
                        Ok(_) => {}
                        // Someone else created it meanwhile: the group sees it next time.
                        Err(e) if e.code == crate::error_code::TOPIC_ALREADY_EXISTS => {}
                        Err(e) => {
                            let why = e.message.unwrap_or_else(|| format!("error {}", e.code));
                            tracing::warn!(topic = %topic.name, %why, "could not create a streams group's internal topic");
                            if state.failed.len() < TRACKED_MAX {
                                state.failed.insert(topic.name, (Instant::now(), why));
                            }
                        }
                    }
                }
            });
        }
        if failures.is_empty() {
            return None;
        }
        failures.sort();
        let more = failures.len().saturating_sub(3);
        let mut note = format!(
            "; Creation failed: {}",
            failures[..failures.len().min(3)].join(", ")
        );
        if more > 0 {
            note.push_str(&format!(" and {more} more"));
        }
        note.push('.');
        Some(note)
    }
}
