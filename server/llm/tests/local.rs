//! The embedded model (feature `local`) against the real Gemma 3 270M GGUF file.
//!
//! The model comes from `scripts/ensure-model.sh`; point FRONTDESK_TEST_MODEL_PATH at it:
//!
//! ```sh
//! export FRONTDESK_TEST_MODEL_PATH="$(scripts/ensure-model.sh | tail -n1)"
//! cargo test -p frontdesk-llm --features local --test local
//! ```
//!
//! Without the variable every test prints "skipped" and passes, unless FRONTDESK_REQUIRE_MODEL=1
//! (as in scripts/test.sh), which turns a missing model into a failure. All tests share one loaded
//! model and take turns (see `SERIAL`); replies are kept short so the suite runs in a couple of
//! minutes on 2 cores. Nothing asserts on wording: a 270M base model
//! only promises schema-valid output.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use frontdesk_llm::{
    schema_for, CallOptions, CancellationToken, ChatMessage, ChatModel, ChatRequest, ChatResponse, JsonSchemaFormat,
    LlmClient, LlmError, LocalConfig, LocalModel, ToolSpec, STRUCTURED_TOOL_CALLS,
};
use serde::Deserialize;

/// The loaded model, or None (skip) when FRONTDESK_TEST_MODEL_PATH is unset.
fn load_model() -> Option<Arc<LocalModel>> {
    let Some(path) = std::env::var_os("FRONTDESK_TEST_MODEL_PATH").filter(|p| !p.is_empty()) else {
        assert!(
            std::env::var("FRONTDESK_REQUIRE_MODEL").as_deref() != Ok("1"),
            "FRONTDESK_REQUIRE_MODEL=1 but FRONTDESK_TEST_MODEL_PATH is not set: run \
             `export FRONTDESK_TEST_MODEL_PATH=\"$(scripts/ensure-model.sh | tail -n1)\"`"
        );
        return None;
    };
    let mut config = LocalConfig::new(path);
    config.context = 2048;
    config.threads = 2;
    let started = Instant::now();
    let model = LocalModel::load(config).expect("load the local model");
    eprintln!("local model loaded in {:?}: {:?}", started.elapsed(), model.info());
    Some(Arc::new(model))
}

/// The model shared by most tests (their requests queue on its inference thread).
fn shared_model() -> Option<Arc<LocalModel>> {
    static MODEL: OnceLock<Option<Arc<LocalModel>>> = OnceLock::new();
    MODEL.get_or_init(load_model).clone()
}

/// Held by every test that runs the model: one test at a time keeps the 2 cores for one inference
/// thread, so the timing assertions mean something (requests within a test may still overlap).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `(model, serial guard)`, or returns from the test when the model is not configured.
macro_rules! model_or_skip {
    () => {
        match shared_model() {
            Some(model) => (model, SERIAL.lock().await),
            None => {
                eprintln!(
                    "skipped: set FRONTDESK_TEST_MODEL_PATH (scripts/ensure-model.sh) to run the local model tests"
                );
                return;
            }
        }
    };
}

fn client(model: &Arc<LocalModel>) -> LlmClient {
    LlmClient::new(model.clone() as Arc<dyn ChatModel>)
}

