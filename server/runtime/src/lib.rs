//! Frontdesk's graph runtime.
//!
//! A workflow is data: a typed [`State`] whose fields merge node updates through reducers, a
//! [`Graph`] of named [`Node`]s joined by static and conditional edges, and the output it
//! reports. The [`Runner`] executes one run (a user turn, a ticket, a resume) from the thread's
//! latest [`Checkpoint`] until END or an interrupt, writes a checkpoint after every node (or,
//! by the graph's [`Durability`], only when the run stops) as a compare-and-set on the thread's
//! version, and streams [`Event`]s on a bounded channel. A [`Handoff`] may take a completed
//! run's state to a system of record, and the thread is then erased instead of checkpointed.
//!
//! Nothing here knows about gRPC, SQL or model vendors: stores implement [`Checkpointer`] and
//! prove it with [`conformance`]; workflows implement [`Node`].

pub mod checkpoint;
pub mod conformance;
pub mod event;
pub mod graph;
pub mod handoff;
pub mod node;
pub mod runlog;
pub mod runner;
pub mod state;

pub use checkpoint::{
    Checkpoint, CheckpointError, Checkpointer, IdempotentRun, MemoryCheckpointer, Pending, PendingInterrupt, RunMarker,
    RunStatus, TaskWrite, ThreadHead, ThreadPage, ThreadQuery, ThreadSummary, UnfinishedRun,
};
pub use event::{Event, EventKind, FailureKind, LlmCallInfo, RunEvents, RunObserver, Usage};
pub use graph::{
    Durability, EdgeInfo, Graph, GraphBuilder, GraphDescription, GraphError, NodeFailure, NodeInfo, NodeOptions,
    RetryPolicy, Target, END, START,
};
pub use handoff::{CompletedRun, Completion, Handoff, HandoffError};
pub use node::{InterruptRequest, Node, NodeContext, NodeError, NodeErrorKind, NodeOutput, Resume, TaskNode};
pub use runlog::{RunLog, RunRetention, RunSubscription};
pub use runner::{
    BusyPolicy, OutcomeReceiver, RunError, RunHandle, RunInput, RunOutcome, RunRegistry, RunRequest, Runner,
    RunnerConfig, StartError, ThreadMode,
};
pub use state::{reducer, Keyed, Log, Mergeable, Reducer, State};
