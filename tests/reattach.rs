//! Runs that outlive their caller's connection and their replica, through the real server:
//! `SubscribeRun` after a broken stream, a retry that attaches to the run in flight instead of
//! THREAD_BUSY, and a surviving replica taking over a dead one's turn once its lease expires.

mod common;

use std::time::{Duration, Instant};

use common::{process::spawn_replica, TestServer};
use frontdesk_api::v1::{self, run_event::Kind, ErrorReason};
use frontdesk_client::{Client, ClientError, SendOptions, TurnEvent};
use frontdesk_llm::ScriptedReply;
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

/// A chat turn whose reply takes `delay`: long enough to break a stream or retry meanwhile.
fn slow_chat_turn(s: &TestServer, reply: &str, delay: Duration) {
    s.script(&[("supervisor.route", json!({"reasoning": "scripted", "route": "chat_agent"}))]);
    s.model.push_reply(ScriptedReply::text(reply).for_purpose("chat.chat").after(delay));
}

fn keyed(key: &str) -> SendOptions {
    SendOptions { idempotency_key: Some(key.into()), queue_if_busy: false }
}

/// Every event of a subscription, with what it said it skipped.
async fn subscription(client: &Client, run_id: &str, after: u64) -> Vec<(v1::RunEvent, u64)> {
    let mut stream = client.subscribe_run(run_id, after).await.expect("the replica knows the run");
    let mut got = Vec::new();
    while let Some(item) = stream.next().await {
        let v1::SubscribeRunResponse { event, skipped } = item.expect("the subscription streams");
        got.push((event.expect("every response carries an event"), skipped));
    }
    got
}

fn is_last(event: &v1::RunEvent) -> bool {
    matches!(event.kind, Some(Kind::RunFinished(_) | Kind::RunFailed(_) | Kind::RunInterrupted(_)))
}

#[tokio::test]
async fn a_broken_stream_reattaches_by_run_id_and_a_late_subscriber_still_gets_the_end() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    slow_chat_turn(&s, "slow reply", Duration::from_millis(600));

    let mut stream = s.client.send_message(&id, "hello", keyed("turn-1")).await.unwrap();
    let first = match stream.next().await.unwrap().unwrap() {
        TurnEvent::Event(event) => event,
        other => panic!("a turn's stream starts with an event, got {other:?}"),
    };
    assert!(matches!(first.kind, Some(Kind::RunStarted(_))), "{first:?}");
    assert_eq!(first.event_id, 1);
    let run_id = first.run_id.clone();
    drop(stream); // the caller's connection breaks

    // Re-attached after the first event: the rest, live, until the run's last event.
    let rest = subscription(&s.client, &run_id, 1).await;
    let ids: Vec<u64> = rest.iter().map(|(e, _)| e.event_id).collect();
    assert_eq!(ids, (2..2 + ids.len() as u64).collect::<Vec<_>>(), "every event after the first, in order, once");
    assert!(rest.iter().all(|(e, skipped)| e.run_id == run_id && *skipped == 0));
    assert!(is_last(&rest.last().unwrap().0), "the subscription ends with the run's last event");
    assert!(rest.iter().any(|(e, _)| matches!(e.kind, Some(Kind::NodeFinished(_)))));

    // After the run ended, a late subscriber gets the kept events and the end at once.
    let late = subscription(&s.client, &run_id, 3).await;
    assert_eq!(late.first().map(|(e, _)| e.event_id), Some(4));
    assert_eq!(late.last().map(|(e, _)| e.event_id), rest.last().map(|(e, _)| e.event_id));
    let all = subscription(&s.client, &run_id, 0).await;
    assert_eq!(all.len(), rest.len() + 1, "after 0: every kept event, the first included");

    // The turn's result: the same call with its key replays it (no second run: the script
    // holds no more replies).
    let (_, result) = s.client.send_message_and_wait(&id, "hello", keyed("turn-1")).await.unwrap();
    assert_eq!(result.reply.unwrap().text, "slow reply");
    assert_eq!(s.model.remaining(), 0);
    s.stop().await;
}

#[tokio::test]
async fn subscribing_to_an_unknown_or_malformed_run_id_is_refused() {
    let s = TestServer::start().await;
    let unknown = uuid::Uuid::new_v4().to_string();
    let error = s.client.subscribe_run(&unknown, 0).await.err().expect("an unknown run is refused");
    let api = error.api().expect("a server error").clone();
    assert_eq!(api.code, Code::NotFound, "{api}");
    assert!(api.is_reason(ErrorReason::NotFound), "{api}");
    assert_eq!((api.metadata["kind"].as_str(), api.metadata["id"].as_str()), ("run", unknown.as_str()));

    let error = s.client.subscribe_run("not-a-run", 0).await.err().expect("a malformed id is refused");
    let api = error.api().expect("a server error").clone();
    assert_eq!(api.code, Code::InvalidArgument, "{api}");
    assert_eq!(api.field_violations[0].0, "run_id");
    s.stop().await;
}

