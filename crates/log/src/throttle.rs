//! A byte-rate limit for background disk work (compaction's reads and writes,
//! log.cleaner.io.max.bytes.per.second; moving a log between directories,
//! replica.alter.log.dirs.io.max.bytes.per.second): the worker sleeps as needed to stay
//! under the rate. It runs on its own thread, so sleeping holds up nothing else. An async
//! worker (tiered storage's copies, remote.log.manager.copy.max.bytes.per.second) asks
//! what it owes (`owed`) and sleeps on its runtime instead.

use std::time::{Duration, Instant};

/// The most idle time a throttle counts in the work's favour.
const CREDIT_MAX: Duration = Duration::from_secs(1);

#[derive(Debug)]
pub struct Throttle {
    bytes_per_second: Option<u64>,
    started: Instant,
    bytes: u64,
}

impl Throttle {
    pub fn new(bytes_per_second: Option<u64>) -> Throttle {
        Throttle {
            bytes_per_second,
            started: Instant::now(),
            bytes: 0,
        }
    }

    /// Counts `bytes` done; sleeps until they fit the rate.
    pub(crate) fn consumed(&mut self, bytes: u64) {
        let owed = self.owed(bytes);
        if !owed.is_zero() {
            std::thread::sleep(owed);
        }
    }

    /// Counts `bytes` done; how long to wait before more so they fit the rate. Idle time
    /// earns at most a second of credit: a throttle shared by work that comes and goes (a
    /// broker's copies) must not let a long pause buy an unbounded burst.
    pub fn owed(&mut self, bytes: u64) -> Duration {
        let Some(rate) = self.bytes_per_second.filter(|r| *r > 0) else {
            return Duration::ZERO;
        };
        let done = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        if self.started.elapsed() > done + CREDIT_MAX {
            let now = Instant::now();
            self.started = now.checked_sub(CREDIT_MAX).unwrap_or(now);
            self.bytes = 0;
        }
        self.bytes += bytes;
        let due = Duration::from_secs_f64(self.bytes as f64 / rate as f64);
        due.saturating_sub(self.started.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_is_owed_keeps_the_work_under_the_rate() {
        let mut unlimited = Throttle::new(None);
        assert_eq!(unlimited.owed(1 << 30), Duration::ZERO);
        let mut limited = Throttle::new(Some(1 << 20));
        // 4 MiB at 1 MiB/s, done at once: about four seconds owed (less what elapsed).
        let owed = limited.owed(4 << 20);
        assert!(
            owed > Duration::from_secs(3) && owed <= Duration::from_secs(4),
            "{owed:?}"
        );
        // More work owes more.
        assert!(limited.owed(1 << 20) > owed);
        // A long idle time buys one second of the rate, no more.
        let mut idle = Throttle {
            bytes_per_second: Some(1 << 20),
            started: Instant::now() - Duration::from_secs(3600),
            bytes: 0,
        };
        let owed = idle.owed(3 << 20);
        assert!(
            owed > Duration::from_millis(1900) && owed <= Duration::from_secs(2),
            "{owed:?}"
        );
    }
}
