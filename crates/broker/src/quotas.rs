//! Client quotas (`kafka-configs --entity-type users/clients`), enforced as Kafka's
//! ClientQuotaManager enforces them: each client's usage (bytes produced, bytes fetched) is
//! a rate over 11 one-second windows (quota.window.num, quota.window.size.seconds) counted
//! under the (user, client id) its quota was set for (`ClientQuotas::applicable`, Kafka's
//! precedence). Over the quota, the answer carries the time that brings the rate back to
//! it, X = (O - T) / T * W for an observed rate O, a quota T and the measured window W,
//! and the connection is not read for that long (Kafka mutes its channel; clients also
//! wait that long before their next request, KIP-219). A throttled fetch answers no
//! records (and is not counted), as Kafka's does.
//!
//! request_percentage (Kafka's ClientRequestQuotaManager) counts the time requests keep a
//! thread busy, as a percentage of one thread: here the time spent polling the request's
//! handler (`router.rs` times each poll; waits for data, for replicas or for a long-poll
//! fetch cost nothing), over the same windows, with a throttle of at most one window.
//! Follower fetches and the SASL and ApiVersions requests before authentication are exempt.
//!
//! controller_mutation_rate (KIP-599, Kafka's ControllerMutationQuotaManager) counts the
//! partitions CreateTopics, CreatePartitions and DeleteTopics create or delete in a token
//! bucket: full at quota × 11 windows, refilled at the quota per second. Strict (CreateTopics
//! v6+, CreatePartitions v3+, DeleteTopics v5+): once the bucket is below zero, a topic is
//! refused with THROTTLING_QUOTA_EXCEEDED and the answer carries the time until it is back
//! at zero; older versions are permissive (counted, throttled, never refused). Kafka counts
//! on the active controller; Strand counts on the broker a request comes to (admin clients
//! send these requests to one broker, but one spreading them over n brokers gets n times
//! the rate).
//!
//! The quotas themselves live in the metadata log (`SetClientQuota` records) or, on a single
//! node, in `client_quotas.json` (`local_state.rs`); with none set nothing is counted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strand_metadata::client_quotas::{
    ClientQuotas, CONNECTION_CREATION_RATE, CONTROLLER_MUTATION_RATE, REQUEST_PERCENTAGE,
};
use strand_metadata::MetadataImage;

use crate::broker::{ApiError, Broker};
use crate::error_code;
use crate::local_state::{ImageState, Snapshot};
use crate::net::RequestContext;

/// The single node's file of client quotas.
pub const CLIENT_QUOTAS_FILE: &str = "client_quotas.json";

/// Kafka's quota.window.num and quota.window.size.seconds defaults.
const SAMPLES: u64 = 11;
const WINDOW_MS: u64 = 1_000;
/// A client's usage is forgotten after this long without a request (Kafka expires its
/// quota sensors after an hour).
const IDLE_MAX: Duration = Duration::from_secs(3_600);
/// The most clients whose usage is kept; past it the ones idle longest are forgotten
/// first (a flood of client ids costs bounded memory).
const SENSORS_MAX: usize = 100_000;

impl ImageState for ClientQuotas {
    fn of(image: &MetadataImage) -> &ClientQuotas {
        &image.client_quotas
    }

    fn of_mut(image: &mut MetadataImage) -> &mut ClientQuotas {
        &mut image.client_quotas
    }
}

/// A rate over the last `SAMPLES` windows (Kafka's Rate over a SampledStat).
#[derive(Debug)]
struct Rate {
    /// (window start, total recorded in it), oldest first.
    samples: VecDeque<(u64, f64)>,
    last_used_ms: u64,
}

impl Rate {
    fn new(now_ms: u64) -> Rate {
        Rate {
            samples: VecDeque::with_capacity(SAMPLES as usize),
            last_used_ms: now_ms,
        }
    }

    fn purge(&mut self, now_ms: u64) {
        while self
            .samples
            .front()
            .is_some_and(|(start, _)| start + SAMPLES * WINDOW_MS <= now_ms)
        {
            self.samples.pop_front();
        }
    }

