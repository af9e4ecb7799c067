//! Record batches in and out of the CLI: the records a Fetch returned, decoded (control
//! batches dropped, records before the asked offset skipped, aborted transactions left
//! out under read_committed as Kafka's consumer does), and the records `strand produce`
//! read, built into batches.

use kafka_protocol::messages::fetch_response::PartitionData;
use std::collections::HashSet;

use strand_records::{
    walk_stored_records, BatchView, TimestampType, WalkLimits, LOG_OVERHEAD_BYTES,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConsumedRecord {
    pub partition: i32,
    pub offset: i64,
    pub timestamp: i64,
    pub key: Option<Vec<u8>>,
    pub value: Option<Vec<u8>>,
    pub headers: Vec<(Vec<u8>, Option<Vec<u8>>)>,
}

/// An aborted transaction a read_committed Fetch reported: records of `producer_id` from
/// `first_offset` up to its abort marker are not to be shown.
#[derive(Debug, Clone, Copy)]
pub struct AbortedTransaction {
    pub producer_id: i64,
    pub first_offset: i64,
}

impl AbortedTransaction {
    /// The aborted transactions of a partition's Fetch answer (none under
    /// read_uncommitted).
    pub fn of(partition: &PartitionData) -> Vec<AbortedTransaction> {
        partition
            .aborted_transactions
            .iter()
            .flatten()
            .map(|a| AbortedTransaction {
                producer_id: a.producer_id.0,
                first_offset: a.first_offset,
            })
            .collect()
    }
}

pub struct Decoded {
    pub records: Vec<ConsumedRecord>,
    /// Where the next fetch starts: past the last whole batch seen (control batches and
    /// skipped ones included).
    pub next_offset: i64,
}

/// Decodes the whole batches in a fetched record set, from offset `from` on.
pub fn decode(
    partition: i32,
    mut bytes: &[u8],
    from: i64,
    mut aborted: Vec<AbortedTransaction>,
) -> anyhow::Result<Decoded> {
    aborted.sort_by_key(|a| a.first_offset);
    let mut pending_aborts = aborted.into_iter().peekable();
    let mut aborting: HashSet<i64> = HashSet::new();
    let mut records = Vec::new();
    let mut next_offset = from;
    while bytes.len() >= LOG_OVERHEAD_BYTES {
        let length = i32::from_be_bytes(bytes[8..12].try_into().unwrap());
        let total = LOG_OVERHEAD_BYTES + length.max(0) as usize;
        if total > bytes.len() {
            break; // a partial batch at the end of the fetch: asked for again next time
        }
        let batch = BatchView::parse(&bytes[..total])
            .map_err(|error| anyhow::anyhow!("partition {partition}: {error}"))?;
        bytes = &bytes[total..];
        let header = &batch.header;
        next_offset = next_offset.max(header.next_offset());
        while let Some(abort) = pending_aborts.next_if(|a| a.first_offset <= header.last_offset()) {
            aborting.insert(abort.producer_id);
        }
        if header.attributes.is_control() {
            // Any transaction marker ends the producer's aborted run (commit markers never
            // follow an aborted range, so removing on either is what Kafka's consumer does).
            aborting.remove(&header.producer_id);
            continue;
        }
        if header.attributes.is_transactional() && aborting.contains(&header.producer_id) {
            continue;
        }
        let log_append_time = header.attributes.timestamp_type() == TimestampType::LogAppendTime;
        let (base_offset, base_timestamp, max_timestamp) = (
            header.base_offset,
            header.base_timestamp,
            header.max_timestamp,
        );
        walk_stored_records(&batch, WalkLimits::default(), |record| {
            let offset = base_offset + record.offset_delta as i64;
            if offset < from {
                return;
            }
            records.push(ConsumedRecord {
                partition,
                offset,
                timestamp: if log_append_time {
                    max_timestamp
                } else {
                    base_timestamp + record.timestamp_delta
                },
                key: record.key.map(<[u8]>::to_vec),
                value: record.value.map(<[u8]>::to_vec),
                headers: record
                    .headers
                    .iter()
                    .map(|(key, value)| (key.to_vec(), value.map(<[u8]>::to_vec)))
                    .collect(),
            });
        })
        .map_err(|error| anyhow::anyhow!("partition {partition}: {error}"))?;
    }
    Ok(Decoded {
        records,
        next_offset,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use strand_records::{set_base_offset, BatchBuilder, EndTxnMarker, Header, Record, TxnResult};

    fn batch(base: i64, values: &[&str]) -> Vec<u8> {
        let mut builder = BatchBuilder::new(base, 1_000);
        for (i, value) in values.iter().enumerate() {
            builder.push(
                Record::new(
                    Some(b"k".to_vec()),
                    Some(value.as_bytes().to_vec()),
                    1_000 + i as i64,
                )
                .with_header(Header {
                    key: b"h".to_vec(),
                    value: Some(b"v".to_vec()),
                }),
            );
        }
        builder.build()
    }

    #[test]
    fn records_from_the_asked_offset_and_a_partial_batch_left_for_later() {
        let mut bytes = batch(0, &["a", "b", "c"]);
        bytes.extend(batch(3, &["d"]));
        let partial = batch(4, &["e"]);
        bytes.extend(&partial[..partial.len() - 3]);
        let decoded = decode(2, &bytes, 1, Vec::new()).unwrap();
        let values: Vec<_> = decoded
            .records
            .iter()
            .map(|r| r.value.clone().unwrap())
            .collect();
        assert_eq!(values, [b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
        assert_eq!(decoded.records[0].offset, 1);
        assert_eq!(decoded.records[0].timestamp, 1_001);
        assert_eq!(decoded.records[0].partition, 2);
        assert_eq!(
            decoded.records[0].headers,
            [(b"h".to_vec(), Some(b"v".to_vec()))]
        );
        assert_eq!(decoded.next_offset, 4);
    }

    #[test]
    fn aborted_transactions_and_markers_are_left_out() {
        let mut aborted = BatchBuilder::new(0, 1_000)
            .transactional()
            .producer(7, 0, 0);
        aborted.push(Record::new(None, Some(b"gone".to_vec()), 1_000));
        let mut bytes = aborted.build();
        let mut marker = EndTxnMarker {
            result: TxnResult::Abort,
            coordinator_epoch: 0,
        }
        .batch(7, 0, 1_000);
        set_base_offset(&mut marker, 1);
        bytes.extend(marker);
        bytes.extend(batch(2, &["kept"]));
        let decoded = decode(
            0,
            &bytes,
            0,
            vec![AbortedTransaction {
                producer_id: 7,
                first_offset: 0,
            }],
        )
        .unwrap();
        let values: Vec<_> = decoded
            .records
            .iter()
            .map(|r| r.value.clone().unwrap())
            .collect();
        assert_eq!(values, [b"kept".to_vec()]);
        // read_uncommitted: the same bytes show the aborted record, never the marker.
        let decoded = decode(0, &bytes, 0, Vec::new()).unwrap();
        assert_eq!(decoded.records.len(), 2);
        assert_eq!(decoded.next_offset, 3);
    }
}
