//! Test-only faults in the file layer (feature `fault-injection`): a hook every fsync the
//! log makes calls first, with the path it syncs (a log directory or a file in one), so a
//! test can stall one partition's disk and watch the rest of the broker go on. Without
//! the feature `before_sync` is empty.

use std::path::Path;

#[cfg(feature = "fault-injection")]
type SyncHook = Box<dyn Fn(&Path) + Send + Sync>;

#[cfg(feature = "fault-injection")]
static SYNC_HOOK: std::sync::RwLock<Option<SyncHook>> = std::sync::RwLock::new(None);

/// Installs (or, with None, removes) the hook called before every fsync.
#[cfg(feature = "fault-injection")]
pub fn set_sync_hook(hook: Option<SyncHook>) {
    *SYNC_HOOK.write().unwrap_or_else(|p| p.into_inner()) = hook;
}

#[inline]
pub(crate) fn before_sync(path: &Path) {
    #[cfg(feature = "fault-injection")]
    if let Some(hook) = SYNC_HOOK.read().unwrap_or_else(|p| p.into_inner()).as_ref() {
        hook(path);
    }
    #[cfg(not(feature = "fault-injection"))]
    let _ = path;
}
