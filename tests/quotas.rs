//! Per-tenant quotas through a real server: a burst over `requests_per_sec` is refused with the
//! wait until the next token, and a run over `max_concurrent_runs` until one in flight ends or
//! its caller goes away. Auth is off on loopback, so every call is tenant `default`.

mod common;

use std::time::{Duration, Instant};

use common::*;
use frontdesk_api::v1::{run_event::Kind, ErrorReason};
use frontdesk_client::{ClientError, SendOptions, TurnEvent, TurnStream};
use frontdesk_llm::ScriptedReply;
use frontdesk_server::config::Config;
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

async fn start(configure: fn(&mut Config)) -> TestServer {
    TestServer::start_with(Options { configure, ..Options::default() }).await
}

/// Asserts a quota refusal of `quota` at `limit`; returns its retry advice.
fn refused(error: &ClientError, quota: &str, limit: u32) -> Duration {
    let api = error.api().unwrap_or_else(|| panic!("expected a server error, got {error:?}"));
    assert_eq!(api.code, Code::ResourceExhausted, "{api}");
    assert!(api.is_reason(ErrorReason::QuotaExceeded), "{api}");
    assert_eq!(api.metadata.get("quota").map(String::as_str), Some(quota), "{api}");
    assert_eq!(api.metadata.get("limit"), Some(&limit.to_string()), "{api}");
    api.retry_after.expect("a quota refusal carries RetryInfo")
}

/// A turn whose model reply takes `delay`, so the run stays in flight meanwhile.
fn slow_turn(s: &TestServer, delay: Duration) {
    s.model.push_reply(ScriptedReply::json(&route("chat_agent")).for_purpose("supervisor.route").after(delay));
    s.script(&[("chat.chat", json!("done"))]);
}

/// Waits for a run's first event, `RunStarted`, and returns its run id.
async fn started(stream: &mut TurnStream) -> String {
    match stream.next().await.expect("an event").expect("the run starts") {
        TurnEvent::Event(e) if matches!(e.kind, Some(Kind::RunStarted(_))) => e.run_id,
        other => panic!("expected RunStarted, got {other:?}"),
    }
}

#[tokio::test]
async fn a_burst_over_the_request_rate_is_refused_until_the_bucket_refills() {
    let s = start(|config| {
        config.quotas.requests_per_sec = 2;
        config.quotas.burst = 2;
    })
    .await;
    s.client.list_workflows().await.expect("the bucket starts full");
    s.client.list_workflows().await.expect("a burst of 2");
    let mut refusal = None;
    // A token comes back every 500 ms; loopback calls take far less, so one of these is refused.
    for _ in 0..10 {
        if let Err(error) = s.client.list_workflows().await {
            refusal = Some(error);
            break;
        }
    }
    let error = refusal.expect("a burst over the quota is refused");
    let wait = refused(&error, "requests_per_sec", 2);
    assert!(wait > Duration::ZERO && wait <= Duration::from_millis(500), "{wait:?}");

    // Health checks (an open service) are never limited, even with the bucket empty.
    let channel =
        tonic::transport::Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    for _ in 0..5 {
        health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await.expect("health passes");
    }

    tokio::time::sleep(wait).await;
    s.client.list_workflows().await.expect("a call after the advised wait passes");
    s.stop().await;
}

#[tokio::test]
async fn a_second_run_is_refused_while_the_first_runs_and_passes_after() {
    let s = start(|config| config.quotas.max_concurrent_runs = 1).await;
    let first_id = s.start_intake().await;
    let second_id = s.start_intake().await;
    slow_turn(&s, Duration::from_millis(800));
    let mut first = s.client.send_message(&first_id, "one", SendOptions::default()).await.unwrap();
    started(&mut first).await;

    let error = s.client.send_message(&second_id, "two", SendOptions::default()).await.err().expect("refused");
    assert_eq!(refused(&error, "max_concurrent_runs", 1), Duration::from_secs(1));
    s.client.get_conversation(&second_id).await.expect("calls that are not runs still pass");

    let mut result = None;
    while let Some(item) = first.next().await {
        if let TurnEvent::Result(r) = item.expect("the first turn succeeds") {
            result = Some(r);
        }
    }
    assert_eq!(result.expect("a result").reply.unwrap().text, "done");

    // The place comes back with the stream's end, before the client has seen it.
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("second"))]);
    let (_, result) = s.client.send_message_and_wait(&second_id, "two", SendOptions::default()).await.unwrap();
    assert_eq!(result.reply.unwrap().text, "second");
    s.stop().await;
}

#[tokio::test]
async fn a_client_that_goes_away_gives_its_run_place_back() {
    let s = start(|config| config.quotas.max_concurrent_runs = 1).await;
    let first_id = s.start_intake().await;
    let second_id = s.start_intake().await;
    // The first run waits on the model far longer than this test: only the disconnect can free
    // its place.
    s.model.push_reply(
        ScriptedReply::json(&route("chat_agent")).for_purpose("supervisor.route").after(Duration::from_secs(30)),
    );
    let mut first = s.client.send_message(&first_id, "one", SendOptions::default()).await.unwrap();
    let first_run = started(&mut first).await;
    let error = s.client.send_message(&second_id, "two", SendOptions::default()).await.err().expect("refused");
    refused(&error, "max_concurrent_runs", 1);

    let dropped = Instant::now();
    drop(first);
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("second"))]);
    let result = loop {
        match s.client.send_message_and_wait(&second_id, "two", SendOptions::default()).await {
            Ok((_, result)) => break result,
            Err(error) => {
                refused(&error, "max_concurrent_runs", 1);
                assert!(dropped.elapsed() < Duration::from_secs(5), "the place never came back");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    };
    assert_eq!(result.reply.unwrap().text, "second");

    // The first run outlived its caller; end it rather than wait out its model call.
    assert!(s.client.cancel_run(&first_run).await.unwrap());
    s.stop().await;
}
