//! The gRPC surface: event order, errors and their details, idempotency, listing, reset and
//! erasure, workflow description, health and reflection, through a real server.

mod common;

use std::time::Duration;

use common::*;
use frontdesk_api::v1::{self, run_event::Kind, ErrorReason, IntakeMode};
use frontdesk_client::{SendOptions, StartOptions, TurnEvent};
use frontdesk_llm::ScriptedReply;
use frontdesk_server::config::{CallLogMode, Config};
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

fn kind_name(event: &v1::RunEvent) -> String {
    let node = &event.node;
    match event.kind.as_ref().unwrap() {
        Kind::RunStarted(_) => "run_started".into(),
        Kind::NodeStarted(_) => format!("{node}:started"),
        Kind::NodeFinished(f) => {
            format!("{node}:finished->{}", if f.next_node.is_empty() { "end" } else { &f.next_node })
        }
        Kind::LlmCallFinished(c) => format!("{node}:llm:{}", c.purpose),
        Kind::TokenDelta(_) => format!("{node}:delta"),
        Kind::RunFinished(_) => "run_finished".into(),
        Kind::RunFailed(f) => format!("run_failed:{}", f.reason),
        other => format!("{other:?}"),
    }
}

#[tokio::test]
async fn a_turn_streams_ordered_node_events_then_the_result() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("Hello there, how can I help?"))]);
    let (events, result) = s.turn(&id, "hello").await;
    let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids, (1..=events.len() as u64).collect::<Vec<_>>(), "event ids count up from 1 without gaps");
    assert!(events.iter().all(|e| e.run_id == result.run_id && e.time.is_some()));
    let kinds: Vec<String> = events.iter().map(kind_name).filter(|k| !k.ends_with(":delta")).collect();
    assert_eq!(
        kinds,
        [
            "run_started",
            "supervisor:started",
            "supervisor:llm:supervisor.route",
            "supervisor:finished->chat_agent",
            "chat_agent:started",
            "chat_agent:llm:chat.chat",
            "chat_agent:finished->end",
            "run_finished"
        ]
    );
    let deltas: String = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(Kind::TokenDelta(d)) => Some(d.text.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(deltas.trim(), "Hello there, how can I help?", "the chat reply streams as token deltas");
    let finished = events.iter().find_map(|e| match &e.kind {
        Some(Kind::NodeFinished(f)) if e.node == "supervisor" => Some(f.clone()),
        _ => None,
    });
    let update: serde_json::Value = serde_json::from_str(&finished.unwrap().update_json).unwrap();
    assert_eq!(update["next"], "chat_agent");
    assert!(
        matches!(&events.last().unwrap().kind, Some(Kind::RunFinished(f)) if f.steps == 2 && f.usage.unwrap().prompt_tokens > 0)
    );
    assert_eq!(result.reply.unwrap().text, "Hello there, how can I help?");
    assert!(!result.replayed);
    let conversation = result.conversation.unwrap();
    assert_eq!(conversation.turn_count, 1);
    // The turn reads the conversation once, yet reports its times as the store holds them.
    let stored = s.client.get_conversation(&id).await.unwrap().conversation.unwrap();
    assert_eq!((conversation.create_time, conversation.update_time), (stored.create_time, stored.update_time));
    assert!(conversation.create_time.is_some() && conversation.update_time.is_some());
}

#[tokio::test]
async fn empty_and_oversized_text_are_invalid_arguments_with_field_violations() {
    let s = TestServer::start_with(Options { max_text_chars: 20, ..Options::default() }).await;
    let id = s.start_intake().await;
    for text in ["", "   ", &"x".repeat(21)] {
        let error =
            s.client.send_message(&id, text, SendOptions::default()).await.err().expect("rejected before streaming");
        let api = error.api().unwrap();
        assert_eq!(api.code, Code::InvalidArgument, "{text:?}");
        assert_eq!(api.field_violations[0].0, "text");
        assert!(api.is_reason(ErrorReason::InvalidArgument));
    }
    assert!(s.model.requests().is_empty(), "no model call for a bad request");
}

/// PostgreSQL refuses a NUL in text, so it is refused here on every store, up front.
#[tokio::test]
async fn nul_characters_and_bad_idempotency_keys_are_invalid_arguments() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let keyed = |key: &str| SendOptions { idempotency_key: Some(key.to_owned()), ..SendOptions::default() };
    for (text, options, field) in [
        ("hello\0there", SendOptions::default(), "text"),
        ("hello", keyed("turn\0-1"), "idempotency_key"),
        ("hello", keyed(&"k".repeat(129)), "idempotency_key"),
    ] {
        let error = s.client.send_message(&id, text, options).await.err().expect("rejected before streaming");
        let api = error.api().unwrap();
        assert_eq!((api.code, api.field_violations[0].0.as_str()), (Code::InvalidArgument, field), "{text:?}");
    }
    assert!(s.model.requests().is_empty(), "no model call for a bad request");
}

/// tonic refuses an oversized request before any handler; it is reported like every limit.
#[tokio::test]
async fn a_request_over_the_size_limit_is_resource_exhausted_with_details() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    let max = Config::default().limits.max_message_bytes;
    let huge = "x".repeat(max + 1);
    let raw = v1::SendMessageRequest { conversation_id: id, text: huge.clone(), ..Default::default() };
    let status = s.client.conversations().send_message(raw).await.expect_err("refused");
    let unary = v1::DescribeWorkflowRequest { name: huge };
    let unary = s.client.workflows().describe_workflow(unary).await.expect_err("refused");
    for status in [status, unary] {
        assert_eq!(status.code(), Code::ResourceExhausted, "{status:?}");
        let details = tonic_types::StatusExt::get_error_details(&status);
        let info = details.error_info().expect("ErrorInfo");
        assert_eq!(info.reason, "LIMIT_EXCEEDED");
        assert_eq!(info.domain, "frontdesk.dev");
        assert_eq!(info.metadata.get("max"), Some(&max.to_string()));
        assert!(info.metadata.contains_key("limit"), "{info:?}");
    }
    assert!(s.model.requests().is_empty(), "no model call for a refused request");
}

#[tokio::test]
async fn malformed_ids_and_enums_are_invalid_arguments() {
    let s = TestServer::start().await;
    let error = s.client.send_message("bad id!", "hi", SendOptions::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::InvalidArgument));
    assert_eq!(error.api().unwrap().field_violations[0].0, "conversation_id");
    let id = s.start_intake().await;
    let raw = v1::SendMessageRequest {
        conversation_id: id,
        text: "hi".into(),
        idempotency_key: String::new(),
        busy_policy: 99,
    };
    let status = s.client.conversations().send_message(raw).await.err().unwrap();
    assert_eq!(status.code(), Code::InvalidArgument);
    let error = s.client.start_conversation("", StartOptions::default()).await.err().unwrap();
    assert_eq!(error.api().unwrap().field_violations[0].0, "workflow");
    let error = s.client.list_conversations(None, -1, None).await.err().unwrap();
    assert_eq!(error.api().unwrap().field_violations[0].0, "page_size");
}

