//! Nodes: the units of work in a graph, and the context a run gives them.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, Mutex,
    },
    time::SystemTime,
};

use async_trait::async_trait;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::{
    event::{Event, EventKind, Usage},
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

/// What a node returns: its update, and optionally a request to pause the run.
#[derive(Debug, Default)]
pub struct NodeOutput<U> {
    pub update: U,
    pub interrupt: Option<InterruptRequest>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct InterruptRequest {
    pub reason: String,
    pub payload: serde_json::Value,
}

impl<U> NodeOutput<U> {
    pub fn update(update: U) -> Self {
        Self { update, interrupt: None }
    }

    /// Applies `update`, persists the run as paused at this node and ends the run. Resuming runs
    /// this node again with [`NodeContext::resume_value`] set.
    pub fn interrupt(update: U, reason: impl Into<String>, payload: serde_json::Value) -> Self {
        Self { update, interrupt: Some(InterruptRequest { reason: reason.into(), payload }) }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Shared by every event a run emits, so event ids stay gap-free across nodes.
pub(crate) struct EventSink {
    pub(crate) run_id: Arc<str>,
    next_id: AtomicU64,
    tx: mpsc::Sender<Event>,
    usage: Mutex<Usage>,
}

impl EventSink {
    pub(crate) fn new(run_id: Arc<str>, tx: mpsc::Sender<Event>) -> Self {
        Self { run_id, next_id: AtomicU64::new(1), tx, usage: Mutex::new(Usage::default()) }
    }

    pub(crate) async fn emit(&self, node: Option<Arc<str>>, kind: EventKind) {
        if let EventKind::LlmCall(info) = &kind {
            *self.usage.lock().expect("usage mutex poisoned") += info.usage;
        }
        // A caller that went away must not stop the run: an accepted run always commits.
        // Reserving before numbering keeps ids in send order.
        if let Ok(permit) = self.tx.reserve().await {
            permit.send(Event {
                run_id: self.run_id.clone(),
                event_id: self.next_id.fetch_add(1, Ordering::Relaxed),
                time: SystemTime::now(),
                node,
                kind,
            });
        }
    }

    pub(crate) fn usage(&self) -> Usage {
        *self.usage.lock().expect("usage mutex poisoned")
    }
}

/// What a node may use from its run: identity, cancellation, deadline, resume value, events.
pub struct NodeContext {
    pub(crate) node: Arc<str>,
    pub(crate) thread_id: Arc<str>,
    pub(crate) sink: Arc<EventSink>,
    pub(crate) cancel: CancellationToken,
    pub(crate) deadline: Option<tokio::time::Instant>,
    pub(crate) resume: Option<serde_json::Value>,
}

impl NodeContext {
    pub fn node(&self) -> &str {
        &self.node
    }

    pub fn thread_id(&self) -> &str {
        &self.thread_id
    }

    pub fn run_id(&self) -> &str {
        &self.sink.run_id
    }

    /// Cancelled when the run is cancelled or times out; long calls should select on it.
    pub fn cancellation(&self) -> &CancellationToken {
        &self.cancel
    }

    /// The earlier of the node's timeout and the run's deadline.
    pub fn deadline(&self) -> Option<tokio::time::Instant> {
        self.deadline
    }

    /// The value the run was resumed with, when this node is re-run after an interrupt.
    pub fn resume_value(&self) -> Option<&serde_json::Value> {
        self.resume.as_ref()
    }

    /// Streams an event attributed to this node (token deltas, model and tool calls).
    pub async fn emit(&self, kind: EventKind) {
        self.sink.emit(Some(self.node.clone()), kind).await;
    }

    /// Sends without waiting, for synchronous callbacks such as token streaming. If the
    /// caller's buffer is full the delta is dropped; the final reply still carries the text.
    pub fn try_emit(&self, kind: EventKind) {
        // Reserve first so an id is only taken by an event that is really sent: ids stay
        // gap-free even when a slow reader makes us drop deltas.
        if let Ok(permit) = self.sink.tx.try_reserve() {
            permit.send(Event {
                run_id: self.sink.run_id.clone(),
                event_id: self.sink.next_id.fetch_add(1, Ordering::Relaxed),
                time: SystemTime::now(),
                node: Some(self.node.clone()),
                kind,
            });
        }
    }
}
