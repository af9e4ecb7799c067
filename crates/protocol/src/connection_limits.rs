//! Who may hold a connection to a listener: Kafka's max.connections,
//! max.connections.per.ip and max.connections.per.ip.overrides, and each admitted
//! connection's last activity, which drives connections.max.idle.ms and lets a listener
//! that must always let its peers in (the metadata quorum) evict the idlest connection
//! instead of refusing a new one.
//!
//! A listener accepts every connection and asks `admit`: one over a limit is closed at
//! once, as Kafka closes one over max.connections.per.ip. (Kafka's acceptor stops
//! accepting at max.connections and lets the kernel's backlog hold new clients; Strand
//! closes them too, so a client learns at once and tries another broker instead of
//! hanging in a backlog that idle sockets keep full.)
//!
//! Thread-safe: shared by a listener's accept loop and its connections.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectionLimitsConfig {
    /// max.connections
    pub max_connections: usize,
    /// max.connections.per.ip
    pub max_connections_per_ip: usize,
    /// max.connections.per.ip.overrides, resolved to addresses.
    pub per_ip_overrides: HashMap<IpAddr, usize>,
}

impl ConnectionLimitsConfig {
    pub fn total_only(max_connections: usize) -> ConnectionLimitsConfig {
        ConnectionLimitsConfig {
            max_connections,
            max_connections_per_ip: usize::MAX,
            per_ip_overrides: HashMap::new(),
        }
    }
}

/// Parses max.connections.per.ip.overrides: `host:count,host:count` (an IP address or a
/// host name, resolved now; IPv6 addresses may be bracketed).
pub fn parse_per_ip_overrides(text: &str) -> Result<HashMap<IpAddr, usize>, String> {
    let mut overrides = HashMap::new();
    for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (host, count) = entry.rsplit_once(':').ok_or_else(|| {
            format!("max.connections.per.ip.overrides entry {entry:?} is not host:count")
        })?;
        let count: usize = count
            .trim()
            .parse()
            .map_err(|_| format!("max.connections.per.ip.overrides entry {entry:?}: bad count"))?;
        let host = host.trim().trim_start_matches('[').trim_end_matches(']');
        let addresses: Vec<IpAddr> = match host.parse::<IpAddr>() {
            Ok(ip) => vec![ip],
            Err(_) => std::net::ToSocketAddrs::to_socket_addrs(&(host, 0))
                .map_err(|error| {
                    format!("max.connections.per.ip.overrides: cannot resolve {host:?}: {error}")
                })?
                .map(|address| address.ip())
                .collect(),
        };
        for ip in addresses {
            overrides.insert(ip, count);
        }
    }
    Ok(overrides)
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    TooManyConnections { limit: usize },
    TooManyFromAddress { ip: IpAddr, limit: usize },
}

impl std::fmt::Display for Refusal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Refusal::TooManyConnections { limit } => {
                write!(f, "max.connections ({limit}) reached")
            }
            Refusal::TooManyFromAddress { ip, limit } => {
                write!(f, "max.connections.per.ip ({limit}) reached for {ip}")
            }
        }
    }
}

#[derive(Debug)]
pub struct ConnectionLimits {
    config: ConnectionLimitsConfig,
    epoch: Instant,
    state: Mutex<Admitted>,
}

#[derive(Debug, Default)]
struct Admitted {
    per_ip: HashMap<IpAddr, usize>,
    total: usize,
    next_id: u64,
    /// Only tracked when the listener may evict (few connections, scanned linearly).
    evictable: HashMap<u64, Arc<Activity>>,
}

/// One admitted connection's activity, shared between its tasks.
#[derive(Debug)]
pub struct Activity {
    epoch: Instant,
    last_active_ms: AtomicU64,
    evicted: AtomicBool,
    evict: Notify,
}

impl Activity {
    /// Records that the connection did something (read a request, wrote a response).
    pub fn touch(&self) {
        self.last_active_ms
            .store(self.epoch.elapsed().as_millis() as u64, Ordering::Relaxed);
    }

