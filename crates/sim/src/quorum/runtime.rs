//! A deterministic executor with virtual time, and openraft's `AsyncRuntime` over it, so
//! the metadata quorum's real Raft (openraft, with Strand's log store and state machine)
//! runs on one thread under the simulator's seed.
//!
//! - Tasks are futures owned by a node (or by the world, owner 0); a task spawned while
//!   another runs belongs to the same node, so a crash drops everything the node ran
//!   (`kill`), as kill -9 ends a process.
//! - The simulator decides which ready task runs next (`ready`, `run`), so the seed picks
//!   every interleaving. Nothing runs by itself: no thread, no wall clock.
//! - Time is virtual: it moves only when the simulator moves it (`advance_to`), and the
//!   timers due by then wake their tasks.
//! - openraft's randomness (election timeouts) draws from the seed too (`thread_rng`).
//!
//! One executor per thread at a time (`install`); the runtime's functions find it in a
//! thread-local, as tokio's find their runtime.

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::ops::{Add, AddAssign, Sub, SubAssign};
use std::pin::Pin;
use std::sync::{Arc, Mutex, Weak};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use openraft::async_runtime::TokioOneShotSender;
use openraft::{AsyncRuntime, OptionalSend};
use rand::SeedableRng;

/// Who runs a task: a node's id, or 0 for the simulator itself.
pub type Owner = u64;

type BoxFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

struct Task {
    owner: Owner,
    /// None while it is being polled.
    future: Option<BoxFuture>,
}

#[derive(Default)]
struct Inner {
    now: Duration,
    tasks: BTreeMap<u64, Task>,
    ready: BTreeSet<u64>,
    /// (deadline, registration) -> the waker of the task sleeping until then.
    timers: BTreeMap<(Duration, u64), Waker>,
    next_task: u64,
    next_timer: u64,
    /// The owner of the task being polled: what it spawns is the same node's.
    running: Owner,
    seed: u64,
    rng_draws: u64,
}

struct Shared {
    inner: Mutex<Inner>,
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

thread_local! {
    static CURRENT: RefCell<Option<Arc<Shared>>> = const { RefCell::new(None) };
}

fn current() -> Arc<Shared> {
    CURRENT
        .with(|c| c.borrow().clone())
        .expect("the simulator's executor is installed")
}

fn try_current() -> Option<Arc<Shared>> {
    CURRENT.with(|c| c.borrow().clone())
}

struct TaskWaker {
    id: u64,
    shared: Weak<Shared>,
}

impl Wake for TaskWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if let Some(shared) = self.shared.upgrade() {
            let mut inner = shared.lock();
            if inner.tasks.contains_key(&self.id) {
                inner.ready.insert(self.id);
            }
        }
    }
}

/// The executor, installed on this thread for as long as it lives.
pub struct Executor {
    shared: Arc<Shared>,
}

impl Executor {
    pub fn install(seed: u64) -> Executor {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                seed,
                ..Inner::default()
            }),
        });
        CURRENT.with(|c| {
            let mut current = c.borrow_mut();
            assert!(
                current.is_none(),
                "one simulated executor per thread at a time"
            );
            *current = Some(shared.clone());
        });
        Executor { shared }
    }

    pub fn now(&self) -> Duration {
        self.shared.lock().now
    }

    /// Starts `future` as a task of `owner`.
    pub fn spawn(&self, owner: Owner, future: impl Future<Output = ()> + Send + 'static) {
        spawn_task(&self.shared, owner, Box::pin(future));
    }

    /// The tasks ready to run, in id order (the simulator picks one).
    pub fn ready(&self) -> Vec<u64> {
        self.shared.lock().ready.iter().copied().collect()
    }

    /// Polls task `id` once (it must be ready); returns its owner.
    pub fn run(&self, id: u64) -> Owner {
        let (owner, mut future) = {
            let mut inner = self.shared.lock();
            assert!(inner.ready.remove(&id), "task {id} is not ready");
            let task = inner.tasks.get_mut(&id).expect("ready tasks exist");
            let future = task.future.take().expect("a task is polled once at a time");
            let owner = task.owner;
            inner.running = owner;
            (owner, future)
        };
        let waker = Waker::from(Arc::new(TaskWaker {
            id,
            shared: Arc::downgrade(&self.shared),
        }));
        let done = future
            .as_mut()
            .poll(&mut Context::from_waker(&waker))
            .is_ready();
        let finished = {
            let mut inner = self.shared.lock();
            inner.running = 0;
            match inner.tasks.get_mut(&id) {
                Some(task) if !done => {
                    task.future = Some(future);
                    None
                }
                Some(_) => {
                    inner.tasks.remove(&id);
                    inner.ready.remove(&id);
                    Some(future)
                }
                None => Some(future),
            }
        };
        // Dropped outside the lock: a future's drop may wake others.
        drop(finished);
        owner
    }

    /// The earliest timer's deadline.
    pub fn next_timer(&self) -> Option<Duration> {
        self.shared.lock().timers.keys().next().map(|(at, _)| *at)
    }

    /// Moves time to `at` (never back) and wakes every timer due by then.
    pub fn advance_to(&self, at: Duration) {
        let due: Vec<Waker> = {
            let mut inner = self.shared.lock();
            inner.now = inner.now.max(at);
            let now = inner.now;
            let later = inner.timers.split_off(&(now, u64::MAX));
            std::mem::replace(&mut inner.timers, later)
                .into_values()
                .collect()
        };
        for waker in due {
            waker.wake();
        }
    }

    /// Drops every task of `owner` unfinished (a crash: kill -9).
    pub fn kill(&self, owner: Owner) {
        let killed: Vec<Option<BoxFuture>> = {
            let mut inner = self.shared.lock();
            let ids: Vec<u64> = inner
                .tasks
                .iter()
                .filter(|(_, t)| t.owner == owner)
                .map(|(id, _)| *id)
                .collect();
            ids.iter()
                .map(|id| {
                    inner.ready.remove(id);
                    inner.tasks.remove(id).and_then(|t| t.future)
                })
                .collect()
        };
        drop(killed);
    }
}

