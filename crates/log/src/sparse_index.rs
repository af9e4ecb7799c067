//! The mechanics shared by the offset and time indexes: fixed-size big-endian entries
//! appended to a file, searched by binary search with `pread` (no mmap: an idle
//! partition's index costs nothing but its descriptor while cached). The entry count is
//! kept in memory; the file is the entries. Indexes carry no checksum; recovery rebuilds
//! them from the log whenever they are in doubt.
//!
//! New entries are buffered (at most `PENDING_ENTRIES_MAX`) and written in one `pwrite`,
//! not one system call each: on the append path two tiny index writes per batch cost as
//! much as the batch write itself. Lookups see buffered entries; `write_pending` runs
//! before every sync, seal and truncation, so a flushed index is always whole, and an
//! index that lost its buffer in a crash lies above the recovery point and is rebuilt.

use std::fs::File;
use std::io;
use std::path::Path;

/// A fixed-size index entry.
pub trait IndexEntry: Copy + std::fmt::Debug {
    const BYTES: usize;
    fn encode(&self, out: &mut [u8]);
    fn decode(bytes: &[u8]) -> Self;
}

/// Entries buffered before they are written to the file.
const PENDING_ENTRIES_MAX: usize = 32;

#[derive(Debug, Clone)]
pub struct SparseIndex<E: IndexEntry> {
    /// All entries, written and pending.
    entries: u64,
    last: Option<E>,
    /// Entries not yet in the file; they are the last `pending.len()` of `entries`.
    pending: Vec<E>,
}

impl<E: IndexEntry> SparseIndex<E> {
    pub fn empty() -> SparseIndex<E> {
        SparseIndex {
            entries: 0,
            last: None,
            pending: Vec::new(),
        }
    }

    /// Loads the entry count of an existing index file. `Ok(None)` when the file's size is
    /// not a whole number of entries (rebuild it).
    pub fn open(file: &File) -> io::Result<Option<SparseIndex<E>>> {
        let size = file.metadata()?.len();
        if size % E::BYTES as u64 != 0 {
            return Ok(None);
        }
        let mut index = SparseIndex {
            entries: size / E::BYTES as u64,
            last: None,
            pending: Vec::new(),
        };
        if index.entries > 0 {
            index.last = Some(index.read_entry(file, index.entries - 1)?);
        }
        Ok(Some(index))
    }

    pub fn len(&self) -> u64 {
        self.entries
    }

    pub fn is_empty(&self) -> bool {
        self.entries == 0
    }

    pub fn size_bytes(&self) -> u64 {
        self.entries * E::BYTES as u64
    }

    pub fn last(&self) -> Option<E> {
        self.last
    }

    /// Adds an entry to the index of the log in `dir` (buffered; written with others).
    pub fn append(&mut self, dir: &Path, file: &File, entry: E) -> io::Result<()> {
        self.pending.push(entry);
        self.entries += 1;
        self.last = Some(entry);
        if self.pending.len() >= PENDING_ENTRIES_MAX {
            self.write_pending(dir, file)?;
        }
        Ok(())
    }

    fn written_entries(&self) -> u64 {
        self.entries - self.pending.len() as u64
    }

    /// Writes buffered entries to the file (of the log in `dir`). On failure they stay
    /// buffered (a part written by a full disk is written over at the next try).
    pub fn write_pending(&mut self, dir: &Path, file: &File) -> io::Result<()> {
        if self.pending.is_empty() {
            return Ok(());
        }
        let mut bytes = vec![0u8; self.pending.len() * E::BYTES];
        for (entry, out) in self.pending.iter().zip(bytes.chunks_exact_mut(E::BYTES)) {
            entry.encode(out);
        }
        let at = self.written_entries() * E::BYTES as u64;
        if let Err(error) = crate::fault_injection::write_all_at(dir, file, &bytes, at) {
            // Part of it may be in the file (a full disk): the file keeps only the
            // written entries (cutting needs no space; `truncate_to_entries` cuts again).
            let _ = file.set_len(at);
            return Err(error);
        }
        // Release the buffer: an idle partition should hold no spare capacity.
        self.pending = Vec::new();
        Ok(())
    }

    pub fn read_entry(&self, file: &File, slot: u64) -> io::Result<E> {
        let written = self.written_entries();
        if slot >= written {
            return Ok(self.pending[(slot - written) as usize]);
        }
        let mut buf = [0u8; 16];
        crate::read_mode::read_exact_at(
            file,
            &mut buf[..E::BYTES],
            slot * E::BYTES as u64,
            crate::read_mode::Extent::WholeFile,
        )?;
        Ok(E::decode(&buf[..E::BYTES]))
    }

    /// The last entry for which `is_before(entry)` holds, given that the predicate is true
    /// for a prefix of the entries and false after it.
    pub fn last_matching(
        &self,
        file: &File,
        is_before: impl Fn(&E) -> bool,
    ) -> io::Result<Option<E>> {
        if let Some(last) = self.last {
            if is_before(&last) {
                return Ok(Some(last));
            }
        }
        let (mut low, mut high) = (0u64, self.entries); // answer slot in [low, high)
        let mut found = None;
        while low < high {
            let middle = low + (high - low) / 2;
            let entry = self.read_entry(file, middle)?;
            if is_before(&entry) {
                found = Some(entry);
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        Ok(found)
    }

    /// Keeps only the prefix of entries for which `keep` holds; shrinks the file.
    pub fn truncate_while(&mut self, file: &File, keep: impl Fn(&E) -> bool) -> io::Result<()> {
        let mut kept = 0u64;
        let (mut low, mut high) = (0u64, self.entries);
        while low < high {
            let middle = low + (high - low) / 2;
            if keep(&self.read_entry(file, middle)?) {
                kept = middle + 1;
                low = middle + 1;
            } else {
                high = middle;
            }
        }
        self.truncate_to_entries(file, kept)
    }

    /// Keeps the first `entries` entries. Needs no new disk space (a truncation may be
    /// undoing a write that failed because the disk is full).
    pub fn truncate_to_entries(&mut self, file: &File, entries: u64) -> io::Result<()> {
        let written = self.written_entries();
        if entries <= written {
            self.pending = Vec::new();
            file.set_len(entries * E::BYTES as u64)?;
        } else {
            self.pending.truncate((entries - written) as usize);
            // A write of pending entries a full disk cut short left part of them beyond
            // the written ones: cut it, or a later shorter write would leave entries of
            // truncated batches in the file for the next open to trust.
            file.set_len(written * E::BYTES as u64)?;
        }
        self.entries = entries;
        self.last = if entries > 0 {
            Some(self.read_entry(file, entries - 1)?)
        } else {
            None
        };
        Ok(())
    }
}
