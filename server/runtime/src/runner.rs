//! Executes runs: from the thread's latest checkpoint, node by node, to END or an interrupt,
//! committing a checkpoint after every node (or only at the end, by the graph's
//! [`Durability`]) and streaming events.

use std::{
    collections::HashMap,
    sync::{Arc, Mutex},
    time::{Duration, Instant as StdInstant, SystemTime},
};

use tokio::{
    sync::{mpsc, oneshot, Notify, OwnedMutexGuard},
    time::Instant,
};
use tokio_util::sync::CancellationToken;
use tracing::{debug, info, warn};

use crate::{
    checkpoint::{Checkpoint, CheckpointError, Checkpointer, PendingInterrupt, RunMarker, RunStatus},
    event::{EventKind, FailureKind},
    graph::{Durability, Graph, NodeEntry, Target},
    handoff::{Completion, Handoff},
    node::{EventSink, NodeContext, NodeError, NodeErrorKind},
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
    /// with [`Durability::Exit`] writes a heartbeat checkpoint whenever its next node could
    /// otherwise run past it).
    pub takeover_after: Duration,
}

impl Default for RunnerConfig {
    fn default() -> Self {
        Self {
            event_buffer: 64,
            node_timeout: Duration::from_secs(120),
            run_timeout: Duration::from_secs(600),
            takeover_after: Duration::from_secs(130),
        }
    }
}

/// What a run starts from.
#[derive(Debug)]
pub enum RunInput<U> {
    /// Applied to the state before the entry node runs (a user turn, a ticket).
    Update(U),
    /// Resumes the pending interrupt with this value.
    Resume(serde_json::Value),
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
    pub busy: BusyPolicy,
    /// Overrides [`RunnerConfig::run_timeout`].
    pub timeout: Option<Duration>,
    pub mode: ThreadMode,
}

