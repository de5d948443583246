//! W1's rules-following SCRIPTED model (a test double, not an LLM) served over HTTP as an
//! OpenAI-compatible chat completions endpoint on loopback, for benches that drive a real
//! `frontdesk-server` process: the server is configured with `provider = "openai"` and
//! `base_url` pointing here, so every model call it makes crosses a real HTTP connection and is
//! answered by [`crate::rules::w1_reply`], exactly as the in-process benches answer it.
//!
//! An HTTP request does not carry the call's purpose, which the rules need. It is recovered from
//! what the server sends: a structured call names its JSON schema after its purpose
//! (`frontdesk_llm::schema_name`), and each free-text call starts with its node's system prompt
//! (`frontdesk_workflows::intake::prompts`). A request that matches neither is answered with
//! HTTP 400 and counted in [`RulesEndpoint::unanswered`], so a bench can fail loudly instead of
//! measuring a workflow the rules do not drive.

use std::{
    net::SocketAddr,
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
};

use axum::{
    body::{Body, Bytes},
    extract::State,
    http::StatusCode,
    response::Response,
    routing::post,
    serve::ListenerExt,
    Router,
};
use frontdesk_llm::{schema_name, ChatMessage, ChatRequest};
use frontdesk_workflows::intake::prompts;
use serde_json::{json, Value};

use crate::rules::w1_reply;

/// The model name the endpoint reports (and the name the server is configured with).
pub const MODEL_NAME: &str = "scripted-w1-rules-http";

/// Purposes of the intake workflow's structured calls.
const STRUCTURED: [&str; 5] =
    ["supervisor.route", "elicitation.extract", "elicitation.infer", "team_matching.match", "review.classify"];

/// Free-text calls, by the system prompt they start with.
const TEXT: [(&str, &str); 4] = [
    (prompts::CHAT_CHAT, "chat.chat"),
    (prompts::CHAT_ELICITATION, "chat.elicitation"),
    (prompts::CHAT_REVIEW, "chat.review"),
    (prompts::NO_MATCH, "team_matching.no_match"),
];

#[derive(Default)]
struct Counters {
    /// Milliseconds each answer waits before it is sent (a model's latency).
    latency_ms: AtomicU64,
    answered: AtomicU64,
    unanswered: AtomicU64,
    first_problem: std::sync::Mutex<Option<String>>,
}

/// The running endpoint; stops when dropped.
pub struct RulesEndpoint {
    pub addr: SocketAddr,
    counters: Arc<Counters>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RulesEndpoint {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RulesEndpoint {
    /// Binds 127.0.0.1:0 and serves until dropped. Needs a running tokio runtime.
    pub async fn start() -> Result<Self, String> {
        let counters = Arc::new(Counters::default());
        let app = Router::new()
            .route("/v1/chat/completions", post(handle))
            .route("/chat/completions", post(handle))
            .with_state(counters.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        // Without TCP_NODELAY a reply's last segment waits for the server's delayed ACK (about
        // 40 ms on Linux) on every call.
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                eprintln!("scripted model endpoint stopped: {e}");
            }
        });
        Ok(Self { addr, counters, task })
    }

    /// The `base_url` to configure the server with.
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Makes every later answer wait `latency` first, as a real model's would.
    pub fn set_latency(&self, latency: std::time::Duration) {
        self.counters.latency_ms.store(latency.as_millis() as u64, Ordering::Relaxed);
    }

    /// Requests answered by the rules.
    pub fn answered(&self) -> u64 {
        self.counters.answered.load(Ordering::Relaxed)
    }

    /// Requests the rules could not answer (answered with HTTP 400), and the first of them.
    pub fn unanswered(&self) -> (u64, Option<String>) {
        let first = self.counters.first_problem.lock().map(|p| p.clone()).unwrap_or_default();
        (self.counters.unanswered.load(Ordering::Relaxed), first)
    }
}

/// The call's purpose, recovered from the request body (see the module docs).
fn purpose_of(body: &Value) -> Option<&'static str> {
    if let Some(name) = body["response_format"]["json_schema"]["name"].as_str() {
        return STRUCTURED.into_iter().find(|p| schema_name(p) == name);
    }
    let system =
        body["messages"].as_array()?.iter().find(|m| m["role"] == "system").and_then(|m| m["content"].as_str())?;
    TEXT.into_iter().find(|(prompt, _)| system.starts_with(prompt)).map(|(_, purpose)| purpose)
}

