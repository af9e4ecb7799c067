//! The `strand` binary. `strand serve` with no arguments is a single-node broker on
//! 127.0.0.1:9092 with its data in ./strand-data.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

mod bench;
mod cli;
mod cluster_cmd;
mod console;
mod shutdown_signal;

use clap::{Parser, Subcommand};
use strand_broker::cluster::Cluster;
use strand_broker::{serve_listeners, Broker, BrokerConfig, FlushMode};
use strand_protocol::alloc_guard::HugeAllocationGuard;

use crate::shutdown_signal::ShutdownSignal;

#[global_allocator]
static ALLOCATOR: HugeAllocationGuard = HugeAllocationGuard;

#[derive(Parser)]
#[command(name = "strand", version, about = "A Kafka-compatible streaming log")]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Log lines as text or as JSON objects (one per line); text has colours only on a
    /// terminal.
    #[arg(long, global = true, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum LogFormat {
    Text,
    Json,
}

#[derive(Subcommand)]
enum Command {
    /// Run a broker.
    Serve(ServeArgs),
    /// Load-test a Kafka broker (Strand or any other): throughput and latency.
    Bench(bench::BenchArgs),
    /// Run a replicated cluster of several nodes on loopback (3 by default); `cluster
    /// info` shows a running one.
    Cluster(cluster_cmd::ClusterArgs),
    /// Create, list, describe, configure and delete topics (kafka-topics, kafka-configs).
    Topic(cli::topic::TopicArgs),
    /// Produce records from standard input or a file (kafka-console-producer).
    Produce(cli::produce::ProduceArgs),
    /// Print a topic's records (kafka-console-consumer).
    Consume(cli::consume::ConsumeArgs),
    /// List, describe, reset the offsets of and delete consumer groups
    /// (kafka-consumer-groups).
    Group(cli::groups::GroupArgs),
}

#[derive(clap::Args)]
struct ServeArgs {
    /// Broker settings: a Kafka server.properties (Kafka's names; those Strand does not
    /// implement are listed in one warning) or Strand's TOML (a name ending in .toml).
    /// Command-line options override it.
    #[arg(long)]
    config: Option<PathBuf>,
    /// Directory for logs and metadata: the first of log.dirs (list more in --config)
    /// [default: ./strand-data].
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Address to listen on (listeners) [default: 127.0.0.1:9092].
    #[arg(long)]
    listen: Option<std::net::SocketAddr>,
    /// HOST:PORT clients should connect to (advertised.listeners) [default: the listen
    /// address].
    #[arg(long)]
    advertise: Option<String>,
    /// This node's id (node.id) [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    node_id: Option<i32>,
    /// Partitions of auto-created topics (num.partitions) [default: 1].
    #[arg(long, allow_negative_numbers = true)]
    num_partitions: Option<i32>,
    /// Largest record batch accepted (message.max.bytes).
    #[arg(long, allow_negative_numbers = true)]
    message_max_bytes: Option<i32>,
    /// Segment size in bytes (log.segment.bytes).
    #[arg(long, allow_negative_numbers = true)]
    segment_bytes: Option<i32>,
    /// Retention in ms (log.retention.ms, -1 forever).
    #[arg(long, allow_negative_numbers = true)]
    retention_ms: Option<i64>,
    /// Create topics on first use (auto.create.topics.enable) [default: true].
    #[arg(long)]
    auto_create_topics: Option<bool>,
    /// page-cache (Kafka's default) or every-batch: fdatasync before the ack
    /// (log.flush.interval.messages=1).
    #[arg(long, value_parser = parse_flush)]
    flush: Option<FlushMode>,
    /// The metadata quorum, ID@HOST:PORT,... (controller.quorum.voters; forms a cluster;
    /// unset: a single node).
    #[arg(long)]
    controllers: Option<String>,
    /// This node's quorum address when it is not one of --controllers (listeners: its
    /// CONTROLLER listener).
    #[arg(long)]
    quorum_listen: Option<std::net::SocketAddr>,
    /// The rack, for rack-aware replica placement (broker.rack).
    #[arg(long)]
    rack: Option<String>,
    /// broker, controller, or broker,controller (process.roles).
    #[arg(long)]
    process_roles: Option<String>,
    /// Replication factor of auto-created topics and CreateTopics with -1
    /// (default.replication.factor).
    #[arg(long, allow_negative_numbers = true)]
    default_replication_factor: Option<i16>,
    /// HOST:PORT of the HTTP listener serving /metrics (Prometheus), /health and /ready,
    /// or none. Strand only: Kafka has JMX instead [default: 127.0.0.1:9644].
    #[arg(long)]
    http_listen: Option<String>,
    /// The web console on the HTTP listener: on, read-only or off. Strand only: Kafka
    /// ships no console [default: on].
    #[arg(long)]
    console: Option<strand_broker::ConsoleMode>,
}

