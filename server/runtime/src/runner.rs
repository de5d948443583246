//! Executes runs: from the thread's latest checkpoint, node by node, to END or an interrupt,
//! committing a checkpoint after every node (or only at the end, by the graph's
//! [`Durability`]) and streaming events.

use std::{
    collections::{BTreeMap, HashMap, HashSet, VecDeque},
    panic::AssertUnwindSafe,
    sync::{Arc, Mutex},
    time::{Duration, Instant as StdInstant, SystemTime},
};

use futures::FutureExt;
use tokio::{
    sync::{oneshot, watch, Notify, OwnedMutexGuard, OwnedSemaphorePermit, Semaphore},
    task::JoinSet,
    time::Instant,
};
use tokio_util::sync::{CancellationToken, WaitForCancellationFutureOwned};
use tracing::{debug, info, warn};

use crate::{
    checkpoint::{
        Checkpoint, CheckpointError, Checkpointer, Pending, PendingInterrupt, RunMarker, RunStatus, TaskWrite,
        ThreadHead, UnfinishedRun,
    },
    event::{EventKind, EventSender, FailureKind, RunEvents, RunObserver},
    graph::{Durability, FanOut, Graph, NodeEntry, NodeFailure, NodeKind, RetryPolicy, Target},
    handoff::{CompletedRun, Completion, Handoff},
    node::{EventSink, InterruptRequest, NodeContext, NodeError, NodeErrorKind, Resume},
    runlog::{RunLog, RunRetention, RunSubscription},
    State,
};

#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// Events buffered per run before the run waits for its reader.
    pub event_buffer: usize,
    /// Timeout of a node without one of its own.
    pub node_timeout: Duration,
    /// Deadline of a run whose request sets none.
    pub run_timeout: Duration,
    /// A run whose newest checkpoint is still `Running` and older than this is taken to be
    /// abandoned by a crashed process and may be taken over; a younger one belongs to a live
    /// run elsewhere and makes the thread busy. Must exceed the longest node timeout (a run
    /// with [`Durability::ByEffect`] writes a heartbeat checkpoint whenever its next node could
    /// otherwise run past it).
    pub takeover_after: Duration,
    /// This process's identity among the replicas sharing a store. Every checkpoint it writes
    /// names it as owner, and it keeps a lease in the store ([`RunRegistry::keep_leases`]):
    /// another replica takes a running run over as soon as its owner's lease has expired,
    /// instead of after `takeover_after`. A restarted process with the same id takes its own
    /// runs back at once. `None`: no leases, the age rule alone.
    pub replica: Option<Arc<str>>,
    /// How long a replica's lease lasts after each renewal (renewed every third of it).
    pub lease_ttl: Duration,
    /// Runs resumed at once when [`Runner::recover`] finds several abandoned.
    pub recovery_concurrency: usize,
    /// How often one run may be taken over after the process running it stopped (a crash, a
    /// replica lost) before it is failed instead: a node that kills its process (out of
    /// memory, an abort in native code) would otherwise be run again by every restart and
    /// every replica that takes the run over, for ever. Each takeover is counted in the run's
    /// checkpoint before any of its nodes runs again.
    pub max_takeovers: u32,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            event_buffer: 64,
            node_timeout: Duration::from_secs(120),
            run_timeout: Duration::from_secs(600),
            takeover_after: Duration::from_secs(130),
            replica: None,
            lease_ttl: Duration::from_secs(10),
            recovery_concurrency: 16,
            max_takeovers: 3,
        }
    }
}

/// What a run starts from.
#[derive(Debug)]
pub enum RunInput<U> {
    /// Applied to the state before the entry node runs (a user turn, a ticket).
    Update(U),
    /// Answers the pending interrupt `interrupt_id` with `value`: the node that raised it runs
    /// again with [`NodeContext::resume`] set. Other pending interrupts stay pending.
    Resume { interrupt_id: String, value: serde_json::Value },
}

/// Whether a run's thread must already exist.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ThreadMode {
    /// A thread without checkpoints is [`RunError::NotFound`].
    #[default]
    Existing,
    /// The run creates the thread when it has no checkpoints.
    CreateIfMissing,
    /// The run creates the thread, which must not exist: the thread is not read first, and the
    /// accepting commit fails with [`RunError::AlreadyExists`] (writing nothing) when it does.
    /// Atomic, unlike checking first and then starting a run.
    New,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum BusyPolicy {
    /// Fail with [`RunError::ThreadBusy`] when a run holds the thread.
    #[default]
    Reject,
    /// Wait for the running run to finish.
    Queue,
}

#[derive(Debug)]
pub struct RunRequest<U> {
    pub thread_id: String,
    pub input: RunInput<U>,
    pub idempotency_key: Option<String>,
    /// A digest of what defines the request (the caller decides which fields and how), kept
    /// with the idempotency key: a retry with the key and another fingerprint is refused with
    /// [`RunError::IdempotencyMismatch`] instead of replaying a different request's outcome.
    /// Ignored without a key.
    pub fingerprint: Option<String>,
    pub busy: BusyPolicy,
    /// Overrides [`RunnerConfig::run_timeout`].
    pub timeout: Option<Duration>,
    pub mode: ThreadMode,
    /// The thread as the caller already read it (to route the request to this workflow, say):
    /// [`Runner::start_with`] starts an update from it instead of reading the thread again.
    /// Only the ordinary case is taken on its word: when the thread has moved on since, or the
    /// run could not start from it as it is (a run in progress, a pending interrupt, a refusal),
    /// nothing is written and `start_with` returns [`StartError::Stale`], for the caller to
    /// start again without it. [`Runner::start`] ignores it.
    pub head: Option<ThreadHead>,
}

impl<U> RunRequest<U> {
    pub fn new(thread_id: impl Into<String>, input: RunInput<U>) -> Self {
        Self {
            thread_id: thread_id.into(),
            input,
            idempotency_key: None,
            fingerprint: None,
            busy: BusyPolicy::Reject,
            timeout: None,
            mode: ThreadMode::Existing,
            head: None,
        }
    }
}

/// Why [`Runner::start_with`] started no run.
#[derive(Debug)]
pub enum StartError<E> {
    /// The caller's admission check refused the thread as it stands.
    Refused(E),
    /// The request's [`RunRequest::head`] did not hold, or the run could not start from it as
    /// it is: nothing was written. Starting again without it decides on a fresh read.
    Stale,
    Run(RunError),
}

impl<E> From<RunError> for StartError<E> {
    fn from(error: RunError) -> Self {
        StartError::Run(error)
    }
}

impl<E> From<CheckpointError> for StartError<E> {
    fn from(error: CheckpointError) -> Self {
        StartError::Run(error.into())
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("thread {thread_id} not found")]
    NotFound { thread_id: String },
    #[error("thread {thread_id} already exists")]
    AlreadyExists { thread_id: String },
    /// `retry_after`: when the thread may be free, if the runner knows better than a short
    /// wait (a run whose replica stopped renewing its lease is taken over when it expires).
    #[error("a run is in progress on thread {thread_id}")]
    ThreadBusy { thread_id: String, retry_after: Option<Duration> },
    #[error("thread {thread_id} has no pending interrupt to resume")]
    NothingToResume { thread_id: String },
    #[error("thread {thread_id} has no pending interrupt {interrupt_id:?}")]
    UnknownInterrupt { thread_id: String, interrupt_id: String },
    #[error("interrupt {interrupt_id:?} of thread {thread_id} was already answered")]
    InterruptAnswered { thread_id: String, interrupt_id: String },
    #[error("thread {thread_id} is paused at an interrupt; resume it instead")]
    Interrupted { thread_id: String },
    #[error("node {node} raised interrupt {interrupt_id:?}, whose id the thread has already used")]
    DuplicateInterrupt { node: String, interrupt_id: String },
    #[error("idempotency key {key:?} of thread {thread_id} was used by a different request")]
    IdempotencyMismatch { thread_id: String, key: String },
    #[error("a run of an ephemeral graph cannot {what}")]
    Ephemeral { what: &'static str },
    #[error("node {node} failed")]
    Node {
        node: String,
        #[source]
        source: NodeError,
    },
    #[error("node {node} exceeded its timeout of {timeout:?}")]
    NodeTimeout { node: String, timeout: Duration },
    #[error("run exceeded its deadline")]
    DeadlineExceeded,
    #[error("run was cancelled")]
    Cancelled,
    /// The process stopped ([`RunRegistry::stop`]) before the run ended. Unlike a cancelled
    /// run it is not rolled back: it stays in its last checkpoint, as a crash leaves it, and the
    /// next start or another replica resumes it.
    #[error("run was stopped with its process; it resumes from its last checkpoint")]
    Stopped,
    #[error("run exceeded the step limit of {limit}")]
    StepLimit { limit: u32 },
    #[error("router after node {node} chose undeclared target {target:?}")]
    UndeclaredTarget { node: String, target: Target },
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    #[error("state of thread {thread_id} could not be encoded or decoded")]
    StateCodec {
        thread_id: String,
        #[source]
        source: serde_json::Error,
    },
    /// The graph's output for the final state did not encode; the run failed instead of
    /// reporting something else.
    #[error("output of thread {thread_id} could not be encoded")]
    OutputCodec {
        thread_id: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("run task ended without an outcome")]
    Lost,
    /// The run a retry attached to (by its idempotency key) failed; `kind` and `message` are
    /// its failure's.
    #[error("run {run_id} failed: {message}")]
    AttachedRunFailed { run_id: String, kind: FailureKind, message: String },
}

impl RunError {
    /// What went wrong, including a node error's own message (which `Display` leaves to the
    /// error's source).
    pub fn detail(&self) -> String {
        match self {
            RunError::Node { node, source } => format!("node {node} failed: {}", source.message),
            other => other.to_string(),
        }
    }

    pub fn failure_kind(&self) -> FailureKind {
        match self {
            RunError::NotFound { .. } | RunError::UnknownInterrupt { .. } => FailureKind::NotFound,
            RunError::AlreadyExists { .. } | RunError::ThreadBusy { .. } => FailureKind::Conflict,
            RunError::NothingToResume { .. }
            | RunError::InterruptAnswered { .. }
            | RunError::Interrupted { .. }
            | RunError::IdempotencyMismatch { .. } => FailureKind::FailedPrecondition,
            RunError::Node { source, .. } => match source.kind {
                NodeErrorKind::ModelUnavailable => FailureKind::ModelUnavailable,
                NodeErrorKind::ModelOutputInvalid => FailureKind::ModelOutputInvalid,
                NodeErrorKind::DependencyFailed => FailureKind::DependencyFailed,
                NodeErrorKind::InvalidInput => FailureKind::InvalidInput,
                NodeErrorKind::Cancelled => FailureKind::Cancelled,
                NodeErrorKind::Internal => FailureKind::Internal,
            },
            RunError::NodeTimeout { .. } | RunError::DeadlineExceeded => FailureKind::DeadlineExceeded,
            RunError::Cancelled => FailureKind::Cancelled,
            RunError::Stopped => FailureKind::Stopped,
            RunError::StepLimit { .. } => FailureKind::StepLimit,
            RunError::AttachedRunFailed { kind, .. } => *kind,
            RunError::Checkpoint(CheckpointError::Conflict { .. }) => FailureKind::Conflict,
            RunError::Checkpoint(_) => FailureKind::StoreUnavailable,
            RunError::UndeclaredTarget { .. }
            | RunError::DuplicateInterrupt { .. }
            | RunError::Ephemeral { .. }
            | RunError::StateCodec { .. }
            | RunError::OutputCodec { .. }
            | RunError::Lost => FailureKind::Internal,
        }
    }
}

/// How a run ended.
#[derive(Debug, Clone)]
pub struct RunOutcome<S> {
    pub run_id: String,
    /// The checkpoint version the run ended at.
    pub version: u64,
    pub status: RunStatus,
    /// The workflow's output.
    pub output: serde_json::Value,
    /// The state after the run; `None` for a replay, which only has the recorded output.
    pub state: Option<S>,
    /// Every interrupt the thread waits on after the run (empty for a replay).
    pub interrupts: Vec<PendingInterrupt>,
    /// True when an earlier run with the same idempotency key is being reported.
    pub replayed: bool,
    pub steps: u32,
    /// True when the runner's [`Handoff`] took the completed state and the thread was erased
    /// instead of checkpointed (`version` is then the last checkpoint the run wrote).
    pub erased: bool,
    /// When the thread was created, as the run read it with the checkpoint it started from (or
    /// wrote it, starting the thread); `None` for a replay and a recovered run.
    pub thread_created_at: Option<SystemTime>,
    /// When the checkpoint at `version` was written (the thread's `updated_at`); `None` for a
    /// replay, and when the run wrote none.
    pub updated_at: Option<SystemTime>,
}

/// Where a run's outcome arrives.
pub type OutcomeReceiver<S> = oneshot::Receiver<Result<RunOutcome<S>, RunError>>;

/// A started run: its id, its event stream and its outcome.
pub struct RunHandle<S> {
    pub run_id: String,
    pub events: RunEvents,
    outcome: OutcomeReceiver<S>,
    cancel: CancellationToken,
}

impl<S> RunHandle<S> {
    pub fn cancel(&self) {
        self.cancel.cancel();
    }

