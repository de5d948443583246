//! A scripted **test double**: replays canned replies instead of calling a model.
//!
//! `ScriptedModel` exists for tests, demos, benchmarks and crash tests. It is never a default: a
//! server only uses it when explicitly configured to (for example with a script file), and
//! production configuration must name a real provider.
//!
//! Replies are consumed in order. A reply can be pinned to a purpose, delayed (the delay is a tokio
//! sleep, so cancelling the call drops it) or turned into a failure. When the queue is empty a
//! [`ScriptedModel::from_fn`] responder answers; without one the call fails with
//! [`LlmError::ScriptExhausted`]. Every request is kept for tests to assert on
//! ([`ScriptedModel::requests`]) unless the model is made
//! [`without_request_log`](ScriptedModel::without_request_log), as a served one is.
//!
//! # Script file format
//!
//! [`ScriptedModel::from_json_file`] reads either a JSON array of replies or an object
//! `{"model": "name", "replies": [...]}`. Each reply is an object with:
//!
//! | field | meaning |
//! | --- | --- |
//! | `content` | reply text (string) |
//! | `json` | alternatively, any JSON value; its compact serialization becomes the content |
//! | `purpose` | optional; the request's purpose must equal it |
//! | `delay_ms` | optional delay before answering |
//! | `fail` | optional failure instead of a reply: `{"kind": "rate_limited", "retry_after_ms": 500}`, `{"kind": "server", "status": 503}` or `{"kind": "timeout"}` |
//! | `tool_calls` | optional tool calls instead of (or with) `content`: a non-empty array of `{"name": "...", "arguments": {...}}` (`arguments` is any JSON value, `{}` when left out); not with `json` or `fail` |
//!
//! The object form may also carry `"by_purpose": {"PURPOSE": {"content": ...} | {"json": ...}}`:
//! standing answers used, any number of times, once `replies` run out (handy for a long-running
//! demo or SDK test server), and `"delay_ms"`: a delay for every reply that sets none of its own,
//! standing answers included. It stands in for a model's latency in tests and benchmarks
//! (`frontdesk-bench scale`), nothing else. With `"delay_jitter_ms": J` beside it, each of those
//! delays is drawn uniformly from `delay_ms - J ..= delay_ms + J` (J at most `delay_ms`), as a
//! real model's latency varies; the draws follow a fixed-seed generator, so a script played in
//! the same order waits the same.
//!
//! ```json
//! [
//!   {"purpose": "supervisor.route", "json": {"route": "billing"}},
//!   {"fail": {"kind": "server", "status": 503}},
//!   {"content": "Your invoice was resent.", "delay_ms": 50},
//!   {"purpose": "investigation.step", "tool_calls": [{"name": "lookup_user", "arguments": {"user_id": "u002"}}]}
//! ]
//! ```
//!
//! # Tool calls
//!
//! A reply with tool calls ([`ScriptedReply::tool_call`], [`ScriptedReply::tool_calls`], or
//! `tool_calls` in a script file) answers with [`ChatResponse::tool_calls`] and, unless the
//! reply also sets `content`, empty content. Each call gets the id `call_<n>`, numbered from 1
//! across everything the model answers (`call_1`, `call_2`, ... for a script played in order), and
//! its `arguments` serialized as compact JSON. They are not checked against the tool's
//! parameter schema (real models get arguments wrong too), but the tools themselves are: a
//! tool-call reply to a request that offers no tools, or that names a tool the request does not
//! offer, fails with [`LlmError::Config`] (field `scripted.tool_calls`) and stays queued, as a
//! purpose mismatch does, so a script that drifted from the code fails loudly. Standing
//! `by_purpose` answers and [`ScriptedModel::from_fn`] responders answer with content only.
//!
//! Token usage is counted crudely but deterministically: whitespace-separated words of all prompt
//! messages and of the reply (its content, and the name and arguments of each tool call).

use std::collections::VecDeque;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, TokenUsage, ToolCall};

/// A failure a scripted reply produces instead of content.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScriptedFailure {
    /// [`LlmError::RateLimited`], with the given Retry-After.
    RateLimited {
        #[serde(default)]
        retry_after_ms: Option<u64>,
    },
    /// [`LlmError::Server`] with this status.
    Server { status: u16 },
    /// [`LlmError::Timeout`].
    Timeout,
}

impl ScriptedFailure {
    fn to_error(&self) -> LlmError {
        match self {
            ScriptedFailure::RateLimited { retry_after_ms } => {
                LlmError::RateLimited { retry_after: retry_after_ms.map(Duration::from_millis) }
            }
            ScriptedFailure::Server { status } => {
                LlmError::Server { status: *status, message: "scripted server error".to_owned() }
            }
            ScriptedFailure::Timeout => LlmError::Timeout,
        }
    }
}

/// A tool call a scripted reply makes; its id is generated when it is answered (see the module docs).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScriptedToolCall {
    /// The tool's name; the request must offer a tool of this name.
    pub name: String,
    /// The arguments, sent as their compact JSON text (`{}` when a script file leaves them out).
    #[serde(default = "empty_object")]
    pub arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

