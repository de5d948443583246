//! OpenAI-compatible chat completions provider, built on `async-openai`.
//!
//! Works with OpenAI, Azure OpenAI (deployment URL + `api-version` query + `api-key` header) and any
//! server speaking the chat completions API at a custom base URL (vLLM, Ollama, llama.cpp server).
//!
//! # HTTP transport
//!
//! `async-openai` builds the requests and decodes the responses (its request/response types and
//! config are used throughout), but the HTTP round trip goes through our own tower service,
//! installed with `Client::with_http_service` (the crate's `middleware` feature). This does two things:
//!
//! * it **replaces async-openai's built-in retry layer** (the default executor wraps every request in
//!   `OpenAIRetryLayer`), so the only retries are [`crate::LlmClient`]'s, which honour deadlines,
//!   cancellation and our backoff policy;
//! * it **sees the response head of failed requests**: async-openai turns a non-2xx response into an
//!   `ApiError` without its headers, so `Retry-After` would be lost. Our service intercepts non-2xx
//!   responses, reads `Retry-After` / `retry-after-ms` and the body, and returns a typed
//!   [`HttpStatusError`] (as `OpenAIError::Boxed`) that [`map_openai_error`] turns into the precise
//!   [`LlmError`] variant.
//!
//! # Decoding replies
//!
//! Replies are decoded into this module's own types (`Completion`, `CompletionChunk`, through
//! async-openai's `byot` methods) that hold only the fields read here, reusing async-openai's types
//! for the message, the streamed delta and the usage. Only `finish_reason` is decoded differently:
//! OpenAI-compatible servers send values outside async-openai's enum (`eos`, `abort`, ...), which
//! with async-openai's own response types fail the whole reply. Such a value is taken as a normal
//! end, like a missing one, and logged (`warn` the first time a provider sees it, `debug` after).
//!
//! # Timeouts
//!
//! `request_timeout` bounds connecting, each read of the body, and the whole of a non-streaming
//! call. For streaming it bounds the wait for the response head and for each event, not the whole
//! stream, so long generations are not cut off while they are still producing tokens.
//!
//! # Limitations
//!
//! [`crate::ChatMessage`] carries no tool call id, so [`crate::Role::Tool`] messages are sent as user
//! messages prefixed with "Tool result:" (the API rejects tool messages without a matching call id).
//! `max_tokens` is sent as `max_tokens`, which every compatible server understands.

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use async_openai::config::{AzureConfig as OaiAzureConfig, Config, OpenAIConfig};
use async_openai::error::OpenAIError;
use async_openai::middleware::HttpRequestFactory;
use async_openai::types::chat::{
    ChatCompletionMessageToolCalls, ChatCompletionRequestAssistantMessage,
    ChatCompletionRequestAssistantMessageContent, ChatCompletionRequestMessage, ChatCompletionRequestSystemMessage,
    ChatCompletionRequestSystemMessageContent, ChatCompletionRequestUserMessage,
    ChatCompletionRequestUserMessageContent, ChatCompletionResponseMessage, ChatCompletionStreamOptions,
    ChatCompletionStreamResponseDelta, ChatCompletionTool, ChatCompletionTools, CompletionUsage,
    CreateChatCompletionRequest, FinishReason, FunctionObject, ResponseFormat, ResponseFormatJsonSchema,
};
use async_openai::Client;
use async_trait::async_trait;
use futures::StreamExt;
use serde::Deserialize;

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, Role, TokenUsage, ToolCall};

/// Azure OpenAI deployment settings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AzureConfig {
    /// Resource endpoint, e.g. `https://my-resource.openai.azure.com`.
    pub endpoint: String,
    /// Deployment name; requests go to `{endpoint}/openai/deployments/{deployment}/chat/completions`.
    pub deployment: String,
    /// Sent as the `api-version` query parameter, e.g. `2024-10-21`.
    pub api_version: String,
}

/// Provider configuration.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// API base including the version path, e.g. `https://api.openai.com/v1` or
    /// `http://localhost:11434/v1`. `None`: `OPENAI_BASE_URL` or the OpenAI default. Ignored for Azure.
    pub base_url: Option<String>,
    /// `None`: `OPENAI_API_KEY` from the environment (empty if unset, fine for local servers).
    pub api_key: Option<String>,
    /// Model name sent with every request (for Azure, informational: the deployment decides).
    pub model: String,
    /// Use Azure OpenAI instead of `base_url`.
    pub azure: Option<AzureConfig>,
    /// See the module docs.
    pub request_timeout: Duration,
}