    /// Waits for the outcome, discarding events not yet read.
    pub async fn wait(mut self) -> Result<RunOutcome<S>, RunError> {
        self.events.close();
        while self.events.recv().await.is_some() {}
        self.outcome.await.unwrap_or(Err(RunError::Lost))
    }

    /// Splits the handle so events and outcome can be consumed separately.
    pub fn into_parts(self) -> (RunEvents, OutcomeReceiver<S>, CancellationToken) {
        (self.events, self.outcome, self.cancel)
    }
}

/// Runs and thread locks shared by every workflow of a process, so a cancel or a shutdown
/// reaches every run, and thread ids are exclusive across workflows. It also keeps each run's
/// events ([`RunLog`]) while it runs and, within [`RunRetention`], after it ended.
pub struct RunRegistry {
    threads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    runs: Mutex<HashMap<String, ActiveRun>>,
    /// Logs of ended runs, oldest first.
    finished: Mutex<VecDeque<(StdInstant, Arc<RunLog>)>>,
    retention: RunRetention,
    idle: Notify,
    /// Every store a runner of the process writes to: where the replica's lease is kept.
    stores: Mutex<Vec<Arc<dyn Checkpointer>>>,
    /// Slots for runs executing at once; `None`: no limit. See [`RunRegistry::with_max_active`].
    active: Option<Arc<Semaphore>>,
    /// Cancelled by [`RunRegistry::stop`]; every run's own cancel token is its child.
    stopping: CancellationToken,
    /// Sees every run's events ([`RunRegistry::with_observer`]).
    observer: Option<Arc<dyn RunObserver>>,
}

struct ActiveRun {
    cancel: CancellationToken,
    log: Arc<RunLog>,
}

impl Default for RunRegistry {
    fn default() -> Self {
        Self::new(RunRetention::default())
    }
}

struct ThreadGuard {
    registry: Arc<RunRegistry>,
    thread_id: String,
    guard: Option<OwnedMutexGuard<()>>,
    /// The run's slot under [`RunRegistry::with_max_active`], freed with the thread.
    slot: Option<OwnedSemaphorePermit>,
}

impl Drop for ThreadGuard {
    fn drop(&mut self) {
        let mut threads = self.registry.threads.lock().expect("thread lock map poisoned");
        // Only the map and this guard hold the mutex: nobody waits, so the entry can go.
        // New callers go through the map lock we hold, so none can slip in between.
        if threads.get(&self.thread_id).is_some_and(|m| Arc::strong_count(m) == 2) {
            threads.remove(&self.thread_id);
        }
        self.guard.take();
    }
}

impl RunRegistry {
    async fn lock_thread(self: &Arc<Self>, thread_id: &str, busy: BusyPolicy) -> Result<ThreadGuard, RunError> {
        let mutex = {
            let mut threads = self.threads.lock().expect("thread lock map poisoned");
            threads.entry(thread_id.to_owned()).or_default().clone()
        };
        let guard = match busy {
            BusyPolicy::Reject => match mutex.try_lock_owned() {
                Ok(guard) => guard,
                Err(_) => return Err(RunError::ThreadBusy { thread_id: thread_id.to_owned(), retry_after: None }),
            },
            BusyPolicy::Queue => mutex.lock_owned().await,
        };
        Ok(ThreadGuard { registry: self.clone(), thread_id: thread_id.to_owned(), guard: Some(guard), slot: None })
    }

    /// Whether a run or recovery of this process holds the thread, or is about to. An entry of
    /// the map is shared by its holder's guard and by every caller waiting for it; one that
    /// only the map refers to (a waiter gave up) holds nothing. Looked at without locking, so
    /// that looking never turns a caller away.
    fn holds(&self, thread_id: &str) -> bool {
        let threads = self.threads.lock().expect("thread lock map poisoned");
        threads.get(thread_id).is_some_and(|mutex| Arc::strong_count(mutex) > 1)
    }

    /// The runs of `listed` a recovery or takeover scan goes on with: those on a thread this
    /// process does not hold, whose owner is not another replica with a live lease. A thread
    /// held here is being run or recovered here, and a live replica is still making its runs:
    /// neither is read (at scale a scan meets thousands of them). Each other replica's lease is
    /// read once per call; one that cannot be read counts as not live, so that the run goes on
    /// to the claim, which reports the error. `replica` is this process's id.
    pub async fn abandoned(
        &self,
        checkpointer: &dyn Checkpointer,
        replica: Option<&str>,
        listed: impl IntoIterator<Item = UnfinishedRun>,
    ) -> Vec<UnfinishedRun> {
        let mut live_owners: HashMap<String, bool> = HashMap::new();
        let mut abandoned = Vec::new();
        for run in listed {
            if self.holds(&run.thread_id) {
                continue;
            }
            if let Some(owner) = run.owner.as_deref().filter(|owner| Some(*owner) != replica) {
                let live = match live_owners.get(owner) {
                    Some(live) => *live,
                    None => {
                        // Live however little is left: the claim leaves such a run to its
                        // replica as well.
                        let live = matches!(checkpointer.lease_remaining(owner).await, Ok(Some(_)));
                        live_owners.insert(owner.to_owned(), live);
                        live
                    }
                };
                if live {
                    continue;
                }
            }
            abandoned.push(run);
        }
        abandoned
    }

    /// Waits, in arrival order, for a slot among the runs executing at once. Taken while the
    /// thread is locked and before its checkpoint is read, so a run waiting here holds only its
    /// request: the state, its serialized copies and the run's events come with the slot.
    async fn take_slot(&self, guard: &mut ThreadGuard) {
        if let Some(active) = &self.active {
            // The semaphore is never closed.
            guard.slot = active.clone().acquire_owned().await.ok();
        }
    }

    pub fn new(retention: RunRetention) -> Self {
        Self {
            threads: Mutex::default(),
            runs: Mutex::default(),
            finished: Mutex::default(),
            retention,
            idle: Notify::new(),
            stores: Mutex::default(),
            active: None,
            stopping: CancellationToken::new(),
            observer: None,
        }
    }

    /// Shows every event of every run of this registry's runners to `observer` (metrics).
    pub fn with_observer(mut self, observer: Arc<dyn RunObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Lets at most `max` runs execute at once in the process (0: no limit); a run started
    /// beyond it waits for a slot, first come first served, before it reads its thread. What it
    /// bounds is memory: a run in progress holds its state, the state's serialized copies and
    /// its events, a waiting one only its request. Recovery after a crash is not counted (it
    /// has `RunnerConfig::recovery_concurrency`).
    pub fn with_max_active(mut self, max: usize) -> Self {
        // tokio's semaphore panics beyond MAX_PERMITS; a limit that high is no limit anyway.
        self.active = (max > 0).then(|| Arc::new(Semaphore::new(max.min(Semaphore::MAX_PERMITS))));
        self
    }

    /// Adds a store to [`RunRegistry::stores`] (once however often it is added). A runner
    /// sharing the registry adds its own ([`Runner::with_registry`]).
    pub fn add_store(&self, store: &Arc<dyn Checkpointer>) {
        let mut stores = self.stores.lock().expect("store list poisoned");
        if !stores.iter().any(|known| std::ptr::addr_eq(Arc::as_ptr(known), Arc::as_ptr(store))) {
            stores.push(store.clone());
        }
    }

    /// Every distinct store the process's runners write to (see [`Runner::with_registry`]).
    pub fn stores(&self) -> Vec<Arc<dyn Checkpointer>> {
        self.stores.lock().expect("store list poisoned").clone()
    }

    /// Takes `replica`'s lease in every store the process's runners write to, once now (an
    /// error if a store refuses) and then every third of `ttl` on a background task, until
    /// `stop`. A failed renewal is logged and retried: the replica's runs go on, and if its
    /// lease runs out meanwhile another replica may take them over (the compare-and-set on
    /// every checkpoint then lets only one of the two continue each run).
    pub async fn keep_leases(
        self: &Arc<Self>,
        replica: Arc<str>,
        ttl: Duration,
        stop: CancellationToken,
    ) -> Result<tokio::task::JoinHandle<()>, CheckpointError> {
        for store in self.stores() {
            store.renew_lease(&replica, ttl).await?;
        }
        let registry = self.clone();
        Ok(tokio::spawn(async move {
            let mut failing = false;
            loop {
                tokio::select! {
                    _ = stop.cancelled() => return,
                    _ = tokio::time::sleep(ttl / 3) => {}
                }
                for store in registry.stores() {
                    match store.renew_lease(&replica, ttl).await {
                        Ok(()) if failing => {
                            info!(%replica, "lease renewed again");
                            failing = false;
                        }
                        Ok(()) => {}
                        Err(error) if !failing => {
                            warn!(%replica, %error, "cannot renew the replica's lease; retrying");
                            failing = true;
                        }
                        Err(_) => {}
                    }
                }
            }
        }))
    }

    /// Ends `replica`'s lease in every store (a clean shutdown, after its runs ended), so other
    /// replicas need not wait for it to expire.
    pub async fn release_leases(&self, replica: &str) {
        for store in self.stores() {
            if let Err(error) = store.release_lease(replica).await {
                warn!(%replica, %error, "cannot release the replica's lease; it expires on its own");
            }
        }
    }

    /// Cancels a running run. Returns false when no such run is active.
    pub fn cancel(&self, run_id: &str) -> bool {
        self.cancel_where(run_id, |_| true)
    }

    /// Cancels a running run whose thread id passes `visible` (a caller may only cancel the
    /// runs of threads it may see). Returns false when no such run is active.
    pub fn cancel_where(&self, run_id: &str, visible: impl Fn(&str) -> bool) -> bool {
        let runs = self.runs.lock().expect("run map poisoned");
        match runs.get(run_id).filter(|run| visible(run.log.thread_id())) {
            Some(run) => {
                run.cancel.cancel();
                true
            }
            None => false,
        }
    }

    /// Stops every run of the process, for a shutdown whose grace period is over, and every
    /// run started after (start-up recovery racing the shutdown). A stopped run ends with
    /// [`RunError::Stopped`] and writes nothing more: it stays in its last checkpoint, for the
    /// next start or another replica to resume, where a cancelled one would be rolled back and
    /// the turn its caller was told is accepted lost.
    pub fn stop(&self) {
        self.stopping.cancel();
    }

    /// Resolves once [`RunRegistry::stop`] was called: what a workflow's open-ended work (a
    /// watch that follows a thread) waits on to end with the process.
    pub fn stopped(&self) -> WaitForCancellationFutureOwned {
        self.stopping.clone().cancelled_owned()
    }

    /// Whether [`RunRegistry::stop`] was called.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// A new run's cancel token: cancelled by `CancelRun`, or with every other run by
    /// [`RunRegistry::stop`].
    fn run_token(&self) -> CancellationToken {
        self.stopping.child_token()
    }

    pub fn active_runs(&self) -> usize {
        self.runs.lock().expect("run map poisoned").len()
    }

    /// Whether this process is running `run_id` now.
    pub fn is_running(&self, run_id: &str) -> bool {
        self.runs.lock().expect("run map poisoned").contains_key(run_id)
    }

    /// Follows a run this process is running or ended recently: its kept events after `after`,
    /// then live ones. `None` for a run it does not know (or no longer keeps).
    pub fn subscribe(&self, run_id: &str, after: u64) -> Option<RunSubscription> {
        if let Some(run) = self.runs.lock().expect("run map poisoned").get(run_id) {
            return Some(run.log.subscribe(after));
        }
        let mut finished = self.finished.lock().expect("finished runs poisoned");
        self.prune(&mut finished);
        finished.iter().rev().find(|(_, log)| log.run_id() == run_id).map(|(_, log)| log.subscribe(after))
    }

    /// Waits until no run is active (for graceful shutdown).
    pub async fn wait_idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.active_runs() == 0 {
                return;
            }
            notified.await;
        }
    }

