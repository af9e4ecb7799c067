//! The smallest Kafka client Strand needs itself (the load generator, and followers
//! fetching from leaders): one TCP connection with pipelined requests (responses come back
//! in order on a connection, so a FIFO of waiters matches them), bounded by
//! `in_flight_max`. Not a general client: no retries, no metadata refresh; callers handle
//! errors and reconnect.

use std::collections::VecDeque;
use std::sync::Arc;

use anyhow::{bail, Context};
use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{ApiKey, RequestHeader, ResponseHeader};
use kafka_protocol::protocol::{Decodable, Encodable, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::OwnedWriteHalf;
use tokio::net::TcpStream;
use tokio::sync::{oneshot, Mutex, Semaphore};

/// Largest response frame accepted (a fetch of 50 MiB plus framing).
const RESPONSE_MAX_BYTES: usize = 128 * 1024 * 1024;

type Waiter = (i16, oneshot::Sender<anyhow::Result<Bytes>>);

pub struct Connection {
    client_id: &'static str,
    writer: Mutex<(OwnedWriteHalf, i32)>,
    waiters: Arc<std::sync::Mutex<Waiters>>,
    in_flight: Arc<Semaphore>,
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
        let (mut reader, writer) = stream.into_split();
        let waiters: Arc<std::sync::Mutex<Waiters>> = Arc::default();
        let pending = waiters.clone();
        tokio::spawn(async move {
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
        Ok(Connection {
            client_id,
            writer: Mutex::new((writer, 0)),
            waiters,
            in_flight: Arc::new(Semaphore::new(in_flight_max)),
        })
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
        writer.0.write_all(&payload).await?;
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
        writer.0.write_all(&payload).await?;
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

    /// Whether the peer closed the connection (or reading from it failed): a closed
    /// connection answers nothing more.
    pub fn is_closed(&self) -> bool {
        self.waiters
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