impl ScriptedToolCall {
    /// A call of tool `name` with these arguments.
    pub fn new(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self { name: name.into(), arguments }
    }
}

/// One canned reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptedReply {
    /// If set, the request's purpose must match, else the call fails with [`LlmError::Config`].
    pub purpose: Option<String>,
    pub content: String,
    /// Tool calls the reply makes; each must name a tool the request offers, else the call fails
    /// with [`LlmError::Config`].
    pub tool_calls: Vec<ScriptedToolCall>,
    /// Wait before answering (or failing).
    pub delay: Option<Duration>,
    /// Fail instead of answering.
    pub fail: Option<ScriptedFailure>,
}

impl ScriptedReply {
    /// A plain text reply.
    pub fn text(content: impl Into<String>) -> Self {
        Self { content: content.into(), ..Self::default() }
    }

    /// A reply whose content is `value` serialized as compact JSON.
    ///
    /// # Panics
    /// If `value` cannot be serialized (a test bug, e.g. a map with non-string keys).
    pub fn json(value: &impl Serialize) -> Self {
        let content = serde_json::to_string(value).expect("scripted reply value must serialize to JSON");
        Self::text(content)
    }

    /// A reply that calls one tool (empty content); the call's id is generated (`call_<n>`).
    pub fn tool_call(name: impl Into<String>, arguments: serde_json::Value) -> Self {
        Self::tool_calls([ScriptedToolCall::new(name, arguments)])
    }

    /// A reply that calls several tools, in this order (empty content).
    pub fn tool_calls(calls: impl IntoIterator<Item = ScriptedToolCall>) -> Self {
        Self { tool_calls: calls.into_iter().collect(), ..Self::default() }
    }

    /// A failure instead of a reply.
    pub fn failure(fail: ScriptedFailure) -> Self {
        Self { fail: Some(fail), ..Self::default() }
    }

    /// Only answer a request with this purpose.
    pub fn for_purpose(mut self, purpose: impl Into<String>) -> Self {
        self.purpose = Some(purpose.into());
        self
    }

    /// Wait `delay` before answering.
    pub fn after(mut self, delay: Duration) -> Self {
        self.delay = Some(delay);
        self
    }
}

/// Script file entry; see the module docs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReplyFile {
    #[serde(default)]
    purpose: Option<String>,
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    json: Option<serde_json::Value>,
    #[serde(default)]
    delay_ms: Option<u64>,
    #[serde(default)]
    fail: Option<ScriptedFailure>,
    #[serde(default)]
    tool_calls: Option<Vec<ScriptedToolCall>>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum ScriptFile {
    Replies(Vec<ReplyFile>),
    Named {
        model: String,
        #[serde(default)]
        replies: Vec<ReplyFile>,
        /// Standing answers by purpose, used once `replies` run out, any number of times.
        #[serde(default)]
        by_purpose: std::collections::BTreeMap<String, PurposeReply>,
        /// Delay of every reply that sets none (test and benchmark use: a model's latency).
        #[serde(default)]
        delay_ms: Option<u64>,
        /// How far each of those delays may fall either side of `delay_ms`.
        #[serde(default)]
        delay_jitter_ms: Option<u64>,
    },
}

/// A standing answer for every request of one purpose.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
struct PurposeReply {
    #[serde(default)]
    content: Option<String>,
    #[serde(default)]
    json: Option<serde_json::Value>,
}

type Responder = dyn Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync;

/// A scripted test double implementing [`ChatModel`]; see the module docs.
pub struct ScriptedModel {
    name: String,
    replies: Mutex<VecDeque<ScriptedReply>>,
    responder: Option<Arc<Responder>>,
    requests: Mutex<Vec<ChatRequest>>,
    /// Whether `requests` keeps a copy of every request (see [`ScriptedModel::without_request_log`]).
    log_requests: bool,
    /// Number of the next generated tool call id (`call_<n>`).
    next_tool_call: AtomicU64,
    /// Delay of every reply that sets none (see [`ScriptedModel::with_default_delay`]).
    default_delay: Option<Duration>,
    /// How far each default delay may fall either side of it
    /// (see [`ScriptedModel::with_delay_jitter`]).
    jitter: Duration,
    /// The jitter generator's counter (SplitMix64 over a fixed seed).
    draws: AtomicU64,
}

/// The jitter generator's seed: fixed, so that a script played in the same order waits the same.
const JITTER_SEED: u64 = 0x5EED_0023;

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("remaining", &self.remaining())
            .field("responder", &self.responder.is_some())
            .finish()
    }
}

/// SplitMix64's increment: the generator's state advances by it each draw.
const SPLITMIX_GAMMA: u64 = 0x9E37_79B9_7F4A_7C15;