impl Default for OpenAiConfig {
    fn default() -> Self {
        Self {
            base_url: None,
            api_key: None,
            model: String::new(),
            azure: None,
            request_timeout: Duration::from_secs(120),
        }
    }
}

/// Never prints the API key.
impl std::fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "<redacted>"))
            .field("model", &self.model)
            .field("azure", &self.azure)
            .field("request_timeout", &self.request_timeout)
            .finish()
    }
}

/// Chat completions through async-openai; see the module docs.
pub struct OpenAiProvider {
    client: Client<Box<dyn Config>>,
    model: String,
    endpoint: String,
    azure: bool,
    request_timeout: Duration,
    /// `finish_reason` values outside async-openai's enum already warned about (see the module docs).
    unknown_finish_reasons: Mutex<HashSet<String>>,
}

/// Never prints the API key.
impl std::fmt::Debug for OpenAiProvider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OpenAiProvider")
            .field("model", &self.model)
            .field("endpoint", &self.endpoint)
            .field("azure", &self.azure)
            .field("request_timeout", &self.request_timeout)
            .finish_non_exhaustive()
    }
}

impl OpenAiProvider {
    /// Validates `config` and builds the HTTP client. Makes no network call.
    pub fn new(config: OpenAiConfig) -> Result<Self, LlmError> {
        if config.model.trim().is_empty() {
            return Err(LlmError::Config { field: "model", problem: "must not be empty".to_owned() });
        }
        if config.request_timeout.is_zero() {
            return Err(LlmError::Config { field: "request_timeout", problem: "must be positive".to_owned() });
        }
        let (api_config, endpoint): (Box<dyn Config>, String) = match &config.azure {
            Some(azure) => {
                for (field, value) in [
                    ("azure.endpoint", &azure.endpoint),
                    ("azure.deployment", &azure.deployment),
                    ("azure.api_version", &azure.api_version),
                ] {
                    if value.trim().is_empty() {
                        return Err(LlmError::Config { field, problem: "must not be empty".to_owned() });
                    }
                }
                check_url("azure.endpoint", &azure.endpoint)?;
                let endpoint = azure.endpoint.trim_end_matches('/').to_owned();
                let mut c = OaiAzureConfig::new()
                    .with_api_base(endpoint.clone())
                    .with_deployment_id(azure.deployment.clone())
                    .with_api_version(azure.api_version.clone());
                if let Some(key) = &config.api_key {
                    c = c.with_api_key(key.clone());
                }
                (Box::new(c), endpoint)
            }
            None => {
                let mut c = OpenAIConfig::new();
                if let Some(base) = &config.base_url {
                    check_url("base_url", base)?;
                    c = c.with_api_base(base.trim_end_matches('/'));
                }
                if let Some(key) = &config.api_key {
                    c = c.with_api_key(key.clone());
                }
                let endpoint = c.api_base().to_owned();
                (Box::new(c), endpoint)
            }
        };
        let http = reqwest::Client::builder()
            .connect_timeout(config.request_timeout)
            .read_timeout(config.request_timeout)
            .build()
            .map_err(|e| LlmError::Config { field: "http_client", problem: e.to_string() })?;
        let client = Client::with_config(api_config)
            // Requests are built with this client (so its timeouts apply) ...
            .with_http_client(http.clone())
            // ... and sent by our service, which replaces async-openai's retrying executor.
            .with_http_service(HttpService { client: http });
        tracing::debug!(model = %config.model, endpoint = %endpoint, azure = config.azure.is_some(), "openai provider configured");
        Ok(Self {
            client,
            model: config.model,
            endpoint,
            azure: config.azure.is_some(),
            request_timeout: config.request_timeout,
            unknown_finish_reasons: Mutex::new(HashSet::new()),
        })
    }

    /// The API base requests go to (without the key).
    pub fn endpoint(&self) -> &str {
        &self.endpoint
    }