#[tokio::test]
async fn unknown_ids_are_not_found() {
    let s = TestServer::start().await;
    let error = s.client.send_message("conv-missing", "hi", SendOptions::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::NotFound));
    assert!(error.api().unwrap().is_reason(ErrorReason::NotFound));
    assert_eq!(s.client.get_conversation("conv-missing").await.err().unwrap().code(), Some(Code::NotFound));
    assert_eq!(s.client.delete_conversation("conv-missing").await.err().unwrap().code(), Some(Code::NotFound));
    assert_eq!(s.client.reset_conversation("conv-missing", None).await.err().unwrap().code(), Some(Code::NotFound));
    let error = s.client.start_conversation("no-such-workflow", StartOptions::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::NotFound));
    assert_eq!(s.client.describe_workflow("nope").await.err().unwrap().code(), Some(Code::NotFound));
}

#[tokio::test]
async fn a_second_turn_while_one_runs_is_aborted_or_queued() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.model.push_reply(ScriptedReply::json(&route("chat_agent")).after(Duration::from_millis(400)));
    s.script(&[("chat.chat", json!("first"))]);
    let mut first = s.client.send_message(&id, "one", SendOptions::default()).await.unwrap();
    // The first turn is accepted once its RunStarted event arrives.
    let started = first.next().await.unwrap().unwrap();
    assert!(matches!(started, TurnEvent::Event(ref e) if matches!(e.kind, Some(Kind::RunStarted(_)))));
    let error = s.client.send_message(&id, "two", SendOptions::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::Aborted));
    assert!(error.api().unwrap().is_reason(ErrorReason::ThreadBusy));
    assert!(error.api().unwrap().retry_after.is_some());
    assert_eq!(error.api().unwrap().metadata.get("kind").map(String::as_str), Some("conversation"));
    assert_eq!(error.api().unwrap().metadata.get("id"), Some(&id));

    // The queued turn finds its workflow while the first runs: the checkpoint it was routed
    // with is out of date by the time it runs, so it starts from a fresh read.
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("second"))]);
    let queued = SendOptions { queue_if_busy: true, ..SendOptions::default() };
    let second = tokio::spawn({
        let client = s.client.clone();
        let id = id.clone();
        async move { client.send_message_and_wait(&id, "two", queued).await }
    });
    while first.next().await.is_some() {}
    let (_, result) = second.await.unwrap().unwrap();
    assert_eq!(result.reply.unwrap().text, "second");
    assert_eq!(result.conversation.unwrap().turn_count, 2, "both turns committed, one after the other");
}

#[tokio::test]
async fn a_repeated_idempotency_key_replays_the_first_outcome() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("only once"))]);
    let opts = SendOptions { idempotency_key: Some("turn-1".into()), ..SendOptions::default() };
    let (_, first) = s.client.send_message_and_wait(&id, "hello", opts.clone()).await.unwrap();
    let calls = s.model.requests().len();
    let (events, replay) = s.client.send_message_and_wait(&id, "hello", opts).await.unwrap();
    assert!(replay.replayed);
    assert!(events.is_empty(), "a replay runs nothing");
    assert_eq!(replay.run_id, first.run_id);
    assert_eq!(replay.reply, first.reply);
    // The first answer is built from the final state, the replay from the recorded output.
    assert_eq!(replay.conversation, first.conversation, "the replay reports the conversation as the turn left it");
    assert_eq!(s.model.requests().len(), calls, "the model is not called again");
    let conversation = s.client.get_conversation(&id).await.unwrap();
    assert_eq!(conversation.messages.len(), 3, "welcome, one user turn, one reply");
}

#[tokio::test]
async fn an_idempotency_key_reused_with_another_text_is_an_idempotency_mismatch() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("only once"))]);
    let opts = SendOptions { idempotency_key: Some("turn-1".into()), ..SendOptions::default() };
    let (_, first) = s.client.send_message_and_wait(&id, "hello", opts.clone()).await.unwrap();
    let calls = s.model.requests().len();
    let error = s.client.send_message(&id, "something else entirely", opts.clone()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::FailedPrecondition), "{error:?}");
    let api = error.api().unwrap();
    assert!(api.is_reason(ErrorReason::IdempotencyMismatch), "{api:?}");
    assert_eq!(api.metadata.get("kind").map(String::as_str), Some("conversation"));
    assert_eq!(api.metadata.get("id").map(String::as_str), Some(id.as_str()));
    assert_eq!(api.metadata.get("idempotency_key").map(String::as_str), Some("turn-1"));
    assert_eq!(s.model.requests().len(), calls, "a refused retry runs nothing");
    // The same request with the key still replays; surrounding whitespace is not part of it.
    let (_, replay) = s.client.send_message_and_wait(&id, "  hello ", opts).await.unwrap();
    assert!(replay.replayed);
    assert_eq!(replay.run_id, first.run_id);
    let conversation = s.client.get_conversation(&id).await.unwrap();
    assert_eq!(conversation.messages.len(), 3, "welcome, one user turn, one reply");
}

#[tokio::test]
async fn start_with_an_idempotency_key_returns_the_same_conversation() {
    let s = TestServer::start().await;
    let opts = StartOptions { idempotency_key: Some("start-1".into()), ..StartOptions::default() };
    let a = s.client.start_conversation("intake", opts.clone()).await.unwrap();
    let b = s.client.start_conversation("intake", opts).await.unwrap();
    assert_eq!(a.conversation.as_ref().unwrap().conversation_id, b.conversation.unwrap().conversation_id);
    let named = StartOptions { conversation_id: Some("support-42".into()), ..StartOptions::default() };
    s.client.start_conversation("intake", named.clone()).await.unwrap();
    let error = s.client.start_conversation("intake", named).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::AlreadyExists));
    let api = error.api().unwrap();
    assert!(api.is_reason(ErrorReason::AlreadyExists));
    assert_eq!(api.metadata.get("kind").map(String::as_str), Some("conversation"));
    assert_eq!(api.metadata.get("id").map(String::as_str), Some("support-42"));

    // A key proves only its own start: an existing conversation that another call created is
    // not passed off as this one's.
    let keyed = |id: Option<&str>, key: &str| StartOptions {
        conversation_id: id.map(str::to_owned),
        idempotency_key: Some(key.into()),
    };
    let error = s.client.start_conversation("intake", keyed(Some("support-42"), "other-key")).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::AlreadyExists));
    s.client.start_conversation("intake", keyed(Some("support-43"), "k-43")).await.unwrap();
    let again = s.client.start_conversation("intake", keyed(Some("support-43"), "k-43")).await.unwrap();
    assert_eq!(again.conversation.unwrap().conversation_id, "support-43");
    // The same key for another workflow is another request.
    let error = s.client.start_conversation("service_call", opts_for("start-1")).await.err().unwrap();
    assert!(error.api().unwrap().is_reason(ErrorReason::IdempotencyMismatch), "{error:?}");
    // A reset conversation is still the one its start created.
    let id = a.conversation.unwrap().conversation_id;
    s.client.reset_conversation(&id, None).await.unwrap();
    let after_reset = s.client.start_conversation("intake", opts_for("start-1")).await.unwrap();
    assert_eq!(after_reset.conversation.unwrap().conversation_id, id);
    assert!(!after_reset.welcome.unwrap().text.is_empty());
}

