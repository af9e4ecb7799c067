//! Summaries of what Kafka keeps in Yammer histograms (request times, request sizes, log
//! flush times): quantiles over the last few minutes, a sum and a count.
//!
//! Recorded on every request, so recording is two relaxed atomic adds: one into a
//! log-linear bucket of the `histogram` crate's `AtomicHistogram` (at most 1/16 = 6.25%
//! relative error), one into the sum. The quantiles are computed when /metrics is scraped,
//! from the buckets filled since the older of two snapshots taken `HALF_WINDOW` apart, so
//! they describe the last 2.5 to 5 minutes as Yammer's exponentially decaying reservoir
//! (biased to the last 5 minutes) does. metrics-exporter-prometheus's own summaries
//! stamped and queued each sample and merged it into a sketch later: about four times
//! the work per request, over the 2% budget for the produce path (BENCHMARKS.md).
//! These are rendered beside the exporter's text, in the same format.

use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use histogram::{AtomicHistogram, Bucket, Histogram};

/// Kafka's histogram percentiles (Yammer's 50th..999th), labelled as the JMX exporter
/// labels them.
pub const QUANTILES: [(f64, &str); 6] = [
    (0.5, "0.50"),
    (0.75, "0.75"),
    (0.95, "0.95"),
    (0.98, "0.98"),
    (0.99, "0.99"),
    (0.999, "0.999"),
];

/// Buckets of 1/16 of a power of two; values above 2^32 (71 minutes in microseconds,
/// 4 GiB in bytes) count as 2^32.
const GROUPING_POWER: u8 = 4;
const MAX_VALUE_POWER: u8 = 32;
const MAX_VALUE: u64 = (1 << MAX_VALUE_POWER) - 1;

/// How often the window moves: quantiles cover one to two of these.
pub const HALF_WINDOW: Duration = Duration::from_secs(150);

/// What a summary's recorded integers are, and how they are exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Recorded in microseconds, exported in milliseconds (Kafka's *TimeMs).
    Millis,
    /// Recorded and exported as they are (bytes).
    Plain,
}

impl Unit {
    fn export(self, value: u64) -> f64 {
        match self {
            Unit::Millis => value as f64 / 1000.0,
            Unit::Plain => value as f64,
        }
    }
}

pub struct Summary {
    unit: Unit,
    recorded: AtomicHistogram,
    sum: AtomicU64,
    window: Mutex<Window>,
}

/// Snapshots of the recorded buckets at the last two moves of the window.
struct Window {
    older: Histogram,
    newer: Histogram,
    moved: Instant,
}

impl std::fmt::Debug for Summary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Summary").field("unit", &self.unit).finish()
    }
}

impl Summary {
    pub fn new(unit: Unit) -> Summary {
        let recorded = AtomicHistogram::new(GROUPING_POWER, MAX_VALUE_POWER)
            .expect("the bucket layout is valid");
        let empty = recorded.load();
        Summary {
            unit,
            recorded,
            sum: AtomicU64::new(0),
            window: Mutex::new(Window {
                older: empty.clone(),
                newer: empty,
                moved: Instant::now(),
            }),
        }
    }

    /// A time, in Millis units (microseconds).
    pub fn record_duration(&self, duration: Duration) {
        self.record(u64::try_from(duration.as_micros()).unwrap_or(u64::MAX));
    }

    pub fn record(&self, value: u64) {
        let _in_range = self.recorded.increment(value.min(MAX_VALUE));
        self.sum.fetch_add(value, Ordering::Relaxed);
    }

    /// Moves the window if `HALF_WINDOW` has passed since it last moved.
    pub fn upkeep(&self, now: Instant) {
        let mut window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        if now.saturating_duration_since(window.moved) >= HALF_WINDOW {
            window.older = std::mem::replace(&mut window.newer, self.recorded.load());
            window.moved = now;
        }
    }

