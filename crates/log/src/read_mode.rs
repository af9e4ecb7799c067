//! Reads that must not wait for the disk. A runtime worker reads a partition's files (index
//! entries, batch headers, the region a fetch will send with sendfile) only where they sit
//! in the page cache: inside `without_waiting`, a read that would wait for the disk fails
//! with `WouldBlock` instead (`preadv2` with RWF_NOWAIT; `cachestat` for a region sendfile
//! will send) and leaves a `Miss`: what it wanted. The caller answers without that read
//! and warms the miss on a blocking thread, holding no lock (the file is its own
//! descriptor), then reads again. Tailing consumers and followers, whose data was just
//! written, never leave the worker; a cold or stalled disk holds up only the reads that
//! need it, never a runtime worker or the partition's lock.
//!
//! The mode is per thread, set for the span of a synchronous call (no await inside).

use std::cell::{Cell, RefCell};
use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;

use crate::error::LogError;

thread_local! {
    static NO_WAIT: Cell<bool> = const { Cell::new(false) };
    static MISS: RefCell<Option<Miss>> = const { RefCell::new(None) };
}

/// Bytes warmed from a missed position in a segment's log (the next reads of a consumer
/// catching up land there too).
const WARM_AHEAD_BYTES: u64 = 1024 * 1024;
/// An index file larger than this is warmed only around the miss.
const WARM_INDEX_MAX_BYTES: u64 = 16 * 1024 * 1024;

/// How much of a file a miss should bring into the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Extent {
    /// From the missed position on (a segment's log).
    Ahead,
    /// The whole file: an index, whose binary search touches pages all over it.
    WholeFile,
}

/// A read that would have waited for the disk: its file (a descriptor of its own) and
/// the bytes to bring into the page cache.
#[derive(Debug)]
pub struct Miss {
    file: File,
    offset: u64,
    length: u64,
}

impl Miss {
    /// Reads the missed bytes into the page cache. Blocks (run it on a blocking thread).
    pub fn warm(self) -> io::Result<()> {
        ensure_cached(&self.file, self.offset, self.length)
    }
}

/// The miss the last failed no-wait read on this thread left, if any.
pub fn take_miss() -> Option<Miss> {
    MISS.with(|miss| miss.borrow_mut().take())
}

fn record_miss(file: &File, offset: u64, length: u64, extent: Extent) -> io::Error {
    // No earlier miss may stand for this one (if the descriptor cannot be copied below).
    MISS.with(|miss| miss.borrow_mut().take());
    // A descriptor of its own, so warming needs neither the log's lock nor its file cache.
    if let Ok(own) = file.try_clone() {
        let size = own.metadata().map_or(offset + length, |m| m.len());
        let (offset, length) = match extent {
            Extent::WholeFile if size <= WARM_INDEX_MAX_BYTES => (0, size),
            Extent::WholeFile => (offset, length.max(WARM_AHEAD_BYTES)),
            Extent::Ahead => (offset, length.max(WARM_AHEAD_BYTES)),
        };
        let length = length.min(size.saturating_sub(offset));
        MISS.with(|miss| {
            *miss.borrow_mut() = Some(Miss {
                file: own,
                offset,
                length,
            })
        });
    }
    would_block_error()
}

/// Runs `read` with reads that fail with `WouldBlock` rather than wait for the disk.
pub fn without_waiting<T>(read: impl FnOnce() -> T) -> T {
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            NO_WAIT.with(|mode| mode.set(self.0));
        }
    }
    let _restore = Restore(NO_WAIT.with(|mode| mode.replace(true)));
    read()
}

fn no_wait() -> bool {
    NO_WAIT.with(Cell::get)
}

/// Whether a log read failed only because it would have waited for the disk.
pub fn would_block(error: &LogError) -> bool {
    matches!(error, LogError::Io(io) if io.kind() == io::ErrorKind::WouldBlock)
}

fn would_block_error() -> io::Error {
    io::Error::new(
        io::ErrorKind::WouldBlock,
        "the read would wait for the disk",
    )
}