fn messages_of(body: &Value) -> Result<Vec<ChatMessage>, String> {
    let list = body["messages"].as_array().ok_or("no messages")?;
    list.iter()
        .map(|m| {
            let content = match &m["content"] {
                Value::String(s) => s.clone(),
                // Content parts: the text parts, joined.
                Value::Array(parts) => parts.iter().filter_map(|p| p["text"].as_str()).collect::<Vec<_>>().join(""),
                Value::Null => String::new(),
                other => return Err(format!("unexpected content {other}")),
            };
            match m["role"].as_str() {
                Some("system" | "developer") => Ok(ChatMessage::system(content)),
                Some("user") => Ok(ChatMessage::user(content)),
                Some("assistant") => Ok(ChatMessage::assistant(content)),
                other => Err(format!("unexpected role {other:?}")),
            }
        })
        .collect()
}

fn words(text: &str) -> u64 {
    text.split_whitespace().count() as u64
}

fn reply_for(body: &Value) -> Result<(String, u64), String> {
    let purpose = purpose_of(body).ok_or("the request matches no intake call the W1 rules answer")?;
    let request = ChatRequest::new(purpose, messages_of(body)?);
    let content = w1_reply(&request).map_err(|e| format!("{purpose}: {e}"))?;
    let prompt_words = request.messages.iter().map(|m| words(&m.content)).sum();
    Ok((content, prompt_words))
}

async fn handle(State(counters): State<Arc<Counters>>, body: Bytes) -> Response {
    let latency = counters.latency_ms.load(Ordering::Relaxed);
    if latency > 0 {
        tokio::time::sleep(std::time::Duration::from_millis(latency)).await;
    }
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (content, prompt_tokens) = match reply_for(&body) {
        Ok(reply) => reply,
        Err(problem) => {
            counters.unanswered.fetch_add(1, Ordering::Relaxed);
            if let Ok(mut first) = counters.first_problem.lock() {
                first.get_or_insert_with(|| problem.clone());
            }
            let error = json!({"error": {"message": problem, "type": "invalid_request_error"}});
            return respond(StatusCode::BAD_REQUEST, "application/json", error.to_string());
        }
    };
    counters.answered.fetch_add(1, Ordering::Relaxed);
    let usage = json!({
        "prompt_tokens": prompt_tokens,
        "completion_tokens": words(&content),
        "total_tokens": prompt_tokens + words(&content),
    });
    if body["stream"] == true {
        // Server-sent events: the role, the whole content as one delta, the finish, the usage.
        let chunk = |delta: Value, finish: Value| {
            json!({
                "id": "chatcmpl-w1", "object": "chat.completion.chunk", "created": 0, "model": MODEL_NAME,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            })
        };
        let chunks = [
            chunk(json!({"role": "assistant", "content": ""}), Value::Null),
            chunk(json!({"content": content}), Value::Null),
            chunk(json!({}), json!("stop")),
            json!({
                "id": "chatcmpl-w1", "object": "chat.completion.chunk", "created": 0, "model": MODEL_NAME,
                "choices": [], "usage": usage,
            }),
        ];
        let mut sse = String::new();
        for c in &chunks {
            sse.push_str("data: ");
            sse.push_str(&c.to_string());
            sse.push_str("\n\n");
        }
        sse.push_str("data: [DONE]\n\n");
        return respond(StatusCode::OK, "text/event-stream", sse);
    }
    let completion = json!({
        "id": "chatcmpl-w1",
        "object": "chat.completion",
        "created": 0,
        "model": MODEL_NAME,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}],
        "usage": usage,
    });
    respond(StatusCode::OK, "application/json", completion.to_string())
}

fn respond(status: StatusCode, content_type: &str, body: String) -> Response {
    Response::builder()
        .status(status)
        .header("content-type", content_type)
        .body(Body::from(body))
        .unwrap_or_else(|_| Response::new(Body::empty()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_are_recovered_from_what_the_server_sends() {
        let structured =
            json!({"response_format": {"type": "json_schema", "json_schema": {"name": "team_matching_match"}}});
        assert_eq!(purpose_of(&structured), Some("team_matching.match"));
        let review = json!({"messages": [{"role": "system", "content": format!("{}\n", prompts::CHAT_REVIEW)}]});
        assert_eq!(purpose_of(&review), Some("chat.review"));
        assert_eq!(purpose_of(&json!({"messages": [{"role": "system", "content": "other"}]})), None);
    }

    #[test]
    fn a_structured_call_is_answered_by_the_rules() {
        let prompt = "Current mode: CHAT\nRecent messages:\nuser: I want to raise a change request\nWhich agent?";
        let body = json!({
            "response_format": {"type": "json_schema", "json_schema": {"name": "supervisor_route"}},
            "messages": [{"role": "system", "content": "s"}, {"role": "user", "content": prompt}],
        });
        let (content, _) = reply_for(&body).unwrap();
        let v: Value = serde_json::from_str(&content).unwrap();
        assert_eq!(v["route"], "elicitation_agent");
    }
}
