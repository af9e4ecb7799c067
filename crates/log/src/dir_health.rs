//! One log directory's health, shared by every log in it. A storage failure in any of
//! them (a failed fsync, a write that cannot be undone) takes the whole directory offline,
//! as Kafka does: a disk that lost one file's writes is suspect for all of them. Its logs
//! then refuse writes and report themselves failed (so their replicas step down), and no
//! new partition is placed there, until a restart re-checks it.

use std::sync::OnceLock;

#[derive(Debug, Default)]
pub struct DirHealth {
    failure: OnceLock<String>,
}

impl DirHealth {
    /// Takes the directory offline; returns whether this call did (the first failure's
    /// reason is the one kept).
    pub fn fail(&self, reason: impl Into<String>) -> bool {
        self.failure.set(reason.into()).is_ok()
    }

    /// Why the directory is offline, if it is.
    pub fn failure(&self) -> Option<&str> {
        self.failure.get().map(String::as_str)
    }

    pub fn is_online(&self) -> bool {
        self.failure.get().is_none()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_failure_is_kept() {
        let health = DirHealth::default();
        assert!(health.is_online());
        assert!(health.fail("fsync failed"));
        assert!(!health.fail("another"));
        assert_eq!(health.failure(), Some("fsync failed"));
        assert!(!health.is_online());
    }
}
