//! The one error type of this crate.
//!
//! Variants are split by what a caller should do about them rather than by where they came from:
//! [`LlmError::is_retryable`] is the single place that decides which failures are worth another
//! attempt, and [`crate::LlmClient`] is the single place that retries.

use std::time::Duration;

use crate::TokenUsage;

/// A boxed error source, for variants that wrap foreign errors.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// Why an LLM call failed.
#[derive(Debug, thiserror::Error)]
pub enum LlmError {
    /// HTTP 429. `retry_after` comes from the `Retry-After` (or `retry-after-ms`) header.
    #[error("rate limited by the provider{}", fmt_retry_after(*.retry_after))]
    RateLimited { retry_after: Option<Duration> },

    /// HTTP 5xx.
    #[error("provider server error {status}: {message}")]
    Server { status: u16, message: String },

    /// The request timed out (connect, read or total).
    #[error("llm request timed out")]
    Timeout,

    /// The request never got an HTTP answer: connection refused, reset, DNS, TLS, broken stream.
    #[error("transport error: {0}")]
    Transport(#[source] BoxError),

    /// HTTP 4xx other than 429: the request itself is wrong, retrying cannot help. Also a reply
    /// the provider's content filter withheld, or one in which the model refused to answer
    /// (`message.refusal`; the message gives its length, not its text): `status` 200, the
    /// exchange itself succeeded, and `usage` holds what the provider reported for the reply.
    #[error("request rejected by the provider ({status}): {message}")]
    Rejected { status: u16, message: String, usage: Option<TokenUsage> },

    /// The body was not a valid chat completion, or its reply was cut short by `max_tokens`.
    /// `usage`: what the provider reported for a reply that arrived (see [`LlmError::usage`]).
    #[error("malformed provider response: {source}")]
    MalformedResponse { source: BoxError, usage: Option<TokenUsage> },

    /// Structured output still failed validation after the repair attempt.
    #[error("model output failed validation after {attempts} attempts: {error}")]
    InvalidOutput { attempts: u32, error: String, raw: String },

    /// The caller cancelled the call.
    #[error("llm call cancelled")]
    Cancelled,

    /// The prompt does not fit in the model's context window.
    #[error("prompt of {prompt_tokens} tokens exceeds the context limit of {limit}")]
    ContextTooLong { prompt_tokens: usize, limit: usize },

    /// Retries were used up (or the deadline left no room for another one).
    #[error("llm call failed after {attempts} attempts: {last}")]
    Exhausted {
        attempts: u32,
        #[source]
        last: Box<LlmError>,
    },

    /// A scripted test model had no reply left for this request.
    #[error("scripted model has no reply left for purpose {purpose:?}")]
    ScriptExhausted { purpose: String },

    /// Invalid configuration; also a script of the scripted model that does not fit the request
    /// (fields `scripted.*`), and a structured-output helper used on a request whose reply called
    /// tools (field [`crate::STRUCTURED_TOOL_CALLS`]): mistakes in the calling code, never retried.
    #[error("invalid llm configuration: {field}: {problem}")]
    Config { field: &'static str, problem: String },
}

fn fmt_retry_after(retry_after: Option<Duration>) -> String {
    match retry_after {
        Some(d) => format!(" (retry after {} ms)", d.as_millis()),
        None => String::new(),
    }
}

impl LlmError {
    /// A malformed response that reported no usage.
    pub fn malformed(source: impl Into<BoxError>) -> Self {
        LlmError::MalformedResponse { source: source.into(), usage: None }
    }

    /// The tokens the provider reported for a reply that arrived but could not be used (cut
    /// short, refused, withheld by the content filter): they were spent, and billed, all the
    /// same, so the call log records them. `None` when no reply arrived.
    pub fn usage(&self) -> Option<TokenUsage> {
        match self {
            LlmError::Rejected { usage, .. } | LlmError::MalformedResponse { usage, .. } => *usage,
            LlmError::Exhausted { last, .. } => last.usage(),
            _ => None,
        }
    }

    /// Whether another attempt may succeed: rate limits, 5xx, timeouts and transport failures.
    pub fn is_retryable(&self) -> bool {
        matches!(
            self,
            LlmError::RateLimited { .. } | LlmError::Server { .. } | LlmError::Timeout | LlmError::Transport(_)
        )
    }

    /// How long the provider asked us to wait before retrying, if it said so.
    pub fn retry_after(&self) -> Option<Duration> {
        match self {
            LlmError::RateLimited { retry_after } => *retry_after,
            LlmError::Exhausted { last, .. } => last.retry_after(),
            _ => None,
        }
    }

    /// A short stable name of the variant, for structured logs and metrics labels.
    pub fn kind(&self) -> &'static str {
        match self {
            LlmError::RateLimited { .. } => "rate_limited",
            LlmError::Server { .. } => "server",
            LlmError::Timeout => "timeout",
            LlmError::Transport(_) => "transport",
            LlmError::Rejected { .. } => "rejected",
            LlmError::MalformedResponse { .. } => "malformed_response",
            LlmError::InvalidOutput { .. } => "invalid_output",
            LlmError::Cancelled => "cancelled",
            LlmError::ContextTooLong { .. } => "context_too_long",
            LlmError::Exhausted { .. } => "exhausted",
            LlmError::ScriptExhausted { .. } => "script_exhausted",
            LlmError::Config { .. } => "config",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retryable_classification() {
        assert!(LlmError::RateLimited { retry_after: None }.is_retryable());
        assert!(LlmError::Server { status: 503, message: String::new() }.is_retryable());
        assert!(LlmError::Timeout.is_retryable());
        assert!(LlmError::Transport("refused".into()).is_retryable());
        assert!(!LlmError::Rejected { status: 400, message: String::new(), usage: None }.is_retryable());
        assert!(!LlmError::malformed("garbage").is_retryable());
        assert!(!LlmError::Cancelled.is_retryable());
        assert!(!LlmError::ScriptExhausted { purpose: "x".into() }.is_retryable());
        let exhausted = LlmError::Exhausted { attempts: 2, last: Box::new(LlmError::Timeout) };
        assert!(!exhausted.is_retryable());
    }

    #[test]
    fn usage_of_a_reply_that_arrived_is_exposed() {
        let usage = TokenUsage { prompt_tokens: 12, completion_tokens: 5 };
        let cut_short = LlmError::MalformedResponse { source: "cut short".into(), usage: Some(usage) };
        assert_eq!(cut_short.usage(), Some(usage));
        let refused = LlmError::Rejected { status: 200, message: "refused".into(), usage: Some(usage) };
        assert_eq!(refused.usage(), Some(usage));
        assert_eq!(LlmError::Exhausted { attempts: 1, last: Box::new(refused) }.usage(), Some(usage));
        assert_eq!(LlmError::malformed("garbage").usage(), None);
        assert_eq!(LlmError::Timeout.usage(), None);
    }

    #[test]
    fn retry_after_is_exposed() {
        let e = LlmError::RateLimited { retry_after: Some(Duration::from_secs(2)) };
        assert_eq!(e.retry_after(), Some(Duration::from_secs(2)));
        assert!(e.to_string().contains("2000 ms"));
        assert_eq!(LlmError::Timeout.retry_after(), None);
    }
}
