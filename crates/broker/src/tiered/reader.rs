//! Reads of remote segments for Fetch: fixed-size chunks of a segment's log (and its
//! offset index, whole) kept in a bounded LRU cache. A read is served from the cache
//! alone, without waiting (it runs on a request worker, under no lock); what it lacks is
//! returned as chunks to get, which Fetch hands to `TieredStorage::get_chunks` and waits
//! for as it waits for new data. Each read also asks for the chunk after the last one it
//! touched (read-ahead), so a consumer catching up finds the next chunk in the cache.
//!
//! Bounds: the cache's bytes (`CACHE_BYTES`), GETs in flight broker-wide (`GETS_MAX`, each
//! at most a chunk), one GET per chunk at a time; a response holds at most the fetch's
//! own byte limit (a first partition's first batch whole, as Kafka).

use std::collections::HashSet;
use std::ops::Range;
use std::sync::Mutex;

use bytes::{Bytes, BytesMut};
use lru::LruCache;
use uuid::Uuid;

use super::remote_segments::{RemoteSegment, RemoteSegments, LOG, OFFSET_INDEX};

/// A chunk of a remote segment's log.
pub const CHUNK_BYTES: u64 = 4 * 1024 * 1024;
/// The cache's bound.
pub const CACHE_BYTES: u64 = 128 * 1024 * 1024;
/// GETs in flight at once, broker-wide.
pub const GETS_MAX: usize = 8;
/// A record batch's header: base offset (8), length (4), ..., last offset delta at 23.
const BATCH_HEADER_BYTES: u64 = 61;
/// The chunk number that stands for a segment's offset index.
const INDEX_CHUNK: u32 = u32::MAX;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ChunkKey {
    pub segment: Uuid,
    pub chunk: u32,
}

/// A chunk to get: its cache key, the object and the byte range in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkWanted {
    pub key: ChunkKey,
    pub object: String,
    pub range: Range<u64>,
}

/// What a remote read found.
#[derive(Debug)]
pub enum RemoteRead {
    /// Whole batches from the fetch offset on (empty: the limit allowed none), and the
    /// aborted transactions (producer id, first offset) a read_committed reader is told.
    Records {
        records: Bytes,
        aborted: Vec<(i64, i64)>,
    },
    /// The cache lacks what the read needs: get these, then read again.
    Missing,
    /// No remote copy holds the offset.
    OutOfRange,
}

#[derive(Debug)]
struct Cache {
    chunks: LruCache<ChunkKey, Bytes>,
    bytes: u64,
}

#[derive(Debug)]
pub struct ChunkCache {
    cache: Mutex<Cache>,
    /// Chunks being got.
    in_flight: Mutex<HashSet<ChunkKey>>,
}

impl Default for ChunkCache {
    fn default() -> Self {
        ChunkCache {
            cache: Mutex::new(Cache {
                chunks: LruCache::unbounded(),
                bytes: 0,
            }),
            in_flight: Mutex::new(HashSet::new()),
        }
    }
}

impl ChunkCache {
    fn get(&self, key: &ChunkKey) -> Option<Bytes> {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .chunks
            .get(key)
            .cloned()
    }

    pub fn contains(&self, key: &ChunkKey) -> bool {
        self.cache
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .chunks
            .contains(key)
    }

    /// Adds a chunk, evicting the least recently used past `CACHE_BYTES`.
    pub fn insert(&self, key: ChunkKey, bytes: Bytes) {
        let mut cache = self.cache.lock().unwrap_or_else(|p| p.into_inner());
        cache.bytes += bytes.len() as u64;
        if let Some(old) = cache.chunks.put(key, bytes) {
            cache.bytes -= old.len() as u64;
        }
        while cache.bytes > CACHE_BYTES {
            match cache.chunks.pop_lru() {
                Some((_, evicted)) => cache.bytes -= evicted.len() as u64,
                None => break,
            }
        }
    }

    pub fn cached_bytes(&self) -> u64 {
        self.cache.lock().unwrap_or_else(|p| p.into_inner()).bytes
    }