fn parse_flush(value: &str) -> Result<FlushMode, String> {
    match value {
        "page-cache" => Ok(FlushMode::PageCache),
        "every-batch" => Ok(FlushMode::EveryBatch),
        other => Err(format!(
            "unknown flush mode {other:?}: use page-cache or every-batch"
        )),
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    init_logging(cli.log_format);
    let result = match cli.command {
        Command::Serve(args) => run_serve(args),
        Command::Bench(args) => bench::run_blocking(args),
        Command::Cluster(args) => cluster_cmd::run(args),
        Command::Topic(args) => cli::run_blocking(cli::topic::run(args)),
        Command::Produce(args) => cli::run_blocking(cli::produce::run(args)),
        Command::Consume(args) => cli::run_blocking(cli::consume::run(args)),
        Command::Group(args) => cli::run_blocking(cli::groups::run(args)),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("strand: {error:#}");
            ExitCode::FAILURE
        }
    }
}

/// Logs go to standard error, filtered by STRAND_LOG (EnvFilter syntax). Colour codes
/// only on a terminal: a redirected log is read by people and tools, not painted.
fn init_logging(format: LogFormat) {
    use std::io::IsTerminal;
    let filter = tracing_subscriber::EnvFilter::try_from_env("STRAND_LOG")
        .unwrap_or_else(|_| "info,openraft=off".into());
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder.with_ansi(std::io::stderr().is_terminal()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .init(),
    }
}

fn broker_config(args: ServeArgs) -> anyhow::Result<BrokerConfig> {
    let mut config = match &args.config {
        Some(path) => {
            let (config, ignored) = BrokerConfig::from_file(path).map_err(anyhow::Error::msg)?;
            if !ignored.is_empty() {
                tracing::warn!(
                    file = %path.display(),
                    count = ignored.len(),
                    "settings Strand does not implement are ignored: {}",
                    ignored.join(", ")
                );
            }
            config
        }
        None => BrokerConfig::default(),
    };
    // Command-line options are explicit settings too (STATIC_BROKER_CONFIG).
    let given: [(&str, bool); 14] = [
        ("log.dirs", args.data_dir.is_some()),
        ("listeners", args.listen.is_some()),
        ("advertised.listeners", args.advertise.is_some()),
        ("node.id", args.node_id.is_some()),
        ("num.partitions", args.num_partitions.is_some()),
        ("message.max.bytes", args.message_max_bytes.is_some()),
        ("log.segment.bytes", args.segment_bytes.is_some()),
        ("log.retention.ms", args.retention_ms.is_some()),
        (
            "auto.create.topics.enable",
            args.auto_create_topics.is_some(),
        ),
        ("log.flush.interval.messages", args.flush.is_some()),
        ("controller.quorum.voters", args.controllers.is_some()),
        ("broker.rack", args.rack.is_some()),
        ("process.roles", args.process_roles.is_some()),
        (
            "default.replication.factor",
            args.default_replication_factor.is_some(),
        ),
    ];
    config.explicit.extend(
        given
            .iter()
            .filter(|(_, set)| *set)
            .map(|(name, _)| name.to_string()),
    );
    if let Some(value) = args.data_dir {
        config.data_dir = value;
    }
    if let Some(value) = args.listen {
        config.listen = value;
    }
    if let Some(value) = args.advertise {
        config.advertise = Some(value);
    }
    if let Some(value) = args.node_id {
        config.node_id = value;
    }
    if let Some(value) = args.num_partitions {
        config.num_partitions = value;
    }
    if let Some(value) = args.message_max_bytes {
        config.message_max_bytes = value;
    }
    if let Some(value) = args.segment_bytes {
        config.segment_bytes = value;
    }
    if let Some(value) = args.retention_ms {
        config.retention_ms = value;
    }
    if let Some(value) = args.auto_create_topics {
        config.auto_create_topics = value;
    }
    if let Some(value) = args.flush {
        config.flush = value;
    }
    if let Some(value) = args.controllers {
        config.controllers = Some(value);
    }
    if let Some(value) = args.quorum_listen {
        config.quorum_listen = Some(value);
    }
    if let Some(value) = args.process_roles {
        config.process_roles = Some(value);
    }
    if let Some(value) = args.rack {
        config.rack = Some(value);
    }
    if let Some(value) = args.default_replication_factor {
        config.default_replication_factor = value;
    }
    if let Some(value) = args.http_listen {
        config.http_listen = value;
        config.explicit.insert("http_listen".into());
    }
    if let Some(mode) = args.console {
        config.console = mode;
    }
    config.validate().map_err(anyhow::Error::msg)?;
    Ok(config)
}

