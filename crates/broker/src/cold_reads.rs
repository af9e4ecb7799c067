//! Fetch reads that would wait for the disk. Fetch reads partitions on a runtime worker
//! in `strand_log::read_mode`'s no-wait mode; a read that needs data the page cache lacks
//! answers that partition without records for now and leaves a `Miss`, which is warmed
//! here on a blocking thread, holding no lock. When it is in the cache the partition's
//! parked fetches wake and read it. So a cold or stalled disk holds up only the
//! partitions that need it: never a worker, nor the partition's lock (appends go on).
//!
//! Requests that cannot answer without the data (ListOffsets by timestamp) wait for
//! their warm instead (`warm_now`), bounded by `WARM_WAIT_MAX`.
//!
//! Bounds: one warm per partition at a time, `WARMS_MAX` broker-wide (a miss finding
//! none free is dropped; the next read misses again and retries). A warm that fails
//! makes the partition's next read wait for the disk, so the error reaches the client
//! as Kafka's (KAFKA_STORAGE_ERROR) instead of an endless empty answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use strand_log::read_mode::Miss;
use tokio::sync::Semaphore;

use crate::error_code;
use crate::partition::Partition;

/// Warms running at once, broker-wide.
const WARMS_MAX: usize = 64;

static WARMS: Semaphore = Semaphore::const_new(WARMS_MAX);

/// Longest a request waits for its warm (clients' request.timeout.ms is 30 s).
const WARM_WAIT_MAX: std::time::Duration = std::time::Duration::from_secs(10);

/// A partition's warming state.
#[derive(Debug, Default)]
pub struct Warming {
    running: AtomicBool,
    failed: AtomicBool,
}

impl Warming {
    /// Whether the last warm failed (once): the next read should wait for the disk.
    pub fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::AcqRel)
    }
}

/// Brings `miss` into the page cache on a blocking thread, unless the partition already
/// has a warm running or none is free; wakes the partition's parked fetches after.
pub fn warm(partition: &Arc<Partition>, miss: Miss) {
    let warming = partition.warming();
    if warming.running.swap(true, Ordering::AcqRel) {
        return;
    }
    let Ok(permit) = WARMS.try_acquire() else {
        warming.running.store(false, Ordering::Release);
        return;
    };
    let partition = partition.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        if let Err(error) = miss.warm() {
            tracing::warn!(partition = %partition.tp, %error, "reading a fetch's data from disk failed");
            partition.warming().failed.store(true, Ordering::Release);
        }
        partition.warming().running.store(false, Ordering::Release);
        partition.wake_parked_fetches();
    });
}

/// Brings `miss` into the page cache and waits for it: KAFKA_STORAGE_ERROR if reading
/// it failed, REQUEST_TIMED_OUT if it took longer than `WARM_WAIT_MAX` (the read goes on).
pub async fn warm_now(miss: Miss) -> Result<(), i16> {
    let warmed = tokio::time::timeout(WARM_WAIT_MAX, async {
        let permit = WARMS
            .acquire()
            .await
            .map_err(|_| error_code::KAFKA_STORAGE_ERROR)?;
        tokio::task::spawn_blocking(move || {
            let _permit = permit;
            miss.warm()
        })
        .await
        .map_err(|_| error_code::KAFKA_STORAGE_ERROR)?
        .map_err(|error| {
            tracing::warn!(%error, "reading a lookup's data from disk failed");
            error_code::KAFKA_STORAGE_ERROR
        })
    })
    .await;
    warmed.unwrap_or(Err(error_code::REQUEST_TIMED_OUT))
}
