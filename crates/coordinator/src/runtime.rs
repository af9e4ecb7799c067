//! The coordinator runtime, after Kafka 4's CoordinatorRuntime: one shard per coordinator
//! partition (a `__consumer_offsets` partition today, `__transaction_state` next), each
//! an event loop that owns its state machine outright, so no lock is shared between
//! shards and no await happens while the state is borrowed.
//!
//! An event runs against the state and returns the records it wants written and what to
//! do once they are: `then`, run on the same loop with the write's outcome. The loop
//! appends the records at once (in event order) and goes on with the next event while the
//! write waits for the disk and the in-sync replicas; replies therefore leave in event
//! order, each only after every write issued before it has settled. A write that fails
//! is answered with its error (`then` gets it, and undoes what it must); it is never
//! dropped. An event that writes nothing while writes are in flight gets the last one's
//! outcome: its answer may show what they changed.
//!
//! Bounds: the queue of events waiting for a shard, and the writes one shard has in
//! flight (the loop stops taking events at the limit), so a slow partition holds back
//! its own groups only.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use strand_types::error_code;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

/// Records to append: (key, value); a `None` value is a tombstone.
pub type Records = Vec<(Vec<u8>, Option<Vec<u8>>)>;

/// What one event writes, as one batch: records (plain, or a transaction's: the group
/// coordinator's TxnOffsetCommit), or a transaction marker (the end of a transaction's
/// offsets on a `__consumer_offsets` partition, ordered with the shard's other writes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Write {
    Records(Records),
    Transactional {
        producer_id: i64,
        producer_epoch: i16,
        records: Records,
    },
    Marker {
        producer_id: i64,
        producer_epoch: i16,
        commit: bool,
        coordinator_epoch: i32,
    },
}

impl Write {
    pub fn is_empty(&self) -> bool {
        match self {
            Write::Records(records) | Write::Transactional { records, .. } => records.is_empty(),
            Write::Marker { .. } => false,
        }
    }
}

impl From<Records> for Write {
    fn from(records: Records) -> Write {
        Write::Records(records)
    }
}

/// Resolves once an appended write is committed (durable as its topic requires, and on
/// every in-sync replica), or with the Kafka error code it failed with.
pub type Commit = Pin<Box<dyn Future<Output = Result<(), i16>> + Send>>;

/// What runs once an event's write settled (at once for an event that wrote nothing,
/// after the writes before it).
pub type Then<S> = Box<dyn FnOnce(&mut S, Result<(), i16>) + Send>;

/// An event for one shard.
pub type Event<S> = Box<dyn FnOnce(&mut S) -> Step<S> + Send>;

/// Events waiting for one shard.
pub const EVENT_QUEUE_CAPACITY: usize = 1024;
/// Writes one shard has appended and not yet seen committed.
pub const WRITES_IN_FLIGHT_MAX: usize = 128;
/// Replies waiting behind those writes (events that wrote nothing included); the loop
/// stops taking events at either limit.
pub const REPLIES_WAITING_MAX: usize = 4096;
/// How long a request waits for room in a full queue before it is answered
/// COORDINATOR_NOT_AVAILABLE (clients retry that).
pub const QUEUE_WAIT_MAX: Duration = Duration::from_secs(5);

/// Where a shard's records go: the leader's copy of its partition.
pub trait ShardLog: Send + Sync + 'static {
    /// Appends `write` as one batch; refused at once (a Kafka error code), or appended
    /// and committed later.
    fn append(&self, write: Write) -> Result<Commit, i16>;

    /// Called once the load replayed the log; resolves when what it replayed is committed
    /// (a new leader's tail may not be on every in-sync replica yet) and every in-sync
    /// follower has confirmed the log in this leader epoch (so none can bring back an
    /// older epoch's tail if elected). The shard takes no event until then, as if still
    /// loading, so no answer, transaction marker or offset rests on records an election
    /// could still take away (the simulator found a new coordinator writing a commit's
    /// markers from a PrepareCommit that the next election lost, and its successor
    /// aborting the transaction); if it fails (leadership moved), the shard stops. None:
    /// nothing to wait for.
    fn loaded(&self) -> Option<Commit> {
        None
    }
}

/// What an event returns: the records to write and what to do once they are.
pub struct Step<S> {
    pub records: Write,
    pub then: Then<S>,
}

impl<S> Step<S> {
    /// Nothing to write: `then` runs once earlier writes settled.
    pub fn reply(then: impl FnOnce(&mut S) + Send + 'static) -> Step<S> {
        Step {
            records: Write::Records(Vec::new()),
            then: Box::new(move |state, _| then(state)),
        }
    }

