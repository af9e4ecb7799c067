//! A small tmpfs for full-disk tests, shared by the log's and the broker's test suites
//! (the broker's include this file by path).

use std::path::Path;
use std::process::Command;

/// A tmpfs of `size_kib` mounted on a directory for the guard's life.
pub struct SmallDisk<'a>(&'a Path);

impl<'a> SmallDisk<'a> {
    /// Mounts it, or `None` where mounting is not allowed (not root). Running as root
    /// with a failing mount is a broken test machine, not a reason to skip: it panics.
    pub fn mount(dir: &'a Path, size_kib: u32) -> Option<SmallDisk<'a>> {
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size_kib}k"), "tmpfs"])
            .arg(dir)
            .status()
            .is_ok_and(|status| status.success());
        if mounted {
            return Some(SmallDisk(dir));
        }
        eprintln!("SKIPPED: cannot mount a tmpfs here (not root?)");
        // SAFETY: geteuid has no preconditions.
        assert!(
            unsafe { libc::geteuid() } != 0,
            "running as root but the tmpfs mount failed"
        );
        None
    }
}

impl Drop for SmallDisk<'_> {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.0).status();
    }
}
