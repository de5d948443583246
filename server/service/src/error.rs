//! The one mapping from domain errors to `tonic::Status`, with `google.rpc` details:
//! `ErrorInfo` (domain `frontdesk.dev`, a stable reason) always, `BadRequest` field violations
//! for invalid arguments, `RetryInfo` where retrying helps.
//!
//! Every error picks its [`ErrorReason`]; its status code and retry advice come from the reason
//! alone ([`code_of`]), so two errors with one reason can never disagree on the code.

use std::{collections::HashMap, time::Duration};

use frontdesk_api::v1::ErrorReason;
use frontdesk_runtime::{CheckpointError, FailureKind, RunError};
use frontdesk_workflows::WorkflowError;
use tonic::{Code, Status};
use tonic_types::{ErrorDetails, StatusExt};

pub const ERROR_DOMAIN: &str = "frontdesk.dev";

/// The table: each reason's status code and retry advice. A match rather than a map so that a
/// reason added to the proto does not compile until it has its row here.
pub fn code_of(reason: ErrorReason) -> (Code, Option<Duration>) {
    match reason {
        ErrorReason::ThreadBusy => (Code::Aborted, Some(Duration::from_millis(500))),
        ErrorReason::CheckpointConflict => (Code::Aborted, Some(Duration::from_millis(200))),
        ErrorReason::NotFound => (Code::NotFound, None),
        ErrorReason::InvalidArgument => (Code::InvalidArgument, None),
        ErrorReason::LimitExceeded => (Code::ResourceExhausted, None),
        ErrorReason::ModelUnavailable => (Code::Unavailable, Some(Duration::from_secs(5))),
        // A fresh attempt may well produce valid output.
        ErrorReason::ModelOutputInvalid => (Code::Unavailable, Some(Duration::from_secs(1))),
        ErrorReason::DeadlineExceeded => (Code::DeadlineExceeded, None),
        ErrorReason::Cancelled => (Code::Cancelled, None),
        ErrorReason::StepLimit => (Code::Internal, None),
        ErrorReason::StoreUnavailable => (Code::Unavailable, Some(Duration::from_secs(1))),
        ErrorReason::IdempotencyMismatch => (Code::FailedPrecondition, None),
        ErrorReason::DependencyFailed => (Code::Unavailable, Some(Duration::from_secs(5))),
        ErrorReason::Internal => (Code::Internal, None),
        ErrorReason::AlreadyExists => (Code::AlreadyExists, None),
        ErrorReason::NothingToResume => (Code::FailedPrecondition, None),
        ErrorReason::InterruptPending => (Code::FailedPrecondition, None),
        ErrorReason::NotConversational => (Code::FailedPrecondition, None),
        ErrorReason::InterruptNotFound => (Code::NotFound, None),
        ErrorReason::InterruptAnswered => (Code::FailedPrecondition, None),
        ErrorReason::WrongResponder => (Code::PermissionDenied, None),
        ErrorReason::ConversationEnded => (Code::FailedPrecondition, None),
        ErrorReason::Unauthenticated => (Code::Unauthenticated, None),
        ErrorReason::ScopeMissing => (Code::PermissionDenied, None),
        // The quota's own wait replaces this one (`quota_exceeded`).
        ErrorReason::QuotaExceeded => (Code::ResourceExhausted, Some(Duration::from_secs(1))),
        // Soon enough for a load balancer to have moved the caller to another replica.
        ErrorReason::ShuttingDown => (Code::Unavailable, Some(Duration::from_secs(1))),
        // Never sent: every error picks a real reason.
        ErrorReason::Unspecified => (Code::Unknown, None),
    }
}

/// The reason as `ErrorInfo.reason` and `RunFailed.reason` carry it: the value name without
/// its prefix.
pub fn reason_name(reason: ErrorReason) -> &'static str {
    let name = reason.as_str_name();
    name.strip_prefix("ERROR_REASON_").unwrap_or(name)
}

