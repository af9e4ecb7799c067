//! Checkpoint files, replaced atomically: write a temp file, fsync it, rename it over the
//! old one, fsync the directory. A crash leaves either the old or the new file, whole.
//!
//! Format (Kafka's): a version line, a count line, then one entry per line.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Write};
use std::path::Path;

use crate::error::{LogError, LogResult};

pub const CHECKPOINT_VERSION: u32 = 0;
/// Checkpoints are small; a file beyond this is not one of ours.
const CHECKPOINT_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// Writes `lines` under a version and count header, atomically.
pub fn write_checkpoint(path: &Path, lines: &[String]) -> io::Result<()> {
    let mut text = format!("{CHECKPOINT_VERSION}\n{}\n", lines.len());
    for line in lines {
        text.push_str(line);
        text.push('\n');
    }
    write_atomically(path, text.as_bytes())
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
    let temp = path.with_extension("tmp");
    {
        let mut file = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&temp)?;
        file.write_all(contents)?;
        file.sync_all()?;
    }
    fs::rename(&temp, path)?;
    sync_dir(path.parent().unwrap_or(Path::new(".")))
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