    fn build_request(&self, request: &ChatRequest, stream: bool) -> CreateChatCompletionRequest {
        let messages = request.messages.iter().map(to_openai_message).collect();
        let tools = (!request.tools.is_empty()).then(|| {
            request
                .tools
                .iter()
                .map(|t| {
                    ChatCompletionTools::Function(ChatCompletionTool {
                        function: FunctionObject {
                            name: t.name.clone(),
                            description: Some(t.description.clone()),
                            parameters: Some(t.parameters.clone()),
                            strict: None,
                        },
                    })
                })
                .collect()
        });
        let response_format = request.response_format.as_ref().map(|f| ResponseFormat::JsonSchema {
            json_schema: ResponseFormatJsonSchema {
                description: None,
                name: f.name.clone(),
                schema: strict_schema(serde_json::Value::clone(&f.schema)),
                strict: Some(true),
            },
        });
        #[allow(deprecated)] // `max_tokens` is what every compatible server understands.
        CreateChatCompletionRequest {
            model: self.model.clone(),
            messages,
            tools,
            response_format,
            temperature: request.temperature,
            max_tokens: request.max_tokens,
            stream: stream.then_some(true),
            stream_options: stream
                .then_some(ChatCompletionStreamOptions { include_usage: Some(true), include_obfuscation: None }),
            ..CreateChatCompletionRequest::default()
        }
    }

    fn convert_response(&self, purpose: &str, response: Completion) -> Result<ChatResponse, LlmError> {
        let choice =
            response.choices.into_iter().next().ok_or_else(|| LlmError::malformed("chat completion has no choices"))?;
        let usage = response.usage.as_ref().map(to_usage);
        let message = choice.message;
        check_refusal(message.refusal.as_deref(), usage)?;
        check_finish_reason(self.known_finish_reason(purpose, choice.finish_reason), usage)?;
        let content = message.content.unwrap_or_default();
        let tool_calls = message
            .tool_calls
            .unwrap_or_default()
            .into_iter()
            .filter_map(|call| match call {
                ChatCompletionMessageToolCalls::Function(f) => {
                    Some(ToolCall { id: f.id, name: f.function.name, arguments: f.function.arguments })
                }
                ChatCompletionMessageToolCalls::Custom(_) => None,
            })
            .collect();
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: usage.unwrap_or_default(),
            model: if response.model.is_empty() { self.model.clone() } else { response.model },
        })
    }

    /// The reason as async-openai knows it; a value it does not know is logged and taken as a
    /// normal end (`None`), see the module docs.
    fn known_finish_reason(&self, purpose: &str, reason: Option<WireFinishReason>) -> Option<FinishReason> {
        match reason? {
            WireFinishReason::Known(reason) => Some(reason),
            WireFinishReason::Other(value) => {
                if self.first_sighting(&value) {
                    tracing::warn!(
                        purpose,
                        model = %self.model,
                        finish_reason = %value,
                        "unknown finish_reason from the provider, reply taken as complete"
                    );
                } else {
                    tracing::debug!(
                        purpose,
                        model = %self.model,
                        finish_reason = %value,
                        "unknown finish_reason from the provider, reply taken as complete"
                    );
                }
                None
            }
        }
    }

    /// Whether `value` is new to this provider: a server that sends it on every reply is worth
    /// one warning, not one per call. The set is bounded, as the values come from the server.
    fn first_sighting(&self, value: &str) -> bool {
        let mut seen = self.unknown_finish_reasons.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.contains(value) || seen.len() >= MAX_UNKNOWN_FINISH_REASONS {
            return false;
        }
        seen.insert(value.to_owned())
    }
}

/// Distinct unknown `finish_reason` values a provider warns about; later ones are logged at `debug`.
const MAX_UNKNOWN_FINISH_REASONS: usize = 16;

/// A chat completion: the fields of async-openai's `CreateChatCompletionResponse` read here, with
/// a lenient `finish_reason`.
#[derive(Debug, Deserialize)]
struct Completion {
    choices: Vec<CompletionChoice>,
    model: String,
    usage: Option<CompletionUsage>,
}

#[derive(Debug, Deserialize)]
struct CompletionChoice {
    message: ChatCompletionResponseMessage,
    finish_reason: Option<WireFinishReason>,
}

/// A streamed chunk: the fields of async-openai's `CreateChatCompletionStreamResponse` read here,
/// with a lenient `finish_reason`.
#[derive(Debug, Deserialize)]
struct CompletionChunk {
    choices: Vec<ChunkChoice>,
    model: String,
    usage: Option<CompletionUsage>,
}