fn request(purpose: &str, system: &str, user: &str, max_tokens: u32) -> ChatRequest {
    let mut request =
        ChatRequest::new(purpose, vec![ChatMessage::system(system.to_owned()), ChatMessage::user(user.to_owned())]);
    request.max_tokens = Some(max_tokens);
    request
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Route {
    Billing,
    Technical,
    Sales,
    Other,
}

#[allow(dead_code)] // Read through Debug only.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct RouteDecision {
    route: Route,
    #[schemars(length(max = 120))]
    reasoning: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct FieldUpdate {
    #[schemars(length(max = 30))]
    field: String,
    #[schemars(length(max = 60))]
    value: String,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Updates {
    #[schemars(length(max = 3))]
    updates: Vec<FieldUpdate>,
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
enum Priority {
    Low,
    Normal,
    High,
}

#[allow(dead_code)] // Read through Debug only.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Customer {
    #[schemars(length(max = 40))]
    name: String,
    #[schemars(length(max = 60))]
    email: Option<String>,
}

#[allow(dead_code)] // Read through Debug only.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct Ticket {
    customer: Customer,
    priority: Priority,
    #[schemars(length(max = 100))]
    summary: String,
    #[schemars(length(max = 3))]
    tags: Vec<TagName>,
}

#[allow(dead_code)] // Read through Debug only.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct TagName(#[schemars(length(max = 20))] String);

#[test]
fn schemars_emits_max_length_and_max_items() {
    let schema = schema_for::<Ticket>();
    assert_eq!(schema["properties"]["summary"]["maxLength"], 100, "{schema}");
    assert_eq!(schema["properties"]["tags"]["maxItems"], 3, "{schema}");
    assert_eq!(schema["properties"]["customer"]["properties"]["name"]["maxLength"], 40, "{schema}");
}

#[tokio::test]
async fn structured_route_decision_is_schema_valid() {
    let (model, _serial) = model_or_skip!();
    let (decision, record) = client(&model)
        .structured::<RouteDecision>(
            request(
                "test.route",
                "You route customer support messages to a team.",
                "Hello, I was charged twice for my subscription this month. Please refund one payment.",
                96,
            ),
            &CallOptions::default(),
        )
        .await
        .expect("a schema-valid route decision");
    assert!(decision.reasoning.chars().count() <= 120, "{decision:?}");
    assert_eq!(record.attempts, 1, "the grammar makes the first reply valid: {record:?}");
    assert!(record.usage.prompt_tokens > 20 && record.usage.completion_tokens > 0, "{record:?}");
    eprintln!("{decision:?} {:?}", record.usage);
}

#[tokio::test]
async fn structured_field_updates_are_schema_valid() {
    let (model, _serial) = model_or_skip!();
    let (updates, record) = client(&model)
        .structured::<Updates>(
            request(
                "test.updates",
                "Extract the form fields the user gives as a list of updates (field name and value).",
                "My name is Dana Whitfield, my phone number is 555-0142 and I live in Leeds.",
                200,
            ),
            &CallOptions::default(),
        )
        .await
        .expect("schema-valid updates");
    assert!(updates.updates.len() <= 3, "{updates:?}");
    for update in &updates.updates {
        assert!(update.field.chars().count() <= 30 && update.value.chars().count() <= 60, "{update:?}");
    }
    eprintln!("{updates:?} {:?}", record.usage);
}

#[tokio::test]
async fn structured_nested_object_is_schema_valid() {
    let (model, _serial) = model_or_skip!();
    let (ticket, record) = client(&model)
        .structured::<Ticket>(
            request(
                "test.ticket",
                "Turn the support email into a ticket.",
                "From: Omar Haddad <omar@example.com>\nOur checkout page returns error 500 since this morning, \
                 we are losing orders. Please help urgently.",
                256,
            ),
            &CallOptions::default(),
        )
        .await
        .expect("a schema-valid ticket");
    assert!(ticket.summary.chars().count() <= 100 && ticket.tags.len() <= 3, "{ticket:?}");
    assert!(ticket.customer.name.chars().count() <= 40, "{ticket:?}");
    eprintln!("{ticket:?} {:?}", record.usage);
}

#[tokio::test]
async fn streaming_deltas_concatenate_to_the_content() {
    let (model, _serial) = model_or_skip!();
    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let response = model
        .chat_stream(
            &request("test.stream", "You are a helpful assistant.", "Write a short sentence about the sea.", 24),
            &on_delta,
        )
        .await
        .expect("a streamed reply");
    let deltas = deltas.into_inner().unwrap();
    assert_eq!(deltas.concat(), response.content);
    assert!(response.usage.completion_tokens > 0 && response.usage.completion_tokens <= 24, "{:?}", response.usage);
    assert!(deltas.len() > 1 || response.usage.completion_tokens <= 1, "{deltas:?}");

    // Structured replies stream too.
    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let mut structured = request("test.stream.json", "Route the message.", "My invoice is wrong.", 96);
    structured.response_format =
        Some(JsonSchemaFormat { name: "route".to_owned(), schema: schema_for::<RouteDecision>().into() });
    let response = model.chat_stream(&structured, &on_delta).await.expect("a streamed structured reply");
    let deltas = deltas.into_inner().unwrap();
    assert_eq!(deltas.concat().trim(), response.content);
    assert!(deltas.len() > 3, "{deltas:?}");
    serde_json::from_str::<RouteDecision>(&response.content).expect("schema-valid streamed JSON");
}

#[tokio::test]
async fn cancellation_stops_generation_promptly() {
    let (model, _serial) = model_or_skip!();
    let client = client(&model);
    let cancel = CancellationToken::new();
    let first_delta = tokio::sync::Notify::new();
    let on_delta = |_: &str| first_delta.notify_one();
    // A base model continues a counting sequence for as long as it is allowed to.
    let long = request("test.cancel", "Continue the sequence.", "1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12,", 1500);
    let opts = CallOptions { cancel: Some(&cancel), on_delta: Some(&on_delta), ..CallOptions::default() };
    let call = client.complete(long, &opts);
    let canceller = async {
        first_delta.notified().await;
        tokio::time::sleep(Duration::from_millis(300)).await;
        cancel.cancel();
    };
    let (result, ()) = tokio::join!(call, canceller);
    let result = result.map_err(LlmError::from);
    assert!(matches!(result, Err(LlmError::Cancelled)), "{result:?}");

    // Had generation continued, this request would wait behind ~1500 tokens (30+ s on 2 cores).
    let started = Instant::now();
    let response = model.chat(&request("test.after_cancel", "Answer briefly.", "Say hi.", 4)).await.expect("a reply");
    let waited = started.elapsed();
    assert!(waited < Duration::from_secs(8), "the cancelled generation kept the model busy: {waited:?}");
    assert!(response.usage.completion_tokens <= 4);
}

#[tokio::test]
async fn deadline_abandons_the_request() {
    let (model, _serial) = model_or_skip!();
    let long = request("test.deadline", "Continue the sequence.", "1, 2, 3, 4, 5, 6, 7, 8,", 1500);
    let opts = CallOptions {
        deadline: Some(tokio::time::Instant::now() + Duration::from_millis(500)),
        ..CallOptions::default()
    };
    let started = Instant::now();
    let result = client(&model).complete(long, &opts).await.map_err(LlmError::from);
    assert!(matches!(result, Err(LlmError::Timeout) | Err(LlmError::Exhausted { .. })), "{result:?}");
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[tokio::test]
async fn over_long_prompt_is_context_too_long() {
    let (model, _serial) = model_or_skip!();
    let huge = "The quick brown fox jumps over the lazy dog. ".repeat(600);
    let result = model.chat(&request("test.too_long", "Summarise.", &huge, 16)).await;
    match result {
        Err(LlmError::ContextTooLong { prompt_tokens, limit }) => {
            assert!(prompt_tokens > limit, "{prompt_tokens} vs {limit}");
            assert_eq!(limit, 2048);
        }
        other => panic!("expected ContextTooLong, got {other:?}"),
    }
    // The process and the inference thread are still fine.
    let response = model.chat(&request("test.after_too_long", "Answer briefly.", "Say hi.", 4)).await;
    assert!(response.is_ok(), "{response:?}");
}

#[tokio::test]
async fn concurrent_requests_are_queued_and_all_complete() {
    let (model, _serial) = model_or_skip!();
    let calls = (0..4).map(|i| {
        let model = model.clone();
        tokio::spawn(async move {
            let mut req =
                request("test.concurrent", "Route the message.", &format!("Ticket {i}: my invoice is wrong."), 96);
            req.response_format =
                Some(JsonSchemaFormat { name: "route".to_owned(), schema: schema_for::<RouteDecision>().into() });
            model.chat(&req).await
        })
    });
    for result in futures::future::join_all(calls).await {
        let response = result.expect("task").expect("a reply");
        serde_json::from_str::<RouteDecision>(&response.content).expect("schema-valid JSON");
    }
}

fn lookup_user_tool() -> ToolSpec {
    ToolSpec {
        name: "lookup_user".to_owned(),
        description: "Look up a user account by its id and return its name and status.".to_owned(),
        parameters: serde_json::json!({
            "type": "object",
            "properties": {"user_id": {"type": "string", "enum": ["u001", "u002"]}},
            "required": ["user_id"],
            "additionalProperties": false,
        }),
    }
}

/// Asserts the tool grammar held: either one well-formed call of `lookup_user` with arguments
/// valid for its schema (and no content), or an answer and no call. Returns the reply as the
/// JSON object the model wrote, to replay it as an assistant turn.
fn assert_tool_reply(response: &ChatResponse, max_answer_chars: usize) -> serde_json::Value {
    match response.tool_calls.as_slice() {
        [] => {
            let chars = response.content.chars().count();
            assert!(chars > 0 && chars <= max_answer_chars, "an answer of 1..={max_answer_chars} chars: {response:?}");
            serde_json::json!({"tool": "none", "answer": response.content})
        }
        [call] => {
            assert_eq!(call.name, "lookup_user", "{response:?}");
            assert!(call.id.starts_with("call_"), "{response:?}");
            assert!(response.content.is_empty(), "{response:?}");
            let arguments: serde_json::Value = serde_json::from_str(&call.arguments).expect("arguments are JSON");
            let object = arguments.as_object().expect("arguments are an object");
            assert_eq!(object.len(), 1, "only user_id: {arguments}");
            assert!(matches!(object["user_id"].as_str(), Some("u001" | "u002")), "{arguments}");
            serde_json::json!({"tool": call.name, "arguments": arguments})
        }
        more => panic!("one tool call at most, got {more:?}"),
    }
}

#[tokio::test]
async fn tools_are_called_under_the_grammar_then_answered_from_the_result() {
    let (model, _serial) = model_or_skip!();
    let mut ask = request(
        "test.tools",
        "You investigate changes to user access. Use the tools to look up users before answering.",
        "Look up the user u002 with the lookup_user tool.",
        64,
    );
    ask.tools = vec![lookup_user_tool()];
    let started = Instant::now();
    let first = model.chat(&ask).await.expect("a reply under the tool grammar");
    eprintln!("tool reply in {:?}: {first:?}", started.elapsed());
    let replay = assert_tool_reply(&first, 1000);
    assert!(first.usage.completion_tokens > 0, "{:?}", first.usage);

    // The tool result goes back as a tool message; without tools the model answers in text.
    let mut follow_up = ask.clone();
    follow_up.tools.clear();
    follow_up.max_tokens = Some(32);
    follow_up.messages.push(ChatMessage::assistant(replay.to_string()));
    follow_up
        .messages
        .push(ChatMessage::tool(r#"{"user_id": "u002", "name": "Dana Whitfield", "status": "suspended"}"#));
    let answer = model.chat(&follow_up).await.expect("an answer");
    eprintln!("answer: {answer:?}");
    assert!(answer.tool_calls.is_empty(), "{answer:?}");
    assert!(!answer.content.trim().is_empty(), "{answer:?}");
}

#[tokio::test]
async fn tools_with_a_response_format_answer_in_its_schema_or_call() {
    let (model, _serial) = model_or_skip!();
    let mut ask = request(
        "test.tools.structured",
        "Route the support message to a team. You may look the user up first.",
        "User u001 writes: I was charged twice for my subscription.",
        96,
    );
    ask.tools = vec![lookup_user_tool()];

    // Through the client's structured helper: a value of the schema, or the typed refusal of a
    // reply that called a tool.
    match client(&model).structured::<RouteDecision>(ask.clone(), &CallOptions::default()).await.map_err(LlmError::from)
    {
        Ok((decision, record)) => {
            assert!(decision.reasoning.chars().count() <= 120, "{decision:?}");
            eprintln!("structured answer with tools offered: {decision:?} {record:?}");
        }
        Err(LlmError::Config { field, problem }) if field == STRUCTURED_TOOL_CALLS => {
            eprintln!("structured call answered with a tool call: {problem}");
        }
        Err(other) => panic!("expected a route decision or a tool-call refusal, got {other:?}"),
    }

    // Streaming with tools: no token deltas, an answer's content in one piece.
    ask.response_format =
        Some(JsonSchemaFormat { name: "route".to_owned(), schema: schema_for::<RouteDecision>().into() });
    let deltas = Mutex::new(Vec::<String>::new());
    let on_delta = |d: &str| deltas.lock().unwrap().push(d.to_owned());
    let response = model.chat_stream(&ask, &on_delta).await.expect("a reply under the tool grammar");
    let deltas = deltas.into_inner().unwrap();
    assert_eq!(deltas.concat(), response.content);
    if response.tool_calls.is_empty() {
        serde_json::from_str::<RouteDecision>(&response.content).expect("the answer is JSON of the response schema");
        assert_eq!(deltas.len(), 1, "{deltas:?}");
    } else {
        assert_tool_reply(&response, 0);
        assert!(deltas.is_empty(), "{deltas:?}");
    }
    eprintln!("streamed tool reply: {response:?}");
}