/// `read_exact_at`, honouring the thread's mode.
pub(crate) fn read_exact_at(
    file: &File,
    buf: &mut [u8],
    offset: u64,
    extent: Extent,
) -> io::Result<()> {
    let cached = crate::fault_injection::before_read(file, no_wait());
    if !no_wait() {
        return file.read_exact_at(buf, offset);
    }
    let wanted = buf.len() as u64;
    let miss = || record_miss(file, offset, wanted, extent);
    if !cached {
        return Err(miss());
    }
    let (mut done, mut offset) = (0usize, offset);
    while done < buf.len() {
        let read = rustix::io::preadv2(
            file,
            &mut [io::IoSliceMut::new(&mut buf[done..])],
            offset,
            rustix::io::ReadWriteFlags::NOWAIT,
        );
        match read {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    "failed to fill whole buffer",
                ))
            }
            Ok(n) => {
                done += n;
                offset += n as u64;
            }
            Err(rustix::io::Errno::AGAIN) => return Err(miss()),
            // A file system without RWF_NOWAIT: read as before.
            Err(rustix::io::Errno::OPNOTSUPP) => {
                return file.read_exact_at(&mut buf[done..], offset)
            }
            Err(rustix::io::Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// Makes sure `length` bytes at `offset` can be sent without waiting for the disk: in
/// no-wait mode, fails with `WouldBlock` unless every page is cached; otherwise reads the
/// region once, so that the page cache holds it when sendfile runs.
pub(crate) fn ensure_cached(file: &File, offset: u64, length: u64) -> io::Result<()> {
    if length == 0 {
        return Ok(());
    }
    if no_wait() {
        let cached = crate::fault_injection::before_read(file, true);
        return if cached && region_cached(file, offset, length) {
            Ok(())
        } else {
            Err(record_miss(file, offset, length, Extent::Ahead))
        };
    }
    crate::fault_injection::before_read(file, false);
    const CHUNK: u64 = 256 * 1024;
    let mut scratch = vec![0u8; CHUNK.min(length) as usize];
    let (mut at, end) = (offset, offset + length);
    while at < end {
        let n = (end - at).min(CHUNK) as usize;
        match file.read_at(&mut scratch[..n], at)? {
            0 => break, // the file ended (truncated meanwhile): sendfile will report it
            read => at += read as u64,
        }
    }
    Ok(())
}

/// Whether the page cache holds every page of the region (`cachestat`, Linux 6.5+; where
/// the kernel lacks it, assumed cached, as before this check existed).
fn region_cached(file: &File, offset: u64, length: u64) -> bool {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct CachestatRange {
        off: u64,
        len: u64,
    }
    #[repr(C)]
    #[derive(Default)]
    struct Cachestat {
        nr_cache: u64,
        nr_dirty: u64,
        nr_writeback: u64,
        nr_evicted: u64,
        nr_recently_evicted: u64,
    }
    // The same number on every architecture (the generic table; libc lacks it for some).
    const SYS_CACHESTAT: libc::c_long = 451;
    // cachestat counts pages of the kernel's size (4 KiB, or 16/64 KiB on some arm64).
    let page = page_size();
    let first_page = offset / page;
    let pages = (offset + length).div_ceil(page) - first_page;
    let range = CachestatRange {
        off: first_page * page,
        len: pages * page,
    };
    let mut stat = Cachestat::default();
    // SAFETY: cachestat reads `range` and writes `stat`, both live for the call, and
    // takes no ownership of the descriptor.
    let result = unsafe {
        libc::syscall(
            SYS_CACHESTAT,
            file.as_raw_fd(),
            &range as *const CachestatRange,
            &mut stat as *mut Cachestat,
            0u32,
        )
    };
    result != 0 || stat.nr_cache >= pages
}

fn page_size() -> u64 {
    static PAGE: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *PAGE.get_or_init(|| {
        // SAFETY: sysconf reads a constant of the running system.
        let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
        u64::try_from(size).ok().filter(|&s| s > 0).unwrap_or(4096)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn cached_data_reads_without_waiting_and_the_mode_ends_with_its_scope() {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(&[7u8; 10_000]).unwrap();
        let mut buf = [0u8; 100];
        without_waiting(|| {
            assert!(no_wait());
            read_exact_at(&file, &mut buf, 5_000, Extent::Ahead).unwrap();
            ensure_cached(&file, 0, 10_000).unwrap();
        });
        assert_eq!(buf, [7u8; 100]);
        assert!(!no_wait());
    }

    #[test]
    fn a_region_the_cache_does_not_hold_would_block_until_read_once() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cold");
        std::fs::write(&path, vec![3u8; 1 << 20]).unwrap();
        let file = File::open(&path).unwrap();
        file.sync_all().unwrap();
        // Drop the file's pages from the cache (clean after the sync, so they go).
        // SAFETY: plain advice on an open descriptor.
        unsafe {
            use std::os::fd::AsRawFd;
            libc::posix_fadvise(file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED);
        }
        if region_cached(&file, 0, 1 << 20) {
            eprintln!("the kernel kept the pages (or has no cachestat): nothing to check");
            return;
        }
        let cold = without_waiting(|| ensure_cached(&file, 0, 1 << 20));
        assert_eq!(cold.unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let miss = take_miss().expect("the miss is left for the caller");
        assert_eq!((miss.offset, miss.length), (0, 1 << 20));
        miss.warm().unwrap();
        without_waiting(|| ensure_cached(&file, 0, 1 << 20)).unwrap();
        assert!(take_miss().is_none());
    }
}
