//! `strand cluster`: a replicated cluster on loopback in one command, for trying Strand
//! out and for tests. Starts N `strand serve` processes (each a controller and a broker)
//! with their data under one directory, prints the bootstrap servers, and stops them all
//! (controlled shutdown) on SIGINT/SIGTERM.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use crate::shutdown_signal::ShutdownSignal;

#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct ClusterArgs {
    #[command(subcommand)]
    command: Option<ClusterCommand>,
    /// Nodes in the cluster (each a controller and a broker).
    #[arg(long, default_value_t = 3)]
    nodes: u16,
    /// Kafka port of node 1; node N listens on this + N - 1.
    #[arg(long, default_value_t = 9092)]
    base_port: u16,
    /// Quorum port of node 1; node N uses this + N - 1.
    #[arg(long, default_value_t = 10092)]
    quorum_base_port: u16,
    /// Directory holding node-N/ data directories and node-N.log files.
    #[arg(long, default_value = "strand-cluster")]
    data_dir: PathBuf,
}

#[derive(clap::Subcommand)]
enum ClusterCommand {
    /// Show a running cluster (Strand or Kafka): its id, controller, brokers and the
    /// partitions that are under-replicated or offline.
    Info(crate::cli::cluster::InfoArgs),
}

pub fn run(args: ClusterArgs) -> anyhow::Result<()> {
    if let Some(ClusterCommand::Info(info)) = args.command {
        return crate::cli::run_blocking(crate::cli::cluster::info(info));
    }
    anyhow::ensure!(
        (1..=9).contains(&args.nodes),
        "--nodes must be between 1 and 9"
    );
    std::fs::create_dir_all(&args.data_dir)?;
    // Signals are caught before the first child starts, so none is left running.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut shutdown = {
        let _inside_runtime = runtime.enter();
        ShutdownSignal::install()?
    };
    let binary = std::env::current_exe()?;
    let controllers: Vec<String> = (1..=args.nodes)
        .map(|n| format!("{n}@127.0.0.1:{}", args.quorum_base_port + n - 1))
        .collect();
    let replication_factor = args.nodes.min(3);
    let mut children: Vec<(u16, Child)> = Vec::new();
    for n in 1..=args.nodes {
        let log = std::fs::File::create(args.data_dir.join(format!("node-{n}.log")))?;
        let child = Command::new(&binary)
            .arg("serve")
            .args(["--node-id", &n.to_string()])
            .args(["--listen", &format!("127.0.0.1:{}", args.base_port + n - 1)])
            .args(["--controllers", &controllers.join(",")])
            .args([
                "--data-dir",
                &args
                    .data_dir
                    .join(format!("node-{n}"))
                    .display()
                    .to_string(),
            ])
            .args([
                "--default-replication-factor",
                &replication_factor.to_string(),
            ])
            .stdout(log.try_clone()?)
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()?;
        children.push((n, child));
    }
    let bootstrap: Vec<String> = (1..=args.nodes)
        .map(|n| format!("127.0.0.1:{}", args.base_port + n - 1))
        .collect();
    println!(
        "strand cluster: {} nodes, bootstrap servers {}, data and logs in {}",
        args.nodes,
        bootstrap.join(","),
        args.data_dir.display()
    );
    let stopped_early = runtime.block_on(async {
        let mut ticker = tokio::time::interval(std::time::Duration::from_millis(500));
        loop {
            tokio::select! {
                _ = shutdown.recv() => return None,
                _ = ticker.tick() => {
                    for (n, child) in children.iter_mut() {
                        if let Ok(Some(status)) = child.try_wait() {
                            return Some((*n, status));
                        }
                    }
                }
            }
        }
    });
    if let Some((n, status)) = stopped_early {
        eprintln!("strand cluster: node {n} exited ({status}); stopping the others");
    }
    for (_, child) in &children {
        // SIGTERM: each node moves its leaderships away, then exits.
        let _ = rustix::process::kill_process(
            rustix::process::Pid::from_raw(child.id() as i32).expect("a child has a pid"),
            rustix::process::Signal::TERM,
        );
    }
    for (n, mut child) in children {
        let status = child.wait()?;
        if !status.success() {
            eprintln!("strand cluster: node {n} exited with {status}");
        }
    }
    println!("strand cluster stopped");
    Ok(())
}
