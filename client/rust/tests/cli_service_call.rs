//! `frontdesk chat --workflow service_call` against a real server (in process, on 127.0.0.1:0)
//! with the scripted demo model (tests/fixtures/demo-script.json, whose standing answers cover the
//! reply and extraction agents) and a short flow of the shipped nodes without branching
//! conditions, so that the navigator needs no model: the greeting, the two extraction nodes and
//! the goodbye, after which the flow ends and with it the call. (The shipped flow's navigator
//! needs a model's choice among each node's children, which the demo script cannot give.) The
//! tool lines of a turn are covered by the unit tests of `write_service_call_turn`.

use std::{
    io::Write,
    process::{Command, Stdio},
    sync::Arc,
};

use frontdesk_llm::ScriptedModel;
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::Config,
    workflows::service_call,
};
use serde_json::{json, Value};

/// The shipped flow cut to four nodes, each going on to the next with no condition.
fn short_flow() -> Value {
    let mut flow: Value = serde_json::from_str(include_str!("../../../config/service_call/agent_config.json")).unwrap();
    let chain = [
        ("GREET_CUSTOMER", Some("Extract_Customer_Issue")),
        ("Extract_Customer_Issue", Some("Extract_Customer_Contact_Info")),
        ("Extract_Customer_Contact_Info", Some("Goodbye_And_Hangup")),
        ("Goodbye_And_Hangup", None),
    ];
    let nodes = flow["nodes"].as_array_mut().unwrap();
    nodes.retain(|n| chain.iter().any(|(name, _)| n["node_name"] == *name));
    for node in nodes.iter_mut() {
        let (_, next) = chain.iter().find(|(name, _)| node["node_name"] == *name).unwrap();
        node["default_next_node"] = json!(next);
        node["branching_conditions"] = json!([]);
    }
    assert_eq!(nodes.len(), chain.len());
    flow
}

async fn server(dir: &std::path::Path) -> RunningServer {
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}/calls.db", dir.display());
    let path = dir.join("agent_config.json");
    std::fs::write(&path, short_flow().to_string()).unwrap();
    let mut settings = config.workflows.settings::<service_call::Workflow>().unwrap();
    settings.config = Some(path);
    settings.mcp_servers = Vec::new(); // the short flow has no tool node
    config.workflows.set::<service_call::Workflow>(&settings).unwrap();
    let script = include_str!("../../../tests/fixtures/demo-script.json");
    let model = Arc::new(ScriptedModel::from_json_str(script).unwrap());
    let app = App::build(config, Overrides { model: Some(model), ..Overrides::default() }).await.unwrap();
    app.serve_on(tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap()).await.unwrap()
}

/// Runs the CLI with `stdin` piped in: (success, stdout, stderr).
async fn frontdesk(addr: std::net::SocketAddr, args: &[&str], stdin: &str) -> (bool, String, String) {
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    let stdin = stdin.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut child = Command::new(env!("CARGO_BIN_EXE_frontdesk"))
            .arg("--server")
            .arg(format!("http://{addr}"))
            .args(&args)
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
    })
    .await
    .unwrap()
}

const REPLY: &str = "assistant: Thank you, I can help with that.";

#[tokio::test(flavor = "multi_thread")]
async fn chat_runs_a_call_to_its_end_and_stops_there() {
    let dir = tempfile::tempdir().unwrap();
    let server = server(dir.path()).await;
    let addr = server.addr;

    let lines = "Hello, I need help with drywall repair\nI'm John Doe, my number is 555-1234\nAre you still there?\n";
    let (ok, out, err) = frontdesk(addr, &["chat", "--workflow", "service_call", "--quiet-events"], lines).await;
    assert!(ok, "chat failed: {err}\n{out}");
    let id = out
        .lines()
        .find_map(|l| l.strip_prefix("conversation: "))
        .and_then(|l| l.split_whitespace().next())
        .expect("the conversation id is printed")
        .to_owned();
    assert!(out.contains(&format!("conversation: {id} (workflow service_call)\n")), "{out}");
    assert!(
        out.contains("assistant: Thank you for calling. How can we help you today?\ncurrent node: GREET_CUSTOMER\n")
    );

    // First turn: the greeting answers; the call moves on to the extraction.
    let first = format!(
        "you> Hello, I need help with drywall repair\n{REPLY}\n  nodes: GREET_CUSTOMER\n  current node: Extract_Customer_Issue\n  \
         [missing: customers_main_ask, customer_phone_number · 1 model calls,"
    );
    assert!(out.contains(&first), "{out}");
    // Second turn: both extractions, then the goodbye; the flow has no node left, so the call ends.
    let second = format!(
        "you> I'm John Doe, my number is 555-1234\n{REPLY}\n  \
         nodes: Extract_Customer_Issue → Extract_Customer_Contact_Info → Goodbye_And_Hangup\n  \
         current node: Goodbye_And_Hangup (the call has ended)\n  [4 model calls,"
    );
    assert!(out.contains(&second), "{out}");
    assert!(out.ends_with("· call ended]\nthe call has ended\n"), "the chat stops at the end of the call: {out}");
    assert!(!out.contains("Are you still there?"), "nothing is sent after the hangup: {out}");

    // Continuing the call: it has ended, so the chat ends at once, successfully.
    let (ok, out, err) = frontdesk(addr, &["chat", "--conversation", &id], "Hello?\n").await;
    assert!(ok, "{err}\n{out}");
    assert!(out.ends_with("the call has ended: it takes no more messages\n"), "{out}");

    // A single message is refused, naming the reason.
    let (ok, _, err) = frontdesk(addr, &["send", &id, "Hello?"], "").await;
    assert!(!ok);
    assert!(err.contains("FAILED_PRECONDITION") && err.contains("  reason: CONVERSATION_ENDED\n"), "{err}");

    // The call's state: where it ended, what it collected, what the models used.
    let (ok, out, err) = frontdesk(addr, &["conversation", "show", &id], "").await;
    assert!(ok, "{err}");
    for want in [
        "workflow:     service_call\n",
        "current node: Goodbye_And_Hangup\n",
        "call ended:   yes\n",
        "path:         GREET_CUSTOMER → Extract_Customer_Issue → Extract_Customer_Contact_Info → Goodbye_And_Hangup\n",
        "missing:      -\n",
        "model calls:  4 (",
        "  \"customers_main_ask\": \"Drywall repair\",\n",
        "  \"customer_phone_number\": \"555-1234\",\n",
    ] {
        assert!(out.contains(want), "{want:?} not in {out}");
    }
    let (ok, out, _) = frontdesk(addr, &["conversation", "list", "--workflow", "service_call"], "").await;
    assert!(ok && out.contains(&id) && out.contains(" ended "), "{out}");
    server.shutdown().await.unwrap();
}
