//! Handing a completed run's state to a system of record instead of checkpointing it.
//!
//! Some workflows end by moving their result somewhere permanent: a triaged ticket is archived
//! in SQL and its thread is then of no further use. Writing a final checkpoint only to erase it
//! a moment later costs a durable commit per run for nothing. A [`Handoff`] installed with
//! [`Runner::with_handoff`](crate::Runner::with_handoff) is offered the state when a run
//! reaches END, before the final checkpoint; when it answers [`Completion::Erase`], it has
//! recorded the state durably and the runner erases the thread instead of checkpointing it.
//!
//! The erase is not waited on for durability
//! ([`Checkpointer::delete_thread_unsynced`](crate::Checkpointer::delete_thread_unsynced)), and a
//! crash between the handoff and the erase leaves the thread as the run found it (with
//! [`Durability::ByEffect`](crate::Durability::ByEffect), the run's accepting `Running` checkpoint).
//! The handoff's owner must therefore recognise a thread whose state it already holds and erase
//! it before [`Runner::recover`](crate::Runner::recover) would resume that run (the triage desk's
//! start-up sweep does).

use async_trait::async_trait;

/// What becomes of a thread whose run completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completion {
    /// The run writes its final checkpoint, as without a handoff.
    Keep,
    /// The handoff recorded the state durably: the thread is erased instead.
    Erase,
}

pub type HandoffError = Box<dyn std::error::Error + Send + Sync>;

/// The completed run whose state a [`Handoff`] is offered.
#[derive(Debug, Clone, Copy)]
pub struct CompletedRun<'a> {
    pub thread_id: &'a str,
    /// Passed because the final checkpoint, which would have recorded it, may never be written:
    /// a system of record that keeps the run's id must take it here.
    pub run_id: &'a str,
    /// The idempotency key the run was started with, and its request's fingerprint. The caller
    /// that would record the outcome under the key may be gone (the run was resumed after a
    /// crash or a shutdown), and with the thread erased the runner's own record of the key goes
    /// too: a system of record that answers retries records the outcome under the key here.
    pub idempotency_key: Option<&'a str>,
    pub fingerprint: Option<&'a str>,
}

/// Takes the final state of completed runs (never of interrupted or failed ones).
#[async_trait]
pub trait Handoff<S>: Send + Sync {
    /// Called once per completed run, while the run still holds its thread. An error keeps
    /// the final checkpoint (nothing is lost; the owner can hand the state off later), and the
    /// run still completes.
    async fn complete(&self, run: CompletedRun<'_>, state: &S) -> Result<Completion, HandoffError>;
}