    pub fn write(
        records: impl Into<Write>,
        then: impl FnOnce(&mut S, Result<(), i16>) + Send + 'static,
    ) -> Step<S> {
        Step {
            records: records.into(),
            then: Box::new(then),
        }
    }
}

/// One shard's loop. Dropping it stops the loop (the shard's partition moved away):
/// every reply not yet sent is dropped, which callers answer NOT_COORDINATOR.
pub struct Shard<S> {
    events: mpsc::Sender<Event<S>>,
    task: JoinHandle<()>,
}

impl<S> Drop for Shard<S> {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl<S> std::fmt::Debug for Shard<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Shard")
            .field("queued", &(EVENT_QUEUE_CAPACITY - self.events.capacity()))
            .finish()
    }
}

/// A write in flight and the replies waiting for it: its own, and those of the events
/// after it that wrote nothing. Each gets the write's outcome: an event that wrote
/// nothing was decided on the state as this write (and those before it) left it, so its
/// answer may draw on what the write changed (a member's new assignment and epoch), and
/// if the write fails it must not go out as if the log had it (the simulator, its
/// metadata lag keeping a shard whose writes failed on its disk loaded, found a member
/// told an epoch no later coordinator knew).
struct InFlight<S> {
    commit: JoinHandle<Result<(), i16>>,
    thens: Vec<Then<S>>,
}

impl<S> Shard<S> {
    /// Stops the loop now (its partition moved away), whoever still holds the shard:
    /// every reply not yet sent, parked ones included, is dropped.
    pub fn stop(&self) {
        self.task.abort();
    }

    /// Whether the loop still runs (it ends if stopped, or if an event panicked).
    pub fn is_running(&self) -> bool {
        !self.task.is_finished() && !self.events.is_closed()
    }
}

impl<S: Send + 'static> Shard<S> {
    /// Starts a shard: `load` builds its state (replaying its partition; it runs on a
    /// blocking thread, as it reads the log), then events run in the order they came.
    /// Events sent while it loads wait for it.
    pub fn start(
        load: impl FnOnce() -> S + Send + 'static,
        log: std::sync::Arc<dyn ShardLog>,
    ) -> Shard<S> {
        let (events, receiver) = mpsc::channel(EVENT_QUEUE_CAPACITY);
        let task = tokio::spawn(async move {
            let Ok(state) = tokio::task::spawn_blocking(load).await else {
                tracing::error!("loading a coordinator shard failed");
                return;
            };
            let tail = log.loaded();
            run(state, log, receiver, tail).await;
        });
        Shard { events, task }
    }

    /// Queues an event; COORDINATOR_NOT_AVAILABLE if the shard stays full for
    /// QUEUE_WAIT_MAX, NOT_COORDINATOR if it stopped.
    pub async fn submit(&self, event: Event<S>) -> Result<(), i16> {
        match tokio::time::timeout(QUEUE_WAIT_MAX, self.events.send(event)).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(_)) => Err(error_code::NOT_COORDINATOR),
            Err(_) => Err(error_code::COORDINATOR_NOT_AVAILABLE),
        }
    }

    /// Queues an event unless the queue is full (for timers: the next tick catches up).
    pub fn try_submit(&self, event: Event<S>) -> bool {
        self.events.try_send(event).is_ok()
    }

    /// Runs `op` on the shard and waits for its answer: `op` returns the records to
    /// write and how to answer once they settled.
    pub async fn call<R, W, F, G>(&self, op: F) -> Result<R, i16>
    where
        R: Send + 'static,
        W: Into<Write>,
        F: FnOnce(&mut S) -> (W, G) + Send + 'static,
        G: FnOnce(&mut S, Result<(), i16>) -> R + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        self.submit(Box::new(move |state| {
            let (records, answer) = op(state);
            Step::write(records, move |state, written| {
                let _ = sender.send(answer(state, written));
            })
        }))
        .await?;
        receiver.await.map_err(|_| error_code::NOT_COORDINATOR)
    }

    /// Reads the state in event order, answered at once: for what only committed writes
    /// change (offsets are applied when their write commits) or descriptions.
    pub async fn read<R, F>(&self, op: F) -> Result<R, i16>
    where
        R: Send + 'static,
        F: FnOnce(&mut S) -> R + Send + 'static,
    {
        let (sender, receiver) = oneshot::channel();
        self.submit(Box::new(move |state| {
            let _ = sender.send(op(state));
            Step::reply(|_| {})
        }))
        .await?;
        receiver.await.map_err(|_| error_code::NOT_COORDINATOR)
    }
}

