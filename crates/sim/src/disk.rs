//! The simulated disk's one fault real processes cannot show cheaply: a power cut loses
//! what was written but not fsynced. The log's fsyncs all pass `strand_log`'s sync hook
//! (feature `fault-injection`), called with the file, or the partition directory whose
//! segments it syncs; the disk records each file's length when it is synced, by path. A
//! power cut then cuts every file of the node back to its last synced length. Names are
//! durable at once, as in strand-lazyfs; data overwritten in place after its last sync
//! keeps the new bytes (one of the outcomes a real cut allows), and so does a file
//! deleted and created again at a synced name (kinder than a real disk).

use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex};

/// The page cache's unit of write-back.
const PAGE: u64 = 4096;

#[derive(Debug, Default, Clone)]
pub struct Disk {
    /// path -> length at its last fsync
    synced: Arc<Mutex<HashMap<std::path::PathBuf, u64>>>,
    /// The next fsync under this directory fails with EIO (a failing disk).
    failing: Arc<Mutex<Option<std::path::PathBuf>>>,
    /// The disk under this directory is full: a batch or checkpoint written there gets
    /// half its bytes down, then ENOSPC.
    full: Arc<Mutex<Option<std::path::PathBuf>>>,
    /// The directory whose planned failure an fsync hit (EIO: its unsynced pages may be
    /// gone), until the node restarts.
    failed: Arc<Mutex<Option<std::path::PathBuf>>>,
}

fn files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<_> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort(); // the order of cuts must not depend on the directory's
    for path in paths {
        if path.is_dir() {
            files(&path, out);
        } else {
            out.push(path);
        }
    }
}

impl Disk {
    /// Routes the log's fsyncs through this disk (process-wide: seeds run one at a time,
    /// each installing it; a world's end removes it).
    pub fn install(&self) {
        let full = self.full.clone();
        strand_log::fault_injection::set_write_hook(Some(Box::new(move |dir: &Path, len| {
            let full = full.lock().unwrap_or_else(|p| p.into_inner());
            full.as_ref()
                .is_some_and(|f| dir.starts_with(f))
                .then_some(len / 2)
        })));
        let (synced, failing, failed) = (
            self.synced.clone(),
            self.failing.clone(),
            self.failed.clone(),
        );
        strand_log::fault_injection::set_sync_hook(Some(Box::new(move |path: &Path| {
            let mut failing = failing.lock().unwrap_or_else(|p| p.into_inner());
            if failing.as_ref().is_some_and(|dir| path.starts_with(dir)) {
                *failed.lock().unwrap_or_else(|p| p.into_inner()) = failing.take();
                return Err(std::io::Error::from_raw_os_error(5)); // EIO: nothing synced
            }
            drop(failing);
            let mut synced = synced.lock().unwrap_or_else(|p| p.into_inner());
            if path.is_dir() {
                // A partition's directory: the log syncs its segments' data (`.log`)
                // there; indexes are rebuilt from the data on recovery, so they count as
                // unsynced (a power cut makes recovery rebuild them).
                let mut logs = Vec::new();
                files(path, &mut logs);
                for log in logs
                    .into_iter()
                    .filter(|p| p.extension().is_some_and(|e| e == "log"))
                {
                    let length = std::fs::metadata(&log).map_or(0, |m| m.len());
                    synced.insert(log, length);
                }
            } else {
                // A checkpoint replaced atomically is synced under its final name while
                // its contents are still in the `.tmp` file about to be renamed over it.
                let temp = path.with_extension("tmp");
                let source = if temp.exists() {
                    temp
                } else {
                    path.to_path_buf()
                };
                let length = std::fs::metadata(&source).map_or(0, |m| m.len());
                synced.insert(path.to_path_buf(), length);
            }
            Ok(())
        })));
    }

    /// Forgets every file: a new world (inodes are reused, so a previous seed's lengths
    /// would otherwise pass for this one's, and a seed would not replay alone).
    pub fn reset(&self) {
        self.synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clear();
        *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = None;
        *self.failed.lock().unwrap_or_else(|p| p.into_inner()) = None;
        self.free();
    }

    /// The disk under `dir` fills up: batch writes there fail part-way with ENOSPC.
    pub fn fill(&self, dir: &Path) {
        *self.full.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.to_path_buf());
    }

    /// Room again on the full disk.
    pub fn free(&self) {
        *self.full.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// The hooks out, at a world's end.
    pub fn uninstall(&self) {
        strand_log::fault_injection::set_sync_hook(None);
        strand_log::fault_injection::set_write_hook(None);
    }

    /// Forgets a failure planned under `dir` that no fsync hit.
    pub fn clear_failure(&self, dir: &Path) {
        let mut failing = self.failing.lock().unwrap_or_else(|p| p.into_inner());
        if failing.as_ref().is_some_and(|d| d == dir) {
            *failing = None;
        }
    }

    /// Whether an fsync under `dir` failed with EIO (its unsynced pages may be lost at
    /// the restart); forgotten once asked.
    pub fn take_eio(&self, dir: &Path) -> bool {
        let mut failed = self.failed.lock().unwrap_or_else(|p| p.into_inner());
        let hit = failed.as_ref().is_some_and(|d| d == dir);
        if hit {
            *failed = None;
        }
        hit
    }

    /// Whether a failure is planned that no fsync has hit yet.
    pub fn failure_planned(&self) -> bool {
        self.failing
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some()
    }

    /// The next fsync of a file under `dir` fails with EIO.
    pub fn fail_next_sync(&self, dir: &Path) {
        *self.failing.lock().unwrap_or_else(|p| p.into_inner()) = Some(dir.to_path_buf());
    }

    /// The disk under `dir` is gone (lost or replaced): nothing there counts as synced.
    pub fn forget(&self, dir: &Path) {
        self.synced
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .retain(|path, _| !path.starts_with(dir));
    }

    /// Everything under `dir` counts as on the disk (a node opening what it found).
    pub fn settle(&self, dir: &Path) {
        let mut all = Vec::new();
        files(dir, &mut all);
        let mut synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        for path in all {
            if let Ok(meta) = std::fs::metadata(&path) {
                synced.insert(path, meta.len());
            }
        }
    }

    /// The power cut: every file under `dir` back to its last synced length, plus, for
    /// `written_back(unsynced bytes)` of them, a prefix of what was written since (the
    /// flusher had written some pages back: a torn tail). Returns the bytes lost.
    pub fn lose_power(&self, dir: &Path, mut written_back: impl FnMut(u64) -> u64) -> u64 {
        let mut all = Vec::new();
        files(dir, &mut all);
        let synced = self.synced.lock().unwrap_or_else(|p| p.into_inner());
        let mut lost = 0;
        for path in all {
            let Ok(meta) = std::fs::metadata(&path) else {
                continue;
            };
            let durable = synced.get(&path).copied().unwrap_or(0);
            if meta.len() > durable {
                // Pages are written back whole: what survives past the synced length
                // ends on a page boundary (or at the file's end).
                let back = written_back(meta.len() - durable).min(meta.len() - durable);
                let end = durable + back;
                let keep = if end == meta.len() {
                    end
                } else {
                    (end / PAGE * PAGE).max(durable)
                };
                lost += meta.len() - keep;
                let file = std::fs::OpenOptions::new().write(true).open(&path);
                if let Ok(file) = file {
                    let _ = file.set_len(keep);
                }
            }
        }
        lost
    }
}