fn opts_for(key: &str) -> StartOptions {
    StartOptions { idempotency_key: Some(key.into()), ..StartOptions::default() }
}

#[tokio::test]
async fn garbage_from_the_model_is_a_clean_error_and_changes_nothing() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", json!("this is not json")), ("supervisor.route", json!("{\"route\": 42}"))]);
    let mut stream = s.client.send_message(&id, "hello", SendOptions::default()).await.unwrap();
    let mut events = Vec::new();
    let mut status = None;
    while let Some(item) = stream.next().await {
        match item {
            Ok(TurnEvent::Event(e)) => events.push(e),
            Ok(TurnEvent::Result(r)) => panic!("no result expected, got {r:?}"),
            Err(e) => status = Some(e),
        }
    }
    let failed = events.iter().find_map(|e| match &e.kind {
        Some(Kind::RunFailed(f)) => Some(f.clone()),
        _ => None,
    });
    let failed = failed.expect("a RunFailed event");
    assert_eq!(failed.reason, "MODEL_OUTPUT_INVALID");
    assert_eq!(failed.code, Code::Unavailable as i32);
    let status = status.expect("the stream ends with an error status");
    assert_eq!(status.code(), Some(Code::Unavailable));
    assert!(status.api().unwrap().is_reason(ErrorReason::ModelOutputInvalid));
    let conversation = s.client.get_conversation(&id).await.unwrap();
    assert_eq!(conversation.messages.len(), 1, "the failed turn left the state as it was");
    assert_eq!(conversation.conversation.unwrap().turn_count, 0);
}

/// A model call whose replies could not be used was billed all the same: the failed turn streams
/// it with its tokens and error, its RunFailed says what the run spent, and both agree with the
/// call log, which records each request (the reply and its repair).
#[tokio::test]
async fn a_failed_calls_tokens_are_streamed_and_counted_in_the_failed_runs_usage() {
    let s = TestServer::start_with(Options { call_log: CallLogMode::Redacted, ..Options::default() }).await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", json!("this is not json")), ("supervisor.route", json!("{\"route\": 42}"))]);
    let mut stream = s.client.send_message(&id, "hello", SendOptions::default()).await.unwrap();
    let mut events = Vec::new();
    while let Some(Ok(TurnEvent::Event(e))) = stream.next().await {
        events.push(e);
    }
    let calls: Vec<&v1::LlmCallFinished> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(Kind::LlmCallFinished(c)) => Some(c),
            _ => None,
        })
        .collect();
    let [call] = calls[..] else { panic!("one failed call: {calls:?}") };
    assert_eq!((call.purpose.as_str(), call.attempts), ("supervisor.route", 2));
    assert!(call.error.starts_with("model output failed validation after 2 attempts"), "{}", call.error);
    let spent = call.usage.unwrap();
    assert!(spent.prompt_tokens > 0 && spent.completion_tokens > 0, "{spent:?}");
    let failed = events.iter().find_map(|e| match &e.kind {
        Some(Kind::RunFailed(f)) => Some(f),
        _ => None,
    });
    let failed = failed.expect("a RunFailed event");
    assert_eq!(failed.reason, "MODEL_OUTPUT_INVALID");
    assert_eq!(failed.usage, Some(spent), "the run spent what its one call did");

    let listed = s.client.workflows().list_llm_calls(list_llm_calls(&id, 0)).await.unwrap().into_inner();
    assert_eq!(listed.total_calls, 2, "the reply and its repair: {:?}", listed.calls);
    let total = listed.total_usage.unwrap();
    assert_eq!((total.prompt_tokens, total.completion_tokens), (spent.prompt_tokens, spent.completion_tokens));
}

/// A server with `metrics.listen` on an ephemeral port, and where its metrics are served.
async fn with_metrics() -> (TestServer, std::net::SocketAddr) {
    let configure: fn(&mut Config) = |config| config.metrics.listen = Some("127.0.0.1:0".parse().unwrap());
    let s = TestServer::start_with(Options { configure, ..Options::default() }).await;
    let addr = s.server.as_ref().unwrap().metrics_addr.expect("metrics are served");
    (s, addr)
}

