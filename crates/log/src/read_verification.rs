//! Checks the batches a read is about to send from data an earlier process wrote, once
//! per region of a segment. Kafka serves a flipped byte or a zeroed page silently (a
//! consumer with check.crcs=false gets corrupt data; librdkafka 2.16 with check.crcs=true
//! crashes on an assertion). What this process appended was checked on the way in, and
//! what recovery scanned was checked then; the rest (segments below the recovery point,
//! opened trusted after a restart) is what a disk may have damaged at rest, so a read of
//! it first reads the batches once more and checks their CRCs and the header fields the
//! CRC leaves out. Each verified byte range is remembered, so consumers that replay pay
//! for a region once per process, not per fetch.
//!
//! Thread-safe: a segment's regions sit behind their own small mutex (reads take the
//! log by shared reference).

use std::fs::File;
use std::sync::Mutex;

use crate::batch_scan::{BatchScanner, ScanStep};

/// Verified ranges remembered per segment; beyond it the smallest is forgotten (and
/// checked again when read again).
const REGIONS_MAX: usize = 8;

/// The byte ranges of one segment whose batches have been checked, sorted, disjoint.
#[derive(Debug, Default)]
pub struct VerifiedRegions {
    regions: Mutex<Vec<(u64, u64)>>,
}

/// A batch that failed its check: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorruptBatch {
    pub position: u64,
    pub reason: String,
}

impl VerifiedRegions {
    /// Checks every batch that starts in `[start, end)` (`start` is a batch boundary)
    /// and has not been checked before; `limit` is the end of the segment's data, which
    /// a trailing batch may reach past `end`, and `offsets` the segment's offset range.
    /// Besides each batch's framing and CRC, the fields the CRC does not cover are
    /// checked for sense: offsets rise batch to batch within the segment's range, and
    /// leader epochs do not fall. I/O errors are returned as such.
    pub fn verify(
        &self,
        file: &File,
        start: u64,
        end: u64,
        limit: u64,
        offsets: std::ops::Range<i64>,
    ) -> std::io::Result<Result<(), CorruptBatch>> {
        let mut from = start;
        while from < end {
            let gap = self.first_gap(from, end);
            let Some((gap_start, gap_end)) = gap else {
                return Ok(Ok(()));
            };
            let mut scanner = BatchScanner::new(file, gap_start, limit);
            let mut previous: Option<(i64, i32)> = None; // (next offset, leader epoch)
            while scanner.position() < gap_end {
                let position = scanner.position();
                let reason = match scanner.next_verified()? {
                    ScanStep::Batch(batch) => {
                        let header = &batch.header;
                        let (floor, epoch_floor) = previous.unwrap_or((offsets.start, -1));
                        previous = Some((header.next_offset(), header.partition_leader_epoch));
                        if header.base_offset < floor || header.next_offset() > offsets.end {
                            Some(format!(
                                "batch offsets {}..{} outside {floor}..{}",
                                header.base_offset,
                                header.next_offset(),
                                offsets.end
                            ))
                        } else if header.partition_leader_epoch < epoch_floor {
                            Some(format!(
                                "leader epoch {} after {epoch_floor}",
                                header.partition_leader_epoch
                            ))
                        } else {
                            None
                        }
                    }
                    ScanStep::End => break,
                    ScanStep::Invalid { reason, .. } => Some(reason),
                };
                if let Some(reason) = reason {
                    if position > gap_start {
                        self.remember(gap_start, position);
                    }
                    return Ok(Err(CorruptBatch { position, reason }));
                }
            }
            let verified_to = scanner.position();
            self.remember(gap_start, verified_to);
            from = verified_to.max(gap_end);
        }
        Ok(Ok(()))
    }

    /// The first part of `[from, end)` not yet verified: (its start, where the next
    /// verified region begins or `end`).
    fn first_gap(&self, mut from: u64, end: u64) -> Option<(u64, u64)> {
        let regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        for &(start, stop) in regions.iter() {
            if stop <= from {
                continue;
            }
            if start <= from {
                from = stop; // inside a verified region: skip to its end
                continue;
            }
            return (from < end).then_some((from, start.min(end)));
        }
        (from < end).then_some((from, end))
    }

