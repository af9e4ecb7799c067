//! The records the transaction coordinator writes to `__transaction_state`, in Kafka's
//! formats (docs/design/transactions.md, 6): key version 0 (the transactional id), value
//! version 0 (transaction version 0) or 1 (flexible, with tagged fields), so Kafka's tools
//! read the topic. A null value is a tombstone (the id expired). Strand writes tags 0 and
//! 1 (previous and next producer id) when set, as Kafka after 4.0 does; Kafka 4.0 reads
//! them and writes neither.

use std::collections::{BTreeMap, BTreeSet};

use bytes::{BufMut, BytesMut};

use super::state::TxnState;
use crate::codec::{put_string, put_uvarint, Reader};

pub const TRANSACTION_STATE_TOPIC: &str = "__transaction_state";
/// transaction.state.log.num.partitions
pub const TRANSACTION_STATE_PARTITIONS: i32 = 50;

const TAG_PREVIOUS_PRODUCER_ID: u32 = 0;
const TAG_NEXT_PRODUCER_ID: u32 = 1;
const TAG_CLIENT_TRANSACTION_VERSION: u32 = 2;

/// What a value record holds of a transactional id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredTxn {
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub timeout_ms: i32,
    pub state: TxnState,
    /// topic -> partitions (empty in Empty, where the record holds null).
    pub partitions: BTreeMap<String, BTreeSet<i32>>,
    pub last_update_ms: i64,
    /// -1 in Empty.
    pub start_ms: i64,
    pub previous_producer_id: i64,
    pub next_producer_id: i64,
    pub client_transaction_version: i16,
}

pub fn key(transactional_id: &str) -> Vec<u8> {
    let mut out = BytesMut::new();
    out.put_i16(0);
    put_string(&mut out, transactional_id);
    out.to_vec()
}

/// The value record, version 0 or 1 (the cluster's transaction version decides: 0 for
/// transaction version 0, else 1).
pub fn value(txn: &StoredTxn, version: i16) -> Vec<u8> {
    let flexible = version >= 1;
    let mut out = BytesMut::new();
    out.put_i16(version);
    out.put_i64(txn.producer_id);
    out.put_i16(txn.producer_epoch);
    out.put_i32(txn.timeout_ms);
    out.put_i8(txn.state.id());
    if txn.state == TxnState::Empty {
        put_len(&mut out, None, flexible);
    } else {
        put_len(&mut out, Some(txn.partitions.len()), flexible);
        for (topic, partitions) in &txn.partitions {
            if flexible {
                put_uvarint(&mut out, topic.len() as u32 + 1);
                out.put_slice(topic.as_bytes());
            } else {
                put_string(&mut out, topic);
            }
            put_len(&mut out, Some(partitions.len()), flexible);
            for partition in partitions {
                out.put_i32(*partition);
            }
            if flexible {
                put_uvarint(&mut out, 0); // the entry's tagged fields: none
            }
        }
    }
    out.put_i64(txn.last_update_ms);
    out.put_i64(txn.start_ms);
    if flexible {
        let mut tags: Vec<(u32, Vec<u8>)> = Vec::new();
        if txn.previous_producer_id != -1 {
            tags.push((
                TAG_PREVIOUS_PRODUCER_ID,
                txn.previous_producer_id.to_be_bytes().to_vec(),
            ));
        }
        if txn.next_producer_id != -1 {
            tags.push((
                TAG_NEXT_PRODUCER_ID,
                txn.next_producer_id.to_be_bytes().to_vec(),
            ));
        }
        if txn.client_transaction_version != 0 {
            tags.push((
                TAG_CLIENT_TRANSACTION_VERSION,
                txn.client_transaction_version.to_be_bytes().to_vec(),
            ));
        }
        put_uvarint(&mut out, tags.len() as u32);
        for (tag, data) in tags {
            put_uvarint(&mut out, tag);
            put_uvarint(&mut out, data.len() as u32);
            out.put_slice(&data);
        }
    }
    out.to_vec()
}

/// The transactional id a key names; None for a key version this does not know (Kafka
/// skips those while loading).
pub fn decode_key(key: &[u8]) -> Option<String> {
    let mut reader = Reader::new(key);
    if reader.i16()? != 0 {
        return None;
    }
    reader.string()
}