    pub fn idle_for(&self) -> Duration {
        let now = self.epoch.elapsed().as_millis() as u64;
        Duration::from_millis(now.saturating_sub(self.last_active_ms.load(Ordering::Relaxed)))
    }

    /// Resolves once the listener evicted this connection to make room for another.
    pub async fn evicted(&self) {
        loop {
            let notified = self.evict.notified();
            if self.evicted.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }
}

/// An admitted connection's place; dropping it frees the place.
#[derive(Debug)]
pub struct ConnectionSlot {
    limits: Arc<ConnectionLimits>,
    ip: IpAddr,
    id: u64,
    pub activity: Arc<Activity>,
}

impl Drop for ConnectionSlot {
    fn drop(&mut self) {
        let mut state = self.limits.state.lock().expect("limits lock");
        state.total -= 1;
        state.evictable.remove(&self.id);
        if let Some(count) = state.per_ip.get_mut(&self.ip) {
            *count -= 1;
            if *count == 0 {
                state.per_ip.remove(&self.ip);
            }
        }
    }
}

impl ConnectionLimits {
    pub fn new(config: ConnectionLimitsConfig) -> Arc<ConnectionLimits> {
        Arc::new(ConnectionLimits {
            config,
            epoch: Instant::now(),
            state: Mutex::new(Admitted::default()),
        })
    }

    /// Connections admitted and not yet closed.
    pub fn count(&self) -> usize {
        self.state.lock().expect("limits lock").total
    }

    fn per_ip_limit(&self, ip: IpAddr) -> usize {
        self.config
            .per_ip_overrides
            .get(&ip)
            .copied()
            .unwrap_or(self.config.max_connections_per_ip)
    }

    /// Admits a connection from `ip`, or says which limit refuses it.
    pub fn admit(self: &Arc<Self>, ip: IpAddr) -> Result<ConnectionSlot, Refusal> {
        self.admit_inner(ip, None)
    }

    /// As `admit`, but at max.connections first evicts the connection idle longest, if it
    /// has been idle for at least `idle_at_least` (the connections of live peers never
    /// are, so a flood of idle sockets cannot lock them out).
    pub fn admit_evicting_idlest(
        self: &Arc<Self>,
        ip: IpAddr,
        idle_at_least: Duration,
    ) -> Result<ConnectionSlot, Refusal> {
        self.admit_inner(ip, Some(idle_at_least))
    }