/// With `metrics.listen` set, `GET /metrics` counts what the runs did, by workflow: runs by
/// outcome and failure reason, node durations, model calls (the failed one included) and their
/// tokens, as the runs' own events reported them.
#[tokio::test]
async fn metrics_count_runs_nodes_and_model_calls_as_their_events_did() {
    let (s, addr) = with_metrics().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("Hello there"))]);
    let (answered, _) = s.turn(&id, "hello").await;
    s.script(&[("supervisor.route", json!("this is not json")), ("supervisor.route", json!("{\"route\": 42}"))]);
    let mut stream = s.client.send_message(&id, "again", SendOptions::default()).await.unwrap();
    let mut failed = Vec::new();
    while let Some(Ok(TurnEvent::Event(e))) = stream.next().await {
        failed.push(e);
    }

    let missing = s.client.get_conversation("conv-does-not-exist").await.unwrap_err();
    assert_eq!(missing.code(), Some(Code::NotFound));
    // Health checks, and any path no service serves, share one label.
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.unwrap();

    let (status, text) = http_get(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    // Every call by method and status: the streams by the status that ended them.
    let rpcs = |method: &str, code: &str| {
        let labels = format!("{{method=\"frontdesk.v1.ConversationService/{method}\",code=\"{code}\"}}");
        series(&text, &format!("frontdesk_grpc_requests_total{labels}"))
    };
    assert_eq!(rpcs("StartConversation", "OK"), 1.0);
    assert_eq!((rpcs("SendMessage", "OK"), rpcs("SendMessage", "UNAVAILABLE")), (1.0, 1.0));
    assert_eq!(rpcs("GetConversation", "NOT_FOUND"), 1.0);
    assert_eq!(series(&text, "frontdesk_grpc_requests_total{method=\"other\",code=\"OK\"}"), 1.0);
    assert!(!text.contains("grpc.health"), "{text}");
    let timed =
        "frontdesk_grpc_request_duration_seconds_count{method=\"frontdesk.v1.ConversationService/SendMessage\"}";
    assert_eq!(series(&text, timed), 2.0);
    assert!(text.ends_with("# EOF\n"), "OpenMetrics text: {text}");
    let intake = |rest: &str| format!("{{workflow=\"intake\"{rest}}}");
    assert_eq!(series(&text, &format!("frontdesk_runs_started_total{}", intake(",resumed=\"false\""))), 2.0);
    assert_eq!(series(&text, &format!("frontdesk_runs_ended_total{}", intake(",outcome=\"completed\""))), 1.0);
    assert_eq!(series(&text, &format!("frontdesk_runs_ended_total{}", intake(",outcome=\"failed\""))), 1.0);
    let reason = intake(",reason=\"MODEL_OUTPUT_INVALID\"");
    assert_eq!(series(&text, &format!("frontdesk_run_failures_total{reason}")), 1.0);
    assert_eq!(
        series(&text, &format!("frontdesk_run_duration_seconds_count{}", intake(",outcome=\"completed\""))),
        1.0
    );
    assert_eq!(series(&text, &format!("frontdesk_node_duration_seconds_count{}", intake(",node=\"chat_agent\""))), 1.0);
    let calls = |purpose: &str, outcome: &str| {
        series(
            &text,
            &format!("frontdesk_llm_calls_total{}", intake(&format!(",purpose=\"{purpose}\",outcome=\"{outcome}\""))),
        )
    };
    assert_eq!(
        (calls("supervisor.route", "ok"), calls("supervisor.route", "failed"), calls("chat.chat", "ok")),
        (1.0, 1.0, 1.0)
    );
    // Tokens as the two turns' events reported them, the failed call's billed replies included.
    let reported: u64 = [&answered, &failed]
        .iter()
        .flat_map(|events| events.iter())
        .filter_map(|e| match &e.kind {
            Some(Kind::LlmCallFinished(c)) if c.purpose == "supervisor.route" => {
                Some(c.usage.unwrap().completion_tokens)
            }
            _ => None,
        })
        .sum();
    let tokens = intake(",purpose=\"supervisor.route\",type=\"completion\"");
    assert_eq!(series(&text, &format!("frontdesk_llm_tokens_total{tokens}")), reported as f64);
    assert!(reported > 0);
    assert_eq!(series(&text, "frontdesk_runs_active"), 0.0);
    // The answered turn committed at least its input and its end; the failed one its rollback.
    let (writes, transactions) =
        (series(&text, "frontdesk_checkpoint_writes_total"), series(&text, "frontdesk_checkpoint_transactions_total"));
    assert!(writes >= 3.0 && (1.0..=writes).contains(&transactions), "{writes} writes in {transactions}");
    // Each write its run waited for, by outcome; none waits now. The pool at rest.
    let committed = series(&text, "frontdesk_checkpoint_write_duration_seconds_count{outcome=\"committed\"}");
    assert_eq!(committed, writes, "every write was committed, its run waiting for it");
    assert_eq!(series(&text, "frontdesk_checkpoint_writes_waiting"), 0.0);
    let connections = series(&text, "frontdesk_database_connections{state=\"idle\"}")
        + series(&text, "frontdesk_database_connections{state=\"busy\"}");
    let max = series(&text, "frontdesk_database_connections_max");
    assert!(max >= 1.0 && (1.0..=max).contains(&connections), "{connections} of {max}");
    assert_eq!(series(&text, "frontdesk_database_acquires_waiting"), 0.0);
    assert_eq!(series(&text, "frontdesk_database_failing"), 0.0);
    // The runtime: its workers, the tasks on it (this listener's at least), the time they ran.
    assert!(series(&text, "frontdesk_runtime_workers") >= 1.0);
    assert!(series(&text, "frontdesk_runtime_alive_tasks") >= 1.0);
    assert!(series(&text, "frontdesk_runtime_global_queue_depth") >= 0.0);
    assert!(series(&text, "frontdesk_runtime_worker_busy_seconds_total") > 0.0);

    let (status, _) = http_get(addr, "/other").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// A stream whose caller went away before its status is counted `CANCELLED` (the run goes on).
#[tokio::test]
async fn a_stream_its_caller_left_counts_as_cancelled() {
    let (s, addr) = with_metrics().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent"))]);
    s.model.push_reply(ScriptedReply::text("late").for_purpose("chat.chat").after(Duration::from_millis(500)));
    let mut stream = s.client.send_message(&id, "hello", SendOptions::default()).await.unwrap();
    stream.next().await.expect("the run started").unwrap();
    drop(stream);
    let cancelled =
        "frontdesk_grpc_requests_total{method=\"frontdesk.v1.ConversationService/SendMessage\",code=\"CANCELLED\"}";
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        let (_, text) = http_get(addr, "/metrics").await;
        if text.lines().any(|l| l.starts_with(cancelled)) {
            assert_eq!(series(&text, cancelled), 1.0);
            assert!(!text.contains("SendMessage\",code=\"OK\""), "{text}");
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "not counted as cancelled:\n{text}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Off unless configured: no listener, and no observer on the runs.
#[tokio::test]
async fn metrics_are_off_unless_configured() {
    let s = TestServer::start().await;
    assert_eq!(s.server.as_ref().unwrap().metrics_addr, None);
}

#[tokio::test]
async fn the_turn_limit_is_resource_exhausted() {
    let s = TestServer::start_with(Options { max_turns: 1, ..Options::default() }).await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("hi"))]);
    let keyed = SendOptions { idempotency_key: Some("only-turn".into()), ..SendOptions::default() };
    s.client.send_message_and_wait(&id, "hello", keyed.clone()).await.unwrap();
    let error = s.client.send_message(&id, "again", SendOptions::default()).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::ResourceExhausted));
    assert!(error.api().unwrap().is_reason(ErrorReason::LimitExceeded));
    let (_, replay) = s.client.send_message_and_wait(&id, "hello", keyed).await.unwrap();
    assert!(replay.replayed, "retrying the last allowed turn is a replay, not a new turn");
}

/// A conversation whose state reached `limits.max_conversation_bytes` takes no more turns (so
/// `GetConversation`, which returns all of it, stays readable by a default client); it is still
/// read back whole.
#[tokio::test]
async fn the_conversation_size_limit_is_resource_exhausted() {
    let options = Options { configure: |config| config.limits.max_conversation_bytes = 6_000, ..Options::default() };
    let s = TestServer::start_with(options).await;
    let id = s.start_intake().await;
    let long = "x".repeat(2_000);
    let mut turns = 0;
    let refused = loop {
        s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("noted"))]);
        match s.client.send_message_and_wait(&id, &long, SendOptions::default()).await {
            Ok(_) => turns += 1,
            Err(error) => break error,
        }
        assert!(turns < 10, "never refused");
    };
    assert!(turns >= 2, "{turns} turns before the limit");
    assert_eq!(refused.code(), Some(Code::ResourceExhausted), "{refused:?}");
    assert!(refused.api().unwrap().is_reason(ErrorReason::LimitExceeded));
    let conversation = s.client.get_conversation(&id).await.unwrap();
    assert_eq!(conversation.conversation.unwrap().turn_count, turns);
}

