//! `strand-sim` (`scripts/sim`): deterministic simulation of Strand's replication. Each
//! seed runs one world (world.rs) for a number of steps, then heals it and checks the
//! invariants; the seed decides every choice, so a run prints the same trace hash every
//! time and a failing seed replays exactly (`--seed X`).
//!
//! Issue #18 so far: four partitions (the data, `__consumer_offsets`,
//! `__transaction_state`, `__share_group_state`) on three nodes running the real
//! `Partition` and `Log`, the controller's real decisions, the group, transaction and
//! share coordinators' real shards, idempotent and transactional producers, consumers,
//! and KIP-848, classic, streams and share group members as clients (world.rs); then,
//! per seed, the metadata quorum: openraft with Strand's log store, state machine and
//! controller service on a deterministic executor, brokers and admin clients, voter
//! changes (quorum.rs). Not yet under it: the partitions' brokers learning metadata
//! through the quorum, the fetcher's, request handlers' and coordinator runtime's async
//! code (see docs/FAULTS.md, "Deterministic simulation").

mod controller;
mod disk;
mod quorum;
mod world;

use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use rand::{Rng, SeedableRng};

#[derive(Parser)]
#[command(about = "Deterministic simulation of Strand's replication")]
struct Args {
    /// Random seeds to run (each printed, so a failure can be replayed).
    #[arg(long, default_value_t = 10)]
    seeds: u64,
    /// Steps of faults per seed, before the world is healed and checked.
    #[arg(long, default_value_t = 20_000)]
    steps: u64,
    /// Steps of the metadata quorum's world per seed (quorum.rs), after the partitions'.
    #[arg(long, default_value_t = 20_000)]
    quorum_steps: u64,
    /// Run this seed only (repeat for several, run in the order given).
    #[arg(long)]
    seed: Vec<u64>,
    /// Put a fixed bug back, to see the simulator find it.
    #[arg(long, value_enum)]
    bug: Option<Bug>,
}

#[derive(Clone, Copy, clap::ValueEnum)]
enum Bug {
    /// A flush-before-ack follower reports records before they are on its disk.
    FollowerSkipsSync,
    /// Followers act on duplicated and late answers too (not a bug in Strand: a harder
    /// network for the truncation code).
    StaleAnswers,
    /// Producers retry batches without idempotence (no producer id or sequence).
    RetriesWithoutIdempotence,
    /// read_committed fetches lose their aborted transactions.
    AbortedListDropped,
    /// The group coordinator acknowledges offset commits before they are replicated.
    CommitsAnsweredWhenWritten,
    /// Classic group members rejoin without giving their partitions up.
    ClassicKeepsPartitions,
    /// Share-partition leaders answer acknowledgements without writing them down.
    ShareAcksUnwritten,
    /// Leaders drop an accepted ISR change before the metadata brings it.
    IsrForgottenWhenAccepted,
}

/// The seed being run, for the panic hook: a panic in the real code is a violation too,
/// and its seed must be printed to be replayed (seeds are drawn at random).
static SEED_RUNNING: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// Prints the running seed and the command that replays it before the panic's message.
fn name_the_seed_on_panic(replay_options: String) {
    let report = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let seed = SEED_RUNNING.load(std::sync::atomic::Ordering::Relaxed);
        println!("seed {seed}: VIOLATION the real code panicked (message below)");
        println!("replay with: scripts/sim --seed {seed} {replay_options}");
        report(info);
    }));
}

/// The disk's hooks are process-wide: tests run one world, of either kind, at a time.
#[cfg(test)]
fn one_world_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

