//! Replication throttles, as Kafka's replication quotas (KIP-73) run a reassignment's
//! catch-up without starving clients:
//!
//! - leader.replication.throttled.rate / follower.replication.throttled.rate (dynamic
//!   broker configs, bytes/s): one budget per broker for each side;
//! - leader/follower.replication.throttled.replicas (topic configs: `*` or
//!   `partition:broker,...`): which replicas the budget covers. A leader throttles what it
//!   sends for the partitions listed with its own id; a follower throttles what it fetches
//!   for the partitions listed with its own id.
//!
//! Only replicas outside the ISR are throttled (an in-sync follower must keep up, or
//! acks=all would stall). Over budget, a leader answers a throttled partition with no
//! records and a follower leaves it out of its next fetch, as Kafka does; the budget fills
//! at the rate, up to one second's worth. A large read can overdraw it, by at most
//! `DEBT_WINDOW` seconds' worth (Kafka forgets what lies beyond its quota window), so a
//! throttled replica pauses at most that long after one big fetch.

use std::sync::Mutex;
use std::time::Instant;

/// Kafka's "unlimited" (the configs' default, Long.MAX_VALUE).
const UNLIMITED: i64 = i64::MAX;
/// The most a budget may be overdrawn, in seconds of its rate (Kafka's replication quota
/// window: replication.quota.window.num 11 of 1 s).
const DEBT_WINDOW: f64 = 11.0;

#[derive(Debug)]
struct Bucket {
    /// Bytes per second; None: unlimited.
    rate: Option<u64>,
    /// Bytes that may still go before the budget is over (negative: over).
    tokens: f64,
    filled_at: Instant,
}

/// One side's (leader's or follower's) budget on this broker.
#[derive(Debug)]
pub struct ReplicationThrottle {
    bucket: Mutex<Bucket>,
}

impl Default for ReplicationThrottle {
    fn default() -> Self {
        ReplicationThrottle {
            bucket: Mutex::new(Bucket {
                rate: None,
                tokens: 0.0,
                filled_at: Instant::now(),
            }),
        }
    }
}

impl ReplicationThrottle {
    fn bucket(&self) -> std::sync::MutexGuard<'_, Bucket> {
        self.bucket.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the rate from the config's value (None, unparsable or Long.MAX: unlimited).
    pub fn set_rate(&self, value: Option<&str>) {
        let rate = value
            .and_then(|v| v.trim().parse::<i64>().ok())
            .filter(|&rate| rate < UNLIMITED)
            .map(|rate| rate.max(0) as u64);
        let mut bucket = self.bucket();
        if bucket.rate != rate {
            bucket.rate = rate;
            bucket.tokens = rate.unwrap_or(0) as f64;
            bucket.filled_at = Instant::now();
        }
    }

    /// Whether a rate is set at all (the common case, none, costs one lock).
    pub fn is_limited(&self) -> bool {
        self.bucket().rate.is_some()
    }

    /// Whether the budget is spent at `now`.
    pub fn is_exceeded(&self, now: Instant) -> bool {
        let mut bucket = self.bucket();
        let Some(rate) = bucket.rate else {
            return false;
        };
        let elapsed = now
            .saturating_duration_since(bucket.filled_at)
            .as_secs_f64();
        bucket.tokens = (bucket.tokens + elapsed * rate as f64).min(rate as f64);
        bucket.filled_at = now;
        bucket.tokens < 0.0
    }

    /// Counts `bytes` sent (or fetched) for throttled replicas.
    pub fn record(&self, bytes: u64) {
        let mut bucket = self.bucket();
        if let Some(rate) = bucket.rate {
            bucket.tokens = (bucket.tokens - bytes as f64).max(-(rate as f64) * DEBT_WINDOW);
        }
    }
}

/// Whether a throttled-replicas topic config (`*`, or `partition:broker` pairs separated
/// by commas) names `partition` on `broker`.
pub fn names_replica(value: &str, partition: i32, broker: i32) -> bool {
    let value = value.trim();
    value == "*"
        || value.split(',').any(|pair| {
            pair.split_once(':').is_some_and(|(p, b)| {
                p.trim().parse() == Ok(partition) && b.trim().parse() == Ok(broker)
            })
        })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn the_budget_fills_at_the_rate_up_to_a_second() {
        let throttle = ReplicationThrottle::default();
        let start = Instant::now();
        assert!(!throttle.is_limited());
        assert!(!throttle.is_exceeded(start));
        throttle.set_rate(Some("1000"));
        assert!(throttle.is_limited());
        assert!(!throttle.is_exceeded(start), "a second's worth to start");
        throttle.record(2500);
        assert!(throttle.is_exceeded(start));
        assert!(
            throttle.is_exceeded(start + Duration::from_millis(1400)),
            "-100 left"
        );
        assert!(!throttle.is_exceeded(start + Duration::from_millis(1600)));
        // A long idle time fills it to one second's worth only.
        throttle.record(100);
        assert!(!throttle.is_exceeded(start + Duration::from_secs(60)));
        throttle.record(1001);
        assert!(throttle.is_exceeded(start + Duration::from_secs(60)));
        // One huge read overdraws by at most DEBT_WINDOW seconds' worth.
        let later = start + Duration::from_secs(120);
        assert!(!throttle.is_exceeded(later));
        throttle.record(1 << 30);
        assert!(throttle.is_exceeded(later + Duration::from_secs(10)));
        assert!(!throttle.is_exceeded(later + Duration::from_secs(12)));
        throttle.set_rate(Some(&i64::MAX.to_string()));
        assert!(!throttle.is_limited(), "Long.MAX is Kafka's unlimited");
    }

    #[test]
    fn throttled_replica_lists_as_kafka_writes_them() {
        assert!(names_replica("*", 3, 7));
        assert!(names_replica("0:1,0:2, 1:2", 1, 2));
        assert!(!names_replica("0:1,0:2,1:2", 1, 1));
        assert!(!names_replica("", 0, 1));
    }
}
