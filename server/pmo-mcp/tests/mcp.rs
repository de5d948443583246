//! End to end: `frontdesk-mcp`'s client and toolbox against the real `frontdesk-pmo-mcp` binary,
//! over stdio and over streamable HTTP.

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use axum::{
    extract::{Request, State},
    http::{Method, StatusCode},
    middleware::Next,
    response::{IntoResponse, Response},
};
use frontdesk_mcp::{McpClient, McpError, McpServerConfig, McpToolbox, ToolOutcome};
use frontdesk_pmo_mcp::{PmoServer, Store, TOOL_NAMES};
use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};
use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

const BIN: &str = env!("CARGO_BIN_EXE_frontdesk-pmo-mcp");
/// A date far enough ahead never to be in the past.
const DATE: &str = "2099-03-02";

fn stdio(name: &str, args: &[&str]) -> McpServerConfig {
    let mut config = McpServerConfig::stdio(name, BIN, args.iter().copied());
    // The servers' stderr is the test's: keep it to warnings unless asked for more.
    if std::env::var_os("RUST_LOG").is_none() {
        if let frontdesk_mcp::McpTransport::Stdio { env, .. } = &mut config.transport {
            env.insert("RUST_LOG".into(), "warn".into());
        }
    }
    config
}

/// The server over streamable HTTP on a free loopback port; killed on drop.
struct HttpServer {
    child: Child,
    url: String,
}

impl HttpServer {
    fn start(args: &[&str]) -> HttpServer {
        HttpServer::start_at("127.0.0.1:0", args)
    }

    /// The server at `addr`, e.g. the address of one that was killed, to restart it.
    fn start_at(addr: &str, args: &[&str]) -> HttpServer {
        let mut child = Command::new(BIN)
            .args(["--http", addr])
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start frontdesk-pmo-mcp");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut seen = String::new();
        let url = loop {
            let mut line = String::new();
            if stderr.read_line(&mut line).unwrap() == 0 {
                panic!("frontdesk-pmo-mcp exited before listening:\n{seen}");
            }
            if let Some(url) = line.trim().strip_prefix("frontdesk-pmo-mcp: listening on ") {
                break url.to_owned();
            }
            seen.push_str(&line);
        };
        // Keep draining the log so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            for line in stderr.lines() {
                let Ok(line) = line else { break };
                eprintln!("[pmo http] {line}");
            }
        });
        HttpServer { child, url }
    }

    fn config(&self, name: &str) -> McpServerConfig {
        McpServerConfig::streamable_http(name, self.url.clone())
    }

    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        self.kill();
    }
}

/// One JSON-RPC message POSTed to a [`LocalHttpServer`].
#[derive(Debug, Clone, PartialEq)]
struct Post {
    /// The request's or notification's method (`"response"` for a reply to the server).
    method: String,
    /// The `Mcp-Session-Id` it carried.
    session: Option<String>,
    status: u16,
}

#[derive(Clone, Default)]
struct Observed {
    posts: Arc<Mutex<Vec<Post>>>,
    /// The status to fail the next `tools/call` with, before the MCP service sees it.
    fail_next_call: Arc<Mutex<Option<StatusCode>>>,
}

/// The PMO server over streamable HTTP inside the test, so that a test can make it forget every
/// session (as a restarted or expiring server does), fail a call, and see every POST it got.
struct LocalHttpServer {
    url: String,
    sessions: Arc<LocalSessionManager>,
    observed: Observed,
    shutdown: CancellationToken,
}

impl LocalHttpServer {
    async fn start() -> LocalHttpServer {
        let server = PmoServer::new(Store::open("sqlite::memory:").await.unwrap());
        let shutdown = CancellationToken::new();
        let sessions = Arc::new(LocalSessionManager::default());
        let config = StreamableHttpServerConfig::default().with_cancellation_token(shutdown.child_token());
        let service = StreamableHttpService::new(move || Ok(server.clone()), sessions.clone(), config);
        let observed = Observed::default();
        let router = axum::Router::new()
            .nest_service("/mcp", service)
            .layer(axum::middleware::from_fn_with_state(observed.clone(), observe));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/mcp", listener.local_addr().unwrap());
        let stop = shutdown.clone();
        tokio::spawn(async move {
            axum::serve(listener, router).with_graceful_shutdown(stop.cancelled_owned()).await.unwrap();
        });
        LocalHttpServer { url, sessions, observed, shutdown }
    }

