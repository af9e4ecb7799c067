//! The listener: accepts every connection, closes at once one over max.connections or
//! max.connections.per.ip, spawns a task per admitted connection (all sharing one
//! request-memory budget), and shuts down gracefully: stop accepting, let connections
//! finish the request in hand, then flush and close every log and write the
//! clean-shutdown marker.

use std::sync::Arc;
use std::time::Duration;

use strand_protocol::connection_limits::ConnectionLimits;
use strand_protocol::{RequestMemory, UNPOOLED_BYTES_PER_REQUEST};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;
use tokio::task::JoinSet;

use crate::broker::Broker;
use crate::net::connection::serve_connection;
use crate::net::Listener;

/// How often group session and rebalance deadlines are checked.
const GROUP_TICK: Duration = Duration::from_millis(100);

/// How often recorded latencies move into their summaries (the exporter's default).
const METRICS_UPKEEP_MS: u64 = 5_000;

/// Runs blocking broker housekeeping (flushes, retention, compaction) every `interval_ms`
/// on a blocking thread, until aborted.
fn every(broker: &Arc<Broker>, interval_ms: u64, work: fn(&Broker)) -> tokio::task::JoinHandle<()> {
    let broker = broker.clone();
    let interval = Duration::from_millis(interval_ms.max(100));
    tokio::spawn(async move {
        let mut ticker = tokio::time::interval(interval);
        ticker.tick().await;
        loop {
            ticker.tick().await;
            let broker = broker.clone();
            let _ = tokio::task::spawn_blocking(move || work(&broker)).await;
        }
    })
}

/// Lets the caller stop the server.
#[derive(Debug, Clone)]
pub struct ServerHandle {
    shutdown: watch::Sender<bool>,
}

impl ServerHandle {
    pub fn shutdown(&self) {
        let _ = self.shutdown.send(true);
    }
}

/// Binds every listener of the broker's configuration (so the caller learns of a taken
/// port at once) and returns the first one's address, the server future and a handle
/// to stop it.
pub async fn serve(
    broker: Arc<Broker>,
) -> anyhow::Result<(
    std::net::SocketAddr,
    ServerHandle,
    impl std::future::Future<Output = anyhow::Result<()>>,
)> {
    let listeners = Listener::all_from_config(&broker.config).map_err(anyhow::Error::msg)?;
    let mut bound = Vec::with_capacity(listeners.len());
    for listener in listeners {
        let socket = bind(listener.spec.listen)?;
        bound.push((listener, socket));
    }
    let (addresses, handle, run) = serve_listeners(broker, bound)?;
    Ok((addresses[0], handle, run))
}

/// Pending connections the kernel queues for the listener (std's default).
const LISTEN_BACKLOG: u32 = 128;

/// Reserves the client port: bound, not yet listening. `strand serve` binds before
/// opening the broker so that with port 0 the broker advertises the port the OS picked
/// (as Kafka does); until the broker listens, connections are refused, so a client tries
/// another bootstrap server instead of waiting on a broker that is still starting.
/// (With SO_REUSEADDR, as std and Kafka set it, Linux lets another SO_REUSEADDR socket
/// bind the same port until one listens; the second to listen fails with an error.)
pub fn bind(address: std::net::SocketAddr) -> anyhow::Result<TcpSocket> {
    let socket = if address.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket
        .bind(address)
        .map_err(|error| anyhow::anyhow!("cannot listen on {address}: {error}"))?;
    Ok(socket)
}

/// Binds every listener of `config` (a taken port is an error at once) and loads what
/// each needs (TLS stores, SASL users: a listener that cannot be served is an error
/// too). A port of 0 in `config` is replaced by the one the OS picked, so the broker
/// advertises it, as Kafka does.
pub fn bind_listeners(
    config: &mut crate::config::BrokerConfig,
) -> anyhow::Result<Vec<(Arc<Listener>, TcpSocket)>> {
    let specs = config.listeners().map_err(anyhow::Error::msg)?;
    let mut sockets = Vec::with_capacity(specs.len());
    for spec in &specs {
        sockets.push(bind(spec.listen)?);
    }
    config.listen = sockets[0].local_addr()?;
    for (extra, socket) in config.extra_listeners.iter_mut().zip(&sockets[1..]) {
        extra.listen = socket.local_addr()?;
    }
    let listeners = Listener::all_from_config(config).map_err(anyhow::Error::msg)?;
    Ok(listeners.into_iter().zip(sockets).collect())
}