#[tokio::test]
async fn list_get_reset_and_delete() {
    let s = TestServer::start().await;
    let mut ids = Vec::new();
    for _ in 0..5 {
        ids.push(s.start_intake().await);
    }
    ids.sort();
    let mut seen = Vec::new();
    let mut token = None;
    loop {
        let page = s.client.list_conversations(Some("intake"), 2, token).await.unwrap();
        seen.extend(page.conversations.into_iter().map(|c| c.conversation_id));
        if page.next_page_token.is_empty() {
            break;
        }
        token = Some(page.next_page_token);
    }
    assert_eq!(seen, ids);
    let all = s.client.list_conversations(None, 50, None).await.unwrap();
    assert_eq!(all.conversations.len(), 5);

    let id = &ids[0];
    s.script(&[
        ("supervisor.route", route("elicitation_agent")),
        ("elicitation.extract", extraction(&[("description", Some("x"))], &[], "More?")),
    ]);
    s.say(id, "raise a request").await;
    let reset = s.client.reset_conversation(id, None).await.unwrap();
    let state = intake_state(reset);
    assert_eq!(mode(&state), IntakeMode::Chat);
    assert!(state.collected_fields.is_empty());
    assert!(
        s.client.get_conversation(id).await.unwrap().messages.is_empty(),
        "reset clears everything, messages included"
    );

    s.client.delete_conversation(id).await.unwrap();
    assert_eq!(s.client.get_conversation(id).await.err().unwrap().code(), Some(Code::NotFound));
    let checkpoints = s
        .server()
        .registry()
        .list_conversations(&frontdesk_workflows::Tenant::default(), None, None, 50)
        .await
        .unwrap()
        .0;
    assert_eq!(checkpoints.len(), 4, "erasure removes the conversation's checkpoints");
}

#[tokio::test]
async fn a_page_token_not_handed_out_for_the_same_listing_is_an_invalid_argument() {
    let s = TestServer::start().await;
    let mut ids = Vec::new();
    for _ in 0..3 {
        ids.push(s.start_intake().await);
    }
    ids.sort();
    let page = s.client.list_conversations(Some("intake"), 2, None).await.unwrap();
    let token = page.next_page_token;
    assert!(!token.is_empty() && !token.contains("conv-"), "tokens are opaque: {token}");
    // A conversation id is what the token used to be, and any string was accepted as one.
    for (workflow, bad) in [(Some("intake"), "garbage!"), (Some("intake"), ids[0].as_str()), (None, token.as_str())] {
        let error = s.client.list_conversations(workflow, 2, Some(bad.to_owned())).await.err().unwrap();
        assert_eq!(error.code(), Some(Code::InvalidArgument), "{bad:?}");
        let api = error.api().unwrap();
        assert!(api.is_reason(ErrorReason::InvalidArgument));
        assert_eq!(api.field_violations[0].0, "page_token");
    }
    let rest = s.client.list_conversations(Some("intake"), 2, Some(token)).await.unwrap();
    let ids_rest: Vec<_> = rest.conversations.into_iter().map(|c| c.conversation_id).collect();
    assert_eq!(ids_rest, ids[2..]);
    assert!(rest.next_page_token.is_empty());
}

#[tokio::test]
async fn describe_lists_the_intake_graph() {
    let s = TestServer::start().await;
    let workflows = s.client.list_workflows().await.unwrap();
    assert_eq!(
        workflows.iter().map(|w| w.name.as_str()).collect::<Vec<_>>(),
        ["intake", "triage", "investigation", "research", "service_call"]
    );
    // The task workflows' graphs are described too, fan-out nodes marked as such.
    let research = s.client.describe_workflow("research").await.unwrap();
    assert!(research.nodes.iter().any(|n| n.name == "researcher" && n.fan_out));
    let investigation = s.client.describe_workflow("investigation").await.unwrap();
    assert!(investigation.nodes.iter().any(|n| n.name == "escalate"));
    let graph = s.client.describe_workflow("intake").await.unwrap();
    let nodes: Vec<_> = graph.nodes.iter().map(|n| n.name.as_str()).collect();
    assert_eq!(nodes, ["supervisor", "chat_agent", "elicitation_agent", "team_matching", "review_agent"]);
    assert!(graph
        .edges
        .iter()
        .any(|e| e.source == "elicitation_agent" && e.target == "team_matching" && e.conditional));
    assert!(graph.mermaid.contains("supervisor -.-> review_agent"));
    assert!(graph.nodes.iter().all(|n| !n.description.is_empty()));
}

#[tokio::test]
async fn cancel_run_stops_a_turn_and_keeps_the_last_checkpoint() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.model.push_reply(ScriptedReply::json(&route("chat_agent")).after(Duration::from_secs(30)));
    let mut stream = s.client.send_message(&id, "slow one", SendOptions::default()).await.unwrap();
    let run_id = match stream.next().await.unwrap().unwrap() {
        TurnEvent::Event(e) => e.run_id,
        other => panic!("{other:?}"),
    };
    assert!(s.client.cancel_run(&run_id).await.unwrap());
    let mut status = None;
    while let Some(item) = stream.next().await {
        if let Err(e) = item {
            status = Some(e);
        }
    }
    assert_eq!(status.unwrap().code(), Some(Code::Cancelled));
    let error = s.client.cancel_run(&run_id).await.expect_err("an ended run cannot be cancelled");
    assert_eq!(error.code(), Some(Code::NotFound));
    let conversation = s.client.get_conversation(&id).await.unwrap();
    assert_eq!(conversation.messages.len(), 1);
}

#[tokio::test]
async fn cancel_run_of_an_unknown_or_malformed_run_id_is_an_error() {
    let s = TestServer::start().await;
    let unknown = uuid::Uuid::now_v7().to_string();
    let error = s.client.cancel_run(&unknown).await.expect_err("an unknown run is not cancelled");
    assert_eq!(error.code(), Some(Code::NotFound));
    let api = error.api().unwrap();
    assert!(api.is_reason(ErrorReason::NotFound));
    assert_eq!(api.metadata.get("kind").map(String::as_str), Some("run"));
    assert_eq!(api.metadata.get("id"), Some(&unknown));
    for malformed in ["not-a-run", "", "conv-1"] {
        let error = s.client.cancel_run(malformed).await.expect_err("a malformed run id is refused");
        assert_eq!(error.code(), Some(Code::InvalidArgument), "{malformed:?}");
        assert_eq!(error.api().unwrap().field_violations[0].0, "run_id", "{malformed:?}");
    }
}

#[tokio::test]
async fn health_and_reflection_are_served() {
    let s = TestServer::start().await;
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel.clone());
    // Every service the server hosts: its own two, and each hosted workflow's.
    for service in [
        "",
        "frontdesk.v1.ConversationService",
        "frontdesk.v1.WorkflowService",
        "frontdesk.v1.TriageService",
        "frontdesk.v1.InvestigationService",
        "frontdesk.v1.ResearchService",
    ] {
        let response = health.check(tonic_health::pb::HealthCheckRequest { service: service.into() }).await.unwrap();
        let serving = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;
        assert_eq!(response.into_inner().status, serving, "{service:?}");
    }
    let unknown = health
        .check(tonic_health::pb::HealthCheckRequest { service: "frontdesk.v1.NoSuchService".into() })
        .await
        .expect_err("a service the server does not host");
    assert_eq!(unknown.code(), tonic::Code::NotFound);

    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let mut reflection = ServerReflectionClient::new(channel);
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
    let response = responses.next().await.unwrap().unwrap();
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else { panic!("{response:?}") };
    let names: Vec<_> = list.service.into_iter().map(|s| s.name).collect();
    for expected in [
        "frontdesk.v1.ConversationService",
        "frontdesk.v1.WorkflowService",
        "frontdesk.v1.TriageService",
        "frontdesk.v1.InvestigationService",
        "frontdesk.v1.ResearchService",
        "grpc.health.v1.Health",
    ] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
}

