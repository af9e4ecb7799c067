//! Zig-zag varints as Kafka's record format uses them (protobuf encoding).
//! Readers return `None` on truncation or overlong encodings instead of panicking.

/// Reads a zig-zag varint (at most 5 bytes) from the front of `buf`.
/// Returns the value and the number of bytes used.
pub fn read_varint(buf: &[u8]) -> Option<(i32, usize)> {
    let (raw, used) = read_unsigned(buf, 5)?;
    if raw > u32::MAX as u64 {
        return None;
    }
    let raw = raw as u32;
    Some((((raw >> 1) as i32) ^ -((raw & 1) as i32), used))
}

/// Reads a zig-zag varlong (at most 10 bytes) from the front of `buf`.
pub fn read_varlong(buf: &[u8]) -> Option<(i64, usize)> {
    let (raw, used) = read_unsigned(buf, 10)?;
    Some((((raw >> 1) as i64) ^ -((raw & 1) as i64), used))
}

fn read_unsigned(buf: &[u8], max_bytes: usize) -> Option<(u64, usize)> {
    let mut value: u64 = 0;
    for (index, byte) in buf.iter().take(max_bytes).enumerate() {
        value |= ((byte & 0x7f) as u64) << (7 * index);
        if byte & 0x80 == 0 {
            return Some((value, index + 1));
        }
    }
    None
}

pub fn write_varint(out: &mut Vec<u8>, value: i32) {
    write_unsigned(out, ((value << 1) ^ (value >> 31)) as u32 as u64);
}

pub fn write_varlong(out: &mut Vec<u8>, value: i64) {
    write_unsigned(out, ((value << 1) ^ (value >> 63)) as u64);
}

fn write_unsigned(out: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        out.push((value as u8) | 0x80);
        value >>= 7;
    }
    out.push(value as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn varint_round_trips(value: i32) {
            let mut out = Vec::new();
            write_varint(&mut out, value);
            prop_assert_eq!(read_varint(&out), Some((value, out.len())));
        }

        #[test]
        fn varlong_round_trips(value: i64) {
            let mut out = Vec::new();
            write_varlong(&mut out, value);
            prop_assert_eq!(read_varlong(&out), Some((value, out.len())));
        }

        #[test]
        fn readers_never_panic(bytes: Vec<u8>) {
            let _ = read_varint(&bytes);
            let _ = read_varlong(&bytes);
        }
    }

    #[test]
    fn known_encodings() {
        assert_eq!(read_varint(&[0x00]), Some((0, 1)));
        assert_eq!(read_varint(&[0x01]), Some((-1, 1)));
        assert_eq!(read_varint(&[0x02]), Some((1, 1)));
        assert_eq!(read_varint(&[0xac, 0x02]), Some((150, 2)));
        assert_eq!(read_varint(&[0x80]), None, "truncated");
        assert_eq!(
            read_varint(&[0x80, 0x80, 0x80, 0x80, 0x80, 0x01]),
            None,
            "overlong"
        );
    }
}
