//! Per-log settings, named after the Kafka topic configs they implement.

use strand_records::{TimestampType, WalkLimits};

/// When appended bytes reach the disk.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Durability {
    /// Kafka's default: the page cache, flushed by flush.messages / flush.ms (both off by
    /// default) and when segments roll; replication provides durability.
    PageCache,
    /// Every acknowledged batch is fdatasync'ed first; concurrent appends share one sync
    /// (group commit). Strand's `flush` mode.
    FlushBeforeAck,
}

#[derive(Debug, Clone)]
pub struct LogConfig {
    /// segment.bytes: roll when the active segment would exceed this.
    pub segment_bytes: u64,
    /// segment.ms: roll when the first batch of the active segment is this old.
    pub segment_ms: i64,
    /// segment.index.bytes: roll when the offset index would exceed this.
    pub segment_index_bytes: u64,
    /// index.interval.bytes: bytes between sparse index entries.
    pub index_interval_bytes: u64,
    /// max.message.bytes: the largest batch accepted.
    pub max_message_bytes: usize,
    /// message.timestamp.type.
    pub message_timestamp_type: TimestampType,
    /// flush.messages: fsync after this many messages (None = never, Kafka's default).
    pub flush_messages: Option<u64>,
    /// flush.ms: fsync when the oldest unflushed append is this old (None = never).
    pub flush_ms: Option<i64>,
    pub durability: Durability,
    /// Bound on decoding a compressed batch while validating it.
    pub walk_limits: WalkLimits,
    /// producer.id.expiration.ms: idle idempotent producers are forgotten after this.
    pub producer_id_expiration_ms: i64,
    /// cleanup.policy contains `delete`: old segments go by retention.ms / retention.bytes.
    pub cleanup_delete: bool,
    /// cleanup.policy contains `compact`: the cleaner keeps the latest record per key.
    pub cleanup_compact: bool,
    /// retention.ms (None: forever).
    pub retention_ms: Option<i64>,
    /// retention.bytes (None: unlimited).
    pub retention_bytes: Option<u64>,
    /// delete.retention.ms: how long tombstones survive compaction.
    pub delete_retention_ms: i64,
    /// min.compaction.lag.ms: records younger than this are not compacted.
    pub min_compaction_lag_ms: i64,
    /// min.cleanable.dirty.ratio
    pub min_cleanable_dirty_ratio: f64,
    /// segment.jitter.ms: each segment rolls up to this much before segment.ms (a
    /// per-segment amount, so partitions created together do not all roll at once).
    pub segment_jitter_ms: i64,
    /// max.compaction.lag.ms: a compacted log whose oldest uncompacted record is older
    /// than this is cleaned whatever its dirty ratio, and its active segment rolls by then.
    pub max_compaction_lag_ms: i64,
    /// message.timestamp.before.max.ms: a CreateTime record older than now minus this
    /// is refused (INVALID_TIMESTAMP).
    pub message_timestamp_before_max_ms: i64,
    /// message.timestamp.after.max.ms: a CreateTime record newer than now plus this is
    /// refused.
    pub message_timestamp_after_max_ms: i64,
    /// remote.storage.enable: sealed segments are copied to the remote store (tiered
    /// storage, KIP-405), and local retention deletes only what the store holds.
    pub remote_storage: bool,
    /// remote.log.copy.disable: no more copies; local segments then go by retention.ms /
    /// retention.bytes as without tiering (KIP-950), the remote ones by the same limits.
    pub remote_copy_disabled: bool,
    /// local.retention.ms, -2 (retention.ms) resolved; None: forever.
    pub local_retention_ms: Option<i64>,
    /// local.retention.bytes, -2 (retention.bytes) resolved; None: unlimited.
    pub local_retention_bytes: Option<u64>,
    /// remote.copy.lag.ms, -1 resolved to the effective local.retention.ms: a sealed
    /// segment is copied once its newest record is this old (Some(0): at once, whatever
    /// remote.copy.lag.bytes says; None: this check never passes).
    pub remote_copy_lag_ms: Option<i64>,
    /// remote.copy.lag.bytes, -1 resolved to the effective local.retention.bytes: a sealed
    /// segment is copied once this many bytes of the log are newer than it (Some(0): at
    /// once; None: this check never passes). Either check passing is enough, as Kafka's.
    pub remote_copy_lag_bytes: Option<u64>,
}