    fn new_log(&self, run_id: Arc<str>, thread_id: Arc<str>) -> Arc<RunLog> {
        Arc::new(RunLog::new(run_id, thread_id, self.retention.max_events))
    }

    /// The sink of a run of `workflow`: its log, its caller's channel and the observer.
    fn new_sink(
        &self,
        workflow: &str,
        run_id: Arc<str>,
        thread_id: Arc<str>,
        tx: EventSender,
        deadline: Instant,
    ) -> EventSink {
        let observer = self.observer.as_ref().map(|observer| (observer.clone(), Arc::from(workflow)));
        EventSink::new(self.new_log(run_id, thread_id), tx, observer, deadline)
    }

    fn register(&self, log: Arc<RunLog>, cancel: CancellationToken) {
        let run_id = log.run_id().to_owned();
        self.runs.lock().expect("run map poisoned").insert(run_id, ActiveRun { cancel, log });
    }

    fn unregister(&self, run_id: &str) {
        let ended = {
            let mut runs = self.runs.lock().expect("run map poisoned");
            let ended = runs.remove(run_id);
            if runs.is_empty() {
                self.idle.notify_waiters();
            }
            ended
        };
        let Some(ActiveRun { log, .. }) = ended else { return };
        log.close();
        if self.retention.max_events > 0 && self.retention.keep_finished > 0 {
            let mut finished = self.finished.lock().expect("finished runs poisoned");
            finished.push_back((StdInstant::now(), log));
            self.prune(&mut finished);
        }
    }

    fn prune(&self, finished: &mut VecDeque<(StdInstant, Arc<RunLog>)>) {
        while finished.len() > self.retention.keep_finished
            || finished.front().is_some_and(|(at, _)| at.elapsed() > self.retention.keep_finished_for)
        {
            finished.pop_front();
        }
    }
}

/// Executes runs of one graph against one checkpointer.
pub struct Runner<S: State> {
    graph: Arc<Graph<S>>,
    checkpointer: Arc<dyn Checkpointer>,
    registry: Arc<RunRegistry>,
    config: RunnerConfig,
    handoff: Option<Arc<dyn Handoff<S>>>,
    /// Runs in flight with an idempotency key, by thread and key: a retry attaches to them.
    inflight: InflightRuns<S>,
    /// Threads [`Runner::recover`] has queued, so overlapping scans queue each once.
    recovering: Arc<Mutex<HashSet<String>>>,
    /// Woken when recovery registers a run or lets a thread go: a retry that found the thread
    /// held by recovery before its run was registered waits for one or the other.
    recovery_progress: Arc<Notify>,
    /// Bounds the runs recovery resumes at once.
    recovery: Arc<Semaphore>,
}

impl<S: State> Clone for Runner<S> {
    fn clone(&self) -> Self {
        Self {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            registry: self.registry.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
            inflight: self.inflight.clone(),
            recovering: self.recovering.clone(),
            recovery_progress: self.recovery_progress.clone(),
            recovery: self.recovery.clone(),
        }
    }
}

/// How a run ended, as runs attached to it learn it.
type SharedOutcome<S> = Result<RunOutcome<S>, (FailureKind, String)>;

/// A thread and an idempotency key: what a retry attaches by.
type InflightKey = (String, String);

/// Runs in flight with an idempotency key, shared by a runner's clones.
type InflightRuns<S> = Arc<Mutex<HashMap<InflightKey, Inflight<S>>>>;

/// A run in flight that a retry with its idempotency key attaches to.
struct Inflight<S> {
    run_id: String,
    fingerprint: Option<String>,
    log: Arc<RunLog>,
    cancel: CancellationToken,
    outcome: watch::Receiver<Option<SharedOutcome<S>>>,
}

impl<S> Clone for Inflight<S> {
    fn clone(&self) -> Self {
        Self {
            run_id: self.run_id.clone(),
            fingerprint: self.fingerprint.clone(),
            log: self.log.clone(),
            cancel: self.cancel.clone(),
            outcome: self.outcome.clone(),
        }
    }
}

/// A run registered as running: [`Tracked::finish`] publishes its outcome to attached callers
/// and unregisters it.
struct Tracked<S: State> {
    registry: Arc<RunRegistry>,
    inflight: InflightRuns<S>,
    run_id: String,
    /// The (thread, key) entry and its outcome's sender, for a run with an idempotency key.
    entry: Option<(InflightKey, watch::Sender<Option<SharedOutcome<S>>>)>,
}

impl<S: State> Tracked<S> {
    fn finish(self, outcome: &Result<RunOutcome<S>, RunError>) {
        if let Some((key, publish)) = self.entry {
            let mut inflight = self.inflight.lock().expect("inflight runs poisoned");
            // Only this run's entry: a later run with the key (after this one failed) may
            // have taken the slot.
            if inflight.get(&key).is_some_and(|entry| entry.run_id == self.run_id) {
                inflight.remove(&key);
            }
            // Attached callers took their receivers under this lock: with none, nothing to
            // clone.
            if publish.receiver_count() > 0 {
                publish.send_replace(Some(match outcome {
                    Ok(outcome) => Ok(outcome.clone()),
                    Err(error) => Err((error.failure_kind(), error.detail())),
                }));
            }
        }
        self.registry.unregister(&self.run_id);
    }
}

/// Whether a `Running` checkpoint belongs to a live run elsewhere or was abandoned.
enum Claim {
    Live { retry_after: Option<Duration> },
    Abandoned,
}

/// Everything the node loop needs, owned, so it can run on a spawned task.
struct Execution<S: State> {
    graph: Arc<Graph<S>>,
    checkpointer: Arc<dyn Checkpointer>,
    config: RunnerConfig,
    handoff: Option<Arc<dyn Handoff<S>>>,
    thread_id: Arc<str>,
    run_id: Arc<str>,
    idempotency_key: Option<String>,
    fingerprint: Option<String>,
    sink: Arc<EventSink>,
    cancel: CancellationToken,
    /// The registry's stop: tells a run cancelled by [`RunRegistry::stop`] from one cancelled
    /// by its caller.
    stopping: CancellationToken,
    deadline: Instant,
    started: StdInstant,
    state: S,
    version: u64,
    next: Option<String>,
    /// Interrupts, answered ids and finished fan-out tasks, as the next checkpoint records them.
    pending: Pending,
    /// The answer the first node runs with, when the run resumes an interrupt.
    resume: Option<Resume>,
    /// Taken over from a process that stopped: the takeover is counted before anything runs.
    taken_over: bool,
    step: u32,
    /// A run may execute nodes while `step` is below this; the failure route raises it once.
    step_limit: u32,
    /// What a failed run restores.
    rollback: Rollback,
    /// The run answers an interrupt: a failure reopens the interrupt, so it rolls back to the
    /// state from before the run even past effects (see [`Execution::keep_effects`]).
    answers_interrupt: bool,
    /// When this run last wrote a checkpoint (the heartbeat of [`Durability::ByEffect`]).
    last_commit: StdInstant,
    /// The step of the last checkpoint: a node with effects starts from a committed one.
    committed_step: u32,
    /// The graph's output (value and JSON text) once the run has completed or paused: the
    /// state no longer changes, and the checkpoint, the outcome and the final event all carry it.
    output: Option<(serde_json::Value, String)>,
    /// Whether the handoff took the completed state and the thread was erased.
    erased: bool,
    /// When the thread was created, when the run knows it: read with the checkpoint it started
    /// from, or its own first commit.
    thread_created_at: Option<SystemTime>,
    /// When this run's last checkpoint was written.
    committed_at: Option<SystemTime>,
}

struct Rollback {
    /// The state as its checkpoint stored it (none: the thread is new, and the default state
    /// is restored). Kept encoded: a run seldom fails, and decoding then beats copying the
    /// state on every run.
    state: Option<Vec<u8>>,
    next: Option<String>,
    pending: Pending,
    /// The state holds the run's own input: the run was taken over (it resumed from a
    /// checkpoint written after its input was applied), or it retried a request whose input a
    /// failed run kept. Its `failed` checkpoint says so (`Pending::input_kept`).
    holds_input: bool,
}

impl Rollback {
    /// A rollback to `state` (encoded), which holds the run's own input: what the thread waited
    /// on stays, the finished tasks and what belonged to the run go.
    fn holding_input(state: Vec<u8>, pending: &Pending) -> Self {
        Rollback {
            state: Some(state),
            next: None,
            pending: Pending { tasks: Vec::new(), ..pending.for_a_new_run() },
            holds_input: true,
        }
    }
}

/// What one node step produced: its updates (one per fan-out task, in dispatch order) and the
/// interrupts it raised.
struct StepOutput<U> {
    updates: Vec<U>,
    update_json: String,
    interrupts: Vec<InterruptRequest>,
}

/// What one attempt runs.
enum Work<'a, S: State> {
    Node(&'a dyn crate::node::Node<S>),
    Task(&'a dyn FanOut<S>, &'a serde_json::Value),
}

enum WorkOutput<U> {
    Node(crate::node::NodeOutput<U>),
    Task(U),
}

/// Everything an attempt needs, owned, so fan-out tasks can run on their own tasks.
#[derive(Clone)]
struct Attempts {
    node: Arc<str>,
    task: Option<u32>,
    step: u32,
    thread_id: Arc<str>,
    sink: Arc<EventSink>,
    cancel: CancellationToken,
    deadline: Instant,
    timeout: Duration,
    retry: Option<RetryPolicy>,
}

/// A node's final error with the attempts it took.
struct Failed {
    error: RunError,
    attempts: u32,
    /// The interrupt answer the node was resumed with, spent with it.
    answer: Option<Resume>,
}

