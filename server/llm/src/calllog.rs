//! Structured log of finished LLM calls.
//!
//! Every call made through an [`crate::LlmClient`] goes to its call logs ([`CallLog`]), with who
//! made it ([`crate::CallContext`]: thread, run, node) when the caller said so. Three logs ship
//! here or beside the server: [`TracingCallLog`] (one tracing event per call), [`JsonLinesCallLog`]
//! (one JSON object per line in a file) and, in the server, a SQL log queryable per thread. All
//! of them write the prompt and reply either in full or redacted to per-message role and
//! character count ([`CallLogEntry`]), as configured; redacted, a failed call's error keeps its
//! kind but not text that can quote the reply ([`error_text`]).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

use crate::{CallContext, ChatRequest, ChatResponse, LlmError, TokenUsage};

/// One finished call, as recorded.
#[derive(Debug, Clone, PartialEq)]
pub struct CallRecord {
    pub purpose: String,
    /// The model that answered (or the configured model when the call failed).
    pub model: String,
    /// Also of a failed call whose reply arrived but could not be used ([`LlmError::usage`]).
    pub usage: TokenUsage,
    pub cost_usd: f64,
    /// Wall time including retries and backoff.
    pub latency: Duration,
    /// HTTP attempts made (including retries; structured output sums both calls).
    pub attempts: u32,
    /// Who made the call (the request's [`ChatRequest::context`]); `None` for calls made
    /// outside a workflow run.
    pub context: Option<CallContext>,
    /// When the call finished (for a folded record, the last one).
    pub at: SystemTime,
}

impl CallRecord {
    /// Folds a later call into this one (used when one logical call needed several requests).
    pub fn absorb(&mut self, other: &CallRecord) {
        self.model.clone_from(&other.model);
        self.usage += other.usage;
        self.cost_usd += other.cost_usd;
        self.latency += other.latency;
        self.attempts += other.attempts;
        self.at = self.at.max(other.at);
        if self.context.is_none() {
            self.context.clone_from(&other.context);
        }
    }
}

/// A call made through an [`crate::LlmClient`] that failed, with its record: the replies that
/// arrived and could not be used (refused, cut short, invalid after the repair attempt) were
/// billed all the same, so a caller that counts what a run spent counts them too.
#[derive(Debug)]
pub struct CallFailure {
    pub error: LlmError,
    /// What the call cost and took, every attempt and the repair attempt included.
    pub record: CallRecord,
}

impl std::fmt::Display for CallFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.error.fmt(f)
    }
}

impl std::error::Error for CallFailure {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.error.source()
    }
}

