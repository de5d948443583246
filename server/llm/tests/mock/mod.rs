//! A local mock of the OpenAI chat completions API (real HTTP on 127.0.0.1:0), scripted per test.

#![allow(dead_code)]

use std::collections::VecDeque;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::Response;
use axum::Router;
use serde_json::{json, Value};

#[derive(Clone, Debug)]
pub enum MockBody {
    Json(Value),
    Text(String),
    /// SSE `data:` payloads, followed by `data: [DONE]`.
    Sse(Vec<Value>),
}

#[derive(Clone, Debug)]
pub struct MockReply {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: MockBody,
    pub delay: Duration,
}

impl MockReply {
    pub fn json(status: u16, body: Value) -> Self {
        Self { status, headers: Vec::new(), body: MockBody::Json(body), delay: Duration::ZERO }
    }

    pub fn text(status: u16, body: &str) -> Self {
        Self { status, headers: Vec::new(), body: MockBody::Text(body.to_owned()), delay: Duration::ZERO }
    }

    /// A successful chat completion with this content.
    pub fn completion(content: &str) -> Self {
        Self::completion_ending(content, "stop")
    }

    /// A chat completion with this content that ended for `finish_reason`.
    pub fn completion_ending(content: &str, finish_reason: &str) -> Self {
        let mut body = completion_body(content, 12, 5);
        body["choices"][0]["finish_reason"] = json!(finish_reason);
        Self::json(200, body)
    }

    /// A chat completion in which the model refused: `message.refusal` set, no content.
    pub fn refusal(refusal: &str) -> Self {
        let mut body = completion_body("", 12, 5);
        body["choices"][0]["message"] = json!({"role": "assistant", "content": null, "refusal": refusal});
        Self::json(200, body)
    }

    /// A streamed refusal: one chunk per part of `delta.refusal`, then a usage chunk.
    pub fn stream_refusal(parts: &[&str]) -> Self {
        let deltas: Vec<Value> = parts.iter().map(|part| json!({ "refusal": part })).collect();
        Self::stream_deltas(deltas, "stop")
    }

    /// A streamed completion: one chunk per delta, then a usage chunk.
    pub fn stream(deltas: &[&str]) -> Self {
        Self::stream_ending(deltas, "stop")
    }

    /// [`MockReply::stream`] whose last choice chunk carries `finish_reason`.
    pub fn stream_ending(deltas: &[&str], finish_reason: &str) -> Self {
        Self::stream_deltas(deltas.iter().map(|d| json!({ "content": d })).collect(), finish_reason)
    }

    /// A stream of these `delta` objects, the last choice chunk carrying `finish_reason`.
    fn stream_deltas(deltas: Vec<Value>, finish_reason: &str) -> Self {
        let mut chunks: Vec<Value> = Vec::new();
        chunks.push(chunk(json!({"role": "assistant", "content": ""}), None));
        for delta in deltas {
            chunks.push(chunk(delta, None));
        }
        chunks.push(chunk(json!({}), Some(finish_reason)));
        chunks.push(json!({
            "id": "chatcmpl-stream", "object": "chat.completion.chunk", "created": 1_700_000_000,
            "model": "gpt-test-2024", "choices": [],
            "usage": {"prompt_tokens": 9, "completion_tokens": 4, "total_tokens": 13}
        }));
        Self { status: 200, headers: Vec::new(), body: MockBody::Sse(chunks), delay: Duration::ZERO }
    }

    pub fn header(mut self, name: &'static str, value: &str) -> Self {
        self.headers.push((name, value.to_owned()));
        self
    }

    pub fn delayed(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }
}

fn chunk(delta: Value, finish_reason: Option<&str>) -> Value {
    json!({
        "id": "chatcmpl-stream", "object": "chat.completion.chunk", "created": 1_700_000_000,
        "model": "gpt-test-2024",
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]
    })
}

pub fn completion_body(content: &str, prompt_tokens: u32, completion_tokens: u32) -> Value {
    json!({
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "created": 1_700_000_000,
        "model": "gpt-test-2024",
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": content},
            "finish_reason": "stop"
        }],
        "usage": {
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens
        }
    })
}

#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub query: Option<String>,
    pub headers: HeaderMap,
    pub body: Value,
}

#[derive(Default)]
struct MockState {
    replies: Mutex<VecDeque<MockReply>>,
    fallback: Mutex<Option<MockReply>>,
    requests: Mutex<Vec<Recorded>>,
    hits: AtomicUsize,
}

pub struct MockServer {
    pub addr: SocketAddr,
    state: Arc<MockState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for MockServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl MockServer {
    pub async fn start() -> Self {
        let state = Arc::new(MockState::default());
        let app = Router::new().fallback(handle).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind mock server");
        let addr = listener.local_addr().expect("mock server address");
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.expect("mock server");
        });
        Self { addr, state, task }
    }

    /// OpenAI-style base URL (`/v1`).
    pub fn base_url(&self) -> String {
        format!("http://{}/v1", self.addr)
    }

    /// Root URL (for Azure endpoints).
    pub fn root_url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn push(&self, reply: MockReply) -> &Self {
        self.state.replies.lock().unwrap().push_back(reply);
        self
    }

    /// Served when the queue is empty.
    pub fn fallback(&self, reply: MockReply) {
        *self.state.fallback.lock().unwrap() = Some(reply);
    }

    pub fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.state.requests.lock().unwrap().clone()
    }
}

async fn handle(
    State(state): State<Arc<MockState>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    state.hits.fetch_add(1, Ordering::SeqCst);
    let body_json = serde_json::from_slice(&body).unwrap_or(Value::Null);
    state.requests.lock().unwrap().push(Recorded {
        method,
        path: uri.path().to_owned(),
        query: uri.query().map(str::to_owned),
        headers,
        body: body_json,
    });
    let reply = {
        let next = state.replies.lock().unwrap().pop_front();
        next.or_else(|| state.fallback.lock().unwrap().clone())
    };
    let Some(reply) = reply else {
        return Response::builder().status(599).body(Body::from("mock has no reply left")).unwrap();
    };
    if !reply.delay.is_zero() {
        tokio::time::sleep(reply.delay).await;
    }
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        builder = builder.header(*name, value);
    }
    match reply.body {
        MockBody::Json(v) => {
            builder.header("content-type", "application/json").body(Body::from(v.to_string())).unwrap()
        }
        MockBody::Text(t) => builder.header("content-type", "application/json").body(Body::from(t)).unwrap(),
        MockBody::Sse(chunks) => {
            let events: Vec<String> = chunks
                .iter()
                .map(|c| format!("data: {c}\n\n"))
                .chain(std::iter::once("data: [DONE]\n\n".to_owned()))
                .collect();
            // Send events separately with a small gap, like a real token stream.
            let stream = futures_stream(events);
            builder.header("content-type", "text/event-stream").body(Body::from_stream(stream)).unwrap()
        }
    }
}

fn futures_stream(events: Vec<String>) -> impl futures::Stream<Item = Result<Bytes, Infallible>> + Send {
    futures::stream::unfold(events.into_iter(), |mut it| async move {
        let next = it.next()?;
        tokio::time::sleep(Duration::from_millis(5)).await;
        Some((Ok(Bytes::from(next)), it))
    })
}