fn main() -> ExitCode {
    let args = Args::parse();
    let seeds: Vec<u64> = match args.seed.is_empty() {
        false => args.seed.clone(),
        true => {
            let mut rng = rand::rngs::StdRng::from_entropy();
            (0..args.seeds).map(|_| rng.gen::<u32>() as u64).collect()
        }
    };
    let disk = disk::Disk::default();
    let replay_options = format!(
        "--steps {} --quorum-steps {}{}",
        args.steps,
        args.quorum_steps,
        args.bug
            .and_then(|bug| clap::ValueEnum::to_possible_value(&bug))
            .map(|value| format!(" --bug {}", value.get_name()))
            .unwrap_or_default()
    );
    name_the_seed_on_panic(replay_options.clone());
    let started = Instant::now();
    let (mut total_steps, mut violations, mut ran) = (0u64, 0usize, 0u64);
    for seed in seeds {
        SEED_RUNNING.store(seed, std::sync::atomic::Ordering::Relaxed);
        let bugs = world::Bugs {
            follower_skips_sync: matches!(args.bug, Some(Bug::FollowerSkipsSync)),
            stale_answers: matches!(args.bug, Some(Bug::StaleAnswers)),
            retries_without_idempotence: matches!(args.bug, Some(Bug::RetriesWithoutIdempotence)),
            aborted_list_dropped: matches!(args.bug, Some(Bug::AbortedListDropped)),
            commits_answered_when_written: matches!(
                args.bug,
                Some(Bug::CommitsAnsweredWhenWritten)
            ),
            classic_keeps_partitions: matches!(args.bug, Some(Bug::ClassicKeepsPartitions)),
            share_acks_unwritten: matches!(args.bug, Some(Bug::ShareAcksUnwritten)),
            isr_forgotten_when_accepted: matches!(args.bug, Some(Bug::IsrForgottenWhenAccepted)),
        };
        let outcome = world::run(seed, args.steps, &disk, bugs).and_then(|world| {
            let quorum = quorum::run(seed, args.quorum_steps, &disk)?;
            Ok((world, quorum))
        });
        ran += 1;
        match outcome {
            Ok((mut outcome, quorum)) => {
                total_steps += outcome.steps + quorum.steps;
                // One hash for the seed: both worlds' traces.
                let mut hasher = std::collections::hash_map::DefaultHasher::new();
                std::hash::Hash::hash(&(outcome.trace_hash, quorum.trace_hash), &mut hasher);
                outcome.trace_hash = std::hash::Hasher::finish(&hasher);
                println!(
                    "seed {seed}: trace hash {:016x} ({} steps, {} acknowledged ({} from {} producer requests, {} retries recognised, {} batches out of sequence), {} transactions committed and {} aborted ({} given up by their producer), {} offset commits acknowledged and {} restarts from one, {} partitions assigned to group members and {} members fenced, {} to classic members and {} unknown to it ({} static fenced, {} instance ids refused, {} parked requests completed, {} timed out, {} dropped with their coordinator), {} records acquired by share consumers, {} acknowledgements written, {} share-partitions loaded, {} crashes of which {} power cuts, {} failed disks, {} full disks, {} latency spikes, {} corrupt reads, {} elections, {} metadata catch-ups of which {} told a node it no longer led, {} records taken by a deposed leader of which {} acknowledged)",
                    outcome.trace_hash,
                    outcome.steps,
                    outcome.acked,
                    outcome.client_acked,
                    outcome.client_requests,
                    outcome.duplicates,
                    outcome.sequence_resets,
                    outcome.txns_committed,
                    outcome.txns_aborted,
                    outcome.txns_given_up,
                    outcome.commits_acked,
                    outcome.offset_fetches,
                    outcome.assignments,
                    outcome.members_fenced,
                    outcome.classic_assignments,
                    outcome.classic_fenced,
                    outcome.static_fenced,
                    outcome.instances_refused,
                    outcome.parked_completed,
                    outcome.parked_expired,
                    outcome.parked_gone,
                    outcome.share_acquired,
                    outcome.share_settled,
                    outcome.share_loads,
                    outcome.crashes,
                    outcome.power_cuts,
                    outcome.disk_failures,
                    outcome.full_disks,
                    outcome.latency_spikes,
                    outcome.corrupt_reads,
                    outcome.elections,
                    outcome.metadata_catch_ups,
                    outcome.late_depositions,
                    outcome.deposed_appends,
                    outcome.deposed_acks
                );
                println!(
                    "seed {seed}: metadata quorum: {} steps, {} virtual seconds, {} entries applied, {} topics created ({} more answered as existing on a retry), {} producer id blocks, {} voter changes, {} sessions expired, {} writes retried after a stale decision, {} Raft leaders ({} in a term another node led too), {} crashes of which {} power cuts and {} disks lost ({} Raft messages refused on replica keys, {} replaced directories recorded), {} messages lost and {} duplicated",
                    quorum.steps,
                    quorum.virtual_ms / 1000,
                    quorum.applied,
                    quorum.topics_created,
                    quorum.topics_found_existing,
                    quorum.id_blocks,
                    quorum.voter_changes,
                    quorum.fencings,
                    quorum.stale_retries,
                    quorum.elections,
                    quorum.shared_terms,
                    quorum.crashes,
                    quorum.power_cuts,
                    quorum.disks_lost,
                    quorum.refusals,
                    quorum.directories_recorded,
                    quorum.messages_lost,
                    quorum.messages_duplicated,
                );
                for violation in outcome.violations.iter().chain(&quorum.violations) {
                    println!("seed {seed}: VIOLATION {violation}");
                }
                violations += outcome.violations.len() + quorum.violations.len();
            }
            Err(error) => {
                println!("seed {seed}: VIOLATION the simulation failed: {error:#}");
                violations += 1;
            }
        }
        if violations > 0 {
            println!("replay with: scripts/sim --seed {seed} {replay_options}");
            break;
        }
    }
    let minutes = started.elapsed().as_secs_f64() / 60.0;
    eprintln!(
        "{:.0} simulated steps a minute on one thread",
        total_steps as f64 / minutes.max(1e-9)
    );
    println!("simulated {ran} seeds, {total_steps} steps, {violations} violations");
    if violations > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
