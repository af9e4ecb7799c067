//! What the coordinators' records share: Kafka's partitioning of a coordinator key
//! (`abs(key.hashCode) % partitions`) and the big-endian fields of Kafka's record schemas.

use bytes::{BufMut, Bytes, BytesMut};

/// Java's String.hashCode over UTF-16 code units, as Kafka partitions a group id or a
/// transactional id.
pub fn java_string_hash(text: &str) -> i32 {
    text.encode_utf16().fold(0i32, |hash, unit| {
        hash.wrapping_mul(31).wrapping_add(unit as i32)
    })
}

/// Kafka's Utils.abs: the absolute value, with i32::MIN mapped to 0.
pub fn partition_for(key: &str, partitions: i32) -> i32 {
    let hash = java_string_hash(key);
    let abs = if hash == i32::MIN { 0 } else { hash.abs() };
    abs % partitions
}

/// A non-null string: i16 length, then UTF-8.
pub(crate) fn put_string(out: &mut BytesMut, text: &str) {
    out.put_i16(text.len() as i16);
    out.put_slice(text.as_bytes());
}

/// Reads Kafka's fixed-width fields; None when the bytes run out.
/// Kafka's unsigned varint (the lengths and counts of flexible versions).
pub(crate) fn put_uvarint(out: &mut BytesMut, mut value: u32) {
    while value >= 0x80 {
        out.put_u8((value as u8) | 0x80);
        value >>= 7;
    }
    out.put_u8(value as u8);
}

/// A compact (flexible-version) string: length + 1 as a varint; 0 is null.
pub(crate) fn put_compact_nullable_string(out: &mut BytesMut, text: Option<&str>) {
    match text {
        Some(text) => {
            put_uvarint(out, text.len() as u32 + 1);
            out.put_slice(text.as_bytes());
        }
        None => put_uvarint(out, 0),
    }
}

pub(crate) fn put_compact_string(out: &mut BytesMut, text: &str) {
    put_compact_nullable_string(out, Some(text));
}

/// A compact array's length (count + 1).
pub(crate) fn put_compact_len(out: &mut BytesMut, count: usize) {
    put_uvarint(out, count as u32 + 1);
}

/// The end of a flexible struct: no tagged fields.
pub(crate) fn put_no_tags(out: &mut BytesMut) {
    put_uvarint(out, 0);
}

pub(crate) struct Reader<'a> {
    pub(crate) rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(rest: &'a [u8]) -> Reader<'a> {
        Reader { rest }
    }
    pub(crate) fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, tail) = self.rest.split_at_checked(n)?;
        self.rest = tail;
        Some(head)
    }
    pub(crate) fn i16(&mut self) -> Option<i16> {
        Some(i16::from_be_bytes(self.take(2)?.try_into().ok()?))
    }
    pub(crate) fn i32(&mut self) -> Option<i32> {
        Some(i32::from_be_bytes(self.take(4)?.try_into().ok()?))
    }
    pub(crate) fn i64(&mut self) -> Option<i64> {
        Some(i64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }
    pub(crate) fn nullable_string(&mut self) -> Option<Option<String>> {
        let length = self.i16()?;
        if length < 0 {
            return Some(None);
        }
        Some(Some(
            String::from_utf8_lossy(self.take(length as usize)?).into_owned(),
        ))
    }
    pub(crate) fn string(&mut self) -> Option<String> {
        self.nullable_string()?
    }
    pub(crate) fn i8(&mut self) -> Option<i8> {
        Some(self.take(1)?[0] as i8)
    }
    pub(crate) fn uvarint(&mut self) -> Option<u32> {
        let mut value = 0u32;
        for shift in (0..35).step_by(7) {
            let byte = self.take(1)?[0];
            value |= ((byte & 0x7f) as u32).checked_shl(shift)?;
            if byte & 0x80 == 0 {
                return Some(value);
            }
        }
        None
    }
    pub(crate) fn compact_nullable_string(&mut self) -> Option<Option<String>> {
        let length = self.uvarint()?;
        if length == 0 {
            return Some(None);
        }
        Some(Some(
            String::from_utf8_lossy(self.take(length as usize - 1)?).into_owned(),
        ))
    }
    pub(crate) fn compact_string(&mut self) -> Option<String> {
        self.compact_nullable_string()?
    }
    /// A compact array's element count, bounded by the bytes left (each element takes
    /// at least one), so a corrupt count cannot make a reader allocate.
    pub(crate) fn compact_len(&mut self) -> Option<usize> {
        let count = (self.uvarint()? as usize).checked_sub(1)?;
        (count <= self.rest.len()).then_some(count)
    }
    pub(crate) fn uuid(&mut self) -> Option<uuid::Uuid> {
        Some(uuid::Uuid::from_bytes(self.take(16)?.try_into().ok()?))
    }
    /// Skips a flexible struct's tagged fields (none this reads are tagged).
    pub(crate) fn skip_tags(&mut self) -> Option<()> {
        for _ in 0..self.uvarint()? {
            let _tag = self.uvarint()?;
            let size = self.uvarint()? as usize;
            self.take(size)?;
        }
        Some(())
    }
    pub(crate) fn bytes(&mut self) -> Option<Bytes> {
        let length = self.i32()?;
        if length < 0 {
            return Some(Bytes::new());
        }
        Some(Bytes::copy_from_slice(self.take(length as usize)?))
    }
}