#[tokio::test]
async fn a_retry_of_a_turn_in_flight_attaches_to_it_instead_of_thread_busy() {
    let s = TestServer::start().await;
    let id = s.start_intake().await;
    slow_chat_turn(&s, "one reply", Duration::from_millis(800));

    let mut original = s.client.send_message(&id, "hello", keyed("turn-1")).await.unwrap();
    let first = original.next().await.unwrap().unwrap();
    let run_id = first.as_event().expect("an event first").run_id.clone();

    // The caller retries (its connection looked broken) while the turn still runs.
    let (events, result) = s.client.send_message_and_wait(&id, "hello", keyed("turn-1")).await.expect("attached");
    assert_eq!(result.reply.unwrap().text, "one reply");
    assert!(events.iter().all(|e| e.run_id == run_id), "the retry streams the same run's events");
    let ids: Vec<u64> = events.iter().map(|e| e.event_id).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "from its first event, each once");
    assert!(is_last(events.last().unwrap()));

    // The original stream ends the same way; the turn ran once.
    let mut original_result = None;
    while let Some(item) = original.next().await {
        if let TurnEvent::Result(r) = item.unwrap() {
            original_result = Some(r);
        }
    }
    assert_eq!(original_result.unwrap().reply.unwrap().text, "one reply");
    let messages = s.client.get_conversation(&id).await.unwrap().messages;
    assert_eq!(messages.iter().filter(|m| m.text == "hello").count(), 1, "the turn is recorded once");
    assert_eq!(s.model.remaining(), 0);

    // A different text under the same key is still refused: attaching is for the same call.
    let error = s.client.send_message_and_wait(&id, "something else", keyed("turn-1")).await.unwrap_err();
    assert!(error.api().unwrap().is_reason(ErrorReason::IdempotencyMismatch), "{error}");
    s.stop().await;
}

fn chat_turn(reply: &str, delay_ms: u64) -> Vec<serde_json::Value> {
    vec![
        json!({"purpose": "supervisor.route", "json": {"reasoning": "scripted", "route": "chat_agent"}}),
        json!({"purpose": "chat.chat", "content": reply, "delay_ms": delay_ms}),
    ]
}

#[tokio::test]
async fn a_surviving_replica_finishes_a_dead_replicas_turn_once_its_lease_expires() {
    const LEASE_SECS: u64 = 3;
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("frontdesk.db");
    let lease = LEASE_SECS.to_string();
    let settings = [("FRONTDESK__RUNS__LEASE_SECS", lease.as_str()), ("FRONTDESK__RUNS__TAKEOVER_SCAN_SECS", "1")];
    // Replica a hangs in the model; replica b answers at once.
    let a = spawn_replica(
        &db,
        &json!({"model": "scripted-a", "replies": chat_turn("never delivered", 60_000)}),
        dir.path(),
        "a",
        "replica-a",
        &settings,
    );
    let b = spawn_replica(
        &db,
        // Intake commits nothing between its model-only nodes: b runs the turn again from its
        // committed input, the supervisor first.
        &json!({"model": "scripted-b", "replies": chat_turn("from b", 0)}),
        dir.path(),
        "b",
        "replica-b",
        &settings,
    );
    let on_a = a.client().await;
    let on_b = b.client().await;
    let id = on_a.start_conversation("intake", Default::default()).await.unwrap().conversation.unwrap().conversation_id;

    let mut stream = on_a.send_message(&id, "hello", keyed("turn-1")).await.unwrap();
    loop {
        match stream.next().await.unwrap().unwrap() {
            TurnEvent::Event(e) if matches!(e.kind, Some(Kind::NodeStarted(_))) && e.node == "chat_agent" => break,
            _ => {}
        }
    }
    a.kill();
    let died = Instant::now();

    // The caller moves to replica b and retries with the key, waiting as RetryInfo says.
    let mut advised = Vec::new();
    let result = loop {
        match on_b.send_message_and_wait(&id, "hello", keyed("turn-1")).await {
            Ok((_, result)) => break result,
            Err(ClientError::Status(e)) if e.code == Code::Aborted && died.elapsed() < Duration::from_secs(60) => {
                assert!(e.is_reason(ErrorReason::ThreadBusy), "{e}");
                let wait = e.retry_after.expect("THREAD_BUSY says how long to wait");
                assert!(wait <= Duration::from_secs(LEASE_SECS), "RetryInfo is the lease's remainder, got {wait:?}");
                advised.push(wait);
                tokio::time::sleep(wait.max(Duration::from_millis(100))).await;
            }
            Err(other) => panic!("the retry failed: {other}"),
        }
    };
    let waited = died.elapsed();
    assert_eq!(result.reply.unwrap().text, "from b");
    // The lease, one scan, and the turn itself; far below the node timeout (120 s).
    assert!(waited < Duration::from_secs(LEASE_SECS + 10), "took {waited:?} (advised {advised:?})");
    let messages = on_b.get_conversation(&id).await.unwrap().messages;
    let texts: Vec<&str> = messages.iter().map(|m| m.text.as_str()).collect();
    assert_eq!(texts[1..], ["hello", "from b"], "the turn once, answered by the survivor");
}