    fn record(&mut self, now_ms: u64, value: f64) {
        self.purge(now_ms);
        self.last_used_ms = now_ms;
        let current = self
            .samples
            .back()
            .is_some_and(|(start, _)| now_ms < start + WINDOW_MS);
        if !current {
            self.samples.push_back((now_ms, 0.0));
        }
        if let Some((_, total)) = self.samples.back_mut() {
            *total += value;
        }
    }

    /// Kafka's Rate.windowSize: the time since the oldest window began, counted as at
    /// least `SAMPLES - 1` whole windows (so a new client's first burst is not a huge rate).
    fn window_ms(&self, now_ms: u64) -> u64 {
        let oldest = self.samples.front().map_or(now_ms, |(start, _)| *start);
        let mut elapsed = now_ms.saturating_sub(oldest);
        let full = elapsed / WINDOW_MS;
        if full < SAMPLES - 1 {
            elapsed += (SAMPLES - 1 - full) * WINDOW_MS;
        }
        elapsed.max(1)
    }

    /// Per second.
    fn rate(&self, now_ms: u64) -> f64 {
        let total: f64 = self.samples.iter().map(|(_, total)| total).sum();
        total / (self.window_ms(now_ms) as f64 / 1_000.0)
    }

    /// How long until the rate is back at `bound` if nothing more is recorded.
    fn throttle_ms(&self, now_ms: u64, bound: f64) -> u32 {
        let rate = self.rate(now_ms);
        if rate <= bound {
            return 0;
        }
        let ms = (rate - bound) / bound * self.window_ms(now_ms) as f64;
        ms.round().min(i32::MAX as f64) as u32
    }
}

/// Kafka's TokenBucket: starts full at `quota` × the measured windows, refills at
/// `quota` per second; what is recorded is taken out, and below zero the client is over.
#[derive(Debug)]
struct TokenBucket {
    tokens: f64,
    last_used_ms: u64,
}

impl TokenBucket {
    fn full(now_ms: u64, quota: f64) -> TokenBucket {
        TokenBucket {
            tokens: TokenBucket::burst(quota),
            last_used_ms: now_ms,
        }
    }

    fn burst(quota: f64) -> f64 {
        quota * (SAMPLES * WINDOW_MS) as f64 / 1_000.0
    }

    fn refill(&mut self, now_ms: u64, quota: f64) {
        let elapsed = now_ms.saturating_sub(self.last_used_ms) as f64 / 1_000.0;
        self.tokens = (self.tokens + quota * elapsed).min(TokenBucket::burst(quota));
        self.last_used_ms = now_ms;
    }

    /// How long until the bucket is back at zero (Kafka's -tokens / quota).
    fn throttle_ms(&self, quota: f64) -> u32 {
        if self.tokens >= 0.0 {
            return 0;
        }
        (-self.tokens / quota * 1_000.0)
            .round()
            .min(i32::MAX as f64) as u32
    }
}

/// One client's usage of one quota.
#[derive(Debug)]
enum Sensor {
    Rate(Rate),
    Bucket(TokenBucket),
}

impl Sensor {
    fn last_used_ms(&self) -> u64 {
        match self {
            Sensor::Rate(rate) => rate.last_used_ms,
            Sensor::Bucket(bucket) => bucket.last_used_ms,
        }
    }
}

