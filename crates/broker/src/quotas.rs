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
//! The quotas themselves live in the metadata log (`SetClientQuota` records) or, on a single
//! node, in `client_quotas.json` (`local_state.rs`); with none set nothing is counted.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use strand_metadata::client_quotas::{ClientQuotas, CONNECTION_CREATION_RATE};
use strand_metadata::MetadataImage;

use crate::broker::Broker;
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

/// Every client's usage, by (quota key, user, client id) as counted.
#[derive(Debug)]
pub struct QuotaSensors {
    rates: Mutex<HashMap<(&'static str, String, String), Rate>>,
    started: Instant,
}

impl Default for QuotaSensors {
    fn default() -> QuotaSensors {
        QuotaSensors {
            rates: Mutex::new(HashMap::new()),
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

    /// Records `value` under `sensor` and returns the throttle its rate over `bound`
    /// asks for.
    fn record(&self, sensor: (&'static str, String, String), value: f64, bound: f64) -> u32 {
        let now_ms = self.now_ms();
        let mut rates = self.rates.lock().unwrap_or_else(|p| p.into_inner());
        if !rates.contains_key(&sensor) && rates.len() >= SENSORS_MAX {
            forget_idlest(&mut rates, now_ms);
        }
        let rate = rates.entry(sensor).or_insert_with(|| Rate::new(now_ms));
        rate.record(now_ms, value);
        rate.throttle_ms(now_ms, bound)
    }
}

/// Forgets clients idle past `IDLE_MAX`, or else the idlest tenth.
fn forget_idlest(rates: &mut HashMap<(&'static str, String, String), Rate>, now_ms: u64) {
    let idle_max = IDLE_MAX.as_millis() as u64;
    rates.retain(|_, rate| now_ms.saturating_sub(rate.last_used_ms) < idle_max);
    if rates.len() < SENSORS_MAX {
        return;
    }
    let mut last_used: Vec<u64> = rates.values().map(|r| r.last_used_ms).collect();
    let cut = last_used.len() / 10;
    let (_, threshold, _) = last_used.select_nth_unstable(cut);
    let threshold = *threshold;
    rates.retain(|_, rate| rate.last_used_ms > threshold);
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
        let quotas = self.client_quotas();
        if quotas.is_empty() {
            return 0;
        }
        let Some((bound, (user, client))) =
            quotas.applicable(&context.principal.name, client_id, key)
        else {
            return 0;
        };
        self.quota_sensors.record((key, user, client), value, bound)
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
        let mut rates = HashMap::new();
        for i in 0..SENSORS_MAX as u64 {
            rates.insert(("k", i.to_string(), String::new()), Rate::new(i));
        }
        forget_idlest(&mut rates, SENSORS_MAX as u64);
        assert!(rates.len() < SENSORS_MAX);
        assert!(rates.len() >= SENSORS_MAX * 8 / 10);
        assert!(!rates.contains_key(&("k", "0".to_string(), String::new())));
    }
}