/// SplitMix64's output function: a well-mixed 64-bit value from the generator's state.
fn splitmix64(state: u64) -> u64 {
    let mut z = state.wrapping_add(SPLITMIX_GAMMA);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Locks ignoring poisoning: the data (a queue and a log) stays consistent even if a holder panicked.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl ScriptedModel {
    /// An empty script; add replies with [`push_reply`](Self::push_reply) or [`with_reply`](Self::with_reply).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            replies: Mutex::new(VecDeque::new()),
            responder: None,
            requests: Mutex::new(Vec::new()),
            log_requests: true,
            next_tool_call: AtomicU64::new(1),
            default_delay: None,
            jitter: Duration::ZERO,
            draws: AtomicU64::new(JITTER_SEED),
        }
    }

    /// Every reply that sets no delay of its own waits `delay` before answering: a stand-in for
    /// a model's latency in tests and benchmarks.
    pub fn with_default_delay(mut self, delay: Duration) -> Self {
        self.default_delay = Some(delay);
        self
    }

    /// Each default delay is drawn uniformly from `delay - jitter ..= delay + jitter` instead
    /// of being exactly `delay`: a model whose latency varies around its mean, as a real one's
    /// does. Many clients held in step by one fixed latency arrive at the server in bursts that
    /// no real traffic has. A jitter wider than the delay is cut to it (no delay is negative).
    pub fn with_delay_jitter(mut self, jitter: Duration) -> Self {
        self.jitter = jitter;
        self
    }

    /// The delay of a reply that sets none: the default, jittered.
    fn default_delay(&self) -> Option<Duration> {
        let delay = self.default_delay?;
        let jitter = self.jitter.min(delay);
        if jitter.is_zero() {
            return Some(delay);
        }
        let span = 2 * jitter.as_nanos() as u64 + 1;
        let draw = splitmix64(self.draws.fetch_add(SPLITMIX_GAMMA, Ordering::Relaxed)) % span;
        Some(delay - jitter + Duration::from_nanos(draw))
    }

    /// Keeps no copy of the requests ([`requests`](Self::requests) stays empty). The log is for
    /// tests that assert on what was asked; a long-running model (a server's script file, a
    /// benchmark replaying thousands of runs) would otherwise grow by every prompt it answers
    /// and pay for copying it.
    pub fn without_request_log(mut self) -> Self {
        self.log_requests = false;
        self
    }

    /// A model that answers every request (once queued replies run out) with `responder(request)`,
    /// for rule-following replies in benchmarks and long runs.
    pub fn from_fn<F>(name: impl Into<String>, responder: F) -> Self
    where
        F: Fn(&ChatRequest) -> Result<String, LlmError> + Send + Sync + 'static,
    {
        Self { responder: Some(Arc::new(responder)), ..Self::new(name) }
    }

    /// Loads a script file (format in the module docs). The model is named "scripted" unless the
    /// file names it.
    pub fn from_json_file(path: impl AsRef<Path>) -> Result<Self, LlmError> {
        let path = path.as_ref();
        let text = std::fs::read_to_string(path).map_err(|e| LlmError::Config {
            field: "scripted.file",
            problem: format!("cannot read {}: {e}", path.display()),
        })?;
        Self::from_json_str(&text).map_err(|e| match e {
            LlmError::Config { field, problem } => {
                LlmError::Config { field, problem: format!("{}: {problem}", path.display()) }
            }
            other => other,
        })
    }

    /// Parses a script (format in the module docs).
    pub fn from_json_str(text: &str) -> Result<Self, LlmError> {
        let file: ScriptFile = serde_json::from_str(text)
            .map_err(|e| LlmError::Config { field: "scripted.file", problem: format!("invalid script: {e}") })?;
        let (name, entries, by_purpose, delay_ms, jitter_ms) = match file {
            ScriptFile::Replies(replies) => ("scripted".to_owned(), replies, Default::default(), None, None),
            ScriptFile::Named { model, replies, by_purpose, delay_ms, delay_jitter_ms } => {
                (model, replies, by_purpose, delay_ms, delay_jitter_ms)
            }
        };
        match (delay_ms, jitter_ms) {
            (None, Some(_)) => {
                return Err(LlmError::Config {
                    field: "scripted.file",
                    problem: "`delay_jitter_ms` needs a top-level `delay_ms` to vary around".into(),
                })
            }
            (Some(delay), Some(jitter)) if jitter > delay => {
                return Err(LlmError::Config {
                    field: "scripted.file",
                    problem: format!("`delay_jitter_ms` ({jitter}) is more than `delay_ms` ({delay})"),
                })
            }
            _ => {}
        }
        let mut standing = std::collections::BTreeMap::new();
        for (purpose, reply) in by_purpose {
            let content = match (reply.content, reply.json) {
                (Some(text), None) => text,
                (None, Some(value)) => value.to_string(),
                _ => {
                    return Err(LlmError::Config {
                        field: "scripted.file",
                        problem: format!("by_purpose.{purpose} needs exactly one of `content` and `json`"),
                    })
                }
            };
            standing.insert(purpose, content);
        }
        let model = if standing.is_empty() {
            Self::new(name)
        } else {
            Self::from_fn(name, move |request: &ChatRequest| {
                standing
                    .get(&request.purpose)
                    .cloned()
                    .ok_or_else(|| LlmError::ScriptExhausted { purpose: request.purpose.clone() })
            })
        };
        let model = match delay_ms {
            Some(ms) => model
                .with_default_delay(Duration::from_millis(ms))
                .with_delay_jitter(Duration::from_millis(jitter_ms.unwrap_or(0))),
            None => model,
        };
        for (index, entry) in entries.into_iter().enumerate() {
            let tool_calls = match entry.tool_calls {
                None => Vec::new(),
                Some(calls) => {
                    let problem = if calls.is_empty() {
                        Some("has an empty `tool_calls`")
                    } else if entry.json.is_some() {
                        Some("has both `tool_calls` and `json`")
                    } else if entry.fail.is_some() {
                        Some("has both `tool_calls` and `fail`")
                    } else {
                        None
                    };
                    if let Some(problem) = problem {
                        return Err(LlmError::Config {
                            field: "scripted.file",
                            problem: format!("reply {index} {problem}"),
                        });
                    }
                    calls
                }
            };
            let content = match (entry.content, entry.json) {
                (Some(_), Some(_)) => {
                    return Err(LlmError::Config {
                        field: "scripted.file",
                        problem: format!("reply {index} has both `content` and `json`"),
                    })
                }
                (Some(text), None) => text,
                (None, Some(value)) => value.to_string(),
                (None, None) => String::new(),
            };
            model.push_reply(ScriptedReply {
                purpose: entry.purpose,
                content,
                tool_calls,
                delay: entry.delay_ms.map(Duration::from_millis),
                fail: entry.fail,
            });
        }
        Ok(model)
    }

    /// Appends a reply to the queue (usable after the model is shared).
    pub fn push_reply(&self, reply: ScriptedReply) -> &Self {
        lock(&self.replies).push_back(reply);
        self
    }

    /// Appends a reply, builder style.
    pub fn with_reply(self, reply: ScriptedReply) -> Self {
        self.push_reply(reply);
        self
    }

    /// Appends several replies, builder style.
    pub fn with_replies(self, replies: impl IntoIterator<Item = ScriptedReply>) -> Self {
        lock(&self.replies).extend(replies);
        self
    }

    /// Every request received so far, in order (including ones that failed); empty for a model
    /// made [`without_request_log`](Self::without_request_log).
    pub fn requests(&self) -> Vec<ChatRequest> {
        lock(&self.requests).clone()
    }

    /// Queued replies not yet consumed.
    pub fn remaining(&self) -> usize {
        lock(&self.replies).len()
    }

    /// Takes the next reply (or asks the responder) for `request`.
    fn next_reply(&self, request: &ChatRequest) -> Result<ScriptedReply, LlmError> {
        if self.log_requests {
            lock(&self.requests).push(request.clone());
        }
        let mut queue = lock(&self.replies);
        if let Some(front) = queue.front() {
            if let Some(expected) = &front.purpose {
                if *expected != request.purpose {
                    return Err(LlmError::Config {
                        field: "scripted.purpose",
                        problem: format!(
                            "next scripted reply is for purpose {expected:?} but the request is for {:?}",
                            request.purpose
                        ),
                    });
                }
            }
            check_tool_calls(front, request)?;
            return Ok(queue.pop_front().unwrap_or_default());
        }
        drop(queue);
        match &self.responder {
            Some(responder) => Ok(ScriptedReply::text(responder(request)?)),
            None => Err(LlmError::ScriptExhausted { purpose: request.purpose.clone() }),
        }
    }

    async fn respond(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let reply = self.next_reply(request)?;
        if let Some(delay) = reply.delay.or_else(|| self.default_delay()) {
            tokio::time::sleep(delay).await;
        }
        if let Some(fail) = &reply.fail {
            tracing::debug!(purpose = %request.purpose, failure = ?fail, "scripted model failing as scripted");
            return Err(fail.to_error());
        }
        let tool_calls: Vec<ToolCall> = reply
            .tool_calls
            .into_iter()
            .map(|call| ToolCall {
                id: format!("call_{}", self.next_tool_call.fetch_add(1, Ordering::Relaxed)),
                name: call.name,
                arguments: call.arguments.to_string(),
            })
            .collect();
        let usage = TokenUsage {
            prompt_tokens: request.messages.iter().map(|m| count_words(&m.content)).sum(),
            completion_tokens: count_words(&reply.content)
                + tool_calls.iter().map(|c| count_words(&c.name) + count_words(&c.arguments)).sum::<u64>(),
        };
        Ok(ChatResponse { content: reply.content, tool_calls, usage, model: self.name.clone() })
    }
}

