//! The one mapping from domain errors to `tonic::Status`, with `google.rpc` details:
//! `ErrorInfo` (domain `frontdesk.dev`, a stable reason) always, `BadRequest` field violations
//! for invalid arguments, `RetryInfo` where retrying helps.

use std::{collections::HashMap, time::Duration};

use frontdesk_api::v1::ErrorReason;
use frontdesk_runtime::{CheckpointError, FailureKind, RunError};
use frontdesk_workflows::WorkflowError;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

pub const ERROR_DOMAIN: &str = "frontdesk.dev";

/// Status code, reason and retry advice for a failure kind. Shared by statuses and by
/// `RunFailed` events, so a stream's error event and its closing status always agree.
pub fn classify(kind: FailureKind) -> (Code, ErrorReason, Option<Duration>) {
    match kind {
        FailureKind::InvalidInput => (Code::InvalidArgument, ErrorReason::InvalidArgument, None),
        FailureKind::NotFound => (Code::NotFound, ErrorReason::NotFound, None),
        FailureKind::FailedPrecondition => (Code::FailedPrecondition, ErrorReason::InvalidArgument, None),
        FailureKind::ModelUnavailable => {
            (Code::Unavailable, ErrorReason::ModelUnavailable, Some(Duration::from_secs(5)))
        }
        // A fresh attempt may well produce valid output.
        FailureKind::ModelOutputInvalid => {
            (Code::Unavailable, ErrorReason::ModelOutputInvalid, Some(Duration::from_secs(1)))
        }
        FailureKind::DependencyFailed => {
            (Code::Unavailable, ErrorReason::DependencyFailed, Some(Duration::from_secs(5)))
        }
        FailureKind::DeadlineExceeded => (Code::DeadlineExceeded, ErrorReason::DeadlineExceeded, None),
        FailureKind::Cancelled => (Code::Cancelled, ErrorReason::Cancelled, None),
        FailureKind::StepLimit => (Code::Internal, ErrorReason::StepLimit, None),
        FailureKind::Conflict => (Code::Aborted, ErrorReason::CheckpointConflict, Some(Duration::from_millis(200))),
        FailureKind::StoreUnavailable => {
            (Code::Unavailable, ErrorReason::StoreUnavailable, Some(Duration::from_secs(1)))
        }
        FailureKind::Internal => (Code::Internal, ErrorReason::Internal, None),
    }
}

fn status(
    code: Code,
    reason: ErrorReason,
    message: String,
    retry: Option<Duration>,
    metadata: HashMap<String, String>,
) -> Status {
    let mut details = ErrorDetails::new();
    details.set_error_info(reason.as_str_name().trim_start_matches("ERROR_REASON_"), ERROR_DOMAIN, metadata);
    if retry.is_some() {
        details.set_retry_info(retry);
    }
    Status::with_error_details(code, message, details)
}

fn run_error_status(error: &RunError) -> Status {
    let message = error.to_string();
    let mut metadata = HashMap::new();
    let (code, reason, retry) = match error {
        RunError::ThreadBusy { thread_id } => {
            metadata.insert("conversation_id".into(), thread_id.clone());
            (Code::Aborted, ErrorReason::ThreadBusy, Some(Duration::from_millis(500)))
        }
        RunError::AlreadyExists { thread_id } => {
            metadata.insert("conversation_id".into(), thread_id.clone());
            (Code::AlreadyExists, ErrorReason::InvalidArgument, None)
        }
        RunError::NothingToResume { .. } | RunError::Interrupted { .. } => {
            (Code::FailedPrecondition, ErrorReason::InvalidArgument, None)
        }
        RunError::UnknownInterrupt { interrupt_id, .. } => {
            metadata.insert("interrupt_id".into(), interrupt_id.clone());
            (Code::NotFound, ErrorReason::NotFound, None)
        }
        RunError::InterruptAnswered { interrupt_id, .. } => {
            metadata.insert("interrupt_id".into(), interrupt_id.clone());
            (Code::FailedPrecondition, ErrorReason::InvalidArgument, None)
        }
        RunError::Node { node, .. } | RunError::NodeTimeout { node, .. } => {
            metadata.insert("node".into(), node.clone());
            classify(error.failure_kind())
        }
        RunError::NotFound { .. }
        | RunError::DeadlineExceeded
        | RunError::Cancelled
        | RunError::StepLimit { .. }
        | RunError::UndeclaredTarget { .. }
        | RunError::DuplicateInterrupt { .. }
        | RunError::Ephemeral { .. }
        | RunError::Checkpoint(_)
        | RunError::StateCodec { .. }
        | RunError::Lost => classify(error.failure_kind()),
    };
    status(code, reason, message, retry, metadata)
}