    fn config(&self, name: &str) -> McpServerConfig {
        McpServerConfig::streamable_http(name, self.url.clone())
    }

    /// Drops every session, so that requests in them are answered 404, as by a server that
    /// restarted.
    async fn forget_sessions(&self) {
        self.sessions.sessions.write().await.clear();
    }

    fn fail_next_call(&self, status: StatusCode) {
        *self.observed.fail_next_call.lock().unwrap() = Some(status);
    }

    /// The POSTs so far, and forgets them.
    fn take_posts(&self) -> Vec<Post> {
        std::mem::take(&mut *self.observed.posts.lock().unwrap())
    }
}

impl Drop for LocalHttpServer {
    fn drop(&mut self) {
        self.shutdown.cancel();
    }
}

async fn observe(State(observed): State<Observed>, request: Request, next: Next) -> Response {
    if request.method() != Method::POST {
        return next.run(request).await;
    }
    let (parts, body) = request.into_parts();
    let body = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    let message: Value = serde_json::from_slice(&body).unwrap_or_default();
    let method = message["method"].as_str().unwrap_or("response").to_owned();
    let session = parts.headers.get("mcp-session-id").map(|v| v.to_str().unwrap().to_owned());
    let injected = if method == "tools/call" { observed.fail_next_call.lock().unwrap().take() } else { None };
    let response = match injected {
        Some(status) => (status, "injected failure").into_response(),
        None => next.run(Request::from_parts(parts, axum::body::Body::from(body))).await,
    };
    observed.posts.lock().unwrap().push(Post { method, session, status: response.status().as_u16() });
    response
}

fn kill(pid: u32) {
    let status = Command::new("kill").args(["-KILL", &pid.to_string()]).status().unwrap();
    assert!(status.success());
}

fn process_alive(pid: u32) -> bool {
    Command::new("kill").args(["-0", &pid.to_string()]).stderr(Stdio::null()).status().unwrap().success()
}

async fn call(client: &McpClient, tool: &str, arguments: Value) -> ToolOutcome {
    client.call_tool(tool, arguments).await.unwrap_or_else(|e| panic!("{tool}: {e:?}"))
}

/// A successful call's structured content.
async fn ok(client: &McpClient, tool: &str, arguments: Value) -> Value {
    let outcome = call(client, tool, arguments).await;
    assert!(!outcome.is_error, "{tool} failed: {}", outcome.text());
    outcome.content
}

/// A tool error's message, which must contain `expected`.
async fn tool_error(client: &McpClient, tool: &str, arguments: Value, expected: &str) -> String {
    let outcome = call(client, tool, arguments).await;
    assert!(outcome.is_error, "{tool} should have failed: {}", outcome.text());
    let message = outcome.text();
    assert!(message.contains(expected), "{tool}: {message:?} does not say {expected:?}");
    message
}

// ---------------------------------------------------------------------------------------------
// The checks, each run over both transports.

async fn lists_the_seven_tools(client: &McpClient) {
    let tools = client.list_tools().await.unwrap();
    let mut names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(names, TOOL_NAMES);
    let required = |name: &str| -> Vec<String> {
        let tool = tools.iter().find(|t| t.name == name).unwrap();
        assert!(!tool.description.is_empty(), "{name} has no description");
        assert_eq!(tool.input_schema["type"], "object", "{name}");
        let mut required: Vec<String> = tool.input_schema["required"]
            .as_array()
            .map(|r| r.iter().map(|v| v.as_str().unwrap().to_owned()).collect())
            .unwrap_or_default();
        required.sort();
        required
    };
    assert_eq!(required("setting_list"), ["category"]);
    assert_eq!(required("entity_list"), ["entity_type"]);
    assert_eq!(required("customer_create"), ["name", "phone"]);
    assert!(required("customer_get").is_empty());
    assert_eq!(required("task_create"), ["customer_id", "description", "service_category"]);
    assert_eq!(required("person_calendar_book"), ["date", "task_id", "time_slot"]);
    assert_eq!(required("call_hangup"), ["call_session_id"]);

    let task_create = tools.iter().find(|t| t.name == "task_create").unwrap();
    let schema = task_create.input_schema.to_string();
    for priority in ["low", "medium", "high", "urgent"] {
        assert!(schema.contains(&format!("\"{priority}\"")), "priority {priority} missing from {schema}");
    }
    let spec = task_create.to_tool_spec();
    assert_eq!((spec.name.as_str(), &spec.parameters), ("task_create", &task_create.input_schema));

    // From the tools' annotations: lookups and the idempotent hang-up may be called again.
    let mut repeatable: Vec<_> = tools.iter().filter(|t| t.repeatable).map(|t| t.name.as_str()).collect();
    repeatable.sort_unstable();
    assert_eq!(repeatable, ["call_hangup", "customer_get", "entity_list", "setting_list"]);
}

