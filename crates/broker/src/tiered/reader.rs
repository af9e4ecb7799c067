//! Reads of remote segments for Fetch: fixed-size chunks of a segment's log (and its
//! offset index, whole) kept in a bounded LRU cache. A read is served from the cache
//! alone, without waiting (it runs on a request worker, under no lock); what it lacks is
//! returned as chunks to get, which Fetch hands to `TieredStorage::get_chunks` and waits
//! for as it waits for new data. Each read also asks for the `READ_AHEAD_CHUNKS` chunks
//! after the last one it touched (read-ahead; at a copy's end, the next copy's index and
//! first chunk), so a consumer catching up finds them in the cache, got in parallel: a
//! store's GET has a latency that one request at a time would pay per chunk.
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

use super::remote_segments::{RemoteSegment, RemoteSegments, LOG, OFFSET_INDEX, TIME_INDEX};

/// A chunk of a remote segment's log: one ranged GET (S3's guidance for throughput is
/// 8 to 16 MiB ranges).
pub const CHUNK_BYTES: u64 = 8 * 1024 * 1024;
/// Chunks asked for ahead of a read.
pub const READ_AHEAD_CHUNKS: u64 = 4;
/// The cache's bound.
pub const CACHE_BYTES: u64 = 128 * 1024 * 1024;
/// GETs in flight at once, broker-wide.
pub const GETS_MAX: usize = 8;
/// A record batch's header: base offset (8), length (4), ..., last offset delta at 23.
const BATCH_HEADER_BYTES: u64 = 61;
/// The chunk number that stands for a segment's offset index.
const INDEX_CHUNK: u32 = u32::MAX;
/// The chunk number that stands for a segment's time index.
const TIME_INDEX_CHUNK: u32 = u32::MAX - 1;

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

