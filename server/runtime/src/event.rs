//! Run events: what a run streams to its caller, in order, one per step of progress.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

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

/// One finished model call, as nodes report it.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallInfo {
    pub model: String,
    pub purpose: String,
    pub usage: Usage,
    pub latency: Duration,
    pub attempts: u32,
}

/// Why a run failed, in terms a transport maps to a status code without knowing the cause.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailureKind {
    InvalidInput,
    NotFound,
    ModelUnavailable,
    ModelOutputInvalid,
    DependencyFailed,
    DeadlineExceeded,
    Cancelled,
    StepLimit,
    Conflict,
    StoreUnavailable,
    Internal,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
    RunStarted { thread_id: String, workflow: String, resumed: bool },
    NodeStarted { step: u32 },
    NodeFinished { step: u32, update_json: String, duration: Duration, next: Option<String> },
    TokenDelta { text: String },
    LlmCall(LlmCallInfo),
    ToolCalled { call_id: String, name: String, arguments_json: String },
    ToolReturned { call_id: String, name: String, result_json: String, is_error: bool },
    Interrupted { reason: String, payload_json: String },
    RunFinished { steps: u32, duration: Duration, usage: Usage, output_json: String },
    RunFailed { kind: FailureKind, message: String },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    pub run_id: Arc<str>,
    /// Starts at 1 and increases by one within the run.
    pub event_id: u64,
    pub time: SystemTime,
    /// The node that produced the event; `None` for run-level events.
    pub node: Option<Arc<str>>,
    pub kind: EventKind,
}

impl Event {
    /// True for the last event of a run.
    pub fn is_terminal(&self) -> bool {
        matches!(self.kind, EventKind::RunFinished { .. } | EventKind::RunFailed { .. } | EventKind::Interrupted { .. })
    }
}
