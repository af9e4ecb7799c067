//! The broker's HTTP listener (`--http-listen`, 127.0.0.1:9644 by default): /metrics in
//! Prometheus' text format, /health (the process is up) and /ready (it serves clients
//! and its replicas are in sync), for Prometheus, load balancers and orchestrators; and
//! everything else to the web console when there is one (`Console`, built by the binary).
//!
//! Bounded like the Kafka listeners: at most `HTTP_CONNECTIONS_MAX` connections at once
//! (more are closed at once), request headers within `HEADER_READ_TIMEOUT`, and a
//! connection lives at most `CONNECTION_LIFETIME_MAX`.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{HeaderValue, CONTENT_TYPE};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::sync::{watch, Semaphore};

use crate::Broker;

const HTTP_CONNECTIONS_MAX: usize = 64;
const HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);
const CONNECTION_LIFETIME_MAX: Duration = Duration::from_secs(120);

/// What the HTTP listener was asked to do: where to listen, and whether that address was
/// given (a given address that cannot be bound stops the start; the default's only warns).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HttpListen {
    Off,
    At { address: SocketAddr, given: bool },
}

impl HttpListen {
    pub const DEFAULT: &'static str = "127.0.0.1:9644";

    /// `HOST:PORT`, or `none` for no HTTP listener.
    pub fn parse(value: &str, given: bool) -> Result<HttpListen, String> {
        let value = value.trim();
        if value.eq_ignore_ascii_case("none") || value.is_empty() {
            return Ok(HttpListen::Off);
        }
        let address = value.parse().map_err(|_| {
            format!("{value:?} is not HOST:PORT (an IP address and a port) or none")
        })?;
        Ok(HttpListen::At { address, given })
    }

    /// Binds the listener: None when off, or when the default address is taken (another
    /// broker on this machine has it), which is logged and not fatal.
    pub async fn bind(&self) -> anyhow::Result<Option<TcpListener>> {
        let HttpListen::At { address, given } = self else {
            return Ok(None);
        };
        match TcpListener::bind(address).await {
            Ok(listener) => Ok(Some(listener)),
            Err(error) if !given => {
                tracing::warn!(%address, %error, "no HTTP listener (metrics, health): the default address is taken; set --http-listen");
                Ok(None)
            }
            Err(error) => Err(anyhow::anyhow!(
                "cannot listen for HTTP on {address} (--http-listen): {error}"
            )),
        }
    }
}

/// What the HTTP listener reports on: a broker, or a controller-only node.
pub trait Observed: Send + Sync + 'static {
    /// /metrics: the Prometheus text exposition, read now.
    fn metrics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>>;
    /// /ready: Ok, or why not.
    fn readiness(&self) -> Result<(), String>;
}

impl Observed for Broker {
    fn metrics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        Box::pin(self.metrics.render(self))
    }

    fn readiness(&self) -> Result<(), String> {
        Broker::readiness(self)
    }
}

/// A controller-only node (process.roles=controller): its KafkaController gauges, as a
/// Kafka KRaft controller reports them, and ready once the quorum has a leader.
pub struct ControllerNode {
    node_id: u64,
    raft: strand_raft::Raft,
    metadata: watch::Receiver<strand_raft::state_machine::Published>,
    /// Only the controller's gauges: nothing of a broker's is registered here.
    exposition: crate::metrics::Exposition,
}

impl ControllerNode {
    pub fn new(node_id: i32, quorum: &strand_raft::node::QuorumNode) -> ControllerNode {
        ControllerNode {
            node_id: node_id as u64,
            raft: quorum.raft.clone(),
            metadata: quorum.metadata.clone(),
            exposition: crate::metrics::Exposition::new(),
        }
    }

    fn leader(&self) -> Option<u64> {
        self.raft.metrics().borrow().current_leader
    }
}

impl Observed for ControllerNode {
    fn metrics(&self) -> Pin<Box<dyn Future<Output = String> + Send + '_>> {
        let counts = if self.leader() == Some(self.node_id) {
            crate::metrics::ControllerCounts::active(&self.metadata.borrow().image)
        } else {
            crate::metrics::ControllerCounts::inactive()
        };
        let recorder = self.exposition.recorder();
        Box::pin(std::future::ready(
            self.exposition.render(|| counts.export(recorder), |_| {}),
        ))
    }

    fn readiness(&self) -> Result<(), String> {
        match self.leader() {
            Some(_) => Ok(()),
            None => Err("the metadata quorum has no leader".into()),
        }
    }
}

/// The web console: answers every path but /metrics, /health and /ready.
pub trait Console: Send + Sync + 'static {
    fn answer(
        &self,
        request: Request<Incoming>,
    ) -> Pin<Box<dyn Future<Output = Response<Full<Bytes>>> + Send + '_>>;
}

/// Serves HTTP on `listener` until `shutdown` turns true.
pub async fn serve<O: Observed + ?Sized>(
    observed: Arc<O>,
    console: Option<Arc<dyn Console>>,
    listener: TcpListener,
    mut shutdown: watch::Receiver<bool>,
) {
    let slots = Arc::new(Semaphore::new(HTTP_CONNECTIONS_MAX));
    loop {
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(accepted) => accepted,
                Err(error) => {
                    tracing::warn!(address = ?listener.local_addr().ok(), %error, "HTTP accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => return,
        };
        let Ok(slot) = slots.clone().try_acquire_owned() else {
            tracing::debug!(%peer, "closing HTTP connection: too many at once");
            continue;
        };
        let observed = observed.clone();
        let console = console.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |request| {
                let observed = observed.clone();
                let console = console.clone();
                async move { Ok::<_, Infallible>(answer(&*observed, console.as_deref(), request).await) }
            });
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_READ_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service);
            match tokio::time::timeout(CONNECTION_LIFETIME_MAX, connection).await {
                Ok(Err(error)) => tracing::debug!(%peer, %error, "HTTP connection failed"),
                Err(_) => tracing::debug!(%peer, "closing HTTP connection: open too long"),
                Ok(Ok(())) => {}
            }
            drop(slot);
        });
    }
}

async fn answer<O: Observed + ?Sized>(
    observed: &O,
    console: Option<&dyn Console>,
    request: Request<Incoming>,
) -> Response<Full<Bytes>> {
    let path = request.uri().path();
    let ours = ["/metrics", "/health", "/ready"].contains(&path);
    if let (false, Some(console)) = (ours, console) {
        return console.answer(request).await;
    }
    if request.method() != Method::GET && request.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "only GET\n".into());
    }
    match path {
        "/metrics" => {
            let mut response = text(StatusCode::OK, observed.metrics().await);
            response.headers_mut().insert(
                CONTENT_TYPE,
                HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
            );
            response
        }
        "/health" => text(StatusCode::OK, "ok\n".into()),
        "/ready" => match observed.readiness() {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: /metrics, /health and /ready are served\n".into(),
        ),
    }
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; charset=utf-8"),
    );
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn http_listen_is_an_address_or_none() {
        assert_eq!(HttpListen::parse("none", true), Ok(HttpListen::Off));
        assert_eq!(
            HttpListen::parse("127.0.0.1:9644", false),
            Ok(HttpListen::At {
                address: "127.0.0.1:9644".parse().unwrap(),
                given: false
            })
        );
        assert!(HttpListen::parse("localhost", true).is_err());
    }
}