/// What a lookup by timestamp in the remote copies found.
#[derive(Debug, PartialEq, Eq)]
pub enum TimestampRead {
    /// The first record at or after the timestamp: (its timestamp, its offset).
    Found(i64, i64),
    /// The cache lacks what the lookup needs: get it, then look again.
    Missing,
    /// No copy below the local log start holds such a record: the local log answers.
    NotRemote,
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
                Some((records, _)) if records.is_empty() && limit > 0 => {
                    offset = segment.end_offset + 1;
                }
                Some((records, touched)) => {
                    // Near the copy's end: the next copy's index and first chunk too.
                    let last_chunk = segment.size_bytes.saturating_sub(1) / CHUNK_BYTES;
                    if touched + READ_AHEAD_CHUNKS >= last_chunk {
                        if let Some(next) = segments
                            .find(segment.end_offset + 1)
                            .filter(|next| next.base_offset > segment.base_offset)
                        {
                            self.index_position(dir, &next, next.base_offset, wanted);
                            self.want(&next.key(dir, LOG), &next, 0, wanted);
                        }
                    }
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

    /// One copy's part of a read, and the last chunk it touched; None when a chunk it
    /// needs is not cached.
    fn read_segment(
        &self,
        dir: &str,
        segment: &RemoteSegment,
        offset: i64,
        limit: u64,
        first: bool,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<(Bytes, u64)> {
        let log = segment.key(dir, LOG);
        let mut position = self.index_position(dir, segment, offset, wanted)?;
        // The batches returned are contiguous: [first, end) of the copy's log, taken at
        // the end as one slice of a chunk (no copy) unless it spans two.
        let mut first_batch: Option<u64> = None;
        let mut end = position;
        let mut touched = position / CHUNK_BYTES;
        while position + BATCH_HEADER_BYTES <= segment.size_bytes {
            let header_range = position..position + BATCH_HEADER_BYTES;
            let Some(header) = self.bytes(&log, segment, header_range, wanted) else {
                // What is cached already goes out; the rest is asked for.
                first_batch?;
                break;
            };
            let batch = BatchHead::parse(&header);
            let batch_bytes = batch.bytes;
            if batch.last_offset < offset {
                position += batch_bytes;
                end = position;
                continue;
            }
            let collected = end - first_batch.unwrap_or(position);
            let fits = collected + batch_bytes <= limit || (first_batch.is_none() && first);
            if !fits || position + batch_bytes > segment.size_bytes {
                break;
            }
            if !self.cached(&log, segment, position..position + batch_bytes, wanted) {
                first_batch?;
                break;
            }
            first_batch.get_or_insert(position);
            position += batch_bytes;
            end = position;
            touched = (position - 1) / CHUNK_BYTES;
        }
        for ahead in touched + 1..=touched + READ_AHEAD_CHUNKS {
            self.want(&log, segment, ahead, wanted);
        }
        let records = match first_batch {
            Some(first_batch) => self.bytes(&log, segment, first_batch..end, wanted)?,
            None => Bytes::new(),
        };
        Some((records, touched))
    }

    /// Whether every chunk of `range` is cached; the missing ones go to `wanted`.
    fn cached(
        &self,
        log: &str,
        segment: &RemoteSegment,
        range: Range<u64>,
        wanted: &mut Vec<ChunkWanted>,
    ) -> bool {
        let mut all = true;
        for chunk in range.start / CHUNK_BYTES..=(range.end - 1) / CHUNK_BYTES {
            let key = ChunkKey {
                segment: segment.id,
                chunk: chunk as u32,
            };
            if !self.contains(&key) {
                wanted.push(chunk_wanted(log, segment, key));
                all = false;
            }
        }
        all
    }

    /// Asks for chunk `chunk` of a copy's log unless it is cached or past its end.
    fn want(&self, log: &str, segment: &RemoteSegment, chunk: u64, wanted: &mut Vec<ChunkWanted>) {
        let key = ChunkKey {
            segment: segment.id,
            chunk: chunk as u32,
        };
        if chunk * CHUNK_BYTES < segment.size_bytes && !self.contains(&key) {
            wanted.push(chunk_wanted(log, segment, key));
        }
    }

    /// ListOffsets by timestamp below the local log start: the first record at or after
    /// `timestamp` (and at or after `log_start`) in the copies below `local_start`, found
    /// as the local log finds it: the copy's time index, its offset index, then the
    /// batches and the records of the first batch that reaches the timestamp.
    #[allow(clippy::too_many_arguments)]
    pub fn offset_for_timestamp(
        &self,
        dir: &str,
        segments: &RemoteSegments,
        timestamp: i64,
        log_start: i64,
        local_start: i64,
        limits: strand_records::WalkLimits,
        wanted: &mut Vec<ChunkWanted>,
    ) -> TimestampRead {
        let mut after = log_start;
        for segment in segments.iter() {
            if segment.base_offset >= local_start || after >= local_start {
                break;
            }
            if segment.end_offset < after || segment.max_timestamp < timestamp {
                continue;
            }
            match self.timestamp_in_segment(dir, segment, timestamp, after, limits, wanted) {
                Some(Some((found_timestamp, offset))) => {
                    return TimestampRead::Found(found_timestamp, offset)
                }
                Some(None) => after = after.max(segment.end_offset + 1),
                None => return TimestampRead::Missing,
            }
        }
        TimestampRead::NotRemote
    }

    /// One copy's part of `offset_for_timestamp`: Some(found or not), None when a chunk
    /// it needs is not cached.
    fn timestamp_in_segment(
        &self,
        dir: &str,
        segment: &RemoteSegment,
        timestamp: i64,
        after: i64,
        limits: strand_records::WalkLimits,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<Option<(i64, i64)>> {
        // The time index: every batch up to an entry's offset has a max timestamp no
        // greater than the entry's, so the search starts after the last entry below.
        let mut from = segment.base_offset.max(after);
        if segment.time_index_bytes > 0 {
            let index = self.whole_object(dir, segment, TIME_INDEX, wanted)?;
            let below = index
                .chunks_exact(12)
                .map(|e| {
                    let entry_timestamp = i64::from_be_bytes(e[..8].try_into().expect("8 bytes"));
                    let relative = u32::from_be_bytes(e[8..].try_into().expect("4 bytes"));
                    (entry_timestamp, i64::from(relative))
                })
                .take_while(|(entry_timestamp, _)| *entry_timestamp < timestamp)
                .last();
            if let Some((_, relative)) = below {
                from = from.max(segment.base_offset + relative + 1);
            }
        }
        let log = segment.key(dir, LOG);
        let mut position = self.index_position(dir, segment, from, wanted)?;
        while position + BATCH_HEADER_BYTES <= segment.size_bytes {
            let header_range = position..position + BATCH_HEADER_BYTES;
            let header = self.bytes(&log, segment, header_range, wanted)?;
            let head = BatchHead::parse(&header);
            let batch_bytes = head.bytes;
            // A length past the copy's end (damage): nothing further to search.
            if position + batch_bytes > segment.size_bytes {
                break;
            }
            if head.last_offset >= from && head.max_timestamp >= timestamp {
                let batch = self.bytes(&log, segment, position..position + batch_bytes, wanted)?;
                let found = strand_log::first_record_in_batch(&batch, limits, |t, o| {
                    t >= timestamp && o >= after
                });
                // A batch that does not parse is damage: the lookup goes on past it.
                if let Ok(Some(found)) = found {
                    return Some(Some((found.timestamp, found.offset)));
                }
            }
            position += batch_bytes;
        }
        Some(None)
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
        let index = self.whole_object(dir, segment, OFFSET_INDEX, wanted)?;
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

    /// One of a copy's indexes (`suffix`), cached whole; None (and asked for) when not.
    fn whole_object(
        &self,
        dir: &str,
        segment: &RemoteSegment,
        suffix: &str,
        wanted: &mut Vec<ChunkWanted>,
    ) -> Option<Bytes> {
        let (chunk, bytes) = if suffix == TIME_INDEX {
            (TIME_INDEX_CHUNK, segment.time_index_bytes)
        } else {
            (INDEX_CHUNK, segment.offset_index_bytes)
        };
        let key = ChunkKey {
            segment: segment.id,
            chunk,
        };
        let found = self.get(&key);
        if found.is_none() {
            wanted.push(ChunkWanted {
                key,
                object: segment.key(dir, suffix),
                range: 0..bytes,
            });
        }
        found
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

/// What a read needs of a batch's header (Kafka's record batch v2 layout).
struct BatchHead {
    last_offset: i64,
    max_timestamp: i64,
    /// The whole batch's bytes, header included.
    bytes: u64,
}

impl BatchHead {
    fn parse(header: &[u8]) -> BatchHead {
        let i32_at =
            |at: usize| i32::from_be_bytes(header[at..at + 4].try_into().expect("4 bytes"));
        let i64_at =
            |at: usize| i64::from_be_bytes(header[at..at + 8].try_into().expect("8 bytes"));
        BatchHead {
            last_offset: i64_at(0) + i64::from(i32_at(23)),
            max_timestamp: i64_at(35),
            bytes: 12 + i32_at(8).max(0) as u64,
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use strand_records::{BatchBuilder, BatchView, Record};

    /// `count` batches of one record of `value_bytes` each, offsets from 0.
    fn log_bytes(count: i64, value_bytes: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for offset in 0..count {
            let mut builder = BatchBuilder::new(offset, 1_000);
            builder.push(Record::new(
                None,
                Some(vec![offset as u8; value_bytes]),
                1_000,
            ));
            out.extend(builder.build());
        }
        out
    }

    fn copy_of(log: &[u8], end_offset: i64) -> RemoteSegment {
        RemoteSegment {
            id: Uuid::new_v4(),
            base_offset: 0,
            end_offset,
            max_timestamp: 1_000,
            size_bytes: log.len() as u64,
            offset_index_bytes: 0,
            time_index_bytes: 0,
            producer_snapshot: false,
            leader_epochs: vec![(0, 0)],
            aborted: vec![(7, 3, 80), (8, 1, 2)],
            copied_by: 1,
            copied_in_epoch: 0,
            copied_at_ms: 0,
        }
    }

    /// Reads until the cache has what the read needs, getting what it asks for from `log`;
    /// returns the records and every chunk asked for.
    fn read_through(
        cache: &ChunkCache,
        segments: &RemoteSegments,
        log: &[u8],
        offset: i64,
        limit: u64,
    ) -> (Bytes, Vec<(i64, i64)>, Vec<u32>) {
        let mut asked = Vec::new();
        for _ in 0..10 {
            let mut wanted = Vec::new();
            let read = cache.read("t-x/0", segments, offset, limit, true, &mut wanted);
            asked.extend(wanted.iter().map(|w| w.key.chunk));
            for chunk in wanted {
                let range = chunk.range.start as usize..chunk.range.end as usize;
                cache.insert(chunk.key, Bytes::copy_from_slice(&log[range]));
            }
            if let RemoteRead::Records { records, aborted } = read {
                return (records, aborted, asked);
            }
        }
        panic!("the read never found what it needed");
    }

    fn offsets(mut records: Bytes) -> Vec<i64> {
        let mut out = Vec::new();
        while let Ok(view) = BatchView::parse(&records) {
            out.push(view.header.base_offset);
            let length = view.bytes.len();
            records = records.slice(length..);
        }
        out
    }

    #[test]
    fn reads_return_whole_batches_from_the_offset_across_chunk_boundaries() {
        // 100 batches of ~100 KB: 10 MB, so chunk 0 ends inside batch 83 or so.
        let log = log_bytes(100, 100 * 1024);
        let mut segments = RemoteSegments::default();
        segments.insert(copy_of(&log, 99));
        let cache = ChunkCache::default();
        let (records, aborted, asked) = read_through(&cache, &segments, &log, 78, 1024 * 1024);
        let got = offsets(records);
        assert_eq!(got.first(), Some(&78), "from the fetch offset");
        assert!(
            !got.is_empty() && got.len() < 10,
            "what was cached: up to chunk 0's end"
        );
        // Everything cached now: as many whole batches as fit in 1 MiB, across the chunks.
        let (records, aborted_again, _) = read_through(&cache, &segments, &log, 78, 1024 * 1024);
        assert_eq!(aborted, aborted_again);
        let got = offsets(records.clone());
        assert_eq!(got, (78..88).collect::<Vec<_>>());
        assert!(records.len() <= 1024 * 1024);
        assert!(
            asked.contains(&0) && asked.contains(&1),
            "both chunks of the span"
        );
        assert_eq!(
            aborted,
            vec![(7, 3)],
            "aborted transactions ending at or after the offset"
        );
        // A batch bigger than the limit comes whole when it is the first.
        let (records, _, _) = read_through(&cache, &segments, &log, 90, 10);
        assert_eq!(offsets(records), vec![90]);
    }

    #[test]
    fn a_read_asks_for_what_it_lacks_and_reads_ahead() {
        let log = log_bytes(100, 100 * 1024);
        let mut segments = RemoteSegments::default();
        segments.insert(copy_of(&log, 99));
        let cache = ChunkCache::default();
        let mut wanted = Vec::new();
        let read = cache.read("t-x/0", &segments, 0, 1024, true, &mut wanted);
        assert!(matches!(read, RemoteRead::Missing));
        assert_eq!(wanted.len(), 1, "the first chunk only");
        assert_eq!(wanted[0].range, 0..CHUNK_BYTES);
        assert_eq!(
            wanted[0].object,
            format!("t-x/0/{:020}-{}.log", 0, segments.iter().next().unwrap().id)
        );
        cache.insert(
            wanted[0].key,
            Bytes::copy_from_slice(&log[..CHUNK_BYTES as usize]),
        );
        let mut wanted = Vec::new();
        let read = cache.read("t-x/0", &segments, 0, 1024, true, &mut wanted);
        assert!(matches!(read, RemoteRead::Records { .. }));
        let ahead: Vec<u32> = wanted.iter().map(|w| w.key.chunk).collect();
        assert_eq!(
            ahead,
            vec![1],
            "read-ahead stops at the copy's end (10 MB: two chunks)"
        );
        assert_eq!(wanted[0].range, CHUNK_BYTES..log.len() as u64);
        let mut none = Vec::new();
        let beyond = cache.read("t-x/0", &segments, 100, 1024, true, &mut none);
        assert!(matches!(beyond, RemoteRead::OutOfRange));
    }

    #[test]
    fn the_cache_stays_within_its_bound() {
        let cache = ChunkCache::default();
        let chunk = Bytes::from(vec![0u8; CHUNK_BYTES as usize]);
        let segment = Uuid::new_v4();
        for n in 0..(CACHE_BYTES / CHUNK_BYTES) as u32 + 5 {
            cache.insert(ChunkKey { segment, chunk: n }, chunk.clone());
            assert!(cache.cached_bytes() <= CACHE_BYTES);
        }
        assert!(
            !cache.contains(&ChunkKey { segment, chunk: 0 }),
            "the oldest went"
        );
        assert!(cache.claim(ChunkKey { segment, chunk: 0 }));
        assert!(
            !cache.claim(ChunkKey { segment, chunk: 0 }),
            "one GET per chunk at a time"
        );
        cache.release(&ChunkKey { segment, chunk: 0 });
        assert!(cache.claim(ChunkKey { segment, chunk: 0 }));
    }
}
