//! `strand-lazyfs BACKING MOUNTPOINT`: mounts BACKING at MOUNTPOINT until SIGTERM or SIGINT
//! (a clean shutdown: dirty data written back, then unmounted). SIGKILL is a power cut:
//! the dirty data is lost, and the mount is left dead until `umount -l MOUNTPOINT`.

use std::path::PathBuf;
use std::time::Duration;

use clap::Parser;
use fuser::{Config, MountOption};
use strand_lazyfs::fs::LazyFs;

#[derive(Parser)]
#[command(
    about = "A FUSE file system that keeps file data in memory until fsync: kill -9 it to lose power"
)]
struct Args {
    /// The directory holding the files (the disk).
    backing: PathBuf,
    /// Where to mount it.
    mountpoint: PathBuf,
    /// Write back data dirty this long without fsync, as the kernel's flusher does after
    /// vm.dirty_expire_centisecs (30 s by default); 0 never writes it back.
    #[arg(long, default_value_t = 30)]
    writeback_secs: u64,
    /// Write back the oldest dirty files when more than this many MiB are dirty.
    #[arg(long, default_value_t = 1024)]
    max_dirty_mib: u64,
}

fn main() -> std::io::Result<()> {
    let mut args = Args::parse();
    // Absolute: the mount's name and every backing path are built from it.
    args.backing = std::fs::canonicalize(&args.backing)?;
    // Signals for the clean shutdown are taken synchronously by this thread; blocked
    // before any other thread starts so none of them takes one.
    let signals = shutdown_signals();
    let fs = LazyFs::new(args.backing.clone(), args.max_dirty_mib << 20);
    let mut config = Config::default();
    config.mount_options = vec![MountOption::FSName(format!(
        "strand-lazyfs:{}",
        args.backing.display()
    ))];
    let session = fuser::spawn_mount(fs.clone(), &args.mountpoint, &config)?;
    println!(
        "strand-lazyfs: {} mounted at {}",
        args.backing.display(),
        args.mountpoint.display()
    );
    if args.writeback_secs > 0 {
        let flusher = fs.clone();
        let age = Duration::from_secs(args.writeback_secs);
        std::thread::spawn(move || loop {
            std::thread::sleep(Duration::from_secs(1));
            if let Err(error) = flusher.write_back_older_than(age) {
                eprintln!("strand-lazyfs: write-back failed: {error}");
            }
        });
    }
    wait_for(&signals);
    fs.write_back_older_than(Duration::ZERO)?;
    session.umount_and_join()?;
    println!("strand-lazyfs: unmounted cleanly");
    Ok(())
}

fn shutdown_signals() -> libc::sigset_t {
    // SAFETY: a zeroed sigset_t is a valid argument to sigemptyset, which initialises it;
    // the set is then only passed to libc by reference.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut());
        set
    }
}

fn wait_for(signals: &libc::sigset_t) {
    let mut signal = 0;
    // SAFETY: `signals` is an initialised set and `signal` a valid place for the answer.
    unsafe { libc::sigwait(signals, &mut signal) };
}
