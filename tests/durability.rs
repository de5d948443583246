//! Durability of the real `frontdesk-server` binary: a graceful restart mid-conversation, and
//! a SIGKILL during a turn, after which no acknowledged turn is lost or duplicated.

mod common;

use std::time::Duration;

use common::process::spawn_server;

use frontdesk_api::v1::{run_event::Kind, Role};
use frontdesk_client::{Client, ClientError, SendOptions, TurnEvent, TurnStream};
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

fn chat_turn(reply: &str) -> Vec<serde_json::Value> {
    vec![
        json!({"purpose": "supervisor.route", "json": {"reasoning": "scripted", "route": "chat_agent"}}),
        json!({"purpose": "chat.chat", "content": reply}),
    ]
}

fn script(turns: &[Vec<serde_json::Value>]) -> serde_json::Value {
    json!({"model": "scripted-durability", "replies": turns.concat()})
}

async fn start(client: &Client) -> String {
    client.start_conversation("intake", Default::default()).await.unwrap().conversation.unwrap().conversation_id
}

async fn transcript(client: &Client, id: &str) -> Vec<(i32, String)> {
    client.get_conversation(id).await.unwrap().messages.into_iter().map(|m| (m.role, m.text)).collect()
}

#[tokio::test]
async fn a_conversation_continues_after_a_graceful_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let server = spawn_server(&db, &script(&[chat_turn("first reply")]), dir.path(), "a");
    let client = server.client().await;
    let id = start(&client).await;
    client.send_message_and_wait(&id, "turn one", SendOptions::default()).await.unwrap();
    server.terminate();

    let server = spawn_server(&db, &script(&[chat_turn("second reply")]), dir.path(), "b");
    let client = server.client().await;
    let (_, result) = client.send_message_and_wait(&id, "turn two", SendOptions::default()).await.unwrap();
    assert_eq!(result.reply.unwrap().text, "second reply");
    let texts: Vec<String> = transcript(&client, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[1..], ["turn one", "first reply", "turn two", "second reply"]);
}

#[tokio::test]
async fn sigkill_during_a_turn_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    // Turn two's supervisor call hangs long enough for the kill to land mid-turn.
    let mut slow = chat_turn("never delivered");
    slow[0]["delay_ms"] = json!(60_000);
    let server = spawn_server(&db, &script(&[chat_turn("reply one"), slow]), dir.path(), "a");
    let client = server.client().await;
    let id = start(&client).await;
    let (_, one) = client.send_message_and_wait(&id, "turn one", SendOptions::default()).await.unwrap();
    assert_eq!(one.reply.unwrap().text, "reply one");

    // Wait until the turn is accepted (its input committed) and its first node is running.
    let mut stream = send_until_started(&client, &id, "turn two", "turn-two", "supervisor").await;
    server.kill();
    assert!(stream.next().await.is_none_or(|item| item.is_err()), "the stream breaks with the server");

    // After the restart, the crashed run is finished by recovery; the client retries with the
    // same key until the server answers with that run's outcome.
    let server = spawn_server(&db, &script(&[chat_turn("reply two"), chat_turn("reply three")]), dir.path(), "b");
    let client = server.client().await;
    let two = retry_turn(&client, &id, "turn two", "turn-two").await;
    assert_eq!(two.reply.unwrap().text, "reply two");
    let (_, three) = client.send_message_and_wait(&id, "turn three", SendOptions::default()).await.unwrap();
    assert_eq!(three.reply.unwrap().text, "reply three");

    let messages = transcript(&client, &id).await;
    let texts: Vec<&str> = messages.iter().map(|(_, t)| t.as_str()).collect();
    assert_eq!(
        texts[1..],
        ["turn one", "reply one", "turn two", "reply two", "turn three", "reply three"],
        "every acknowledged turn exactly once, in order"
    );
    assert_eq!(messages.iter().filter(|(role, _)| *role == Role::User as i32).count(), 3);
    let conversation = client.get_conversation(&id).await.unwrap().conversation.unwrap();
    assert_eq!(conversation.turn_count, 3);
}

