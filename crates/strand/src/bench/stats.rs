//! What a benchmark run counts: records and bytes produced and consumed, and latency
//! histograms (microseconds) for produce acknowledgement and end to end.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

use hdrhistogram::Histogram;
use serde::Serialize;

/// Latencies above an hour are clamped (a stalled run, not a measurement).
const LATENCY_MAX_US: u64 = 3_600_000_000;

pub struct Stats {
    pub produced_records: AtomicU64,
    pub produced_bytes: AtomicU64,
    pub consumed_records: AtomicU64,
    pub consumed_bytes: AtomicU64,
    /// Record-batch bytes acknowledged and fetched, headers included: what a broker counts
    /// as bytes in and out (BytesInPerSec, BytesOutPerSec).
    pub produced_batch_bytes: AtomicU64,
    pub fetched_batch_bytes: AtomicU64,
    pub produce_latency: Mutex<Histogram<u64>>,
    pub end_to_end_latency: Mutex<Histogram<u64>>,
    /// Wall-clock microseconds of the last acknowledgement or consumed batch: a run that
    /// ends by count is timed to it, not to the next tick of the progress loop.
    pub last_event_us: AtomicU64,
}

impl Default for Stats {
    fn default() -> Self {
        let histogram =
            || Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static bounds are valid");
        Stats {
            produced_records: AtomicU64::new(0),
            produced_bytes: AtomicU64::new(0),
            consumed_records: AtomicU64::new(0),
            consumed_bytes: AtomicU64::new(0),
            produced_batch_bytes: AtomicU64::new(0),
            fetched_batch_bytes: AtomicU64::new(0),
            produce_latency: Mutex::new(histogram()),
            end_to_end_latency: Mutex::new(histogram()),
            last_event_us: AtomicU64::new(0),
        }
    }
}

impl Stats {
    pub fn record_produce(&self, records: u64, bytes: u64, latency_us: Option<u64>) {
        self.produced_records.fetch_add(records, Ordering::Relaxed);
        self.produced_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_event_us
            .fetch_max(super::producer::now_micros(), Ordering::Relaxed);
        if let Some(latency) = latency_us {
            let mut histogram = self
                .produce_latency
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            let _ = histogram.record_n(latency.clamp(1, LATENCY_MAX_US), records);
        }
    }

    pub fn record_consume(&self, records: u64, bytes: u64, latencies_us: &[u64]) {
        self.consumed_records.fetch_add(records, Ordering::Relaxed);
        self.consumed_bytes.fetch_add(bytes, Ordering::Relaxed);
        self.last_event_us
            .fetch_max(super::producer::now_micros(), Ordering::Relaxed);
        if !latencies_us.is_empty() {
            let mut histogram = self
                .end_to_end_latency
                .lock()
                .unwrap_or_else(|p| p.into_inner());
            for latency in latencies_us {
                let _ = histogram.record((*latency).clamp(1, LATENCY_MAX_US));
            }
        }
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
    pub p999_us: u64,
    pub max_us: u64,
}

impl Percentiles {
    pub fn of(histogram: &Histogram<u64>) -> Option<Percentiles> {
        (!histogram.is_empty()).then(|| Percentiles {
            count: histogram.len(),
            mean_us: histogram.mean(),
            p50_us: histogram.value_at_quantile(0.50),
            p99_us: histogram.value_at_quantile(0.99),
            p999_us: histogram.value_at_quantile(0.999),
            max_us: histogram.max(),
        })
    }
}

#[derive(Debug, Clone, Serialize)]
pub struct Report {
    pub seconds: f64,
    pub produced_records: u64,
    pub produced_records_per_second: f64,
    pub produced_mb_per_second: f64,
    pub consumed_records: u64,
    pub consumed_records_per_second: f64,
    pub consumed_mb_per_second: f64,
    /// Record-batch bytes acknowledged by the broker and fetched from it (batch headers
    /// included, as the broker's bytes-in and bytes-out metrics count them).
    pub produced_batch_bytes: u64,
    pub fetched_batch_bytes: u64,
    pub produce_latency: Option<Percentiles>,
    pub end_to_end_latency: Option<Percentiles>,
}

impl Report {
    pub fn from(stats: &Stats, seconds: f64) -> Report {
        let produced = stats.produced_records.load(Ordering::Relaxed);
        let consumed = stats.consumed_records.load(Ordering::Relaxed);
        let seconds = seconds.max(1e-9);
        Report {
            seconds,
            produced_records: produced,
            produced_records_per_second: produced as f64 / seconds,
            produced_mb_per_second: stats.produced_bytes.load(Ordering::Relaxed) as f64
                / seconds
                / 1e6,
            consumed_records: consumed,
            consumed_records_per_second: consumed as f64 / seconds,
            consumed_mb_per_second: stats.consumed_bytes.load(Ordering::Relaxed) as f64
                / seconds
                / 1e6,
            produced_batch_bytes: stats.produced_batch_bytes.load(Ordering::Relaxed),
            fetched_batch_bytes: stats.fetched_batch_bytes.load(Ordering::Relaxed),
            produce_latency: Percentiles::of(
                &stats
                    .produce_latency
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            ),
            end_to_end_latency: Percentiles::of(
                &stats
                    .end_to_end_latency
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
            ),
        }
    }

    pub fn print(&self) {
        println!("duration            {:.1} s", self.seconds);
        if self.produced_records > 0 {
            println!(
                "produced            {} records, {:.0} records/s, {:.1} MB/s",
                self.produced_records,
                self.produced_records_per_second,
                self.produced_mb_per_second
            );
        }
        if let Some(p) = &self.produce_latency {
            println!(
                "produce ack latency p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms  mean {:.2} ms",
                p.p50_us as f64 / 1e3, p.p99_us as f64 / 1e3, p.p999_us as f64 / 1e3, p.max_us as f64 / 1e3, p.mean_us / 1e3
            );
        }
        if self.consumed_records > 0 {
            println!(
                "consumed            {} records, {:.0} records/s, {:.1} MB/s",
                self.consumed_records,
                self.consumed_records_per_second,
                self.consumed_mb_per_second
            );
        }
        if let Some(p) = &self.end_to_end_latency {
            println!(
                "end-to-end latency  p50 {:.2} ms  p99 {:.2} ms  p99.9 {:.2} ms  max {:.2} ms  mean {:.2} ms",
                p.p50_us as f64 / 1e3, p.p99_us as f64 / 1e3, p.p999_us as f64 / 1e3, p.max_us as f64 / 1e3, p.mean_us / 1e3
            );
        }
    }
}