async fn runs_a_service_call(client: &McpClient) {
    let catalog = ok(client, "setting_list", json!({"category": "dl__service_category"})).await;
    let names: Vec<_> = catalog["entries"].as_array().unwrap().iter().map(|e| e["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["Plumbing", "Electrical", "HVAC", "Landscaping", "General Maintenance"]);

    let phone = "+1 (555) 010-4242";
    tool_error(client, "customer_get", json!({"phone": phone}), "no customer found with phone").await;

    let customer = ok(
        client,
        "customer_create",
        json!({"name": "Dana Whitfield", "phone": phone, "email": "dana@example.com", "address": "17 Birch Road"}),
    )
    .await;
    let customer_id = customer["customer"]["id"].as_str().unwrap().to_owned();
    assert!(customer_id.starts_with("CUS-"), "{customer}");
    // The caller is found however the number is written.
    let found = ok(client, "customer_get", json!({"phone": "15550104242"})).await;
    assert_eq!(found, customer);

    let task = ok(
        client,
        "task_create",
        json!({
            "customer_id": customer_id,
            "service_category": "Plumbing",
            "description": "Water heater leaking in the basement",
            "priority": "urgent"
        }),
    )
    .await;
    let task = &task["task"];
    let task_id = task["id"].as_str().unwrap().to_owned();
    assert!(task_id.starts_with("TSK-"), "{task}");
    assert_eq!(task["customer_id"], customer_id.as_str());
    assert_eq!(task["service_category"], "plumbing");
    assert_eq!(task["priority"], "urgent");
    assert_eq!(task["address"], "17 Birch Road");
    assert_eq!(task["status"], "open");

    let booking =
        ok(client, "person_calendar_book", json!({"task_id": task_id, "date": DATE, "time_slot": "10:00-12:00"})).await;
    let booking = &booking["booking"];
    assert!(booking["id"].as_str().unwrap().starts_with("BKG-"), "{booking}");
    assert_eq!(booking["date"], DATE);
    assert_eq!(booking["time_slot"], "10:00-12:00");
    assert_eq!(booking["task_id"], task_id.as_str());
    assert_eq!(booking["technician"], "Alex Rivera");

    let tasks = ok(client, "entity_list", json!({"entity_type": "task", "filter": task_id})).await;
    assert_eq!(tasks["count"], 1);
    assert_eq!(tasks["items"][0]["status"], "scheduled");

    let hangup = ok(client, "call_hangup", json!({"call_session_id": "call-0001", "reason": "resolved"})).await;
    assert_eq!(hangup["ended"], true);
    assert_eq!(hangup["already_ended"], false);
}

async fn reports_tool_errors(client: &McpClient) {
    // Settings and lists.
    tool_error(client, "setting_list", json!({"category": "dl__nope"}), "dl__service_category").await;
    tool_error(client, "entity_list", json!({"entity_type": "invoice"}), "use \"project\" or \"task\"").await;
    let projects = ok(client, "entity_list", json!({"entity_type": "projects"})).await;
    assert_eq!(projects["count"], 4);

    // Customers: a phone number is unique.
    let ana = ok(client, "customer_create", json!({"name": "Ana Lopez", "phone": "555-010-7777"})).await;
    let ana_id = ana["customer"]["id"].as_str().unwrap();
    let message =
        tool_error(client, "customer_create", json!({"name": "Ana L.", "phone": "(555) 010 7777"}), "already exists")
            .await;
    assert!(message.contains("customer_get") && message.contains(ana_id), "{message}");
    tool_error(client, "customer_create", json!({"name": "X", "phone": "12"}), "invalid phone").await;
    tool_error(client, "customer_get", json!({"phone": "555-000-0000"}), "no customer found").await;
    tool_error(client, "customer_get", json!({"customer_id": "CUS-09999"}), "no customer found with id CUS-09999")
        .await;
    tool_error(client, "customer_get", json!({}), "needs a phone or a customer_id").await;

    // Tasks: the customer and the category must exist.
    tool_error(
        client,
        "task_create",
        json!({"customer_id": "CUS-09999", "service_category": "plumbing", "description": "Leak"}),
        "no customer found with id CUS-09999",
    )
    .await;
    let message = tool_error(
        client,
        "task_create",
        json!({"customer_id": ana_id, "service_category": "roofing", "description": "Leak"}),
        "unknown service_category \"roofing\"",
    )
    .await;
    assert!(message.contains("general_maintenance"), "{message}");
    // Arguments that do not fit the schema are tool errors too, for the model to correct.
    let outcome = call(
        client,
        "task_create",
        json!({"customer_id": ana_id, "service_category": "hvac", "description": "No heat", "priority": "asap"}),
    )
    .await;
    assert!(outcome.is_error, "{outcome:?}");
    assert!(outcome.text().contains("asap"), "{outcome:?}");

    // Bookings: one technician, one place at a time.
    let task = ok(
        client,
        "task_create",
        json!({"customer_id": ana_id, "service_category": "electrical", "description": "Breaker trips"}),
    )
    .await;
    let task_id = task["task"]["id"].as_str().unwrap();
    let slot = json!({"task_id": task_id, "date": DATE, "time_slot": "13:00-15:00", "technician": "Sam Chen"});
    ok(client, "person_calendar_book", slot.clone()).await;
    let message =
        tool_error(client, "person_calendar_book", slot, "Sam Chen is already booked on 2099-03-02 at 13:00-15:00")
            .await;
    assert!(message.contains("08:00-10:00"), "the free slots are offered: {message}");
    // Sam Chen is the only electrician: without a technician, none is free either.
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": task_id, "date": DATE, "time_slot": "13:00-15:00"}),
        "no electrical technician is free",
    )
    .await;
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": "TSK-09999", "date": DATE, "time_slot": "08:00-10:00"}),
        "no task TSK-09999",
    )
    .await;
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": task_id, "date": "02/03/2099", "time_slot": "08:00-10:00"}),
        "YYYY-MM-DD",
    )
    .await;
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": task_id, "date": "2001-01-01", "time_slot": "08:00-10:00"}),
        "in the past",
    )
    .await;
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": task_id, "date": DATE, "time_slot": "midnight"}),
        "unknown time_slot",
    )
    .await;
    tool_error(
        client,
        "person_calendar_book",
        json!({"task_id": task_id, "date": DATE, "time_slot": "08:00-10:00", "technician": "Bob"}),
        "unknown technician \"Bob\"",
    )
    .await;

    // Hanging up twice is no error.
    let first = ok(client, "call_hangup", json!({"call_session_id": "call-7", "reason": "resolved"})).await;
    let second = ok(client, "call_hangup", json!({"call_session_id": "call-7"})).await;
    assert_eq!((first["ended"].clone(), second["ended"].clone()), (json!(true), json!(true)));
    assert_eq!((first["already_ended"].clone(), second["already_ended"].clone()), (json!(false), json!(true)));
    assert_eq!(second["reason"], "resolved");

    // Not tool errors: a tool the server does not have, arguments that are no object.
    let error = client.call_tool("customer_delete", json!({})).await.unwrap_err();
    assert!(matches!(&error, McpError::Rejected { code: -32602, .. }), "{error:?}");
    let error = client.call_tool("customer_get", json!(["555"])).await.unwrap_err();
    assert!(matches!(&error, McpError::InvalidArguments { found: "an array", .. }), "{error:?}");
}