    /// Claims a chunk to get: false when it is cached or already being got.
    pub fn claim(&self, key: ChunkKey) -> bool {
        !self.contains(&key)
            && self
                .in_flight
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key)
    }

    pub fn release(&self, key: &ChunkKey) {
        self.in_flight
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(key);
    }

    /// Reads from `offset` on, at most `limit` bytes of whole batches (at least one when
    /// `first`), from the copy holding it; `wanted` collects the chunks to get (missing,
    /// and the read-ahead).
    pub fn read(
        &self,
        dir: &str,
        segments: &RemoteSegments,
        offset: i64,
        limit: u64,
        first: bool,
        wanted: &mut Vec<ChunkWanted>,
    ) -> RemoteRead {
        let mut offset = offset;
        // A copy whose batches all lie below the offset (it ends in a transaction marker
        // or a gap): go on in the next one.
        for _ in 0..segments.len() {
            let Some(segment) = segments.find(offset) else {
                return RemoteRead::OutOfRange;
            };
            match self.read_segment(dir, &segment, offset, limit, first, wanted) {
                Some(records) if records.is_empty() && limit > 0 => {
                    offset = segment.end_offset + 1;
                }
                Some(records) => {
                    // Those whose marker is at or above the fetch offset: the records
                    // returned lie within the copy, and a client ignores the others.
                    let aborted = segment
                        .aborted
                        .iter()
                        .filter(|(_, _, marker)| *marker >= offset)
                        .map(|(producer, first, _)| (*producer, *first))
                        .collect();
                    return RemoteRead::Records { records, aborted };
                }
                None => return RemoteRead::Missing,
            }
        }
        RemoteRead::OutOfRange
    }

    /// One copy's part of a read; None when a chunk it needs is not cached.
    fn read_segment(
        &self,
        dir: &str,
        segment: &RemoteSegment,
        offset: i64,
        limit: u64,
        first: bool,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<Bytes> {
        let log = segment.key(dir, LOG);
        let mut position = self.index_position(dir, segment, offset, wanted)?;
        let mut out = BytesMut::new();
        let mut touched = 0;
        while position + BATCH_HEADER_BYTES <= segment.size_bytes {
            let header = self.bytes(
                &log,
                segment,
                position..position + BATCH_HEADER_BYTES,
                wanted,
            )?;
            touched = position / CHUNK_BYTES;
            let length = i32::from_be_bytes(header[8..12].try_into().expect("4 bytes"));
            let base = i64::from_be_bytes(header[..8].try_into().expect("8 bytes"));
            let last_delta = i32::from_be_bytes(header[23..27].try_into().expect("4 bytes"));
            let batch_bytes = 12 + length.max(0) as u64;
            if base + i64::from(last_delta) < offset {
                position += batch_bytes;
                continue;
            }
            let fits = out.len() as u64 + batch_bytes <= limit || (out.is_empty() && first);
            if !fits || position + batch_bytes > segment.size_bytes {
                break;
            }
            let batch = self.bytes(&log, segment, position..position + batch_bytes, wanted)?;
            out.extend_from_slice(&batch);
            position += batch_bytes;
            touched = (position - 1) / CHUNK_BYTES;
        }
        // Read-ahead: the chunk after the last one read.
        let next = touched + 1;
        if next * CHUNK_BYTES < segment.size_bytes {
            let key = ChunkKey {
                segment: segment.id,
                chunk: next as u32,
            };
            if !self.contains(&key) {
                wanted.push(chunk_wanted(&log, segment, key));
            }
        }
        Some(out.freeze())
    }

    /// Where the last batch starting at or before `offset` is, by the copy's offset index.
    fn index_position(
        &self,
        dir: &str,
        segment: &RemoteSegment,
        offset: i64,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<u64> {
        if segment.offset_index_bytes == 0 {
            return Some(0);
        }
        let key = ChunkKey {
            segment: segment.id,
            chunk: INDEX_CHUNK,
        };
        let Some(index) = self.get(&key) else {
            wanted.push(ChunkWanted {
                key,
                object: segment.key(dir, OFFSET_INDEX),
                range: 0..segment.offset_index_bytes,
            });
            return None;
        };
        let relative = offset.saturating_sub(segment.base_offset);
        let entries = index.chunks_exact(8).map(|e| {
            (
                i64::from(u32::from_be_bytes(e[..4].try_into().expect("4 bytes"))),
                u64::from(u32::from_be_bytes(e[4..].try_into().expect("4 bytes"))),
            )
        });
        Some(
            entries
                .take_while(|(entry, _)| *entry <= relative)
                .last()
                .map_or(0, |(_, position)| position),
        )
    }

    /// `range` of the copy's log, from cached chunks; what is missing goes to `wanted`.
    fn bytes(
        &self,
        log: &str,
        segment: &RemoteSegment,
        range: Range<u64>,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<Bytes> {
        let (first, last) = (range.start / CHUNK_BYTES, (range.end - 1) / CHUNK_BYTES);
        let mut parts = Vec::new();
        for chunk in first..=last {
            let key = ChunkKey {
                segment: segment.id,
                chunk: chunk as u32,
            };
            match self.get(&key) {
                Some(bytes) => parts.push((chunk, bytes)),
                None => wanted.push(chunk_wanted(log, segment, key)),
            }
        }
        if parts.len() as u64 != last - first + 1 {
            return None;
        }
        let slice = |chunk: u64, bytes: &Bytes| {
            let start = (chunk * CHUNK_BYTES).max(range.start) - chunk * CHUNK_BYTES;
            let end = ((chunk + 1) * CHUNK_BYTES).min(range.end) - chunk * CHUNK_BYTES;
            bytes
                .get(start as usize..end as usize)
                .map(Bytes::copy_from_slice)
        };
        if let [(chunk, bytes)] = parts.as_slice() {
            let start = (range.start - chunk * CHUNK_BYTES) as usize;
            let end = (range.end - chunk * CHUNK_BYTES) as usize;
            return bytes.get(start..end).map(|s| bytes.slice_ref(s));
        }
        let mut joined = BytesMut::with_capacity((range.end - range.start) as usize);
        for (chunk, bytes) in &parts {
            joined.extend_from_slice(&slice(*chunk, bytes)?);
        }
        Some(joined.freeze())
    }
}

fn chunk_wanted(log: &str, segment: &RemoteSegment, key: ChunkKey) -> ChunkWanted {
    let start = u64::from(key.chunk) * CHUNK_BYTES;
    ChunkWanted {
        key,
        object: log.to_string(),
        range: start..(start + CHUNK_BYTES).min(segment.size_bytes),
    }
}
