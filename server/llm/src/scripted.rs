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
//!
//! The object form may also carry `"by_purpose": {"PURPOSE": {"content": ...} | {"json": ...}}`:
//! standing answers used, any number of times, once `replies` run out (handy for a long-running
//! demo or SDK test server).
//!
//! ```json
//! [
//!   {"purpose": "supervisor.route", "json": {"route": "billing"}},
//!   {"fail": {"kind": "server", "status": 503}},
//!   {"content": "Your invoice was resent.", "delay_ms": 50}
//! ]
//! ```
//!
//! Token usage is counted crudely but deterministically: whitespace-separated words of all prompt
//! messages and of the reply.

use std::collections::VecDeque;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};

use crate::{ChatModel, ChatRequest, ChatResponse, LlmError, TokenUsage};

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

/// One canned reply.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptedReply {
    /// If set, the request's purpose must match, else the call fails with [`LlmError::Config`].
    pub purpose: Option<String>,
    pub content: String,
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
}

impl std::fmt::Debug for ScriptedModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ScriptedModel")
            .field("name", &self.name)
            .field("remaining", &self.remaining())
            .field("responder", &self.responder.is_some())
            .finish()
    }
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
        }
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
        let (name, entries, by_purpose) = match file {
            ScriptFile::Replies(replies) => ("scripted".to_owned(), replies, Default::default()),
            ScriptFile::Named { model, replies, by_purpose } => (model, replies, by_purpose),
        };
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
        for (index, entry) in entries.into_iter().enumerate() {
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
        if let Some(delay) = reply.delay {
            tokio::time::sleep(delay).await;
        }
        if let Some(fail) = &reply.fail {
            tracing::debug!(purpose = %request.purpose, failure = ?fail, "scripted model failing as scripted");
            return Err(fail.to_error());
        }
        let usage = TokenUsage {
            prompt_tokens: request.messages.iter().map(|m| count_words(&m.content)).sum(),
            completion_tokens: count_words(&reply.content),
        };
        Ok(ChatResponse { content: reply.content, tool_calls: Vec::new(), usage, model: self.name.clone() })
    }
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
        let err = client.complete(req("p", ""), &opts).await.unwrap_err();
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
}