impl Drop for Executor {
    fn drop(&mut self) {
        // Every task dropped first, while the runtime's functions still find the executor
        // (a future's drop may cancel a timer or spawn nothing).
        let all: Vec<Option<BoxFuture>> = {
            let mut inner = self.shared.lock();
            inner.ready.clear();
            std::mem::take(&mut inner.tasks)
                .into_values()
                .map(|t| t.future)
                .collect()
        };
        drop(all);
        CURRENT.with(|c| *c.borrow_mut() = None);
    }
}

fn spawn_task(shared: &Arc<Shared>, owner: Owner, future: BoxFuture) {
    let mut inner = shared.lock();
    inner.next_task += 1;
    let id = inner.next_task;
    inner.tasks.insert(
        id,
        Task {
            owner,
            future: Some(future),
        },
    );
    inner.ready.insert(id);
}

/// Virtual time in milliseconds (a wall clock for code that keeps one).
pub fn virtual_ms() -> i64 {
    current().lock().now.as_millis() as i64
}

/// A point in virtual time: the time since the executor started.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SimInstant(pub Duration);

impl Add<Duration> for SimInstant {
    type Output = SimInstant;
    fn add(self, rhs: Duration) -> SimInstant {
        SimInstant(self.0 + rhs)
    }
}

impl AddAssign<Duration> for SimInstant {
    fn add_assign(&mut self, rhs: Duration) {
        self.0 += rhs;
    }
}

impl Sub<Duration> for SimInstant {
    type Output = SimInstant;
    fn sub(self, rhs: Duration) -> SimInstant {
        SimInstant(self.0.saturating_sub(rhs))
    }
}

impl SubAssign<Duration> for SimInstant {
    fn sub_assign(&mut self, rhs: Duration) {
        self.0 = self.0.saturating_sub(rhs);
    }
}

impl Sub<SimInstant> for SimInstant {
    type Output = Duration;
    fn sub(self, rhs: SimInstant) -> Duration {
        self.0.saturating_sub(rhs.0)
    }
}

impl openraft::Instant for SimInstant {
    fn now() -> SimInstant {
        SimInstant(current().lock().now)
    }
}

/// A timer: ready once virtual time reaches its deadline.
pub struct Sleep {
    deadline: Duration,
    registered: Option<(Duration, u64)>,
}

impl Future for Sleep {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let shared = current();
        let mut inner = shared.lock();
        if inner.now >= self.deadline {
            if let Some(key) = self.registered.take() {
                inner.timers.remove(&key);
            }
            return Poll::Ready(());
        }
        let key = match self.registered {
            Some(key) => key,
            None => {
                inner.next_timer += 1;
                (self.deadline, inner.next_timer)
            }
        };
        inner.timers.insert(key, cx.waker().clone());
        self.registered = Some(key);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let (Some(key), Some(shared)) = (self.registered, try_current()) {
            shared.lock().timers.remove(&key);
        }
    }
}

/// A future given until a deadline.
pub struct Timeout<F> {
    future: Pin<Box<F>>,
    sleep: Sleep,
}

