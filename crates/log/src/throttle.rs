//! A byte-rate limit for background disk work (compaction's reads and writes,
//! log.cleaner.io.max.bytes.per.second; moving a log between directories,
//! replica.alter.log.dirs.io.max.bytes.per.second): the worker sleeps as needed to stay
//! under the rate. It runs on its own thread, so sleeping holds up nothing else.

use std::time::{Duration, Instant};

pub(crate) struct Throttle {
    bytes_per_second: Option<u64>,
    started: Instant,
    bytes: u64,
}

impl Throttle {
    pub(crate) fn new(bytes_per_second: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `bytes` done; sleeps until they fit the rate.
    pub(crate) fn consumed(&mut self, bytes: u64) {
        let Some(rate) = self.bytes_per_second.filter(|r| *r > 0) else {
            return;
        };
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        let elapsed = self.started.elapsed();
        if due > elapsed {
            std::thread::sleep(due - elapsed);
        }
    }
}
