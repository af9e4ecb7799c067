//! Reads that would wait for the disk. Fetch and ListOffsets read partitions on a runtime
//! worker in `strand_log::read_mode`'s no-wait mode; a read that needs data the page cache
//! lacks fails and leaves a `Miss`, which is warmed here on a blocking thread, holding no
//! lock. Fetch answers that partition without records meanwhile (`warm`), and its parked
//! fetches wake when the data is in the cache; ListOffsets, which cannot answer without
//! it, waits (`warm_now`). So a cold or stalled disk holds up only the partitions that
//! need it: never a worker, nor the partition's lock (appends go on).
//!
//! Bounds: one warm per partition at a time (a second miss meanwhile is dropped; Fetch
//! reads again when the first wakes it, ListOffsets waits for it), `WARMS_MAX`
//! broker-wide (a Fetch miss finding none free is dropped and retried by the next read).
//! A warm on a disk that never answers keeps its thread and permit: past `WARMS_MAX`
//! such partitions, cold reads elsewhere wait too (tailing reads do not). A warm that
//! fails is answered to the partition's next read as KAFKA_STORAGE_ERROR, as Kafka
//! answers a read error, instead of an endless empty answer.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strand_log::read_mode::Miss;
use tokio::sync::Semaphore;

use crate::error_code;
use crate::partition::Partition;

/// Warms running at once, broker-wide.
const WARMS_MAX: usize = 64;

static WARMS: Semaphore = Semaphore::const_new(WARMS_MAX);

/// How often a lookup waiting on another request's warm looks again.
const WARM_POLL: Duration = Duration::from_millis(5);

/// A partition's warming state.
#[derive(Debug, Default)]
pub struct Warming {
    running: AtomicBool,
    failed: AtomicBool,
}

impl Warming {
    /// Whether the last warm failed (once): the next read answers KAFKA_STORAGE_ERROR.
    pub fn take_failure(&self) -> bool {
        self.failed.swap(false, Ordering::AcqRel)
    }

    fn start(&self) -> bool {
        !self.running.swap(true, Ordering::AcqRel)
    }

    fn is_running(&self) -> bool {
        self.running.load(Ordering::Acquire)
    }
}

/// The blocking part: reads the miss, records a failure, frees the partition's slot and
/// wakes its parked fetches.
fn run(partition: &Partition, miss: Miss) -> bool {
    let warmed = miss.warm();
    if let Err(error) = &warmed {
        tracing::warn!(partition = %partition.tp, %error, "reading a partition's data from disk failed");
        partition.warming().failed.store(true, Ordering::Release);
    }
    partition.warming().running.store(false, Ordering::Release);
    partition.wake_parked_fetches();
    warmed.is_ok()
}

/// Brings `miss` into the page cache on a blocking thread, unless the partition already
/// has a warm running or none is free; wakes the partition's parked fetches after.
pub fn warm(partition: &Arc<Partition>, miss: Miss) {
    if !partition.warming().start() {
        return;
    }
    let Ok(permit) = WARMS.try_acquire() else {
        partition.warming().running.store(false, Ordering::Release);
        return;
    };
    let partition = partition.clone();
    tokio::task::spawn_blocking(move || {
        let _permit = permit;
        run(&partition, miss);
    });
}

/// Brings `miss` into the page cache and waits for it (or for the warm of the partition
/// already running), until `deadline`: KAFKA_STORAGE_ERROR if reading failed,
/// REQUEST_TIMED_OUT past the deadline (the read goes on).
pub async fn warm_now(
    partition: &Arc<Partition>,
    miss: Miss,
    deadline: tokio::time::Instant,
) -> Result<(), i16> {
    let timed_out = || error_code::REQUEST_TIMED_OUT;
    if !partition.warming().start() {
        while partition.warming().is_running() {
            if tokio::time::Instant::now() >= deadline {
                return Err(timed_out());
            }
            tokio::time::sleep(WARM_POLL).await;
        }
        return Ok(());
    }
    let Ok(permit) = tokio::time::timeout_at(deadline, WARMS.acquire()).await else {
        partition.warming().running.store(false, Ordering::Release);
        return Err(timed_out());
    };
    let permit = permit.map_err(|_| error_code::KAFKA_STORAGE_ERROR)?;
    let owned = partition.clone();
    let warming = tokio::task::spawn_blocking(move || {
        let _permit = permit;
        run(&owned, miss)
    });
    match tokio::time::timeout_at(deadline, warming).await {
        Ok(Ok(true)) => Ok(()),
        Ok(_) => {
            partition.warming().take_failure();
            Err(error_code::KAFKA_STORAGE_ERROR)
        }
        Err(_) => Err(timed_out()),
    }
}
