//! Strand's own command-line client, so nobody needs a JVM to operate a cluster (as
//! Redpanda's rpk): topics, producing, consuming, consumer groups and the cluster's state.
//! It speaks the Kafka protocol only, so it works against any Kafka broker, not only
//! Strand. Human tables by default, `--json` for scripts; errors carry Kafka's error names.

pub mod client;
pub mod cluster;
pub mod consume;
mod group_member;
pub mod group_offsets;
pub mod groups;
pub mod offsets;
mod output;
mod partitioner;
pub mod produce;
pub mod records;
pub mod topic;

/// Where to connect and how to print: every client subcommand takes these.
#[derive(clap::Args, Debug, Clone)]
pub struct Target {
    /// Broker(s) to bootstrap from, HOST:PORT[,HOST:PORT...] (Kafka tools' name).
    #[arg(
        short = 'b',
        long = "bootstrap-server",
        default_value = "127.0.0.1:9092",
        global = true
    )]
    pub bootstrap_server: String,
    /// Print JSON on stdout instead of tables, for scripts.
    #[arg(long, global = true)]
    pub json: bool,
}

/// Runs a client command on a small runtime of its own.
pub fn run_blocking<F>(command: F) -> anyhow::Result<()>
where
    F: std::future::Future<Output = anyhow::Result<()>>,
{
    // A client command's output often goes into `head` or `grep -m1`: when the reader
    // closes the pipe, end quietly as Unix tools do, not with a panic in println!. (Rust
    // ignores SIGPIPE by default; the broker keeps it ignored.)
    // SAFETY: signal() with SIG_DFL installs no handler code; called before any thread
    // of the command starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?
        .block_on(command)
}
