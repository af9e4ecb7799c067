//! Test-only faults in the file layer (feature `fault-injection`): a hook every fsync the
//! log makes calls first, with the path it syncs (a log directory or a file in one), which
//! may stall (a slow disk) or fail it (a failing disk: the error stands for the fsync's),
//! one every read of a segment or index file calls first, so a test can stall one
//! partition's disk (or make its files look uncached) and watch the rest of the broker go
//! on, and one every write of a batch to a segment (and of a checkpoint) calls first,
//! which may cut it short (a full disk: part of it written, then ENOSPC). Without the
//! feature the hooks are empty.

use std::fs::File;
use std::io;
use std::path::Path;

#[cfg(feature = "fault-injection")]
type SyncHook = Box<dyn Fn(&Path) -> std::io::Result<()> + Send + Sync>;

#[cfg(feature = "fault-injection")]
static SYNC_HOOK: std::sync::RwLock<Option<SyncHook>> = std::sync::RwLock::new(None);

/// Installs (or, with None, removes) the hook called before every fsync.
#[cfg(feature = "fault-injection")]
pub fn set_sync_hook(hook: Option<SyncHook>) {
    *SYNC_HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

/// Also called by the metadata quorum's log store (strand-raft) before its fsyncs.
#[inline]
pub fn before_sync(path: &Path) -> std::io::Result<()> {
    #[cfg(feature = "fault-injection")]
    if let Some(hook) = SYNC_HOOK.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return hook(path);
    }
    let _ = path;
    Ok(())
}

/// Called before a batch of `len` bytes is written to a segment of the partition in `dir`:
/// Some(n) writes only its first n bytes and fails with ENOSPC (a full disk).
#[cfg(feature = "fault-injection")]
type WriteHook = Box<dyn Fn(&Path, usize) -> Option<usize> + Send + Sync>;

#[cfg(feature = "fault-injection")]
static WRITE_HOOK: std::sync::RwLock<Option<WriteHook>> = std::sync::RwLock::new(None);

/// Installs (or, with None, removes) the hook called before every batch write.
#[cfg(feature = "fault-injection")]
pub fn set_write_hook(hook: Option<WriteHook>) {
    *WRITE_HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

/// Writes `bytes` at `at` in `file` (of the log in `dir`), or as much as a full disk
/// takes before ENOSPC (the hook decides): segment batches and index entries.
#[inline]
pub(crate) fn write_all_at(dir: &Path, file: &File, bytes: &[u8], at: u64) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    match write_cut_short(dir, bytes.len()) {
        None => file.write_all_at(bytes, at),
        Some(taken) => file
            .write_all_at(&bytes[..taken], at)
            .and_then(|()| Err(io::Error::from_raw_os_error(28))), // ENOSPC
    }
}

/// How many of a write's `len` bytes the disk takes before it is full (None: all).
#[inline]
pub(crate) fn write_cut_short(dir: &Path, len: usize) -> Option<usize> {
    #[cfg(feature = "fault-injection")]
    if let Some(hook) = WRITE_HOOK
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .as_ref()
    {
        return hook(dir, len).map(|n| n.min(len));
    }
    let _ = (dir, len);
    None
}

/// Called before a read of `file`, with whether the read must not wait (`read_mode`);
/// returns whether the file's data is to count as cached. A hook may block (a stalled
/// disk) when the read may wait.
#[cfg(feature = "fault-injection")]
type ReadHook = Box<dyn Fn(&File, bool) -> bool + Send + Sync>;

#[cfg(feature = "fault-injection")]
static READ_HOOK: std::sync::RwLock<Option<ReadHook>> = std::sync::RwLock::new(None);

/// Installs (or, with None, removes) the hook called before every segment or index read.
#[cfg(feature = "fault-injection")]
pub fn set_read_hook(hook: Option<ReadHook>) {
    *READ_HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

/// Whether the read may go ahead as cached (always, without the feature).
#[inline]
pub(crate) fn before_read(file: &File, no_wait: bool) -> bool {
    #[cfg(feature = "fault-injection")]
    if let Some(hook) = READ_HOOK.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        return hook(file, no_wait);
    }
    let _ = (file, no_wait);
    true
}
