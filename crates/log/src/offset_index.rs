//! Offset index entries: (offset relative to the segment's base, byte position of the batch
//! that starts at that offset). 8 bytes. One entry per `index.interval.bytes` of log.

use crate::sparse_index::{IndexEntry, SparseIndex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OffsetIndexEntry {
    pub relative_offset: u32,
    pub position: u32,
}

impl IndexEntry for OffsetIndexEntry {
    const BYTES: usize = 8;
    fn encode(&self, out: &mut [u8]) {
        out[..4].copy_from_slice(&self.relative_offset.to_be_bytes());
        out[4..8].copy_from_slice(&self.position.to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        OffsetIndexEntry {
            relative_offset: u32::from_be_bytes([bytes[0], bytes[1], bytes[2], bytes[3]]),
            position: u32::from_be_bytes([bytes[4], bytes[5], bytes[6], bytes[7]]),
        }
    }
}

pub type OffsetIndex = SparseIndex<OffsetIndexEntry>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn lookup_finds_the_floor_entry() {
        let file = tempfile::tempfile().unwrap();
        let mut index = OffsetIndex::empty();
        for n in 0..100u32 {
            index
                .append(
                    Path::new("."),
                    &file,
                    OffsetIndexEntry {
                        relative_offset: n * 10,
                        position: n * 4096,
                    },
                )
                .unwrap();
        }
        let floor = |target: u32| {
            index
                .last_matching(&file, |e| e.relative_offset <= target)
                .unwrap()
        };
        assert_eq!(floor(0).unwrap().position, 0);
        assert_eq!(floor(15).unwrap().relative_offset, 10);
        assert_eq!(floor(990).unwrap().relative_offset, 990);
        assert_eq!(floor(5_000).unwrap().relative_offset, 990);

        index.write_pending(Path::new("."), &file).unwrap();
        let reopened = OffsetIndex::open(&file).unwrap().unwrap();
        assert_eq!(reopened.len(), 100);
        assert_eq!(reopened.last(), index.last());
    }

    #[test]
    fn truncation_keeps_the_prefix() {
        let file = tempfile::tempfile().unwrap();
        let mut index = OffsetIndex::empty();
        for n in 0..10u32 {
            index
                .append(
                    Path::new("."),
                    &file,
                    OffsetIndexEntry {
                        relative_offset: n,
                        position: n * 100,
                    },
                )
                .unwrap();
        }
        index.truncate_while(&file, |e| e.position < 450).unwrap();
        assert_eq!(index.len(), 5);
        assert_eq!(index.last().unwrap().position, 400);
        index.write_pending(Path::new("."), &file).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 40);
    }

    #[test]
    fn truncation_of_buffered_entries_writes_nothing() {
        let file = tempfile::tempfile().unwrap();
        let mut index = OffsetIndex::empty();
        for n in 0..5u32 {
            index
                .append(
                    Path::new("."),
                    &file,
                    OffsetIndexEntry {
                        relative_offset: n,
                        position: n * 100,
                    },
                )
                .unwrap();
        }
        assert_eq!(file.metadata().unwrap().len(), 0, "entries are buffered");
        index.truncate_while(&file, |e| e.position < 250).unwrap();
        assert_eq!((index.len(), file.metadata().unwrap().len()), (3, 0));
        index.write_pending(Path::new("."), &file).unwrap();
        assert_eq!(file.metadata().unwrap().len(), 24);
        assert_eq!(
            index
                .last_matching(&file, |e| e.relative_offset <= 9)
                .unwrap()
                .unwrap()
                .position,
            200
        );
    }

    /// Review of the full-disk index writes: a write of buffered entries a full disk cut
    /// short leaves part of them in the file beyond the written ones; a truncation of the
    /// buffer must cut them, or a later shorter write leaves entries of truncated batches
    /// that the next open counts.
    #[test]
    fn a_truncation_cuts_what_a_cut_short_write_left() {
        use std::os::unix::fs::FileExt;
        let file = tempfile::tempfile().unwrap();
        let mut index = OffsetIndex::empty();
        let entry = |n: u32| OffsetIndexEntry {
            relative_offset: n,
            position: n * 100,
        };
        for n in 0..4 {
            index.append(Path::new("."), &file, entry(n)).unwrap();
        }
        index.write_pending(Path::new("."), &file).unwrap();
        for n in 4..8 {
            index.append(Path::new("."), &file, entry(n)).unwrap();
        }
        // What a write of the four pending entries left when the disk filled after two.
        let mut torn = [0u8; 16];
        entry(4).encode(&mut torn[..8]);
        entry(5).encode(&mut torn[8..]);
        file.write_all_at(&torn, 32).unwrap();
        index.truncate_to_entries(&file, 5).unwrap();
        index.write_pending(Path::new("."), &file).unwrap();
        let reopened = OffsetIndex::open(&file).unwrap().unwrap();
        assert_eq!(reopened.len(), 5, "only the entries the index holds");
    }

    #[test]
    fn partial_entry_file_needs_rebuild() {
        let file = tempfile::tempfile().unwrap();
        file.set_len(13).unwrap();
        assert!(OffsetIndex::open(&file).unwrap().is_none());
    }
}