#[derive(Debug, Deserialize)]
struct ChunkChoice {
    index: u32,
    delta: ChatCompletionStreamResponseDelta,
    finish_reason: Option<WireFinishReason>,
}

/// A `finish_reason` as a compatible server may send it: one of OpenAI's, or any other string.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(untagged)]
enum WireFinishReason {
    Known(FinishReason),
    Other(String),
}

fn check_url(field: &'static str, url: &str) -> Result<(), LlmError> {
    if url.starts_with("http://") || url.starts_with("https://") {
        Ok(())
    } else {
        Err(LlmError::Config { field, problem: format!("{url:?} is not an http(s) URL") })
    }
}

fn to_openai_message(message: &crate::ChatMessage) -> ChatCompletionRequestMessage {
    let text = message.content.clone();
    match message.role {
        Role::System => ChatCompletionRequestMessage::System(ChatCompletionRequestSystemMessage {
            content: ChatCompletionRequestSystemMessageContent::Text(text),
            name: None,
        }),
        Role::User => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(text),
            name: None,
        }),
        Role::Assistant => ChatCompletionRequestMessage::Assistant(ChatCompletionRequestAssistantMessage {
            content: Some(ChatCompletionRequestAssistantMessageContent::Text(text)),
            ..ChatCompletionRequestAssistantMessage::default()
        }),
        Role::Tool => ChatCompletionRequestMessage::User(ChatCompletionRequestUserMessage {
            content: ChatCompletionRequestUserMessageContent::Text(format!("Tool result:\n{text}")),
            name: None,
        }),
    }
}

/// A reply that did not end on its own is not the model's answer, though it reads like one: text
/// cut off by `max_tokens` (a half-written JSON object, a sentence missing its end) or withheld by
/// the provider's content filter. Neither is transient, so neither is retryable: the same request
/// gets the same budget and the same filter. A missing reason (some compatible servers omit it)
/// is taken as a normal end. Either error carries the reply's `usage`: its tokens were spent.
fn check_finish_reason(reason: Option<FinishReason>, usage: Option<TokenUsage>) -> Result<(), LlmError> {
    match reason {
        // Same kind as the embedded model's reply cut short by `max_tokens`.
        Some(FinishReason::Length) => Err(LlmError::MalformedResponse {
            source: format!(
                "the reply was cut short by max_tokens (finish_reason \"length\", {} completion tokens)",
                usage.unwrap_or_default().completion_tokens
            )
            .into(),
            usage,
        }),
        // The HTTP exchange succeeded (200); what was refused is the reply.
        Some(FinishReason::ContentFilter) => Err(LlmError::Rejected {
            status: 200,
            message: "the provider's content filter withheld the reply (finish_reason \"content_filter\")".to_owned(),
            usage,
        }),
        Some(FinishReason::Stop | FinishReason::ToolCalls | FinishReason::FunctionCall) | None => Ok(()),
    }
}

/// A refusal is the model declining to answer, not an answer: returned as content it would reach
/// the customer, or a structured call's parser, as if the model had replied. Not retryable, like
/// the content filter: the same request gets the same refusal. The refusal's text stays out of
/// the error, as the withheld reply of the content filter does: it is the model's words (which
/// can quote the customer), and the error is shown unredacted (node errors, gRPC messages, logs).
/// An empty refusal, which some compatible servers send beside the content, is none.
fn check_refusal(refusal: Option<&str>, usage: Option<TokenUsage>) -> Result<(), LlmError> {
    match refusal.filter(|text| !text.trim().is_empty()) {
        Some(text) => Err(LlmError::Rejected {
            status: 200,
            message: format!("the model refused to answer (message.refusal, {} chars)", text.chars().count()),
            usage,
        }),
        None => Ok(()),
    }
}

fn to_usage(usage: &CompletionUsage) -> TokenUsage {
    TokenUsage { prompt_tokens: u64::from(usage.prompt_tokens), completion_tokens: u64::from(usage.completion_tokens) }
}

/// Tool call fragments of a stream, merged by index.
#[derive(Default)]
struct ToolCallParts {
    id: String,
    name: String,
    arguments: String,
}

