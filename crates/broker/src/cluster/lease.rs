//! The leadership lease: how long this broker may answer as the leader its metadata image
//! says it is, for answers that read state without writing it (the coordinators':
//! committed offsets, group and transaction state).
//!
//! Why: a write by a deposed leader cannot commit (its followers fetch from the new
//! leader), but a read answers at once from whatever the deposed leader last knew. A
//! broker frozen (SIGSTOP, a long pause) or cut off from the controller keeps its old
//! image until the metadata log reaches it again; meanwhile the controller has fenced it
//! and another broker leads. A consumer still talking to it got the committed offsets of
//! before the failover and transformed records a second time (the transactional nemesis,
//! seed 175518002: 100 input records in two committed transactions).
//!
//! The rule: a heartbeat sent at `S` and answered "registered and unfenced, metadata log
//! at index I" renews the lease to `S + session timeout` (less a margin) once this broker
//! has applied the metadata log up to `I`. The controller fences a broker only after a
//! session timeout without its heartbeats, counted from their arrival (never before `S`),
//! so no other broker takes a leadership away by fencing before the lease ends; and every
//! leadership moved before the answer is in the image by the time the lease is renewed.
//! Leaderships the controller moves on its own while the lease runs (preferred leaders,
//! reassignments, elections asked for) reach a connected broker within milliseconds;
//! one cut off from the quorum at that moment answers stale reads until its lease ends.
//!
//! Kafka has no such lease (its coordinators answer from memory until the new metadata
//! arrives); Strand's deliberate difference is that coordinators stop answering while a
//! broker cannot reach the controller, trading that availability for never answering
//! from a superseded state.
//!
//! Thread-safe: one mutex around an instant.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// The share of the session timeout a lease lasts: the rest absorbs clock rate
/// differences between this broker and the controller and the controller's check period.
const LEASE_SHARE_PERCENT: u32 = 90;

#[derive(Debug, Default)]
pub struct LeadershipLease {
    until: Mutex<Option<Instant>>,
}

impl LeadershipLease {
    /// The lease a heartbeat sent at `sent` earns (its answer already applied).
    pub fn renew(&self, sent: Instant, session_timeout: Duration) {
        let until = Self::deadline(sent, session_timeout);
        let mut current = self.until.lock().unwrap_or_else(|p| p.into_inner());
        // Answers may arrive out of order: a lease never shrinks.
        if current.is_none_or(|c| c < until) {
            *current = Some(until);
        }
    }

    /// Whether this broker's leaderships are still its own at `now`.
    pub fn held(&self, now: Instant) -> bool {
        self.until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|until| now < until)
    }

    /// Where the lease of a heartbeat sent at `sent` ends: renewing it later is no use.
    pub fn deadline(sent: Instant, session_timeout: Duration) -> Instant {
        sent + session_timeout * LEASE_SHARE_PERCENT / 100
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: Duration = Duration::from_millis(2500);

    #[test]
    fn no_lease_before_the_first_heartbeat() {
        assert!(!LeadershipLease::default().held(Instant::now()));
    }

    #[test]
    fn a_lease_runs_from_the_heartbeats_sending_not_its_answer() {
        let lease = LeadershipLease::default();
        let sent = Instant::now();
        lease.renew(sent, SESSION);
        assert!(lease.held(sent + Duration::from_millis(2000)));
        // The controller may fence from sent + session on: the lease ends before.
        assert!(!lease.held(sent + Duration::from_millis(2250)));
        assert!(!lease.held(sent + SESSION));
    }

    #[test]
    fn a_late_answer_to_an_older_heartbeat_does_not_shorten_the_lease() {
        let lease = LeadershipLease::default();
        let first = Instant::now();
        let second = first + Duration::from_millis(1000);
        lease.renew(second, SESSION);
        lease.renew(first, SESSION);
        assert!(lease.held(first + Duration::from_millis(3000)));
    }

    #[test]
    fn a_frozen_broker_wakes_up_without_a_lease() {
        // SIGSTOP for longer than the session: the controller fenced it, and the image it
        // wakes up with may show leaderships other brokers hold now.
        let lease = LeadershipLease::default();
        let sent = Instant::now();
        lease.renew(sent, SESSION);
        assert!(!lease.held(sent + Duration::from_millis(3150)));
    }
}
