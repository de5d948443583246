//! Structured log of finished LLM calls.

use std::time::Duration;

use crate::{ChatRequest, ChatResponse, LlmError, TokenUsage};

/// One finished call, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub purpose: String,
    /// The model that answered (or the configured model when the call failed).
    pub model: String,
    pub usage: TokenUsage,
    pub cost_usd: f64,
    /// Wall time including retries and backoff.
    pub latency: Duration,
    /// HTTP attempts made (including retries; structured output sums both calls).
    pub attempts: u32,
}

impl CallRecord {
    /// Folds a later call into this one (used when one logical call needed several requests).
    pub fn absorb(&mut self, other: &CallRecord) {
        self.model.clone_from(&other.model);
        self.usage += other.usage;
        self.cost_usd += other.cost_usd;
        self.latency += other.latency;
        self.attempts += other.attempts;
    }
}

/// Receives every call made through an [`crate::LlmClient`], successful or not.
pub trait CallLog: Send + Sync {
    fn record(
        &self,
        request: &ChatRequest,
        response: Option<&ChatResponse>,
        record: &CallRecord,
        error: Option<&LlmError>,
    );
}

/// The tracing target [`TracingCallLog`] writes to, so operators can route or silence it.
pub const CALL_LOG_TARGET: &str = "frontdesk::llm_calls";

/// A [`CallLog`] that emits one `info` event per call on target `frontdesk::llm_calls`.
///
/// Prompts may contain customer data, so by default (`full_prompts: false`) only the message count
/// and per-message character lengths are logged; set `full_prompts` for local debugging.
#[derive(Debug, Clone, Default)]
pub struct TracingCallLog {
    pub full_prompts: bool,
}

impl TracingCallLog {
    pub fn new(full_prompts: bool) -> Self {
        Self { full_prompts }
    }
}

impl CallLog for TracingCallLog {
    fn record(
        &self,
        request: &ChatRequest,
        response: Option<&ChatResponse>,
        record: &CallRecord,
        error: Option<&LlmError>,
    ) {
        let latency_ms = u64::try_from(record.latency.as_millis()).unwrap_or(u64::MAX);
        let error_kind = error.map(LlmError::kind).unwrap_or("");
        let error_message = error.map(ToString::to_string).unwrap_or_default();
        let tool_calls = response.map(|r| r.tool_calls.len()).unwrap_or(0);
        if self.full_prompts {
            let messages = serde_json::to_string(&request.messages).unwrap_or_default();
            let reply = response.map(|r| r.content.as_str()).unwrap_or("");
            tracing::info!(
                target: CALL_LOG_TARGET,
                purpose = %record.purpose,
                model = %record.model,
                prompt_tokens = record.usage.prompt_tokens,
                completion_tokens = record.usage.completion_tokens,
                cost_usd = record.cost_usd,
                latency_ms,
                attempts = record.attempts,
                ok = error.is_none(),
                error_kind,
                error = %error_message,
                tool_calls,
                messages = %messages,
                reply = %reply,
                "llm call"
            );
        } else {
            let message_chars: Vec<usize> = request.messages.iter().map(|m| m.content.chars().count()).collect();
            let reply_chars = response.map(|r| r.content.chars().count()).unwrap_or(0);
            tracing::info!(
                target: CALL_LOG_TARGET,
                purpose = %record.purpose,
                model = %record.model,
                prompt_tokens = record.usage.prompt_tokens,
                completion_tokens = record.usage.completion_tokens,
                cost_usd = record.cost_usd,
                latency_ms,
                attempts = record.attempts,
                ok = error.is_none(),
                error_kind,
                error = %error_message,
                tool_calls,
                message_count = request.messages.len(),
                message_chars = ?message_chars,
                reply_chars,
                "llm call"
            );
        }
    }
}
