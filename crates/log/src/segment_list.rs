//! A log's segments, ordered by base offset, never empty once built. A sorted `Vec`
//! rather than a `BTreeMap`: a B-tree leaf allocates room for eleven segments even when a
//! partition has one, which at 100,000 idle partitions is most of their memory.

use crate::segment::Segment;

#[derive(Debug, Default)]
pub struct SegmentList {
    segments: Vec<Segment>,
}

impl SegmentList {
    pub fn with_first(segment: Segment) -> SegmentList {
        // vec![x] allocates exactly one slot, as an idle partition should.
        SegmentList {
            segments: vec![segment],
        }
    }

    pub fn len(&self) -> usize {
        self.segments.len()
    }

    pub fn is_empty(&self) -> bool {
        self.segments.is_empty()
    }

    pub fn iter(&self) -> std::slice::Iter<'_, Segment> {
        self.segments.iter()
    }

    pub fn first(&self) -> Option<&Segment> {
        self.segments.first()
    }

    pub fn last(&self) -> Option<&Segment> {
        self.segments.last()
    }

    pub fn last_mut(&mut self) -> Option<&mut Segment> {
        self.segments.last_mut()
    }

    /// Appends a segment whose base is above every other's.
    pub fn push(&mut self, segment: Segment) {
        assert!(self
            .segments
            .last()
            .is_none_or(|last| last.base_offset() < segment.base_offset()));
        self.segments.push(segment);
    }

    /// Index of the last segment whose base offset is <= `offset` (0 if none is).
    pub fn floor_index(&self, offset: i64) -> usize {
        self.segments
            .partition_point(|segment| segment.base_offset() <= offset)
            .saturating_sub(1)
    }

    /// Segments from `index` on.
    pub fn iter_from(&self, index: usize) -> std::slice::Iter<'_, Segment> {
        self.segments[index.min(self.segments.len())..].iter()
    }

    pub fn iter_mut_from(&mut self, index: usize) -> std::slice::IterMut<'_, Segment> {
        let from = index.min(self.segments.len());
        self.segments[from..].iter_mut()
    }

    /// Removes and returns the segments from `index` on.
    pub fn split_off(&mut self, index: usize) -> Vec<Segment> {
        self.segments.split_off(index.min(self.segments.len()))
    }

    /// Removes and returns the first `count` segments.
    pub fn drain_front(&mut self, count: usize) -> Vec<Segment> {
        self.segments
            .drain(..count.min(self.segments.len()))
            .collect()
    }

    /// Replaces the segment with base offset `base` (compaction swaps).
    pub fn replace(&mut self, base: i64, segment: Segment) {
        if let Ok(index) = self
            .segments
            .binary_search_by_key(&base, Segment::base_offset)
        {
            self.segments[index] = segment;
        }
    }

    pub fn take_all(&mut self) -> Vec<Segment> {
        std::mem::take(&mut self.segments)
    }
}
