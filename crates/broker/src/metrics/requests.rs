//! RequestMetrics: requests by API and version, and where each one's time went, split as
//! Kafka's RequestChannel splits it. Strand has no request queue or network threads;
//! the same questions have these answers:
//!
//! - request queue: from the body read to the handler starting (a pipelined request waits
//!   for the previous one of its connection);
//! - local: the time the handler kept a worker thread busy (its polls, timed as
//!   request_percentage times them);
//! - remote: the rest of the handler's time and a deferred answer's wait (syncs,
//!   replication, a fetch's long poll: Kafka's purgatory);
//! - response queue: from the answer ready to the connection's writer taking it (answers
//!   leave in request order);
//! - response send: writing it.
//!
//! Fetch is also counted as FetchConsumer or FetchFollower, as Kafka does. Besides the
//! times, each request's throttle (ThrottleTimeMs) and size (RequestBytes).

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use metrics::{Counter, Label};
use metrics_exporter_prometheus::PrometheusRecorder;

use super::summary::{self, Summary, Unit};
use super::{counter, names};

/// Kafka's API keys stay below this; slots past it are Fetch's two kinds.
const API_KEYS_MAX: usize = 128;
const FETCH_CONSUMER: usize = API_KEYS_MAX;
const FETCH_FOLLOWER: usize = API_KEYS_MAX + 1;
/// Versions above this share one counter (none exists yet: Fetch is at 18).
const VERSIONS_MAX: usize = 32;

#[derive(Debug)]
pub struct RequestMetrics {
    apis: Vec<OnceLock<ApiMetrics>>,
}

/// One API's (or Fetch kind's) metrics.
#[derive(Debug)]
pub struct ApiMetrics {
    name: String,
    /// `request="NAME"`, as the summaries are labelled.
    label: String,
    versions: Vec<OnceLock<Counter>>,
    summaries: [Summary; SUMMARIES],
}

/// Each request's summaries, in this order.
const SUMMARIES: usize = 8;
const TOTAL: usize = 0;
const REQUEST_QUEUE: usize = 1;
const LOCAL: usize = 2;
const REMOTE: usize = 3;
const RESPONSE_QUEUE: usize = 4;
const RESPONSE_SEND: usize = 5;
const THROTTLE: usize = 6;
const REQUEST_BYTES: usize = 7;

/// Each summary's name, in the order above.
const SUMMARY_NAMES: [&str; SUMMARIES] = [
    names::TOTAL_TIME_MS,
    names::REQUEST_QUEUE_TIME_MS,
    names::LOCAL_TIME_MS,
    names::REMOTE_TIME_MS,
    names::RESPONSE_QUEUE_TIME_MS,
    names::RESPONSE_SEND_TIME_MS,
    names::THROTTLE_TIME_MS,
    names::REQUEST_BYTES,
];

impl ApiMetrics {
    fn register(name: String) -> ApiMetrics {
        ApiMetrics {
            versions: (0..VERSIONS_MAX).map(|_| OnceLock::new()).collect(),
            summaries: std::array::from_fn(|index| {
                Summary::new(if index == REQUEST_BYTES {
                    Unit::Plain
                } else {
                    Unit::Millis
                })
            }),
            label: format!("request=\"{name}\""),
            name,
        }
    }

    /// The slot of `version`'s requests counter, registered on first use.
    fn register_version(&self, recorder: &PrometheusRecorder, version: i16) -> usize {
        let slot = (version.max(0) as usize).min(VERSIONS_MAX - 1);
        self.versions[slot].get_or_init(|| {
            let labels = vec![
                Label::new("request", self.name.clone()),
                Label::new("version", version.to_string()),
            ];
            counter(recorder, names::REQUESTS, labels)
        });
        slot
    }
}

impl Default for RequestMetrics {
    fn default() -> Self {
        RequestMetrics::new()
    }
}

impl RequestMetrics {
    pub fn new() -> RequestMetrics {
        RequestMetrics {
            apis: (0..API_KEYS_MAX + 2).map(|_| OnceLock::new()).collect(),
        }
    }

    /// The (API slot, version slot) of a request, registered on first use.
    fn register(
        &self,
        recorder: &PrometheusRecorder,
        slot: usize,
        name: impl FnOnce() -> String,
        version: i16,
    ) -> (usize, usize) {
        let api = self.apis[slot].get_or_init(|| ApiMetrics::register(name()));
        (slot, api.register_version(recorder, version))
    }