impl Attempts {
    /// Runs `work` until it succeeds, fails in a way its retry policy does not retry, or runs out
    /// of attempts; every retry is streamed as `NodeRetrying`.
    async fn run<S: State>(
        &self,
        state: &S,
        work: Work<'_, S>,
        resume: Option<Resume>,
    ) -> Result<WorkOutput<S::Update>, Failed> {
        let max_attempts = self.retry.as_ref().map_or(1, |p| p.max_attempts.max(1));
        let mut attempt = 1;
        loop {
            let node_deadline = (Instant::now() + self.timeout).min(self.deadline);
            let ctx = NodeContext {
                node: self.node.clone(),
                task: self.task,
                thread_id: self.thread_id.clone(),
                sink: self.sink.clone(),
                cancel: self.cancel.child_token(),
                deadline: Some(node_deadline),
                resume: resume.clone(),
                attempt,
                acted: Default::default(),
            };
            let call = async {
                let attempt = AssertUnwindSafe(async {
                    match &work {
                        Work::Node(node) => node.run(state, &ctx).await.map(WorkOutput::Node),
                        Work::Task(fan_out, input) => fan_out.run_task(state, input, &ctx).await.map(WorkOutput::Task),
                    }
                });
                // A node is workflow code: its panic fails the node like any other error, so the
                // run rolls back and ends instead of taking its task, thread and slot with it.
                attempt.catch_unwind().await.unwrap_or_else(|panic| {
                    let message = format!("node panicked: {}", panic_message(&*panic));
                    tracing::error!(node = %self.node, %message, "node panicked");
                    Err(NodeError::new(NodeErrorKind::Internal, message))
                })
            };
            let result = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err((RunError::Cancelled, None, false)),
                result = tokio::time::timeout_at(node_deadline, call) => match result {
                    Ok(Ok(output)) => Ok(output),
                    Ok(Err(source)) if source.kind == NodeErrorKind::Cancelled => Err((RunError::Cancelled, None, false)),
                    Ok(Err(source)) => {
                        let kind = source.kind;
                        Err((RunError::Node { node: self.node.to_string(), source }, Some(kind), false))
                    }
                    Err(_) if node_deadline == self.deadline => Err((RunError::DeadlineExceeded, None, false)),
                    Err(_) => Err((RunError::NodeTimeout { node: self.node.to_string(), timeout: self.timeout }, None, true)),
                },
            };
            ctx.cancel.cancel();
            let (error, node_kind, timed_out) = match result {
                Ok(output) => return Ok(output),
                Err(failure) => failure,
            };
            let policy = match &self.retry {
                Some(policy) if attempt < max_attempts && policy.retries(node_kind, timed_out) && !ctx.has_acted() => {
                    policy
                }
                _ => return Err(Failed { error, attempts: attempt, answer: None }),
            };
            let delay = policy.delay(attempt);
            if Instant::now() + delay >= self.deadline {
                return Err(Failed { error, attempts: attempt, answer: None });
            }
            debug!(node = %self.node, attempt, ?delay, %error, "node attempt failed; retrying");
            self.sink
                .emit_task(
                    Some(self.node.clone()),
                    self.task,
                    EventKind::NodeRetrying {
                        step: self.step,
                        attempt,
                        max_attempts,
                        kind: error.failure_kind(),
                        message: error.detail(),
                        delay,
                    },
                )
                .await;
            tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(Failed { error: RunError::Cancelled, attempts: attempt, answer: None }),
                _ = tokio::time::sleep(delay) => {}
            }
            attempt += 1;
        }
    }
}

/// The message a panic was raised with, when it is a string (as `panic!` and `expect` make it).
fn panic_message(panic: &(dyn std::any::Any + Send)) -> &str {
    panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str)).unwrap_or("")
}

/// A run's whole drive, for a panic that no node caught (a router, an output function, the
/// engine itself): it ends the run as [`RunError::Lost`], as a crash of the process would,
/// but the run's registration, thread lock and slot are released and its log closed, so the
/// thread is not left busy until a restart. Its newest checkpoint stays `Running`, for
/// takeover.
async fn caught<S: State>(
    drive: impl std::future::Future<Output = Result<RunOutcome<S>, RunError>>,
) -> Result<RunOutcome<S>, RunError> {
    AssertUnwindSafe(drive).catch_unwind().await.unwrap_or_else(|panic| {
        tracing::error!(message = panic_message(&*panic), "run panicked outside its nodes");
        Err(RunError::Lost)
    })
}

/// Whether a request that must create its thread is the retry of the run whose thread it finds
/// (the same idempotency key, and for a failed run the same request), left running or failed
/// with its input kept: it goes on from there rather than being refused as already existing.
fn continues<U>(request: &RunRequest<U>, cp: &Checkpoint) -> bool {
    request.idempotency_key.is_some()
        && cp.run.idempotency_key == request.idempotency_key
        && match cp.run.status {
            RunStatus::Running => true,
            RunStatus::Failed => cp.pending.input_kept && !differs(&request.fingerprint, &cp.run.fingerprint),
            RunStatus::Completed | RunStatus::Interrupted => false,
        }
}

/// Whether a retry's fingerprint contradicts the recorded one. Only two known fingerprints can
/// disagree: a missing one on either side is not evidence of a different request.
fn differs(request: &Option<String>, recorded: &Option<String>) -> bool {
    matches!((request, recorded), (Some(a), Some(b)) if a != b)
}

/// Milliseconds: what every durable store keeps, so a checkpoint reads back as written.
fn now() -> SystemTime {
    let since = SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    std::time::UNIX_EPOCH + Duration::from_millis(since.as_millis() as u64)
}

fn decode<S: State>(checkpoint: &Checkpoint) -> Result<S, RunError> {
    serde_json::from_slice(&checkpoint.state)
        .map_err(|source| RunError::StateCodec { thread_id: checkpoint.thread_id.clone(), source })
}

impl<S: State> Runner<S> {
    pub fn new(graph: Graph<S>, checkpointer: Arc<dyn Checkpointer>, config: RunnerConfig) -> Self {
        let registry = Arc::new(RunRegistry::default());
        registry.add_store(&checkpointer);
        Self {
            graph: Arc::new(graph),
            checkpointer,
            registry,
            recovery: Arc::new(Semaphore::new(config.recovery_concurrency.max(1))),
            config,
            handoff: None,
            inflight: Arc::default(),
            recovering: Arc::default(),
            recovery_progress: Arc::default(),
        }
    }

    /// Offers every completed run's state to `handoff` before its final checkpoint (see
    /// [`crate::handoff`]).
    pub fn with_handoff(mut self, handoff: Arc<dyn Handoff<S>>) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// Shares a registry with other runners of the process (cancel by run id, shutdown).
    pub fn with_registry(mut self, registry: Arc<RunRegistry>) -> Self {
        registry.add_store(&self.checkpointer);
        self.registry = registry;
        self
    }

    pub fn graph(&self) -> &Graph<S> {
        &self.graph
    }

    pub fn checkpointer(&self) -> &Arc<dyn Checkpointer> {
        &self.checkpointer
    }

    pub fn config(&self) -> &RunnerConfig {
        &self.config
    }

    pub fn registry(&self) -> &Arc<RunRegistry> {
        &self.registry
    }

    /// The thread's current state and checkpoint, if it exists.
    pub async fn state(&self, thread_id: &str) -> Result<Option<(S, Checkpoint)>, RunError> {
        match self.checkpointer.latest(thread_id).await? {
            Some(cp) => Ok(Some((decode(&cp)?, cp))),
            None => Ok(None),
        }
    }

    /// Creates a thread at rest with `state` (version 1). Fails if it exists.
    pub async fn create_thread(&self, thread_id: &str, state: &S) -> Result<Checkpoint, RunError> {
        self.create_thread_keyed(thread_id, state, None, None).await
    }

    /// [`Runner::create_thread`], recording the idempotency key and request fingerprint of the
    /// call that creates it, as a run's are ([`Checkpointer::find_idempotent`] finds them): a
    /// retry of that call that finds the thread existing can tell the thread it created from
    /// one somebody else did.
    pub async fn create_thread_keyed(
        &self,
        thread_id: &str,
        state: &S,
        idempotency_key: Option<String>,
        fingerprint: Option<String>,
    ) -> Result<Checkpoint, RunError> {
        let _guard = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await?;
        let mut checkpoint = self.rest_checkpoint(thread_id, 1, state, "create")?;
        checkpoint.run.idempotency_key = idempotency_key;
        checkpoint.run.fingerprint = fingerprint;
        match self.checkpointer.put(&checkpoint).await {
            Ok(()) => Ok(checkpoint),
            Err(CheckpointError::Conflict { .. }) => Err(RunError::AlreadyExists { thread_id: thread_id.to_owned() }),
            Err(e) => Err(e.into()),
        }
    }

    /// Replaces a thread's state outside any run (resets, administrative edits), as a new
    /// checkpoint. Fails with ThreadBusy while a run holds the thread.
    pub async fn overwrite_state(&self, thread_id: &str, state: &S) -> Result<Checkpoint, RunError> {
        let _guard = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await?;
        let latest = self
            .checkpointer
            .latest(thread_id)
            .await?
            .ok_or_else(|| RunError::NotFound { thread_id: thread_id.to_owned() })?;
        let checkpoint = self.rest_checkpoint(thread_id, latest.version + 1, state, "overwrite")?;
        self.checkpointer.put(&checkpoint).await?;
        Ok(checkpoint)
    }

    /// Erases a thread. Fails with ThreadBusy while a run holds it.
    pub async fn delete_thread(&self, thread_id: &str) -> Result<bool, RunError> {
        let _guard = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await?;
        Ok(self.checkpointer.delete_thread(thread_id).await?)
    }

    /// [`Runner::delete_thread`] without waiting for the erasure to be durable
    /// ([`Checkpointer::delete_thread_unsynced`]): only for callers that find a thread a crash
    /// brought back and delete it again.
    pub async fn delete_thread_unsynced(&self, thread_id: &str) -> Result<bool, RunError> {
        let _guard = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await?;
        Ok(self.checkpointer.delete_thread_unsynced(thread_id).await?)
    }

    fn rest_checkpoint(&self, thread_id: &str, version: u64, state: &S, why: &str) -> Result<Checkpoint, RunError> {
        let bytes = serde_json::to_vec(state)
            .map_err(|source| RunError::StateCodec { thread_id: thread_id.to_owned(), source })?;
        Ok(Checkpoint {
            thread_id: thread_id.to_owned(),
            workflow: self.graph.name().to_owned(),
            version,
            state: bytes,
            next: None,
            pending: Pending::default(),
            run: RunMarker {
                run_id: format!("{why}-{}", uuid::Uuid::now_v7().simple()),
                idempotency_key: None,
                fingerprint: None,
                status: RunStatus::Completed,
                step: 0,
                output: None,
                owner: None,
            },
            created_at: now(),
        })
    }

    /// Starts a run. Returns once the run's input is committed (or a replay is found); the run
    /// then proceeds on its own task and completes even if the handle is dropped.
    pub async fn start(&self, mut request: RunRequest<S::Update>) -> Result<RunHandle<S>, RunError> {
        // Without a head nothing can be stale: a caller that cannot start again reads afresh.
        request.head = None;
        self.start_with(request, |_: &S, _: &Checkpoint| Ok::<(), std::convert::Infallible>(())).await.map_err(
            |error| match error {
                StartError::Run(error) => error,
                StartError::Refused(never) => match never {},
                StartError::Stale => unreachable!("a request without a head is never stale"),
            },
        )
    }

