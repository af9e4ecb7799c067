//! Batch compression codecs: ids 0..=4 of the attributes field. Decoding is streaming
//! (a `Read`), so a caller bounds memory by how much it reads, never by what the peer
//! claims. Snappy from Java clients uses xerial framing; raw snappy is accepted too, as
//! Kafka's own reader does.

use std::io::{self, Read};

use crate::error::RecordsError;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compression {
    None,
    Gzip,
    Snappy,
    Lz4,
    Zstd,
}

impl Compression {
    pub fn from_id(id: u8) -> Result<Compression, RecordsError> {
        match id {
            0 => Ok(Compression::None),
            1 => Ok(Compression::Gzip),
            2 => Ok(Compression::Snappy),
            3 => Ok(Compression::Lz4),
            4 => Ok(Compression::Zstd),
            other => Err(RecordsError::UnknownCompression(other)),
        }
    }

    pub fn id(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Gzip => 1,
            Compression::Snappy => 2,
            Compression::Lz4 => 3,
            Compression::Zstd => 4,
        }
    }

    /// A streaming decoder over `payload`.
    pub fn decoder<'a>(self, payload: &'a [u8]) -> io::Result<Box<dyn Read + 'a>> {
        Ok(match self {
            Compression::None => Box::new(payload),
            Compression::Gzip => Box::new(flate2::read::MultiGzDecoder::new(payload)),
            Compression::Snappy => Box::new(SnappyReader::new(payload)),
            Compression::Lz4 => Box::new(lz4_flex::frame::FrameDecoder::new(payload)),
            Compression::Zstd => Box::new(zstd::stream::read::Decoder::with_buffer(payload)?),
        })
    }
}

/// Compresses `plain` with `codec` in the framing Kafka clients use.
pub fn compress(codec: Compression, plain: &[u8]) -> Vec<u8> {
    use std::io::Write;
    match codec {
        Compression::None => plain.to_vec(),
        Compression::Gzip => {
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
            // Writing into a Vec cannot fail.
            encoder.write_all(plain).expect("write to Vec");
            encoder.finish().expect("finish into Vec")
        }
        Compression::Snappy => {
            let mut out = XERIAL_HEADER.to_vec();
            let mut encoder = snap::raw::Encoder::new();
            for chunk in plain.chunks(XERIAL_BLOCK_BYTES) {
                // Input chunks are far below snappy's 4 GiB limit.
                let block = encoder.compress_vec(chunk).expect("snappy block");
                out.extend_from_slice(&(block.len() as i32).to_be_bytes());
                out.extend_from_slice(&block);
            }
            out
        }
        Compression::Lz4 => {
            let mut encoder = lz4_flex::frame::FrameEncoder::new(Vec::new());
            encoder.write_all(plain).expect("write to Vec");
            encoder.finish().expect("finish into Vec")
        }
        Compression::Zstd => zstd::bulk::compress(plain, 3).expect("zstd into Vec"),
    }
}

/// xerial snappy-java stream header: magic, then version 1 and compatible version 1.
const XERIAL_HEADER: [u8; 16] = [
    0x82, b'S', b'N', b'A', b'P', b'P', b'Y', 0, 0, 0, 0, 1, 0, 0, 0, 1,
];
const XERIAL_MAGIC_BYTES: usize = 8;
/// snappy-java's default block size when writing.
const XERIAL_BLOCK_BYTES: usize = 32 * 1024;
/// A snappy block may not claim to decompress to more than this (snappy-java never writes
/// blocks above its 32 KiB default; 4 MiB leaves room for other writers).
const SNAPPY_BLOCK_DECOMPRESSED_MAX_BYTES: usize = 4 * 1024 * 1024;

/// Reads xerial-framed snappy (or one raw snappy block) one block at a time; memory is
/// bounded by one block.
struct SnappyReader<'a> {
    rest: &'a [u8],
    framed: bool,
    block: Vec<u8>,
    block_position: usize,
    decoder: snap::raw::Decoder,
}

