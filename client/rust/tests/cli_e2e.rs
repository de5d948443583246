//! The `frontdesk` CLI against a real server (in process, on 127.0.0.1:0, with the scripted
//! demo model): interactive chat with piped stdin, workflows, conversation show.

use std::{
    io::Write,
    process::{Command, Stdio},
    sync::Arc,
};

use frontdesk_llm::ScriptedModel;
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::Config,
};

async fn server(dir: &std::path::Path) -> RunningServer {
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}/cli.db", dir.display());
    let script = include_str!("../../../tests/fixtures/demo-script.json");
    let model = Arc::new(ScriptedModel::from_json_str(script).unwrap());
    let app = App::build(config, Overrides { model: Some(model), ..Overrides::default() }).await.unwrap();
    app.serve_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).await.unwrap()
}

fn frontdesk(addr: std::net::SocketAddr, args: &[&str], stdin: &str) -> (bool, String, String) {
    let mut child = Command::new(env!("CARGO_BIN_EXE_frontdesk"))
        .arg("--server")
        .arg(format!("http://{addr}"))
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.take().unwrap().write_all(stdin.as_bytes()).unwrap();
    let out = child.wait_with_output().unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn chat_streams_node_events_and_replies_then_show_lists_history() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let addr = server.addr;

    let (ok, out, err) =
        tokio::task::spawn_blocking(move || frontdesk(addr, &["chat"], "hello\nhow are you?\n/quit\n")).await.unwrap();
    assert!(ok, "chat failed: {err}\n{out}");
    assert!(out.contains("Front Door assistant"), "welcome shown: {out}");
    assert!(out.contains("supervisor"), "node events stream: {out}");
    assert!(out.contains("chat_agent"), "{out}");
    assert_eq!(out.matches("assistant: Hello from the scripted demo model").count(), 2, "{out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("conversation: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the conversation id is printed")
        .to_owned();

    let (ok, out, err) =
        tokio::task::spawn_blocking(move || frontdesk(addr, &["conversation", "show", &id], "")).await.unwrap();
    assert!(ok, "{err}");
    assert!(out.contains("how are you?"), "history shown: {out}");

    let (ok, out, _) = tokio::task::spawn_blocking(move || frontdesk(addr, &["workflows"], "")).await.unwrap();
    assert!(ok && out.contains("intake"), "{out}");

    let (ok, _, err) =
        tokio::task::spawn_blocking(move || frontdesk(addr, &["conversation", "show", "conv-missing"], ""))
            .await
            .unwrap();
    assert!(!ok && err.contains("NOT_FOUND"), "{err}");
    server.shutdown().await.unwrap();
}

mod common;

/// `--timeout` against a real server whose scripted model takes 1.5 s a call: the CLI gives up
/// on the turn at its deadline with DEADLINE_EXCEEDED, and the run it had started goes on to its
/// reply on the server.
#[tokio::test(flavor = "multi_thread")]
async fn send_with_a_timeout_gives_up_at_the_deadline_and_the_run_goes_on() {
    let mut script: serde_json::Value =
        serde_json::from_str(include_str!("../../../tests/fixtures/demo-script.json")).unwrap();
    script["delay_ms"] = 1_500.into();
    let model = frontdesk_llm::ScriptedModel::from_json_str(&script.to_string()).unwrap();
    let server = common::Server::with_model(model).await;
    let client = server.client().await;
    let started = client.start_conversation("intake", Default::default()).await.unwrap();
    let id = started.conversation.unwrap().conversation_id;

    let before = std::time::Instant::now();
    let (ok, out, err) = server.cli(&["--timeout", "0.5", "send", &id, "hello"]).await;
    let took = before.elapsed();
    assert!(!ok, "the turn outlived its deadline yet the CLI succeeded: {out}");
    assert!(err.contains("DEADLINE_EXCEEDED"), "{err}");
    // The turn takes 3 s (two calls of 1.5 s): a CLI that waited for it took that long.
    assert!(took < std::time::Duration::from_millis(2_500), "the CLI waited for the turn: {took:?}");

    // The supervisor's and the chat agent's calls take 3 s; the turn ends on the server.
    let mut reply = None;
    for _ in 0..50 {
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        let messages = client.get_conversation(&id).await.unwrap().messages;
        reply = messages.iter().rev().find(|m| m.text.contains("scripted demo model")).map(|m| m.text.clone());
        if reply.is_some() {
            break;
        }
    }
    assert!(reply.is_some(), "the run the CLI gave up on never finished");
}
