//! OpenAiProvider + LlmClient against a real local HTTP server speaking the chat completions API.

mod mock;

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use frontdesk_llm::{
    AzureConfig, CallLog, CallOptions, CallRecord, CancellationToken, ChatMessage, ChatRequest, ChatResponse,
    JsonSchemaFormat, LlmClient, LlmError, OpenAiConfig, OpenAiProvider, PriceTable, RetryPolicy, ToolSpec,
};
use mock::{MockReply, MockServer};
use serde::Deserialize;
use serde_json::json;

const KEY: &str = "sk-test-SECRET-0123456789";

fn tiny_retry(max_attempts: u32) -> RetryPolicy {
    RetryPolicy { max_attempts, initial_backoff: Duration::from_millis(5), max_backoff: Duration::from_millis(20) }
}

fn provider(server: &MockServer) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        base_url: Some(server.base_url()),
        api_key: Some(KEY.to_owned()),
        model: "gpt-test".to_owned(),
        azure: None,
        request_timeout: Duration::from_secs(10),
    })
    .expect("provider")
}

fn client(server: &MockServer, max_attempts: u32) -> LlmClient {
    LlmClient::new(Arc::new(provider(server))).with_retry(tiny_retry(max_attempts))
}

fn request(purpose: &str) -> ChatRequest {
    ChatRequest::new(purpose, vec![ChatMessage::system("You are terse."), ChatMessage::user("Where is my invoice?")])
}

#[derive(Default)]
struct RecordingLog {
    entries: Mutex<Vec<(CallRecord, bool, Option<String>)>>,
}

impl CallLog for RecordingLog {
    fn record(&self, _: &ChatRequest, response: Option<&ChatResponse>, record: &CallRecord, error: Option<&LlmError>) {
        self.entries.lock().unwrap().push((record.clone(), response.is_some(), error.map(|e| e.kind().to_owned())));
    }
}

#[tokio::test]
async fn success_parses_reply_and_sends_the_full_request() {
    let server = MockServer::start().await;
    server.push(MockReply::completion("It was sent yesterday."));
    let log = Arc::new(RecordingLog::default());
    let client = client(&server, 3)
        .with_prices(PriceTable::default().with_model("gpt-test", 1_000_000.0, 2_000_000.0))
        .with_call_log(log.clone());

    let mut req = request("support.answer");
    req.response_format = Some(JsonSchemaFormat {
        name: "answer".into(),
        schema: json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"], "additionalProperties": false}).into(),
    });
    req.max_tokens = Some(256);
    req.temperature = Some(0.25);
    req.tools = vec![ToolSpec {
        name: "lookup_invoice".into(),
        description: "Find an invoice".into(),
        parameters: json!({"type": "object", "properties": {}}),
    }];

    let (resp, record) = client.complete(req, &CallOptions::default()).await.expect("call succeeds");
    assert_eq!(resp.content, "It was sent yesterday.");
    assert_eq!(resp.model, "gpt-test-2024");
    assert_eq!(resp.usage.prompt_tokens, 12);
    assert_eq!(resp.usage.completion_tokens, 5);
    assert_eq!(record.attempts, 1);
    assert_eq!(record.purpose, "support.answer");
    // Dated model name priced through the configured prefix: 12 * 1 + 5 * 2 dollars.
    assert!((record.cost_usd - 22.0).abs() < 1e-9, "{}", record.cost_usd);

    let seen = server.requests();
    assert_eq!(seen.len(), 1);
    let r = &seen[0];
    assert_eq!(r.method, "POST");
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.headers["authorization"], format!("Bearer {KEY}"));
    let body = &r.body;
    assert_eq!(body["model"], "gpt-test");
    assert_eq!(body["messages"][0], json!({"role": "system", "content": "You are terse."}));
    assert_eq!(body["messages"][1], json!({"role": "user", "content": "Where is my invoice?"}));
    assert_eq!(body["response_format"]["type"], "json_schema");
    assert_eq!(body["response_format"]["json_schema"]["name"], "answer");
    assert_eq!(body["response_format"]["json_schema"]["strict"], true);
    assert_eq!(body["response_format"]["json_schema"]["schema"]["required"], json!(["a"]));
    assert_eq!(body["max_tokens"], 256);
    assert!((body["temperature"].as_f64().unwrap() - 0.25).abs() < 1e-6);
    assert_eq!(body["tools"][0]["type"], "function");
    assert_eq!(body["tools"][0]["function"]["name"], "lookup_invoice");
    assert!(body.get("stream").is_none());

    let entries = log.entries.lock().unwrap();
    assert_eq!(entries.len(), 1);
    assert!(entries[0].1);
}