impl<'a> SnappyReader<'a> {
    fn new(payload: &'a [u8]) -> Self {
        let framed = payload.len() >= XERIAL_HEADER.len()
            && payload[..XERIAL_MAGIC_BYTES] == XERIAL_HEADER[..XERIAL_MAGIC_BYTES];
        let rest = if framed {
            &payload[XERIAL_HEADER.len()..]
        } else {
            payload
        };
        SnappyReader {
            rest,
            framed,
            block: Vec::new(),
            block_position: 0,
            decoder: snap::raw::Decoder::new(),
        }
    }

    fn next_block(&mut self) -> io::Result<bool> {
        if self.rest.is_empty() {
            return Ok(false);
        }
        let compressed = if self.framed {
            if self.rest.len() < 4 {
                return Err(invalid("truncated xerial block length"));
            }
            let length =
                i32::from_be_bytes([self.rest[0], self.rest[1], self.rest[2], self.rest[3]]);
            if length < 0 || length as usize > self.rest.len() - 4 {
                return Err(invalid("xerial block length beyond the payload"));
            }
            let block = &self.rest[4..4 + length as usize];
            self.rest = &self.rest[4 + length as usize..];
            block
        } else {
            std::mem::take(&mut self.rest)
        };
        let decompressed_len = snap::raw::decompress_len(compressed).map_err(io::Error::other)?;
        if decompressed_len > SNAPPY_BLOCK_DECOMPRESSED_MAX_BYTES {
            return Err(invalid("snappy block claims more than the block bound"));
        }
        self.block.resize(decompressed_len, 0);
        let written = self
            .decoder
            .decompress(compressed, &mut self.block)
            .map_err(io::Error::other)?;
        self.block.truncate(written);
        self.block_position = 0;
        Ok(true)
    }
}

impl Read for SnappyReader<'_> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        while self.block_position == self.block.len() {
            if !self.next_block()? {
                return Ok(0);
            }
        }
        let available = &self.block[self.block_position..];
        let count = available.len().min(out.len());
        out[..count].copy_from_slice(&available[..count]);
        self.block_position += count;
        Ok(count)
    }
}

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    const CODECS: [Compression; 5] = [
        Compression::None,
        Compression::Gzip,
        Compression::Snappy,
        Compression::Lz4,
        Compression::Zstd,
    ];

    #[test]
    fn every_codec_round_trips() {
        let plain: Vec<u8> = (0..100_000u32)
            .flat_map(|n| (n % 251).to_le_bytes())
            .collect();
        for codec in CODECS {
            let packed = compress(codec, &plain);
            let mut unpacked = Vec::new();
            codec
                .decoder(&packed)
                .unwrap()
                .read_to_end(&mut unpacked)
                .unwrap();
            assert_eq!(unpacked, plain, "{codec:?}");
        }
    }

    #[test]
    fn raw_snappy_without_xerial_framing_is_read() {
        let plain = b"hello hello hello hello".repeat(10);
        let raw = snap::raw::Encoder::new().compress_vec(&plain).unwrap();
        let mut unpacked = Vec::new();
        Compression::Snappy
            .decoder(&raw)
            .unwrap()
            .read_to_end(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked, plain);
    }

    #[test]
    fn multi_member_gzip_is_read_whole() {
        let mut packed = compress(Compression::Gzip, b"first ");
        packed.extend(compress(Compression::Gzip, b"second"));
        let mut unpacked = Vec::new();
        Compression::Gzip
            .decoder(&packed)
            .unwrap()
            .read_to_end(&mut unpacked)
            .unwrap();
        assert_eq!(unpacked, b"first second");
    }

    #[test]
    fn garbage_gives_errors_not_panics() {
        let garbage: Vec<u8> = (0..512u32).map(|n| (n * 7 % 256) as u8).collect();
        for codec in CODECS {
            if let Ok(mut reader) = codec.decoder(&garbage) {
                let mut sink = Vec::new();
                let _ = reader.read_to_end(&mut sink);
            }
        }
    }
}