/// A call slower than its timeout fails with a timeout, and the client goes on working.
async fn times_out(client: &McpClient) {
    let started = Instant::now();
    let error = client
        .call_tool_with_timeout("setting_list", json!({"category": "dl__time_slot"}), Duration::from_millis(300))
        .await
        .unwrap_err();
    assert!(matches!(&error, McpError::Timeout { timeout, .. } if *timeout == Duration::from_millis(300)), "{error:?}");
    assert!(started.elapsed() < Duration::from_millis(2500), "waited for the server: {:?}", started.elapsed());
    assert!(!error.is_connection_lost());
    let slots = ok(client, "setting_list", json!({"category": "dl__time_slot"})).await;
    assert_eq!(slots["entries"].as_array().unwrap().len(), 4);
}

/// Dropping a call's future cancels it at the server: the customer is never created.
async fn cancels_a_dropped_call(client: &McpClient) {
    let create = client.call_tool("customer_create", json!({"name": "Gone Girl", "phone": "555-010-9999"}));
    tokio::select! {
        outcome = create => panic!("the call should still be waiting: {outcome:?}"),
        () = tokio::time::sleep(Duration::from_millis(200)) => {}
    }
    // The server waits out its latency (2 s) for each call; by then the cancellation is in.
    tool_error(client, "customer_get", json!({"phone": "555-010-9999"}), "no customer found").await;
    ok(client, "customer_create", json!({"name": "Here Now", "phone": "555-010-9999"})).await;
}

