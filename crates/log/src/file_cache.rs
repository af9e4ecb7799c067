//! A bounded, least-recently-used cache of open segment files, shared by every log of a
//! manager. A partition nobody touches holds no file descriptor: its segments are opened
//! on first use and closed when others need the room. An evicted entry stays usable by
//! whoever still holds its `Arc` (a fetch being sent), so eviction never breaks a reader.
//!
//! Thread-safe: one mutex around the map; files are opened outside it.

use std::collections::{BTreeMap, HashMap};
use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Identifies one segment instance for the cache's lifetime (never reused).
pub type SegmentId = u64;

/// Default number of segments kept open (three descriptors each).
pub const FILE_CACHE_DEFAULT_SEGMENTS: usize = 1024;

#[derive(Debug)]
pub struct SegmentFiles {
    pub log: File,
    pub offset_index: File,
    pub time_index: File,
}

/// A segment's files are sent to sockets by the log file's descriptor (sendfile).
impl std::os::fd::AsRawFd for SegmentFiles {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.log.as_raw_fd()
    }
}

/// The three paths of a segment.
#[derive(Debug, Clone)]
pub struct SegmentPaths {
    pub log: PathBuf,
    pub offset_index: PathBuf,
    pub time_index: PathBuf,
}

impl SegmentPaths {
    pub fn new(dir: &Path, base_offset: i64) -> SegmentPaths {
        let stem = format!("{base_offset:020}");
        SegmentPaths {
            log: dir.join(format!("{stem}.log")),
            offset_index: dir.join(format!("{stem}.index")),
            time_index: dir.join(format!("{stem}.timeindex")),
        }
    }

    fn open(&self) -> io::Result<SegmentFiles> {
        let open = |path: &Path| OpenOptions::new().read(true).write(true).open(path);
        Ok(SegmentFiles {
            log: open(&self.log)?,
            offset_index: open(&self.offset_index)?,
            time_index: open(&self.time_index)?,
        })
    }
}

#[derive(Debug)]
pub struct FileCache {
    capacity_segments: usize,
    next_segment_id: AtomicU64,
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    entries: HashMap<SegmentId, (Arc<SegmentFiles>, u64)>,
    /// use tick -> segment, oldest first.
    by_last_use: BTreeMap<u64, SegmentId>,
    tick: u64,
}

impl FileCache {
    pub fn new(capacity_segments: usize) -> Arc<FileCache> {
        assert!(
            capacity_segments > 0,
            "a file cache holds at least one segment"
        );
        Arc::new(FileCache {
            capacity_segments,
            next_segment_id: AtomicU64::new(1),
            inner: Mutex::new(CacheInner::default()),
        })
    }

    pub fn new_segment_id(&self) -> SegmentId {
        self.next_segment_id.fetch_add(1, Ordering::Relaxed)
    }

    /// The open files of segment `id`, opening them from `paths` on a miss.
    pub fn get(&self, id: SegmentId, paths: &SegmentPaths) -> io::Result<Arc<SegmentFiles>> {
        self.get_or_open(id, || paths.clone())
    }

    /// Like `get`, building the paths only on a miss (the append path hits every time).
    pub fn get_or_open(
        &self,
        id: SegmentId,
        paths: impl FnOnce() -> SegmentPaths,
    ) -> io::Result<Arc<SegmentFiles>> {
        if let Some(files) = self.lookup(id) {
            return Ok(files);
        }
        let opened = Arc::new(paths().open()?);
        let mut inner = self.lock();
        if let Some((files, _)) = inner.entries.get(&id) {
            // Another thread opened it meanwhile; use theirs, drop ours.
            return Ok(files.clone());
        }
        while inner.entries.len() >= self.capacity_segments {
            let Some((_, oldest)) = inner.by_last_use.pop_first() else {
                break;
            };
            inner.entries.remove(&oldest);
        }
        inner.tick += 1;
        let tick = inner.tick;
        inner.entries.insert(id, (opened.clone(), tick));
        inner.by_last_use.insert(tick, id);
        Ok(opened)
    }

    fn lookup(&self, id: SegmentId) -> Option<Arc<SegmentFiles>> {
        let mut inner = self.lock();
        inner.tick += 1;
        let tick = inner.tick;
        let (files, last_use) = inner.entries.get_mut(&id)?;
        let files = files.clone();
        let previous = std::mem::replace(last_use, tick);
        inner.by_last_use.remove(&previous);
        inner.by_last_use.insert(tick, id);
        Some(files)
    }

    /// Forgets segment `id` (deleted, truncated away or renamed).
    pub fn invalidate(&self, id: SegmentId) {
        let mut inner = self.lock();
        if let Some((_, tick)) = inner.entries.remove(&id) {
            inner.by_last_use.remove(&tick);
        }
    }

    /// Segments currently open through the cache.
    pub fn open_segments(&self) -> usize {
        self.lock().entries.len()
    }

    pub fn capacity_segments(&self) -> usize {
        self.capacity_segments
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, CacheInner> {
        // A panic while holding this lock cannot leave the map half-updated in a way that
        // matters (worst case a stale entry), so recover from poisoning.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn make_segment(dir: &Path, base: i64) -> SegmentPaths {
        let paths = SegmentPaths::new(dir, base);
        for path in [&paths.log, &paths.offset_index, &paths.time_index] {
            File::create(path).unwrap();
        }
        paths
    }

    #[test]
    fn evicts_least_recently_used_beyond_capacity() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        let segments: Vec<_> = (0..3)
            .map(|n| (cache.new_segment_id(), make_segment(dir.path(), n)))
            .collect();
        let first = cache.get(segments[0].0, &segments[0].1).unwrap();
        cache.get(segments[1].0, &segments[1].1).unwrap();
        cache.get(segments[0].0, &segments[0].1).unwrap(); // 0 is now the most recent
        cache.get(segments[2].0, &segments[2].1).unwrap(); // evicts 1
        assert_eq!(cache.open_segments(), 2);
        let inner = cache.lock();
        assert!(inner.entries.contains_key(&segments[0].0));
        assert!(!inner.entries.contains_key(&segments[1].0));
        drop(inner);
        // The evicted-or-not handle stays usable.
        assert!(first.log.metadata().is_ok());
    }

    #[test]
    fn missing_files_are_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let cache = FileCache::new(2);
        assert!(cache
            .get(cache.new_segment_id(), &SegmentPaths::new(dir.path(), 0))
            .is_err());
        assert_eq!(cache.open_segments(), 0);
    }
}