    /// [`Runner::start`], with `admit` deciding on the thread's newest checkpoint (and its
    /// decoded state) whether the run may start, before its input is applied. It runs under the
    /// thread's lock on the one read the run starts from, so a caller's own checks (a turn
    /// limit, say) need no read of their own and cannot race another run. Not called for a
    /// replay of an idempotent run, nor on a new thread.
    pub async fn start_with<E>(
        &self,
        mut request: RunRequest<S::Update>,
        admit: impl FnOnce(&S, &Checkpoint) -> Result<(), E>,
    ) -> Result<RunHandle<S>, StartError<E>> {
        if self.graph.durability() == Durability::Ephemeral {
            if request.idempotency_key.is_some() {
                return Err(RunError::Ephemeral { what: "take an idempotency key (nothing is recorded)" }.into());
            }
            if matches!(request.input, RunInput::Resume { .. }) {
                return Err(RunError::Ephemeral { what: "resume (nothing is paused)" }.into());
            }
            request.mode = ThreadMode::New;
        }
        if let Some(key) = &request.idempotency_key {
            if let Some(handle) = self.attach(&request.thread_id, key, &request.fingerprint)? {
                return Ok(handle);
            }
        }
        let mut guard = match self.registry.lock_thread(&request.thread_id, request.busy).await {
            Ok(guard) => guard,
            // Recovery holds the thread: its run is about to be registered, and a retry with
            // its key attaches to it rather than hearing the thread is busy.
            Err(busy) => match &request.idempotency_key {
                Some(key) if self.is_recovering(&request.thread_id) => {
                    if let Some(handle) =
                        self.attach_once_recovered(&request.thread_id, key, &request.fingerprint).await?
                    {
                        return Ok(handle);
                    }
                    self.registry.lock_thread(&request.thread_id, request.busy).await.map_err(|_| busy)?
                }
                _ => return Err(busy.into()),
            },
        };
        self.registry.take_slot(&mut guard).await;
        // A run started now would be stopped before its first node: refused before it writes
        // anything, so the caller's retry goes to a replica that is not stopping.
        if self.registry.stopping.is_cancelled() {
            return Err(RunError::Stopped.into());
        }
        let (tx, rx) = RunEvents::channel(self.config.event_buffer);
        let (outcome_tx, outcome_rx) = oneshot::channel();

        if let Some(key) = &request.idempotency_key {
            if let Some(found) = self.checkpointer.find_idempotent(&request.thread_id, key).await? {
                // A record without a fingerprint (written before fingerprints were kept) or a
                // request without one cannot be compared: replayed, as before.
                if differs(&request.fingerprint, &found.fingerprint) {
                    return Err(RunError::IdempotencyMismatch { thread_id: request.thread_id, key: key.clone() }.into());
                }
                debug!(thread_id = %request.thread_id, run_id = %found.run_id, "replaying idempotent run");
                let output = match found.output.as_deref() {
                    Some(json) => serde_json::from_str(json)
                        .map_err(|source| RunError::StateCodec { thread_id: request.thread_id.clone(), source })?,
                    None => serde_json::Value::Null,
                };
                let _ = outcome_tx.send(Ok(RunOutcome {
                    run_id: found.run_id.clone(),
                    version: found.version,
                    status: found.status,
                    output,
                    state: None,
                    interrupts: Vec::new(),
                    replayed: true,
                    steps: 0,
                    erased: false,
                    thread_created_at: None,
                    updated_at: None,
                }));
                drop(tx);
                return Ok(RunHandle {
                    run_id: found.run_id,
                    events: rx,
                    outcome: outcome_rx,
                    cancel: CancellationToken::new(),
                });
            }
        }

        // An update may start from the caller's read of the thread; a resume reads afresh.
        let head = request.head.take().filter(|_| matches!(request.input, RunInput::Update(_)));
        let from_head = head.is_some();
        let (mut latest, thread_created_at) = match (request.mode, head) {
            (ThreadMode::New, _) if request.idempotency_key.is_none() => (None, None),
            // The retry of the request that created the thread: its run is still running (a
            // crash abandoned it) or failed keeping its input (it was taken over, or an effect
            // had been made), and goes on from the thread as that left it. Anything else on the
            // thread makes the accepting compare-and-set fail: it already exists.
            (ThreadMode::New, _) => match self.checkpointer.head(&request.thread_id).await? {
                Some(head) if continues(&request, &head.checkpoint) => (Some(head.checkpoint), Some(head.created_at)),
                _ => (None, None),
            },
            (_, Some(head)) => (Some(head.checkpoint), Some(head.created_at)),
            (ThreadMode::Existing | ThreadMode::CreateIfMissing, None) => {
                match self.checkpointer.head(&request.thread_id).await? {
                    Some(head) => (Some(head.checkpoint), Some(head.created_at)),
                    None => (None, None),
                }
            }
        };
        // The caller's read is trusted for the ordinary case only: anything else is decided on
        // a fresh one.
        if from_head
            && latest
                .as_ref()
                .is_some_and(|cp| cp.run.status == RunStatus::Running || !cp.pending.interrupts.is_empty())
        {
            return Err(StartError::Stale);
        }

        // A checkpoint still marked running (while this process runs nothing on the thread)
        // belongs to another replica's run: a live one (the thread is busy) or one a crash
        // abandoned. Retrying that run's key takes it over and follows it; anything else
        // first finishes it unobserved, because its input was accepted.
        if let Some(cp) = latest.as_ref().filter(|cp| cp.run.status == RunStatus::Running) {
            if let Claim::Live { retry_after } = self.claim(cp, false).await? {
                return Err(RunError::ThreadBusy { thread_id: request.thread_id, retry_after }.into());
            }
            let same_run = request.idempotency_key.is_some() && cp.run.idempotency_key == request.idempotency_key;
            if same_run {
                if differs(&request.fingerprint, &cp.run.fingerprint) {
                    let key = request.idempotency_key.unwrap_or_default();
                    return Err(RunError::IdempotencyMismatch { thread_id: request.thread_id, key }.into());
                }
                info!(thread_id = %request.thread_id, run_id = %cp.run.run_id, "taking over an abandoned run for its retry");
                let exec = self.resume_execution(cp.clone(), tx)?;
                let tracked = self.track(&exec);
                exec.announce(true).await;
                let run_id = exec.run_id.to_string();
                let cancel = exec.cancel.clone();
                self.spawn(exec, guard, tracked, outcome_tx);
                return Ok(RunHandle { run_id, events: rx, outcome: outcome_rx, cancel });
            }
            info!(thread_id = %request.thread_id, "finishing abandoned run before the new one");
            let finished = self.finish_unobserved(cp.clone()).await;
            latest = self.checkpointer.latest(&request.thread_id).await?;
            if latest.as_ref().is_some_and(|cp| cp.run.status == RunStatus::Running) {
                // Not finished here: another replica took it over first, or it could not start.
                return Err(match finished {
                    Err(error) if !matches!(error, RunError::Checkpoint(CheckpointError::Conflict { .. })) => error,
                    _ => RunError::ThreadBusy { thread_id: request.thread_id, retry_after: None },
                }
                .into());
            }
            if let Err(error) = finished {
                // Its failure is its own: it rolled back, and nobody waits for it. The new
                // request goes on from the thread as that left it.
                warn!(thread_id = %request.thread_id, %error, "an abandoned run failed before the new one");
            }
        }

        let resumed = matches!(request.input, RunInput::Resume { .. });
        let (state, version, next, pending, resume, rollback) = match (latest, request.input) {
            (None, _) if request.mode == ThreadMode::Existing => {
                return Err(RunError::NotFound { thread_id: request.thread_id }.into())
            }
            (None, RunInput::Resume { .. }) => {
                return Err(RunError::NothingToResume { thread_id: request.thread_id }.into())
            }
            (None, RunInput::Update(update)) => {
                let mut state = S::default();
                state.apply(update);
                let rollback = Rollback { state: None, next: None, pending: Pending::default(), holds_input: false };
                (state, 0, Some(self.graph.entry.clone()), Pending::default(), None, rollback)
            }
            (Some(cp), RunInput::Update(update)) => {
                if !cp.pending.interrupts.is_empty() {
                    return Err(RunError::Interrupted { thread_id: request.thread_id }.into());
                }
                let before: S = decode(&cp)?;
                match admit(&before, &cp) {
                    Ok(()) => {}
                    // A refusal may be the caller's read being out of date (a reset since, say).
                    Err(_) if from_head => return Err(StartError::Stale),
                    Err(refused) => return Err(StartError::Refused(refused)),
                }
                let mut state = before;
                // The retry of a request whose failed run kept its input in the state (it had
                // been taken over, or its effects committed, so it could not roll back past
                // it): applied once only.
                let kept = cp.run.status == RunStatus::Failed
                    && cp.pending.input_kept
                    && request.idempotency_key.is_some()
                    && cp.run.idempotency_key == request.idempotency_key
                    && !differs(&request.fingerprint, &cp.run.fingerprint);
                if kept {
                    info!(thread_id = %request.thread_id, "retrying a request whose input a failed run kept; not applying it again");
                } else {
                    state.apply(update);
                }
                // Finished tasks belong to the step they were written at, which this run leaves.
                let pending = Pending { tasks: Vec::new(), ..cp.pending.for_a_new_run() };
                let rollback =
                    Rollback { state: Some(cp.state), next: cp.next, pending: cp.pending, holds_input: kept };
                (state, cp.version, Some(self.graph.entry.clone()), pending, None, rollback)
            }
            (Some(cp), RunInput::Resume { interrupt_id, value }) => {
                let mut pending = cp.pending.for_a_new_run();
                let Some(interrupt) = pending.answer(&interrupt_id) else {
                    let thread_id = request.thread_id;
                    return Err(if cp.pending.answered.contains(&interrupt_id) {
                        RunError::InterruptAnswered { thread_id, interrupt_id }
                    } else {
                        RunError::UnknownInterrupt { thread_id, interrupt_id }
                    }
                    .into());
                };
                let state: S = decode(&cp)?;
                admit(&state, &cp).map_err(StartError::Refused)?;
                let rollback =
                    Rollback { state: Some(cp.state), next: cp.next, pending: cp.pending, holds_input: false };
                let resume = Resume { interrupt_id, value };
                pending.resume = Some(resume.clone());
                pending.answering = Some(interrupt.clone());
                (state, cp.version, Some(interrupt.node), pending, Some(resume), rollback)
            }
        };

        let run_id: Arc<str> = uuid::Uuid::now_v7().to_string().into();
        let thread_id: Arc<str> = request.thread_id.as_str().into();
        let timeout = request.timeout.unwrap_or(self.config.run_timeout);
        let deadline = Instant::now() + timeout;
        let sink = Arc::new(self.registry.new_sink(self.graph.name(), run_id.clone(), thread_id.clone(), tx, deadline));
        let mut exec = Execution {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
            thread_id,
            run_id: run_id.clone(),
            idempotency_key: request.idempotency_key,
            fingerprint: request.fingerprint,
            sink,
            cancel: self.registry.run_token(),
            stopping: self.registry.stopping.clone(),
            deadline,
            started: StdInstant::now(),
            state,
            version,
            next,
            pending,
            resume,
            taken_over: false,
            step: 0,
            step_limit: self.graph.max_steps,
            rollback,
            answers_interrupt: resumed,
            last_commit: StdInstant::now(),
            committed_step: 0,
            output: None,
            erased: false,
            thread_created_at,
            committed_at: None,
        };
        // The accepting commit: from here on the input is durable and the run will complete.
        match exec.commit(RunStatus::Running).await {
            Ok(()) => {}
            Err(RunError::Checkpoint(CheckpointError::Conflict { .. })) if request.mode == ThreadMode::New => {
                return Err(RunError::AlreadyExists { thread_id: request.thread_id }.into());
            }
            // The caller's read was out of date: the compare-and-set wrote nothing.
            Err(RunError::Checkpoint(CheckpointError::Conflict { .. })) if from_head => return Err(StartError::Stale),
            Err(error) => return Err(error.into()),
        }
        let tracked = self.track(&exec);
        exec.announce(resumed).await;
        let cancel = exec.cancel.clone();
        self.spawn(exec, guard, tracked, outcome_tx);
        Ok(RunHandle { run_id: run_id.to_string(), events: rx, outcome: outcome_rx, cancel })
    }

    /// A handle on the run in flight that a retry with this idempotency key repeats, if this
    /// process runs one: the run's events from its first and its outcome (as a replay: the
    /// output, not the state), instead of `ThreadBusy`.
    fn attach(
        &self,
        thread_id: &str,
        key: &str,
        fingerprint: &Option<String>,
    ) -> Result<Option<RunHandle<S>>, RunError> {
        let entry = {
            let inflight = self.inflight.lock().expect("inflight runs poisoned");
            match inflight.get(&(thread_id.to_owned(), key.to_owned())) {
                Some(entry) => entry.clone(),
                None => return Ok(None),
            }
        };
        if differs(fingerprint, &entry.fingerprint) {
            return Err(RunError::IdempotencyMismatch { thread_id: thread_id.to_owned(), key: key.to_owned() });
        }
        debug!(%thread_id, run_id = %entry.run_id, "attaching a retry to its run in flight");
        let (tx, rx) = RunEvents::channel(self.config.event_buffer);
        let (outcome_tx, outcome_rx) = oneshot::channel();
        let mut events = entry.log.subscribe(0);
        let mut outcome = entry.outcome;
        let run_id = entry.run_id.clone();
        tokio::spawn(async move {
            while let Some((event, _)) = events.next().await {
                if tx.send(Box::new(event)).await.is_err() {
                    break;
                }
            }
            drop(tx);
            let shared = match outcome.wait_for(Option::is_some).await {
                Ok(shared) => shared.clone(),
                Err(_) => None,
            };
            let result = match shared {
                Some(Ok(outcome)) => Ok(RunOutcome { state: None, replayed: true, ..outcome }),
                Some(Err((kind, message))) => Err(RunError::AttachedRunFailed { run_id, kind, message }),
                None => Err(RunError::Lost),
            };
            let _ = outcome_tx.send(result);
        });
        Ok(Some(RunHandle { run_id: entry.run_id, events: rx, outcome: outcome_rx, cancel: entry.cancel }))
    }

