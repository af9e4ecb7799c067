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
//! Fetch is also counted as FetchConsumer or FetchFollower, as Kafka does.

use std::sync::OnceLock;
use std::time::{Duration, Instant};

use kafka_protocol::messages::ApiKey;
use metrics::{Counter, Histogram, Label};
use metrics_exporter_prometheus::PrometheusRecorder;

use super::{counter, histogram, names};

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
    versions: Vec<OnceLock<Counter>>,
    total: Histogram,
    request_queue: Histogram,
    local: Histogram,
    remote: Histogram,
    response_queue: Histogram,
    response_send: Histogram,
}

impl ApiMetrics {
    fn register(recorder: &PrometheusRecorder, name: String) -> ApiMetrics {
        let labels = || vec![Label::new("request", name.clone())];
        ApiMetrics {
            versions: (0..VERSIONS_MAX).map(|_| OnceLock::new()).collect(),
            total: histogram(recorder, names::TOTAL_TIME_MS, labels()),
            request_queue: histogram(recorder, names::REQUEST_QUEUE_TIME_MS, labels()),
            local: histogram(recorder, names::LOCAL_TIME_MS, labels()),
            remote: histogram(recorder, names::REMOTE_TIME_MS, labels()),
            response_queue: histogram(recorder, names::RESPONSE_QUEUE_TIME_MS, labels()),
            response_send: histogram(recorder, names::RESPONSE_SEND_TIME_MS, labels()),
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
        let api = self.apis[slot].get_or_init(|| ApiMetrics::register(recorder, name()));
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
        let ms = |d: Duration| d.as_secs_f64() * 1000.0;
        let request_queue = ms(times.started.saturating_duration_since(times.read));
        let local = ms(times.busy);
        let waited = ready.saturating_duration_since(times.started);
        let remote = ms(waited.saturating_sub(times.busy));
        let response_queue = ms(writing.saturating_duration_since(ready));
        let response_send = ms(written.saturating_duration_since(writing));
        let total = ms(written.saturating_duration_since(times.read));
        for (api, _) in self.each(&times) {
            api.total.record(total);
            api.request_queue.record(request_queue);
            api.local.record(local);
            api.remote.record(remote);
            api.response_queue.record(response_queue);
            api.response_send.record(response_send);
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
}