    /// What the exposition shows: the window's quantiles (None where nothing was
    /// recorded in it), the sum and the count of everything recorded.
    pub fn read(&self) -> Reading {
        let now = self.recorded.load();
        let sum = self.sum.load(Ordering::Relaxed);
        let count = now.as_slice().iter().sum();
        let window = self.window.lock().unwrap_or_else(|e| e.into_inner());
        let recent = now
            .wrapping_sub(&window.older)
            .expect("snapshots share the layout");
        drop(window);
        let mut buckets: [Option<Bucket>; QUANTILES.len()] = Default::default();
        let _filled = recent.quantile_buckets_into(&QUANTILES.map(|(q, _)| q), &mut buckets);
        Reading {
            // A bucket's upper edge: the most it can hold, as HdrHistogram reports.
            quantiles: buckets.map(|bucket| bucket.map(|b| self.unit.export(b.end()))),
            sum: self.unit.export(sum),
            count,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct Reading {
    pub quantiles: [Option<f64>; QUANTILES.len()],
    pub sum: f64,
    pub count: u64,
}

/// Writes summaries of one name in Prometheus' text format: each with its labels
/// (`request="Produce"`, or none), as the exporter writes its own.
pub fn render<'a>(
    out: &mut String,
    name: &str,
    help: &str,
    summaries: impl IntoIterator<Item = (&'a str, &'a Summary)>,
) {
    let mut summaries = summaries.into_iter().peekable();
    if summaries.peek().is_none() {
        return;
    }
    let _ = writeln!(out, "# HELP {name} {help}");
    let _ = writeln!(out, "# TYPE {name} summary");
    for (labels, summary) in summaries {
        let reading = summary.read();
        let separator = if labels.is_empty() { "" } else { "," };
        for ((_, label), value) in QUANTILES.iter().zip(reading.quantiles) {
            let value = value.unwrap_or(f64::NAN);
            let _ = writeln!(
                out,
                "{name}{{{labels}{separator}quantile=\"{label}\"}} {value}"
            );
        }
        let braces = |labels: &str| {
            if labels.is_empty() {
                String::new()
            } else {
                format!("{{{labels}}}")
            }
        };
        let _ = writeln!(out, "{name}_sum{} {}", braces(labels), reading.sum);
        let _ = writeln!(out, "{name}_count{} {}", braces(labels), reading.count);
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_are_within_a_bucket_of_the_recorded_values() {
        let summary = Summary::new(Unit::Millis);
        for micros in 1..=1000u64 {
            summary.record(micros * 100); // 0.1 ms .. 100 ms
        }
        let reading = summary.read();
        assert_eq!(reading.count, 1000);
        assert!((reading.sum - 50_050.0).abs() < 1e-6, "{}", reading.sum);
        for ((q, _), value) in QUANTILES.iter().zip(reading.quantiles) {
            let exact = q * 100.0;
            let value = value.unwrap();
            assert!(
                value >= exact && value <= exact * 1.0625 + 0.001,
                "quantile {q}: {value} vs {exact}"
            );
        }
    }

    #[test]
    fn the_window_forgets_what_is_two_moves_old_but_counts_stay() {
        let summary = Summary::new(Unit::Plain);
        summary.record(1_000_000);
        let start = Instant::now();
        summary.upkeep(start + HALF_WINDOW);
        assert_eq!(summary.read().quantiles[0], Some(1_015_807.0));
        summary.record(10);
        summary.upkeep(start + HALF_WINDOW * 2);
        // The big value is older than the older snapshot now: only 10 is in the window.
        assert_eq!(summary.read().quantiles, [Some(10.0); 6]);
        assert_eq!(summary.read().count, 2);
        summary.upkeep(start + HALF_WINDOW * 3);
        assert_eq!(summary.read().quantiles, [None; 6]);
        assert_eq!(summary.read().sum, 1_000_010.0);
    }

    #[test]
    fn huge_values_are_kept_in_the_last_bucket_and_the_sum() {
        let summary = Summary::new(Unit::Plain);
        summary.record(u64::MAX / 2);
        let reading = summary.read();
        assert_eq!(reading.count, 1);
        assert_eq!(reading.sum, (u64::MAX / 2) as f64);
        assert!(reading.quantiles[5].unwrap() >= MAX_VALUE as f64);
    }

    #[test]
    fn renders_prometheus_summaries() {
        let produce = Summary::new(Unit::Millis);
        produce.record_duration(Duration::from_micros(1500));
        let mut out = String::new();
        render(
            &mut out,
            "x_ms",
            "help",
            [("request=\"Produce\"", &produce)],
        );
        assert!(
            out.starts_with("# HELP x_ms help\n# TYPE x_ms summary\n"),
            "{out}"
        );
        assert!(
            out.contains("x_ms{request=\"Produce\",quantile=\"0.50\"} 1.535\n"),
            "{out}"
        );
        assert!(out.contains("x_ms_sum{request=\"Produce\"} 1.5\n"), "{out}");
        assert!(out.contains("x_ms_count{request=\"Produce\"} 1\n"), "{out}");
        let mut out = String::new();
        render(&mut out, "y", "help", [("", &Summary::new(Unit::Plain))]);
        assert!(out.contains("y{quantile=\"0.99\"} NaN\n"), "{out}");
        assert!(out.contains("y_count 0\n"), "{out}");
    }
}