#[async_trait]
impl ChatModel for OpenAiProvider {
    fn model_name(&self) -> &str {
        &self.model
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let body = self.build_request(request, false);
        tracing::debug!(purpose = %request.purpose, model = %self.model, "sending chat completion");
        let chat = self.client.chat();
        let response: Completion = tokio::time::timeout(self.request_timeout, chat.create_byot(body))
            .await
            .map_err(|_| LlmError::Timeout)?
            .map_err(map_openai_error)?;
        self.convert_response(&request.purpose, response)
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_delta: &(dyn for<'d> Fn(&'d str) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        let body = self.build_request(request, true);
        tracing::debug!(purpose = %request.purpose, model = %self.model, "sending streaming chat completion");
        let chat = self.client.chat();
        let mut stream =
            tokio::time::timeout(self.request_timeout, chat.create_stream_byot::<_, CompletionChunk>(body))
                .await
                .map_err(|_| LlmError::Timeout)?
                .map_err(map_openai_error)?;
        let mut content = String::new();
        let mut usage = None;
        let mut model = String::new();
        let mut tool_parts: Vec<ToolCallParts> = Vec::new();
        let mut finish_reason = None;
        let mut refusal = String::new();
        loop {
            let next =
                tokio::time::timeout(self.request_timeout, stream.next()).await.map_err(|_| LlmError::Timeout)?;
            let Some(chunk) = next else { break };
            let chunk = chunk.map_err(map_openai_error)?;
            if model.is_empty() && !chunk.model.is_empty() {
                model = chunk.model;
            }
            if let Some(u) = &chunk.usage {
                usage = Some(to_usage(u));
            }
            for choice in chunk.choices.into_iter().filter(|c| c.index == 0) {
                if choice.finish_reason.is_some() {
                    finish_reason = choice.finish_reason;
                }
                if let Some(part) = choice.delta.refusal {
                    refusal.push_str(&part);
                }
                if let Some(delta) = choice.delta.content.filter(|d| !d.is_empty()) {
                    on_delta(&delta);
                    content.push_str(&delta);
                }
                for part in choice.delta.tool_calls.unwrap_or_default() {
                    let index = usize::try_from(part.index).unwrap_or(usize::MAX).min(1024);
                    if tool_parts.len() <= index {
                        tool_parts.resize_with(index + 1, ToolCallParts::default);
                    }
                    let slot = &mut tool_parts[index];
                    if let Some(id) = part.id {
                        slot.id.push_str(&id);
                    }
                    if let Some(function) = part.function {
                        slot.name.push_str(function.name.as_deref().unwrap_or(""));
                        slot.arguments.push_str(function.arguments.as_deref().unwrap_or(""));
                    }
                }
            }
        }
        check_refusal(Some(&refusal), usage)?;
        check_finish_reason(self.known_finish_reason(&request.purpose, finish_reason), usage)?;
        let tool_calls = tool_parts
            .into_iter()
            .filter(|p| !p.name.is_empty())
            .map(|p| ToolCall { id: p.id, name: p.name, arguments: p.arguments })
            .collect();
        Ok(ChatResponse {
            content,
            tool_calls,
            usage: usage.unwrap_or_default(),
            model: if model.is_empty() { self.model.clone() } else { model },
        })
    }
}

/// A non-2xx HTTP response, captured with the headers async-openai would discard.
#[derive(Debug, thiserror::Error)]
#[error("http status {status}: {body}")]
pub struct HttpStatusError {
    pub status: u16,
    /// From `retry-after-ms` or `Retry-After` (delta seconds or HTTP date).
    pub retry_after: Option<Duration>,
    /// Response body (lossy UTF-8, truncated).
    pub body: String,
}

const MAX_ERROR_BODY: usize = 2000;

/// The HTTP service async-openai sends through: plain reqwest, no retries, typed status errors.
#[derive(Clone)]
struct HttpService {
    client: reqwest::Client,
}

impl tower::Service<HttpRequestFactory> for HttpService {
    type Response = reqwest::Response;
    type Error = OpenAIError;
    type Future = Pin<Box<dyn Future<Output = Result<reqwest::Response, OpenAIError>> + Send + 'static>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, factory: HttpRequestFactory) -> Self::Future {
        let client = self.client.clone();
        Box::pin(async move {
            let request = factory.build().await?;
            let response = client.execute(request).await.map_err(OpenAIError::Reqwest)?;
            let status = response.status();
            if status.is_success() {
                return Ok(response);
            }
            let retry_after = parse_retry_after(response.headers(), SystemTime::now());
            let mut body = match response.bytes().await {
                Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
                Err(e) => format!("<error body unreadable: {e}>"),
            };
            truncate_at_char_boundary(&mut body, MAX_ERROR_BODY);
            Err(OpenAIError::Boxed(Box::new(HttpStatusError { status: status.as_u16(), retry_after, body })))
        })
    }
}

