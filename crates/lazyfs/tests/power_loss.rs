//! The mounted file system against the kernel: what kill -9 (a power cut) keeps and loses,
//! and what a clean shutdown keeps. Needs root and /dev/fuse (as the nemesis does); says so
//! and passes vacuously without them.

use std::fs::{self, OpenOptions};
use std::io::Write;
use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn fuse_available() -> bool {
    // SAFETY: geteuid has no preconditions.
    let root = unsafe { libc::geteuid() } == 0;
    root && OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/fuse")
        .is_ok()
}

fn mounted(mountpoint: &Path) -> bool {
    let wanted = mountpoint.to_str().unwrap();
    fs::read_to_string("/proc/mounts")
        .unwrap()
        .lines()
        .any(|line| line.split(' ').nth(1) == Some(wanted))
}

fn mount(backing: &Path, mountpoint: &Path) -> Child {
    let child = Command::new(env!("CARGO_BIN_EXE_strand-lazyfs"))
        .args([backing, mountpoint])
        .args(["--writeback-secs", "0"])
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    while !mounted(mountpoint) {
        assert!(Instant::now() < deadline, "not mounted within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
    child
}

#[test]
fn a_power_cut_loses_exactly_what_was_not_fsynced() {
    if !fuse_available() {
        eprintln!("skipped: needs root and /dev/fuse");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (backing, mountpoint) = (dir.path().join("disk"), dir.path().join("mnt"));
    fs::create_dir_all(&backing).unwrap();
    fs::create_dir_all(&mountpoint).unwrap();
    // I/O on a mount whose server is stuck waits forever: a deadline that fails the test
    // (detaching the mount, so nothing is left behind) instead of hanging the suite.
    let watched = mountpoint.clone();
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(120));
        let _ = Command::new("umount").arg("-l").arg(&watched).status();
        eprintln!("the mount test did not finish within 120 s");
        std::process::exit(1);
    });

    let mut fs_process = mount(&backing, &mountpoint);
    let mut file = OpenOptions::new()
        .create(true)
        .append(true)
        .open(mountpoint.join("log"))
        .unwrap();
    file.write_all(b"synced;").unwrap();
    file.sync_data().unwrap();
    file.write_all(b"in the page cache").unwrap();
    assert_eq!(
        fs::read(mountpoint.join("log")).unwrap(),
        b"synced;in the page cache"
    );
    fs::create_dir(mountpoint.join("d")).unwrap();
    fs::write(mountpoint.join("d/new"), b"never synced").unwrap();
    fs::rename(mountpoint.join("d/new"), mountpoint.join("d/renamed")).unwrap();
    drop(file);

    // Power cut: the process holding the dirty data dies.
    fs_process.kill().unwrap();
    fs_process.wait().unwrap();
    assert!(Command::new("umount")
        .arg("-l")
        .arg(&mountpoint)
        .status()
        .unwrap()
        .success());
    assert_eq!(fs::read(backing.join("log")).unwrap(), b"synced;");
    // Names survive (this file system keeps them at once); their unsynced data does not.
    assert_eq!(fs::read(backing.join("d/renamed")).unwrap(), b"");

    // Powered on again, then a clean shutdown: written data reaches the disk unsynced.
    let mut fs_process = mount(&backing, &mountpoint);
    assert_eq!(fs::read(mountpoint.join("log")).unwrap(), b"synced;");
    fs::write(mountpoint.join("log"), b"rewritten").unwrap();
    // SAFETY: signalling our own child.
    unsafe { libc::kill(fs_process.id() as i32, libc::SIGTERM) };
    assert!(fs_process.wait().unwrap().success());
    assert!(!mounted(&mountpoint));
    assert_eq!(fs::read(backing.join("log")).unwrap(), b"rewritten");
}
