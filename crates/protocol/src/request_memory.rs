//! The memory budget for request bodies being read, shared by every connection of a
//! listener (queued.max.request.bytes), and the one way a body is read against it.
//!
//! Why it reserves as bytes arrive instead of reserving the announced size first: a
//! reservation of the announced size made before the body is read lets a peer that sends
//! six 100 MiB size prefixes and then stalls hold the whole pool, and a waiting
//! reservation (the pool is first come, first served) then blocks every later one, so the
//! whole broker stops answering. Here a body grows by doubling, and each growth is
//! reserved before it is allocated, so a peer holds at most twice what it really sent;
//! the first `unpooled_bytes` of every request come from the connection's own allowance,
//! so small requests (ApiVersions, Metadata, heartbeats, commits) never wait for the pool
//! at all; and the whole body, waits for the pool included, must arrive before a
//! deadline, after which the connection is closed and its reservation returned.
//!
//! Thread-safe: one `RequestMemory` is shared by all connections of a listener.

use std::sync::Arc;

use bytes::{BufMut, Bytes};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

use crate::frame::FrameError;

/// Pool permits are KiB: a u32 count of them covers 4 TiB.
const PERMIT_BYTES: usize = 1024;

/// Request bytes each connection may hold outside the pool: a request up to this size
/// never waits for the pool. Worst case, every connection of a full listener holds this
/// much at once (10,000 connections: 312 MiB), the same order as their socket buffers.
pub const UNPOOLED_BYTES_PER_REQUEST: usize = 32 * 1024;

#[derive(Debug)]
pub struct RequestMemory {
    /// `None`: no budget (Kafka's default, queued.max.request.bytes=-1).
    pool: Option<Arc<Semaphore>>,
    /// The pool's size in permits (KiB).
    pool_permits: usize,
    unpooled_bytes: usize,
}

/// Pool memory a request holds while it is read and handled; returned when dropped.
#[derive(Debug, Default)]
pub struct BodyReservation {
    permits: Option<OwnedSemaphorePermit>,
}

impl BodyReservation {
    /// Bytes reserved from the pool (the unpooled allowance not counted).
    pub fn pooled_bytes(&self) -> usize {
        self.permits
            .as_ref()
            .map_or(0, |permits| permits.num_permits() * PERMIT_BYTES)
    }

    fn add(&mut self, permits: OwnedSemaphorePermit) {
        match &mut self.permits {
            Some(held) => held.merge(permits),
            None => self.permits = Some(permits),
        }
    }
}

impl RequestMemory {
    /// A budget of `pool_bytes` (`None`: unbounded) with `unpooled_bytes` of each request
    /// outside it.
    pub fn new(pool_bytes: Option<usize>, unpooled_bytes: usize) -> RequestMemory {
        let pool_permits = pool_bytes.map_or(usize::MAX, |bytes| (bytes / PERMIT_BYTES).max(1));
        RequestMemory {
            pool: pool_bytes.map(|_| Arc::new(Semaphore::new(pool_permits))),
            pool_permits,
            unpooled_bytes,
        }
    }

    /// Pool bytes not reserved right now (`usize::MAX` when unbounded).
    pub fn available_bytes(&self) -> usize {
        match &self.pool {
            Some(pool) => pool.available_permits() * PERMIT_BYTES,
            None => usize::MAX,
        }
    }

    /// Pool bytes reserved by request bodies right now (0 when unbounded: nothing is
    /// counted then).
    pub fn used_bytes(&self) -> usize {
        match &self.pool {
            Some(pool) => (self.pool_permits - pool.available_permits()) * PERMIT_BYTES,
            None => 0,
        }
    }