/// (quota key, user, client id) as counted (Kafka's precedence decides which).
pub type SensorKey = (&'static str, String, String);

/// Every client's usage, by (quota key, user, client id) as counted.
#[derive(Debug)]
pub struct QuotaSensors {
    sensors: Mutex<HashMap<SensorKey, Sensor>>,
    started: Instant,
}

impl Default for QuotaSensors {
    fn default() -> QuotaSensors {
        QuotaSensors {
            sensors: Mutex::new(HashMap::new()),
            started: Instant::now(),
        }
    }
}

impl QuotaSensors {
    fn now_ms(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// Counts one under `sensor` unless that takes its rate over `bound`: then it is not
    /// counted, and the throttle (at most one window, as Kafka bounds it) is returned.
    fn admit(&self, sensor: (&'static str, String, String), bound: f64) -> u32 {
        let throttle = self.record(sensor.clone(), 1.0, bound);
        if throttle > 0 {
            self.record(sensor, -1.0, bound);
        }
        throttle.min(WINDOW_MS as u32)
    }

    /// Runs `use_sensor` on the sensor of `key` (made by `new` if the client has none).
    fn with_sensor<R>(
        &self,
        key: SensorKey,
        new: impl FnOnce(u64) -> Sensor,
        use_sensor: impl FnOnce(&mut Sensor, u64) -> R,
    ) -> R {
        let now_ms = self.now_ms();
        let mut sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        if !sensors.contains_key(&key) && sensors.len() >= SENSORS_MAX {
            forget_idlest(&mut sensors, now_ms);
        }
        let sensor = sensors.entry(key).or_insert_with(|| new(now_ms));
        use_sensor(sensor, now_ms)
    }

    /// Records `value` under `sensor` and returns the throttle its rate over `bound`
    /// asks for.
    fn record(&self, sensor: SensorKey, value: f64, bound: f64) -> u32 {
        self.with_sensor(
            sensor,
            |now_ms| Sensor::Rate(Rate::new(now_ms)),
            |sensor, now_ms| match sensor {
                Sensor::Rate(rate) => {
                    rate.record(now_ms, value);
                    rate.throttle_ms(now_ms, bound)
                }
                Sensor::Bucket(_) => 0,
            },
        )
    }

    /// The throttle `sensor`'s rate over `bound` asks for now, without recording (none
    /// for a client never counted).
    fn peek(&self, sensor: &SensorKey, bound: f64) -> u32 {
        let now_ms = self.now_ms();
        let sensors = self.sensors.lock().unwrap_or_else(|p| p.into_inner());
        match sensors.get(sensor) {
            Some(Sensor::Rate(rate)) => rate.throttle_ms(now_ms, bound),
            _ => 0,
        }
    }

    /// Takes `value` out of the token bucket `sensor` (refilled at `quota`), unless
    /// `strict` and it is already below zero. Returns (taken, the time until the bucket
    /// is back at zero as it was before taking, 0 if it was not below).
    fn take(&self, sensor: SensorKey, value: f64, quota: f64, strict: bool) -> (bool, u32) {
        self.with_sensor(
            sensor,
            |now_ms| Sensor::Bucket(TokenBucket::full(now_ms, quota)),
            |sensor, now_ms| match sensor {
                Sensor::Bucket(bucket) => {
                    bucket.refill(now_ms, quota);
                    let before = bucket.throttle_ms(quota);
                    if strict && before > 0 {
                        return (false, before);
                    }
                    bucket.tokens -= value;
                    // Permissive: throttled by what this took (Kafka records, then checks).
                    let throttle = if strict { 0 } else { bucket.throttle_ms(quota) };
                    (true, throttle)
                }
                Sensor::Rate(_) => (true, 0),
            },
        )
    }
}

/// Forgets clients idle past `IDLE_MAX`, or else the idlest tenth.
fn forget_idlest(sensors: &mut HashMap<SensorKey, Sensor>, now_ms: u64) {
    let idle_max = IDLE_MAX.as_millis() as u64;
    sensors.retain(|_, sensor| now_ms.saturating_sub(sensor.last_used_ms()) < idle_max);
    if sensors.len() < SENSORS_MAX {
        return;
    }
    let mut last_used: Vec<u64> = sensors.values().map(Sensor::last_used_ms).collect();
    let cut = last_used.len() / 10;
    let (_, threshold, _) = last_used.select_nth_unstable(cut);
    let threshold = *threshold;
    sensors.retain(|_, sensor| sensor.last_used_ms() > threshold);
}

/// One request's controller_mutation_rate: created by `Broker::mutation_quota`, asked
/// for each topic by `Broker::admit_mutation`.
#[derive(Debug)]
pub struct MutationQuota {
    /// The sensor and quota that apply (None: no quota, everything admitted).
    sensor: Option<(SensorKey, f64)>,
    strict: bool,
    throttle_ms: u32,
}

impl MutationQuota {
    /// Whether a quota applies (then a mutation is validated before it is counted).
    pub fn is_bounded(&self) -> bool {
        self.sensor.is_some()
    }

    /// The throttle time the answer carries.
    pub fn throttle_ms(&self) -> u32 {
        self.throttle_ms
    }
}

impl Broker {
    /// A new connection from `ip` against its connection_creation_rate quota (the
    /// address's own, else the default ip entity's): 0 to serve it, else the time after
    /// which to close it.
    pub fn connection_throttle(&self, ip: std::net::IpAddr) -> u32 {
        let quotas = self.client_quotas();
        if quotas.is_empty() {
            return 0;
        }
        let address = ip.to_string();
        let Some(bound) = quotas.ip_connection_rate(&address) else {
            return 0;
        };
        self.quota_sensors
            .admit((CONNECTION_CREATION_RATE, address, String::new()), bound)
    }

    pub fn client_quotas(&self) -> Snapshot<ClientQuotas> {
        self.snapshot(&self.local_quotas)
    }

    /// The sensor a request's client is counted under for quota `key`, with its bound:
    /// None without such a quota (nothing is looked up when no quota is set at all).
    fn quota_sensor(
        &self,
        context: &RequestContext,
        client_id: &str,
        key: &'static str,
    ) -> Option<(SensorKey, f64)> {
        let quotas = self.client_quotas();
        if quotas.is_empty() {
            return None;
        }
        let (bound, (user, client)) = quotas.applicable(&context.principal.name, client_id, key)?;
        Some(((key, user, client), bound))
    }

    /// The request_percentage that applies to the request's client, with the sensor its
    /// time is counted under (None: no such quota, nothing to time).
    pub fn request_quota(
        &self,
        context: &RequestContext,
        client_id: &str,
    ) -> Option<(SensorKey, f64)> {
        self.quota_sensor(context, client_id, REQUEST_PERCENTAGE)
    }

    /// Counts `busy` (the time the request kept a thread busy) against the client's
    /// request_percentage `quota` (from `request_quota`); returns the throttle, at most one
    /// window as Kafka bounds it.
    pub fn record_request_time(&self, (sensor, bound): (SensorKey, f64), busy: Duration) -> u32 {
        // Kafka's nanosToPercentage: a second of one thread is 100.
        let percent_seconds = busy.as_secs_f64() * 100.0;
        self.quota_sensors
            .record(sensor, percent_seconds, bound)
            .min(WINDOW_MS as u32)
    }

    /// The throttle the client's request_percentage asks for from what it has used so far
    /// (a fetch over it answers no records, as Kafka's does).
    pub fn request_throttle_now(&self, context: &RequestContext, client_id: &str) -> u32 {
        let Some((sensor, bound)) = self.request_quota(context, client_id) else {
            return 0;
        };
        self.quota_sensors
            .peek(&sensor, bound)
            .min(WINDOW_MS as u32)
    }

    /// The controller_mutation_rate of the request's client: strict for the versions
    /// that can answer THROTTLING_QUOTA_EXCEEDED.
    pub fn mutation_quota(
        &self,
        context: &RequestContext,
        client_id: &str,
        strict: bool,
    ) -> MutationQuota {
        let sensor = self.quota_sensor(context, client_id, CONTROLLER_MUTATION_RATE);
        MutationQuota {
            sensor,
            strict,
            throttle_ms: 0,
        }
    }

    /// Counts `partitions` created or deleted against `quota`; refused (strict quotas
    /// only) with Kafka's THROTTLING_QUOTA_EXCEEDED once the client's bucket is empty.
    pub fn admit_mutation(
        &self,
        quota: &mut MutationQuota,
        partitions: i32,
    ) -> Result<(), ApiError> {
        let Some((sensor, bound)) = &quota.sensor else {
            return Ok(());
        };
        let (taken, throttle) = self.quota_sensors.take(
            sensor.clone(),
            partitions.max(0) as f64,
            *bound,
            quota.strict,
        );
        quota.throttle_ms = quota.throttle_ms.max(throttle);
        if taken {
            Ok(())
        } else {
            Err(ApiError::new(
                error_code::THROTTLING_QUOTA_EXCEEDED,
                "The throttling quota has been exceeded.",
            ))
        }
    }

    /// Counts `value` (bytes) against the request's client's quota `key`
    /// (producer_byte_rate, consumer_byte_rate) and returns the throttle time in ms it
    /// earns: 0 within its quota or without one.
    pub fn record_quota(
        &self,
        context: &RequestContext,
        client_id: &str,
        key: &'static str,
        value: f64,
    ) -> u32 {
        match self.quota_sensor(context, client_id, key) {
            Some((sensor, bound)) => self.quota_sensors.record(sensor, value, bound),
            None => 0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rate_over_its_bound_earns_the_time_that_brings_it_back() {
        let mut rate = Rate::new(0);
        // 10 KB in the first second: measured over at least 10 windows, 1 KB/s.
        rate.record(0, 10_000.0);
        assert_eq!(rate.window_ms(500), 10_500);
        assert_eq!(rate.throttle_ms(500, 1_000.0), 0);
        // Another 11 KB: 21 KB over 10.5 s is 2 KB/s, twice a 1 KB/s quota: the
        // window must grow by as much again.
        rate.record(500, 11_000.0);
        assert_eq!(rate.throttle_ms(500, 1_000.0), 10_500);
        // Windows older than the 11 kept fall away.
        rate.record(20_000, 1.0);
        assert_eq!(rate.samples.len(), 1);
        assert_eq!(rate.throttle_ms(20_000, 1_000.0), 0);
    }

    #[test]
    fn clients_past_the_bound_are_forgotten_idlest_first() {
        let mut sensors = HashMap::new();
        for i in 0..SENSORS_MAX as u64 {
            sensors.insert(
                ("k", i.to_string(), String::new()),
                Sensor::Rate(Rate::new(i)),
            );
        }
        forget_idlest(&mut sensors, SENSORS_MAX as u64);
        assert!(sensors.len() < SENSORS_MAX);
        assert!(sensors.len() >= SENSORS_MAX * 8 / 10);
        assert!(!sensors.contains_key(&("k", "0".to_string(), String::new())));
    }

    #[test]
    fn a_token_bucket_starts_full_refills_at_its_quota_and_says_when_it_is_back() {
        // 2 partitions a second: a burst of 22.
        let mut bucket = TokenBucket::full(0, 2.0);
        assert_eq!(bucket.tokens, 22.0);
        bucket.tokens -= 30.0;
        assert_eq!(bucket.throttle_ms(2.0), 4_000, "8 below zero at 2/s");
        bucket.refill(1_000, 2.0);
        assert_eq!(bucket.throttle_ms(2.0), 3_000);
        bucket.refill(60_000, 2.0);
        assert_eq!(bucket.tokens, 22.0, "never above the burst");
    }

    #[test]
    fn a_strict_mutation_quota_refuses_once_the_bucket_is_below_zero() {
        let sensors = QuotaSensors::default();
        let key = || (CONTROLLER_MUTATION_RATE, "alice".to_string(), String::new());
        // 1 partition a second: 11 in the bucket. A topic of 10, then one of 5 (taken:
        // the bucket was not below zero before it), then anything is refused.
        assert_eq!(sensors.take(key(), 10.0, 1.0, true), (true, 0));
        assert_eq!(sensors.take(key(), 5.0, 1.0, true), (true, 0));
        let (taken, throttle) = sensors.take(key(), 1.0, 1.0, true);
        assert!(!taken);
        assert!((3_900..=4_000).contains(&throttle), "{throttle}");
        // Permissive: taken, and throttled by what it took.
        let (taken, throttle) = sensors.take(key(), 2.0, 1.0, false);
        assert!(taken);
        assert!((5_900..=6_000).contains(&throttle), "{throttle}");
    }
}