/// For callers that do not count what a failed call spent.
impl From<CallFailure> for LlmError {
    fn from(failure: CallFailure) -> Self {
        failure.error
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
        let error_message = error.map(|e| error_text(e, self.full_prompts)).unwrap_or_default();
        let tool_calls = response.map(|r| r.tool_calls.len()).unwrap_or(0);
        let context = record.context.clone().unwrap_or_default();
        if self.full_prompts {
            let messages = serde_json::to_string(&request.messages).unwrap_or_default();
            let reply = response.map(|r| r.content.as_str()).unwrap_or("");
            tracing::info!(
                target: CALL_LOG_TARGET,
                thread_id = %context.thread_id,
                run_id = %context.run_id,
                node = %context.node,
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
                thread_id = %context.thread_id,
                run_id = %context.run_id,
                node = %context.node,
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

/// One call as the file and SQL logs write it: who, what, how much, and the prompt and reply in
/// full or redacted (see [`CallLogEntry::new`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallLogEntry {
    /// When the call finished, in milliseconds since the Unix epoch.
    pub at_ms: i64,
    /// The thread (conversation, ticket thread, investigation or research id); empty for a call
    /// made outside a workflow run.
    pub thread_id: String,
    pub run_id: String,
    pub node: String,
    pub purpose: String,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    pub latency_ms: u64,
    pub attempts: u32,
    /// [`LlmError::kind`] of a failed call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error_kind: Option<String>,
    /// The error of a failed call, as displayed; redacted, without text that can quote the reply
    /// (see [`error_text`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The prompt messages: `[{"role", "content"}]` in full, `[{"role", "chars"}]` redacted.
    pub prompt: Value,
    /// The reply (`null` for a failed call): `{"content", "tool_calls": [{"name", "arguments"}]}`
    /// in full, `{"chars", "tool_calls": [{"name", "chars"}]}` redacted.
    pub response: Value,
}

impl CallLogEntry {
    /// The entry of one call. Prompts may contain customer data, so unless `full_prompts` only
    /// each message's role and character count are kept, and of the reply its character count
    /// and the names of the tools it called.
    pub fn new(
        request: &ChatRequest,
        response: Option<&ChatResponse>,
        record: &CallRecord,
        error: Option<&LlmError>,
        full_prompts: bool,
    ) -> Self {
        let context = record.context.as_ref().or(request.context.as_ref());
        Self {
            at_ms: unix_ms(record.at),
            thread_id: context.map(|c| c.thread_id.clone()).unwrap_or_default(),
            run_id: context.map(|c| c.run_id.clone()).unwrap_or_default(),
            node: context.map(|c| c.node.clone()).unwrap_or_default(),
            purpose: record.purpose.clone(),
            model: record.model.clone(),
            prompt_tokens: record.usage.prompt_tokens,
            completion_tokens: record.usage.completion_tokens,
            cost_usd: record.cost_usd,
            latency_ms: u64::try_from(record.latency.as_millis()).unwrap_or(u64::MAX),
            attempts: record.attempts,
            error_kind: error.map(|e| e.kind().to_owned()),
            error: error.map(|e| error_text(e, full_prompts)),
            prompt: prompt_json(request, full_prompts),
            response: response.map_or(Value::Null, |r| response_json(r, full_prompts)),
        }
    }
}

/// The prompt messages of a request as call logs keep them (see [`CallLogEntry::prompt`]).
pub fn prompt_json(request: &ChatRequest, full_prompts: bool) -> Value {
    request
        .messages
        .iter()
        .map(|m| {
            if full_prompts {
                json!({"role": m.role, "content": m.content})
            } else {
                json!({"role": m.role, "chars": m.content.chars().count()})
            }
        })
        .collect()
}

/// A reply as call logs keep it (see [`CallLogEntry::response`]).
pub fn response_json(response: &ChatResponse, full_prompts: bool) -> Value {
    if full_prompts {
        let calls: Vec<Value> =
            response.tool_calls.iter().map(|c| json!({"name": c.name, "arguments": c.arguments})).collect();
        json!({"content": response.content, "tool_calls": calls})
    } else {
        let calls: Vec<Value> =
            response.tool_calls.iter().map(|c| json!({"name": c.name, "chars": c.arguments.chars().count()})).collect();
        json!({"chars": response.content.chars().count(), "tool_calls": calls})
    }
}

/// A failed call's error as call logs keep it (see [`CallLogEntry::error`]): as displayed with
/// `full_prompts`; redacted, errors whose text can quote the model's reply keep only what kind
/// of failure it was and the attempt count. A validation error names the value it refused
/// (serde's "unknown variant `...`" of a field the model filled from the customer's message),
/// and a malformed reply may be shown whole. The other errors carry our own words or the
/// provider's, which stay.
pub fn error_text(error: &LlmError, full_prompts: bool) -> String {
    if full_prompts {
        return error.to_string();
    }
    match error {
        LlmError::InvalidOutput { attempts, .. } => {
            format!("model output failed validation after {attempts} attempts (details redacted)")
        }
        LlmError::MalformedResponse { .. } => "malformed provider response (details redacted)".to_owned(),
        LlmError::Exhausted { attempts, last } => {
            format!("llm call failed after {attempts} attempts: {}", error_text(last, false))
        }
        other => other.to_string(),
    }
}

/// Milliseconds since the Unix epoch (negative before it).
fn unix_ms(t: SystemTime) -> i64 {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => i64::try_from(d.as_millis()).unwrap_or(i64::MAX),
        Err(e) => i64::try_from(e.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// A [`CallLog`] appending one JSON object ([`CallLogEntry`]) per line to a file.
///
/// Each line is encoded first and then written whole, with one `write` to the file opened for
/// appending, under a std mutex: a few microseconds per call, which the async runtime tolerates
/// at model-call rates (a call takes far longer). Nothing is buffered, so a failed write never
/// leaves half a line to be flushed later. A write that fails is logged once (at `error`, on
/// target `frontdesk::llm_calls`) and the line dropped; the first success after failures is
/// logged too. Never panics.
pub struct JsonLinesCallLog {
    path: PathBuf,
    full_prompts: bool,
    file: Mutex<File>,
    failing: AtomicBool,
}

impl std::fmt::Debug for JsonLinesCallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JsonLinesCallLog")
            .field("path", &self.path)
            .field("full_prompts", &self.full_prompts)
            .finish_non_exhaustive()
    }
}

impl JsonLinesCallLog {
    /// Opens `path` for appending, creating the file (not its directory) if needed.
    pub fn open(path: impl AsRef<Path>, full_prompts: bool) -> std::io::Result<Self> {
        let path = path.as_ref().to_path_buf();
        let file = OpenOptions::new().create(true).append(true).open(&path)?;
        Ok(Self { path, full_prompts, file: Mutex::new(file), failing: AtomicBool::new(false) })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&self, line: &[u8]) -> std::io::Result<()> {
        let mut file = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        file.write_all(line)
    }
}

impl CallLog for JsonLinesCallLog {
    fn record(
        &self,
        request: &ChatRequest,
        response: Option<&ChatResponse>,
        record: &CallRecord,
        error: Option<&LlmError>,
    ) {
        let entry = CallLogEntry::new(request, response, record, error, self.full_prompts);
        let mut line = match serde_json::to_vec(&entry) {
            Ok(line) => line,
            Err(error) => {
                tracing::error!(target: CALL_LOG_TARGET, %error, "cannot encode an llm call log line");
                return;
            }
        };
        line.push(b'\n');
        match self.append(&line) {
            Ok(()) => {
                if self.failing.swap(false, Ordering::Relaxed) {
                    tracing::info!(target: CALL_LOG_TARGET, path = %self.path.display(), "llm call log file writable again");
                }
            }
            Err(error) => {
                if !self.failing.swap(true, Ordering::Relaxed) {
                    tracing::error!(
                        target: CALL_LOG_TARGET,
                        path = %self.path.display(),
                        %error,
                        "cannot write the llm call log file; calls are not logged there until it works again"
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::{CallOptions, ChatMessage, LlmClient, ScriptedModel, ScriptedReply};

    /// A file under the system temp directory, removed on drop.
    struct TempFile(PathBuf);

    impl TempFile {
        fn new(name: &str) -> Self {
            let nanos = SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_nanos();
            Self(std::env::temp_dir().join(format!("frontdesk-calllog-{name}-{}-{nanos}.jsonl", std::process::id())))
        }
    }

    impl Drop for TempFile {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
        }
    }

    fn context() -> CallContext {
        CallContext { thread_id: "conv-1".into(), run_id: "run-1".into(), node: "supervisor".into() }
    }

    fn request() -> ChatRequest {
        ChatRequest {
            context: Some(context()),
            ..ChatRequest::new(
                "supervisor.route",
                vec![ChatMessage::system("Route the message."), ChatMessage::user("My card number is 4111")],
            )
        }
    }

    fn lines(path: &Path) -> Vec<Value> {
        std::fs::read_to_string(path).unwrap().lines().map(|l| serde_json::from_str(l).unwrap()).collect()
    }

    async fn two_calls(log: Arc<JsonLinesCallLog>) {
        let model = Arc::new(ScriptedModel::new("s"));
        model.push_reply(ScriptedReply::text("billing"));
        let client = LlmClient::new(model.clone()).with_call_log(log);
        client.complete(request(), &CallOptions::default()).await.unwrap();
        // The script is empty now: the second call fails, and is logged too.
        client.complete(request(), &CallOptions::default()).await.unwrap_err();
    }

    #[tokio::test]
    async fn redacted_lines_carry_who_and_how_much_but_no_text() {
        let file = TempFile::new("redacted");
        let log = Arc::new(JsonLinesCallLog::open(&file.0, false).unwrap());
        two_calls(log).await;
        let lines = lines(&file.0);
        assert_eq!(lines.len(), 2, "{lines:?}");
        let ok = &lines[0];
        assert_eq!(ok["thread_id"], "conv-1");
        assert_eq!(ok["run_id"], "run-1");
        assert_eq!(ok["node"], "supervisor");
        assert_eq!(ok["purpose"], "supervisor.route");
        assert_eq!(ok["model"], "s");
        assert!(ok["prompt_tokens"].as_u64().unwrap() > 0);
        assert_eq!(ok["completion_tokens"], 1);
        assert_eq!(ok["attempts"], 1);
        assert!(ok["at_ms"].as_i64().unwrap() > 1_700_000_000_000);
        assert!(ok.get("error").is_none());
        assert_eq!(
            ok["prompt"],
            json!([{"role": "system", "chars": 18}, {"role": "user", "chars": 22}]),
            "roles and character counts only"
        );
        assert_eq!(ok["response"], json!({"chars": 7, "tool_calls": []}));
        let text = std::fs::read_to_string(&file.0).unwrap();
        assert!(!text.contains("4111") && !text.contains("billing"), "no prompt or reply text: {text}");

        let failed = &lines[1];
        assert_eq!(failed["error_kind"], "script_exhausted");
        assert!(failed["error"].as_str().unwrap().contains("no reply left"));
        assert_eq!(failed["response"], Value::Null);
        assert_eq!(failed["thread_id"], "conv-1");
    }

    #[tokio::test]
    async fn full_lines_carry_the_prompt_and_reply_and_the_file_is_appended_to() {
        let file = TempFile::new("full");
        std::fs::write(&file.0, "{\"earlier\":true}\n").unwrap();
        let log = Arc::new(JsonLinesCallLog::open(&file.0, true).unwrap());
        two_calls(log).await;
        let lines = lines(&file.0);
        assert_eq!(lines.len(), 3, "appended after the line already there: {lines:?}");
        assert_eq!(lines[0], json!({"earlier": true}));
        assert_eq!(
            lines[1]["prompt"],
            json!([
                {"role": "system", "content": "Route the message."},
                {"role": "user", "content": "My card number is 4111"}
            ])
        );
        assert_eq!(lines[1]["response"], json!({"content": "billing", "tool_calls": []}));
    }

    #[test]
    fn a_call_without_context_has_empty_ids_and_tool_calls_are_redacted_to_names() {
        let request = ChatRequest::new("x", vec![ChatMessage::user("hi")]);
        let record = CallRecord {
            purpose: "x".into(),
            model: "m".into(),
            usage: TokenUsage { prompt_tokens: 2, completion_tokens: 3 },
            cost_usd: 0.5,
            latency: Duration::from_millis(1500),
            attempts: 2,
            context: None,
            at: UNIX_EPOCH + Duration::from_millis(42),
        };
        let response = ChatResponse {
            content: String::new(),
            tool_calls: vec![crate::ToolCall { id: "c".into(), name: "lookup".into(), arguments: "{\"a\":1}".into() }],
            usage: record.usage,
            model: "m".into(),
        };
        let entry = CallLogEntry::new(&request, Some(&response), &record, None, false);
        assert_eq!((entry.thread_id.as_str(), entry.run_id.as_str(), entry.node.as_str()), ("", "", ""));
        assert_eq!((entry.at_ms, entry.latency_ms, entry.attempts), (42, 1500, 2));
        assert_eq!(entry.response, json!({"chars": 0, "tool_calls": [{"name": "lookup", "chars": 7}]}));
    }

    #[test]
    fn redacted_errors_keep_their_kind_but_not_the_text_of_the_reply() {
        let request = request();
        let record = CallRecord {
            purpose: "supervisor.route".into(),
            model: "m".into(),
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            latency: Duration::ZERO,
            attempts: 2,
            context: Some(context()),
            at: SystemTime::now(),
        };
        let quoting = [
            LlmError::InvalidOutput {
                attempts: 2,
                error: "the JSON does not match the schema: unknown variant `my card is 4111`, expected `billing`"
                    .into(),
                raw: "{\"route\": \"my card is 4111\"}".into(),
            },
            LlmError::malformed("the local model's tool reply has no \"tool\": \"my card is 4111\""),
            LlmError::Exhausted { attempts: 3, last: Box::new(LlmError::malformed("reply \"my card is 4111\"")) },
        ];
        for error in &quoting {
            let redacted = CallLogEntry::new(&request, None, &record, Some(error), false);
            let text = redacted.error.clone().unwrap();
            assert!(!text.contains("4111"), "{text}");
            assert_eq!(redacted.error_kind.as_deref(), Some(error.kind()));
            let line = serde_json::to_string(&redacted).unwrap();
            assert!(!line.contains("4111"), "{line}");
            let full = CallLogEntry::new(&request, None, &record, Some(error), true);
            assert_eq!(full.error, Some(error.to_string()));
        }
        let redacted = CallLogEntry::new(&request, None, &record, Some(&quoting[0]), false).error.unwrap();
        assert!(redacted.contains("failed validation after 2 attempts"), "{redacted}");

        // Errors in our or the provider's words are kept as they are.
        let server = LlmError::Exhausted {
            attempts: 3,
            last: Box::new(LlmError::Server { status: 503, message: "overloaded".into() }),
        };
        let redacted = CallLogEntry::new(&request, None, &record, Some(&server), false);
        assert_eq!(redacted.error, Some(server.to_string()));
    }

    #[test]
    fn a_write_that_fails_is_dropped_without_panicking() {
        // /dev/full accepts the open and fails every write with ENOSPC.
        let Ok(log) = JsonLinesCallLog::open("/dev/full", false) else { return };
        let record = CallRecord {
            purpose: "x".into(),
            model: "m".into(),
            usage: TokenUsage::default(),
            cost_usd: 0.0,
            latency: Duration::ZERO,
            attempts: 1,
            context: None,
            at: SystemTime::now(),
        };
        for _ in 0..3 {
            log.record(&ChatRequest::default(), None, &record, None);
        }
        assert!(log.failing.load(Ordering::Relaxed));
    }
}
