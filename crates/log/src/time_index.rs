//! Time index entries: (largest timestamp seen so far in the segment, offset relative to
//! the segment's base of the last record of the batch where it was seen). 12 bytes.
//! Timestamps are strictly increasing across entries, so every batch at or before an
//! entry's offset has a max timestamp no greater than the entry's.

use crate::sparse_index::{IndexEntry, SparseIndex};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeIndexEntry {
    pub timestamp: i64,
    pub relative_offset: u32,
}

impl IndexEntry for TimeIndexEntry {
    const BYTES: usize = 12;
    fn encode(&self, out: &mut [u8]) {
        out[..8].copy_from_slice(&self.timestamp.to_be_bytes());
        out[8..12].copy_from_slice(&self.relative_offset.to_be_bytes());
    }
    fn decode(bytes: &[u8]) -> Self {
        let mut timestamp = [0u8; 8];
        timestamp.copy_from_slice(&bytes[..8]);
        TimeIndexEntry {
            timestamp: i64::from_be_bytes(timestamp),
            relative_offset: u32::from_be_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]),
        }
    }
}

pub type TimeIndex = SparseIndex<TimeIndexEntry>;

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    #[test]
    fn strict_lower_bound_lookup() {
        let file = tempfile::tempfile().unwrap();
        let mut index = TimeIndex::empty();
        for n in 1..=5i64 {
            index
                .append(
                    Path::new("."),
                    &file,
                    TimeIndexEntry {
                        timestamp: n * 100,
                        relative_offset: n as u32 * 10,
                    },
                )
                .unwrap();
        }
        let below = |t: i64| index.last_matching(&file, |e| e.timestamp < t).unwrap();
        assert_eq!(below(100), None);
        assert_eq!(below(101).unwrap().relative_offset, 10);
        assert_eq!(below(300).unwrap().relative_offset, 20);
        assert_eq!(below(10_000).unwrap().relative_offset, 50);
    }
}