/// message.timestamp.after.max.ms's default since Kafka 4.0 (KIP-1030): one hour.
pub const MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT: i64 = 60 * 60 * 1000;

impl LogConfig {
    /// Whether segments are being copied to the remote store (and local deletion waits
    /// for their copy).
    pub fn tiered(&self) -> bool {
        self.remote_storage && !self.remote_copy_disabled
    }

    /// The age at which the segment starting at `base_offset` rolls: segment.ms (capped
    /// by max.compaction.lag.ms on compacted logs, as Kafka's maxSegmentMs), less the
    /// segment's jitter (a hash of its base offset below min(segment.jitter.ms,
    /// segment.ms), where Kafka draws a random number).
    pub fn roll_age_ms(&self, base_offset: i64) -> i64 {
        let segment_ms = if self.cleanup_compact && self.max_compaction_lag_ms > 0 {
            self.segment_ms.min(self.max_compaction_lag_ms)
        } else {
            self.segment_ms
        };
        let span = self.segment_jitter_ms.min(segment_ms);
        if span <= 0 {
            return segment_ms;
        }
        // splitmix64 of the base offset: spread evenly, the same after a restart.
        let mut z = (base_offset as u64).wrapping_add(0x9e37_79b9_7f4a_7c15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        segment_ms - (z % span as u64) as i64
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            segment_bytes: 1024 * 1024 * 1024,
            segment_ms: 7 * 24 * 60 * 60 * 1000,
            segment_index_bytes: 10 * 1024 * 1024,
            index_interval_bytes: 4096,
            max_message_bytes: 1024 * 1024 + 12,
            message_timestamp_type: TimestampType::CreateTime,
            flush_messages: None,
            flush_ms: None,
            durability: Durability::PageCache,
            walk_limits: WalkLimits::default(),
            producer_id_expiration_ms: crate::producer_state::PRODUCER_ID_EXPIRATION_MS_DEFAULT,
            cleanup_delete: true,
            cleanup_compact: false,
            retention_ms: Some(7 * 24 * 60 * 60 * 1000),
            retention_bytes: None,
            delete_retention_ms: 24 * 60 * 60 * 1000,
            min_compaction_lag_ms: 0,
            min_cleanable_dirty_ratio: 0.5,
            segment_jitter_ms: 0,
            max_compaction_lag_ms: i64::MAX,
            message_timestamp_before_max_ms: i64::MAX,
            message_timestamp_after_max_ms: MESSAGE_TIMESTAMP_AFTER_MAX_MS_DEFAULT,
            remote_storage: false,
            remote_copy_disabled: false,
            local_retention_ms: None,
            local_retention_bytes: None,
            remote_copy_lag_ms: Some(0),
            remote_copy_lag_bytes: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_roll_early_by_their_own_jitter_and_by_the_compaction_lag() {
        let plain = LogConfig {
            segment_ms: 1_000,
            ..LogConfig::default()
        };
        assert_eq!(plain.roll_age_ms(7), 1_000);
        let jittered = LogConfig {
            segment_jitter_ms: 400,
            ..plain.clone()
        };
        let ages: Vec<i64> = (0..50).map(|base| jittered.roll_age_ms(base)).collect();
        assert!(ages.iter().all(|age| (601..=1_000).contains(age)));
        assert!(ages.iter().any(|age| *age != ages[0]), "segments differ");
        assert_eq!(jittered.roll_age_ms(3), jittered.roll_age_ms(3), "stable");
        let compacted = LogConfig {
            cleanup_compact: true,
            max_compaction_lag_ms: 300,
            ..plain
        };
        assert_eq!(compacted.roll_age_ms(7), 300);
    }
}
