//! Run events: what a run streams to its caller, in order, one per step of progress.

use std::{
    sync::Arc,
    task::{Context, Poll},
    time::{Duration, SystemTime},
};

use tokio::sync::mpsc;

/// Token usage and cost, summed over a run's model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
        self.cost_usd += other.cost_usd;
    }
}

/// One finished model call, as nodes report it: a failed one too, whose usage counts the
/// replies that arrived and could not be used (billed all the same), so the run's usage does.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallInfo {
    pub model: String,
    pub purpose: String,
    pub usage: Usage,
    pub latency: Duration,
    pub attempts: u32,
    /// Why the call failed; `None` when it answered.
    pub error: Option<String>,
}

/// Why a run failed, in terms a transport maps to a status code without knowing the cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    InvalidInput,
    NotFound,
    /// The request does not fit the thread's state (an interrupt already answered, a thread
    /// paused at interrupts given new input).
    FailedPrecondition,
    ModelUnavailable,
    ModelOutputInvalid,
    DependencyFailed,
    DeadlineExceeded,
    Cancelled,
    /// The process stopped while the run went on: it is not over, and resumes from its last
    /// checkpoint on the next start or on another replica.
    Stopped,
    StepLimit,
    Conflict,
    StoreUnavailable,
    Internal,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    /// `resumed` is true when the run answers an interrupt or continues a run a crash stopped.
    RunStarted {
        thread_id: String,
        workflow: String,
        resumed: bool,
    },
    NodeStarted {
        step: u32,
    },
    NodeFinished {
        step: u32,
        update_json: String,
        duration: Duration,
        next: Option<String>,
    },
    /// A node attempt failed and its retry policy runs it again after `delay`.
    NodeRetrying {
        step: u32,
        attempt: u32,
        max_attempts: u32,
        kind: FailureKind,
        message: String,
        delay: Duration,
    },
    /// A node failed for good (its retries exhausted, or the run hit its step limit) and the
    /// graph's failure route takes over at `fallback` instead of failing the run.
    NodeFailed {
        step: u32,
        kind: FailureKind,
        message: String,
        fallback: String,
    },
    /// A fan-out node dispatched `tasks` tasks (events of each carry its index).
    TasksDispatched {
        step: u32,
        tasks: u32,
        already_done: u32,
    },
    /// One task of a fan-out node finished; its update is kept as a pending write, committed at
    /// once where the graph commits after the node (`every_node`, or a node with effects), so a
    /// crash re-runs only the tasks that had not finished.
    TaskFinished {
        step: u32,
        update_json: String,
        duration: Duration,
    },
    TokenDelta {
        text: String,
    },
    LlmCall(LlmCallInfo),
    ToolCalled {
        call_id: String,
        name: String,
        arguments_json: String,
    },
    ToolReturned {
        call_id: String,
        name: String,
        result_json: String,
        is_error: bool,
        /// How long the call took.
        latency: Duration,
    },
    /// A node raised an interrupt; the run pauses when the node has finished.
    InterruptRaised {
        interrupt_id: String,
        reason: String,
        payload_json: String,
    },
    /// The run paused; `pending` lists every interrupt the thread now waits on.
    Interrupted {
        pending: Vec<String>,
        /// What the run's model calls spent, as on [`EventKind::RunFinished`].
        usage: Usage,
    },
    RunFinished {
        steps: u32,
        duration: Duration,
        /// What the run's model calls spent, failed calls included ([`LlmCallInfo`]).
        usage: Usage,
        output_json: String,
    },
    RunFailed {
        kind: FailureKind,
        message: String,
        /// What the run's model calls spent before it failed, as on [`EventKind::RunFinished`].
        usage: Usage,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub run_id: Arc<str>,
    /// Starts at 1 and increases by one within the run.
    pub event_id: u64,
    pub time: SystemTime,
    /// The node that produced the event; `None` for run-level events.
    pub node: Option<Arc<str>>,
    /// The fan-out task that produced the event, by dispatch index.
    pub task: Option<u32>,
    pub kind: EventKind,
}

impl Event {
    /// True for the last event of a run.
    pub fn is_terminal(&self) -> bool {
        matches!(self.kind, EventKind::RunFinished { .. } | EventKind::RunFailed { .. } | EventKind::Interrupted { .. })
    }
}

/// The caller's end of a run's events, in order.
///
/// Events travel boxed: tokio's channel allocates its slots 32 at a time, and an [`Event`] is
/// 168 bytes, so unboxed slots would cost every run 5 KB before its first event; boxed, 0.25 KB.
/// At 10,000 streams in flight that is the difference between 50 MB and 2.5 MB.
#[derive(Debug)]
pub struct RunEvents(mpsc::Receiver<Box<Event>>);

/// The run's end of [`RunEvents`].
pub(crate) type EventSender = mpsc::Sender<Box<Event>>;

impl RunEvents {
    pub(crate) fn channel(buffer: usize) -> (EventSender, RunEvents) {
        let (tx, rx) = mpsc::channel(buffer.max(1));
        (tx, RunEvents(rx))
    }

    /// The next event; `None` once the run has sent its last and dropped its end.
    pub async fn recv(&mut self) -> Option<Event> {
        self.0.recv().await.map(|event| *event)
    }

    /// Stops the run from sending more (it goes on, and its log still gets every event);
    /// events already sent can still be read.
    pub fn close(&mut self) {
        self.0.close();
    }
}

impl futures_core::Stream for RunEvents {
    type Item = Event;

    fn poll_next(mut self: std::pin::Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Event>> {
        self.0.poll_recv(cx).map(|event| event.map(|event| *event))
    }
}

/// Sees the events of every run of a [`crate::RunRegistry`] as they are emitted (token deltas
/// aside), for metrics. Called on the run's own task, before the event goes to the caller: it
/// must be quick and must not block.
pub trait RunObserver: Send + Sync {
    /// `elapsed`: the time since this process started or took over the run.
    fn observe(&self, workflow: &str, event: &Event, elapsed: std::time::Duration);
}
