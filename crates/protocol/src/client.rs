//! The smallest Kafka client Strand needs itself (the load generator, and followers
//! fetching from leaders): one TCP connection with pipelined requests (responses come back
//! in order on a connection, so a FIFO of waiters matches them), bounded by
//! `in_flight_max`. Not a general client: no retries, no metadata refresh; callers handle
//! errors and reconnect. The connection's bytes may be any stream: plain TCP here, or
//! TLS opened by the caller (`Connection::over`).

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Mutex, Semaphore};

/// Largest response frame accepted (a fetch of 50 MiB plus framing).
const RESPONSE_MAX_BYTES: usize = 128 * 1024 * 1024;

type Waiter = (i16, oneshot::Sender<anyhow::Result<Bytes>>);

/// The reading half of a connection's stream.
pub type StreamReader = Pin<Box<dyn AsyncRead + Send>>;
/// The writing half of a connection's stream.
pub type StreamWriter = Pin<Box<dyn AsyncWrite + Send>>;

pub struct Connection {
    client_id: &'static str,
    writer: Mutex<(StreamWriter, i32)>,
    waiters: Arc<std::sync::Mutex<Waiters>>,
    in_flight: Arc<Semaphore>,
    /// From when the connection counts as closed (a SASL session about to expire).
    retire_at: std::sync::OnceLock<std::time::Instant>,
    /// The task reading responses: stopped when the connection is dropped, so the stream
    /// closes then (a split TLS stream stays open while either half lives).
    reader: tokio::task::AbortHandle,
}

impl Drop for Connection {
    fn drop(&mut self) {
        self.reader.abort();
    }
}

/// The requests waiting for their responses, and whether the connection closed (set by
/// the reader under the same lock, so a request sent after it fails at once instead of
/// waiting for an answer nobody will read).
#[derive(Default)]
struct Waiters {
    queue: VecDeque<Waiter>,
    closed: bool,
}

impl Connection {
    pub async fn connect(address: &str, in_flight_max: usize) -> anyhow::Result<Connection> {
        Connection::connect_as(address, in_flight_max, "strand-bench").await
    }

    /// Connects, naming itself `client_id` in every request header.
    pub async fn connect_as(
        address: &str,
        in_flight_max: usize,
        client_id: &'static str,
    ) -> anyhow::Result<Connection> {
        let stream = TcpStream::connect(address)
            .await
            .with_context(|| format!("connecting to {address}"))?;
        stream.set_nodelay(true)?;
        let (reader, writer) = stream.into_split();
        Ok(Connection::over(
            Box::pin(reader),
            Box::pin(writer),
            in_flight_max,
            client_id,
        ))
    }

    /// A connection over a stream the caller opened (e.g. with TLS); must be called
    /// within a Tokio runtime (the reader runs as a task).
    pub fn over(
        mut reader: StreamReader,
        writer: StreamWriter,
        in_flight_max: usize,
        client_id: &'static str,
    ) -> Connection {
        let waiters: Arc<std::sync::Mutex<Waiters>> = Arc::default();
        let pending = waiters.clone();
        let reader = tokio::spawn(async move {
            loop {
                let frame = async {
                    let size = reader.read_i32().await? as usize;
                    if size > RESPONSE_MAX_BYTES {
                        bail!("response of {size} bytes");
                    }
                    let mut frame = vec![0u8; size];
                    reader.read_exact(&mut frame).await?;
                    Ok(Bytes::from(frame))
                }
                .await;
                let waiter = pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .queue
                    .pop_front();
                let failed = frame.is_err();
                if let Some((_, sender)) = waiter {
                    let _ = sender.send(frame);
                }
                if failed {
                    let mut waiters = pending.lock().unwrap_or_else(|p| p.into_inner());
                    waiters.closed = true;
                    for (_, sender) in waiters.queue.drain(..) {
                        let _ = sender.send(Err(anyhow::anyhow!("connection closed")));
                    }
                    return;
                }
            }
        });
        Connection {
            client_id,
            writer: Mutex::new((writer, 0)),
            waiters,
            in_flight: Arc::new(Semaphore::new(in_flight_max)),
            retire_at: std::sync::OnceLock::new(),
            reader: reader.abort_handle(),
        }
    }

    /// Counts the connection as closed `after` from now, so its users open a new one (a
    /// SASL session the peer ends at its lifetime). Only the first call counts.
    pub fn retire_after(&self, after: std::time::Duration) {
        let _ = self.retire_at.set(std::time::Instant::now() + after);
    }