/// The reason of a run failure known only by its kind (a `RunFailed` event).
fn reason_of(kind: FailureKind) -> ErrorReason {
    match kind {
        FailureKind::InvalidInput => ErrorReason::InvalidArgument,
        FailureKind::NotFound => ErrorReason::NotFound,
        // Only errors refused before a run starts have this kind, and `run_failure` gives each
        // its own reason; a run never fails with it.
        FailureKind::FailedPrecondition => ErrorReason::InterruptPending,
        FailureKind::ModelUnavailable => ErrorReason::ModelUnavailable,
        FailureKind::ModelOutputInvalid => ErrorReason::ModelOutputInvalid,
        FailureKind::DependencyFailed => ErrorReason::DependencyFailed,
        FailureKind::DeadlineExceeded => ErrorReason::DeadlineExceeded,
        FailureKind::Cancelled => ErrorReason::Cancelled,
        FailureKind::Stopped => ErrorReason::ShuttingDown,
        FailureKind::StepLimit => ErrorReason::StepLimit,
        FailureKind::Conflict => ErrorReason::CheckpointConflict,
        FailureKind::StoreUnavailable => ErrorReason::StoreUnavailable,
        FailureKind::Internal => ErrorReason::Internal,
    }
}

/// Status code, reason and retry advice for a failure kind. `RunFailed` events use it, and the
/// stream's closing status maps the same run error through `reason_of` and [`code_of`] too,
/// so the two always agree.
pub fn classify(kind: FailureKind) -> (Code, ErrorReason, Option<Duration>) {
    let reason = reason_of(kind);
    let (code, retry) = code_of(reason);
    (code, reason, retry)
}