impl<R, F: Future<Output = R>> Future for Timeout<F> {
    type Output = Result<R, Elapsed>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(out) = self.future.as_mut().poll(cx) {
            return Poll::Ready(Ok(out));
        }
        match Pin::new(&mut self.sleep).poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(Elapsed)),
            Poll::Pending => Poll::Pending,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl std::fmt::Display for Elapsed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("deadline elapsed (simulated)")
    }
}

/// A task's end, or its cancellation when its node crashed.
pub struct JoinHandle<T> {
    slot: Arc<Mutex<JoinSlot<T>>>,
}

struct JoinSlot<T> {
    outcome: Option<Result<T, Cancelled>>,
    waiter: Option<Waker>,
}

impl<T> JoinSlot<T> {
    fn finish(&mut self, outcome: Result<T, Cancelled>) {
        if self.outcome.is_none() {
            self.outcome = Some(outcome);
            if let Some(waker) = self.waiter.take() {
                waker.wake();
            }
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cancelled;

impl std::fmt::Display for Cancelled {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the task's node crashed (simulated)")
    }
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, Cancelled>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let mut slot = self.slot.lock().unwrap_or_else(|p| p.into_inner());
        match slot.outcome.take() {
            Some(outcome) => Poll::Ready(outcome),
            None => {
                slot.waiter = Some(cx.waker().clone());
                Poll::Pending
            }
        }
    }
}

/// Ends a task's `JoinHandle` as cancelled if the task is dropped before it finishes.
struct CancelOnDrop<T>(Arc<Mutex<JoinSlot<T>>>);

impl<T> Drop for CancelOnDrop<T> {
    fn drop(&mut self) {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .finish(Err(Cancelled));
    }
}

/// openraft's runtime over the simulator's executor.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct SimRuntime;

impl AsyncRuntime for SimRuntime {
    type JoinError = Cancelled;
    type JoinHandle<T: OptionalSend + 'static> = JoinHandle<T>;
    type Sleep = Sleep;
    type Instant = SimInstant;
    type TimeoutError = Elapsed;
    type Timeout<R, T: Future<Output = R> + OptionalSend> = Timeout<T>;
    type ThreadLocalRng = rand_chacha::ChaCha8Rng;
    type OneshotSender<T: OptionalSend> = TokioOneShotSender<T>;
    type OneshotReceiverError = tokio::sync::oneshot::error::RecvError;
    type OneshotReceiver<T: OptionalSend> = tokio::sync::oneshot::Receiver<T>;

    fn spawn<T>(future: T) -> JoinHandle<T::Output>
    where
        T: Future + OptionalSend + 'static,
        T::Output: OptionalSend + 'static,
    {
        let slot = Arc::new(Mutex::new(JoinSlot {
            outcome: None,
            waiter: None,
        }));
        let guard = CancelOnDrop(slot.clone());
        let shared = current();
        let owner = shared.lock().running;
        spawn_task(
            &shared,
            owner,
            Box::pin(async move {
                let guard = guard;
                let out = future.await;
                guard
                    .0
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .finish(Ok(out));
            }),
        );
        JoinHandle { slot }
    }

    fn sleep(duration: Duration) -> Sleep {
        Self::sleep_until(<SimInstant as openraft::Instant>::now() + duration)
    }

    fn sleep_until(deadline: SimInstant) -> Sleep {
        Sleep {
            deadline: deadline.0,
            registered: None,
        }
    }

    fn timeout<R, F: Future<Output = R> + OptionalSend>(
        duration: Duration,
        future: F,
    ) -> Timeout<F> {
        Self::timeout_at(<SimInstant as openraft::Instant>::now() + duration, future)
    }

    fn timeout_at<R, F: Future<Output = R> + OptionalSend>(
        deadline: SimInstant,
        future: F,
    ) -> Timeout<F> {
        Timeout {
            future: Box::pin(future),
            sleep: Self::sleep_until(deadline),
        }
    }

    fn is_panic(_: &Cancelled) -> bool {
        false
    }

    fn thread_rng() -> rand_chacha::ChaCha8Rng {
        let shared = current();
        let mut inner = shared.lock();
        inner.rng_draws += 1;
        rand_chacha::ChaCha8Rng::seed_from_u64(
            inner.seed ^ inner.rng_draws.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        )
    }

    fn oneshot<T: OptionalSend>() -> (TokioOneShotSender<T>, tokio::sync::oneshot::Receiver<T>) {
        let (tx, rx) = tokio::sync::oneshot::channel();
        (TokioOneShotSender(tx), rx)
    }
}