/// The one `WorkflowError` → `Status` mapping.
pub fn to_status(error: WorkflowError) -> Status {
    match &error {
        WorkflowError::InvalidArgument { field, reason } => {
            let mut details = ErrorDetails::new();
            details.add_bad_request_violation(*field, reason.clone());
            details.set_error_info(
                "INVALID_ARGUMENT",
                ERROR_DOMAIN,
                HashMap::from([("field".into(), field.to_string())]),
            );
            Status::with_error_details(Code::InvalidArgument, error.to_string(), details)
        }
        WorkflowError::NotFound { what, id } => status(
            Code::NotFound,
            ErrorReason::NotFound,
            error.to_string(),
            None,
            HashMap::from([("kind".into(), what.to_string()), ("id".into(), id.clone())]),
        ),
        WorkflowError::AlreadyExists { what, id } => status(
            Code::AlreadyExists,
            ErrorReason::InvalidArgument,
            error.to_string(),
            None,
            HashMap::from([("kind".into(), what.to_string()), ("id".into(), id.clone())]),
        ),
        WorkflowError::LimitExceeded { limit, max } => status(
            Code::ResourceExhausted,
            ErrorReason::LimitExceeded,
            error.to_string(),
            None,
            HashMap::from([("limit".into(), limit.to_string()), ("max".into(), max.to_string())]),
        ),
        WorkflowError::Run(run) => run_error_status(run),
        WorkflowError::Store(CheckpointError::Conflict { .. }) => {
            let (code, reason, retry) = classify(FailureKind::Conflict);
            status(code, reason, error.to_string(), retry, HashMap::new())
        }
        WorkflowError::Store(CheckpointError::Unavailable(_) | CheckpointError::Corrupt { .. }) => {
            tracing::error!(error = %error, source = ?std::error::Error::source(&error), "store failure");
            let (code, reason, retry) = classify(FailureKind::StoreUnavailable);
            status(code, reason, error.to_string(), retry, HashMap::new())
        }
        WorkflowError::Corrupt { .. } | WorkflowError::Config { .. } => {
            tracing::error!(error = %error, "internal failure");
            status(Code::Internal, ErrorReason::Internal, error.to_string(), None, HashMap::new())
        }
    }
}

/// An invalid request field found by a handler before it reaches a workflow.
pub fn invalid_argument(field: &'static str, reason: impl Into<String>) -> Status {
    to_status(WorkflowError::InvalidArgument { field, reason: reason.into() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn invalid_argument_carries_a_field_violation_and_reason() {
        let status = invalid_argument("text", "must not be empty");
        assert_eq!(status.code(), Code::InvalidArgument);
        let details = status.get_error_details();
        let violations = details.bad_request().unwrap().field_violations.clone();
        assert_eq!(violations[0].field, "text");
        assert_eq!(details.error_info().unwrap().reason, "INVALID_ARGUMENT");
        assert_eq!(details.error_info().unwrap().domain, ERROR_DOMAIN);
    }

    #[test]
    fn busy_thread_is_aborted_with_retry_info() {
        let status = to_status(WorkflowError::Run(RunError::ThreadBusy { thread_id: "c1".into() }));
        assert_eq!(status.code(), Code::Aborted);
        let details = status.get_error_details();
        assert_eq!(details.error_info().unwrap().reason, "THREAD_BUSY");
        assert!(details.retry_info().is_some());
    }
}