    fn remember(&self, start: u64, end: u64) {
        let mut regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.push((start, end));
        regions.sort_unstable();
        let mut merged: Vec<(u64, u64)> = Vec::with_capacity(regions.len());
        for &(start, end) in regions.iter() {
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        while merged.len() > REGIONS_MAX {
            let smallest = (0..merged.len())
                .min_by_key(|&i| merged[i].1 - merged[i].0)
                .expect("not empty");
            merged.remove(smallest);
        }
        *regions = merged;
    }

    /// The segment was cut at `position`: what is written there later is unchecked.
    pub fn forget_from(&self, position: u64) {
        let mut regions = self.regions.lock().unwrap_or_else(|p| p.into_inner());
        regions.retain(|&(start, _)| start < position);
        if let Some(last) = regions.last_mut() {
            last.1 = last.1.min(position);
        }
    }

    #[cfg(test)]
    fn regions(&self) -> Vec<(u64, u64)> {
        self.regions.lock().unwrap().clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::FileExt;
    use strand_records::{BatchBuilder, Record};

    /// Ten batches of `len` bytes each; returns the file and the batch boundaries.
    fn segment() -> (File, Vec<u64>) {
        let file = tempfile::tempfile().unwrap();
        let mut bytes = Vec::new();
        let mut boundaries = vec![0];
        for n in 0..10 {
            let mut builder = BatchBuilder::new(n, 0);
            builder.push(Record::new(None, Some(vec![n as u8; 500]), 0));
            bytes.extend(builder.build());
            boundaries.push(bytes.len() as u64);
        }
        file.write_all_at(&bytes, 0).unwrap();
        (file, boundaries)
    }

    #[test]
    fn clean_batches_pass_and_are_remembered() {
        let (file, at) = segment();
        let regions = VerifiedRegions::default();
        regions
            .verify(&file, at[2], at[5], at[10], 0..10)
            .unwrap()
            .unwrap();
        assert_eq!(regions.regions(), vec![(at[2], at[5])]);
        // A read ending inside a batch checks that batch whole.
        regions
            .verify(&file, at[5], at[6] + 10, at[10], 0..10)
            .unwrap()
            .unwrap();
        assert_eq!(regions.regions(), vec![(at[2], at[7])]);
        regions
            .verify(&file, at[0], at[10], at[10], 0..10)
            .unwrap()
            .unwrap();
        assert_eq!(regions.regions(), vec![(at[0], at[10])]);
    }

    #[test]
    fn a_flipped_byte_is_found_where_it_is_and_not_remembered() {
        let (file, at) = segment();
        let regions = VerifiedRegions::default();
        let damaged = at[4] + 100;
        let mut byte = [0u8; 1];
        file.read_exact_at(&mut byte, damaged).unwrap();
        file.write_all_at(&[byte[0] ^ 0x40], damaged).unwrap();
        let found = regions.verify(&file, at[1], at[8], at[10], 0..10).unwrap();
        assert_eq!(found.unwrap_err().position, at[4]);
        assert_eq!(
            regions.regions(),
            vec![(at[1], at[4])],
            "only the good part"
        );
        // Reads before the damage still pass; reads of it keep failing.
        regions
            .verify(&file, at[1], at[3], at[10], 0..10)
            .unwrap()
            .unwrap();
        assert!(regions
            .verify(&file, at[4], at[5], at[10], 0..10)
            .unwrap()
            .is_err());
    }

    #[test]
    fn fields_outside_the_crc_are_checked_for_sense() {
        let (file, at) = segment();
        // The base offset of batch 3 (not covered by the CRC) made huge.
        file.write_all_at(&[0x10], at[3]).unwrap();
        let found = VerifiedRegions::default()
            .verify(&file, at[0], at[10], at[10], 0..10)
            .unwrap();
        assert_eq!(found.unwrap_err().position, at[3]);
        // The leader epoch of batch 5 set to -2.
        let (file, at) = segment();
        file.write_all_at(&(-2i32).to_be_bytes(), at[5] + 12)
            .unwrap();
        let found = VerifiedRegions::default()
            .verify(&file, at[0], at[10], at[10], 0..10)
            .unwrap();
        assert_eq!(found.unwrap_err().position, at[5]);
    }

    #[test]
    fn a_zeroed_page_is_found() {
        let (file, at) = segment();
        file.write_all_at(&[0u8; 700], at[6]).unwrap();
        let found = VerifiedRegions::default()
            .verify(&file, at[0], at[10], at[10], 0..10)
            .unwrap();
        assert_eq!(found.unwrap_err().position, at[6]);
    }

    #[test]
    fn a_cut_forgets_what_lay_beyond_it() {
        let (file, at) = segment();
        let regions = VerifiedRegions::default();
        regions
            .verify(&file, at[0], at[10], at[10], 0..10)
            .unwrap()
            .unwrap();
        regions.forget_from(at[6]);
        assert_eq!(regions.regions(), vec![(at[0], at[6])]);
        regions.forget_from(0);
        assert!(regions.regions().is_empty());
    }

    #[test]
    fn regions_stay_bounded() {
        let (file, at) = segment();
        let regions = VerifiedRegions::default();
        for i in (0..10).step_by(2) {
            regions
                .verify(&file, at[i], at[i + 1], at[10], 0..10)
                .unwrap()
                .unwrap();
        }
        assert_eq!(regions.regions().len(), 5);
        regions.remember(1_000_000, 1_000_001);
        regions.remember(2_000_000, 2_000_001);
        regions.remember(3_000_000, 3_000_001);
        regions.remember(4_000_000, 4_000_001);
        assert_eq!(regions.regions().len(), REGIONS_MAX);
    }
}