// ---------------------------------------------------------------------------------------------
// Over stdio.

#[tokio::test]
async fn stdio_lists_the_seven_tools_with_schemas() {
    let mut client = McpClient::connect(&stdio("pmo", &[])).await.unwrap();
    lists_the_seven_tools(&client).await;
    client.close().await;
}

#[tokio::test]
async fn stdio_service_call_sequence() {
    let mut client = McpClient::connect(&stdio("pmo", &[])).await.unwrap();
    runs_a_service_call(&client).await;
    client.close().await;
}

#[tokio::test]
async fn stdio_tool_errors() {
    let mut client = McpClient::connect(&stdio("pmo", &[])).await.unwrap();
    reports_tool_errors(&client).await;
    client.close().await;
}

#[tokio::test]
async fn stdio_call_timeout() {
    let mut client = McpClient::connect(&stdio("slow", &["--latency-ms", "3000"])).await.unwrap();
    times_out(&client).await;
    client.close().await;
}

#[tokio::test]
async fn stdio_dropped_call_is_cancelled() {
    let mut client = McpClient::connect(&stdio("slow", &["--latency-ms", "2000"])).await.unwrap();
    cancels_a_dropped_call(&client).await;
    client.close().await;
}

#[tokio::test]
async fn stdio_server_exiting_mid_call_is_a_typed_error() {
    let client = McpClient::connect(&stdio("doomed", &["--latency-ms", "5000"])).await.unwrap();
    let pid = client.process_id().unwrap();
    let started = Instant::now();
    let (outcome, ()) = tokio::join!(client.call_tool("setting_list", json!({"category": "dl__time_slot"})), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        kill(pid);
    });
    let error = outcome.unwrap_err();
    assert!(matches!(&error, McpError::Disconnected { server, .. } if server == "doomed"), "{error:?}");
    assert!(error.is_connection_lost());
    assert!(started.elapsed() < Duration::from_secs(4), "waited for the latency: {:?}", started.elapsed());
    // And every later request says the same at once.
    let error = client.list_tools().await.unwrap_err();
    assert!(error.is_connection_lost(), "{error:?}");
    assert!(client.is_closed());
}

#[tokio::test]
async fn stdio_close_ends_the_server_and_the_client() {
    let mut client = McpClient::connect(&stdio("pmo", &[])).await.unwrap();
    let pid = client.process_id().unwrap();
    assert!(process_alive(pid));
    client.close().await;
    assert!(!process_alive(pid), "the server process outlived close()");
    let error = client.call_tool("customer_get", json!({"phone": "5550100000"})).await.unwrap_err();
    assert!(matches!(&error, McpError::Closed { server } if server == "pmo"), "{error:?}");
    client.close().await;
}