    /// Reads a body of `size` bytes (already checked against the frame cap), reserving
    /// pool memory as it grows; fails with [`FrameError::TimedOut`] if the whole body,
    /// waits for the pool included, has not arrived by `deadline`.
    pub async fn read_body<R: AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        size: usize,
        deadline: Instant,
    ) -> Result<(Bytes, BodyReservation), FrameError> {
        match tokio::time::timeout_at(deadline, self.read_body_growing(reader, size)).await {
            Ok(read) => read,
            Err(_) => Err(FrameError::TimedOut { size_bytes: size }),
        }
    }

    async fn read_body_growing<R: AsyncRead + Unpin>(
        &self,
        reader: &mut R,
        size: usize,
    ) -> Result<(Bytes, BodyReservation), FrameError> {
        if self.pooled_permits(size) > self.pool_permits {
            // It could never be reserved; the listener's config check makes this rare.
            return Err(FrameError::TooLarge {
                size_bytes: size as i64,
                limit_bytes: self.pool_permits.saturating_mul(PERMIT_BYTES),
            });
        }
        let mut reservation = BodyReservation::default();
        let mut target = size.min(self.unpooled_bytes.max(1));
        let mut body: Vec<u8> = Vec::with_capacity(target);
        loop {
            while body.len() < target {
                let room = target - body.len();
                if reader.read_buf(&mut (&mut body).limit(room)).await? == 0 {
                    return Err(FrameError::Truncated);
                }
            }
            if body.len() == size {
                break;
            }
            let grown = (target * 2).min(size);
            self.reserve(&mut reservation, target, grown).await?;
            body.reserve_exact(grown - body.len());
            target = grown;
        }
        assert_eq!(body.len(), size);
        Ok((Bytes::from(body), reservation))
    }

    /// Permits a body of `bytes` holds from the pool.
    fn pooled_permits(&self, bytes: usize) -> usize {
        bytes
            .saturating_sub(self.unpooled_bytes)
            .div_ceil(PERMIT_BYTES)
    }

    /// Reserves the pool's share of growing a body from `from` to `to` bytes.
    async fn reserve(
        &self,
        reservation: &mut BodyReservation,
        from: usize,
        to: usize,
    ) -> Result<(), FrameError> {
        let Some(pool) = &self.pool else {
            return Ok(());
        };
        let permits = self.pooled_permits(to) - self.pooled_permits(from);
        if permits == 0 {
            return Ok(());
        }
        // Cannot overflow: the whole body's share was checked against the pool's size.
        let permits = u32::try_from(permits).expect("checked against the pool size");
        let acquired = pool
            .clone()
            .acquire_many_owned(permits)
            .await
            .map_err(|_| std::io::Error::other("request memory pool closed"))?;
        reservation.add(acquired);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;
    use tokio::io::AsyncWriteExt;

    const KIB: usize = 1024;

    fn memory(pool_kib: usize) -> RequestMemory {
        RequestMemory::new(Some(pool_kib * KIB), 4 * KIB)
    }

    fn later(ms: u64) -> Instant {
        Instant::now() + Duration::from_millis(ms)
    }

    #[tokio::test]
    async fn a_small_body_takes_nothing_from_the_pool() {
        let memory = memory(8);
        let mut input: &[u8] = &[7u8; 4 * KIB];
        let (body, reservation) = memory
            .read_body(&mut input, 4 * KIB, later(1_000))
            .await
            .unwrap();
        assert_eq!(body.len(), 4 * KIB);
        assert_eq!(reservation.pooled_bytes(), 0);
        assert_eq!(memory.available_bytes(), 8 * KIB);
    }

    #[tokio::test]
    async fn a_large_body_reserves_what_it_holds_and_returns_it() {
        let memory = memory(64);
        let data: Vec<u8> = (0..40 * KIB).map(|i| i as u8).collect();
        let mut input: &[u8] = &data;
        let (body, reservation) = memory
            .read_body(&mut input, data.len(), later(1_000))
            .await
            .unwrap();
        assert_eq!(&body[..], &data[..]);
        assert_eq!(reservation.pooled_bytes(), 36 * KIB);
        assert_eq!(memory.available_bytes(), 28 * KIB);
        drop(reservation);
        assert_eq!(memory.available_bytes(), 64 * KIB);
    }

    /// The denial of service this module exists to prevent: peers that announce huge
    /// bodies and stall hold (almost) nothing, so another request still gets through.
    #[tokio::test]
    async fn stalled_senders_hold_only_what_they_sent() {
        let memory = Arc::new(memory(128));
        let mut stalled = Vec::new();
        for _ in 0..6 {
            let (mut client, mut server) = tokio::io::duplex(1024 * KIB);
            client.write_all(&[1u8; 8 * KIB]).await.unwrap();
            let memory = memory.clone();
            stalled.push((
                client,
                tokio::spawn(async move {
                    memory
                        .read_body(&mut server, 60 * KIB, later(60_000))
                        .await
                        .map(|_| ())
                }),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        // Each sent 8 KiB and holds 16: 4 unpooled and 12 pooled (grown to 16 KiB,
        // waiting for data that never comes).
        assert_eq!(memory.available_bytes(), (128 - 6 * 12) * KIB);
        let mut input: &[u8] = &[2u8; 30 * KIB];
        let (body, _) = memory
            .read_body(&mut input, 30 * KIB, later(1_000))
            .await
            .expect("a fresh request is not blocked by stalled ones");
        assert_eq!(body.len(), 30 * KIB);
        for (_client, task) in &stalled {
            assert!(!task.is_finished());
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_body_that_does_not_arrive_in_time_fails_and_frees_its_memory() {
        let memory = memory(64);
        let (mut client, mut server) = tokio::io::duplex(64 * KIB);
        client.write_all(&[1u8; 20 * KIB]).await.unwrap();
        let read = memory.read_body(&mut server, 50 * KIB, later(30_000)).await;
        assert!(matches!(read, Err(FrameError::TimedOut { size_bytes }) if size_bytes == 50 * KIB));
        assert_eq!(memory.available_bytes(), 64 * KIB);
    }

    #[tokio::test(start_paused = true)]
    async fn waiting_for_a_full_pool_is_bounded_by_the_deadline() {
        let memory = memory(16);
        let mut first: &[u8] = &[1u8; 20 * KIB];
        let (_, held) = memory
            .read_body(&mut first, 20 * KIB, later(1_000))
            .await
            .unwrap();
        assert_eq!(memory.available_bytes(), 0);
        let mut second: &[u8] = &[1u8; 20 * KIB];
        let read = memory.read_body(&mut second, 20 * KIB, later(1_000)).await;
        assert!(matches!(read, Err(FrameError::TimedOut { .. })));
        drop(held);
        let mut third: &[u8] = &[1u8; 20 * KIB];
        assert!(memory
            .read_body(&mut third, 20 * KIB, later(1_000))
            .await
            .is_ok());
    }

    #[tokio::test]
    async fn a_body_larger_than_the_whole_pool_is_refused_not_waited_for() {
        let memory = memory(16);
        let mut input: &[u8] = &[1u8; 40 * KIB];
        let read = memory.read_body(&mut input, 40 * KIB, later(1_000)).await;
        assert!(matches!(read, Err(FrameError::TooLarge { .. })));
    }

    #[tokio::test]
    async fn without_a_budget_bodies_are_read_whole() {
        let memory = RequestMemory::new(None, 4 * KIB);
        let mut input: &[u8] = &[3u8; 100 * KIB];
        let (body, reservation) = memory
            .read_body(&mut input, 100 * KIB, later(1_000))
            .await
            .unwrap();
        assert_eq!(body.len(), 100 * KIB);
        assert_eq!(reservation.pooled_bytes(), 0);
    }

    #[tokio::test]
    async fn a_truncated_body_is_an_error() {
        let memory = memory(64);
        let mut input: &[u8] = &[3u8; 10 * KIB];
        let read = memory.read_body(&mut input, 20 * KIB, later(1_000)).await;
        assert!(matches!(read, Err(FrameError::Truncated)));
        assert_eq!(memory.available_bytes(), 64 * KIB);
    }
}