    fn is_recovering(&self, thread_id: &str) -> bool {
        self.recovering.lock().expect("recovering set poisoned").contains(thread_id)
    }

    /// Attaches to the run recovery is resuming on the thread, once registered; `None` when
    /// recovery lets the thread go without one (nothing to resume, or a run of another key) or
    /// takes longer than a moment to get there.
    async fn attach_once_recovered(
        &self,
        thread_id: &str,
        key: &str,
        fingerprint: &Option<String>,
    ) -> Result<Option<RunHandle<S>>, RunError> {
        /// Recovery registers its run after one checkpoint read and one lease read.
        const WAIT: Duration = Duration::from_secs(2);
        let deadline = Instant::now() + WAIT;
        loop {
            let progress = self.recovery_progress.notified();
            if let Some(handle) = self.attach(thread_id, key, fingerprint)? {
                return Ok(Some(handle));
            }
            if !self.is_recovering(thread_id) {
                return Ok(None);
            }
            if tokio::time::timeout_at(deadline, progress).await.is_err() {
                return Ok(None);
            }
        }
    }

    /// Registers a run about to execute: with the registry (cancel and re-attach by run id)
    /// and, with an idempotency key, as what a retry with the key attaches to.
    fn track(&self, exec: &Execution<S>) -> Tracked<S> {
        let log = exec.sink.log().clone();
        self.registry.register(log.clone(), exec.cancel.clone());
        let entry = exec.idempotency_key.as_ref().map(|key| {
            let (publish, outcome) = watch::channel(None);
            let slot = (exec.thread_id.to_string(), key.clone());
            let inflight = Inflight {
                run_id: exec.run_id.to_string(),
                fingerprint: exec.fingerprint.clone(),
                log,
                cancel: exec.cancel.clone(),
                outcome,
            };
            self.inflight.lock().expect("inflight runs poisoned").insert(slot.clone(), inflight);
            (slot, publish)
        });
        self.recovery_progress.notify_waiters();
        Tracked {
            registry: self.registry.clone(),
            inflight: self.inflight.clone(),
            run_id: exec.run_id.to_string(),
            entry,
        }
    }

    /// Whether a `Running` checkpoint, on a thread this process runs nothing on, is another
    /// replica's live run or abandoned. With an owner: abandoned when it is this replica (a
    /// previous life of the process, or a run whose last write failed) or when the owner's
    /// lease has expired. Without one (written before leases, or by a runner without a replica
    /// id): abandoned once older than `takeover_after`, or at once for `recovery` (which, as
    /// before leases, takes such runs for a crash's).
    async fn claim(&self, cp: &Checkpoint, recovery: bool) -> Result<Claim, RunError> {
        if self.registry.is_running(&cp.run.run_id) {
            return Ok(Claim::Live { retry_after: None });
        }
        match (&cp.run.owner, &self.config.replica) {
            (Some(owner), Some(me)) if owner.as_str() == &**me => Ok(Claim::Abandoned),
            (Some(owner), _) => match self.checkpointer.lease_remaining(owner).await? {
                // A lease renewed on time has about its whole ttl left: its replica is alive,
                // and the run may end any moment. One that missed renewals may belong to a
                // dead replica: the run is taken over once it expires.
                Some(left) if left >= self.config.lease_ttl / 2 => Ok(Claim::Live { retry_after: None }),
                Some(left) => Ok(Claim::Live { retry_after: Some(left) }),
                None => Ok(Claim::Abandoned),
            },
            (None, _) if recovery => Ok(Claim::Abandoned),
            (None, _) => {
                let age = SystemTime::now().duration_since(cp.created_at).unwrap_or_default();
                match self.config.takeover_after.checked_sub(age) {
                    Some(left) if !left.is_zero() => Ok(Claim::Live { retry_after: Some(left) }),
                    _ => Ok(Claim::Abandoned),
                }
            }
        }
    }

    /// Finishes every run that was abandoned: left running by a crash of this process (in a
    /// previous life under the same replica id), by a replica whose lease has expired, or by
    /// a runner without a replica id (taken for a crash's). Live runs of other replicas are left
    /// alone. Runs are resumed concurrently, at most `recovery_concurrency` at once; a retry
    /// with a recovered run's idempotency key attaches to it. Returns once they have ended,
    /// with how many it resumed. Safe to call while serving and from several replicas at once:
    /// the compare-and-set lets only one writer continue a run.
    pub async fn recover(&self) -> Result<usize, RunError> {
        let listed = self.checkpointer.unfinished_runs().await?;
        let abandoned = self.registry.abandoned(&*self.checkpointer, self.config.replica.as_deref(), listed).await;
        Ok(self.resume_abandoned(abandoned).await)
    }

    /// [`Runner::recover`] for runs a scan has already picked out with
    /// [`RunRegistry::abandoned`] (a server's periodic takeover scan lists the running threads
    /// once for every workflow). Each is read again before it is claimed, so a run that ended
    /// or was taken by another replica since the scan is left alone. Returns how many it
    /// resumed.
    pub async fn resume_abandoned(&self, abandoned: impl IntoIterator<Item = UnfinishedRun>) -> usize {
        let mut tasks = JoinSet::new();
        // Every workflow's runner may be handed the same running threads: only the thread's own
        // runner goes on, so that no other ever holds its lock here, even briefly (that would
        // make its own recovery skip the thread and a caller's retry busy).
        for run in abandoned.into_iter().filter(|run| run.workflow == self.graph.name()) {
            let thread_id = run.thread_id.clone();
            if !self.recovering.lock().expect("recovering set poisoned").insert(thread_id.clone()) {
                continue;
            }
            let runner = self.clone();
            tasks.spawn(async move {
                let result = runner.recover_thread(&run).await;
                runner.recovering.lock().expect("recovering set poisoned").remove(&thread_id);
                runner.recovery_progress.notify_waiters();
                (thread_id, result)
            });
        }
        let mut recovered = 0;
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok((_, Ok(true))) => recovered += 1,
                Ok((_, Ok(false))) => {}
                Ok((thread_id, Err(error))) => warn!(%thread_id, %error, "recovered run failed"),
                Err(error) => warn!(%error, "recovery task panicked"),
            }
        }
        recovered
    }

    /// Resumes the thread's run if it is still abandoned; true if it did. `seen` is the run as
    /// the scan listed it: this workflow's, on a thread not held here.
    async fn recover_thread(&self, seen: &UnfinishedRun) -> Result<bool, RunError> {
        let thread_id = seen.thread_id.as_str();
        let ours = |cp: &Checkpoint| cp.run.status == RunStatus::Running && cp.workflow == self.graph.name();
        // A run of this process may have ended since the scan's read: its thread's next turn
        // can be on its way, and the lock taken here, however briefly, would turn that turn
        // away as busy. A run no longer running here has made its last commit, so a read now
        // shows whether it really was left running (a commit that failed); anything else is not
        // ours to recover.
        if self.registry.is_running(&seen.run_id) {
            return Ok(false);
        }
        let again = self.checkpointer.latest(thread_id).await?;
        if !again.as_ref().is_some_and(|cp| ours(cp) && cp.run.run_id == seen.run_id) {
            return Ok(false);
        }
        let _permit = self.recovery.acquire().await.map_err(|_| RunError::Lost)?;
        let Ok(guard) = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await else { return Ok(false) };
        // Left for the next start: resumed now, it would only count a takeover and stop.
        if self.registry.stopping.is_cancelled() {
            return Ok(false);
        }
        let Some(cp) = self.checkpointer.latest(thread_id).await? else { return Ok(false) };
        if cp.run.status != RunStatus::Running || cp.workflow != self.graph.name() {
            return Ok(false);
        }
        if let Claim::Live { .. } = self.claim(&cp, true).await? {
            return Ok(false);
        }
        info!(%thread_id, run_id = %cp.run.run_id, owner = ?cp.run.owner, "resuming an abandoned run");
        let outcome = self.finish_unobserved(cp).await;
        drop(guard);
        outcome.map(|_| true)
    }

    /// Drives an abandoned run to its end with nobody reading its events but the log (a
    /// retry with its idempotency key attaches to it meanwhile). The run goes on a task of its
    /// own: the caller waiting for it may be a request that goes away (its client disconnects,
    /// its deadline passes), and a run dropped half way would stay registered as running, its
    /// thread busy until the process restarts.
    async fn finish_unobserved(&self, cp: Checkpoint) -> Result<RunOutcome<S>, RunError> {
        let (tx, rx) = RunEvents::channel(1);
        drop(rx);
        let exec = self.resume_execution(cp, tx)?;
        let tracked = self.track(&exec);
        let drive = Box::pin(async move {
            exec.announce(true).await;
            caught(exec.drive()).await
        });
        let run = tokio::spawn(async move {
            let outcome = drive.await;
            tracked.finish(&outcome);
            outcome
        });
        // `caught` ends a panicking run as lost already: a join error is the runtime shutting down.
        run.await.unwrap_or(Err(RunError::Lost))
    }

    fn resume_execution(&self, cp: Checkpoint, tx: EventSender) -> Result<Execution<S>, RunError> {
        let state: S = decode(&cp)?;
        let run_id: Arc<str> = cp.run.run_id.as_str().into();
        let thread_id: Arc<str> = cp.thread_id.as_str().into();
        let deadline = Instant::now() + self.config.run_timeout;
        let sink = Arc::new(self.registry.new_sink(self.graph.name(), run_id.clone(), thread_id.clone(), tx, deadline));
        // A resume whose answered node has not committed since: the checkpoint still holds the
        // state from before the run, and a failure reopens the interrupt, as it would have
        // before the crash (the person's answer is not lost; they can give it again).
        let (rollback, answers_interrupt) = match &cp.pending.answering {
            Some(interrupt) => {
                let mut pending = Pending { tasks: Vec::new(), ..cp.pending.for_a_new_run() };
                pending.answered.retain(|id| *id != interrupt.id);
                pending.interrupts.push(interrupt.clone());
                let rollback =
                    Rollback { state: Some(cp.state.clone()), next: cp.next.clone(), pending, holds_input: false };
                (rollback, true)
            }
            // A failed recovered run keeps what the thread waited on before it. The state from
            // before it is gone, so it keeps its own input too; an interrupt it answered, whose
            // node has committed since, stays answered.
            None => (Rollback::holding_input(cp.state.clone(), &cp.pending), false),
        };
        Ok(Execution {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
            thread_id,
            run_id,
            idempotency_key: cp.run.idempotency_key.clone(),
            fingerprint: cp.run.fingerprint.clone(),
            sink,
            cancel: self.registry.run_token(),
            stopping: self.registry.stopping.clone(),
            deadline,
            started: StdInstant::now(),
            rollback,
            answers_interrupt,
            state,
            version: cp.version,
            next: cp.next.clone(),
            pending: cp.pending.clone(),
            // Set when the run was a resume whose first node had not run by its last commit.
            resume: cp.pending.resume.clone(),
            taken_over: true,
            step: cp.run.step,
            step_limit: match cp.pending.failed_over_at {
                Some(at) => at.saturating_add(self.graph.max_steps),
                None => self.graph.max_steps,
            }
            .max(cp.run.step.saturating_add(1)),
            last_commit: StdInstant::now(),
            // The run resumes from this very checkpoint.
            committed_step: cp.run.step,
            output: None,
            erased: false,
            thread_created_at: None,
            committed_at: None,
        })
    }

    fn spawn(
        &self,
        exec: Execution<S>,
        guard: ThreadGuard,
        tracked: Tracked<S>,
        outcome_tx: oneshot::Sender<Result<RunOutcome<S>, RunError>>,
    ) {
        // Boxed so that spawning moves a pointer: the run's future holds the state and every
        // node's future, and tokio would otherwise copy all of it several times on the way in.
        let drive = Box::pin(caught(exec.drive()));
        tokio::spawn(async move {
            let outcome = drive.await;
            // Release the thread before reporting, so a caller that reacts to the outcome by
            // sending the next turn never finds its own finished run still holding the thread.
            drop(guard);
            tracked.finish(&outcome);
            let _ = outcome_tx.send(outcome);
        });
    }
}

