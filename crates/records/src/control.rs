//! Control records: the commit and abort markers a transaction coordinator has written
//! to every partition of a transaction (Kafka's EndTransactionMarker). A control batch
//! carries the control and transactional attribute bits, the producer's id and epoch, no
//! sequence, and one record: key = version (i16, 0) and type (i16: 0 abort, 1 commit);
//! value = version (i16, 0) and the coordinator epoch (i32), then possibly more fields of
//! later versions, which are skipped as Kafka skips them.

use crate::batch::BatchView;
use crate::builder::{BatchBuilder, Record};
use crate::error::RecordsError;
use crate::record_walk::{walk_stored_records, WalkLimits};

const CONTROL_KEY_VERSION: i16 = 0;
const MARKER_VALUE_VERSION: i16 = 0;
const ABORT: i16 = 0;
const COMMIT: i16 = 1;

/// How a transaction ended on a partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TxnResult {
    Abort,
    Commit,
}

/// A transaction marker as stored in a control batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EndTxnMarker {
    pub result: TxnResult,
    pub coordinator_epoch: i32,
}

impl EndTxnMarker {
    /// The marker's control batch for `producer_id` at `producer_epoch` (offsets are
    /// assigned by the log).
    pub fn batch(&self, producer_id: i64, producer_epoch: i16, timestamp: i64) -> Vec<u8> {
        let kind = match self.result {
            TxnResult::Abort => ABORT,
            TxnResult::Commit => COMMIT,
        };
        let mut key = Vec::with_capacity(4);
        key.extend_from_slice(&CONTROL_KEY_VERSION.to_be_bytes());
        key.extend_from_slice(&kind.to_be_bytes());
        let mut value = Vec::with_capacity(6);
        value.extend_from_slice(&MARKER_VALUE_VERSION.to_be_bytes());
        value.extend_from_slice(&self.coordinator_epoch.to_be_bytes());
        let mut builder = BatchBuilder::new(0, timestamp)
            .producer(producer_id, producer_epoch, -1)
            .control();
        builder.push(Record::new(Some(key), Some(value), timestamp));
        builder.build()
    }
}

/// The marker a control batch holds: `Ok(None)` for a control record of another type
/// (Kafka has others, e.g. leader-change records in its metadata log), an error for a
/// batch that is not a control batch or a marker that does not parse.
pub fn read_end_txn_marker(batch: &BatchView<'_>) -> Result<Option<EndTxnMarker>, RecordsError> {
    if !batch.header.attributes.is_control() {
        return Err(RecordsError::InvalidRecord(
            "not a control batch".to_string(),
        ));
    }
    let mut found: Option<Result<Option<EndTxnMarker>, RecordsError>> = None;
    walk_stored_records(batch, WalkLimits::default(), |record| {
        if found.is_none() {
            found = Some(parse_marker(record.key, record.value));
        }
    })?;
    found.unwrap_or_else(|| {
        Err(RecordsError::InvalidRecord(
            "a control batch without a record".to_string(),
        ))
    })
}

fn parse_marker(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
) -> Result<Option<EndTxnMarker>, RecordsError> {
    let invalid = |what: &str| RecordsError::InvalidRecord(format!("control record: {what}"));
    let key = key.ok_or_else(|| invalid("no key"))?;
    if key.len() < 4 {
        return Err(invalid("key shorter than 4 bytes"));
    }
    let kind = i16::from_be_bytes([key[2], key[3]]);
    let result = match kind {
        ABORT => TxnResult::Abort,
        COMMIT => TxnResult::Commit,
        _ => return Ok(None),
    };
    let value = value.ok_or_else(|| invalid("a marker without a value"))?;
    if value.len() < 6 {
        return Err(invalid("marker value shorter than 6 bytes"));
    }
    let coordinator_epoch = i32::from_be_bytes([value[2], value[3], value[4], value[5]]);
    Ok(Some(EndTxnMarker {
        result,
        coordinator_epoch,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markers_round_trip_in_a_control_batch_kafka_can_read() {
        for result in [TxnResult::Abort, TxnResult::Commit] {
            let marker = EndTxnMarker {
                result,
                coordinator_epoch: 7,
            };
            let bytes = marker.batch(42, 3, 1_000);
            let view = BatchView::parse(&bytes).unwrap();
            let header = view.header;
            assert!(header.attributes.is_control() && header.attributes.is_transactional());
            assert_eq!((header.producer_id, header.producer_epoch), (42, 3));
            assert_eq!(header.base_sequence, -1);
            assert_eq!(read_end_txn_marker(&view).unwrap(), Some(marker));
        }
    }

    #[test]
    fn a_later_value_version_is_read_and_other_control_types_are_not_markers() {
        // Kafka's EndTxnMarker value v1 appends fields; the epoch stays where it was.
        let value = [0u8, 1, 0, 0, 0, 9, 0xAA, 0xBB];
        assert_eq!(
            parse_marker(Some(&[0, 0, 0, 1]), Some(&value)).unwrap(),
            Some(EndTxnMarker {
                result: TxnResult::Commit,
                coordinator_epoch: 9
            })
        );
        assert_eq!(parse_marker(Some(&[0, 0, 0, 2]), None).unwrap(), None);
        assert!(parse_marker(None, None).is_err());
        assert!(parse_marker(Some(&[0, 0, 0, 0]), Some(&[0, 0])).is_err());
    }

    #[test]
    fn a_data_batch_is_not_a_marker() {
        let mut builder = BatchBuilder::new(0, 0).producer(1, 0, 0).transactional();
        builder.push(Record::new(None, Some(vec![1]), 0));
        let bytes = builder.build();
        let view = BatchView::parse(&bytes).unwrap();
        assert!(view.header.attributes.is_transactional());
        assert!(!view.header.attributes.is_control());
        assert!(read_end_txn_marker(&view).is_err());
    }
}