/// A value record; None for an unknown version or damaged bytes (a load fails on it).
pub fn decode_value(value: &[u8]) -> Option<StoredTxn> {
    let mut reader = Reader::new(value);
    let version = reader.i16()?;
    if !(0..=1).contains(&version) {
        return None;
    }
    let flexible = version == 1;
    let producer_id = reader.i64()?;
    let producer_epoch = reader.i16()?;
    let timeout_ms = reader.i32()?;
    let state = TxnState::from_id(i8::from_be_bytes(reader.take(1)?.try_into().ok()?))?;
    let mut partitions = BTreeMap::new();
    if let Some(topics) = read_len(&mut reader, flexible)? {
        for _ in 0..topics {
            let topic = if flexible {
                let length = reader.uvarint()?.checked_sub(1)? as usize;
                String::from_utf8(reader.take(length)?.to_vec()).ok()?
            } else {
                reader.string()?
            };
            let count = read_len(&mut reader, flexible)?.unwrap_or(0);
            let mut set = BTreeSet::new();
            for _ in 0..count {
                set.insert(reader.i32()?);
            }
            if flexible {
                reader.skip_tags()?;
            }
            partitions
                .entry(topic)
                .or_insert_with(BTreeSet::new)
                .extend(set);
        }
    }
    let last_update_ms = reader.i64()?;
    let start_ms = reader.i64()?;
    let mut txn = StoredTxn {
        producer_id,
        producer_epoch,
        timeout_ms,
        state,
        // A reader ignores the partitions of an Empty record.
        partitions: if state == TxnState::Empty {
            BTreeMap::new()
        } else {
            partitions
        },
        last_update_ms,
        start_ms,
        previous_producer_id: -1,
        next_producer_id: -1,
        client_transaction_version: 0,
    };
    if flexible {
        for _ in 0..reader.uvarint()? {
            let tag = reader.uvarint()?;
            let size = reader.uvarint()? as usize;
            let data = reader.take(size)?;
            match tag {
                TAG_PREVIOUS_PRODUCER_ID => {
                    txn.previous_producer_id = i64::from_be_bytes(data.try_into().ok()?)
                }
                TAG_NEXT_PRODUCER_ID => {
                    txn.next_producer_id = i64::from_be_bytes(data.try_into().ok()?)
                }
                TAG_CLIENT_TRANSACTION_VERSION => {
                    txn.client_transaction_version = i16::from_be_bytes(data.try_into().ok()?)
                }
                _ => {} // a later version's field
            }
        }
    }
    Some(txn)
}

/// An array length: i32 (-1 null) in version 0, uvarint length+1 (0 null) when flexible.
fn put_len(out: &mut BytesMut, len: Option<usize>, flexible: bool) {
    match (len, flexible) {
        (None, false) => out.put_i32(-1),
        (Some(len), false) => out.put_i32(len as i32),
        (None, true) => put_uvarint(out, 0),
        (Some(len), true) => put_uvarint(out, len as u32 + 1),
    }
}

fn read_len(reader: &mut Reader<'_>, flexible: bool) -> Option<Option<u32>> {
    if flexible {
        let raw = reader.uvarint()?;
        return Some(raw.checked_sub(1));
    }
    let len = reader.i32()?;
    Some(u32::try_from(len).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ongoing() -> StoredTxn {
        StoredTxn {
            producer_id: 1000,
            producer_epoch: 5,
            timeout_ms: 60_000,
            state: TxnState::Ongoing,
            partitions: BTreeMap::from([("t".to_string(), BTreeSet::from([0]))]),
            last_update_ms: 0x0102,
            start_ms: 0x0101,
            previous_producer_id: -1,
            next_producer_id: -1,
            client_transaction_version: 2,
        }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02X}")).collect()
    }

    #[test]
    fn a_flexible_value_is_byte_for_byte_kafkas() {
        // The example of docs/design/transactions.md 6.5.
        let expected = concat!(
            "0001",
            "00000000000003E8",
            "0005",
            "0000EA60",
            "01",
            "02",
            "0274",
            "02",
            "00000000",
            "00",
            "0000000000000102",
            "0000000000000101",
            "01",
            "02",
            "02",
            "0002"
        );
        assert_eq!(hex(&value(&ongoing(), 1)), expected);
        assert_eq!(decode_value(&value(&ongoing(), 1)), Some(ongoing()));
    }

    #[test]
    fn version_0_values_and_keys_round_trip_and_empty_holds_null_partitions() {
        let mut txn = ongoing();
        txn.client_transaction_version = 0;
        assert_eq!(decode_value(&value(&txn, 0)), Some(txn.clone()));
        txn.state = TxnState::Empty;
        txn.partitions.clear();
        txn.start_ms = -1;
        let bytes = value(&txn, 0);
        // Version, pid, epoch, timeout, status, then the null partitions array (-1).
        assert_eq!(&bytes[17..21], &(-1i32).to_be_bytes());
        assert_eq!(decode_value(&bytes), Some(txn));
        assert_eq!(hex(&key("app")), "00000003617070");
        assert_eq!(decode_key(&key("app")).as_deref(), Some("app"));
        assert_eq!(
            decode_key(&[0, 1, 0, 0]),
            None,
            "another key version is skipped"
        );
    }

    #[test]
    fn producer_id_tags_survive_and_unknown_versions_and_damage_are_refused() {
        let mut txn = ongoing();
        txn.previous_producer_id = 999;
        txn.next_producer_id = 1001;
        txn.state = TxnState::PrepareCommit;
        assert_eq!(decode_value(&value(&txn, 1)), Some(txn.clone()));
        let mut newer = value(&txn, 1);
        newer[1] = 2;
        assert_eq!(decode_value(&newer), None);
        let whole = value(&txn, 1);
        for cut in 0..whole.len() {
            assert_eq!(decode_value(&whole[..cut]), None, "cut at {cut}");
        }
    }

    #[test]
    fn transactional_ids_land_on_kafkas_partitions() {
        // Java: "my-group".hashCode() == -1906497762, Utils.abs -> 1906497762, % 50 == 12.
        assert_eq!(crate::codec::java_string_hash("my-group"), -1_906_497_762);
        let partition = |id| crate::codec::partition_for(id, TRANSACTION_STATE_PARTITIONS);
        assert_eq!(partition("my-group"), 12);
        assert_eq!(partition("txn-1"), 10);
    }
}
