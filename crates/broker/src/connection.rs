//! One client connection: read a frame (size checked, memory reserved from the broker's
//! pool before allocating), route it, write the response, repeat. One request at a time,
//! as Kafka does, so pipelined requests are answered in order. A malformed frame closes
//! only this connection.

use std::net::SocketAddr;
use std::sync::Arc;

use strand_protocol::{parse_request_header, read_frame_body, read_frame_size};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{watch, Semaphore};

use crate::broker::Broker;
use crate::router::{route, Outcome};

/// Memory pool permits are KiB: a u32 count covers 4 TiB.
const POOL_PERMIT_BYTES: usize = 1024;
const READ_BUFFER_BYTES: usize = 16 * 1024;

pub async fn serve_connection(
    broker: Arc<Broker>,
    stream: TcpStream,
    peer: SocketAddr,
    request_memory: Arc<Semaphore>,
    mut shutdown: watch::Receiver<bool>,
) {
    let _ = stream.set_nodelay(true);
    let (reader, mut writer) = stream.into_split();
    let mut reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    let limit = broker.config.socket_request_max_bytes;
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
        let outcome = route(&broker, parse_request_header(body.freeze())).await;
        drop(reserved);
        match outcome {
            Outcome::Respond(bytes) => {
                if let Err(error) = writer.write_all(&bytes).await {
                    tracing::debug!(%peer, %error, "write failed");
                    break;
                }
            }
            Outcome::NoResponse => {}
            Outcome::Close(reason) => {
                tracing::warn!(%peer, %reason, "closing connection");
                break;
            }
        }
        if *shutdown.borrow() {
            break;
        }
    }
}