/// grpcurl decodes an error's details only if reflection describes their types.
#[tokio::test]
async fn reflection_resolves_the_google_rpc_error_details() {
    use prost::Message;
    use tonic_reflection::pb::{v1, v1alpha};
    let s = TestServer::start().await;
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    // Each symbol's file, with the message in it, through both versions of the protocol.
    let symbols = ["google.rpc.ErrorInfo", "google.rpc.BadRequest", "google.rpc.RetryInfo", "google.rpc.Status"];
    for symbol in symbols {
        let request = v1::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(v1::server_reflection_request::MessageRequest::FileContainingSymbol(symbol.into())),
        };
        let mut client = v1::server_reflection_client::ServerReflectionClient::new(channel.clone());
        let mut responses = client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
        let response = responses.next().await.unwrap().unwrap();
        let Some(v1::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
            response.message_response
        else {
            panic!("v1 {symbol}: {response:?}")
        };
        let files: Vec<prost_types::FileDescriptorProto> = files
            .file_descriptor_proto
            .iter()
            .map(|f| prost_types::FileDescriptorProto::decode(&f[..]).unwrap())
            .collect();
        let message = symbol.rsplit('.').next().unwrap();
        assert!(
            files.iter().any(|f| f.package() == "google.rpc" && f.message_type.iter().any(|m| m.name() == message)),
            "v1 {symbol}: {files:?}"
        );

        let request = v1alpha::ServerReflectionRequest {
            host: String::new(),
            message_request: Some(v1alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
                symbol.into(),
            )),
        };
        let mut client = v1alpha::server_reflection_client::ServerReflectionClient::new(channel.clone());
        let mut responses = client.server_reflection_info(futures::stream::iter([request])).await.unwrap().into_inner();
        let response = responses.next().await.unwrap().unwrap();
        assert!(
            matches!(
                response.message_response,
                Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(_))
            ),
            "v1alpha {symbol}: {response:?}"
        );
    }
}

/// The model calls of a turn, as its events reported them: (node, purpose, prompt and
/// completion tokens), in order.
fn reported_calls(events: &[v1::RunEvent]) -> Vec<(String, String, u64, u64)> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(Kind::LlmCallFinished(c)) => {
                let usage = c.usage.unwrap();
                Some((e.node.clone(), c.purpose.clone(), usage.prompt_tokens, usage.completion_tokens))
            }
            _ => None,
        })
        .collect()
}

fn list_llm_calls(thread_id: &str, page_size: i32) -> v1::ListLlmCallsRequest {
    v1::ListLlmCallsRequest { thread_id: thread_id.to_owned(), page_size, page_token: String::new() }
}