#[tokio::test]
async fn tool_calls_are_parsed() {
    let server = MockServer::start().await;
    server.push(MockReply::json(
        200,
        json!({
            "id": "c", "object": "chat.completion", "created": 1, "model": "gpt-test",
            "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                "role": "assistant", "content": null,
                "tool_calls": [{"id": "call_1", "type": "function",
                    "function": {"name": "lookup_invoice", "arguments": "{\"id\":\"42\"}"}}]
            }}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}
        }),
    ));
    let (resp, _) = client(&server, 1).complete(request("p"), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.content, "");
    assert_eq!(resp.tool_calls.len(), 1);
    assert_eq!(resp.tool_calls[0].id, "call_1");
    assert_eq!(resp.tool_calls[0].name, "lookup_invoice");
    assert_eq!(resp.tool_calls[0].arguments, r#"{"id":"42"}"#);
}

#[tokio::test]
async fn rate_limit_honours_retry_after_then_succeeds() {
    let server = MockServer::start().await;
    server.push(
        MockReply::json(429, json!({"error": {"message": "slow down", "type": "rate_limit_error", "code": null}}))
            .header("retry-after", "1"),
    );
    server.push(MockReply::completion("ok"));
    let started = Instant::now();
    let (resp, record) = client(&server, 3).complete(request("p"), &CallOptions::default()).await.expect("succeeds");
    let elapsed = started.elapsed();
    assert_eq!(resp.content, "ok");
    assert_eq!(record.attempts, 2);
    assert_eq!(server.hits(), 2);
    assert!(elapsed >= Duration::from_millis(950), "waited only {elapsed:?}");
    assert!(elapsed < Duration::from_secs(5), "waited {elapsed:?}");
}

#[tokio::test]
async fn server_errors_exhaust_retries() {
    let server = MockServer::start().await;
    server.fallback(MockReply::text(500, "upstream exploded"));
    let log = Arc::new(RecordingLog::default());
    let client = client(&server, 3).with_call_log(log.clone());
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    match err {
        LlmError::Exhausted { attempts, last } => {
            assert_eq!(attempts, 3);
            assert!(matches!(*last, LlmError::Server { status: 500, ref message } if message == "upstream exploded"));
        }
        other => panic!("expected Exhausted, got {other:?}"),
    }
    assert_eq!(server.hits(), 3);
    let entries = log.entries.lock().unwrap();
    assert_eq!(entries.len(), 1);
    assert_eq!(entries[0].0.attempts, 3);
    assert_eq!(entries[0].2.as_deref(), Some("exhausted"));
}