#[tokio::test]
async fn graceful_shutdown_lets_an_in_flight_turn_commit() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let mut slow = chat_turn("finished during shutdown");
    slow[0]["delay_ms"] = json!(1_000);
    let server = spawn_server(&db, &script(&[slow]), dir.path(), "a");
    let client = server.client().await;
    let id = start(&client).await;
    let mut stream = client.send_message(&id, "in flight", SendOptions::default()).await.unwrap();
    loop {
        if let TurnEvent::Event(e) = stream.next().await.unwrap().unwrap() {
            if matches!(e.kind, Some(Kind::NodeStarted(_))) {
                break;
            }
        }
    }
    let stopping = tokio::task::spawn_blocking(move || server.terminate());
    let mut reply = None;
    while let Some(item) = stream.next().await {
        if let Ok(TurnEvent::Result(result)) = item {
            reply = result.reply.map(|m| m.text);
        }
    }
    assert_eq!(reply.as_deref(), Some("finished during shutdown"), "the caller still gets the result");
    stopping.await.unwrap();

    let server = spawn_server(&db, &script(&[]), dir.path(), "b");
    let texts: Vec<String> = transcript(&server.client().await, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[1..], ["in flight", "finished during shutdown"]);
}

/// The intake script up to REVIEW with the Ops Change team (two turns), as the scripted model
/// answers them in order.
fn to_review() -> Vec<Vec<serde_json::Value>> {
    let extract = |stated: serde_json::Value, followup: &str| {
        json!({"stated": stated, "marked_unknown": ["rollback_plan"], "reasoning": "scripted",
               "followup_response": followup, "user_wants_to_abandon": false})
    };
    let fields = json!([
        {"field": "title", "value": "Patch billing-db"},
        {"field": "description", "value": "Patch the billing database to fix a memory leak"},
        {"field": "justification", "value": "security patch required by policy"},
        {"field": "affected_system", "value": "billing-db"},
        {"field": "environment", "value": "production"},
        {"field": "urgency", "value": "high"},
        {"field": "requested_by", "value": "alice.nguyen"},
        {"field": "desired_date", "value": "2026-12-01"},
    ]);
    let route = |to: &str| json!({"purpose": "supervisor.route", "json": {"reasoning": "scripted", "route": to}});
    vec![
        vec![
            route("elicitation_agent"),
            json!({"purpose": "elicitation.extract", "json": extract(json!([]), "Sure. What should change, and why?")}),
        ],
        vec![
            route("elicitation_agent"),
            json!({"purpose": "elicitation.extract", "json": extract(fields, "")}),
            json!({"purpose": "team_matching.match", "json": {"reasoning": "scripted", "team_id": "ops-change", "confidence": "high"}}),
        ],
    ]
}

const STATING: &str = "description: Patch the billing database to fix a memory leak; justification: security patch \
     required by policy; affected_system: billing-db; environment: production; urgency: high; requested_by: \
     alice.nguyen; desired_date: 2026-12-01; title: Patch billing-db; rollback plan unknown";

/// Not a bare "yes" (which the supervisor routes to review without a model call): the
/// supervisor asks the model, so a supervisor that ran again would be seen.
const CONFIRMATION: &str = "That matches what I need, file it with Ops";

fn confirm() -> serde_json::Value {
    json!({"purpose": "review.classify", "json": {"action_type": "confirm", "reasoning": "scripted", "response_to_user": ""}})
}

/// Sends a turn with `key`, retrying while the restarted server is still finishing the run a
/// crash interrupted (recovery holds the thread), until it answers with that run's result.
async fn retry_turn(client: &Client, id: &str, text: &str, key: &str) -> frontdesk_api::v1::TurnResult {
    let opts = SendOptions { idempotency_key: Some(key.into()), queue_if_busy: true };
    for _ in 0..50 {
        match client.send_message_and_wait(id, text, opts.clone()).await {
            Ok((_, result)) => return result,
            Err(ClientError::Status(e)) if e.code == Code::Aborted => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(other) => panic!("retry failed: {other}"),
        }
    }
    panic!("the retried turn never finished");
}

/// Sends a turn with `key` and returns once `node` has started, with the stream still open.
async fn send_until_started(client: &Client, id: &str, text: &str, key: &str, node: &str) -> TurnStream {
    let opts = SendOptions { idempotency_key: Some(key.into()), queue_if_busy: true };
    let mut stream = client.send_message(id, text, opts).await.unwrap();
    loop {
        match stream.next().await.unwrap().unwrap() {
            TurnEvent::Event(e) if matches!(e.kind, Some(Kind::NodeStarted(_))) && e.node == node => break,
            _ => {}
        }
    }
    stream
}

