//! Retention for `cleanup.policy=delete`: whole segments go when every record in them is
//! older than retention.ms (by the segment's largest timestamp), or while the log is larger
//! than retention.bytes without them. The log start offset moves past a segment before its
//! files are deleted, so readers never see a hole; readers already holding the files keep
//! reading them. If every segment has expired, the active one is rolled first so that it
//! can go too (Kafka's rule), leaving an empty active segment at the log end.
//!
//! Tiered (remote.storage.enable, copies on): local.retention.ms / local.retention.bytes
//! decide instead, and no segment goes before the remote store holds all of it; the
//! broker applies retention.ms / retention.bytes to the remote copy.

use crate::error::LogResult;
use crate::log::Log;

/// What a retention pass removed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RetentionOutcome {
    pub segments_deleted: usize,
    pub bytes_deleted: u64,
}

impl Log {
    /// Applies retention.ms and retention.bytes. Runs from the manager's maintenance.
    pub fn apply_retention(&mut self, now_ms: i64) -> LogResult<RetentionOutcome> {
        if !self.config.cleanup_delete || self.is_offline() {
            return Ok(RetentionOutcome::default());
        }
        // Tiered: nothing the remote store does not hold yet (nothing while it is unknown).
        let remote_end = self
            .config
            .tiered()
            .then(|| self.remote_end.unwrap_or(i64::MIN));
        let deletable = self.deletable_segments(now_ms, remote_end);
        if deletable == 0 {
            return Ok(RetentionOutcome::default());
        }
        if deletable == self.segments.len() {
            // Everything expired, the active segment included: roll so it can go.
            let end = self.log_end_offset();
            self.roll(end)?;
        }
        let bytes: u64 = self
            .segments
            .iter()
            .take(deletable)
            .map(|s| s.size_bytes())
            .sum();
        let new_start = self
            .segments
            .iter()
            .nth(deletable)
            .map_or(self.log_end_offset(), |s| s.base_offset());
        self.delete_before(new_start.max(self.log_start_offset))?;
        Ok(RetentionOutcome {
            segments_deleted: deletable,
            bytes_deleted: bytes,
        })
    }

    /// Whether local retention holds back a segment only because the remote store is not
    /// known to hold it: a replica then needs a fresh listing of the store (and otherwise
    /// none, which keeps a follower's LISTs to about one per segment).
    pub fn retention_waits_on_remote(&self) -> bool {
        if !self.config.cleanup_delete || !self.config.tiered() || self.is_offline() {
            return false;
        }
        let now_ms = self.clock.now_ms();
        let known = self.remote_end.unwrap_or(i64::MIN);
        // Had the store every sealed segment (the active one is never copied).
        let all_sealed = self.active().base_offset();
        self.deletable_segments(now_ms, Some(all_sealed))
            > self.deletable_segments(now_ms, Some(known))
    }

    /// How many leading segments retention would delete: by its limits, then never past
    /// the high watermark, nor (tiered) past `remote_end`, how far the store reaches.
    fn deletable_segments(&self, now_ms: i64, remote_end: Option<i64>) -> usize {
        let config = &self.config;
        let tiered = remote_end.is_some();
        let (retention_ms, retention_bytes) = if tiered {
            (config.local_retention_ms, config.local_retention_bytes)
        } else {
            (config.retention_ms, config.retention_bytes)
        };
        let mut deletable = 0usize;
        if let Some(retention_ms) = retention_ms {
            let dir = self.dir.clone();
            deletable = self
                .segments
                .iter()
                .take_while(|s| {
                    !s.is_empty()
                        && s.retention_timestamp(&dir) < now_ms.saturating_sub(retention_ms)
                })
                .count();
        }
        if let Some(retention_bytes) = retention_bytes {
            let mut excess = self.size_bytes().saturating_sub(retention_bytes);
            let by_size = self
                .segments
                .iter()
                .take(self.segments.len().saturating_sub(1)) // never the active segment
                .take_while(|s| {
                    let fits = s.size_bytes() <= excess;
                    if fits {
                        excess -= s.size_bytes();
                    }
                    fits
                })
                .count();
            deletable = deletable.max(by_size);
        }
        // Never past the high watermark: what followers (and consumers) have not got yet stays.
        let high_watermark = self.high_watermark;
        let next_base = |log: &Log, index: usize| {
            log.segments
                .iter()
                .nth(index)
                .map_or(log.log_end_offset(), |s| s.base_offset())
        };
        let kept_from = remote_end.unwrap_or(high_watermark);
        while deletable > 0
            && next_base(self, deletable).min(self.log_end_offset()) > high_watermark.min(kept_from)
        {
            deletable -= 1;
        }
        deletable
    }
}