    /// Sends a request and waits for its response body.
    pub async fn call<Req: Encodable, Resp: Decodable>(
        &self,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> anyhow::Result<Resp> {
        let _slot = self.in_flight.acquire().await?;
        let receiver = self.send(key, version, body).await?;
        let mut frame = receiver.await.context("connection dropped")??;
        ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
        Resp::decode(&mut frame, version)
    }

    /// Sends a request whose answer is not awaited here (pipelining); the receiver yields
    /// the raw frame.
    pub async fn send<Req: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> anyhow::Result<oneshot::Receiver<anyhow::Result<Bytes>>> {
        let mut writer = self.writer.lock().await;
        let payload = self.frame(&mut writer.1, key, version, body)?;
        let (sender, receiver) = oneshot::channel();
        {
            let mut waiters = self.waiters.lock().unwrap_or_else(|p| p.into_inner());
            if waiters.closed {
                bail!("connection closed");
            }
            waiters.queue.push_back((key as i16, sender));
        }
        write_flushed(&mut writer.0, &payload).await?;
        Ok(receiver)
    }

    /// Sends a request the broker does not answer (a Produce with acks=0): no waiter is
    /// queued, so the answers to later requests still match theirs.
    pub async fn send_unanswered<Req: Encodable>(
        &self,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> anyhow::Result<()> {
        let mut writer = self.writer.lock().await;
        let payload = self.frame(&mut writer.1, key, version, body)?;
        if self.is_closed() {
            bail!("connection closed");
        }
        write_flushed(&mut writer.0, &payload).await?;
        Ok(())
    }

    /// The framed request (size, header, body), with the next correlation id.
    fn frame<Req: Encodable>(
        &self,
        correlation_id: &mut i32,
        key: ApiKey,
        version: i16,
        body: &Req,
    ) -> anyhow::Result<BytesMut> {
        *correlation_id += 1;
        let header = RequestHeader::default()
            .with_request_api_key(key as i16)
            .with_request_api_version(version)
            .with_correlation_id(*correlation_id)
            .with_client_id(Some(StrBytes::from_static_str(self.client_id)));
        let mut payload = BytesMut::new();
        payload.put_i32(0);
        header.encode(&mut payload, key.request_header_version(version))?;
        body.encode(&mut payload, version)?;
        let size = (payload.len() - 4) as i32;
        payload[..4].copy_from_slice(&size.to_be_bytes());
        Ok(payload)
    }

    /// Whether the peer closed the connection (or reading from it failed; or it is
    /// retired): a closed connection answers nothing more.
    pub fn is_closed(&self) -> bool {
        self.retire_at
            .get()
            .is_some_and(|at| std::time::Instant::now() >= *at)
            || self
                .waiters
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .closed
    }

    /// A permit bounding the requests in flight on this connection.
    pub async fn slot(&self) -> tokio::sync::OwnedSemaphorePermit {
        self.in_flight
            .clone()
            .acquire_owned()
            .await
            .expect("the semaphore is never closed")
    }
}

/// Writes all of `bytes` and flushes (a TLS stream holds written bytes until then).
async fn write_flushed(writer: &mut StreamWriter, bytes: &[u8]) -> std::io::Result<()> {
    writer.write_all(bytes).await?;
    writer.flush().await
}

/// Decodes a raw response frame (header and body).
pub fn decode_response<Resp: Decodable>(
    mut frame: Bytes,
    key: ApiKey,
    version: i16,
) -> anyhow::Result<Resp> {
    ResponseHeader::decode(&mut frame, key.response_header_version(version))?;
    let response = Resp::decode(&mut frame, version)?;
    if frame.has_remaining() && key != ApiKey::Fetch {
        bail!(
            "{} bytes left after the {key:?} response",
            frame.remaining()
        );
    }
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_dropped_connection_closes_its_stream() {
        let (ours, mut theirs) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(ours);
        let connection = Connection::over(Box::pin(reader), Box::pin(writer), 1, "test");
        drop(connection);
        let mut buffer = [0u8; 1];
        let read =
            tokio::time::timeout(std::time::Duration::from_secs(10), theirs.read(&mut buffer))
                .await
                .expect("the peer sees the end of the stream");
        assert_eq!(read.unwrap(), 0);
    }

    #[tokio::test]
    async fn a_retired_connection_counts_as_closed() {
        let (ours, _theirs) = tokio::io::duplex(1024);
        let (reader, writer) = tokio::io::split(ours);
        let connection = Connection::over(Box::pin(reader), Box::pin(writer), 1, "test");
        connection.retire_after(std::time::Duration::from_secs(3600));
        assert!(!connection.is_closed());
        let connection = {
            let (ours, _theirs) = tokio::io::duplex(1024);
            let (reader, writer) = tokio::io::split(ours);
            Connection::over(Box::pin(reader), Box::pin(writer), 1, "test")
        };
        connection.retire_after(std::time::Duration::ZERO);
        assert!(connection.is_closed());
    }
}