impl<S: State> Execution<S> {
    /// The run's first event, sent once its input is committed: from here it will complete.
    async fn announce(&self, resumed: bool) {
        let event = EventKind::RunStarted {
            thread_id: self.thread_id.to_string(),
            workflow: self.graph.name().to_owned(),
            resumed,
        };
        self.sink.emit(None, event).await;
    }

    fn node_name(&self) -> Option<Arc<str>> {
        self.next.as_deref().map(Arc::from)
    }

    fn codec_error(&self, source: serde_json::Error) -> RunError {
        RunError::StateCodec { thread_id: self.thread_id.to_string(), source }
    }

    /// Counts a takeover in the run's checkpoint, or fails the run once it has been taken over
    /// [`RunnerConfig::max_takeovers`] times: whatever stops its process each time would stop
    /// the next one too.
    async fn count_takeover(&mut self) -> Result<(), RunError> {
        let takeovers = self.pending.takeovers.saturating_add(1);
        if takeovers > self.config.max_takeovers {
            let at = self.next.as_deref().unwrap_or("end");
            let message = format!(
                "the run was taken over {} times, its process stopping each time at or after node {at}; it is \
                 not run again",
                self.pending.takeovers
            );
            warn!(thread_id = %self.thread_id, run_id = %self.run_id, node = at, "{message}");
            return Err(RunError::Node {
                node: at.to_owned(),
                source: NodeError::new(NodeErrorKind::Internal, message),
            });
        }
        self.pending.takeovers = takeovers;
        self.commit(RunStatus::Running).await
    }

    async fn commit(&mut self, status: RunStatus) -> Result<(), RunError> {
        if self.graph.durability() == Durability::Ephemeral {
            self.version += 1;
            return Ok(());
        }
        let state = serde_json::to_vec(&self.state).map_err(|source| self.codec_error(source))?;
        let output = match status {
            RunStatus::Completed | RunStatus::Interrupted => Some(self.output()?.1.clone()),
            RunStatus::Running | RunStatus::Failed => None,
        };
        let checkpoint = Checkpoint {
            thread_id: self.thread_id.to_string(),
            workflow: self.graph.name().to_owned(),
            version: self.version + 1,
            state,
            next: self.next.clone(),
            pending: self.pending.clone(),
            run: RunMarker {
                run_id: self.run_id.to_string(),
                idempotency_key: self.idempotency_key.clone(),
                fingerprint: self.fingerprint.clone(),
                status,
                step: self.step,
                output,
                owner: self.config.replica.as_deref().map(str::to_owned),
            },
            created_at: now(),
        };
        self.checkpointer.put(&checkpoint).await?;
        if self.version == 0 {
            self.thread_created_at = Some(checkpoint.created_at);
        }
        self.committed_at = Some(checkpoint.created_at);
        self.version += 1;
        self.last_commit = StdInstant::now();
        self.committed_step = self.step;
        Ok(())
    }

    fn has_effects(&self, node: &str) -> bool {
        self.graph.nodes.get(node).is_some_and(|entry| entry.effects)
    }

    /// Whether a `Running` checkpoint must be written before `node` runs: under
    /// [`Durability::ByEffect`], when the node has effects and the state moved since the last
    /// commit, so a crash in it resumes at it and does not first re-run (and possibly re-route)
    /// the nodes before it.
    fn commit_before(&self, node: &str) -> bool {
        self.graph.durability() == Durability::ByEffect && self.step != self.committed_step && self.has_effects(node)
    }

    /// Whether a `Running` checkpoint must be written after `node` ran (or after one of its
    /// fan-out tasks finished): always under [`Durability::EveryNode`]; under
    /// [`Durability::ByEffect`] when the node has effects or a heartbeat is due.
    fn commit_after(&self, node: &str) -> bool {
        match self.graph.durability() {
            Durability::ByEffect => self.has_effects(node) || self.heartbeat_due(),
            Durability::EveryNode | Durability::Ephemeral => self.heartbeat_due(),
        }
    }

    /// Whether a `Running` checkpoint must be written now. Always with
    /// [`Durability::EveryNode`]; with [`Durability::ByEffect`] only when the next node, running
    /// to its timeout, could otherwise age the last checkpoint past `takeover_after`, and
    /// another process would take the live run for abandoned.
    fn heartbeat_due(&self) -> bool {
        match self.graph.durability() {
            Durability::EveryNode => true,
            Durability::Ephemeral => false,
            // With a replica id, the replica's lease says the run is live, however old its
            // checkpoint.
            Durability::ByEffect if self.config.replica.is_some() => false,
            Durability::ByEffect => {
                let next = self.next.as_deref().and_then(|n| self.graph.nodes.get(n));
                let timeout = next.map_or(self.config.node_timeout, |entry| self.node_timeout(entry));
                self.last_commit.elapsed() + timeout >= self.config.takeover_after
            }
        }
    }

    /// How long one node attempt may run: its own timeout, else the runner's default.
    fn node_timeout(&self, entry: &NodeEntry<S>) -> Duration {
        entry.timeout.unwrap_or(self.config.node_timeout)
    }

    async fn drive(mut self) -> Result<RunOutcome<S>, RunError> {
        if self.taken_over {
            if let Err(error) = self.count_takeover().await {
                self.fail(&error).await;
                return Err(error);
            }
        }
        match self.steps().await {
            Ok(outcome) => Ok(outcome),
            // Left as a crash leaves it: the caller was told the run is accepted, and the next
            // start or another replica finishes it from its last checkpoint.
            Err(RunError::Cancelled) if self.stopping.is_cancelled() => {
                info!(thread_id = %self.thread_id, run_id = %self.run_id, "run stopped with the process; it resumes from its last checkpoint");
                Err(RunError::Stopped)
            }
            Err(error) => {
                self.fail(&error).await;
                Err(error)
            }
        }
    }

    fn attempts(&self, node: &Arc<str>, entry: &NodeEntry<S>) -> Attempts {
        Attempts {
            node: node.clone(),
            task: None,
            step: self.step,
            thread_id: self.thread_id.clone(),
            sink: self.sink.clone(),
            cancel: self.cancel.clone(),
            deadline: self.deadline,
            timeout: self.node_timeout(entry),
            retry: entry.retry.clone().or_else(|| self.graph.default_retry.clone()),
        }
    }

    /// Runs one node step: a node (with its retries) or every task of a fan-out node.
    async fn run_node(&mut self, node: &Arc<str>) -> Result<StepOutput<S::Update>, Failed> {
        let graph = self.graph.clone();
        // `node` may come from a checkpoint or an interrupt written by another version of the
        // workflow, one that had this node.
        let Some(entry) = graph.nodes.get(&**node) else {
            let message = format!("workflow {} has no node {node:?}, where the thread was to go on", graph.name());
            let error =
                RunError::Node { node: node.to_string(), source: NodeError::new(NodeErrorKind::Internal, message) };
            // The answer was for the missing node: the failure route gets it as the failure's,
            // never as its own `NodeContext::resume`.
            let answer = self.resume.take();
            return Err(Failed { error, attempts: 0, answer });
        };
        let attempts = self.attempts(node, entry);
        match &entry.kind {
            NodeKind::Single(single) => {
                let resume = self.resume.take();
                // The answer is spent once this node's update is committed.
                self.pending.resume = None;
                self.pending.answering = None;
                // Should the node fail for good, its failure route is the last place that can
                // keep the answer: the interrupt cannot be answered again.
                let answer = resume.clone();
                let run = attempts.run(&self.state, Work::Node(&**single), resume).await;
                let output = match run.map_err(|failed| Failed { answer, ..failed })? {
                    WorkOutput::Node(output) => output,
                    WorkOutput::Task(_) => unreachable!("a node attempt returns a node output"),
                };
                let update_json = serde_json::to_string(&output.update).map_err(|source| Failed {
                    error: self.codec_error(source),
                    attempts: 1,
                    answer: None,
                })?;
                Ok(StepOutput { updates: vec![output.update], update_json, interrupts: output.interrupts })
            }
            NodeKind::FanOut(fan_out) => self.run_fan_out(node, fan_out.clone(), attempts).await,
        }
    }