/// Listens on a bound socket as the broker's first listener and serves clients: its
/// address, a handle to stop it, and the server future.
pub fn serve_on(
    broker: Arc<Broker>,
    socket: TcpSocket,
) -> anyhow::Result<(
    std::net::SocketAddr,
    ServerHandle,
    impl std::future::Future<Output = anyhow::Result<()>>,
)> {
    let spec = broker
        .config
        .listeners()
        .map_err(anyhow::Error::msg)?
        .remove(0);
    let listener = Listener::from_config(&broker.config, spec).map_err(anyhow::Error::msg)?;
    let (addresses, handle, run) = serve_listeners(broker, vec![(Arc::new(listener), socket)])?;
    Ok((addresses[0], handle, run))
}

/// Listens on bound sockets, one per listener, and serves clients on all of them: their
/// addresses (in the order given), a handle to stop them, and the server future.
pub fn serve_listeners(
    broker: Arc<Broker>,
    bound: Vec<(Arc<Listener>, TcpSocket)>,
) -> anyhow::Result<(
    Vec<std::net::SocketAddr>,
    ServerHandle,
    impl std::future::Future<Output = anyhow::Result<()>>,
)> {
    anyhow::ensure!(!bound.is_empty(), "no listener to serve");
    let mut listening = Vec::with_capacity(bound.len());
    let mut addresses = Vec::with_capacity(bound.len());
    for (listener, socket) in bound {
        let socket = socket.listen(LISTEN_BACKLOG)?;
        addresses.push(socket.local_addr()?);
        listening.push((listener, socket));
    }
    let (shutdown_tx, shutdown_rx) = watch::channel(false);
    let handle = ServerHandle {
        shutdown: shutdown_tx,
    };
    let run = run(broker, listening, shutdown_rx);
    Ok((addresses, handle, run))
}

/// The next connection on any of the listeners, looking first at the one after the
/// listener that gave the last (`turn`), so a flood of connections on one listener
/// never keeps another's waiting.
async fn accept_any<'a>(
    listeners: &'a [(Arc<Listener>, TcpListener)],
    turn: &mut usize,
) -> (
    &'a Arc<Listener>,
    std::io::Result<(tokio::net::TcpStream, std::net::SocketAddr)>,
) {
    std::future::poll_fn(|cx| {
        for step in 0..listeners.len() {
            let index = (*turn + step) % listeners.len();
            let (listener, socket) = &listeners[index];
            if let std::task::Poll::Ready(accepted) = socket.poll_accept(cx) {
                *turn = index + 1;
                return std::task::Poll::Ready((listener, accepted));
            }
        }
        std::task::Poll::Pending
    })
    .await
}

