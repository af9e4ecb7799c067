//! Authorized-operations bitfields (KIP-430) for Metadata, DescribeCluster, DescribeGroups
//! and ConsumerGroupDescribe. Strand has no ACLs yet, so every operation a resource type
//! supports is authorized; a request that does not ask gets i32::MIN, as from Kafka.

/// "Not requested".
pub const OMITTED: i32 = i32::MIN;

// Kafka's AclOperation codes.
const READ: u32 = 3;
const WRITE: u32 = 4;
const CREATE: u32 = 5;
const DELETE: u32 = 6;
const ALTER: u32 = 7;
const DESCRIBE: u32 = 8;
const CLUSTER_ACTION: u32 = 9;
const DESCRIBE_CONFIGS: u32 = 10;
const ALTER_CONFIGS: u32 = 11;
const IDEMPOTENT_WRITE: u32 = 12;

fn bits(operations: &[u32]) -> i32 {
    operations.iter().fold(0, |acc, op| acc | (1 << op))
}

pub fn topic(requested: bool) -> i32 {
    if requested {
        bits(&[
            READ,
            WRITE,
            CREATE,
            DELETE,
            ALTER,
            DESCRIBE,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
        ])
    } else {
        OMITTED
    }
}

pub fn group(requested: bool) -> i32 {
    if requested {
        bits(&[READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS])
    } else {
        OMITTED
    }
}

pub fn cluster(requested: bool) -> i32 {
    if requested {
        bits(&[
            CREATE,
            ALTER,
            DESCRIBE,
            CLUSTER_ACTION,
            DESCRIBE_CONFIGS,
            ALTER_CONFIGS,
            IDEMPOTENT_WRITE,
        ])
    } else {
        OMITTED
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn groups_get_kafkas_five_operations() {
        // READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS, as Kafka 4.1 answers.
        assert_eq!(
            super::group(true),
            (1 << 3) | (1 << 6) | (1 << 8) | (1 << 10) | (1 << 11)
        );
        assert_eq!(super::group(false), i32::MIN);
    }
}