/// One error, ready to become a status.
struct Failure {
    reason: ErrorReason,
    message: String,
    metadata: Vec<(&'static str, String)>,
    /// The offending request field and why, for `BadRequest`.
    violation: Option<(&'static str, String)>,
    /// A wait the runtime knows better than the reason's usual one (a takeover's lease remaining).
    retry_after: Option<Duration>,
}

impl Failure {
    fn new(reason: ErrorReason, message: String) -> Self {
        Failure { reason, message, metadata: Vec::new(), violation: None, retry_after: None }
    }

    fn with(mut self, key: &'static str, value: impl Into<String>) -> Self {
        self.metadata.push((key, value.into()));
        self
    }

    /// The entity an error is about: its kind (conversation, ticket, customer, workflow) and id.
    fn about(self, what: &str, id: &str) -> Self {
        self.with("kind", what).with("id", id)
    }

    fn into_status(self) -> Status {
        let Failure { reason, message, metadata, violation, retry_after } = self;
        let (code, usual_retry) = code_of(reason);
        let retry = retry_after.or(usual_retry);
        let mut details = ErrorDetails::new();
        if let Some((field, why)) = violation {
            details.add_bad_request_violation(field, why);
        }
        let metadata: HashMap<String, String> = metadata.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
        details.set_error_info(reason_name(reason), ERROR_DOMAIN, metadata);
        if retry.is_some() {
            details.set_retry_info(retry);
        }
        Status::with_error_details(code, message, details)
    }
}

/// A runner error. `subject` is the entity whose thread it concerns, as the workflow named it;
/// without one the thread id itself is reported, as kind `thread`.
fn run_failure(error: &RunError, subject: Option<(&str, &str)>, message: String) -> Failure {
    let about = |reason, thread_id: &str| {
        let (what, id) = subject.unwrap_or(("thread", thread_id));
        Failure::new(reason, message.clone()).about(what, id)
    };
    match error {
        RunError::NotFound { thread_id } => about(ErrorReason::NotFound, thread_id),
        RunError::AlreadyExists { thread_id } => about(ErrorReason::AlreadyExists, thread_id),
        RunError::ThreadBusy { thread_id, retry_after } => {
            Failure { retry_after: *retry_after, ..about(ErrorReason::ThreadBusy, thread_id) }
        }
        RunError::NothingToResume { thread_id } => about(ErrorReason::NothingToResume, thread_id),
        RunError::Interrupted { thread_id } => about(ErrorReason::InterruptPending, thread_id),
        RunError::UnknownInterrupt { thread_id, interrupt_id } => {
            about(ErrorReason::InterruptNotFound, thread_id).with("interrupt_id", interrupt_id.clone())
        }
        RunError::InterruptAnswered { thread_id, interrupt_id } => {
            about(ErrorReason::InterruptAnswered, thread_id).with("interrupt_id", interrupt_id.clone())
        }
        RunError::IdempotencyMismatch { thread_id, key } => {
            about(ErrorReason::IdempotencyMismatch, thread_id).with("idempotency_key", key.clone())
        }
        // Failures during a run: the reason of its `RunFailed` event.
        RunError::Node { node, .. } | RunError::NodeTimeout { node, .. } => {
            Failure::new(reason_of(error.failure_kind()), message).with("node", node.clone())
        }
        RunError::DeadlineExceeded
        | RunError::Cancelled
        | RunError::Stopped
        | RunError::StepLimit { .. }
        | RunError::UndeclaredTarget { .. }
        | RunError::DuplicateInterrupt { .. }
        | RunError::Ephemeral { .. }
        | RunError::Checkpoint(_)
        | RunError::StateCodec { .. }
        | RunError::OutputCodec { .. }
        | RunError::Lost => Failure::new(reason_of(error.failure_kind()), message),
        // A retry that attached to a run in flight fails as that run did.
        RunError::AttachedRunFailed { run_id, .. } => {
            Failure::new(reason_of(error.failure_kind()), message).with("run_id", run_id.clone())
        }
    }
}

fn failure(error: &WorkflowError) -> Failure {
    let message = error.to_string();
    match error {
        WorkflowError::InvalidArgument { field, reason } => Failure {
            violation: Some((field, reason.clone())),
            ..Failure::new(ErrorReason::InvalidArgument, message).with("field", *field)
        },
        WorkflowError::NotFound { what, id } => Failure::new(ErrorReason::NotFound, message).about(what, id),
        WorkflowError::AlreadyExists { what, id } => Failure::new(ErrorReason::AlreadyExists, message).about(what, id),
        WorkflowError::NotConversational { workflow } => {
            Failure::new(ErrorReason::NotConversational, message).with("workflow", workflow.clone())
        }
        WorkflowError::IdempotencyMismatch { what, id, key } => {
            Failure::new(ErrorReason::IdempotencyMismatch, message).about(what, id).with("idempotency_key", key.clone())
        }
        WorkflowError::LimitExceeded { limit, max } => {
            Failure::new(ErrorReason::LimitExceeded, message).with("limit", *limit).with("max", max.to_string())
        }
        WorkflowError::ConversationEnded { id } => {
            Failure::new(ErrorReason::ConversationEnded, message).about("conversation", id)
        }
        WorkflowError::WrongResponder { action_id, expected } => Failure::new(ErrorReason::WrongResponder, message)
            .with("action_id", action_id.clone())
            .with("expected", expected.clone()),
        WorkflowError::Thread { what, id, source } => run_failure(source, Some((what, id)), message),
        WorkflowError::Run(run) => run_failure(run, None, message),
        WorkflowError::Store(CheckpointError::Conflict { .. }) => {
            Failure::new(ErrorReason::CheckpointConflict, message)
        }
        WorkflowError::Store(CheckpointError::Unavailable(_) | CheckpointError::Corrupt { .. }) => {
            tracing::error!(error = %error, source = ?std::error::Error::source(error), "store failure");
            Failure::new(ErrorReason::StoreUnavailable, message)
        }
        WorkflowError::ShuttingDown => Failure::new(ErrorReason::ShuttingDown, message),
        WorkflowError::Corrupt { .. } | WorkflowError::Config { .. } => {
            tracing::error!(error = %error, "internal failure");
            Failure::new(ErrorReason::Internal, message)
        }
    }
}

/// The one `WorkflowError` → `Status` mapping.
pub fn to_status(error: WorkflowError) -> Status {
    failure(&error).into_status()
}

/// tonic's own refusal of a request over `limits.max_message_bytes` (`max_bytes`), reported as
/// every limit is: `RESOURCE_EXHAUSTED`, reason `LIMIT_EXCEEDED`, metadata `limit` and `max`.
/// tonic's decoder answers `OUT_OF_RANGE` with this message (no reason in the table has that
/// code); `None` for any other status. `tests/api.rs` sends an oversized request through a real
/// server, so a tonic that words it differently fails a test rather than a caller.
pub fn oversized_request(status: &Status, max_bytes: usize) -> Option<Status> {
    let decoder_limit =
        status.code() == Code::OutOfRange && status.message().starts_with("Error, decoded message length too large");
    decoder_limit
        .then(|| to_status(WorkflowError::LimitExceeded { limit: "request message bytes", max: max_bytes as u64 }))
}

/// An invalid request field found by a handler before it reaches a workflow.
pub fn invalid_argument(field: &'static str, reason: impl Into<String>) -> Status {
    to_status(WorkflowError::InvalidArgument { field, reason: reason.into() })
}

/// Why a call was refused before it reached a handler (the auth and quota layers).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessError {
    /// No `authorization: Bearer` metadata, or not a Frontdesk key.
    MissingKey,
    /// A well-formed key that is unknown or revoked.
    InvalidKey,
    /// The key table cannot be read (the database is down): the key is neither accepted nor
    /// refused.
    KeyTableUnavailable,
    /// The key's scopes do not include `scope` (such as `triage:write`).
    ScopeMissing { scope: String },
    /// The tenant is over `quota` (`requests_per_sec`, `max_concurrent_runs`); a retry after
    /// `retry_after` may pass.
    QuotaExceeded { tenant: String, quota: &'static str, limit: u32, retry_after: Duration },
}

/// The one `AccessError` → `Status` mapping. The messages name no key: a presented key is a
/// secret even when it is wrong.
pub fn access_status(error: AccessError) -> Status {
    match error {
        AccessError::MissingKey => Failure::new(
            ErrorReason::Unauthenticated,
            "this server needs an API key: send metadata `authorization: Bearer <key>`".into(),
        )
        .into_status(),
        AccessError::InvalidKey => {
            Failure::new(ErrorReason::Unauthenticated, "the API key is unknown or revoked".into()).into_status()
        }
        AccessError::KeyTableUnavailable => Failure::new(
            ErrorReason::StoreUnavailable,
            "cannot check the API key now: the key table cannot be read".into(),
        )
        .into_status(),
        AccessError::ScopeMissing { scope } => {
            Failure::new(ErrorReason::ScopeMissing, format!("the API key lacks scope {scope}"))
                .with("scope", scope)
                .into_status()
        }
        AccessError::QuotaExceeded { tenant, quota, limit, retry_after } => Failure {
            retry_after: Some(retry_after),
            ..Failure::new(ErrorReason::QuotaExceeded, format!("tenant {tenant} is over its quota {quota} ({limit})"))
                .with("quota", quota)
                .with("limit", limit.to_string())
        }
        .into_status(),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use frontdesk_runtime::{NodeError, NodeErrorKind, Target};

    use super::*;

    /// Asserts the status's code, its reason, that code and reason agree with the table, and
    /// exactly which metadata keys it carries.
    fn check(status: &Status, code: Code, reason: ErrorReason, keys: &[&str]) {
        assert_eq!(status.code(), code, "{status:?}");
        assert_eq!(code_of(reason).0, code, "the table gives {reason:?} another code");
        let details = status.get_error_details();
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, reason_name(reason));
        assert_eq!(info.domain, ERROR_DOMAIN);
        let got: BTreeSet<&str> = info.metadata.keys().map(String::as_str).collect();
        assert_eq!(got, keys.iter().copied().collect(), "metadata of {reason:?}");
        assert_eq!(details.retry_info().is_some(), code_of(reason).1.is_some(), "RetryInfo of {reason:?}");
    }

    fn node_failure(kind: NodeErrorKind) -> WorkflowError {
        WorkflowError::Run(RunError::Node { node: "supervisor".into(), source: NodeError::new(kind, "boom") })
    }

    fn every_reason() -> Vec<ErrorReason> {
        (0..).map_while(|n| ErrorReason::try_from(n).ok()).collect()
    }

    #[test]
    fn every_reason_has_its_own_row_and_the_proto_comment_names_its_code() {
        let proto = include_str!("../../../proto/frontdesk/v1/common.proto");
        let reasons = every_reason();
        assert!(reasons.len() > 20, "{reasons:?}");
        for reason in reasons.into_iter().filter(|r| *r != ErrorReason::Unspecified) {
            let (code, _) = code_of(reason);
            assert!(!matches!(code, Code::Ok | Code::Unknown), "{reason:?} is unmapped");
            // The comment block just above the value says the code, as "(ABORTED)" or "(UNAVAILABLE: ...".
            let line = proto.lines().position(|l| l.trim_start().starts_with(reason.as_str_name())).unwrap();
            let comment: String = proto
                .lines()
                .take(line)
                .collect::<Vec<_>>()
                .into_iter()
                .rev()
                .take_while(|l| l.trim_start().starts_with("//"))
                .collect::<Vec<_>>()
                .join(" ");
            let name = format!("{code:?}");
            let screaming = name.chars().fold(String::new(), |mut out, c| {
                if c.is_uppercase() && !out.is_empty() {
                    out.push('_');
                }
                out.push(c.to_ascii_uppercase());
                out
            });
            assert!(
                comment.contains(&format!("({screaming}")),
                "{reason:?}: comment {comment:?} does not say {screaming}"
            );
        }
    }

    #[test]
    fn a_run_failed_event_and_the_closing_status_agree() {
        let in_run = [
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::ModelUnavailable, "x") },
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::ModelOutputInvalid, "x") },
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::DependencyFailed, "x") },
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::InvalidInput, "x") },
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::Cancelled, "x") },
            RunError::Node { node: "n".into(), source: NodeError::new(NodeErrorKind::Internal, "x") },
            RunError::NodeTimeout { node: "n".into(), timeout: Duration::from_secs(1) },
            RunError::DeadlineExceeded,
            RunError::Cancelled,
            RunError::Stopped,
            RunError::StepLimit { limit: 3 },
            RunError::UndeclaredTarget { node: "n".into(), target: Target::End },
            RunError::Checkpoint(CheckpointError::Conflict { thread_id: "t".into(), expected: 1, actual: 2 }),
            RunError::Checkpoint(CheckpointError::Unavailable("down".into())),
            RunError::Lost,
        ];
        for error in in_run {
            let (code, reason, _) = classify(error.failure_kind());
            let status = to_status(WorkflowError::Thread { what: "conversation", id: "c1".into(), source: error });
            assert_eq!(status.code(), code, "{status:?}");
            assert_eq!(status.get_error_details().error_info().unwrap().reason, reason_name(reason));
        }
    }

    #[test]
    fn thread_busy() {
        let status = to_status(WorkflowError::Run(RunError::ThreadBusy { thread_id: "c1".into(), retry_after: None }));
        check(&status, Code::Aborted, ErrorReason::ThreadBusy, &["kind", "id"]);
        let info = status.get_error_details().error_info().unwrap().clone();
        assert_eq!((info.metadata["kind"].as_str(), info.metadata["id"].as_str()), ("thread", "c1"));
    }

    #[test]
    fn thread_busy_during_a_takeover_advises_the_lease_remaining() {
        let wait = Duration::from_millis(4_200);
        let busy = RunError::ThreadBusy { thread_id: "c1".into(), retry_after: Some(wait) };
        let status = to_status(WorkflowError::Run(busy));
        check(&status, Code::Aborted, ErrorReason::ThreadBusy, &["kind", "id"]);
        let retry = status.get_error_details().retry_info().unwrap().retry_delay;
        assert_eq!(retry, Some(wait), "RetryInfo says when the other replica's lease ends");
    }

    #[test]
    fn a_retry_attached_to_a_run_fails_as_that_run_did() {
        let failed = RunError::AttachedRunFailed {
            run_id: "r-1".into(),
            kind: FailureKind::ModelUnavailable,
            message: "model down".into(),
        };
        let status = to_status(WorkflowError::Run(failed));
        check(&status, Code::Unavailable, ErrorReason::ModelUnavailable, &["run_id"]);
    }

    #[test]
    fn thread_busy_names_the_workflows_entity_not_the_thread() {
        let busy = RunError::ThreadBusy { thread_id: "CUST-1:TKT-1".into(), retry_after: None };
        let status = to_status(WorkflowError::run_on("ticket", "TKT-1", busy));
        check(&status, Code::Aborted, ErrorReason::ThreadBusy, &["kind", "id"]);
        let info = status.get_error_details().error_info().unwrap().clone();
        assert_eq!((info.metadata["kind"].as_str(), info.metadata["id"].as_str()), ("ticket", "TKT-1"));
    }

    #[test]
    fn checkpoint_conflict() {
        let conflict = CheckpointError::Conflict { thread_id: "c1".into(), expected: 2, actual: 3 };
        check(&to_status(WorkflowError::Store(conflict)), Code::Aborted, ErrorReason::CheckpointConflict, &[]);
    }

    #[test]
    fn not_found() {
        let status = to_status(WorkflowError::NotFound { what: "conversation", id: "c1".into() });
        check(&status, Code::NotFound, ErrorReason::NotFound, &["kind", "id"]);
        let missing = WorkflowError::run_on("conversation", "c1", RunError::NotFound { thread_id: "c1".into() });
        check(&to_status(missing), Code::NotFound, ErrorReason::NotFound, &["kind", "id"]);
    }

    #[test]
    fn invalid_argument_carries_a_field_violation() {
        let status = invalid_argument("text", "must not be empty");
        check(&status, Code::InvalidArgument, ErrorReason::InvalidArgument, &["field"]);
        let violations = status.get_error_details().bad_request().unwrap().field_violations.clone();
        assert_eq!(violations[0].field, "text");
    }

    #[test]
    fn limit_exceeded() {
        let status = to_status(WorkflowError::LimitExceeded { limit: "turns per conversation", max: 5 });
        check(&status, Code::ResourceExhausted, ErrorReason::LimitExceeded, &["limit", "max"]);
    }

    #[test]
    fn refusals_before_the_handler_follow_the_table() {
        check(&access_status(AccessError::MissingKey), Code::Unauthenticated, ErrorReason::Unauthenticated, &[]);
        check(&access_status(AccessError::InvalidKey), Code::Unauthenticated, ErrorReason::Unauthenticated, &[]);
        let scope = AccessError::ScopeMissing { scope: "triage:write".into() };
        check(&access_status(scope), Code::PermissionDenied, ErrorReason::ScopeMissing, &["scope"]);
        // An outage of the key table is retried, not blamed on the key.
        let outage = access_status(AccessError::KeyTableUnavailable);
        check(&outage, Code::Unavailable, ErrorReason::StoreUnavailable, &[]);
        let quota = AccessError::QuotaExceeded {
            tenant: "acme".into(),
            quota: "requests_per_sec",
            limit: 2,
            retry_after: Duration::from_millis(300),
        };
        let status = access_status(quota);
        check(&status, Code::ResourceExhausted, ErrorReason::QuotaExceeded, &["quota", "limit"]);
        let retry = status.get_error_details().retry_info().and_then(|r| r.retry_delay).unwrap();
        assert_eq!(retry, Duration::from_millis(300), "the quota's own wait");
    }

    #[test]
    fn an_oversized_request_is_limit_exceeded() {
        let decoder = Status::out_of_range(
            "Error, decoded message length too large: found 2000000 bytes, the limit is: 1048576 bytes",
        );
        let status = oversized_request(&decoder, 1_048_576).expect("rewritten");
        check(&status, Code::ResourceExhausted, ErrorReason::LimitExceeded, &["limit", "max"]);
        assert_eq!(status.get_error_details().error_info().unwrap().metadata["max"], "1048576");
        assert!(oversized_request(&Status::out_of_range("something else"), 10).is_none());
        assert!(oversized_request(&Status::not_found("x"), 10).is_none());
    }

    #[test]
    fn model_unavailable() {
        let status = to_status(node_failure(NodeErrorKind::ModelUnavailable));
        check(&status, Code::Unavailable, ErrorReason::ModelUnavailable, &["node"]);
    }

    #[test]
    fn model_output_invalid() {
        let status = to_status(node_failure(NodeErrorKind::ModelOutputInvalid));
        check(&status, Code::Unavailable, ErrorReason::ModelOutputInvalid, &["node"]);
    }

    #[test]
    fn deadline_exceeded() {
        check(
            &to_status(RunError::DeadlineExceeded.into()),
            Code::DeadlineExceeded,
            ErrorReason::DeadlineExceeded,
            &[],
        );
        let timeout = RunError::NodeTimeout { node: "supervisor".into(), timeout: Duration::from_secs(1) };
        check(&to_status(timeout.into()), Code::DeadlineExceeded, ErrorReason::DeadlineExceeded, &["node"]);
    }

    #[test]
    fn cancelled() {
        check(&to_status(RunError::Cancelled.into()), Code::Cancelled, ErrorReason::Cancelled, &[]);
    }

    #[test]
    fn a_run_stopped_with_the_server_is_retried_not_cancelled() {
        check(&to_status(RunError::Stopped.into()), Code::Unavailable, ErrorReason::ShuttingDown, &[]);
        check(&to_status(WorkflowError::ShuttingDown), Code::Unavailable, ErrorReason::ShuttingDown, &[]);
    }

    #[test]
    fn step_limit() {
        check(&to_status(RunError::StepLimit { limit: 8 }.into()), Code::Internal, ErrorReason::StepLimit, &[]);
    }

    #[test]
    fn store_unavailable() {
        let down = WorkflowError::Store(CheckpointError::Unavailable("connection refused".into()));
        check(&to_status(down), Code::Unavailable, ErrorReason::StoreUnavailable, &[]);
    }

    #[test]
    fn idempotency_mismatch() {
        let keys = ["kind", "id", "idempotency_key"];
        let reused = RunError::IdempotencyMismatch { thread_id: "c1".into(), key: "turn-1".into() };
        let status = to_status(WorkflowError::run_on("conversation", "c1", reused));
        check(&status, Code::FailedPrecondition, ErrorReason::IdempotencyMismatch, &keys);
        let info = status.get_error_details().error_info().unwrap().clone();
        assert_eq!(info.metadata["idempotency_key"], "turn-1");
        let triage = WorkflowError::IdempotencyMismatch { what: "customer", id: "CUST-1".into(), key: "req-1".into() };
        check(&to_status(triage), Code::FailedPrecondition, ErrorReason::IdempotencyMismatch, &keys);
    }

    #[test]
    fn dependency_failed() {
        let status = to_status(node_failure(NodeErrorKind::DependencyFailed));
        check(&status, Code::Unavailable, ErrorReason::DependencyFailed, &["node"]);
    }

    #[test]
    fn internal() {
        let source = serde_json::from_str::<u32>("x").unwrap_err();
        let status = to_status(WorkflowError::Corrupt { id: "c1".into(), source });
        check(&status, Code::Internal, ErrorReason::Internal, &[]);
        check(&to_status(RunError::Lost.into()), Code::Internal, ErrorReason::Internal, &[]);
    }

    #[test]
    fn already_exists() {
        let status = to_status(WorkflowError::AlreadyExists { what: "ticket", id: "TKT-1".into() });
        check(&status, Code::AlreadyExists, ErrorReason::AlreadyExists, &["kind", "id"]);
        let clash = RunError::AlreadyExists { thread_id: "CUST-1:TKT-1".into() };
        let status = to_status(WorkflowError::run_on("ticket", "TKT-1", clash));
        check(&status, Code::AlreadyExists, ErrorReason::AlreadyExists, &["kind", "id"]);
    }

    #[test]
    fn nothing_to_resume() {
        let error = WorkflowError::run_on("conversation", "c1", RunError::NothingToResume { thread_id: "c1".into() });
        check(&to_status(error), Code::FailedPrecondition, ErrorReason::NothingToResume, &["kind", "id"]);
    }

    #[test]
    fn interrupt_pending() {
        let error = WorkflowError::run_on("conversation", "c1", RunError::Interrupted { thread_id: "c1".into() });
        check(&to_status(error), Code::FailedPrecondition, ErrorReason::InterruptPending, &["kind", "id"]);
    }

    #[test]
    fn not_conversational() {
        let status = to_status(WorkflowError::NotConversational { workflow: "triage".into() });
        check(&status, Code::FailedPrecondition, ErrorReason::NotConversational, &["workflow"]);
    }

    #[test]
    fn interrupt_not_found() {
        let error = RunError::UnknownInterrupt { thread_id: "inv-1".into(), interrupt_id: "approve-9".into() };
        let status = to_status(WorkflowError::run_on("investigation", "inv-1", error));
        check(&status, Code::NotFound, ErrorReason::InterruptNotFound, &["kind", "id", "interrupt_id"]);
    }

    #[test]
    fn interrupt_answered() {
        let error = RunError::InterruptAnswered { thread_id: "inv-1".into(), interrupt_id: "approve-1".into() };
        let status = to_status(WorkflowError::run_on("investigation", "inv-1", error));
        check(&status, Code::FailedPrecondition, ErrorReason::InterruptAnswered, &["kind", "id", "interrupt_id"]);
    }

    #[test]
    fn conversation_ended() {
        let status = to_status(WorkflowError::ConversationEnded { id: "conv-1".into() });
        check(&status, Code::FailedPrecondition, ErrorReason::ConversationEnded, &["kind", "id"]);
    }

    #[test]
    fn wrong_responder() {
        let status = to_status(WorkflowError::WrongResponder {
            action_id: "INV-1-manager".into(),
            expected: "manager u001".into(),
        });
        check(&status, Code::PermissionDenied, ErrorReason::WrongResponder, &["action_id", "expected"]);
    }
}
