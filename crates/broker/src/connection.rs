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

use std::io;
use std::os::fd::BorrowedFd;
use strand_protocol::connection_limits::{Activity, ConnectionSlot};
use strand_protocol::{parse_request_header, read_frame_size, RequestMemory};

use strand_protocol::ResponsePart;
use tokio::io::{AsyncWriteExt, BufReader, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch};

use crate::broker::Broker;
use crate::router::{route, Outcome};

const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Requests of one connection handled but not yet answered (Kafka clients keep at most
/// five in flight by default).
const RESPONSES_IN_FLIGHT_MAX: usize = 8;

pub async fn serve_connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    slot: ConnectionSlot,
    request_memory: Arc<RequestMemory>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    if let Ok(bytes) = usize::try_from(broker.config.socket_send_buffer_bytes) {
        if let Err(error) = rustix::net::sockopt::set_socket_send_buffer_size(&stream, bytes) {
            tracing::debug!(%peer, %error, "setting SO_SNDBUF failed");
        }
    }
    let (reader, writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let limit = broker.config.socket_request_max_bytes;
    let idle_max = broker.config.connections_max_idle();
    let read_timeout = Duration::from_millis(broker.config.request_read_timeout_ms);
    let activity = slot.activity.clone();
    let pending = Arc::new(PendingAnswers::default());
    // Responses leave in request order from their own task, so a response that waits
    // (acks=all on a flush-before-ack topic) lets the next requests be read and handled.
    let (responses, queue) = mpsc::channel(RESPONSES_IN_FLIGHT_MAX);
    let writer_task = tokio::spawn(write_responses(
        writer,
        queue,
        peer,
        activity.clone(),
        pending.clone(),
    ));
    let mut idle_closed = false;
    loop {
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
        activity.touch();
        let outcome = route(&broker, parse_request_header(body), peer).await;
        drop(reserved);
        let closing = matches!(outcome, Outcome::Close(_));
        pending.unanswered.fetch_add(1, Ordering::AcqRel);
        // The queue is full while the writer waits on a peer that does not read its
        // answers; that peer is idle too, and is closed like any idle one.
        let queued = tokio::select! {
            sent = responses.send(outcome) => sent.is_ok(),
            _ = idle_expired(&activity, &pending, idle_max) => {
                tracing::debug!(%peer, "closing connection: its answers are not read (connections.max.idle.ms)");
                idle_closed = true;
                false
            }
        };
        if !queued || closing {
            break; // the writer stopped (write failure), the peer stopped reading, or this request closes the connection
        }
        if *shutdown.borrow() {
            break;
        }
    }
    drop(responses);
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
    mut writer: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Outcome>,
    peer: SocketAddr,
    activity: Arc<Activity>,
    pending: Arc<PendingAnswers>,
) {
    while let Some(mut outcome) = queue.recv().await {
        if let Outcome::Deferred(deferred) = outcome {
            outcome = deferred.await;
        }
        activity.touch();
        pending.writing.store(true, Ordering::Release);
        let written = match outcome {
            Outcome::Respond(bytes) => writer.write_all(&bytes).await,
            Outcome::RespondParts(parts) => write_parts(&mut writer, &parts).await,
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
        activity.touch();
        pending.unanswered.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Writes a response made of byte parts and file regions; file regions go from the page
/// cache to the socket with sendfile, never through user space.
async fn write_parts(writer: &mut OwnedWriteHalf, parts: &[ResponsePart]) -> io::Result<()> {
    // Cork the socket so the header bytes and the file regions leave as full segments,
    // not one small packet per part (the socket runs with TCP_NODELAY).
    let corked =
        parts.len() > 1 && rustix::net::sockopt::set_tcp_cork(writer.as_ref(), true).is_ok();
    let written = write_each(writer, parts).await;
    if corked {
        let _ = rustix::net::sockopt::set_tcp_cork(writer.as_ref(), false);
    }
    written
}

async fn write_each(writer: &mut OwnedWriteHalf, parts: &[ResponsePart]) -> io::Result<()> {
    for part in parts {
        match part {
            ResponsePart::Bytes(bytes) => writer.write_all(bytes).await?,
            ResponsePart::File {
                file,
                position,
                length,
            } => {
                writer.flush().await?;
                send_file(writer, file.as_raw_fd(), *position, *length).await?;
            }
        }
    }
    Ok(())
}

async fn send_file(
    writer: &OwnedWriteHalf,
    file_fd: std::os::fd::RawFd,
    position: u64,
    length: u64,
) -> io::Result<()> {
    let socket = writer.as_ref();
    let (mut position, mut remaining) = (position, length);
    while remaining > 0 {
        socket.writable().await?;
        let sent = socket.try_io(Interest::WRITABLE, || {
            // SAFETY: the descriptor belongs to a file kept open by the response part we
            // are iterating over, which outlives this call.
            let file = unsafe { BorrowedFd::borrow_raw(file_fd) };
            let mut offset = position;
            rustix::fs::sendfile(
                socket,
                file,
                Some(&mut offset),
                remaining.min(1 << 30) as usize,
            )
            .map_err(io::Error::from)
        });
        match sent {
            // The file ended early (truncated meanwhile): the frame cannot be completed.
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "file shorter than the response promised",
                ))
            }
            Ok(count) => {
                position += count as u64;
                remaining -= count as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => continue,
            Err(error) => return Err(error),
        }
    }
    Ok(())
}
