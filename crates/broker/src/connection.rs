//! One client connection: read a frame (size checked, memory reserved from the broker's
//! pool before allocating), route it, hand the outcome to the writer, repeat. Requests
//! are handled one at a time and in order (appends keep their order); responses are
//! written in that order by a writer task, which may wait for a deferred one (a produce
//! waiting for its sync) while later requests are already read and handled. A malformed
//! frame closes only this connection.

use std::net::SocketAddr;
use std::sync::Arc;

use std::io;
use std::os::fd::BorrowedFd;
use strand_protocol::{parse_request_header, read_frame_body, read_frame_size};

use strand_protocol::ResponsePart;
use tokio::io::{AsyncWriteExt, BufReader, Interest};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, watch, Semaphore};

use crate::broker::Broker;
use crate::router::{route, Outcome};

/// Memory pool permits are KiB: a u32 count covers 4 TiB.
const POOL_PERMIT_BYTES: usize = 1024;
const READ_BUFFER_BYTES: usize = 16 * 1024;
/// Requests of one connection handled but not yet answered (Kafka clients keep at most
/// five in flight by default).
const RESPONSES_IN_FLIGHT_MAX: usize = 8;

pub async fn serve_connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    request_memory: Arc<Semaphore>,
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
    // Responses leave in request order from their own task, so a response that waits
    // (acks=all on a flush-before-ack topic) lets the next requests be read and handled.
    let (responses, queue) = mpsc::channel(RESPONSES_IN_FLIGHT_MAX);
    let writer_task = tokio::spawn(write_responses(writer, queue, peer));
    loop {
        let size = tokio::select! {
            size = read_frame_size(&mut reader, limit) => size,
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
        let permits = size.div_ceil(POOL_PERMIT_BYTES) as u32;
        let Ok(reserved) = request_memory.acquire_many(permits).await else {
            break;
        };
        let body = match read_frame_body(&mut reader, size).await {
            Ok(body) => body,
            Err(error) => {
                tracing::warn!(%peer, %error, "closing connection");
                break;
            }
        };
        let outcome = route(&broker, parse_request_header(body.freeze()), peer).await;
        drop(reserved);
        let closing = matches!(outcome, Outcome::Close(_));
        if responses.send(outcome).await.is_err() || closing {
            break; // the writer stopped (write failure), or this request closes the connection
        }
        if *shutdown.borrow() {
            break;
        }
    }
    drop(responses);
    let _ = writer_task.await;
}

/// Writes responses in the order their requests arrived, waiting for deferred ones.
async fn write_responses(
    mut writer: OwnedWriteHalf,
    mut queue: mpsc::Receiver<Outcome>,
    peer: SocketAddr,
) {
    while let Some(mut outcome) = queue.recv().await {
        if let Outcome::Deferred(pending) = outcome {
            outcome = pending.await;
        }
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
