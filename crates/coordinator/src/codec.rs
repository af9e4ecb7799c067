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
    pub(crate) fn bytes(&mut self) -> Option<Bytes> {
        let length = self.i32()?;
        if length < 0 {
            return Some(Bytes::new());
        }
        Some(Bytes::copy_from_slice(self.take(length as usize)?))
    }
}