async fn run<S: Send + 'static>(
    mut state: S,
    log: std::sync::Arc<dyn ShardLog>,
    mut events: mpsc::Receiver<Event<S>>,
    loaded_tail: Option<Commit>,
) {
    if let Some(tail) = loaded_tail {
        if let Err(code) = tail.await {
            tracing::warn!(
                code,
                "what a coordinator shard loaded never committed; it stops"
            );
            return;
        }
    }
    let mut in_flight: VecDeque<InFlight<S>> = VecDeque::new();
    let mut waiting = 0usize;
    loop {
        tokio::select! {
            biased;
            committed = async { (&mut in_flight.front_mut().expect("guarded").commit).await },
                if !in_flight.is_empty() =>
            {
                let done = in_flight.pop_front().expect("guarded");
                waiting -= done.thens.len();
                let outcome = committed.unwrap_or(Err(error_code::UNKNOWN_SERVER_ERROR));
                for then in done.thens {
                    then(&mut state, outcome);
                }
            }
            event = events.recv(),
                if in_flight.len() < WRITES_IN_FLIGHT_MAX && waiting < REPLIES_WAITING_MAX =>
            {
                let Some(event) = event else { return };
                let step = event(&mut state);
                if !step.records.is_empty() {
                    match log.append(step.records) {
                        Ok(commit) => {
                            in_flight.push_back(InFlight {
                                commit: tokio::spawn(commit),
                                thens: vec![step.then],
                            });
                            waiting += 1;
                            continue;
                        }
                        // Settled at once, not behind the writes in flight: the next
                        // event must find the state as the refusal leaves it (a group
                        // marked unsaved, a transaction no longer pending). Events run
                        // before it settled wrote their changes as increments over one
                        // the log never took, and answered from it once those committed
                        // (the simulator found a member told an assignment no later
                        // coordinator knew). An error answer shows no state, so it may
                        // overtake the replies before it.
                        Err(code) => {
                            (step.then)(&mut state, Err(code));
                            continue;
                        }
                    }
                }
                // Wrote nothing: answered with the last write in flight, or at once.
                match in_flight.back_mut() {
                    Some(last) => {
                        last.thens.push(step.then);
                        waiting += 1;
                    }
                    None => (step.then)(&mut state, Ok(())),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A log whose writes commit when the test says so (or fail with a code), and whose
    /// loaded tail, if it has one, too.
    #[derive(Default)]
    struct ManualLog {
        appended: Mutex<Vec<Records>>,
        pending: Mutex<Vec<oneshot::Sender<Result<(), i16>>>>,
        refuse: Mutex<Option<i16>>,
        tail: Mutex<Option<oneshot::Receiver<Result<(), i16>>>>,
    }

    impl ShardLog for ManualLog {
        fn append(&self, write: Write) -> Result<Commit, i16> {
            if let Some(code) = *self.refuse.lock().unwrap() {
                return Err(code);
            }
            let Write::Records(records) = write else {
                panic!("the tests write records only");
            };
            self.appended.lock().unwrap().push(records);
            let (sender, receiver) = oneshot::channel();
            self.pending.lock().unwrap().push(sender);
            Ok(Box::pin(async move {
                receiver
                    .await
                    .unwrap_or(Err(error_code::NOT_LEADER_OR_FOLLOWER))
            }))
        }

        fn loaded(&self) -> Option<Commit> {
            let receiver = self.tail.lock().unwrap().take()?;
            Some(Box::pin(async move {
                receiver
                    .await
                    .unwrap_or(Err(error_code::NOT_LEADER_OR_FOLLOWER))
            }))
        }
    }

    impl ManualLog {
        fn settle(&self, index: usize, outcome: Result<(), i16>) {
            let sender = std::mem::replace(
                &mut self.pending.lock().unwrap()[index],
                oneshot::channel().0,
            );
            sender.send(outcome).unwrap();
        }
    }

    fn record(key: &str) -> Records {
        vec![(key.as_bytes().to_vec(), Some(b"v".to_vec()))]
    }

    /// Lets the shards run until `condition` holds (the load runs on a blocking thread).
    async fn until(condition: impl Fn() -> bool) {
        for _ in 0..10_000 {
            if condition() {
                // And a little more, so anything wrongly answered early would be.
                for _ in 0..20 {
                    tokio::task::yield_now().await;
                }
                return;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        panic!("condition not reached in 10 s");
    }

    fn appended(log: &ManualLog) -> usize {
        log.appended.lock().unwrap().len()
    }

    /// The state: what committed, in order.
    type Committed = Vec<String>;

    fn commit_event(
        shard: &Arc<Shard<Committed>>,
        key: &'static str,
    ) -> JoinHandle<Result<Result<(), i16>, i16>> {
        let shard = shard.clone();
        tokio::spawn(async move {
            shard
                .call(move |_| {
                    (record(key), move |state: &mut Committed, written| {
                        if written.is_ok() {
                            state.push(key.to_string());
                        }
                        written
                    })
                })
                .await
        })
    }

    #[tokio::test]
    async fn replies_wait_for_their_write_and_for_every_write_before_them() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let first = commit_event(&shard, "a");
        until(|| appended(&log) == 1).await;
        let second = commit_event(&shard, "b");
        until(|| appended(&log) == 2).await;
        // An event that writes nothing still answers after the writes before it.
        let reader = {
            let shard = shard.clone();
            tokio::spawn(async move {
                shard
                    .call(|_| (Vec::new(), |state: &mut Committed, _| state.clone()))
                    .await
            })
        };
        until(|| true).await;
        assert!(!first.is_finished() && !second.is_finished() && !reader.is_finished());

        // The second commits first: nobody is answered until the first settles.
        log.settle(1, Ok(()));
        until(|| true).await;
        assert!(!first.is_finished() && !second.is_finished() && !reader.is_finished());

        log.settle(0, Ok(()));
        assert_eq!(first.await.unwrap(), Ok(Ok(())));
        assert_eq!(second.await.unwrap(), Ok(Ok(())));
        assert_eq!(
            reader.await.unwrap(),
            Ok(vec!["a".to_string(), "b".to_string()])
        );
    }

    /// Found by the simulator: a shard loaded from a new leader's log acted on records
    /// not yet committed (which the next election may lose). It takes no event until
    /// they are.
    #[tokio::test]
    async fn replies_wait_for_the_uncommitted_tail_the_load_replayed() {
        let log = Arc::new(ManualLog::default());
        let (tail, committed) = oneshot::channel();
        *log.tail.lock().unwrap() = Some(committed);
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let reader = {
            let shard = shard.clone();
            tokio::spawn(async move { shard.read(|state| state.clone()).await })
        };
        let write = commit_event(&shard, "a");
        until(|| true).await;
        assert!(!reader.is_finished(), "the tail is not committed");
        assert_eq!(appended(&log), 0, "no event runs before it is");
        tail.send(Ok(())).unwrap();
        assert_eq!(reader.await.unwrap(), Ok(Vec::new()));
        until(|| appended(&log) == 1).await;
        log.settle(0, Ok(()));
        assert_eq!(write.await.unwrap(), Ok(Ok(())));
    }

    #[tokio::test]
    async fn a_failed_write_is_answered_with_its_error_and_later_ones_still_commit() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let failed = commit_event(&shard, "a");
        until(|| appended(&log) == 1).await;
        let ok = commit_event(&shard, "b");
        until(|| appended(&log) == 2).await;
        log.settle(0, Err(error_code::REQUEST_TIMED_OUT));
        log.settle(1, Ok(()));
        assert_eq!(
            failed.await.unwrap(),
            Ok(Err(error_code::REQUEST_TIMED_OUT))
        );
        assert_eq!(ok.await.unwrap(), Ok(Ok(())));
        let committed = shard.read(|state| state.clone()).await.unwrap();
        assert_eq!(committed, vec!["b".to_string()]);
    }

    /// A refused append settles at once, before the writes in flight: the events after
    /// it see what it left (here: its failure), not a change the log never took.
    #[tokio::test]
    async fn a_refused_append_settles_at_once_and_the_next_event_sees_it() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let first = commit_event(&shard, "a");
        until(|| appended(&log) == 1).await;
        *log.refuse.lock().unwrap() = Some(error_code::KAFKA_STORAGE_ERROR);
        let refused = {
            let shard = shard.clone();
            tokio::spawn(async move {
                shard
                    .call(|_| {
                        (
                            record("b"),
                            |state: &mut Committed, written: Result<(), i16>| {
                                if let Err(code) = written {
                                    state.push(format!("refused {code}"));
                                }
                                written
                            },
                        )
                    })
                    .await
            })
        };
        let answered = tokio::time::timeout(Duration::from_secs(10), refused).await;
        assert_eq!(
            answered
                .expect("answered before the write in flight settled")
                .unwrap(),
            Ok(Err(error_code::KAFKA_STORAGE_ERROR)),
        );
        let seen = {
            let shard = shard.clone();
            tokio::spawn(async move {
                shard
                    .call(|state| {
                        let seen = state.clone();
                        (Vec::new(), move |_: &mut Committed, _| seen)
                    })
                    .await
            })
        };
        until(|| true).await;
        log.settle(0, Ok(()));
        assert_eq!(
            seen.await.unwrap(),
            Ok(vec![format!("refused {}", error_code::KAFKA_STORAGE_ERROR)]),
            "the event after the refusal saw it"
        );
        assert_eq!(first.await.unwrap(), Ok(Ok(())));
    }

    /// Found by the simulator's metadata lag: a heartbeat that wrote nothing was answered
    /// with the assignment an earlier heartbeat's write (still in flight) had made,
    /// after that write failed; no later coordinator knew the member's epoch.
    #[tokio::test]
    async fn an_event_writing_nothing_gets_the_failure_of_the_write_it_follows() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let failed = {
            let shard = shard.clone();
            tokio::spawn(async move {
                shard
                    .call(|state: &mut Committed| {
                        state.push("a".to_string()); // at once, as a group change is
                        (record("a"), |_: &mut Committed, written| written)
                    })
                    .await
            })
        };
        until(|| appended(&log) == 1).await;
        let reader = {
            let shard = shard.clone();
            tokio::spawn(async move {
                shard
                    .call(|state: &mut Committed| {
                        let seen = state.clone();
                        (
                            Vec::new(),
                            move |_: &mut Committed, written: Result<(), i16>| {
                                written.map(|()| seen)
                            },
                        )
                    })
                    .await
            })
        };
        until(|| true).await;
        assert!(!reader.is_finished(), "it waits for the write before it");
        log.settle(0, Err(error_code::KAFKA_STORAGE_ERROR));
        assert_eq!(
            failed.await.unwrap(),
            Ok(Err(error_code::KAFKA_STORAGE_ERROR))
        );
        assert_eq!(
            reader.await.unwrap(),
            Ok(Err(error_code::KAFKA_STORAGE_ERROR)),
            "not the state the failed write left"
        );
    }

    #[tokio::test]
    async fn a_stopped_shard_answers_not_coordinator() {
        let log = Arc::new(ManualLog::default());
        let shard = Shard::start(Committed::new, log.clone());
        let (sender, pending) = oneshot::channel::<()>();
        shard
            .submit(Box::new(move |_| {
                Step::write(record("a"), move |_, _| {
                    let _ = sender.send(());
                })
            }))
            .await
            .unwrap();
        until(|| appended(&log) == 1).await;
        // The partition moves away: its owner drops the shard, and the reply with it.
        drop(shard);
        assert!(pending.await.is_err(), "answered NOT_COORDINATOR by `call`");
    }

    #[tokio::test]
    async fn stopping_a_shard_drops_its_replies_while_requests_still_hold_it() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let pending = commit_event(&shard, "a");
        until(|| appended(&log) == 1).await;
        assert!(shard.is_running());
        // The request's task holds a clone; leadership moves anyway.
        shard.stop();
        assert_eq!(pending.await.unwrap(), Err(error_code::NOT_COORDINATOR));
        until(|| !shard.is_running()).await;
    }

    #[tokio::test]
    async fn a_slow_shard_does_not_hold_back_another() {
        let slow_log = Arc::new(ManualLog::default());
        let slow = Arc::new(Shard::start(Committed::new, slow_log.clone()));
        let fast_log = Arc::new(ManualLog::default());
        let fast = Arc::new(Shard::start(Committed::new, fast_log.clone()));
        let stuck = commit_event(&slow, "a");
        until(|| appended(&slow_log) == 1).await;
        let quick = commit_event(&fast, "b");
        until(|| appended(&fast_log) == 1).await;
        fast_log.settle(0, Ok(()));
        assert_eq!(quick.await.unwrap(), Ok(Ok(())));
        assert!(!stuck.is_finished());
        slow_log.settle(0, Ok(()));
        assert_eq!(stuck.await.unwrap(), Ok(Ok(())));
    }

    #[tokio::test]
    async fn the_writes_in_flight_are_bounded() {
        let log = Arc::new(ManualLog::default());
        let shard = Arc::new(Shard::start(Committed::new, log.clone()));
        let calls: Vec<_> = (0..WRITES_IN_FLIGHT_MAX + 10)
            .map(|_| commit_event(&shard, "k"))
            .collect();
        until(|| appended(&log) == WRITES_IN_FLIGHT_MAX).await;
        assert_eq!(
            appended(&log),
            WRITES_IN_FLIGHT_MAX,
            "the loop stopped taking events"
        );
        for index in 0..WRITES_IN_FLIGHT_MAX + 10 {
            until(|| appended(&log) > index).await;
            log.settle(index, Ok(()));
        }
        for call in calls {
            assert_eq!(call.await.unwrap(), Ok(Ok(())));
        }
    }
}