async fn submissions(db: &std::path::Path, id: &str) -> usize {
    let url = format!("sqlite://{}", db.display());
    let store = frontdesk_store::Database::connect(&url, Default::default()).await.unwrap();
    let rows = store.list_submissions(id).await.unwrap();
    store.close().await;
    rows.len()
}

#[tokio::test]
async fn sigkill_between_model_only_nodes_reruns_them_and_the_turn_ends_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    // Intake commits only the turn's input and its end: the supervisor's route is not durable
    // when the chat agent's call hangs, so the restarted server routes the turn again.
    let mut slow = chat_turn("never delivered");
    slow[1]["delay_ms"] = json!(60_000);
    let server = spawn_server(&db, &script(&[chat_turn("reply one"), slow]), dir.path(), "a");
    let client = server.client().await;
    let id = start(&client).await;
    client.send_message_and_wait(&id, "turn one", SendOptions::default()).await.unwrap();
    let stream = send_until_started(&client, &id, "turn two", "turn-two", "chat_agent").await;
    server.kill();
    drop(stream);

    let server = spawn_server(&db, &script(&[chat_turn("reply two")]), dir.path(), "b");
    let client = server.client().await;
    let two = retry_turn(&client, &id, "turn two", "turn-two").await;
    assert_eq!(two.reply.unwrap().text, "reply two", "the same turn as one that never crashed");
    let texts: Vec<String> = transcript(&client, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[1..], ["turn one", "reply one", "turn two", "reply two"]);
}

#[tokio::test]
async fn sigkill_at_the_submitting_node_and_after_it_files_the_request_once() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let route_review =
        json!({"purpose": "supervisor.route", "json": {"reasoning": "scripted", "route": "review_agent"}});
    let mut slow_confirm = confirm();
    slow_confirm["delay_ms"] = json!(60_000);
    let mut turns = to_review();
    turns.push(vec![route_review, slow_confirm]);
    let server = spawn_server(&db, &script(&turns), dir.path(), "a");
    let client = server.client().await;
    let id = start(&client).await;
    client.send_message_and_wait(&id, "I want to raise a change request", SendOptions::default()).await.unwrap();
    let (_, review) = client.send_message_and_wait(&id, STATING, SendOptions::default()).await.unwrap();
    assert!(review.reply.unwrap().text.contains("Ops"), "the request is in review");

    // The review agent (the node with effects) is in flight: the run committed before it.
    let stream = send_until_started(&client, &id, CONFIRMATION, "confirm", "review_agent").await;
    server.kill();
    drop(stream);
    assert_eq!(submissions(&db, &id).await, 0);

    // The restarted server resumes at the review agent: its script has no supervisor reply,
    // so a supervisor that ran again would fail the turn.
    let server = spawn_server(&db, &script(&[vec![confirm()]]), dir.path(), "b");
    let client = server.client().await;
    let submitted = retry_turn(&client, &id, CONFIRMATION, "confirm").await;
    let reply = submitted.reply.unwrap().text;
    assert!(reply.contains("has been submitted"), "{reply}");
    assert_eq!(submissions(&db, &id).await, 1, "filed once");

    // Killed after the submitting node: nothing runs again, and a retry replays the outcome.
    server.kill();
    let server = spawn_server(&db, &script(&[]), dir.path(), "c");
    let client = server.client().await;
    let replayed = retry_turn(&client, &id, CONFIRMATION, "confirm").await;
    assert_eq!(replayed.reply.unwrap().text, reply);
    assert!(replayed.replayed);
    assert_eq!(submissions(&db, &id).await, 1, "still filed once");
    let texts: Vec<String> = transcript(&client, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts.iter().filter(|t| t.contains("has been submitted")).count(), 1);
    assert_eq!(texts.iter().filter(|t| t.as_str() == CONFIRMATION).count(), 1);
}