/// With `model.call_log = "redacted"`, every model call of a conversation is recorded with the
/// node that made it and listed per conversation, newest first, its prompt and reply reduced
/// to roles and character counts; the totals add up; the JSON lines file gets the same calls.
#[tokio::test]
async fn list_llm_calls_shows_a_conversations_calls_with_their_nodes_tokens_and_totals() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("llm-calls.jsonl");
    let options = Options { call_log: CallLogMode::Redacted, call_log_file: Some(file.clone()), ..Options::default() };
    let s = TestServer::start_with(options).await;
    let id = s.start_intake().await;
    let mut turns = Vec::new();
    for reply in ["Hello there, how can I help?", "Happy to explain the change process."] {
        s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!(reply))]);
        turns.push(s.turn(&id, "hello, my card number is 4111").await);
    }

    let mut workflows = s.client.workflows();
    let listed = workflows.list_llm_calls(list_llm_calls(&id, 0)).await.unwrap().into_inner();
    // Newest first: the second turn's calls, then the first's, each turn's in reverse order.
    let mut expected = Vec::new();
    for (events, result) in turns.iter().rev() {
        let reported = reported_calls(events);
        assert_eq!(reported.len(), 2, "{reported:?}");
        expected.extend(reported.into_iter().rev().map(|call| (result.run_id.clone(), call)));
    }
    let got: Vec<(String, (String, String, u64, u64))> = listed
        .calls
        .iter()
        .map(|c| (c.run_id.clone(), (c.node.clone(), c.purpose.clone(), c.prompt_tokens, c.completion_tokens)))
        .collect();
    assert_eq!(got, expected, "who made each call, and its tokens as the turn's events reported them");
    assert_eq!(
        listed.calls.iter().map(|c| c.node.as_str()).collect::<Vec<_>>(),
        ["chat_agent", "supervisor", "chat_agent", "supervisor"]
    );
    for call in &listed.calls {
        assert!(call.prompt_tokens > 0 && call.completion_tokens > 0, "{call:?}");
        assert_eq!(call.model, "scripted-test");
        assert_eq!(call.attempts, 1);
        assert!(call.error.is_empty());
        assert!(call.latency.is_some() && call.time.is_some());
        let prompt: serde_json::Value = serde_json::from_str(&call.prompt_json).unwrap();
        let messages = prompt.as_array().unwrap();
        assert!(!messages.is_empty());
        assert!(messages.iter().all(|m| m["role"].is_string() && m["chars"].as_u64().unwrap() > 0), "{prompt}");
        let response: serde_json::Value = serde_json::from_str(&call.response_json).unwrap();
        assert!(response["chars"].as_u64().unwrap() > 0, "{response}");
        assert!(!call.prompt_json.contains("4111") && !call.response_json.contains("help"), "redacted: {call:?}");
    }
    let times: Vec<_> = listed.calls.iter().map(|c| c.time.unwrap()).collect();
    assert!(times.windows(2).all(|w| (w[0].seconds, w[0].nanos) >= (w[1].seconds, w[1].nanos)), "{times:?}");

    // The totals add up, over the calls and over the turns' own usage.
    let total = listed.total_usage.unwrap();
    assert_eq!(listed.total_calls, 4);
    assert_eq!(total.prompt_tokens, listed.calls.iter().map(|c| c.prompt_tokens).sum::<u64>());
    assert_eq!(total.completion_tokens, listed.calls.iter().map(|c| c.completion_tokens).sum::<u64>());
    let run_usage = |events: &[v1::RunEvent]| {
        events
            .iter()
            .find_map(|e| match &e.kind {
                Some(Kind::RunFinished(f)) => f.usage,
                _ => None,
            })
            .unwrap()
    };
    let prompt_from_runs: u64 = turns.iter().map(|(events, _)| run_usage(events).prompt_tokens).sum();
    let completion_from_runs: u64 = turns.iter().map(|(events, _)| run_usage(events).completion_tokens).sum();
    assert_eq!((total.prompt_tokens, total.completion_tokens), (prompt_from_runs, completion_from_runs));
    let cost: f64 = listed.calls.iter().map(|c| c.cost_usd).sum();
    assert!((total.cost_usd - cost).abs() < 1e-12, "{} != {cost}", total.cost_usd);

    // A page holds the most recent calls; the totals still cover them all.
    let page = workflows.list_llm_calls(list_llm_calls(&id, 1)).await.unwrap().into_inner();
    assert_eq!(page.calls, listed.calls[..1]);
    assert_eq!((page.total_calls, page.total_usage), (4, listed.total_usage));
    assert!(listed.next_page_token.is_empty(), "everything fit in the first listing");
    // Its token reads on, one older call a page, to the last.
    let (mut paged, mut token) = (page.calls.clone(), page.next_page_token.clone());
    while !token.is_empty() {
        let request = v1::ListLlmCallsRequest { thread_id: id.clone(), page_size: 1, page_token: token };
        let next = workflows.list_llm_calls(request).await.unwrap().into_inner();
        assert_eq!(next.calls.len(), 1);
        paged.extend(next.calls);
        token = next.next_page_token;
    }
    assert_eq!(paged, listed.calls);
    let other = s.start_intake().await;
    let request = v1::ListLlmCallsRequest { thread_id: other, page_size: 1, page_token: page.next_page_token.clone() };
    let status = workflows.list_llm_calls(request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "another thread's token: {status:?}");

    // A conversation without turns is known: no calls. An unknown thread is NOT_FOUND.
    let quiet = s.start_intake().await;
    let none = workflows.list_llm_calls(list_llm_calls(&quiet, 0)).await.unwrap().into_inner();
    assert!(none.calls.is_empty());
    assert_eq!((none.total_calls, none.total_usage.unwrap().prompt_tokens), (0, 0));
    let status = workflows.list_llm_calls(list_llm_calls("conv-missing", 0)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    let details = tonic_types::StatusExt::get_error_details(&status);
    let info = details.error_info().expect("ErrorInfo");
    assert_eq!(info.metadata.get("kind").map(String::as_str), Some("thread"));
    assert_eq!(info.metadata.get("id").map(String::as_str), Some("conv-missing"));
    let status = workflows.list_llm_calls(list_llm_calls("", 0)).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument);
    let details = tonic_types::StatusExt::get_error_details(&status);
    assert_eq!(details.bad_request().unwrap().field_violations[0].field, "thread_id");

    // Erasing the conversation erases its calls: the thread is unknown now.
    s.client.delete_conversation(&id).await.unwrap();
    let status = workflows.list_llm_calls(list_llm_calls(&id, 0)).await.unwrap_err();
    assert_eq!(status.code(), Code::NotFound, "{status:?}");

    // A call left behind (as by a deletion whose erasure of the calls failed after the
    // conversation was gone) is erased by the retry, which is still told the conversation is gone.
    let db = frontdesk_store::Database::connect(&s.database_url, Default::default()).await.unwrap();
    let left = frontdesk_store::LlmCallRow {
        id: "left-behind".into(),
        thread_id: id.clone(),
        run_id: "r".into(),
        node: "n".into(),
        purpose: "p".into(),
        model: "m".into(),
        prompt_tokens: 1,
        completion_tokens: 1,
        cost_usd: 0.0,
        latency_ms: 1,
        attempts: 1,
        error: None,
        prompt_json: "[]".into(),
        response_json: "null".into(),
        at: std::time::SystemTime::now(),
    };
    db.record_llm_calls(std::slice::from_ref(&left)).await.unwrap();
    assert_eq!(s.client.delete_conversation(&id).await.err().unwrap().code(), Some(Code::NotFound));
    assert!(db.llm_calls(&id, 10).await.unwrap().is_empty(), "the retry erased the call left behind");
    db.close().await;

    // The JSON lines file has the same calls, oldest first, redacted the same way.
    s.stop().await;
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(!text.contains("4111"), "{text}");
    let lines: Vec<serde_json::Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 4, "{text}");
    let from_file: Vec<(String, String, u64)> = lines
        .iter()
        .map(|l| {
            assert_eq!(l["thread_id"], json!(id));
            (
                l["run_id"].as_str().unwrap().to_owned(),
                l["node"].as_str().unwrap().to_owned(),
                l["prompt_tokens"].as_u64().unwrap(),
            )
        })
        .collect();
    let from_api: Vec<(String, String, u64)> =
        listed.calls.iter().rev().map(|c| (c.run_id.clone(), c.node.clone(), c.prompt_tokens)).collect();
    assert_eq!(from_file, from_api);
}

/// With the call log off (the default) nothing is recorded: a conversation lists no calls.
#[tokio::test]
async fn with_the_call_log_off_a_conversation_lists_no_calls() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("Hi."))]);
    s.turn(&id, "hello").await;
    let listed = s.client.workflows().list_llm_calls(list_llm_calls(&id, 0)).await.unwrap().into_inner();
    assert!(listed.calls.is_empty());
    assert_eq!(listed.total_calls, 0);
}

/// The code of `status` and the field its `BadRequest` names ("" without one).
fn violation(status: &tonic::Status) -> (Code, String) {
    let details = tonic_types::StatusExt::get_error_details(status);
    let field = details.bad_request().and_then(|b| b.field_violations.first()).map(|v| v.field.clone());
    (status.code(), field.unwrap_or_default())
}

/// A `ResetConversation` key is checked as every call's is, though a reset needs none.
#[tokio::test]
async fn reset_with_a_bad_idempotency_key_is_an_invalid_argument() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    for bad in ["reset\0-1".to_owned(), "line\nbreak".to_owned(), "k".repeat(129)] {
        let error = s.client.reset_conversation(&id, Some(bad.clone())).await.expect_err("refused");
        let api = error.api().unwrap();
        assert_eq!(
            (api.code, api.field_violations[0].0.as_str()),
            (Code::InvalidArgument, "idempotency_key"),
            "{bad:?}"
        );
    }
    s.client.reset_conversation(&id, Some("reset-1".into())).await.expect("a good key is accepted");
    // The key is checked before the conversation is looked up.
    let error = s.client.reset_conversation("conv-missing", Some("k\0".into())).await.err().unwrap();
    assert_eq!(error.code(), Some(Code::InvalidArgument));
}