#[tokio::test]
async fn malformed_body_is_not_retried() {
    let server = MockServer::start().await;
    server.fallback(MockReply::text(200, "this is {not json"));
    let err = client(&server, 4).complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err:?}");
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_reply_cut_short_by_max_tokens_is_an_error_not_retried() {
    let server = MockServer::start().await;
    server.fallback(MockReply::completion_ending(
        r#"{"context_updates":{"appointment_details":{"id":"B1"},"assig"#,
        "length",
    ));
    let log = Arc::new(RecordingLog::default());
    let client = client(&server, 3).with_call_log(log.clone());
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err:?}");
    assert!(err.to_string().contains("max_tokens"), "{err}");
    assert!(!err.is_retryable());
    assert_eq!(server.hits(), 1);
    assert_eq!(log.entries.lock().unwrap()[0].2.as_deref(), Some("malformed_response"));

    let on_delta = |_: &str| {};
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    server.push(MockReply::stream_ending(&["The invoice was ", "sent on"], "length"));
    let err = client.complete(request("p"), &opts).await.unwrap_err().error;
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "streamed: {err:?}");
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_reply_withheld_by_the_content_filter_is_a_rejection_not_retried() {
    let server = MockServer::start().await;
    server.fallback(MockReply::completion_ending("", "content_filter"));
    let client = client(&server, 3);
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert!(
        matches!(err, LlmError::Rejected { status: 200, ref message, .. } if message.contains("content filter")),
        "{err:?}"
    );
    assert_eq!(server.hits(), 1);

    let on_delta = |_: &str| {};
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    server.push(MockReply::stream_ending(&["I can"], "content_filter"));
    let err = client.complete(request("p"), &opts).await.unwrap_err().error;
    assert!(matches!(err, LlmError::Rejected { status: 200, .. }), "streamed: {err:?}");
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_finish_reason_openai_does_not_define_is_a_complete_reply() {
    let server = MockServer::start().await;
    // Values compatible servers send (TGI, vLLM, llama.cpp): not OpenAI's, and no cause to fail.
    for reason in ["eos_token", "abort", "stop_sequence"] {
        server.push(MockReply::completion_ending("It was sent yesterday.", reason));
        let (resp, record) = client(&server, 1)
            .complete(request("p"), &CallOptions::default())
            .await
            .expect("an unknown reason is fine");
        assert_eq!(resp.content, "It was sent yesterday.", "{reason}");
        assert_eq!((record.usage.prompt_tokens, record.usage.completion_tokens), (12, 5));
    }

    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    server.push(MockReply::stream_ending(&["It was ", "sent."], "eos"));
    let (resp, _) =
        client(&server, 1).complete(request("p"), &opts).await.expect("streamed, an unknown reason is fine");
    assert_eq!(resp.content, "It was sent.");
    assert_eq!(deltas.lock().unwrap().concat(), "It was sent.");
    assert_eq!(server.hits(), 4);
}

#[tokio::test]
async fn a_reply_the_model_refused_is_a_rejection_not_content() {
    let server = MockServer::start().await;
    let refusal = "I'm sorry, I cannot help with the card number 4111.";
    server.fallback(MockReply::refusal(refusal));
    let log = Arc::new(RecordingLog::default());
    let client = client(&server, 3).with_call_log(log.clone());
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert!(
        matches!(err, LlmError::Rejected { status: 200, ref message, .. } if message.contains("refused")),
        "{err:?}"
    );
    assert!(!err.is_retryable());
    assert!(!err.to_string().contains("4111"), "the model's words stay out of the error: {err}");
    assert_eq!(server.hits(), 1);
    assert_eq!(log.entries.lock().unwrap()[0].2.as_deref(), Some("rejected"));

    // A structured call has nothing to parse or repair.
    let err = client.structured::<Route>(request("supervisor.route"), &CallOptions::default()).await.unwrap_err().error;
    assert!(matches!(err, LlmError::Rejected { status: 200, .. }), "{err:?}");
    assert_eq!(server.hits(), 2);

    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    server.push(MockReply::stream_refusal(&["I'm sorry, ", "I cannot help with 4111."]));
    let err = client.complete(request("p"), &opts).await.unwrap_err().error;
    assert!(matches!(err, LlmError::Rejected { status: 200, .. }), "streamed: {err:?}");
    assert!(!err.to_string().contains("4111"), "{err}");
    assert!(deltas.lock().unwrap().concat().is_empty(), "a refusal is not streamed as content");
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn an_empty_refusal_beside_the_content_is_no_refusal() {
    let server = MockServer::start().await;
    let mut body = mock::completion_body("It was sent yesterday.", 12, 5);
    body["choices"][0]["message"]["refusal"] = json!("");
    server.push(MockReply::json(200, body));
    let (resp, _) = client(&server, 1).complete(request("p"), &CallOptions::default()).await.expect("a reply");
    assert_eq!(resp.content, "It was sent yesterday.");
}

#[tokio::test]
async fn a_failed_call_whose_reply_arrived_is_recorded_with_its_tokens() {
    let server = MockServer::start().await;
    let log = Arc::new(RecordingLog::default());
    let client = client(&server, 3)
        .with_prices(PriceTable::default().with_model("gpt-test", 1_000_000.0, 2_000_000.0))
        .with_call_log(log.clone());
    server.push(MockReply::completion_ending("{\"route\": \"bill", "length"));
    server.push(MockReply::completion_ending("", "content_filter"));
    server.push(MockReply::refusal("I cannot help with that."));
    for _ in 0..3 {
        let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
        assert_eq!(err.usage().map(|u| (u.prompt_tokens, u.completion_tokens)), Some((12, 5)), "{err:?}");
    }
    let on_delta = |_: &str| {};
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    server.push(MockReply::stream_ending(&["The invoice was ", "sent on"], "length"));
    client.complete(request("p"), &opts).await.unwrap_err();
    // No reply, no tokens.
    server.push(MockReply::text(400, "{\"error\": {\"message\": \"bad request\"}}"));
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert_eq!(err.usage(), None);

    let entries = log.entries.lock().unwrap().clone();
    let recorded: Vec<_> = entries
        .iter()
        .map(|(record, ok, kind)| {
            assert!(!ok);
            (kind.clone().unwrap(), record.usage.prompt_tokens, record.usage.completion_tokens, record.cost_usd)
        })
        .collect();
    let expected = [
        ("malformed_response", 12, 5, 22.0),
        ("rejected", 12, 5, 22.0),
        ("rejected", 12, 5, 22.0),
        ("malformed_response", 9, 4, 17.0),
        ("rejected", 0, 0, 0.0),
    ];
    let expected: Vec<_> = expected.iter().map(|(k, p, c, cost)| (k.to_string(), *p, *c, *cost)).collect();
    assert_eq!(recorded, expected);
}

#[tokio::test]
async fn a_structured_reply_cut_short_gets_no_repair_attempt() {
    let server = MockServer::start().await;
    server.fallback(MockReply::completion_ending("{\"route\": \"billing\", \"confid", "length"));
    let err = client(&server, 2)
        .structured::<Route>(request("supervisor.route"), &CallOptions::default())
        .await
        .unwrap_err()
        .error;
    assert!(matches!(err, LlmError::MalformedResponse { .. }), "{err:?}");
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn bad_request_is_rejected_without_retry() {
    let server = MockServer::start().await;
    server.fallback(MockReply::json(
        400,
        json!({"error": {"message": "unknown model", "type": "invalid_request_error", "code": "model_not_found"}}),
    ));
    let err = client(&server, 4).complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    assert!(
        matches!(err, LlmError::Rejected { status: 400, ref message, .. } if message == "unknown model"),
        "{err:?}"
    );
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn connection_refused_is_a_retried_transport_error() {
    let addr = {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let provider = OpenAiProvider::new(OpenAiConfig {
        base_url: Some(format!("http://{addr}/v1")),
        api_key: Some(KEY.into()),
        model: "m".into(),
        ..OpenAiConfig::default()
    })
    .unwrap();
    let client = LlmClient::new(Arc::new(provider)).with_retry(tiny_retry(2));
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    match err {
        LlmError::Exhausted { attempts: 2, last } => assert!(matches!(*last, LlmError::Transport(_)), "{last:?}"),
        other => panic!("expected Exhausted(Transport), got {other:?}"),
    }
}

#[tokio::test]
async fn slow_server_times_out() {
    let server = MockServer::start().await;
    server.fallback(MockReply::completion("late").delayed(Duration::from_secs(5)));
    let provider = OpenAiProvider::new(OpenAiConfig {
        base_url: Some(server.base_url()),
        model: "m".into(),
        request_timeout: Duration::from_millis(200),
        ..OpenAiConfig::default()
    })
    .unwrap();
    let client = LlmClient::new(Arc::new(provider)).with_retry(tiny_retry(2));
    let started = Instant::now();
    let err = client.complete(request("p"), &CallOptions::default()).await.unwrap_err().error;
    match err {
        LlmError::Exhausted { attempts: 2, last } => assert!(matches!(*last, LlmError::Timeout), "{last:?}"),
        other => panic!("expected Exhausted(Timeout), got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn deadline_stops_retries_that_would_overrun_it() {
    let server = MockServer::start().await;
    server.fallback(MockReply::json(429, json!({"error": {"message": "later"}})).header("retry-after", "30"));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(2);
    let opts = CallOptions { deadline: Some(deadline), ..CallOptions::default() };
    let started = Instant::now();
    let err = client(&server, 4).complete(request("p"), &opts).await.unwrap_err().error;
    match err {
        LlmError::Exhausted { attempts: 1, last } => {
            assert!(matches!(*last, LlmError::RateLimited { retry_after: Some(d) } if d == Duration::from_secs(30)));
        }
        other => panic!("expected Exhausted after one attempt, got {other:?}"),
    }
    assert!(started.elapsed() < Duration::from_secs(1));
    assert_eq!(server.hits(), 1);
}

#[derive(Debug, Deserialize, schemars::JsonSchema, PartialEq)]
#[serde(deny_unknown_fields)]
struct Route {
    route: String,
    confidence: f64,
}

#[tokio::test]
async fn structured_output_is_repaired_once() {
    let server = MockServer::start().await;
    server.push(MockReply::completion("I think it is billing."));
    server.push(MockReply::completion("```json\n{\"route\": \"billing\", \"confidence\": 0.9}\n```"));
    let (route, record) = client(&server, 2)
        .structured::<Route>(request("supervisor.route"), &CallOptions::default())
        .await
        .expect("repaired");
    assert_eq!(route, Route { route: "billing".into(), confidence: 0.9 });
    assert_eq!(record.attempts, 2);
    assert_eq!(record.usage.prompt_tokens, 24);
    assert_eq!(record.usage.completion_tokens, 10);

    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    let first = &seen[0].body;
    assert_eq!(first["response_format"]["json_schema"]["name"], "supervisor_route");
    assert_eq!(first["response_format"]["json_schema"]["strict"], true);
    let schema = &first["response_format"]["json_schema"]["schema"];
    assert_eq!(schema["additionalProperties"], false);
    assert_eq!(schema["required"], json!(["route", "confidence"]));
    let system = first["messages"][0]["content"].as_str().unwrap();
    assert!(system.starts_with("You are terse."), "{system}");
    assert!(system.contains("JSON"), "{system}");

    let repair = &seen[1].body["messages"];
    let n = repair.as_array().unwrap().len();
    assert_eq!(repair[n - 2], json!({"role": "assistant", "content": "I think it is billing."}));
    let instruction = repair[n - 1]["content"].as_str().unwrap();
    assert_eq!(repair[n - 1]["role"], "user");
    assert!(instruction.contains("not valid JSON") || instruction.contains("no JSON"), "{instruction}");
}

#[tokio::test]
async fn structured_output_fails_after_second_invalid_reply() {
    let server = MockServer::start().await;
    server.push(MockReply::completion("{\"route\": \"billing\"}"));
    server.push(MockReply::completion("{\"route\": \"billing\", \"confidence\": 1, \"extra\": true}"));
    let err = client(&server, 2)
        .structured::<Route>(request("supervisor.route"), &CallOptions::default())
        .await
        .unwrap_err()
        .error;
    match err {
        LlmError::InvalidOutput { attempts, error, raw } => {
            assert_eq!(attempts, 2);
            assert!(error.contains("extra"), "{error}");
            assert!(raw.contains("\"extra\""), "{raw}");
        }
        other => panic!("expected InvalidOutput, got {other:?}"),
    }
    let seen = server.requests();
    assert_eq!(seen.len(), 2);
    let repair = seen[1].body["messages"].as_array().unwrap().last().unwrap()["content"].as_str().unwrap().to_owned();
    assert!(repair.contains("confidence"), "the repair prompt carries the validation error: {repair}");
}

#[tokio::test]
async fn streaming_delivers_deltas_in_order() {
    let server = MockServer::start().await;
    let parts = ["Your ", "invoice ", "was ", "re", "sent."];
    server.push(MockReply::stream(&parts));
    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    let (resp, record) = client(&server, 2).complete(request("p"), &opts).await.expect("stream ok");
    let deltas = deltas.into_inner().unwrap();
    assert_eq!(deltas, parts);
    assert_eq!(deltas.concat(), resp.content);
    assert_eq!(resp.content, "Your invoice was resent.");
    assert_eq!(resp.usage.prompt_tokens, 9);
    assert_eq!(resp.usage.completion_tokens, 4);
    assert_eq!(resp.model, "gpt-test-2024");
    assert_eq!(record.attempts, 1);
    let body = &server.requests()[0].body;
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
}

#[tokio::test]
async fn streaming_error_status_is_mapped() {
    let server = MockServer::start().await;
    server.push(MockReply::text(503, "overloaded"));
    server.push(MockReply::stream(&["fine"]));
    let on_delta = |_: &str| {};
    let opts = CallOptions { on_delta: Some(&on_delta), ..CallOptions::default() };
    let (resp, record) = client(&server, 2).complete(request("p"), &opts).await.expect("retried");
    assert_eq!(resp.content, "fine");
    assert_eq!(record.attempts, 2);
}

#[tokio::test]
async fn cancellation_drops_the_in_flight_call() {
    let server = MockServer::start().await;
    server.fallback(MockReply::completion("too late").delayed(Duration::from_secs(10)));
    let token = CancellationToken::new();
    let canceller = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(100)).await;
        canceller.cancel();
    });
    let opts = CallOptions { cancel: Some(&token), ..CallOptions::default() };
    let started = Instant::now();
    let err = client(&server, 3).complete(request("p"), &opts).await.unwrap_err().error;
    assert!(matches!(err, LlmError::Cancelled), "{err:?}");
    assert!(started.elapsed() < Duration::from_secs(2), "took {:?}", started.elapsed());
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn azure_uses_deployment_url_and_api_version() {
    let server = MockServer::start().await;
    server.push(MockReply::completion("hi from azure"));
    let provider = OpenAiProvider::new(OpenAiConfig {
        base_url: None,
        api_key: Some(KEY.into()),
        model: "gpt-4o".into(),
        azure: Some(AzureConfig {
            endpoint: format!("{}/", server.root_url()),
            deployment: "frontdesk-gpt4o".into(),
            api_version: "2024-10-21".into(),
        }),
        request_timeout: Duration::from_secs(5),
    })
    .unwrap();
    let client = LlmClient::new(Arc::new(provider)).with_retry(tiny_retry(1));
    let (resp, _) = client.complete(request("p"), &CallOptions::default()).await.unwrap();
    assert_eq!(resp.content, "hi from azure");
    let seen = server.requests();
    assert_eq!(seen[0].path, "/openai/deployments/frontdesk-gpt4o/chat/completions");
    assert_eq!(seen[0].query.as_deref(), Some("api-version=2024-10-21"));
    assert_eq!(seen[0].headers["api-key"], KEY);
    assert!(seen[0].headers.get("authorization").is_none());
}

#[tokio::test]
async fn api_key_is_not_in_debug_output() {
    let config = OpenAiConfig {
        base_url: Some("http://127.0.0.1:9/v1".into()),
        api_key: Some(KEY.into()),
        model: "gpt-test".into(),
        ..OpenAiConfig::default()
    };
    let config_debug = format!("{config:?}");
    assert!(!config_debug.contains(KEY), "{config_debug}");
    assert!(!config_debug.contains("SECRET"), "{config_debug}");
    let provider = OpenAiProvider::new(config).unwrap();
    let provider_debug = format!("{provider:?}");
    assert!(!provider_debug.contains("SECRET"), "{provider_debug}");
    assert!(provider_debug.contains("gpt-test"), "{provider_debug}");
    let client_debug = format!("{:?}", LlmClient::new(Arc::new(provider)));
    assert!(!client_debug.contains("SECRET"), "{client_debug}");
}