    /// Runs a fan-out step's tasks concurrently. A task finished before a crash (its update in
    /// `pending.tasks`) is not run again; every task that finishes now is committed as a pending
    /// write before the next one is awaited. The updates are applied in dispatch order.
    async fn run_fan_out(
        &mut self,
        node: &Arc<str>,
        fan_out: Arc<dyn FanOut<S>>,
        attempts: Attempts,
    ) -> Result<StepOutput<S::Update>, Failed> {
        let fail = |error| Failed { error, attempts: 1, answer: None };
        let inputs = fan_out.dispatch(&self.state).map_err(|source| fail(self.codec_error(source)))?;
        let count = u32::try_from(inputs.len()).unwrap_or(u32::MAX);
        let mut done: BTreeMap<u32, String> = self
            .pending
            .tasks
            .iter()
            .filter(|write| *write.node == **node && write.task < count)
            .map(|write| (write.task, write.update.clone()))
            .collect();
        self.sink
            .emit(
                Some(node.clone()),
                EventKind::TasksDispatched { step: self.step, tasks: count, already_done: done.len() as u32 },
            )
            .await;
        let state = Arc::new(self.state.clone());
        let mut running = JoinSet::new();
        for (index, input) in (0..count).zip(inputs) {
            if done.contains_key(&index) {
                continue;
            }
            let attempts = Attempts { task: Some(index), ..attempts.clone() };
            let (state, fan_out) = (state.clone(), fan_out.clone());
            running.spawn(async move {
                let started = StdInstant::now();
                let result = attempts.run(&*state, Work::Task(&*fan_out, &input), None).await;
                (index, result, started.elapsed())
            });
        }
        while !running.is_empty() {
            let joined = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => return Err(fail(RunError::Cancelled)),
                joined = running.join_next() => joined,
            };
            let Some(joined) = joined else { break };
            let (index, result, duration) = joined.map_err(|join_error| {
                let source = NodeError::with_source(NodeErrorKind::Internal, "fan-out task panicked", join_error);
                fail(RunError::Node { node: node.to_string(), source })
            })?;
            // Dropping `running` on an error aborts the tasks still in flight.
            let update = match result? {
                WorkOutput::Task(update) => update,
                WorkOutput::Node(_) => unreachable!("a task attempt returns an update"),
            };
            let update_json = serde_json::to_string(&update).map_err(|source| fail(self.codec_error(source)))?;
            self.pending.tasks.push(TaskWrite { node: node.to_string(), task: index, update: update_json.clone() });
            if self.commit_after(node) {
                self.commit(RunStatus::Running).await.map_err(fail)?;
            }
            self.sink
                .emit_task(
                    Some(node.clone()),
                    Some(index),
                    EventKind::TaskFinished { step: self.step, update_json: update_json.clone(), duration },
                )
                .await;
            done.insert(index, update_json);
        }
        self.pending.tasks.retain(|write| *write.node != **node);
        let mut updates = Vec::with_capacity(done.len());
        for json in done.values() {
            updates.push(serde_json::from_str(json).map_err(|source| fail(self.codec_error(source)))?);
        }
        let update_json = format!("[{}]", done.into_values().collect::<Vec<_>>().join(","));
        Ok(StepOutput { updates, update_json, interrupts: Vec::new() })
    }

    /// Takes the graph's failure route after `node` failed for good, if the graph has one and
    /// the failure is one it covers. Returns whether the run goes on.
    async fn fail_over(&mut self, node: &Arc<str>, failed: &Failed) -> bool {
        let Some(route) = &self.graph.failure_route else { return false };
        let covered =
            matches!(failed.error, RunError::Node { .. } | RunError::NodeTimeout { .. } | RunError::StepLimit { .. });
        // Taken once per run (`Pending::failed_over_at`, kept across a takeover): a second
        // failure fails the run.
        if !covered || self.pending.failed_over_at.is_some() || **node == *route.node {
            return false;
        }
        let failure = NodeFailure {
            node: node.to_string(),
            kind: failed.error.failure_kind(),
            message: failed.error.detail(),
            attempts: failed.attempts,
            answer: failed.answer.clone(),
        };
        warn!(thread_id = %self.thread_id, node = %node, fallback = %route.node, error = %failed.error, "node failed; taking the failure route");
        let update = (route.update)(&failure);
        self.state.apply(update);
        self.pending.tasks.clear();
        self.pending.failed_over_at = Some(self.step);
        self.step_limit = self.step.saturating_add(self.graph.max_steps);
        self.next = Some(route.node.clone());
        let event = EventKind::NodeFailed {
            step: self.step,
            kind: failure.kind,
            message: failure.message,
            fallback: route.node.clone(),
        };
        self.sink.emit(Some(node.clone()), event).await;
        true
    }

    async fn steps(&mut self) -> Result<RunOutcome<S>, RunError> {
        while let Some(node) = self.node_name() {
            if self.step >= self.step_limit {
                let failed =
                    Failed { error: RunError::StepLimit { limit: self.graph.max_steps }, attempts: 1, answer: None };
                if self.fail_over(&node, &failed).await {
                    // As after a node's failure: the route's update is a step of its own, so a
                    // route node with effects commits it before it runs.
                    self.step += 1;
                    if self.heartbeat_due() {
                        self.commit(RunStatus::Running).await?;
                    }
                    continue;
                }
                return Err(failed.error);
            }
            if self.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            if self.commit_before(&node) {
                self.commit(RunStatus::Running).await?;
            }
            self.sink.emit(Some(node.clone()), EventKind::NodeStarted { step: self.step }).await;
            let started = StdInstant::now();
            let output = match self.run_node(&node).await {
                Ok(output) => output,
                Err(failed) => {
                    if self.fail_over(&node, &failed).await {
                        self.step += 1;
                        if self.heartbeat_due() {
                            self.commit(RunStatus::Running).await?;
                        }
                        continue;
                    }
                    return Err(failed.error);
                }
            };
            let StepOutput { updates, update_json, interrupts } = output;
            for update in updates {
                self.state.apply(update);
            }
            self.step += 1;
            if self.has_effects(&node) {
                // Before anything else can fail the run (its interrupts, its router, its
                // output, its commit): from here a failure rolls back to this state, which
                // records the effect the node made.
                self.keep_effects()?;
            }
            let raised = self.raise(&node, interrupts)?;
            if raised.is_empty() {
                // A router is workflow code too: its panic fails the run, which rolls back.
                let routed = std::panic::catch_unwind(AssertUnwindSafe(|| self.graph.next(&node, &self.state)));
                self.next = match routed {
                    Ok(Ok(Target::Node(next))) => Some(next),
                    Ok(Ok(Target::End)) => None,
                    Ok(Err(undeclared)) => {
                        return Err(RunError::UndeclaredTarget { node: node.to_string(), target: undeclared.target })
                    }
                    Err(panic) => {
                        let message = format!("the router after node {node} panicked: {}", panic_message(&*panic));
                        tracing::error!(%node, %message, "router panicked");
                        let source = NodeError::new(NodeErrorKind::Internal, message);
                        return Err(RunError::Node { node: node.to_string(), source });
                    }
                };
            }
            let status = match (raised.is_empty(), &self.next) {
                (false, _) => RunStatus::Interrupted,
                (true, None) if self.pending.interrupts.is_empty() => RunStatus::Completed,
                // The run is done, but the thread still waits on interrupts raised earlier.
                (true, None) => RunStatus::Interrupted,
                (true, Some(_)) => RunStatus::Running,
            };
            if status != RunStatus::Running {
                // Before anything records the run's end: an output that does not encode fails
                // the run, which rolls back, instead of a handoff or a commit going first.
                self.output()?;
            }
            let erased = status == RunStatus::Completed && self.hand_off().await;
            if !erased && (status != RunStatus::Running || self.commit_after(&node)) {
                self.commit(status).await?;
            }
            let next = if raised.is_empty() { self.next.clone() } else { None };
            self.sink
                .emit(
                    Some(node.clone()),
                    EventKind::NodeFinished { step: self.step - 1, update_json, duration: started.elapsed(), next },
                )
                .await;
            for interrupt in &raised {
                let event = EventKind::InterruptRaised {
                    interrupt_id: interrupt.id.clone(),
                    reason: interrupt.reason.clone(),
                    payload_json: interrupt.payload.clone(),
                };
                self.sink.emit(Some(node.clone()), event).await;
            }
            if status == RunStatus::Interrupted {
                return self.pause().await;
            }
        }
        let (output, output_json) = std::mem::take(self.output()?);
        let outcome = self.outcome(RunStatus::Completed, output);
        self.sink
            .emit(
                None,
                EventKind::RunFinished {
                    steps: self.step,
                    duration: self.started.elapsed(),
                    usage: self.sink.usage(),
                    output_json,
                },
            )
            .await;
        Ok(outcome)
    }

    /// Adds the interrupts a node raised to the thread's pending set; returns them.
    fn raise(&mut self, node: &str, requests: Vec<InterruptRequest>) -> Result<Vec<PendingInterrupt>, RunError> {
        if !requests.is_empty() && self.graph.durability() == Durability::Ephemeral {
            return Err(RunError::Ephemeral { what: "pause at an interrupt (nothing would keep it)" });
        }
        let mut raised = Vec::with_capacity(requests.len());
        for InterruptRequest { id, reason, payload } in requests {
            let taken = id.is_empty()
                || self.pending.interrupt(&id).is_some()
                || self.pending.answered.contains(&id)
                || raised.iter().any(|r: &PendingInterrupt| r.id == id);
            if taken {
                return Err(RunError::DuplicateInterrupt { node: node.to_owned(), interrupt_id: id });
            }
            raised.push(PendingInterrupt { id, node: node.to_owned(), reason, payload: payload.to_string() });
        }
        self.pending.interrupts.extend(raised.iter().cloned());
        Ok(raised)
    }

    /// Ends a run that paused: the thread now waits on its pending interrupts.
    async fn pause(&mut self) -> Result<RunOutcome<S>, RunError> {
        let (output, _) = std::mem::take(self.output()?);
        let pending = self.pending.interrupts.iter().map(|i| i.id.clone()).collect();
        self.sink.emit(None, EventKind::Interrupted { pending, usage: self.sink.usage() }).await;
        Ok(self.outcome(RunStatus::Interrupted, output))
    }

    /// The graph's output for the final state, computed once.
    fn output(&mut self) -> Result<&mut (serde_json::Value, String), RunError> {
        if self.output.is_none() {
            let value = self
                .graph
                .output(&self.state)
                .map_err(|source| RunError::OutputCodec { thread_id: self.thread_id.to_string(), source })?;
            // `to_string` on a `Value` goes through `fmt::Display`, a formatter call per token;
            // the serializer writes the buffer directly. A `Value` always serializes.
            let json = serde_json::to_string(&value).expect("a serde_json::Value serializes");
            self.output = Some((value, json));
        }
        Ok(self.output.as_mut().expect("the output was computed above"))
    }

    /// What the run returns as it ends. Called once, last: it takes the final state and the
    /// output value rather than copying them.
    fn outcome(&mut self, status: RunStatus, output: serde_json::Value) -> RunOutcome<S> {
        RunOutcome {
            run_id: self.run_id.to_string(),
            version: self.version,
            status,
            output,
            state: Some(std::mem::take(&mut self.state)),
            interrupts: self.pending.interrupts.clone(),
            replayed: false,
            steps: self.step,
            erased: self.erased,
            thread_created_at: self.thread_created_at,
            updated_at: self.committed_at,
        }
    }

    /// Offers the completed state to the handoff; true when it took the state and the thread
    /// is erased. Any failure leaves the run to write its final checkpoint, so nothing is lost.
    async fn hand_off(&mut self) -> bool {
        if self.graph.durability() == Durability::Ephemeral {
            return false;
        }
        let Some(handoff) = self.handoff.clone() else { return false };
        let run = CompletedRun {
            thread_id: &self.thread_id,
            run_id: &self.run_id,
            idempotency_key: self.idempotency_key.as_deref(),
            fingerprint: self.fingerprint.as_deref(),
        };
        match handoff.complete(run, &self.state).await {
            Ok(Completion::Keep) => false,
            Ok(Completion::Erase) => match self.checkpointer.delete_thread_unsynced(&self.thread_id).await {
                Ok(_) => {
                    self.erased = true;
                    true
                }
                Err(error) => {
                    warn!(thread_id = %self.thread_id, %error, "could not erase a handed-off thread; keeping its final checkpoint");
                    false
                }
            },
            Err(error) => {
                warn!(thread_id = %self.thread_id, %error, "handoff failed; keeping the final checkpoint");
                false
            }
        }
    }

    /// After a node with effects ran, on a durable graph: a failure from here on rolls back to
    /// this state, not to the one from before the run, because the durability promise is that
    /// an effect is never undone (a crash after the node's commit never re-runs it either). The
    /// state records the effect (a submitted request, a booked appointment, an investigation's
    /// records), so the retry of the same request, which starts from it without applying its
    /// input again (`Pending::input_kept`), does not make the effect a second time, and nothing
    /// outside the thread is left that the thread does not know of. Taken before the node's
    /// commit, so a failed commit keeps it too. A run answering an interrupt keeps rolling back
    /// to before it, reopening the interrupt.
    fn keep_effects(&mut self) -> Result<(), RunError> {
        if self.graph.durability() == Durability::Ephemeral || self.answers_interrupt {
            return Ok(());
        }
        let state = serde_json::to_vec(&self.state).map_err(|source| self.codec_error(source))?;
        self.rollback = Rollback::holding_input(state, &self.pending);
        Ok(())
    }

    /// Puts back the state, next node and pending work the run started from.
    fn restore(&mut self) -> Result<(), RunError> {
        self.state = match self.rollback.state.as_deref() {
            None => S::default(),
            Some(bytes) => serde_json::from_slice(bytes).map_err(|source| self.codec_error(source))?,
        };
        self.next = self.rollback.next.clone();
        self.pending = self.rollback.pending.clone();
        self.pending.tasks.clear();
        self.pending.input_kept = self.rollback.holds_input;
        Ok(())
    }

    /// Rolls the thread back to the state from before the run, as a new checkpoint, so the
    /// caller can retry cleanly and the failed run is never resumed by recovery. An interrupt
    /// the run answered is pending again.
    async fn fail(&mut self, error: &RunError) {
        warn!(thread_id = %self.thread_id, run_id = %self.run_id, %error, "run failed");
        let lost_race = matches!(error, RunError::Checkpoint(CheckpointError::Conflict { .. }));
        self.output = None;
        if !lost_race {
            match self.restore() {
                // The run created its thread: before it there was none, so none is left (a
                // thread of the default state would be listed as an empty conversation, ticket
                // or investigation, and would refuse a retry that must create it).
                Ok(()) if self.rollback.state.is_none() && self.graph.durability() != Durability::Ephemeral => {
                    if let Err(delete_error) = self.checkpointer.delete_thread(&self.thread_id).await {
                        warn!(thread_id = %self.thread_id, error = %delete_error, "could not delete the thread a failed run created");
                    }
                }
                Ok(()) => {
                    if let Err(rollback_error) = self.commit(RunStatus::Failed).await {
                        warn!(thread_id = %self.thread_id, error = %rollback_error, "could not record failed run");
                    }
                }
                // The run started from these very bytes: only a bug brings a run here.
                Err(restore_error) => {
                    warn!(thread_id = %self.thread_id, error = %restore_error, "could not restore the state before a failed run")
                }
            }
        }
        let failed =
            EventKind::RunFailed { kind: error.failure_kind(), message: error.to_string(), usage: self.sink.usage() };
        self.sink.emit(None, failed).await;
    }
}
