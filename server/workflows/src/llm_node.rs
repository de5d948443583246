//! Calling models from nodes: deadlines and cancellation from the run, token deltas and call
//! records streamed as run events, who made each call recorded for the call logs, and model
//! failures mapped to node errors in one place.

use frontdesk_llm::{CallContext, CallFailure, CallOptions, CallRecord, ChatRequest, LlmClient, LlmError};
use frontdesk_runtime::{EventKind, LlmCallInfo, NodeContext, NodeError, NodeErrorKind, Usage};

fn call_info(record: &CallRecord, error: Option<&LlmError>) -> LlmCallInfo {
    LlmCallInfo {
        model: record.model.clone(),
        purpose: record.purpose.clone(),
        usage: Usage {
            prompt_tokens: record.usage.prompt_tokens,
            completion_tokens: record.usage.completion_tokens,
            cost_usd: record.cost_usd,
        },
        latency: record.latency,
        attempts: record.attempts,
        error: error.map(LlmError::to_string),
    }
}

/// The one mapping from model failures to node failures.
pub fn node_error(purpose: &str, error: LlmError) -> NodeError {
    let kind = match &error {
        LlmError::Cancelled => NodeErrorKind::Cancelled,
        LlmError::InvalidOutput { .. } | LlmError::MalformedResponse { .. } => NodeErrorKind::ModelOutputInvalid,
        LlmError::ContextTooLong { .. } => NodeErrorKind::InvalidInput,
        LlmError::RateLimited { .. }
        | LlmError::Server { .. }
        | LlmError::Timeout
        | LlmError::Transport(_)
        | LlmError::Exhausted { .. } => NodeErrorKind::ModelUnavailable,
        // The provider refused the request itself (a bad key, no quota left, a request it does
        // not accept, its content filter): the same request fails the same way, so it is not a
        // transient unavailability to retry, by the node's policy or by a caller, but one for an
        // operator (INTERNAL, the message naming the refusal).
        LlmError::Rejected { .. } | LlmError::ScriptExhausted { .. } | LlmError::Config { .. } => {
            NodeErrorKind::Internal
        }
    };
    let message = format!("model call {purpose} failed: {error}");
    NodeError::with_source(kind, message, error)
}

/// The request stamped with who makes it: the thread, run and node of `ctx`, so that call logs
/// (the SQL log queried by `ListLlmCalls`, the JSON lines file) file the call under its
/// conversation. Every model call a node makes goes through here: directly, or through the
/// helpers of this module and of `tool_loop`.
pub fn attributed(ctx: &NodeContext, mut request: ChatRequest) -> ChatRequest {
    request.context = Some(CallContext {
        thread_id: ctx.thread_id().to_owned(),
        run_id: ctx.run_id().to_owned(),
        node: ctx.node().to_owned(),
    });
    request
}

/// The run's deadline and cancellation, for a call that does not stream.
pub fn call_options(ctx: &NodeContext) -> CallOptions<'_> {
    CallOptions { deadline: ctx.deadline(), cancel: Some(ctx.cancellation()), on_delta: None }
}

/// Reports a finished model call as a run event.
pub async fn record_call(ctx: &NodeContext, record: &CallRecord) {
    ctx.emit(EventKind::LlmCall(call_info(record, None))).await;
}

/// Reports a model call that failed as a run event, with what its replies cost, and gives the
/// error back for the node to map or handle. Every failed call a node sees goes through here
/// (or [`reported`]), so the run's usage counts the replies it was billed for.
pub async fn record_failure(ctx: &NodeContext, failure: CallFailure) -> LlmError {
    let CallFailure { error, record } = failure;
    ctx.emit(EventKind::LlmCall(call_info(&record, Some(&error)))).await;
    error
}

/// Reports the call as a run event, failed or not, and maps a failure to the node's error.
pub async fn reported<T>(ctx: &NodeContext, outcome: Result<(T, CallRecord), CallFailure>) -> Result<T, NodeError> {
    match outcome {
        Ok((value, record)) => {
            record_call(ctx, &record).await;
            Ok(value)
        }
        Err(failure) => {
            let purpose = failure.record.purpose.clone();
            Err(node_error(&purpose, record_failure(ctx, failure).await))
        }
    }
}

/// A structured call whose reply must deserialize into `T` (one repair attempt included).
pub async fn structured<T>(ctx: &NodeContext, llm: &LlmClient, request: ChatRequest) -> Result<T, NodeError>
where
    T: serde::de::DeserializeOwned + schemars::JsonSchema + 'static,
{
    reported(ctx, llm.structured::<T>(attributed(ctx, request), &call_options(ctx)).await).await
}

/// A free-text call whose tokens stream to the caller as they are generated.
pub async fn streamed_text(ctx: &NodeContext, llm: &LlmClient, request: ChatRequest) -> Result<String, NodeError> {
    let on_delta = |text: &str| ctx.try_emit(EventKind::TokenDelta { text: text.to_owned() });
    let opts = CallOptions { deadline: ctx.deadline(), cancel: Some(ctx.cancellation()), on_delta: Some(&on_delta) };
    let response = reported(ctx, llm.complete(attributed(ctx, request), &opts).await).await?;
    Ok(response.content.trim().to_owned())
}

#[cfg(test)]
mod tests {
    use frontdesk_llm::LlmError;
    use frontdesk_runtime::{NodeErrorKind, RetryPolicy};

    use super::node_error;

    /// What retrying can mend is `ModelUnavailable` (retried by the default policy and answered
    /// `UNAVAILABLE`); a refusal of the request itself is not.
    #[test]
    fn a_refused_request_is_not_an_unavailable_model() {
        let kind = |error| node_error("p.q", error).kind;
        let refusals = [
            LlmError::Rejected { status: 401, message: "invalid api key".into(), usage: None },
            LlmError::Rejected { status: 429, message: "insufficient_quota".into(), usage: None },
            LlmError::Rejected { status: 200, message: "content filter".into(), usage: None },
        ];
        for refusal in refusals {
            assert_eq!(kind(refusal), NodeErrorKind::Internal);
        }
        assert!(!RetryPolicy::default().retry_on.contains(&NodeErrorKind::Internal));
        assert_eq!(kind(LlmError::Timeout), NodeErrorKind::ModelUnavailable);
        let exhausted = LlmError::Exhausted {
            attempts: 4,
            last: Box::new(LlmError::Server { status: 503, message: String::new() }),
        };
        assert_eq!(kind(exhausted), NodeErrorKind::ModelUnavailable);
    }
}
