//! Checkpoint files, replaced atomically: write a temp file, fsync it, rename it over the
//! old one, fsync the directory. A crash leaves either the old or the new file, whole.
//! On a partition's write path the fsyncs are deferred (`Sync::Deferred`) to the log's
//! next flush, off the request path (as Kafka defers its snapshot and epoch-file
//! flushes): a crash before it may leave the old file, or a damaged new one, which the
//! readers' checksums and recovery (which re-derives epochs and producer state from the
//! log past the recovery point) handle.
//!
//! Format (Kafka's): a version line, a count line, then one entry per line.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::error::{LogError, LogResult};

pub const CHECKPOINT_VERSION: u32 = 0;
/// Checkpoints are small; a file beyond this is not one of ours.
const CHECKPOINT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// When a replaced file reaches the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sync {
    /// Before returning (two fsyncs).
    Now,
    /// At the log's next flush: the caller must have it synced then.
    Deferred,
}

/// Writes `lines` under a version and count header, atomically.
pub fn write_checkpoint(path: &Path, lines: &[String]) -> io::Result<()> {
    write_checkpoint_with(path, lines, Sync::Now)
}

/// `write_checkpoint`, synced now or later.
pub fn write_checkpoint_with(path: &Path, lines: &[String], sync: Sync) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", lines.len());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    replace_file(path, text.as_bytes(), sync)
}

/// Reads the entry lines of a checkpoint; `Ok(None)` when the file does not exist.
pub fn read_checkpoint(path: &Path) -> LogResult<Option<Vec<String>>> {
    let corrupt = |reason: &str| LogError::CorruptFile {
        path: path.display().to_string(),
        reason: reason.to_string(),
    };
    let metadata = match fs::metadata(path) {
        Ok(metadata) => metadata,
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(error) => return Err(error.into()),
    };
    if metadata.len() > CHECKPOINT_MAX_BYTES {
        return Err(corrupt("checkpoint file is implausibly large"));
    }
    let text = fs::read_to_string(path)?;
    let mut lines = text.lines();
    let version: u32 = lines
        .next()
        .and_then(|line| line.trim().parse().ok())
        .ok_or_else(|| corrupt("missing version"))?;
    if version != CHECKPOINT_VERSION {
        return Err(corrupt("unknown version"));
    }
    let count: usize = lines
        .next()
        .and_then(|line| line.trim().parse().ok())
        .ok_or_else(|| corrupt("missing count"))?;
    let entries: Vec<String> = lines.map(str::to_string).collect();
    if entries.len() != count {
        return Err(corrupt("entry count disagrees with the header"));
    }
    Ok(Some(entries))
}

/// Replaces `path` with `contents` so that a crash leaves the old or the new file whole.
pub fn write_atomically(path: &Path, contents: &[u8]) -> io::Result<()> {
    replace_file(path, contents, Sync::Now)
}

/// Replaces `path` by renaming a temp file over it; with `Sync::Now` the file and then
/// the directory are fsynced first.
pub fn replace_file(path: &Path, contents: &[u8], sync: Sync) -> io::Result<()> {
    let temp = path.with_extension("tmp");
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(taken) = crate::fault_injection::write_cut_short(dir, contents.len()) {
            // A full disk (fault injection): part of the file, then ENOSPC; the temp
            // file is never renamed over the checkpoint.
            file.write_all(&contents[..taken])?;
            return Err(io::Error::from_raw_os_error(28));
        }
        file.write_all(contents)?;
        if sync == Sync::Now {
            crate::fault_injection::before_sync(path)?;
            file.sync_all()?;
        }
    }
    fs::rename(&temp, path)?;
    match sync {
        Sync::Now => sync_dir(path.parent().unwrap_or(Path::new("."))),
        Sync::Deferred => Ok(()),
    }
}

/// fsyncs a file written with `Sync::Deferred` (a missing one was replaced or deleted
/// since: nothing to keep).
pub fn sync_file(path: &Path) -> io::Result<()> {
    crate::fault_injection::before_sync(path)?;
    match File::open(path) {
        Ok(file) => file.sync_all(),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error),
    }
}

/// fsyncs a directory so that created, renamed and removed entries survive power loss.
pub fn sync_dir(dir: &Path) -> io::Result<()> {
    File::open(dir)?.sync_all()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("recovery-point-offset-checkpoint");
        assert_eq!(read_checkpoint(&path).unwrap(), None);
        write_checkpoint(&path, &["a 0 5".into(), "b 1 7".into()]).unwrap();
        assert_eq!(
            read_checkpoint(&path).unwrap().unwrap(),
            vec!["a 0 5", "b 1 7"]
        );
        write_checkpoint(&path, &["a 0 9".into()]).unwrap();
        assert_eq!(read_checkpoint(&path).unwrap().unwrap(), vec!["a 0 9"]);
        assert!(!path.with_extension("tmp").exists());
    }

    #[test]
    fn damaged_checkpoint_is_reported() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("cp");
        fs::write(&path, "0\n3\na 0 1\n").unwrap();
        assert!(matches!(
            read_checkpoint(&path),
            Err(LogError::CorruptFile { .. })
        ));
        fs::write(&path, "garbage").unwrap();
        assert!(matches!(
            read_checkpoint(&path),
            Err(LogError::CorruptFile { .. })
        ));
    }
}
