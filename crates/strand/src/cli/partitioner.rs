//! Kafka's default partitioner, so `strand produce` puts a key on the partition Java's
//! and librdkafka's (murmur2_random) producers put it: murmur2 of the key with Kafka's
//! seed, made positive, modulo the partition count. Keyless records stick to one
//! partition until batch.size bytes went there or the batch was sent, then move on to
//! the next (Kafka's sticky partitioner, KIP-480 and KIP-794).

/// Kafka's producer default batch.size.
const BATCH_SIZE: usize = 16 * 1024;

pub struct Partitioner {
    partitions: i32,
    sticky: i32,
    /// Bytes of keyless records sent to `sticky` since it was chosen.
    sticky_bytes: usize,
}

impl Partitioner {
    pub fn new(partitions: i32, start: i32) -> Partitioner {
        Partitioner {
            partitions,
            sticky: start.rem_euclid(partitions.max(1)),
            sticky_bytes: 0,
        }
    }

    /// The partition of a record with `key` and `size` bytes.
    pub fn partition(&mut self, key: Option<&[u8]>, size: usize) -> i32 {
        match key {
            Some(key) => keyed_partition(key, self.partitions),
            None => {
                if self.sticky_bytes >= BATCH_SIZE {
                    self.next_batch();
                }
                self.sticky_bytes += size;
                self.sticky
            }
        }
    }

    /// A batch went out: keyless records go to the next partition.
    pub fn next_batch(&mut self) {
        self.sticky = (self.sticky + 1) % self.partitions.max(1);
        self.sticky_bytes = 0;
    }
}

pub fn keyed_partition(key: &[u8], partitions: i32) -> i32 {
    let hash = murmur2::murmur2(key, murmur2::KAFKA_SEED) & 0x7fff_ffff;
    (hash % partitions.max(1) as u32) as i32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's own vectors (UtilsTest.testMurmur2): a key lands where Java puts it.
    #[test]
    fn keys_hash_as_kafkas_murmur2() {
        let vectors: [(&[u8], i32); 4] = [
            (b"21", -973932308),
            (b"foobar", -790332482),
            (b"a-little-bit-long-string", -985981536),
            (b"abc", 479470107),
        ];
        for (key, hash) in vectors {
            assert_eq!(murmur2::murmur2(key, murmur2::KAFKA_SEED) as i32, hash);
        }
        assert_eq!(keyed_partition(b"abc", 10), 479470107 % 10);
        assert_eq!(keyed_partition(b"21", 7), (-973932308i32 & 0x7fff_ffff) % 7);
    }

    #[test]
    fn keyless_records_stick_per_batch_or_batch_size() {
        let mut partitioner = Partitioner::new(3, 2);
        assert_eq!(partitioner.partition(None, 10), 2);
        partitioner.next_batch();
        assert_eq!(partitioner.partition(None, 10), 0);
        assert_eq!(partitioner.partition(None, BATCH_SIZE), 0);
        assert_eq!(partitioner.partition(None, 10), 1);
        assert_eq!(
            partitioner.partition(Some(b"abc"), 10),
            keyed_partition(b"abc", 3)
        );
    }
}