impl<U> RunRequest<U> {
    pub fn new(thread_id: impl Into<String>, input: RunInput<U>) -> Self {
        Self {
            thread_id: thread_id.into(),
            input,
            idempotency_key: None,
            busy: BusyPolicy::Reject,
            timeout: None,
            mode: ThreadMode::Existing,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum RunError {
    #[error("thread {thread_id} not found")]
    NotFound { thread_id: String },
    #[error("thread {thread_id} already exists")]
    AlreadyExists { thread_id: String },
    #[error("a run is in progress on thread {thread_id}")]
    ThreadBusy { thread_id: String },
    #[error("thread {thread_id} has no pending interrupt to resume")]
    NothingToResume { thread_id: String },
    #[error("thread {thread_id} is paused at an interrupt; resume it instead")]
    Interrupted { thread_id: String },
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
    #[error("run task ended without an outcome")]
    Lost,
}

impl RunError {
    pub fn failure_kind(&self) -> FailureKind {
        match self {
            RunError::NotFound { .. } => FailureKind::NotFound,
            RunError::AlreadyExists { .. } | RunError::ThreadBusy { .. } => FailureKind::Conflict,
            RunError::NothingToResume { .. } | RunError::Interrupted { .. } => FailureKind::InvalidInput,
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
            RunError::StepLimit { .. } => FailureKind::StepLimit,
            RunError::Checkpoint(CheckpointError::Conflict { .. }) => FailureKind::Conflict,
            RunError::Checkpoint(_) => FailureKind::StoreUnavailable,
            RunError::UndeclaredTarget { .. } | RunError::StateCodec { .. } | RunError::Lost => FailureKind::Internal,
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
    pub interrupt: Option<PendingInterrupt>,
    /// True when an earlier run with the same idempotency key is being reported.
    pub replayed: bool,
    pub steps: u32,
    /// True when the runner's [`Handoff`] took the completed state and the thread was erased
    /// instead of checkpointed (`version` is then the last checkpoint the run wrote).
    pub erased: bool,
}

/// Where a run's outcome arrives.
pub type OutcomeReceiver<S> = oneshot::Receiver<Result<RunOutcome<S>, RunError>>;

/// A started run: its id, its event stream and its outcome.
pub struct RunHandle<S> {
    pub run_id: String,
    pub events: mpsc::Receiver<crate::Event>,
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
    pub fn into_parts(self) -> (mpsc::Receiver<crate::Event>, OutcomeReceiver<S>, CancellationToken) {
        (self.events, self.outcome, self.cancel)
    }
}

/// Runs and thread locks shared by every workflow of a process, so a cancel or a shutdown
/// reaches every run, and thread ids are exclusive across workflows.
#[derive(Default)]
pub struct RunRegistry {
    threads: Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>,
    runs: Mutex<HashMap<String, CancellationToken>>,
    idle: Notify,
}

struct ThreadGuard {
    registry: Arc<RunRegistry>,
    thread_id: String,
    guard: Option<OwnedMutexGuard<()>>,
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
                Err(_) => return Err(RunError::ThreadBusy { thread_id: thread_id.to_owned() }),
            },
            BusyPolicy::Queue => mutex.lock_owned().await,
        };
        Ok(ThreadGuard { registry: self.clone(), thread_id: thread_id.to_owned(), guard: Some(guard) })
    }

    /// Cancels a running run. Returns false when no such run is active.
    pub fn cancel(&self, run_id: &str) -> bool {
        let runs = self.runs.lock().expect("run map poisoned");
        match runs.get(run_id) {
            Some(token) => {
                token.cancel();
                true
            }
            None => false,
        }
    }

    /// Cancels every active run.
    pub fn cancel_all(&self) {
        for token in self.runs.lock().expect("run map poisoned").values() {
            token.cancel();
        }
    }

    pub fn active_runs(&self) -> usize {
        self.runs.lock().expect("run map poisoned").len()
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

    fn register(&self, run_id: &str, token: CancellationToken) {
        self.runs.lock().expect("run map poisoned").insert(run_id.to_owned(), token);
    }

    fn unregister(&self, run_id: &str) {
        let mut runs = self.runs.lock().expect("run map poisoned");
        runs.remove(run_id);
        if runs.is_empty() {
            self.idle.notify_waiters();
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
}

impl<S: State> Clone for Runner<S> {
    fn clone(&self) -> Self {
        Self {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            registry: self.registry.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
        }
    }
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
    sink: Arc<EventSink>,
    cancel: CancellationToken,
    deadline: Instant,
    started: StdInstant,
    state: S,
    version: u64,
    next: Option<String>,
    resume: Option<serde_json::Value>,
    step: u32,
    /// What a failed run restores.
    rollback: Rollback<S>,
    /// When this run last wrote a checkpoint (the heartbeat of [`Durability::Exit`]).
    last_commit: StdInstant,
    /// The graph's output (value and JSON text) once the run has completed or paused: the
    /// state no longer changes, and the checkpoint, the outcome and the final event all carry it.
    output: Option<(serde_json::Value, String)>,
    /// Whether the handoff took the completed state and the thread was erased.
    erased: bool,
}

struct Rollback<S> {
    state: S,
    next: Option<String>,
    interrupt: Option<PendingInterrupt>,
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
        Self { graph: Arc::new(graph), checkpointer, registry: Arc::new(RunRegistry::default()), config, handoff: None }
    }

    /// Offers every completed run's state to `handoff` before its final checkpoint (see
    /// [`crate::handoff`]).
    pub fn with_handoff(mut self, handoff: Arc<dyn Handoff<S>>) -> Self {
        self.handoff = Some(handoff);
        self
    }

    /// Shares a registry with other runners of the process (cancel by run id, shutdown).
    pub fn with_registry(mut self, registry: Arc<RunRegistry>) -> Self {
        self.registry = registry;
        self
    }

    pub fn graph(&self) -> &Graph<S> {
        &self.graph
    }

    pub fn checkpointer(&self) -> &Arc<dyn Checkpointer> {
        &self.checkpointer
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
        let _guard = self.registry.lock_thread(thread_id, BusyPolicy::Reject).await?;
        let checkpoint = self.rest_checkpoint(thread_id, 1, state, "create")?;
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
            interrupt: None,
            run: RunMarker {
                run_id: format!("{why}-{}", uuid::Uuid::now_v7().simple()),
                idempotency_key: None,
                status: RunStatus::Completed,
                step: 0,
                output: None,
            },
            created_at: now(),
        })
    }

    /// Starts a run. Returns once the run's input is committed (or a replay is found); the run
    /// then proceeds on its own task and completes even if the handle is dropped.
    pub async fn start(&self, request: RunRequest<S::Update>) -> Result<RunHandle<S>, RunError> {
        let guard = self.registry.lock_thread(&request.thread_id, request.busy).await?;
        let (tx, rx) = mpsc::channel(self.config.event_buffer.max(1));
        let (outcome_tx, outcome_rx) = oneshot::channel();

        if let Some(key) = &request.idempotency_key {
            if let Some(found) = self.checkpointer.find_idempotent(&request.thread_id, key).await? {
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
                    interrupt: None,
                    replayed: true,
                    steps: 0,
                    erased: false,
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

        let mut latest = match request.mode {
            ThreadMode::New => None,
            ThreadMode::Existing | ThreadMode::CreateIfMissing => self.checkpointer.latest(&request.thread_id).await?,
        };

        // A checkpoint still marked running belongs to another process's run: a live one
        // (the thread is busy) or, once old enough, one a crash abandoned. Retrying that run's
        // key re-attaches to it; anything else first finishes it unobserved, because its input
        // was accepted.
        if let Some(cp) = latest.as_ref().filter(|cp| cp.run.status == RunStatus::Running) {
            let age = SystemTime::now().duration_since(cp.created_at).unwrap_or_default();
            if age < self.config.takeover_after {
                return Err(RunError::ThreadBusy { thread_id: request.thread_id });
            }
            let same_run = request.idempotency_key.is_some() && cp.run.idempotency_key == request.idempotency_key;
            if same_run {
                let exec = self.resume_execution(cp.clone(), tx)?;
                let run_id = exec.run_id.to_string();
                let cancel = exec.cancel.clone();
                self.spawn(exec, guard, outcome_tx);
                return Ok(RunHandle { run_id, events: rx, outcome: outcome_rx, cancel });
            }
            info!(thread_id = %request.thread_id, "finishing abandoned run before the new one");
            self.finish_unobserved(cp.clone()).await?;
            latest = self.checkpointer.latest(&request.thread_id).await?;
            if latest.as_ref().is_some_and(|cp| cp.run.status == RunStatus::Running) {
                return Err(RunError::ThreadBusy { thread_id: request.thread_id });
            }
        }

        let (state, version, next, resume, rollback) = match (latest, request.input) {
            (None, _) if request.mode == ThreadMode::Existing => {
                return Err(RunError::NotFound { thread_id: request.thread_id })
            }
            (None, RunInput::Resume(_)) => return Err(RunError::NothingToResume { thread_id: request.thread_id }),
            (None, RunInput::Update(update)) => {
                let mut state = S::default();
                state.apply(update);
                let rollback = Rollback { state: S::default(), next: None, interrupt: None };
                (state, 0, Some(self.graph.entry.clone()), None, rollback)
            }
            (Some(cp), RunInput::Update(update)) => {
                if cp.interrupt.is_some() {
                    return Err(RunError::Interrupted { thread_id: request.thread_id });
                }
                let before: S = decode(&cp)?;
                let mut state = before.clone();
                state.apply(update);
                let rollback = Rollback { state: before, next: cp.next.clone(), interrupt: None };
                (state, cp.version, Some(self.graph.entry.clone()), None, rollback)
            }
            (Some(cp), RunInput::Resume(value)) => {
                let Some(interrupt) = cp.interrupt.clone() else {
                    return Err(RunError::NothingToResume { thread_id: request.thread_id });
                };
                let state: S = decode(&cp)?;
                let rollback =
                    Rollback { state: state.clone(), next: cp.next.clone(), interrupt: Some(interrupt.clone()) };
                (state, cp.version, Some(interrupt.node), Some(value), rollback)
            }
        };

        let run_id: Arc<str> = uuid::Uuid::now_v7().to_string().into();
        let sink = Arc::new(EventSink::new(run_id.clone(), tx));
        let timeout = request.timeout.unwrap_or(self.config.run_timeout);
        let mut exec = Execution {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
            thread_id: request.thread_id.as_str().into(),
            run_id: run_id.clone(),
            idempotency_key: request.idempotency_key,
            sink,
            cancel: CancellationToken::new(),
            deadline: Instant::now() + timeout,
            started: StdInstant::now(),
            state,
            version,
            next,
            resume,
            step: 0,
            rollback,
            last_commit: StdInstant::now(),
            output: None,
            erased: false,
        };
        // The accepting commit: from here on the input is durable and the run will complete.
        match exec.commit(RunStatus::Running, None).await {
            Ok(()) => {}
            Err(RunError::Checkpoint(CheckpointError::Conflict { .. })) if request.mode == ThreadMode::New => {
                return Err(RunError::AlreadyExists { thread_id: request.thread_id });
            }
            Err(error) => return Err(error),
        }
        exec.sink
            .emit(
                None,
                EventKind::RunStarted {
                    thread_id: request.thread_id.clone(),
                    workflow: self.graph.name().to_owned(),
                    resumed: false,
                },
            )
            .await;
        let cancel = exec.cancel.clone();
        self.spawn(exec, guard, outcome_tx);
        Ok(RunHandle { run_id: run_id.to_string(), events: rx, outcome: outcome_rx, cancel })
    }

    /// Finishes every run that a crash left unfinished. Called at start-up, when every
    /// `Running` checkpoint of this process's threads is known to be abandoned. Another replica
    /// racing on the same run is safe: the compare-and-set lets only one writer continue it.
    pub async fn recover(&self) -> Result<usize, RunError> {
        let mut recovered = 0;
        for thread_id in self.checkpointer.unfinished_threads().await? {
            let Ok(guard) = self.registry.lock_thread(&thread_id, BusyPolicy::Reject).await else { continue };
            let Some(cp) = self.checkpointer.latest(&thread_id).await? else { continue };
            if cp.run.status != RunStatus::Running || cp.workflow != self.graph.name() {
                continue;
            }
            info!(%thread_id, run_id = %cp.run.run_id, "resuming run interrupted by a crash");
            if let Err(error) = self.finish_unobserved(cp).await {
                warn!(%thread_id, %error, "recovered run failed");
            }
            drop(guard);
            recovered += 1;
        }
        Ok(recovered)
    }

    /// Drives an abandoned run to its end with nobody reading its events.
    async fn finish_unobserved(&self, cp: Checkpoint) -> Result<RunOutcome<S>, RunError> {
        let (tx, rx) = mpsc::channel(1);
        drop(rx);
        let exec = self.resume_execution(cp, tx)?;
        let run_id = exec.run_id.to_string();
        self.registry.register(&run_id, exec.cancel.clone());
        let outcome = exec.drive().await;
        self.registry.unregister(&run_id);
        outcome
    }

    fn resume_execution(&self, cp: Checkpoint, tx: mpsc::Sender<crate::Event>) -> Result<Execution<S>, RunError> {
        let state: S = decode(&cp)?;
        let run_id: Arc<str> = cp.run.run_id.as_str().into();
        let sink = Arc::new(EventSink::new(run_id.clone(), tx));
        Ok(Execution {
            graph: self.graph.clone(),
            checkpointer: self.checkpointer.clone(),
            config: self.config.clone(),
            handoff: self.handoff.clone(),
            thread_id: cp.thread_id.as_str().into(),
            run_id,
            idempotency_key: cp.run.idempotency_key.clone(),
            sink,
            cancel: CancellationToken::new(),
            deadline: Instant::now() + self.config.run_timeout,
            started: StdInstant::now(),
            rollback: Rollback { state: state.clone(), next: None, interrupt: None },
            state,
            version: cp.version,
            next: cp.next.clone(),
            resume: None,
            step: cp.run.step,
            last_commit: StdInstant::now(),
            output: None,
            erased: false,
        })
    }

    fn spawn(
        &self,
        exec: Execution<S>,
        guard: ThreadGuard,
        outcome_tx: oneshot::Sender<Result<RunOutcome<S>, RunError>>,
    ) {
        let registry = self.registry.clone();
        let run_id = exec.run_id.to_string();
        registry.register(&run_id, exec.cancel.clone());
        // Boxed so that spawning moves a pointer: the run's future holds the state and every
        // node's future, and tokio would otherwise copy all of it several times on the way in.
        let drive = Box::pin(exec.drive());
        tokio::spawn(async move {
            let outcome = drive.await;
            // Release the thread before reporting, so a caller that reacts to the outcome by
            // sending the next turn never finds its own finished run still holding the thread.
            drop(guard);
            registry.unregister(&run_id);
            let _ = outcome_tx.send(outcome);
        });
    }
}

impl<S: State> Execution<S> {
    fn node_name(&self) -> Option<Arc<str>> {
        self.next.as_deref().map(Arc::from)
    }

    async fn commit(&mut self, status: RunStatus, interrupt: Option<PendingInterrupt>) -> Result<(), RunError> {
        let state = serde_json::to_vec(&self.state)
            .map_err(|source| RunError::StateCodec { thread_id: self.thread_id.to_string(), source })?;
        let output = match status {
            RunStatus::Completed | RunStatus::Interrupted => Some(self.output().1.clone()),
            RunStatus::Running | RunStatus::Failed => None,
        };
        let checkpoint = Checkpoint {
            thread_id: self.thread_id.to_string(),
            workflow: self.graph.name().to_owned(),
            version: self.version + 1,
            state,
            next: self.next.clone(),
            interrupt,
            run: RunMarker {
                run_id: self.run_id.to_string(),
                idempotency_key: self.idempotency_key.clone(),
                status,
                step: self.step,
                output,
            },
            created_at: now(),
        };
        self.checkpointer.put(&checkpoint).await?;
        self.version += 1;
        self.last_commit = StdInstant::now();
        Ok(())
    }

    /// Whether a `Running` checkpoint must be written now. Always with
    /// [`Durability::EveryNode`]; with [`Durability::Exit`] only when the next node, running
    /// to its timeout, could otherwise age the last checkpoint past `takeover_after`, and
    /// another process would take the live run for abandoned.
    fn heartbeat_due(&self) -> bool {
        match self.graph.durability() {
            Durability::EveryNode => true,
            Durability::Exit => {
                let next = self.next.as_deref().and_then(|n| self.graph.nodes.get(n));
                let timeout = next.map_or(self.config.node_timeout, |entry| self.node_timeout(entry));
                self.last_commit.elapsed() + timeout >= self.config.takeover_after
            }
        }
    }

    /// How long one node may run: its own timeout, else the runner's default.
    fn node_timeout(&self, entry: &NodeEntry<S>) -> Duration {
        entry.timeout.unwrap_or(self.config.node_timeout)
    }

    async fn drive(mut self) -> Result<RunOutcome<S>, RunError> {
        match self.steps().await {
            Ok(outcome) => Ok(outcome),
            Err(error) => {
                self.fail(&error).await;
                Err(error)
            }
        }
    }

    async fn steps(&mut self) -> Result<RunOutcome<S>, RunError> {
        while let Some(node) = self.node_name() {
            if self.step >= self.graph.max_steps {
                return Err(RunError::StepLimit { limit: self.graph.max_steps });
            }
            if self.cancel.is_cancelled() {
                return Err(RunError::Cancelled);
            }
            let entry = &self.graph.nodes[&*node];
            let timeout = self.node_timeout(entry);
            let node_deadline = (Instant::now() + timeout).min(self.deadline);
            let ctx = NodeContext {
                node: node.clone(),
                thread_id: self.thread_id.clone(),
                sink: self.sink.clone(),
                cancel: self.cancel.child_token(),
                deadline: Some(node_deadline),
                resume: self.resume.take(),
            };
            self.sink.emit(Some(node.clone()), EventKind::NodeStarted { step: self.step }).await;
            let started = StdInstant::now();
            let result = tokio::select! {
                biased;
                _ = self.cancel.cancelled() => Err(RunError::Cancelled),
                result = tokio::time::timeout_at(node_deadline, entry.node.run(&self.state, &ctx)) => match result {
                    Ok(Ok(output)) => Ok(output),
                    Ok(Err(source)) if source.kind == NodeErrorKind::Cancelled => Err(RunError::Cancelled),
                    Ok(Err(source)) => Err(RunError::Node { node: node.to_string(), source }),
                    Err(_) if node_deadline == self.deadline => Err(RunError::DeadlineExceeded),
                    Err(_) => Err(RunError::NodeTimeout { node: node.to_string(), timeout }),
                },
            };
            ctx.cancel.cancel();
            let output = result?;
            let update_json = serde_json::to_string(&output.update)
                .map_err(|source| RunError::StateCodec { thread_id: self.thread_id.to_string(), source })?;
            self.state.apply(output.update);
            self.step += 1;
            let interrupt = output.interrupt.map(|request| PendingInterrupt {
                node: node.to_string(),
                reason: request.reason,
                payload: request.payload.to_string(),
            });
            if interrupt.is_none() {
                self.next = match self.graph.next(&node, &self.state) {
                    Ok(Target::Node(next)) => Some(next),
                    Ok(Target::End) => None,
                    Err(undeclared) => {
                        return Err(RunError::UndeclaredTarget { node: node.to_string(), target: undeclared.target })
                    }
                };
            }
            let status = match (&interrupt, &self.next) {
                (Some(_), _) => RunStatus::Interrupted,
                (None, None) => RunStatus::Completed,
                (None, Some(_)) => RunStatus::Running,
            };
            let erased = status == RunStatus::Completed && self.hand_off().await;
            if !erased && (status != RunStatus::Running || self.heartbeat_due()) {
                self.commit(status, interrupt.clone()).await?;
            }
            let next = if interrupt.is_some() { None } else { self.next.clone() };
            self.sink
                .emit(
                    Some(node.clone()),
                    EventKind::NodeFinished { step: self.step - 1, update_json, duration: started.elapsed(), next },
                )
                .await;
            if let Some(interrupt) = interrupt {
                self.sink
                    .emit(
                        Some(node.clone()),
                        EventKind::Interrupted {
                            reason: interrupt.reason.clone(),
                            payload_json: interrupt.payload.clone(),
                        },
                    )
                    .await;
                return Ok(self.outcome(RunStatus::Interrupted, Some(interrupt)));
            }
        }
        let outcome = self.outcome(RunStatus::Completed, None);
        let output_json = self.output().1.clone();
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

    /// The graph's output for the final state, computed once.
    fn output(&mut self) -> &mut (serde_json::Value, String) {
        let (graph, state) = (&self.graph, &self.state);
        self.output.get_or_insert_with(|| {
            let value = graph.output(state);
            let json = value.to_string();
            (value, json)
        })
    }

    /// What the run returns as it ends. Called once, last: it takes the final state and the
    /// output value rather than copying them (only the output's JSON text, for the run's last
    /// event, stays behind).
    fn outcome(&mut self, status: RunStatus, interrupt: Option<PendingInterrupt>) -> RunOutcome<S> {
        let output = std::mem::take(&mut self.output().0);
        RunOutcome {
            run_id: self.run_id.to_string(),
            version: self.version,
            status,
            output,
            state: Some(std::mem::take(&mut self.state)),
            interrupt,
            replayed: false,
            steps: self.step,
            erased: self.erased,
        }
    }

    /// Offers the completed state to the handoff; true when it took the state and the thread
    /// is erased. Any failure leaves the run to write its final checkpoint, so nothing is lost.
    async fn hand_off(&mut self) -> bool {
        let Some(handoff) = self.handoff.clone() else { return false };
        match handoff.complete(&self.thread_id, &self.state).await {
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

    /// Rolls the thread back to the state from before the run, as a new checkpoint, so the
    /// caller can retry cleanly and the failed run is never resumed by recovery.
    async fn fail(&mut self, error: &RunError) {
        warn!(thread_id = %self.thread_id, run_id = %self.run_id, %error, "run failed");
        let lost_race = matches!(error, RunError::Checkpoint(CheckpointError::Conflict { .. }));
        self.output = None;
        if !lost_race {
            self.state = self.rollback.state.clone();
            self.next = self.rollback.next.clone();
            let interrupt = self.rollback.interrupt.clone();
            if let Err(rollback_error) = self.commit(RunStatus::Failed, interrupt).await {
                warn!(thread_id = %self.thread_id, error = %rollback_error, "could not record failed run");
            }
        }
        self.sink.emit(None, EventKind::RunFailed { kind: error.failure_kind(), message: error.to_string() }).await;
    }
}