fn truncate_at_char_boundary(s: &mut String, max: usize) {
    if s.len() > max {
        let mut end = max;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
    }
}

/// The longest wait [`parse_retry_after`] reports. The header is the server's word, not ours to
/// trust blindly: an absurd value (`1e20`) must neither panic nor park a call for centuries, and
/// a caller with a deadline gives up at once on any wait this long anyway.
pub const MAX_RETRY_AFTER: Duration = Duration::from_secs(60 * 60);

/// Reads how long the server wants us to wait: `retry-after-ms` (OpenAI/Azure extension) first,
/// then `Retry-After` as delta seconds or an HTTP date. At most [`MAX_RETRY_AFTER`].
pub fn parse_retry_after(headers: &reqwest::header::HeaderMap, now: SystemTime) -> Option<Duration> {
    let value = |name: &str| headers.get(name).and_then(|v| v.to_str().ok()).map(str::trim);
    if let Some(ms) = value("retry-after-ms").and_then(|v| v.parse::<f64>().ok()) {
        if ms.is_finite() && ms >= 0.0 {
            return Some(clamped_secs(ms / 1000.0));
        }
    }
    let raw = value("retry-after")?;
    if let Ok(secs) = raw.parse::<f64>() {
        return (secs.is_finite() && secs >= 0.0).then(|| clamped_secs(secs));
    }
    let at = httpdate::parse_http_date(raw).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO).min(MAX_RETRY_AFTER))
}

/// A finite, non-negative number of seconds as a wait of at most [`MAX_RETRY_AFTER`]; too many
/// seconds for a `Duration` is simply the maximum.
fn clamped_secs(secs: f64) -> Duration {
    Duration::try_from_secs_f64(secs).map_or(MAX_RETRY_AFTER, |d| d.min(MAX_RETRY_AFTER))
}

/// Maps async-openai errors (including our [`HttpStatusError`]) to [`LlmError`].
pub fn map_openai_error(error: OpenAIError) -> LlmError {
    match error {
        OpenAIError::Boxed(boxed) => match boxed.downcast::<HttpStatusError>() {
            Ok(status_error) => map_status(*status_error),
            Err(other) => LlmError::Transport(other),
        },
        OpenAIError::Reqwest(e) => map_reqwest(e),
        OpenAIError::ApiError(api) => map_status(HttpStatusError {
            status: api.status_code.as_u16(),
            retry_after: None,
            body: serde_json::json!({ "error": api.api_error }).to_string(),
        }),
        OpenAIError::JSONDeserialize(e, _content) => LlmError::malformed(e),
        OpenAIError::StreamError(e) => LlmError::Transport(e),
        OpenAIError::InvalidArgument(problem) => LlmError::Config { field: "request", problem },
        other => LlmError::Transport(Box::new(other)),
    }
}

fn map_reqwest(error: reqwest::Error) -> LlmError {
    if error.is_timeout() {
        LlmError::Timeout
    } else if error.is_decode() {
        LlmError::malformed(error)
    } else {
        LlmError::Transport(Box::new(error))
    }
}

/// Error message and code from an OpenAI-style (`{"error": {...}}`) or vLLM-style (`{"message": ...}`) body.
fn error_details(body: &str) -> (String, Option<String>) {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let detail = parsed.as_ref().map(|v| if v["error"].is_object() { &v["error"] } else { v });
    match detail {
        Some(d) if d["message"].is_string() => {
            let message = d["message"].as_str().unwrap_or_default().to_owned();
            let code = d["code"].as_str().or(d["type"].as_str()).map(str::to_owned);
            (message, code)
        }
        _ => (body.trim().to_owned(), None),
    }
}