#[tokio::test]
async fn stdio_file_database_keeps_its_data() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("pmo.db").display());
    let config = stdio("pmo", &["--database", &url]);
    let mut client = McpClient::connect(&config).await.unwrap();
    let created = ok(&client, "customer_create", json!({"name": "Lee Park", "phone": "555-010-3030"})).await;
    client.close().await;

    let mut client = McpClient::connect(&config).await.unwrap();
    assert_eq!(ok(&client, "customer_get", json!({"phone": "555-010-3030"})).await, created);
    let catalog = ok(&client, "setting_list", json!({"category": "dl__service_category"})).await;
    assert_eq!(catalog["entries"].as_array().unwrap().len(), 5, "seeded once, not per start");
    client.close().await;
}

// ---------------------------------------------------------------------------------------------
// Over streamable HTTP.

#[tokio::test]
async fn http_lists_the_seven_tools_with_schemas() {
    let server = HttpServer::start(&[]);
    let mut client = McpClient::connect(&server.config("pmo")).await.unwrap();
    assert_eq!(client.process_id(), None);
    lists_the_seven_tools(&client).await;
    client.close().await;
}

#[tokio::test]
async fn http_service_call_sequence() {
    let server = HttpServer::start(&[]);
    let mut client = McpClient::connect(&server.config("pmo")).await.unwrap();
    runs_a_service_call(&client).await;
    client.close().await;
}

#[tokio::test]
async fn http_tool_errors() {
    let server = HttpServer::start(&[]);
    let mut client = McpClient::connect(&server.config("pmo")).await.unwrap();
    reports_tool_errors(&client).await;
    client.close().await;
}

#[tokio::test]
async fn http_call_timeout() {
    let server = HttpServer::start(&["--latency-ms", "3000"]);
    let mut client = McpClient::connect(&server.config("slow")).await.unwrap();
    times_out(&client).await;
    client.close().await;
}

#[tokio::test]
async fn http_dropped_call_is_cancelled() {
    let server = HttpServer::start(&["--latency-ms", "2000"]);
    let mut client = McpClient::connect(&server.config("slow")).await.unwrap();
    cancels_a_dropped_call(&client).await;
    client.close().await;
}

#[tokio::test]
async fn http_server_exiting_mid_call_is_a_typed_error() {
    let mut server = HttpServer::start(&["--latency-ms", "5000"]);
    let client = McpClient::connect(&server.config("doomed")).await.unwrap();
    let started = Instant::now();
    let (outcome, ()) = tokio::join!(client.call_tool("setting_list", json!({"category": "dl__time_slot"})), async {
        tokio::time::sleep(Duration::from_millis(300)).await;
        server.kill();
    });
    // The client reconnects the broken response stream a few times first, waiting as long as
    // the server's SSE `retry` hint says (rmcp's server sends 3 s), then gives up: well before
    // the 30 s call timeout and without a reply, the call fails as disconnected.
    let error = outcome.unwrap_err();
    assert!(matches!(&error, McpError::Disconnected { server, .. } if server == "doomed"), "{error:?}");
    assert!(started.elapsed() < Duration::from_secs(15), "{:?}", started.elapsed());
    // The next request finds nobody listening.
    let error = client.call_tool("setting_list", json!({"category": "dl__time_slot"})).await.unwrap_err();
    assert!(matches!(&error, McpError::Transport { server, .. } if server == "doomed"), "{error:?}");
}