/// A reply's tool calls must name tools the request offers: a script that calls a tool the code
/// no longer offers (or offers under another name) has drifted from the code.
fn check_tool_calls(reply: &ScriptedReply, request: &ChatRequest) -> Result<(), LlmError> {
    for call in &reply.tool_calls {
        if request.tools.iter().any(|tool| tool.name == call.name) {
            continue;
        }
        let problem = if request.tools.is_empty() {
            format!(
                "next scripted reply calls tool {:?} but the request for {:?} offers no tools",
                call.name, request.purpose
            )
        } else {
            let offered: Vec<&str> = request.tools.iter().map(|tool| tool.name.as_str()).collect();
            format!(
                "next scripted reply calls tool {:?} but the request for {:?} offers only {offered:?}",
                call.name, request.purpose
            )
        };
        return Err(LlmError::Config { field: "scripted.tool_calls", problem });
    }
    Ok(())
}

/// Whitespace-separated words: the scripted model's stand-in for a token count. Counted on
/// bytes (ASCII whitespace only) because it runs over every prompt, and the benchmarks that use
/// this model measure everything but the model.
fn count_words(text: &str) -> u64 {
    let mut words = 0;
    let mut in_word = false;
    for &byte in text.as_bytes() {
        let space = byte.is_ascii_whitespace();
        words += u64::from(!space && !in_word);
        in_word = !space;
    }
    words
}