fn map_status(error: HttpStatusError) -> LlmError {
    let status = error.status;
    let (message, code) = error_details(&error.body);
    match status {
        // A 429 for an exhausted quota will not clear by waiting.
        429 if code.as_deref() == Some("insufficient_quota") => LlmError::Rejected { status, message, usage: None },
        429 => LlmError::RateLimited { retry_after: error.retry_after },
        408 => LlmError::Timeout,
        500..=599 => LlmError::Server { status, message },
        _ => {
            if code.as_deref() == Some("context_length_exceeded") || message.contains("maximum context length") {
                if let Some((limit, prompt_tokens)) = context_numbers(&message) {
                    return LlmError::ContextTooLong { prompt_tokens, limit };
                }
            }
            LlmError::Rejected { status, message, usage: None }
        }
    }
}

/// `(limit, prompt_tokens)` from messages like "maximum context length is 8192 tokens. However,
/// your messages resulted in 9000 tokens".
fn context_numbers(message: &str) -> Option<(usize, usize)> {
    let mut numbers =
        message.split(|c: char| !c.is_ascii_digit()).filter(|s| !s.is_empty()).filter_map(|s| s.parse::<usize>().ok());
    let limit = numbers.next()?;
    let prompt = numbers.next()?;
    Some((limit, prompt))
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::{HeaderMap, HeaderValue};

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn retry_after_forms() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "3")]), now), Some(Duration::from_secs(3)));
        assert_eq!(parse_retry_after(&headers(&[("retry-after-ms", "250")]), now), Some(Duration::from_millis(250)));
        let date = httpdate::fmt_http_date(now + Duration::from_secs(10));
        assert_eq!(parse_retry_after(&headers(&[("retry-after", &date)]), now), Some(Duration::from_secs(10)));
        let past = httpdate::fmt_http_date(now - Duration::from_secs(10));
        assert_eq!(parse_retry_after(&headers(&[("retry-after", &past)]), now), Some(Duration::ZERO));
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "soon")]), now), None);
        assert_eq!(parse_retry_after(&HeaderMap::new(), now), None);
    }

    #[test]
    fn huge_retry_after_is_clamped_not_a_panic() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let max = Some(MAX_RETRY_AFTER);
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "1e20")]), now), max);
        assert_eq!(parse_retry_after(&headers(&[("retry-after-ms", "1e30")]), now), max);
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "86400")]), now), max);
        let far = httpdate::fmt_http_date(now + Duration::from_secs(10 * 365 * 86_400));
        assert_eq!(parse_retry_after(&headers(&[("retry-after", &far)]), now), max);
        // No server means an infinite wait; the header is ignored.
        assert_eq!(parse_retry_after(&headers(&[("retry-after", "inf")]), now), None);
    }

    fn status(status: u16, body: &str) -> LlmError {
        map_status(HttpStatusError { status, retry_after: Some(Duration::from_secs(1)), body: body.to_owned() })
    }

    #[test]
    fn status_mapping() {
        assert!(
            matches!(status(429, "{}"), LlmError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(1))
        );
        let quota = r#"{"error":{"message":"quota","type":"insufficient_quota","code":"insufficient_quota"}}"#;
        assert!(matches!(status(429, quota), LlmError::Rejected { status: 429, .. }));
        assert!(matches!(status(503, "busy"), LlmError::Server { status: 503, ref message } if message == "busy"));
        assert!(matches!(status(408, ""), LlmError::Timeout));
        let bad = r#"{"error":{"message":"bad model","type":"invalid_request_error","code":null}}"#;
        assert!(
            matches!(status(400, bad), LlmError::Rejected { status: 400, ref message, .. } if message == "bad model")
        );
        let vllm = r#"{"object":"error","message":"nope","type":"BadRequestError","code":400}"#;
        assert!(matches!(status(404, vllm), LlmError::Rejected { status: 404, ref message, .. } if message == "nope"));
        let ctx = r#"{"error":{"message":"This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.","code":"context_length_exceeded"}}"#;
        assert!(matches!(status(400, ctx), LlmError::ContextTooLong { prompt_tokens: 9000, limit: 8192 }));
    }

    #[test]
    fn config_validation() {
        let base = OpenAiConfig { model: "m".into(), ..OpenAiConfig::default() };
        assert!(matches!(
            OpenAiProvider::new(OpenAiConfig { model: " ".into(), ..base.clone() }),
            Err(LlmError::Config { field: "model", .. })
        ));
        assert!(matches!(
            OpenAiProvider::new(OpenAiConfig { base_url: Some("localhost:8080".into()), ..base.clone() }),
            Err(LlmError::Config { field: "base_url", .. })
        ));
        let azure = AzureConfig {
            endpoint: "https://x.openai.azure.com".into(),
            deployment: String::new(),
            api_version: "v".into(),
        };
        assert!(matches!(
            OpenAiProvider::new(OpenAiConfig { azure: Some(azure), ..base.clone() }),
            Err(LlmError::Config { field: "azure.deployment", .. })
        ));
        let ok = OpenAiProvider::new(OpenAiConfig { base_url: Some("http://127.0.0.1:1/v1/".into()), ..base }).unwrap();
        assert_eq!(ok.endpoint(), "http://127.0.0.1:1/v1");
    }

    #[test]
    fn the_call_context_is_never_sent() {
        let provider = OpenAiProvider::new(OpenAiConfig {
            model: "m".into(),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            ..OpenAiConfig::default()
        })
        .unwrap();
        let request = ChatRequest {
            context: Some(crate::CallContext {
                thread_id: "conv-secret-thread".into(),
                run_id: "run-secret".into(),
                node: "node-secret".into(),
            }),
            ..ChatRequest::new("p", vec![crate::ChatMessage::user("hi")])
        };
        for stream in [false, true] {
            let wire = serde_json::to_string(&provider.build_request(&request, stream)).unwrap();
            assert!(!wire.contains("secret") && !wire.contains("context"), "{wire}");
        }
    }

    #[test]
    fn an_unknown_finish_reason_is_a_normal_end_and_warned_about_once() {
        let provider = OpenAiProvider::new(OpenAiConfig {
            model: "m".into(),
            base_url: Some("http://127.0.0.1:1/v1".into()),
            ..OpenAiConfig::default()
        })
        .unwrap();
        let decode = |json: &str| serde_json::from_str::<Option<WireFinishReason>>(json).unwrap();
        assert_eq!(decode(r#""length""#), Some(WireFinishReason::Known(FinishReason::Length)));
        assert_eq!(provider.known_finish_reason("p", decode(r#""length""#)), Some(FinishReason::Length));
        assert_eq!(provider.known_finish_reason("p", decode(r#""eos""#)), None);
        assert_eq!(provider.known_finish_reason("p", decode("null")), None);
        assert!(!provider.first_sighting("eos"), "already warned about");
        assert!(provider.first_sighting("abort"));
        for i in 0..2 * MAX_UNKNOWN_FINISH_REASONS {
            provider.first_sighting(&format!("made-up-{i}"));
        }
        assert_eq!(provider.unknown_finish_reasons.lock().unwrap().len(), MAX_UNKNOWN_FINISH_REASONS);
    }

    #[test]
    fn truncation_respects_char_boundaries() {
        let mut s = "é".repeat(10);
        truncate_at_char_boundary(&mut s, 5);
        assert_eq!(s, "éé");
    }
}

/// The schema as OpenAI's strict structured output accepts it: length and item bounds are not
/// part of its supported subset, so they are removed here. They stay in the schema everywhere
/// else (the embedded model's grammar relies on them), and replies are still validated by the
/// Rust type.
fn strict_schema(mut schema: serde_json::Value) -> serde_json::Value {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                for key in ["maxLength", "minLength", "maxItems", "minItems"] {
                    map.remove(key);
                }
                map.values_mut().for_each(strip);
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    strip(&mut schema);
    schema
}

#[cfg(test)]
mod strict_schema_tests {
    #[test]
    fn length_bounds_are_removed_recursively_and_nothing_else() {
        let schema = serde_json::json!({
            "type": "object",
            "properties": {
                "reasoning": {"type": "string", "maxLength": 160},
                "updates": {"type": "array", "maxItems": 12, "items": {"type": "object", "properties": {"v": {"type": "string", "minLength": 1}}}}
            },
            "required": ["reasoning", "updates"]
        });
        let stripped = super::strict_schema(schema);
        let text = stripped.to_string();
        assert!(!text.contains("maxLength") && !text.contains("maxItems") && !text.contains("minLength"), "{text}");
        assert_eq!(stripped["required"], serde_json::json!(["reasoning", "updates"]));
        assert_eq!(stripped["properties"]["updates"]["items"]["properties"]["v"]["type"], "string");
    }
}
