//! One client connection: read a frame (size checked; body read against the listener's
//! request-memory budget, before a deadline), route it, hand the outcome to the writer,
//! repeat. Requests are handled one at a time and in order (appends keep their order);
//! responses are written in that order by a writer task, which may wait for a deferred
//! one (a produce waiting for its sync) while later requests are already read and
//! handled. A malformed frame, a body that does not arrive in time, or
//! connections.max.idle.ms without activity closes only this connection.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use strand_protocol::connection_limits::{Activity, ConnectionSlot};
use strand_protocol::{parse_request_header, read_frame_size, RequestMemory};
use strand_security::KafkaPrincipal;
use tokio::io::BufReader;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};
use tokio_rustls::TlsAcceptor;

use super::authenticator::{Authenticator, Gate};
use super::context::RequestContext;
use super::listener::Listener;
use super::transport::{self, Reader, Writer};
use crate::broker::Broker;
use crate::metrics::RequestTimes;
use crate::router::{route_measured, Outcome};

const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Requests of one connection handled but not yet answered (Kafka clients keep at most
/// five in flight by default).
const RESPONSES_IN_FLIGHT_MAX: usize = 8;

pub async fn serve_connection(
    broker: Arc<Broker>,
    listener: Arc<Listener>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ConnectionSlot,
    request_memory: Arc<RequestMemory>,
    mut shutdown: watch::Receiver<bool>,
) {
    // Counted from its acceptance, TLS handshake included, as Kafka counts it.
    let _counted = listener.connected();
    let _ = stream.set_nodelay(true);
    if let Ok(bytes) = usize::try_from(broker.config.socket_send_buffer_bytes) {
        if let Err(error) = rustix::net::sockopt::set_socket_send_buffer_size(&stream, bytes) {
            tracing::debug!(%peer, %error, "setting SO_SNDBUF failed");
        }
    }
    let read_timeout = Duration::from_millis(broker.config.request_read_timeout_ms);
    // A shutdown does not wait for a handshake in progress.
    let opened = tokio::select! {
        opened = open(&listener, stream, peer, read_timeout) => opened,
        _ = shutdown.changed() => return,
    };
    let (reader, writer, principal) = match opened {
        Ok(opened) => opened,
        Err(error) => {
            tracing::info!(%peer, listener = %listener.spec.name, %error, "closing connection");
            return;
        }
    };
    let mut authenticator = listener.sasl.clone().map(|settings| {
        let scram: Arc<dyn strand_security::sasl::scram::ScramCredentials> = broker.clone();
        Authenticator::new(settings, scram)
    });
    let mut context = RequestContext::new(listener.clone(), peer, principal);
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let request_max_bytes = broker.config.socket_request_max_bytes;
    let idle_max = broker.config.connections_max_idle();
    let activity = slot.activity.clone();
    let pending = Arc::new(PendingAnswers::default());
    // Responses leave in request order from their own task, so a response that waits
    // (acks=all on a flush-before-ack topic) lets the next requests be read and handled.
    let (responses, queue) = mpsc::channel(RESPONSES_IN_FLIGHT_MAX);
    let writer_task = tokio::spawn(write_responses(
        broker.clone(),
        writer,
        queue,
        peer,
        activity.clone(),
        pending.clone(),
    ));
    let mut idle_closed = false;
    loop {
        // Until it authenticates, a client may send only small frames
        // (sasl.server.max.receive.size), as on Kafka.
        let limit = match &authenticator {
            Some(gate) if gate.principal().is_none() => listener
                .sasl
                .as_ref()
                .map_or(request_max_bytes, |sasl| sasl.max_receive_size),
            _ => request_max_bytes,
        };
        let size = tokio::select! {
            size = read_frame_size(&mut reader, limit) => size,
            _ = idle_expired(&activity, &pending, idle_max) => {
                tracing::debug!(%peer, "closing idle connection (connections.max.idle.ms)");
                idle_closed = true;
                break;
            }
            _ = shutdown.changed() => break,
        };
        let size = match size {
            Ok(Some(size)) => size,
            Ok(None) => break,
            Err(error) => {
                tracing::warn!(%peer, %error, "closing connection");
                break;
            }
        };
        activity.touch();
        let deadline = tokio::time::Instant::now() + read_timeout;
        let (body, reserved) = match request_memory.read_body(&mut reader, size, deadline).await {
            Ok(read) => read,
            Err(error) => {
                tracing::warn!(%peer, %error, "closing connection");
                break;
            }
        };
        let read = std::time::Instant::now();
        activity.touch();
        let (outcome, times) = match &mut authenticator {
            None => route_measured(&broker, parse_request_header(body), &context, read, size).await,
            Some(gate) => match gate.on_frame(body, read) {
                Gate::Route(request) => {
                    route_measured(&broker, Ok(request), &context, read, size).await
                }
                Gate::Answer(outcome) => {
                    if let Some(principal) = gate.principal() {
                        context.principal = principal.clone();
                    }
                    (outcome, None)
                }
            },
        };
        drop(reserved);
        let closing = matches!(outcome, Outcome::Close(_) | Outcome::RespondAndClose(..))
            || authenticator.as_ref().is_some_and(|gate| gate.failed());
        pending.unanswered.fetch_add(1, Ordering::AcqRel);
        // The queue is full while the writer waits on a peer that does not read its
        // answers; that peer is idle too, and is closed like any idle one.
        let queued = tokio::select! {
            sent = responses.send((outcome, times)) => sent.is_ok(),
            _ = idle_expired(&activity, &pending, idle_max) => {
                tracing::debug!(%peer, "closing connection: its answers are not read (connections.max.idle.ms)");
                idle_closed = true;
                false
            }
        };
        if !queued || closing {
            break; // the writer stopped (write failure), the peer stopped reading, or this request closes the connection
        }
        // A client over its quota is not read from for its throttle time.
        if let Some(until) = context.throttle.take() {
            tokio::select! {
                _ = tokio::time::sleep_until(until.into()) => {}
                _ = shutdown.changed() => break,
            }
        }
        if *shutdown.borrow() {
            break;
        }
    }
    drop(responses);
    // The share sessions this connection opened close with it (KIP-932).
    crate::share::connection_closed(&broker, context.connection_id);
    if idle_closed {
        // Its peer has not read for the whole idle period: nothing more will be sent.
        writer_task.abort();
    }
    // In-flight answers still go out (graceful close), but not to a peer that stops
    // reading them.
    let mut writer_task = writer_task;
    if tokio::time::timeout(WRITER_DRAIN_MAX, &mut writer_task)
        .await
        .is_err()
    {
        tracing::warn!(%peer, "closing connection: its answers were not read in time");
        writer_task.abort();
    }
    drop(slot);
}

/// Opens the connection's transport: the TLS handshake on SSL and SASL_SSL listeners
/// (within request.read.timeout.ms, so a peer that never finishes it holds nothing for
/// long), and the principal its certificate proves.
async fn open(
    listener: &Listener,
    stream: TcpStream,
    peer: SocketAddr,
    handshake_timeout: Duration,
) -> Result<(Reader, Writer, KafkaPrincipal), String> {
    let Some(tls) = &listener.tls else {
        let (reader, writer) = transport::plain(stream);
        return Ok((reader, writer, KafkaPrincipal::anonymous()));
    };
    let acceptor = TlsAcceptor::from(tls.current());
    let stream = tokio::time::timeout(handshake_timeout, acceptor.accept(stream))
        .await
        .map_err(|_| "the TLS handshake did not finish in time".to_string())?
        .map_err(|error| format!("TLS handshake failed: {error}"))?;
    let principal = tls
        .settings()
        .principal_of(stream.get_ref().1.peer_certificates())
        .map_err(|error| format!("no principal for the client certificate: {error}"))?;
    tracing::debug!(%peer, %principal, "TLS connection");
    let (reader, writer) = transport::tls(stream);
    Ok((reader, writer, principal))
}

/// How long a closing connection's writer may take to send what was already answered.
const WRITER_DRAIN_MAX: Duration = Duration::from_secs(30);

/// What the writer still owes the peer.
#[derive(Debug, Default)]
struct PendingAnswers {
    /// Requests handed to the writer and not yet written (some may wait: a long-poll
    /// fetch, a produce waiting for its sync); their connection is not idle.
    unanswered: AtomicUsize,
    /// The writer is blocked writing to the socket: a peer that stops reading makes no
    /// activity, and is idle although answers are owed (as Kafka counts it).
    writing: std::sync::atomic::AtomicBool,
}

/// Resolves once the connection has had no activity for `idle_max` with nothing left to
/// answer; never if `idle_max` is `None`.
async fn idle_expired(activity: &Activity, pending: &PendingAnswers, idle_max: Option<Duration>) {
    let Some(idle_max) = idle_max else {
        return std::future::pending().await;
    };
    loop {
        let idle = activity.idle_for();
        let owes_nothing = pending.unanswered.load(Ordering::Acquire) == 0;
        if idle >= idle_max && (owes_nothing || pending.writing.load(Ordering::Acquire)) {
            return;
        }
        // Waiting on its own answers: look again a whole period later.
        let wait = idle_max.checked_sub(idle).filter(|w| !w.is_zero());
        tokio::time::sleep(wait.unwrap_or(idle_max)).await;
    }
}

/// Writes responses in the order their requests arrived, waiting for deferred ones.
async fn write_responses(
    broker: Arc<Broker>,
    mut writer: Writer,
    mut queue: mpsc::Receiver<(Outcome, Option<RequestTimes>)>,
    peer: SocketAddr,
    activity: Arc<Activity>,
    pending: Arc<PendingAnswers>,
) {
    while let Some((mut outcome, times)) = queue.recv().await {
        let mut deferred_ready = None;
        if let Outcome::Deferred(deferred) = outcome {
            outcome = deferred.await;
            deferred_ready = Some(std::time::Instant::now());
        }
        // A deferred answer is written as soon as it is ready: one clock read serves both.
        let writing = deferred_ready.unwrap_or_else(std::time::Instant::now);
        let request_metrics = &broker.metrics.requests;
        if let Some(times) = &times {
            request_metrics.count(times);
        }
        activity.touch();
        pending.writing.store(true, Ordering::Release);
        let written = match outcome {
            Outcome::Respond(bytes) => writer.write_all(&bytes).await,
            Outcome::RespondParts(parts) => writer.write_parts(&parts).await,
            Outcome::RespondAndClose(bytes, linger) => {
                if let Err(error) = writer.write_all(&bytes).await {
                    tracing::debug!(%peer, %error, "write failed");
                }
                tokio::time::sleep(linger).await;
                return;
            }
            Outcome::NoResponse => Ok(()),
            Outcome::Deferred(_) => Ok(()), // a deferred outcome resolves to a final one
            Outcome::Close(reason) => {
                tracing::warn!(%peer, %reason, "closing connection");
                return;
            }
        };
        if let Err(error) = written {
            tracing::debug!(%peer, %error, "write failed");
            return;
        }
        pending.writing.store(false, Ordering::Release);
        let written = std::time::Instant::now();
        activity.touch();
        pending.unanswered.fetch_sub(1, Ordering::AcqRel);
        if let Some(times) = times {
            request_metrics.written(times, deferred_ready, writing, written);
        }
    }
}
