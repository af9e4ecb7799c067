//! A file system that loses power, for tests: a FUSE passthrough over a backing directory
//! that keeps written file data in its own memory until the file is fsynced (as the page
//! cache keeps dirty pages), so SIGKILL to this process loses exactly what a power cut
//! would. The nemesis' power-loss fault mounts each node's data directory through it
//! (docs/FAULTS.md). Our own, instead of LazyFS: the same idea, built from crates.io where
//! CI can build it.

pub mod dirty;
pub mod fs;
