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
    /// A configured limit was reached.
    #[error("limit exceeded: {limit} (at most {max})")]
    LimitExceeded { limit: &'static str, max: u64 },
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
