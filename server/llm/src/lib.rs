//! LLM access for Frontdesk workflows.
//!
//! * [`ChatModel`] is the provider trait: one attempt per call, no policy.
//! * [`LlmClient`] wraps a provider with what every call needs: retries with full-jitter backoff
//!   (honouring Retry-After, deadlines and cancellation), pricing, a structured call log, and
//!   schema-checked structured output with one repair attempt.
//! * Providers: [`openai::OpenAiProvider`] (OpenAI, Azure OpenAI and compatible servers, via
//!   async-openai), `local::LocalModel` (feature `local`: an embedded GGUF model run in-process on
//!   llama.cpp, for offline use) and [`scripted::ScriptedModel`], a test double.
//!
//! This crate knows nothing about gRPC, storage or the graph runtime.

mod calllog;
mod client;
mod error;
#[cfg(feature = "local")]
pub mod local;
mod model;
pub mod openai;
mod pricing;
mod retry;
mod schema;
pub mod scripted;
mod types;

pub use calllog::{
    error_text, prompt_json, response_json, CallFailure, CallLog, CallLogEntry, CallRecord, JsonLinesCallLog,
    TracingCallLog, CALL_LOG_TARGET,
};
pub use client::{CallOptions, LlmClient, OutputSchema, STRUCTURED_TOOL_CALLS};
pub use error::{BoxError, LlmError};
#[cfg(feature = "local")]
pub use local::{LocalConfig, LocalModel, LocalModelInfo, PromptCacheStats};
pub use model::ChatModel;

/// Prompts the embedded model keeps in its KV cache by default (`LocalConfig::cache_sequences`):
/// enough for the prompt families a workflow alternates between (the intake supervisor, the
/// elicitation agent, a chat agent, one more), at 72 MiB of KV cache each with 4096 tokens of
/// context. Defined outside the `local` feature so a configuration names it either way.
pub const DEFAULT_CACHE_SEQUENCES: u32 = 4;

/// Most prompts the embedded model's KV cache is configured to keep: each costs a whole context
/// of KV cache (llama.cpp itself allows 256 sequences).
pub const MAX_CACHE_SEQUENCES: u32 = 64;
pub use openai::{AzureConfig, OpenAiConfig, OpenAiProvider};
pub use pricing::{ModelPrice, PriceTable, OPENAI_LIST_PRICES_2025};
pub use retry::RetryPolicy;
pub use schema::{extract_json, schema_for, schema_name};
pub use scripted::{ScriptedFailure, ScriptedModel, ScriptedReply, ScriptedToolCall};
pub use types::{
    CallContext, ChatMessage, ChatRequest, ChatResponse, JsonSchemaFormat, Role, TokenUsage, ToolCall, ToolSpec,
};

/// Re-exported so callers can build [`CallOptions::cancel`] without naming tokio-util themselves.
pub use tokio_util::sync::CancellationToken;