/// A server with a one-second grace period ("a", on `db`), a conversation that had turn one, and
/// turn two (key `turn-two`) running, its supervisor's call outlasting the grace period: the
/// server, a client without the SDK's retries (the tests look at the status the server ends the
/// call with), the conversation id, and the turn's stream and run id.
async fn turn_two_in_flight(
    dir: &std::path::Path,
    db: &std::path::Path,
) -> (common::process::ServerProcess, Client, String, TurnStream, String) {
    let mut slow = chat_turn("never delivered");
    slow[0]["delay_ms"] = json!(60_000);
    let replica = format!("test-replica:{}", db.display());
    let grace = [("FRONTDESK__SHUTDOWN_GRACE_SECS", "1")];
    let script = script(&[chat_turn("reply one"), slow]);
    let server = common::process::spawn_replica(db, &script, dir, "a", &replica, &grace);
    let client = server.client().await.with_retry_policy(None);
    let id = start(&client).await;
    client.send_message_and_wait(&id, "turn one", SendOptions::default()).await.unwrap();
    let opts = SendOptions { idempotency_key: Some("turn-two".into()), queue_if_busy: true };
    let mut stream = client.send_message(&id, "turn two", opts).await.unwrap();
    let run_id = loop {
        match stream.next().await.unwrap().unwrap() {
            TurnEvent::Event(e) if matches!(e.kind, Some(Kind::NodeStarted(_))) => break e.run_id,
            _ => {}
        }
    };
    (server, client, id, stream, run_id)
}

#[tokio::test]
async fn a_turn_still_running_when_the_grace_period_ends_resumes_after_the_restart() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let (server, client, id, mut stream, run_id) = turn_two_in_flight(dir.path(), &db).await;
    let mut follower = client.subscribe_run(&run_id, 0).await.unwrap();
    let stopping = tokio::task::spawn_blocking(move || server.terminate());
    let turn = last_item(&mut stream).await.map(|item| item.map(drop));
    let subscriber = last_item(&mut follower).await.map(|item| item.map(drop));
    for (what, last) in [("the turn", turn), ("its subscriber", subscriber)] {
        let Some(Err(ClientError::Status(error))) = last else { panic!("{what} ends with an error: {last:?}") };
        // Not CANCELLED: nobody cancelled the turn, and it is not lost; a retry gets its outcome.
        assert_eq!(error.code, Code::Unavailable, "{what}: {error:?}");
        assert_eq!(error.reason.as_deref(), Some("SHUTTING_DOWN"), "{what}: {error:?}");
        assert!(error.retry_after.is_some(), "{what}: {error:?}");
    }
    stopping.await.unwrap();

    let server = spawn_server(&db, &script(&[chat_turn("reply two")]), dir.path(), "b");
    let client = server.client().await;
    let two = retry_turn(&client, &id, "turn two", "turn-two").await;
    assert_eq!(two.reply.unwrap().text, "reply two");
    let texts: Vec<String> = transcript(&client, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[1..], ["turn one", "reply one", "turn two", "reply two"], "the accepted turn, once");
}

/// The run a restart resumes fails (the model's replies do not parse), and it cannot roll back
/// past its own input: the retry of the same turn runs without appending the message again.
#[tokio::test]
async fn a_turn_whose_resumed_run_failed_is_retried_without_its_message_twice() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let (server, _, id, mut stream, _) = turn_two_in_flight(dir.path(), &db).await;
    let stopping = tokio::task::spawn_blocking(move || server.terminate());
    let last = last_item(&mut stream).await;
    assert!(matches!(last, Some(Err(_))), "the turn ends with the shutdown: {last:?}");
    stopping.await.unwrap();

    // Resumed at start-up, the turn's supervisor gets a reply that does not parse, twice (the
    // reply and its repair attempt), and the run fails; the retry's turn then goes through.
    let garbage = || json!({"purpose": "supervisor.route", "content": "not json"});
    let replies = [vec![garbage(), garbage()], chat_turn("reply two")];
    let server = spawn_server(&db, &script(&replies), dir.path(), "b");
    let client = server.client().await;
    let opts = SendOptions { idempotency_key: Some("turn-two".into()), queue_if_busy: true };
    let mut reply = None;
    for _ in 0..50 {
        match client.send_message_and_wait(&id, "turn two", opts.clone()).await {
            Ok((_, result)) => {
                reply = result.reply;
                break;
            }
            // Busy with the resumed run, or attached to it as it failed: the next call retries
            // after that failure.
            Err(ClientError::Status(e)) if matches!(e.code, Code::Aborted | Code::Internal) => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            Err(other) => panic!("retry failed: {other}"),
        }
    }
    assert_eq!(reply.expect("the retried turn finished").text, "reply two");
    let texts: Vec<String> = transcript(&client, &id).await.into_iter().map(|(_, t)| t).collect();
    assert_eq!(texts[1..], ["turn one", "reply one", "turn two", "reply two"], "the message once");
}

async fn last_item<T>(stream: &mut (impl futures::Stream<Item = T> + Unpin)) -> Option<T> {
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item);
    }
    last
}