    /// Starts measuring a request read at `read` and handled from now. Its metrics are
    /// registered now; the request carries only their slots, so measuring shares nothing
    /// between connections but the counters and histograms themselves.
    pub fn start(
        &self,
        recorder: &PrometheusRecorder,
        api_key: ApiKey,
        version: i16,
        follower_fetch: bool,
        read: Instant,
        request_bytes: usize,
    ) -> RequestTimes {
        let key = api_key as i16;
        let slot = (key.max(0) as usize).min(API_KEYS_MAX - 1);
        let primary = self.register(recorder, slot, || format!("{api_key:?}"), version);
        let fetch_kind = (api_key == ApiKey::Fetch).then(|| {
            if follower_fetch {
                self.register(recorder, FETCH_FOLLOWER, || "FetchFollower".into(), version)
            } else {
                self.register(recorder, FETCH_CONSUMER, || "FetchConsumer".into(), version)
            }
        });
        RequestTimes {
            apis: [Some(primary), fetch_kind],
            read,
            started: Instant::now(),
            busy: Duration::ZERO,
            handled: None,
            throttle_ms: 0,
            request_bytes: u64::try_from(request_bytes).unwrap_or(u64::MAX),
        }
    }

    fn each<'a>(&'a self, times: &RequestTimes) -> impl Iterator<Item = (&'a ApiMetrics, usize)> {
        times
            .apis
            .into_iter()
            .flatten()
            .filter_map(|(slot, version)| Some((self.apis[slot].get()?, version)))
    }

    /// The answer is about to be written: counted now, so a client that has read it
    /// finds it counted.
    pub fn count(&self, times: &RequestTimes) {
        for (api, version) in self.each(times) {
            if let Some(counter) = api.versions[version].get() {
                counter.increment(1);
            }
        }
    }

    /// The writer began writing the answer at `writing` and finished at `written`; a
    /// deferred answer was ready at `deferred_ready` (when its wait ended), any other
    /// when its handler returned.
    pub fn written(
        &self,
        times: RequestTimes,
        deferred_ready: Option<Instant>,
        writing: Instant,
        written: Instant,
    ) {
        let handled = times.handled.unwrap_or(writing);
        let ready = deferred_ready.map_or(handled, |ready| ready.max(handled));
        let waited = ready.saturating_duration_since(times.started);
        let mut durations = [Duration::ZERO; THROTTLE];
        durations[TOTAL] = written.saturating_duration_since(times.read);
        durations[REQUEST_QUEUE] = times.started.saturating_duration_since(times.read);
        durations[LOCAL] = times.busy;
        durations[REMOTE] = waited.saturating_sub(times.busy);
        durations[RESPONSE_QUEUE] = writing.saturating_duration_since(ready);
        durations[RESPONSE_SEND] = written.saturating_duration_since(writing);
        for (api, _) in self.each(&times) {
            for (summary, duration) in api.summaries.iter().zip(durations) {
                summary.record_duration(duration);
            }
            api.summaries[THROTTLE].record(u64::from(times.throttle_ms) * 1000);
            api.summaries[REQUEST_BYTES].record(times.request_bytes);
        }
    }

    fn registered(&self) -> impl Iterator<Item = &ApiMetrics> {
        self.apis.iter().filter_map(OnceLock::get)
    }

    /// Moves every summary's window (see `summary`).
    pub fn upkeep(&self, now: Instant) {
        for api in self.registered() {
            for summary in &api.summaries {
                summary.upkeep(now);
            }
        }
    }

    /// Writes the summaries of every API that has served a request.
    pub fn render(&self, out: &mut String) {
        let mut apis: Vec<&ApiMetrics> = self.registered().collect();
        apis.sort_by(|a, b| a.name.cmp(&b.name));
        for (index, name) in SUMMARY_NAMES.iter().enumerate() {
            let summaries = apis
                .iter()
                .map(|api| (api.label.as_str(), &api.summaries[index]));
            summary::render(out, name, names::help(name), summaries);
        }
    }
}

/// One request's times, from its body read to its answer written, and the metrics they
/// go to: (API slot, version slot), and Fetch's kind.
#[derive(Debug)]
pub struct RequestTimes {
    apis: [Option<(usize, usize)>; 2],
    read: Instant,
    started: Instant,
    busy: Duration,
    handled: Option<Instant>,
    throttle_ms: u32,
    request_bytes: u64,
}

impl RequestTimes {
    /// Time since the handler started.
    pub fn since_start(&self) -> Duration {
        self.started.elapsed()
    }

    /// The handler returned after keeping a thread busy for `busy`.
    pub fn handled(&mut self, busy: Duration) {
        self.busy = busy;
        self.handled = Some(Instant::now());
    }

    /// The client was throttled for `ms` on account of this request (its quotas).
    pub fn throttled(&mut self, ms: u32) {
        self.throttle_ms = self.throttle_ms.max(ms);
    }
}