/// PostgreSQL refuses a NUL in a text value, and a call failing there would be answered as a
/// store outage (`UNAVAILABLE`, with `RetryInfo`) that no retry mends. Every id and text field
/// is refused with a NUL before it reaches the store; here on SQLite, which would store it.
#[tokio::test]
async fn a_nul_in_an_id_or_text_field_of_any_service_is_an_invalid_argument() {
    use v1::{get_audit_trail_request::Key, start_investigation_request::Mutation};
    let s = TestServer::start().await;
    let mut investigations = s.client.investigations();
    let mut expected = Vec::new();
    let mut got = Vec::new();
    let mut check = |field: &str, outcome: Result<(), tonic::Status>| {
        expected.push((Code::InvalidArgument, field.to_owned()));
        got.push(outcome.map_or_else(|status| violation(&status), |()| (Code::Ok, field.to_owned())));
    };

    let request = v1::GetInvestigationRequest { investigation_id: "INV-1001\0".into() };
    check("investigation_id", investigations.get_investigation(request).await.map(drop));
    let request = v1::WatchInvestigationRequest { investigation_id: "INV-1001\0".into(), after_seq: 0 };
    check("investigation_id", investigations.watch_investigation(request).await.map(drop));
    let request = v1::GetAuditTrailRequest { key: Some(Key::InvestigationId("INV-1001\0".into())) };
    check("investigation_id", investigations.get_audit_trail(request).await.map(drop));
    let request = v1::GetAuditTrailRequest { key: Some(Key::CorrelationId("corr\0".into())) };
    check("correlation_id", investigations.get_audit_trail(request).await.map(drop));
    let request = v1::ListPendingActionsRequest { recipient_id: "u001\0".into(), ..Default::default() };
    check("recipient_id", investigations.list_pending_actions(request).await.map(drop));
    let request = v1::StartInvestigationRequest {
        mutation: Some(Mutation::MutationId("1001\0".into())),
        idempotency_key: "".into(),
    };
    check("mutation_id", investigations.start_investigation(request).await.map(drop));
    let inline = common::inline_mutation("2101");
    for (field, mutation) in [
        ("inline_mutation.description", v1::HrMutation { description: "Raised\0".into(), ..inline.clone() }),
        (
            "inline_mutation.change_type",
            v1::HrMutation { mutation_id: "2102".into(), change_type: "budget\0".into(), ..inline.clone() },
        ),
    ] {
        let request = v1::StartInvestigationRequest {
            mutation: Some(Mutation::InlineMutation(mutation)),
            idempotency_key: "".into(),
        };
        check(field, investigations.start_investigation(request).await.map(drop));
    }
    let reply = v1::RespondRequest {
        investigation_id: "INV-1002".into(),
        action_id: "INV-1002-changer".into(),
        role: v1::ResponderRole::Changer as i32,
        responder_id: "u002".into(),
        text: "I covered for a colleague.".into(),
        decision: 0,
        idempotency_key: String::new(),
    };
    for (field, request) in [
        ("investigation_id", v1::RespondRequest { investigation_id: "INV-1002\0".into(), ..reply.clone() }),
        ("action_id", v1::RespondRequest { action_id: "INV-1002-changer\0".into(), ..reply.clone() }),
        ("responder_id", v1::RespondRequest { responder_id: "u002\0".into(), ..reply.clone() }),
    ] {
        check(field, investigations.respond(request).await.map(drop));
    }

    let request = v1::GetResearchRequest { research_id: "RES-1\0".into() };
    check("research_id", s.client.research().get_research(request).await.map(drop));
    // A page token is the caller's to send back: one made up with a NUL in its position.
    let forged = frontdesk_workflows::page_token::encode("research", "default", &"RES-\0");
    let request = v1::ListResearchRequest { page_size: 0, page_token: forged };
    check("page_token", s.client.research().list_research(request).await.map(drop));
    check("thread_id", s.client.workflows().list_llm_calls(list_llm_calls("conv-1\0", 0)).await.map(drop));

    assert_eq!(got, expected);
    assert!(s.model.requests().is_empty(), "no model call for a bad request");
}

/// Start an investigation of mutation 1001 (authorised: the brief, the rights check's
/// explanation and the report) and read its stream to the end.
async fn investigate_1001(s: &TestServer) -> String {
    s.script(&[
        ("investigation_agent.brief", json!({"summary": "A change to review."})),
        ("rights_check_agent.explain", json!({"message": "The grants found decide it."})),
        ("advisory_agent.report", json!({"summary": "Summary.", "details": "Details."})),
    ]);
    let mutation = Some(v1::start_investigation_request::Mutation::MutationId("1001".into()));
    let request = v1::StartInvestigationRequest { mutation, idempotency_key: String::new() };
    let mut stream = s.client.investigations().start_investigation(request).await.unwrap().into_inner();
    while let Some(item) = stream.next().await {
        item.expect("the investigation runs");
    }
    "INV-1001".into()
}

/// Triage an English billing ticket of CUST-003 that is answered and archived as resolved; its
/// thread id.
async fn archived_ticket(s: &TestServer) -> String {
    s.script(&[
        ("translator.translate", json!({"original_language": "en", "is_english": true})),
        (
            "supervisor.classify",
            json!({"reasoning": "scripted", "urgency": "low", "ticket_type": "billing", "requires_escalation": false}),
        ),
        (
            "specialist.billing",
            json!({
                "reasoning": "scripted",
                "recommended_action": "auto_respond",
                "suggested_response": "Refund started.",
                "relevant_articles": [],
                "extracted_info": {"product_area": "billing", "issue_type": "double_charge", "sentiment": "calm"}
            }),
        ),
    ]);
    let request = v1::TriageTicketRequest {
        customer_id: "CUST-003".into(),
        message: "refund please".into(),
        subject: "Help".into(),
        ..Default::default()
    };
    let mut stream = s.client.triage().triage_ticket(request).await.unwrap().into_inner();
    let mut result = None;
    while let Some(item) = stream.next().await {
        if let Some(v1::triage_ticket_response::Payload::Result(r)) = item.expect("the ticket is triaged").payload {
            result = Some(r);
        }
    }
    let result = result.expect("a result");
    assert_eq!(result.status(), v1::TicketStatus::Resolved);
    format!("CUST-003:{}", result.ticket_id)
}

/// `DeleteConversation` erases a conversation's model calls and no other thread's: on the id
/// of an investigation (its thread in the database) or of an archived ticket (its thread gone,
/// the triage archive keeping it) it is `NOT_FOUND`, and their calls stay in the log.
#[tokio::test]
async fn delete_conversation_on_another_workflows_thread_keeps_its_model_calls() {
    let s = TestServer::start_with(Options { call_log: CallLogMode::Redacted, ..Options::default() }).await;
    let threads = [investigate_1001(&s).await, archived_ticket(&s).await];
    let mut workflows = s.client.workflows();
    for thread in &threads {
        let before = workflows.list_llm_calls(list_llm_calls(thread, 0)).await.unwrap().into_inner();
        assert!(before.total_calls > 0, "{thread} made model calls");
        let error = s.client.delete_conversation(thread).await.expect_err("not a conversation");
        assert_eq!(error.code(), Some(Code::NotFound), "{thread}");
        let after = workflows.list_llm_calls(list_llm_calls(thread, 0)).await.unwrap().into_inner();
        assert_eq!(after.total_calls, before.total_calls, "{thread}'s calls stay");
    }
}
