//! The workflow layer's error: what callers of a workflow can get wrong or run into.

use frontdesk_runtime::{CheckpointError, RunError};

#[derive(Debug, thiserror::Error)]
pub enum WorkflowError {
    /// A request field is invalid; `field` names it as the API does.
    #[error("invalid {field}: {reason}")]
    InvalidArgument { field: &'static str, reason: String },
    #[error("{what} {id} not found")]
    NotFound { what: &'static str, id: String },
    #[error("{what} {id} already exists")]
    AlreadyExists { what: &'static str, id: String },
    /// A task workflow (driven through its own service) was addressed as a conversation.
    #[error("workflow {workflow} is not conversational; use its own service")]
    NotConversational { workflow: String },
    /// An idempotency key of `what` `id` (a customer's triage request) was reused by a request
    /// that differs from the one that first used it.
    #[error("idempotency key {key:?} of {what} {id} was used by a different request")]
    IdempotencyMismatch { what: &'static str, id: String, key: String },
    /// A reply to a pending action from someone other than the person and role it awaits.
    #[error("action {action_id} awaits the reply of the {expected}")]
    WrongResponder { action_id: String, expected: String },
    /// The conversation has ended (a service call was hung up) and takes no more messages.
    #[error("conversation {id} has ended")]
    ConversationEnded { id: String },
    /// The server is shutting down: open-ended work (a watch) ends with it, to be resumed
    /// elsewhere or after the restart.
    #[error("the server is shutting down")]
    ShuttingDown,
    /// A configured limit was reached.
    #[error("limit exceeded: {limit} (at most {max})")]
    LimitExceeded { limit: &'static str, max: u64 },
    /// A runner error on the thread of one of the workflow's entities. The runtime only knows
    /// thread ids, which are the workflow's business (a triage thread is `customer:ticket`), so
    /// the workflow names the entity as its callers know it (see [`WorkflowError::run_on`]).
    #[error("{what} {id}: {source}")]
    Thread {
        what: &'static str,
        id: String,
        #[source]
        source: RunError,
    },
    /// A runner error whose thread the workflow did not name.
    #[error(transparent)]
    Run(#[from] RunError),
    #[error(transparent)]
    Store(#[from] CheckpointError),
    /// Stored state or output could not be decoded.
    #[error("stored data of {id} could not be decoded")]
    Corrupt {
        id: String,
        #[source]
        source: serde_json::Error,
    },
    /// A workflow's shipped or user-supplied configuration is invalid.
    #[error("invalid workflow configuration {path}")]
    Config {
        path: String,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl WorkflowError {
    /// Refuses a NUL character in the request field `field` (free text or an id): no value
    /// needs one, and PostgreSQL refuses it in any text value, stored or compared. Refused
    /// there, the call would fail as the store being unavailable, which a retry never mends.
    pub fn reject_nul(field: &'static str, text: &str) -> Result<(), WorkflowError> {
        if text.contains('\0') {
            return Err(WorkflowError::InvalidArgument { field, reason: "must not contain NUL characters".into() });
        }
        Ok(())
    }

    /// [`WorkflowError::reject_nul`] for each of `fields`, (name as the API spells it, value),
    /// in order: the first with a NUL is the one reported.
    pub fn reject_nul_in(fields: &[(&'static str, &str)]) -> Result<(), WorkflowError> {
        fields.iter().try_for_each(|(field, value)| Self::reject_nul(field, value))
    }

    /// `error`, from a run on the thread of `what` `id` (a conversation, a ticket): a missing or
    /// clashing thread becomes that entity's `NotFound` / `AlreadyExists`, anything else keeps
    /// the runner's error with the entity named beside it.
    pub fn run_on(what: &'static str, id: impl Into<String>, error: RunError) -> Self {
        let id = id.into();
        match error {
            RunError::NotFound { .. } => WorkflowError::NotFound { what, id },
            RunError::AlreadyExists { .. } => WorkflowError::AlreadyExists { what, id },
            source => WorkflowError::Thread { what, id, source },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::WorkflowError;

    #[test]
    fn nul_is_refused_in_text_and_other_control_characters_are_not() {
        assert!(WorkflowError::reject_nul("text", "tabs\tand\nlines").is_ok());
        let refused = WorkflowError::reject_nul("text", "a\0b");
        assert!(matches!(refused, Err(WorkflowError::InvalidArgument { field: "text", .. })));
    }

    #[test]
    fn the_first_field_with_a_nul_is_the_one_reported() {
        assert!(WorkflowError::reject_nul_in(&[]).is_ok());
        assert!(WorkflowError::reject_nul_in(&[("a", "x"), ("b", "")]).is_ok());
        let refused = WorkflowError::reject_nul_in(&[("a", "x"), ("b", "\0"), ("c", "\0")]);
        assert!(matches!(refused, Err(WorkflowError::InvalidArgument { field: "b", .. })), "{refused:?}");
    }
}