/// A server that forgot the client's session (it restarted, or the session expired) answers the
/// next request 404; the client starts a new session and sends that request once more, since a
/// server that did not know the session did not run it.
#[tokio::test]
async fn http_server_that_forgot_the_session_gets_a_new_one() {
    let server = LocalHttpServer::start().await;
    let client = McpClient::connect(&server.config("pmo")).await.unwrap();
    ok(&client, "setting_list", json!({"category": "dl__time_slot"})).await;
    let posts = server.take_posts();
    let old = posts.last().unwrap().session.clone().expect("a session");
    assert_eq!(posts.last().unwrap().method, "tools/call");

    server.forget_sessions().await;
    // A tool that acts: it runs once, in the new session.
    let created = ok(&client, "customer_create", json!({"name": "Noor Haddad", "phone": "555-010-5151"})).await;
    let posts = server.take_posts();
    let summary: Vec<_> = posts.iter().map(|p| (p.method.as_str(), p.status)).collect();
    assert_eq!(
        summary,
        [("tools/call", 404), ("initialize", 200), ("notifications/initialized", 202), ("tools/call", 200)],
        "{posts:?}"
    );
    assert_eq!(posts[0].session.as_ref(), Some(&old));
    assert_eq!(posts[1].session, None, "a new session is asked for without the old id");
    let new = posts[3].session.clone().expect("a session");
    assert_ne!(new, old);
    assert_eq!(posts[2].session.as_ref(), Some(&new));

    // The new session goes on serving, and the customer was created once.
    assert_eq!(ok(&client, "customer_get", json!({"phone": "555-010-5151"})).await, created);
    tool_error(&client, "customer_create", json!({"name": "Noor H.", "phone": "555-010-5151"}), "already exists").await;
    let posts = server.take_posts();
    assert!(posts.iter().all(|p| p.method == "tools/call" && p.session.as_ref() == Some(&new)), "{posts:?}");
    assert!(!client.is_closed());

    // Calls meeting the 404 together share one new session.
    server.forget_sessions().await;
    let (a, b) = tokio::join!(
        client.call_tool("setting_list", json!({"category": "dl__time_slot"})),
        client.call_tool("entity_list", json!({"entity_type": "project"})),
    );
    assert!(!a.unwrap().is_error && !b.unwrap().is_error);
    let posts = server.take_posts();
    let count = |method: &str, status: u16| posts.iter().filter(|p| p.method == method && p.status == status).count();
    assert_eq!(count("initialize", 200), 1, "{posts:?}");
    assert_eq!(count("tools/call", 200), 2, "each call ran once: {posts:?}");
    assert!(count("tools/call", 404) >= 1, "{posts:?}");
    assert_eq!(posts.len(), 2 + 2 + count("tools/call", 404), "{posts:?}");
}

/// Only a 404 to a request in a session is resent: any other failure may have come after the
/// server ran the call.
#[tokio::test]
async fn http_call_failing_otherwise_is_not_sent_again() {
    let server = LocalHttpServer::start().await;
    let client = McpClient::connect(&server.config("pmo")).await.unwrap();
    ok(&client, "setting_list", json!({"category": "dl__time_slot"})).await;
    server.take_posts();

    for status in [StatusCode::INTERNAL_SERVER_ERROR, StatusCode::SERVICE_UNAVAILABLE] {
        server.fail_next_call(status);
        let error = client
            .call_tool("customer_create", json!({"name": "Ivo Petrov", "phone": "555-010-6262"}))
            .await
            .unwrap_err();
        assert!(matches!(&error, McpError::Transport { server, .. } if server == "pmo"), "{error:?}");
        let posts = server.take_posts();
        let summary: Vec<_> = posts.iter().map(|p| (p.method.as_str(), p.status)).collect();
        assert_eq!(summary, [("tools/call", status.as_u16())], "sent once, {error:?}");
    }
    tool_error(&client, "customer_get", json!({"phone": "555-010-6262"}), "no customer found").await;
}

// ---------------------------------------------------------------------------------------------
// The toolbox.

#[tokio::test]
async fn toolbox_merges_and_routes() {
    let server = HttpServer::start(&[]);
    let toolbox = McpToolbox::connect(&[server.config("pmo")]).await.unwrap();
    assert_eq!(toolbox.tools().len(), 7);
    let specs = toolbox.tool_specs();
    assert_eq!(specs.len(), 7);
    assert!(specs.iter().all(|s| s.parameters["type"] == "object" && !s.description.is_empty()));
    assert_eq!(toolbox.server_of("customer_get"), Some("pmo"));
    assert_eq!(toolbox.server_of("nope"), None);
    let outcome = toolbox.call_tool("customer_get", json!({"phone": "5550100001"})).await.unwrap();
    assert!(outcome.is_error);
    let error = toolbox.call_tool("nope", json!({})).await.unwrap_err();
    assert!(matches!(&error, McpError::UnknownTool { tool } if tool == "nope"), "{error:?}");
    toolbox.close().await;
}