async fn run(
    broker: Arc<Broker>,
    listeners: Vec<(Arc<Listener>, TcpListener)>,
    mut shutdown: watch::Receiver<bool>,
) -> anyhow::Result<()> {
    let limits = ConnectionLimits::new(broker.connection_limits.clone());
    let request_memory = Arc::new(RequestMemory::new(
        broker.config.request_memory_bytes(),
        UNPOOLED_BYTES_PER_REQUEST,
    ));
    let mut refusals = RefusalLog::default();
    let mut tasks = JoinSet::new();
    let config = &broker.config;
    let maintenance = every(&broker, config.checkpoint_interval_ms, Broker::maintenance);
    let retention = every(
        &broker,
        config.retention_check_interval_ms,
        Broker::apply_retention,
    );
    let cleaner = every(&broker, config.cleaner_backoff_ms, Broker::clean_logs);
    let tiering = broker
        .tiered()
        .map(|tiered| tokio::spawn(tiered.clone().run(broker.clone())));
    broker.metrics.watch_network(
        listeners
            .iter()
            .map(|(listener, _)| listener.clone())
            .collect(),
        request_memory.clone(),
    );
    let metrics_upkeep = every(&broker, METRICS_UPKEEP_MS, |broker| broker.metrics.upkeep());
    broker.set_serving();
    let group_timers = {
        let broker = broker.clone();
        tokio::spawn(async move {
            let mut ticker = tokio::time::interval(GROUP_TICK);
            let mut ticks: u64 = 0;
            let expiry_every_ticks = (broker.config.offsets_retention_check_interval_ms
                / GROUP_TICK.as_millis() as u64)
                .max(1);
            loop {
                ticker.tick().await;
                broker.groups.tick();
                ticks += 1;
                if ticks.is_multiple_of(expiry_every_ticks) {
                    let broker = broker.clone();
                    // Its own task: a slow shard's expiry never delays the timers.
                    tokio::spawn(async move { broker.groups.expire_offsets().await });
                }
            }
        })
    };
    // A single node leads every partition from the start: its transaction coordinators
    // load now, so what the log left prepared completes and open transactions time out
    // without waiting for a request about them (a cluster member starts them once it is
    // unfenced).
    if broker.cluster().is_none() {
        broker.txns.start_led(&broker);
    }
    let txn_timers = {
        let broker = broker.clone();
        tokio::spawn(async move {
            let abort_every = Duration::from_millis(
                broker
                    .config
                    .transaction_abort_timed_out_transaction_cleanup_interval_ms
                    .max(1),
            );
            let expire_every = Duration::from_millis(
                broker
                    .config
                    .transaction_remove_expired_transaction_cleanup_interval_ms
                    .max(1),
            );
            let mut abort = tokio::time::interval(abort_every);
            let mut expire = tokio::time::interval(expire_every);
            abort.tick().await;
            expire.tick().await;
            loop {
                tokio::select! {
                    _ = abort.tick() => broker.txns.abort_timed_out(&broker),
                    _ = expire.tick() => {
                        let broker = broker.clone();
                        tokio::spawn(async move { broker.txns.expire_ids().await });
                    }
                }
            }
        })
    };
    let mut turn = 0;
    loop {
        let (listener, stream, peer) = tokio::select! {
            (listener, accepted) = accept_any(&listeners, &mut turn) => match accepted {
                Ok((stream, peer)) => (listener.clone(), stream, peer),
                Err(error) => {
                    tracing::warn!(listener = %listener.spec.name, %error, "accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let slot = match limits.admit(peer.ip()) {
            Ok(slot) => slot,
            Err(refusal) => {
                refusals.refused(peer, &refusal);
                drop(stream); // closed at once: the client tries elsewhere or later
                continue;
            }
        };
        // An address over its connection_creation_rate quota: the connection is closed
        // once the throttle time has passed, as Kafka's ConnectionQuotas closes it.
        let throttle_ms = broker.connection_throttle(peer.ip());
        if throttle_ms > 0 {
            tracing::debug!(%peer, throttle_ms, "connection_creation_rate exceeded: closing the connection");
            tasks.spawn(async move {
                tokio::time::sleep(Duration::from_millis(throttle_ms.into())).await;
                drop((stream, slot));
            });
            continue;
        }
        let (broker, memory, shutdown) = (broker.clone(), request_memory.clone(), shutdown.clone());
        tasks.spawn(serve_connection(
            broker, listener, stream, peer, slot, memory, shutdown,
        ));
        while tasks.try_join_next().is_some() {}
    }
    drop(listeners);
    broker.begin_shutdown();
    maintenance.abort();
    group_timers.abort();
    txn_timers.abort();
    retention.abort();
    cleaner.abort();
    if let Some(tiering) = tiering {
        tiering.abort();
    }
    metrics_upkeep.abort();
    while tasks.join_next().await.is_some() {}
    let broker_for_close = broker.clone();
    tokio::task::spawn_blocking(move || broker_for_close.shutdown()).await??;
    Ok(())
}

/// Warns of refused connections without flooding the log: the first, then a count at
/// most every `REFUSAL_LOG_INTERVAL`.
#[derive(Default)]
struct RefusalLog {
    last_logged: Option<tokio::time::Instant>,
    unlogged: u64,
}

const REFUSAL_LOG_INTERVAL: Duration = Duration::from_secs(10);

impl RefusalLog {
    fn refused(&mut self, peer: std::net::SocketAddr, refusal: &impl std::fmt::Display) {
        self.unlogged += 1;
        let now = tokio::time::Instant::now();
        if self
            .last_logged
            .is_some_and(|at| now.duration_since(at) < REFUSAL_LOG_INTERVAL)
        {
            return;
        }
        tracing::warn!(%peer, %refusal, refused = self.unlogged, "closing new connection");
        self.last_logged = Some(now);
        self.unlogged = 0;
    }
}
