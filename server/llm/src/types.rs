//! Provider-neutral request and response types.
//!
//! These are deliberately smaller than any vendor API: workflows only need text messages, optional
//! structured output, optional tools and a few sampling knobs. Providers translate them to their wire
//! format, which keeps vendor types out of workflow code and out of persisted state.

use serde::{Deserialize, Serialize};

/// Who authored a message.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

/// One message of a conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ChatMessage {
    pub role: Role,
    pub content: String,
}

impl ChatMessage {
    /// A system (instruction) message.
    pub fn system(content: impl Into<String>) -> Self {
        Self { role: Role::System, content: content.into() }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self { role: Role::User, content: content.into() }
    }

    /// An assistant message, e.g. a previous model reply replayed as context.
    pub fn assistant(content: impl Into<String>) -> Self {
        Self { role: Role::Assistant, content: content.into() }
    }

    /// A tool result message.
    ///
    /// Providers that need a tool call id (OpenAI) send these as user messages, because this
    /// type carries no id; see [`crate::openai`].
    pub fn tool(content: impl Into<String>) -> Self {
        Self { role: Role::Tool, content: content.into() }
    }
}

/// A `response_format` of type `json_schema` (sent with `strict: true`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct JsonSchemaFormat {
    /// Schema name; providers accept `[a-zA-Z0-9_-]{1,64}`.
    pub name: String,
    /// Shared: one schema serves every call for its type or configuration.
    pub schema: std::sync::Arc<serde_json::Value>,
}

/// A function the model may call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// JSON schema of the arguments object.
    pub parameters: serde_json::Value,
}

/// A function call requested by the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    /// Arguments as the raw JSON text the model produced (it may be invalid JSON).
    pub arguments: String,
}

/// Who makes a call: the thread (conversation, ticket thread, investigation or research id),
/// the run and the node. Only call logs read it; providers never send it.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallContext {
    pub thread_id: String,
    pub run_id: String,
    pub node: String,
}

/// A chat completion request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ChatRequest {
    /// What the call is for, e.g. "supervisor.route"; used in logs, events and by scripted models.
    pub purpose: String,
    pub messages: Vec<ChatMessage>,
    pub response_format: Option<JsonSchemaFormat>,
    pub tools: Vec<ToolSpec>,
    pub temperature: Option<f32>,
    pub max_tokens: Option<u32>,
    /// Who makes the call, for call logs (workflows set it through `llm_node`); never sent to
    /// a provider, which translates only the fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CallContext>,
}

impl ChatRequest {
    /// A request with the given purpose and messages and no other options.
    pub fn new(purpose: impl Into<String>, messages: Vec<ChatMessage>) -> Self {
        Self { purpose: purpose.into(), messages, ..Self::default() }
    }
}

/// Token counts of one call (or the sum of several).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct TokenUsage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl TokenUsage {
    /// Prompt plus completion tokens.
    pub fn total(&self) -> u64 {
        self.prompt_tokens + self.completion_tokens
    }
}

impl std::ops::Add for TokenUsage {
    type Output = TokenUsage;

    fn add(self, rhs: TokenUsage) -> TokenUsage {
        TokenUsage {
            prompt_tokens: self.prompt_tokens + rhs.prompt_tokens,
            completion_tokens: self.completion_tokens + rhs.completion_tokens,
        }
    }
}

impl std::ops::AddAssign for TokenUsage {
    fn add_assign(&mut self, rhs: TokenUsage) {
        *self = *self + rhs;
    }
}

/// A model reply.
#[derive(Debug, Clone, PartialEq)]
pub struct ChatResponse {
    /// Text content; empty when the model only called tools.
    pub content: String,
    pub tool_calls: Vec<ToolCall>,
    pub usage: TokenUsage,
    /// The model that answered, as reported by the provider.
    pub model: String,
}
