//! The database going away mid-run, and coming back: a real server on a private PostgreSQL
//! server (never the shared one other tests use) that this test stops and starts again.
//!
//! While PostgreSQL is down a turn fails with `UNAVAILABLE`, `ErrorInfo` reason
//! `STORE_UNAVAILABLE` and a `RetryInfo` delay, promptly rather than hanging; once it is back,
//! the same call with its idempotency key succeeds within a bounded wait, on the same server
//! process (no restart), and health still reports `SERVING`.

mod common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use common::postgres::PrivatePostgres;
use frontdesk_api::v1;
use frontdesk_client::{Client, ClientError, SendOptions, StartOptions};
use frontdesk_llm::{ChatRequest, LlmError, ScriptedModel};
use frontdesk_server::{
    app::{App, Overrides},
    config::Config,
    workflows::Parts,
};
use tonic::Code;

/// How long the server may take to serve again once PostgreSQL is back.
const RECOVERY_BOUND: Duration = Duration::from_secs(60);
/// How long one failing call may take while PostgreSQL is down (the pool's acquire timeout is
/// 10 s; a call must not hang beyond it).
const FAILURE_BOUND: Duration = Duration::from_secs(20);
/// How long a failing call may take once the server has seen the database go away.
const PROMPT_FAILURE: Duration = Duration::from_secs(3);
/// Turns tried while PostgreSQL is down: more than the pool's connections, so that the later ones
/// find no connection from before the outage and have to connect.
const OUTAGE_ATTEMPTS: usize = 10;

/// The same reply to every call of a purpose, however often a turn is retried.
fn model() -> ScriptedModel {
    ScriptedModel::from_fn("scripted-outage", |request: &ChatRequest| {
        let reply = match request.purpose.as_str() {
            "supervisor.route" => common::route("elicitation_agent"),
            "elicitation.extract" => common::extraction(&[], &[], "Noted. What should change, and why?"),
            other => return Err(LlmError::ScriptExhausted { purpose: other.to_owned() }),
        };
        Ok(reply.to_string())
    })
}

fn keyed(key: &str) -> SendOptions {
    SendOptions { idempotency_key: Some(key.to_owned()), ..SendOptions::default() }
}

async fn health(addr: std::net::SocketAddr) -> i32 {
    let channel = tonic::transport::Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let request = tonic_health::pb::HealthCheckRequest { service: "frontdesk.v1.ConversationService".into() };
    health.check(request).await.expect("health answers").into_inner().status
}

const SERVING: i32 = tonic_health::pb::health_check_response::ServingStatus::Serving as i32;