/// Splits `content` into at most `max_chunks` pieces on word boundaries; the pieces concatenate to
/// exactly `content`.
fn word_chunks(content: &str, max_chunks: usize) -> Vec<&str> {
    let boundaries: Vec<usize> = content
        .split_inclusive(char::is_whitespace)
        .scan(0usize, |end, piece| {
            *end += piece.len();
            Some(*end)
        })
        .collect();
    if boundaries.is_empty() {
        return Vec::new();
    }
    let per_chunk = boundaries.len().div_ceil(max_chunks.max(1));
    let mut chunks = Vec::new();
    let mut start = 0;
    for end in boundaries.iter().skip(per_chunk - 1).step_by(per_chunk).copied().chain(std::iter::once(content.len())) {
        if end > start {
            chunks.push(&content[start..end]);
            start = end;
        }
    }
    chunks
}

#[async_trait]
impl ChatModel for ScriptedModel {
    fn model_name(&self) -> &str {
        &self.name
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        self.respond(request).await
    }

    async fn chat_stream(
        &self,
        request: &ChatRequest,
        on_delta: &(dyn for<'d> Fn(&'d str) + Send + Sync),
    ) -> Result<ChatResponse, LlmError> {
        let response = self.respond(request).await?;
        for chunk in word_chunks(&response.content, 4) {
            on_delta(chunk);
            // Let other tasks observe the partial output, as with a real stream.
            tokio::task::yield_now().await;
        }
        Ok(response)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallOptions, ChatMessage, LlmClient, RetryPolicy};

    fn req(purpose: &str, text: &str) -> ChatRequest {
        ChatRequest::new(purpose, vec![ChatMessage::user(text)])
    }

    #[test]
    fn words_are_counted_like_split_whitespace() {
        for text in ["", "  ", "one", " two  words\n", "a\tb\r\nc", "café crème brûlée", "x  "] {
            assert_eq!(count_words(text), text.split_ascii_whitespace().count() as u64, "{text:?}");
        }
    }

    #[tokio::test]
    async fn replays_in_order_and_records_requests() {
        let model = ScriptedModel::new("script")
            .with_reply(ScriptedReply::text("one"))
            .with_reply(ScriptedReply::json(&serde_json::json!({"route": "billing"})).for_purpose("supervisor.route"));
        let first = model.chat(&req("any", "hello there")).await.unwrap();
        assert_eq!(first.content, "one");
        assert_eq!(first.model, "script");
        assert_eq!(first.usage, TokenUsage { prompt_tokens: 2, completion_tokens: 1 });
        let second = model.chat(&req("supervisor.route", "route me")).await.unwrap();
        assert_eq!(second.content, r#"{"route":"billing"}"#);
        let err = model.chat(&req("x", "again")).await.unwrap_err();
        assert!(matches!(err, LlmError::ScriptExhausted { ref purpose } if purpose == "x"), "{err}");
        let seen = model.requests();
        assert_eq!(seen.len(), 3);
        assert_eq!(seen[1].purpose, "supervisor.route");
    }

    #[tokio::test]
    async fn purpose_mismatch_is_an_error_and_keeps_the_reply() {
        let model = ScriptedModel::new("s");
        model.push_reply(ScriptedReply::text("x").for_purpose("a"));
        let err = model.chat(&req("b", "")).await.unwrap_err();
        assert!(matches!(err, LlmError::Config { field: "scripted.purpose", .. }), "{err}");
        assert_eq!(model.remaining(), 1);
        assert_eq!(model.chat(&req("a", "")).await.unwrap().content, "x");
    }

    #[tokio::test]
    async fn failures_then_success_through_client() {
        let model = Arc::new(
            ScriptedModel::new("s")
                .with_reply(ScriptedReply::failure(ScriptedFailure::Server { status: 503 }))
                .with_reply(ScriptedReply::failure(ScriptedFailure::RateLimited { retry_after_ms: Some(1) }))
                .with_reply(ScriptedReply::text("ok")),
        );
        let client = LlmClient::new(model.clone()).with_retry(RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(1),
            max_backoff: Duration::from_millis(2),
        });
        let (resp, record) = client.complete(req("p", "hi"), &CallOptions::default()).await.unwrap();
        assert_eq!(resp.content, "ok");
        assert_eq!(record.attempts, 3);
        assert_eq!(model.requests().len(), 3);
    }

    #[tokio::test]
    async fn from_fn_answers_by_rule() {
        let model = ScriptedModel::from_fn("rules", |r: &ChatRequest| Ok(format!("echo {}", r.purpose)))
            .with_reply(ScriptedReply::text("queued first"));
        assert_eq!(model.chat(&req("a", "")).await.unwrap().content, "queued first");
        assert_eq!(model.chat(&req("b", "")).await.unwrap().content, "echo b");
        assert_eq!(model.chat(&req("c", "")).await.unwrap().content, "echo c");
    }

    #[tokio::test]
    async fn a_model_without_request_log_answers_and_keeps_nothing() {
        let model = ScriptedModel::from_fn("rules", |r: &ChatRequest| Ok(format!("echo {}", r.purpose)))
            .with_reply(ScriptedReply::text("queued first"))
            .without_request_log();
        assert_eq!(model.chat(&req("a", "")).await.unwrap().content, "queued first");
        assert_eq!(model.chat(&req("b", "")).await.unwrap().content, "echo b");
        assert!(model.requests().is_empty());
    }

    #[tokio::test]
    async fn streams_in_word_chunks() {
        let content = "the quick  brown fox jumps over the lazy dog\nagain";
        let model = ScriptedModel::new("s").with_reply(ScriptedReply::text(content));
        let deltas = Mutex::new(Vec::<String>::new());
        let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
        let resp = model.chat_stream(&req("p", ""), &on_delta).await.unwrap();
        let deltas = deltas.into_inner().unwrap();
        assert!(deltas.len() > 1 && deltas.len() <= 4, "{deltas:?}");
        assert_eq!(deltas.concat(), content);
        assert_eq!(resp.content, content);
    }

    #[test]
    fn word_chunks_edge_cases() {
        assert!(word_chunks("", 4).is_empty());
        assert_eq!(word_chunks("one", 4), vec!["one"]);
        assert_eq!(word_chunks("a b", 4), vec!["a ", "b"]);
        assert_eq!(word_chunks("a b c d e f g h", 4).concat(), "a b c d e f g h");
        assert_eq!(word_chunks("a b c d e f g h", 4).len(), 4);
        assert_eq!(word_chunks("trailing space ", 4).concat(), "trailing space ");
    }

    #[tokio::test(start_paused = true)]
    async fn delay_is_cancellable() {
        let model =
            Arc::new(ScriptedModel::new("s").with_reply(ScriptedReply::text("late").after(Duration::from_secs(3600))));
        let client = LlmClient::new(model);
        let token = tokio_util::sync::CancellationToken::new();
        let canceller = token.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            canceller.cancel();
        });
        let opts = CallOptions { cancel: Some(&token), ..CallOptions::default() };
        let started = tokio::time::Instant::now();
        let err = client.complete(req("p", ""), &opts).await.unwrap_err().error;
        assert!(matches!(err, LlmError::Cancelled), "{err}");
        assert!(started.elapsed() < Duration::from_secs(1));
    }

    #[test]
    fn loads_script_file() {
        let dir = std::env::temp_dir().join(format!("frontdesk-llm-script-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("script.json");
        std::fs::write(
            &path,
            r#"[
                {"purpose": "supervisor.route", "json": {"route": "billing"}},
                {"fail": {"kind": "server", "status": 503}},
                {"fail": {"kind": "rate_limited", "retry_after_ms": 500}},
                {"content": "Your invoice was resent.", "delay_ms": 50}
            ]"#,
        )
        .unwrap();
        let model = ScriptedModel::from_json_file(&path).unwrap();
        assert_eq!(model.model_name(), "scripted");
        assert_eq!(model.remaining(), 4);
        let replies: Vec<ScriptedReply> = lock(&model.replies).iter().cloned().collect();
        assert_eq!(replies[0].purpose.as_deref(), Some("supervisor.route"));
        assert_eq!(replies[0].content, r#"{"route":"billing"}"#);
        assert_eq!(replies[1].fail, Some(ScriptedFailure::Server { status: 503 }));
        assert_eq!(replies[2].fail, Some(ScriptedFailure::RateLimited { retry_after_ms: Some(500) }));
        assert_eq!(replies[3].delay, Some(Duration::from_millis(50)));

        let named = ScriptedModel::from_json_str(r#"{"model": "demo", "replies": [{"content": "hi"}]}"#).unwrap();
        assert_eq!(named.model_name(), "demo");
        assert!(ScriptedModel::from_json_str(r#"[{"contnet": "typo"}]"#).is_err());
        assert!(ScriptedModel::from_json_str(r#"[{"content": "a", "json": 1}]"#).is_err());
        let missing = ScriptedModel::from_json_file(dir.join("missing.json")).unwrap_err();
        assert!(matches!(missing, LlmError::Config { field: "scripted.file", .. }));
        std::fs::remove_dir_all(&dir).ok();
    }
}

#[cfg(test)]
mod by_purpose_tests {
    use super::*;

    #[tokio::test]
    async fn standing_answers_repeat_by_purpose_after_the_queue() {
        let model = ScriptedModel::from_json_str(
            r#"{"model": "demo", "replies": [{"content": "first"}],
                "by_purpose": {"a": {"content": "A"}, "b": {"json": {"x": 1}}}}"#,
        )
        .unwrap();
        let ask = |purpose: &str| ChatRequest { purpose: purpose.into(), ..Default::default() };
        assert_eq!(model.chat(&ask("a")).await.unwrap().content, "first");
        for _ in 0..3 {
            assert_eq!(model.chat(&ask("a")).await.unwrap().content, "A");
            assert_eq!(model.chat(&ask("b")).await.unwrap().content, r#"{"x":1}"#);
        }
        assert!(matches!(model.chat(&ask("c")).await, Err(LlmError::ScriptExhausted { .. })));
    }

    #[tokio::test(start_paused = true)]
    async fn a_script_delay_holds_every_reply_without_its_own() {
        let model = ScriptedModel::from_json_str(
            r#"{"model": "slow", "delay_ms": 500, "replies": [{"content": "own", "delay_ms": 20}, {"content": "queued"}],
                "by_purpose": {"a": {"content": "A"}}}"#,
        )
        .unwrap();
        let ask = ChatRequest { purpose: "a".into(), ..Default::default() };
        for (expected, delay) in [("own", 20), ("queued", 500), ("A", 500), ("A", 500)] {
            let started = tokio::time::Instant::now();
            assert_eq!(model.chat(&ask).await.unwrap().content, expected);
            assert_eq!(started.elapsed(), Duration::from_millis(delay), "{expected}");
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_jittered_delay_varies_within_its_bounds_and_repeats_with_the_script() {
        let script = r#"{"model": "slow", "delay_ms": 500, "delay_jitter_ms": 100,
            "replies": [{"content": "own", "delay_ms": 20}], "by_purpose": {"a": {"content": "A"}}}"#;
        let ask = ChatRequest { purpose: "a".into(), ..Default::default() };
        let waits = |model: ScriptedModel| {
            let ask = ask.clone();
            async move {
                let mut waits = Vec::new();
                for _ in 0..200 {
                    let started = tokio::time::Instant::now();
                    model.chat(&ask).await.unwrap();
                    waits.push(started.elapsed());
                }
                waits
            }
        };
        let first = waits(ScriptedModel::from_json_str(script).unwrap()).await;
        // A reply's own delay is not jittered.
        assert_eq!(first[0], Duration::from_millis(20));
        let drawn = &first[1..];
        assert!(drawn.iter().all(|d| (400..=600).contains(&d.as_millis())), "{drawn:?}");
        // Spread over the range, not stuck at one value: both halves are drawn.
        assert!(drawn.iter().any(|d| d.as_millis() < 450) && drawn.iter().any(|d| d.as_millis() > 550));
        let mean = drawn.iter().sum::<Duration>() / drawn.len() as u32;
        assert!((470..=530).contains(&mean.as_millis()), "mean {mean:?}");
        assert_eq!(waits(ScriptedModel::from_json_str(script).unwrap()).await, first, "same script, same waits");

        for (bad, says) in [
            (r#"{"model": "m", "delay_jitter_ms": 5}"#, "needs a top-level `delay_ms`"),
            (r#"{"model": "m", "delay_ms": 5, "delay_jitter_ms": 6}"#, "is more than `delay_ms`"),
        ] {
            match ScriptedModel::from_json_str(bad) {
                Err(LlmError::Config { field: "scripted.file", problem }) => {
                    assert!(problem.contains(says), "{problem}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }
}

#[cfg(test)]
mod tool_call_tests {
    use serde_json::json;

    use super::*;
    use crate::{ChatMessage, ToolSpec};

    fn tool(name: &str) -> ToolSpec {
        ToolSpec {
            name: name.to_owned(),
            description: format!("the {name} tool"),
            parameters: json!({"type": "object", "properties": {"user_id": {"type": "string"}}}),
        }
    }

    fn offering(purpose: &str, tools: &[&str]) -> ChatRequest {
        ChatRequest {
            tools: tools.iter().map(|name| tool(name)).collect(),
            ..ChatRequest::new(purpose, vec![ChatMessage::user("look up u002")])
        }
    }

    #[tokio::test]
    async fn tool_call_replies_carry_generated_ids_and_empty_content() {
        let model = ScriptedModel::new("s")
            .with_reply(ScriptedReply::tool_call("lookup_user", json!({"user_id": "u002"})))
            .with_reply(ScriptedReply::tool_calls([
                ScriptedToolCall::new("lookup_user", json!({"user_id": "u001"})),
                ScriptedToolCall::new("list_grants", json!({})),
            ]))
            .with_reply(ScriptedReply::text("done"));
        let request = offering("investigate", &["lookup_user", "list_grants"]);

        let first = model.chat(&request).await.unwrap();
        assert_eq!(first.content, "");
        assert_eq!(
            first.tool_calls,
            vec![ToolCall {
                id: "call_1".into(),
                name: "lookup_user".into(),
                arguments: r#"{"user_id":"u002"}"#.into()
            }]
        );
        assert_eq!(first.usage.completion_tokens, 2, "the name and the arguments are counted");

        let second = model.chat(&request).await.unwrap();
        let ids: Vec<&str> = second.tool_calls.iter().map(|c| c.id.as_str()).collect();
        assert_eq!(ids, ["call_2", "call_3"], "ids keep counting across replies");
        assert_eq!(second.tool_calls[1].name, "list_grants");
        assert_eq!(second.tool_calls[1].arguments, "{}");

        let third = model.chat(&request).await.unwrap();
        assert_eq!(third.content, "done");
        assert!(third.tool_calls.is_empty());
    }

    #[tokio::test]
    async fn a_tool_call_to_a_request_without_tools_fails_loudly_and_stays_queued() {
        let model = ScriptedModel::new("s").with_reply(ScriptedReply::tool_call("lookup_user", json!({})));
        let error = model.chat(&offering("chat", &[])).await.unwrap_err();
        assert!(matches!(error, LlmError::Config { field: "scripted.tool_calls", .. }), "{error}");
        assert!(error.to_string().contains("offers no tools"), "{error}");
        assert!(!error.is_retryable());
        assert_eq!(model.remaining(), 1, "the reply stays queued, as on a purpose mismatch");
        assert_eq!(model.chat(&offering("chat", &["lookup_user"])).await.unwrap().tool_calls[0].id, "call_1");
    }

    #[tokio::test]
    async fn a_call_of_a_tool_the_request_does_not_offer_fails_loudly() {
        let model = ScriptedModel::new("s").with_reply(ScriptedReply::tool_calls([
            ScriptedToolCall::new("lookup_user", json!({})),
            ScriptedToolCall::new("delete_user", json!({})),
        ]));
        let error = model.chat(&offering("investigate", &["lookup_user", "list_grants"])).await.unwrap_err();
        assert!(matches!(error, LlmError::Config { field: "scripted.tool_calls", .. }), "{error}");
        let message = error.to_string();
        assert!(
            message.contains("\"delete_user\"") && message.contains("[\"lookup_user\", \"list_grants\"]"),
            "{message}"
        );
    }

    #[tokio::test]
    async fn script_files_carry_tool_calls() {
        let model = ScriptedModel::from_json_str(
            r#"{"model": "demo", "replies": [
                {"purpose": "investigate", "tool_calls": [{"name": "lookup_user", "arguments": {"user_id": "u002"}}]},
                {"tool_calls": [{"name": "list_grants"}], "content": "Checking the grants."},
                {"json": {"summary": "u002 lost access on a role change"}}
            ]}"#,
        )
        .unwrap();
        let request = offering("investigate", &["lookup_user", "list_grants"]);
        let first = model.chat(&request).await.unwrap();
        assert_eq!((first.content.as_str(), first.tool_calls.len()), ("", 1));
        assert_eq!(first.tool_calls[0].arguments, r#"{"user_id":"u002"}"#);
        let second = model.chat(&request).await.unwrap();
        assert_eq!(second.content, "Checking the grants.");
        assert_eq!(second.tool_calls[0].id, "call_2");
        assert_eq!(second.tool_calls[0].arguments, "{}", "arguments default to an empty object");
        assert!(model.chat(&request).await.unwrap().tool_calls.is_empty());

        for (script, problem) in [
            (r#"[{"tool_calls": []}]"#, "empty `tool_calls`"),
            (r#"[{"tool_calls": [{"name": "t"}], "json": {}}]"#, "both `tool_calls` and `json`"),
            (r#"[{"tool_calls": [{"name": "t"}], "fail": {"kind": "timeout"}}]"#, "both `tool_calls` and `fail`"),
            (r#"[{"tool_calls": [{"name": "t", "args": {}}]}]"#, "invalid script"),
            (r#"[{"tool_calls": [{"arguments": {}}]}]"#, "invalid script"),
        ] {
            let error = ScriptedModel::from_json_str(script).unwrap_err();
            assert!(matches!(error, LlmError::Config { field: "scripted.file", .. }), "{script}: {error}");
            assert!(error.to_string().contains(problem), "{script}: {error}");
        }
    }
}
