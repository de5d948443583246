//! Durability of the real `frontdesk-server` binary: a graceful restart mid-conversation, and
//! a SIGKILL during a turn, after which no acknowledged turn is lost or duplicated.

mod common;

use std::time::Duration;

use common::process::spawn_server;

use frontdesk_api::v1::{run_event::Kind, Role};
use frontdesk_client::{Client, ClientError, SendOptions, TurnEvent};
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

    let opts = SendOptions { idempotency_key: Some("turn-two".into()), queue_if_busy: true };
    let mut stream = client.send_message(&id, "turn two", opts.clone()).await.unwrap();
    // Wait until the turn is accepted (its input committed) and its first node is running.
    loop {
        match stream.next().await.unwrap().unwrap() {
            TurnEvent::Event(e) if matches!(e.kind, Some(Kind::NodeStarted(_))) => break,
            _ => {}
        }
    }
    server.kill();
    assert!(stream.next().await.is_none_or(|item| item.is_err()), "the stream breaks with the server");

    // After the restart, the crashed run is finished by recovery; the client retries with the
    // same key until the server answers with that run's outcome.
    let server = spawn_server(&db, &script(&[chat_turn("reply two"), chat_turn("reply three")]), dir.path(), "b");
    let client = server.client().await;
    let mut attempts = 0;
    let two = loop {
        attempts += 1;
        match client.send_message_and_wait(&id, "turn two", opts.clone()).await {
            Ok((_, result)) => break result,
            Err(ClientError::Status(e)) if e.code == Code::Aborted && attempts < 50 => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(other) => panic!("retry failed: {other}"),
        }
    };
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
