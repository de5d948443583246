//! Nodes: the units of work in a graph, and the context a run gives them.

use std::{
    sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    },
    time::SystemTime,
};

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::warn;

use crate::{
    event::{Event, EventKind, EventSender, RunObserver, Usage},
    runlog::RunLog,
    State,
};

/// A graph node. It reads the state and returns an update; it never mutates shared state, so
/// a node that fails or is cancelled leaves nothing half-written.
#[async_trait]
pub trait Node<S: State>: Send + Sync + 'static {
    async fn run(&self, state: &S, ctx: &NodeContext) -> Result<NodeOutput<S::Update>, NodeError>;

    /// One line for graph descriptions.
    fn description(&self) -> &str {
        ""
    }
}

/// What a node returns: its update, and optionally interrupts that pause the run.
#[derive(Debug, Default)]
pub struct NodeOutput<U> {
    pub update: U,
    pub interrupts: Vec<InterruptRequest>,
}

/// A request to pause the run until outside input answers it. Several may be pending on a
/// thread at once (a user's clarification and a manager's approval); each is answered by its
/// own resume, named by `id`.
#[derive(Debug, Clone, PartialEq)]
pub struct InterruptRequest {
    /// Stable and unique within the thread (ids of answered interrupts cannot be reused).
    pub id: String,
    /// What kind of input is awaited, for callers that dispatch on it (`"awaiting_user"`).
    pub reason: String,
    pub payload: serde_json::Value,
}

impl InterruptRequest {
    /// An interrupt with a typed payload. A payload that does not encode is the node's bug,
    /// an `Internal` failure of the node rather than an interrupt asking with `null`.
    pub fn new(
        id: impl Into<String>,
        reason: impl Into<String>,
        payload: &impl serde::Serialize,
    ) -> Result<Self, NodeError> {
        let payload = serde_json::to_value(payload)
            .map_err(|e| NodeError::with_source(NodeErrorKind::Internal, "cannot encode an interrupt's payload", e))?;
        Ok(Self { id: id.into(), reason: reason.into(), payload })
    }
}

impl<U> NodeOutput<U> {
    pub fn update(update: U) -> Self {
        Self { update, interrupts: Vec::new() }
    }

    /// Applies `update`, persists the run as paused at this node with one more pending
    /// interrupt, and ends the run. Resuming that interrupt runs this node again with
    /// [`NodeContext::resume`] set.
    pub fn interrupt(update: U, interrupt: InterruptRequest) -> Self {
        Self { update, interrupts: vec![interrupt] }
    }

    /// Like [`NodeOutput::interrupt`] with several interrupts, each resumed on its own.
    pub fn interrupts(update: U, interrupts: Vec<InterruptRequest>) -> Self {
        Self { update, interrupts }
    }
}