/// A line for whoever started the broker (scripts read its port from it). A closed
/// standard output (the reader went away) must not stop a broker, as println! would.
macro_rules! announce {
    ($($arg:tt)*) => {{
        use std::io::Write;
        let _ = writeln!(std::io::stdout(), $($arg)*);
    }};
}

fn run_serve(args: ServeArgs) -> anyhow::Result<()> {
    let mut config = broker_config(args)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let mut shutdown = ShutdownSignal::install()?;
        let data_dir = config.data_dir.clone();
        let cluster_config = config.cluster_config().map_err(anyhow::Error::msg)?;
        // /metrics, /health and /ready: bound now (a taken address given explicitly stops
        // the start), served by the broker or, on a controller-only node, the controller.
        let http = config
            .http_listen()
            .map_err(anyhow::Error::msg)?
            .bind()
            .await?;
        let http_address = http.as_ref().and_then(|l| l.local_addr().ok());
        let (stop_http, http_stopping) = tokio::sync::watch::channel(false);
        if let Some(cluster_config) = cluster_config.as_ref().filter(|c| !c.broker_role) {
            let node_id = config.node_id;
            let quorum =
                strand_broker::cluster::start_controller_only(node_id, &data_dir, cluster_config)
                    .await?;
            announce!(
                "strand {} node {node_id}: controller only, quorum at {}, data in {}",
                env!("CARGO_PKG_VERSION"),
                cluster_config.quorum_listen,
                data_dir.display()
            );
            // The KafkaController gauges, as a KRaft controller's.
            // No console: it is served by brokers, which clients can reach.
            if let (Some(http), Some(address)) = (http, http_address) {
                let node = Arc::new(strand_broker::http::ControllerNode::new(node_id, &quorum));
                tokio::spawn(strand_broker::http::serve(node, None, http, http_stopping));
                announce!(
                    "strand node {node_id} serving HTTP on {address} (/metrics, /health, /ready)"
                );
            }
            shutdown.recv().await;
            let _ = stop_http.send(true);
            quorum.shutdown().await;
            announce!("strand stopped cleanly");
            return Ok(());
        }
        // Bound now and listening once the broker is ready, so that a port of 0 is
        // replaced by the one the OS picked before the broker advertises it.
        let listeners = strand_broker::server::bind_listeners(&mut config)?;
        let console_mode = config.console;
        let console_access = strand_broker::console_access::ConsoleAccess::of(&config);
        let broker = tokio::task::spawn_blocking(move || Broker::open(config)).await??;
        // /health and /ready answer from now on (not ready until clients are served).
        let mut console_served = false;
        if let Some(http) = http {
            let console: Option<Arc<dyn strand_broker::http::Console>> =
                match (console_mode, console_access) {
                    (strand_broker::ConsoleMode::Off, _) => None,
                    (_, Err(why)) => {
                        tracing::warn!("no web console: {why}");
                        None
                    }
                    // A console that cannot log in (no inter-broker login for its
                    // sampler) is left out; the broker serves on without it.
                    (mode, Ok(access)) => match console::Console::start(
                        access,
                        broker.node_id(),
                        mode == strand_broker::ConsoleMode::ReadOnly,
                        http_stopping.clone(),
                    ) {
                        Ok(console) => Some(console),
                        Err(error) => {
                            tracing::warn!("no web console: {error:#}");
                            None
                        }
                    },
                };
            console_served = console.is_some();
            tokio::spawn(strand_broker::http::serve(
                broker.clone(),
                console,
                http,
                http_stopping,
            ));
        }
        let cluster = match cluster_config {
            Some(cluster_config) => {
                let quorum = cluster_config.quorum_listen;
                let cluster = Cluster::start(&broker, cluster_config).await?;
                announce!(
                    "strand node {} joined the metadata quorum at {quorum}; waiting to be unfenced",
                    broker.node_id()
                );
                // As Kafka's brokers: serve clients only once the controller has unfenced
                // this broker, so nobody is told about a cluster without its brokers.
                tokio::select! {
                    _ = cluster.wait_until_unfenced() => {}
                    _ = shutdown.recv() => {
                        cluster.shutdown().await;
                        announce!("strand stopped cleanly");
                        return Ok(());
                    }
                }
                Some(cluster)
            }
            None => None,
        };
        // The first line keeps its form (scripts read the port from it); each further
        // listener gets its own.
        let others: Vec<String> = listeners[1..]
            .iter()
            .map(|(listener, _)| {
                let spec = &listener.spec;
                format!(
                    "strand node {} also listening on {} as {} ({}, advertised {}:{})",
                    broker.node_id(),
                    spec.listen,
                    spec.name,
                    spec.protocol,
                    spec.advertised_host,
                    spec.advertised_port
                )
            })
            .collect();
        let (addresses, handle, server) = serve_listeners(broker.clone(), listeners)?;
        announce!(
            "strand {} node {} listening on {} (advertised {}:{}), data in {}",
            env!("CARGO_PKG_VERSION"),
            broker.node_id(),
            addresses[0],
            broker.advertised_host,
            broker.advertised_port,
            data_dir.display()
        );
        for line in others {
            announce!("{line}");
        }
        if let Some(address) = http_address {
            let console = if console_served { ", console at /" } else { "" };
            announce!(
                "strand node {} serving HTTP on {address} (/metrics, /health, /ready{console})",
                broker.node_id()
            );
        }
        let server = tokio::spawn(server);
        shutdown.recv().await;
        tracing::info!("shutting down");
        if let Some(cluster) = cluster {
            // Leaderships move away first, while clients can still be told where.
            cluster.shutdown().await;
        }
        handle.shutdown();
        let _ = stop_http.send(true);
        server.await??;
        announce!("strand stopped cleanly");
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use clap::CommandFactory;

    /// `strand serve --help` names the Kafka setting behind every option, so an operator
    /// coming from server.properties finds the one they know.
    #[test]
    fn every_serve_option_names_its_kafka_setting() {
        let command = super::Cli::command();
        let serve = command.find_subcommand("serve").unwrap();
        for arg in serve.get_arguments() {
            // --http-listen and --console are Strand's own: Kafka has JMX, no HTTP
            // listener, and no console.
            if ["config", "help", "http_listen", "console"].contains(&arg.get_id().as_str()) {
                continue;
            }
            let help = arg.get_help().map(|h| h.to_string()).unwrap_or_default();
            let names_kafka_setting = help
                .split(|c: char| !(c.is_ascii_lowercase() || c == '.'))
                .any(|word| word.contains('.') && !word.starts_with('.') && !word.ends_with('.'))
                || help.contains("(listeners");
            assert!(
                names_kafka_setting,
                "--{} does not name its Kafka setting: {help:?}",
                arg.get_id()
            );
        }
    }
}