#[tokio::test]
async fn toolbox_rejects_a_tool_name_offered_by_two_servers() {
    let error = McpToolbox::connect(&[stdio("pmo-a", &[]), stdio("pmo-b", &[])]).await.unwrap_err();
    let McpError::DuplicateTool { tool, first, second } = &error else { panic!("{error:?}") };
    assert!(TOOL_NAMES.contains(&tool.as_str()), "{tool}");
    assert_eq!((first.as_str(), second.as_str()), ("pmo-a", "pmo-b"));
    let message = error.to_string();
    assert!(message.contains("`pmo-a`") && message.contains("`pmo-b`"), "{message}");

    // The same across transports, from connected clients.
    let server = HttpServer::start(&[]);
    let clients = vec![
        McpClient::connect(&stdio("pmo-stdio", &[])).await.unwrap(),
        McpClient::connect(&server.config("pmo-http")).await.unwrap(),
    ];
    let pid = clients[0].process_id().unwrap();
    let error = McpToolbox::from_clients(clients).await.unwrap_err();
    assert!(
        matches!(&error, McpError::DuplicateTool { first, second, .. } if first == "pmo-stdio" && second == "pmo-http"),
        "{error:?}"
    );
    assert!(!process_alive(pid), "the rejected toolbox's servers are closed");
}

#[tokio::test]
async fn toolbox_rejects_two_servers_of_one_name() {
    let error = McpToolbox::connect(&[stdio("pmo", &[]), stdio("pmo", &[])]).await.unwrap_err();
    assert!(matches!(&error, McpError::DuplicateServer { server } if server == "pmo"), "{error:?}");
}

/// An HTTP server that restarted (killed and started again at its address, with a fresh
/// database) forgot the session: the next call gets a new one from the same client and runs,
/// without failing first.
#[tokio::test]
async fn toolbox_reaches_an_http_server_that_restarted() {
    let mut server = HttpServer::start(&[]);
    let addr = server.url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let toolbox = McpToolbox::connect(&[server.config("pmo")]).await.unwrap();
    let client = toolbox.client("pmo").unwrap();
    let created = toolbox.call_tool("customer_create", json!({"name": "Ada Kim", "phone": "555-010-8080"})).await;
    assert!(!created.unwrap().is_error);

    server.kill();
    let _restarted = HttpServer::start_at(&addr, &[]);
    let outcome = toolbox.call_tool("customer_create", json!({"name": "Ada Kim", "phone": "555-010-8080"})).await;
    let outcome = outcome.unwrap();
    // The restarted server's database is new: the customer is created again, not found there.
    assert!(!outcome.is_error, "{outcome:?}");
    assert!(Arc::ptr_eq(&client, &toolbox.client("pmo").unwrap()), "the same client, a new session");
    assert!(!client.is_closed());
    drop(client);
    toolbox.close().await;
}

/// A stdio server that died (killed here) is started again by the next call to one of its
/// tools; until then nothing is retried behind the caller's back.
#[tokio::test]
async fn toolbox_connects_again_to_a_server_that_died() {
    let toolbox = McpToolbox::connect(&[stdio("pmo", &[])]).await.unwrap();
    let first = toolbox.client("pmo").unwrap().process_id().unwrap();
    let listed = toolbox.call_tool("setting_list", json!({"category": "dl__time_slot"})).await.unwrap();
    assert!(!listed.is_error, "{listed:?}");
    Command::new("kill").args(["-9", &first.to_string()]).status().unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let outcome = loop {
        // A call racing the connection's loss may still fail; the ones after it connect again.
        match toolbox.call_tool("setting_list", json!({"category": "dl__time_slot"})).await {
            Ok(outcome) => break outcome,
            Err(error) => {
                assert!(std::time::Instant::now() < deadline, "never connected again: {error:?}");
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    };
    assert!(!outcome.is_error, "{outcome:?}");
    let second = toolbox.client("pmo").unwrap().process_id().unwrap();
    assert_ne!(first, second, "a new server process");
    toolbox.close().await;
    assert!(!process_alive(second), "the new process is closed with the toolbox");
}
