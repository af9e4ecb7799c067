//! The data written to one file and not yet on the disk underneath: what the kernel's page
//! cache holds dirty, and what a power cut loses. A plain value, so the rules are tested
//! without a mount.

use std::collections::BTreeMap;

/// Written ranges of one file, not yet written to its backing file, without overlaps.
#[derive(Debug, Default)]
pub struct DirtyData {
    /// Start offset -> the bytes from there.
    extents: BTreeMap<u64, Vec<u8>>,
    bytes: u64,
}

impl DirtyData {
    pub fn is_empty(&self) -> bool {
        self.extents.is_empty()
    }

    /// Bytes held.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// Where the last dirty byte ends (0 with none): the file is at least this long.
    pub fn end(&self) -> u64 {
        self.extents
            .last_key_value()
            .map_or(0, |(start, data)| start + data.len() as u64)
    }

    /// Records a write of `data` at `offset`, replacing what it overlaps.
    pub fn write(&mut self, offset: u64, data: &[u8]) {
        if data.is_empty() {
            return;
        }
        let end = offset + data.len() as u64;
        // An append right after the last extent (a log's writes) grows it in place.
        if let Some((&start, last)) = self.extents.iter_mut().next_back() {
            if start + last.len() as u64 == offset {
                last.extend_from_slice(data);
                self.bytes += data.len() as u64;
                return;
            }
        }
        self.remove_range(offset, end);
        self.extents.insert(offset, data.to_vec());
        self.bytes += data.len() as u64;
    }

    /// Forgets the dirty bytes at and beyond `len` (the file was cut there).
    pub fn truncate(&mut self, len: u64) {
        self.remove_range(len, u64::MAX);
    }

    /// Copies the dirty bytes over `buf`, which holds the backing file's bytes from `offset`.
    pub fn overlay(&self, offset: u64, buf: &mut [u8]) {
        let end = offset + buf.len() as u64;
        // The extent that may start before `offset`, then every one starting inside.
        let first = self
            .extents
            .range(..=offset)
            .next_back()
            .map_or(offset, |(start, _)| *start);
        for (&start, data) in self.extents.range(first..end) {
            let from = start.max(offset);
            let to = (start + data.len() as u64).min(end);
            if from < to {
                buf[(from - offset) as usize..(to - offset) as usize]
                    .copy_from_slice(&data[(from - start) as usize..(to - start) as usize]);
            }
        }
    }

    /// Takes every dirty range out, in offset order (to write them to the backing file).
    pub fn take(&mut self) -> Vec<(u64, Vec<u8>)> {
        self.bytes = 0;
        std::mem::take(&mut self.extents).into_iter().collect()
    }

    /// Drops the dirty bytes in [from, to), keeping the parts of extents outside it.
    fn remove_range(&mut self, from: u64, to: u64) {
        let first = self
            .extents
            .range(..=from)
            .next_back()
            .map_or(from, |(start, _)| *start);
        let starts: Vec<u64> = self.extents.range(first..to).map(|(s, _)| *s).collect();
        for start in starts {
            let data = self.extents.remove(&start).expect("listed above");
            let data_end = start + data.len() as u64;
            if data_end <= from {
                self.extents.insert(start, data);
                continue;
            }
            self.bytes -= data.len() as u64;
            if start < from {
                let head = data[..(from - start) as usize].to_vec();
                self.bytes += head.len() as u64;
                self.extents.insert(start, head);
            }
            if data_end > to {
                let tail = data[(to - start) as usize..].to_vec();
                self.bytes += tail.len() as u64;
                self.extents.insert(to, tail);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The file as a program sees it: `backing` with the dirty data over it.
    fn view(backing: &[u8], dirty: &DirtyData) -> Vec<u8> {
        let len = (backing.len() as u64).max(dirty.end()) as usize;
        let mut buf = backing.to_vec();
        buf.resize(len, 0);
        dirty.overlay(0, &mut buf);
        buf
    }

    #[test]
    fn appends_grow_one_extent_and_overwrites_split_them() {
        let mut dirty = DirtyData::default();
        dirty.write(0, b"hello");
        dirty.write(5, b" world");
        assert_eq!(dirty.extents.len(), 1);
        dirty.write(2, b"LL");
        assert_eq!(view(b"", &dirty), b"heLLo world");
        assert_eq!(dirty.bytes(), 11);
        dirty.truncate(4);
        assert_eq!(view(b"", &dirty), b"heLL");
        assert_eq!(dirty.bytes(), 4);
    }

    #[test]
    fn a_read_sees_backing_bytes_where_nothing_is_dirty() {
        let mut dirty = DirtyData::default();
        dirty.write(3, b"xy");
        let mut buf = *b"abcdefg";
        dirty.overlay(0, &mut buf);
        assert_eq!(&buf, b"abcxyfg");
        let mut part = *b"ef";
        dirty.overlay(4, &mut part);
        assert_eq!(&part, b"yf");
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(u64, Vec<u8>),
        Truncate(u64),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            4 => (0u64..64, proptest::collection::vec(any::<u8>(), 0..24))
                .prop_map(|(at, data)| Op::Write(at, data)),
            1 => (0u64..80).prop_map(Op::Truncate),
        ]
    }

    proptest! {
        /// Against a plain byte vector: the dirty data over an empty file reads as the
        /// writes and truncations made to a file directly, and taking it out and writing
        /// it in order gives the same bytes.
        #[test]
        fn matches_a_file_written_directly(ops in proptest::collection::vec(op(), 0..40)) {
            let mut dirty = DirtyData::default();
            let mut file: Vec<u8> = Vec::new();
            for op in ops {
                match op {
                    Op::Write(at, data) => {
                        dirty.write(at, &data);
                        if !data.is_empty() {
                            let end = at as usize + data.len();
                            if file.len() < end { file.resize(end, 0); }
                            file[at as usize..end].copy_from_slice(&data);
                        }
                    }
                    Op::Truncate(len) => {
                        dirty.truncate(len);
                        file.truncate(len as usize);
                    }
                }
                // Trailing zero bytes are indistinguishable from a hole here: compare up
                // to the dirty end, which a shorter file (cut, then never written) bounds.
                let seen = view(b"", &dirty);
                prop_assert_eq!(&seen[..], &file[..seen.len()]);
                prop_assert!(file[seen.len()..].iter().all(|b| *b == 0));
                let held: u64 = dirty.extents.values().map(|d| d.len() as u64).sum();
                prop_assert_eq!(held, dirty.bytes());
            }
            let mut written = Vec::new();
            for (at, data) in dirty.take() {
                let end = at as usize + data.len();
                if written.len() < end { written.resize(end, 0); }
                written[at as usize..end].copy_from_slice(&data);
            }
            prop_assert_eq!(&written[..], &file[..written.len()]);
            prop_assert!(dirty.is_empty());
        }
    }
}