/// One task of a fan-out node (as LangGraph's `Send`): the node's dispatch function gives each
/// task its own input; the tasks run concurrently and their updates are applied in dispatch
/// order once all have finished. A task cannot interrupt the run.
#[async_trait]
pub trait TaskNode<S: State>: Send + Sync + 'static {
    type Input: serde::Serialize + serde::de::DeserializeOwned + Send + Sync + 'static;

    async fn run(&self, state: &S, input: Self::Input, ctx: &NodeContext) -> Result<S::Update, NodeError>;

    /// One line for graph descriptions.
    fn description(&self) -> &str {
        ""
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NodeErrorKind {
    /// The model endpoint could not be reached or kept failing.
    ModelUnavailable,
    /// The model's reply failed validation even after a repair attempt.
    ModelOutputInvalid,
    /// An outside system the node calls failed.
    DependencyFailed,
    /// The run's input cannot be processed.
    InvalidInput,
    /// The node was cancelled.
    Cancelled,
    Internal,
}

/// A node failure. The run stops and rolls back to the state from before the run.
#[derive(Debug, thiserror::Error)]
#[error("{kind:?}: {message}")]
pub struct NodeError {
    pub kind: NodeErrorKind,
    pub message: String,
    #[source]
    pub source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl NodeError {
    pub fn new(kind: NodeErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into(), source: None }
    }

    pub fn with_source(
        kind: NodeErrorKind,
        message: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self { kind, message: message.into(), source: Some(source.into()) }
    }
}

/// Shared by every event a run emits, so event ids stay gap-free across nodes. Every event
/// goes into the run's [`RunLog`] (for callers that re-attach) and to the caller's channel
/// while the caller reads it.
pub(crate) struct EventSink {
    pub(crate) run_id: Arc<str>,
    log: Arc<RunLog>,
    tx: EventSender,
    usage: Mutex<Usage>,
    /// The registry's observer, with the run's workflow and when this process began the run.
    observer: Option<(Arc<dyn RunObserver>, Arc<str>, std::time::Instant)>,
    /// The run's deadline: a caller that has stopped reading (its buffer full, its connection
    /// open) holds the run back until then, and no longer.
    deadline: tokio::time::Instant,
    /// Set once the caller held the run back past its deadline: the rest of the events go to
    /// the log only.
    detached: AtomicBool,
}

impl EventSink {
    pub(crate) fn new(
        log: Arc<RunLog>,
        tx: EventSender,
        observer: Option<(Arc<dyn RunObserver>, Arc<str>)>,
        deadline: tokio::time::Instant,
    ) -> Self {
        let observer = observer.map(|(observer, workflow)| (observer, workflow, std::time::Instant::now()));
        Self {
            run_id: log.run_id().into(),
            log,
            tx,
            usage: Mutex::new(Usage::default()),
            observer,
            deadline,
            detached: AtomicBool::new(false),
        }
    }

    pub(crate) fn log(&self) -> &Arc<RunLog> {
        &self.log
    }

    pub(crate) async fn emit(&self, node: Option<Arc<str>>, kind: EventKind) {
        self.emit_task(node, None, kind).await;
    }

    pub(crate) async fn emit_task(&self, node: Option<Arc<str>>, task: Option<u32>, kind: EventKind) {
        if let EventKind::LlmCall(info) = &kind {
            *self.usage.lock().expect("usage mutex poisoned") += info.usage;
        }
        let event = Event { run_id: self.run_id.clone(), event_id: 0, time: SystemTime::now(), node, task, kind };
        if let Some((observer, workflow, started)) = &self.observer {
            observer.observe(workflow, &event, started.elapsed());
        }
        // A caller that went away must not stop the run: an accepted run always commits, and
        // its events still go to the log. Reserving before numbering keeps ids in send order.
        let permit = match self.tx.try_reserve() {
            Ok(permit) => Some(permit),
            Err(mpsc::error::TrySendError::Closed(())) => None,
            Err(mpsc::error::TrySendError::Full(())) if self.detached.load(Ordering::Relaxed) => None,
            // A slow reader slows its own run, within the run's time: one that has stopped
            // reading must not hold the run, its thread and its slot for as long as its
            // connection stays open.
            Err(mpsc::error::TrySendError::Full(())) => {
                match tokio::time::timeout_at(self.deadline, self.tx.reserve()).await {
                    Ok(permit) => permit.ok(),
                    Err(_) => {
                        warn!(run_id = %self.run_id, "the caller stopped reading the run's events; the rest go to the run's log only");
                        self.detached.store(true, Ordering::Relaxed);
                        None
                    }
                }
            }
        };
        match permit {
            Some(permit) => self.log.append(event, |event| permit.send(Box::new(event))),
            None => self.log.append(event, |_| {}),
        }
    }

    pub(crate) fn usage(&self) -> Usage {
        *self.usage.lock().expect("usage mutex poisoned")
    }
}

/// What a node may use from its run: identity, cancellation, deadline, resume value, events.
pub struct NodeContext {
    pub(crate) node: Arc<str>,
    pub(crate) task: Option<u32>,
    pub(crate) thread_id: Arc<str>,
    pub(crate) sink: Arc<EventSink>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Option<tokio::time::Instant>,
    pub(crate) resume: Option<Resume>,
    pub(crate) attempt: u32,
    /// Set by [`NodeContext::acted`]: the attempt had an effect that running it again repeats.
    pub(crate) acted: std::sync::atomic::AtomicBool,
}

/// The answer to an interrupt, given to the node that raised it when the run resumes there.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Resume {
    pub interrupt_id: String,
    pub value: serde_json::Value,
}

impl NodeContext {
    pub fn node(&self) -> &str {
        &self.node
    }

    /// The task's index when this is a task of a fan-out node.
    pub fn task(&self) -> Option<u32> {
        self.task
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    pub fn run_id(&self) -> &str {
        &self.sink.run_id
    }

    /// 1 on the first attempt; higher when the node's retry policy runs it again.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// Records that this attempt is about to have, or has had, an effect outside the state that
    /// running the node again would repeat (a booking made, a record created by a system that
    /// takes no idempotency key). A failed attempt that acted is final whatever the node's retry
    /// policy, its timeout included: the failure goes to the node's failure route, or fails the
    /// run, rather than making the effect twice. Call it before the effect, as a call that fails
    /// or times out may still have reached the other system.
    pub fn acted(&self) {
        self.acted.store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Whether [`NodeContext::acted`] was called in this attempt.
    pub fn has_acted(&self) -> bool {
        self.acted.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Cancelled when the run is cancelled or times out; long calls should select on it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The earlier of the node's timeout and the run's deadline.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.deadline
    }

    /// The answered interrupt, when this node is re-run because one of its interrupts was resumed.
    pub fn resume(&self) -> Option<&Resume> {
        self.resume.as_ref()
    }

    /// The value of [`NodeContext::resume`].
    pub fn resume_value(&self) -> Option<&serde_json::Value> {
        self.resume.as_ref().map(|r| &r.value)
    }

    /// Streams an event attributed to this node (token deltas, model and tool calls).
    pub async fn emit(&self, kind: EventKind) {
        self.sink.emit_task(Some(self.node.clone()), self.task, kind).await;
    }

    /// Sends without waiting, for synchronous callbacks such as token streaming. If the
    /// caller's buffer is full the delta is dropped; the final reply still carries the text.
    pub fn try_emit(&self, kind: EventKind) {
        // Reserve first so an id is only taken by an event that is really sent: ids stay
        // gap-free even when a slow reader makes us drop deltas. A caller that went away
        // drops nothing: the log still gets the delta.
        let event = Event {
            run_id: self.sink.run_id.clone(),
            event_id: 0,
            time: SystemTime::now(),
            node: Some(self.node.clone()),
            task: self.task,
            kind,
        };
        match self.sink.tx.try_reserve() {
            Ok(permit) => self.sink.log.append(event, |event| permit.send(Box::new(event))),
            Err(mpsc::error::TrySendError::Closed(())) => self.sink.log.append(event, |_| {}),
            Err(mpsc::error::TrySendError::Full(())) => {}
        }
    }
}