async fn send(client: &Client, id: &str, text: &str, key: &str) -> Result<v1::TurnResult, ClientError> {
    client.send_message_and_wait(id, text, keyed(key)).await.map(|(_, result)| result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_outage_is_unavailable_with_retry_info_and_the_server_recovers_on_its_own() {
    let Some(pg) = PrivatePostgres::start("postgres_outage") else { return };

    let mut config = Config::default();
    config.database.url = pg.url();
    config.shutdown_grace_secs = 5;
    config.metrics.listen = Some("127.0.0.1:0".parse().unwrap());
    let model = Arc::new(model());
    let overrides = Overrides { model: Some(model.clone()), parts: Parts::default() };
    let app = App::build(config, overrides).await.expect("server builds");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = app.serve_on(listener).await.expect("server starts");
    let addr = server.addr;
    let metrics = server.metrics_addr.expect("metrics are served");
    let failing =
        || async move { common::series(&common::http_get(metrics, "/metrics").await.1, "frontdesk_database_failing") };
    // Without the SDK's retries: the test makes, and times, each attempt itself.
    let client = Client::connect(format!("http://{addr}")).await.expect("client connects").with_retry_policy(None);

    // Before the outage: a conversation and a turn.
    let started = client.start_conversation("intake", StartOptions::default()).await.unwrap();
    let id = started.conversation.unwrap().conversation_id;
    let first =
        send(&client, &id, "I want to raise a change request", "turn-1").await.expect("a turn before the outage");
    assert_eq!(first.conversation.as_ref().unwrap().turn_count, 1);

    // PostgreSQL goes away: every connection is cut and nothing listens on its port.
    pg.stop_immediately();
    assert!(!pg.accepting(), "PostgreSQL is down");
    let text = "Patch the billing database";
    // Every attempt during the outage fails the same way and promptly, also once the pool's
    // connections from before the outage are used up and it has to connect afresh (nothing is
    // left busy or stuck by a failed attempt either).
    let mut failures = Vec::new();
    for attempt in 1..=OUTAGE_ATTEMPTS {
        let started = Instant::now();
        let error = tokio::time::timeout(FAILURE_BOUND, send(&client, &id, text, "turn-2"))
            .await
            .unwrap_or_else(|_| panic!("attempt {attempt} hung for {FAILURE_BOUND:?} while PostgreSQL was down"))
            .expect_err("a turn fails while PostgreSQL is down");
        let took = started.elapsed();
        let api = error.api().unwrap_or_else(|| panic!("a server status, not {error:?}"));
        assert_eq!(api.code, Code::Unavailable, "attempt {attempt}: {api:?}");
        assert!(api.is_reason(v1::ErrorReason::StoreUnavailable), "attempt {attempt}: {api:?}");
        let retry = api.retry_after.unwrap_or_else(|| panic!("RetryInfo with a delay: {api:?}"));
        assert!(retry > Duration::ZERO, "{api:?}");
        eprintln!("outage: attempt {attempt} failed after {took:?}: UNAVAILABLE, RetryInfo {retry:?}: {}", api.message);
        failures.push(took);
    }
    // Only the attempt that finds the database gone may wait for the pool (its acquire timeout);
    // after it the server knows, and fails each turn within about a second.
    let slow = failures.iter().filter(|took| **took > PROMPT_FAILURE).count();
    assert!(slow <= 1, "{slow} attempts took over {PROMPT_FAILURE:?}: {failures:?}");
    assert_eq!(health(addr).await, SERVING, "health while the database is down");
    assert_eq!(failing().await, 1.0, "the metrics say the database is failing");

    // PostgreSQL comes back on the same port; the same server serves again on its own. The
    // caller retries the same call with its idempotency key, waiting as RetryInfo says.
    pg.start_server();
    let back_at = Instant::now();
    let mut attempts = 0;
    let result = loop {
        attempts += 1;
        match tokio::time::timeout(FAILURE_BOUND, send(&client, &id, text, "turn-2")).await {
            Ok(Ok(result)) => break result,
            Ok(Err(error)) if error.code() == Some(Code::Unavailable) => {
                eprintln!(
                    "outage: {:?} after PostgreSQL came back, attempt {attempts} failed: {}",
                    back_at.elapsed(),
                    error.api().map(|e| e.message.as_str()).unwrap_or_default()
                );
                let wait = error.api().and_then(|e| e.retry_after).unwrap_or(Duration::from_secs(1));
                assert!(
                    back_at.elapsed() < RECOVERY_BOUND,
                    "still {error:?} {:?} after PostgreSQL came back ({attempts} attempts)\n{}",
                    back_at.elapsed(),
                    pg.log()
                );
                tokio::time::sleep(wait.min(Duration::from_secs(1))).await;
            }
            Ok(Err(error)) => panic!("after PostgreSQL came back, attempt {attempts}: {error:?}"),
            Err(_) => panic!("attempt {attempts} hung for {FAILURE_BOUND:?} after PostgreSQL came back"),
        }
    };
    let recovered_after = back_at.elapsed();
    eprintln!("outage: served again {recovered_after:?} after PostgreSQL was back ({attempts} attempts)");
    let conversation = result.conversation.expect("the conversation after the turn");
    assert_eq!(conversation.turn_count, 2, "the retried turn ran once");
    let reply = result.reply.map(|m| m.text).unwrap_or_default();
    assert!(reply.starts_with("Noted. What should change, and why?"), "{reply}");

    // The retry is idempotent: the same key replays the same turn rather than running another.
    let replay = send(&client, &id, text, "turn-2").await.expect("a replay of the retried turn");
    assert_eq!(replay.conversation.unwrap().turn_count, 2);
    // New turns work as before, and health still reports SERVING.
    let next = send(&client, &id, "It is for billing-db", "turn-3").await.expect("a turn after the outage");
    assert_eq!(next.conversation.unwrap().turn_count, 3);
    assert_eq!(health(addr).await, SERVING, "health after the outage");
    assert_eq!(failing().await, 0.0, "and no longer once it is back");

    // A restart nobody saw (no call while it was down): every pooled connection is dead. At
    // most the first call meets one of them; the next gets a live connection.
    pg.stop_immediately();
    pg.start_server();
    let mut blip_attempts = 0;
    let blip_at = Instant::now();
    loop {
        blip_attempts += 1;
        match send(&client, &id, "Urgency is high", "turn-4").await {
            Ok(result) => {
                assert_eq!(result.conversation.unwrap().turn_count, 4);
                break;
            }
            Err(error) if error.code() == Some(Code::Unavailable) && blip_attempts < 2 => {
                assert!(error.api().unwrap().is_reason(v1::ErrorReason::StoreUnavailable), "{error:?}");
            }
            Err(error) => panic!("after a restart, attempt {blip_attempts}: {error:?}"),
        }
    }
    eprintln!("outage: after an unseen restart, served in {:?} ({blip_attempts} attempts)", blip_at.elapsed());

    server.shutdown().await.unwrap();
    drop(pg);
}