    fn admit_inner(
        self: &Arc<Self>,
        ip: IpAddr,
        evict_idle_at_least: Option<Duration>,
    ) -> Result<ConnectionSlot, Refusal> {
        let mut state = self.state.lock().expect("limits lock");
        let from_ip = state.per_ip.get(&ip).copied().unwrap_or(0);
        let per_ip_limit = self.per_ip_limit(ip);
        if from_ip >= per_ip_limit {
            return Err(Refusal::TooManyFromAddress {
                ip,
                limit: per_ip_limit,
            });
        }
        // Evicted connections still count until their tasks end; they are not candidates.
        let live = state.total
            - state
                .evictable
                .values()
                .filter(|a| a.evicted.load(Ordering::Relaxed))
                .count();
        if live >= self.config.max_connections {
            let idlest = evict_idle_at_least.and_then(|least| {
                state
                    .evictable
                    .values()
                    .filter(|a| !a.evicted.load(Ordering::Relaxed) && a.idle_for() >= least)
                    .max_by_key(|a| a.idle_for())
                    .cloned()
            });
            match idlest {
                Some(victim) => {
                    victim.evicted.store(true, Ordering::Release);
                    victim.evict.notify_waiters();
                }
                None => {
                    return Err(Refusal::TooManyConnections {
                        limit: self.config.max_connections,
                    })
                }
            }
        }
        let activity = Arc::new(Activity {
            epoch: self.epoch,
            last_active_ms: AtomicU64::new(self.epoch.elapsed().as_millis() as u64),
            evicted: AtomicBool::new(false),
            evict: Notify::new(),
        });
        state.total += 1;
        *state.per_ip.entry(ip).or_insert(0) += 1;
        state.next_id += 1;
        let id = state.next_id;
        if evict_idle_at_least.is_some() {
            state.evictable.insert(id, activity.clone());
        }
        Ok(ConnectionSlot {
            limits: self.clone(),
            ip,
            id,
            activity,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(text: &str) -> IpAddr {
        text.parse().unwrap()
    }

    fn limits(total: usize, per_ip: usize, overrides: &str) -> Arc<ConnectionLimits> {
        ConnectionLimits::new(ConnectionLimitsConfig {
            max_connections: total,
            max_connections_per_ip: per_ip,
            per_ip_overrides: parse_per_ip_overrides(overrides).unwrap(),
        })
    }

    #[test]
    fn refuses_over_the_total_and_frees_places_on_close() {
        let limits = limits(2, usize::MAX, "");
        let a = limits.admit(ip("10.0.0.1")).unwrap();
        let _b = limits.admit(ip("10.0.0.2")).unwrap();
        assert_eq!(
            limits.admit(ip("10.0.0.3")).unwrap_err(),
            Refusal::TooManyConnections { limit: 2 }
        );
        drop(a);
        assert!(limits.admit(ip("10.0.0.3")).is_ok());
    }

    #[test]
    fn refuses_over_the_per_address_limit_with_overrides() {
        let limits = limits(100, 2, "127.0.0.1:5,10.0.0.9:0");
        let local = ip("127.0.0.1");
        let slots: Vec<_> = (0..5).map(|_| limits.admit(local).unwrap()).collect();
        assert_eq!(
            limits.admit(local).unwrap_err(),
            Refusal::TooManyFromAddress {
                ip: local,
                limit: 5
            }
        );
        let other = ip("10.0.0.1");
        let _o1 = limits.admit(other).unwrap();
        let _o2 = limits.admit(other).unwrap();
        assert!(limits.admit(other).is_err());
        assert!(
            limits.admit(ip("10.0.0.9")).is_err(),
            "an override of 0 bans"
        );
        drop(slots);
        assert_eq!(limits.count(), 2);
        assert!(limits.admit(local).is_ok());
    }

    #[test]
    fn overrides_parse_like_kafkas() {
        let parsed = parse_per_ip_overrides("localhost:7, 10.1.2.3:4,[::1]:9").unwrap();
        assert_eq!(parsed.get(&ip("10.1.2.3")), Some(&4));
        assert_eq!(parsed.get(&ip("::1")), Some(&9));
        assert_eq!(parsed.get(&ip("127.0.0.1")), Some(&7));
        assert!(parse_per_ip_overrides("10.1.2.3").is_err());
        assert!(parse_per_ip_overrides("10.1.2.3:many").is_err());
        assert!(parse_per_ip_overrides("").unwrap().is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_quorum_listener_evicts_its_idlest_connection() {
        let limits = limits(2, usize::MAX, "");
        let local = ip("127.0.0.1");
        let idle = limits
            .admit_evicting_idlest(local, Duration::from_secs(1))
            .unwrap();
        tokio::time::advance(Duration::from_secs(5)).await;
        let busy = limits
            .admit_evicting_idlest(local, Duration::from_secs(1))
            .unwrap();
        let newcomer = limits
            .admit_evicting_idlest(local, Duration::from_secs(1))
            .expect("the idle connection makes room");
        tokio::time::timeout(Duration::from_millis(10), idle.activity.evicted())
            .await
            .expect("the idlest was told to close");
        // Both remaining are fresh: a fourth is refused rather than evicting a live one.
        assert!(limits
            .admit_evicting_idlest(local, Duration::from_secs(1))
            .is_err());
        drop(idle);
        assert_eq!(limits.count(), 2);
        busy.activity.touch();
        drop(newcomer);
    }

    #[tokio::test(start_paused = true)]
    async fn activity_measures_idleness() {
        let limits = limits(10, 10, "");
        let slot = limits.admit(ip("127.0.0.1")).unwrap();
        tokio::time::advance(Duration::from_secs(3)).await;
        assert!(slot.activity.idle_for() >= Duration::from_secs(3));
        slot.activity.touch();
        assert!(slot.activity.idle_for() < Duration::from_secs(1));
    }
}
