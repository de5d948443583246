//! The service-call workflow (docs/workflows/service-call.md) end to end through a real server
//! and the Rust client, with a scripted model (a test double; each test queues its replies):
//! the shipped 17-node flow, a customer changing their issue, a failing MCP tool, an invalid
//! flow refused at start-up, and a flow edit taking effect without code changes. The tool nodes
//! call test tools here (recording calls, failing on demand); `tests/service_call_mcp.rs` runs
//! the flow against the real PMO MCP server.

mod common;

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use frontdesk_api::v1::{self as pb, conversation::State};
use frontdesk_client::{Client, ClientError, SendOptions, StartOptions};
use frontdesk_llm::{
    ChatModel, ChatRequest, ChatResponse, LlmError, ScriptedModel, ScriptedReply, ScriptedToolCall, ToolSpec,
};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::{CallLogMode, Config},
    workflows::{
        service_call::{self, UseTools},
        Parts,
    },
};
use frontdesk_workflows::service_call::{ToolFailure, ToolProvider, ToolReply};
use serde_json::{json, Value};
use tonic::Code;

const REPLY: &str = "worker_reply_agent.reply";
const EXTRACT: &str = "worker_mcp_agent.extract";
const TOOLS: &str = "worker_mcp_agent.tools";
const NAVIGATE: &str = "node_navigator_agent.decide";

/// Test tools with the PMO server's shapes: they record every call and fail the tools named in
/// `failing` once each.
#[derive(Default)]
struct TestTools {
    calls: Mutex<Vec<(String, Value)>>,
    failing: Mutex<Vec<String>>,
}

#[async_trait]
impl ToolProvider for TestTools {
    fn specs(&self) -> Vec<ToolSpec> {
        ["setting_list", "customer_get", "customer_create", "task_create", "person_calendar_book", "call_hangup"]
            .into_iter()
            .map(|name| ToolSpec {
                name: name.into(),
                description: format!("the {name} tool"),
                parameters: json!({"type": "object"}),
            })
            .collect()
    }

    /// As the PMO server annotates its tools: lookups and the hang-up repeat nothing.
    fn repeatable(&self, name: &str) -> bool {
        matches!(name, "setting_list" | "customer_get" | "call_hangup")
    }

    async fn call(&self, name: &str, arguments: Value) -> Result<ToolReply, ToolFailure> {
        self.calls.lock().unwrap().push((name.to_owned(), arguments.clone()));
        {
            let mut failing = self.failing.lock().unwrap();
            if let Some(at) = failing.iter().position(|f| f == name) {
                failing.remove(at);
                let source: Box<dyn std::error::Error + Send + Sync> = "connection reset by the MCP server".into();
                return Err(ToolFailure { tool: name.to_owned(), source });
            }
        }
        let (content, is_error) = match name {
            // As the PMO server answers a category it does not have.
            "setting_list" if arguments["category"] != "dl__service_category" => {
                (json!({"error": format!("unknown settings category {}", arguments["category"])}), true)
            }
            "setting_list" => (
                json!({"category": "dl__service_category", "entries": [{"name": "Drywall Repair"}, {"name": "Plumbing"}]}),
                false,
            ),
            "customer_get" => (json!({"error": "no customer with phone 555-1234"}), true),
            "customer_create" => {
                (json!({"customer": {"id": "CUST-1", "name": "John Doe", "phone": "555-1234", "email": null}}), false)
            }
            "task_create" => (
                json!({"task": {"id": "TASK-1", "name": "Drywall Repair Service", "customer_id": "CUST-1", "status": "open"}}),
                false,
            ),
            "person_calendar_book" => (
                json!({"booking": {"id": "B-1", "date": "2025-11-10", "time_slot": "10:00-12:00", "technician": "Bob Smith"}}),
                false,
            ),
            "call_hangup" => (json!({"ended": true}), false),
            other => (json!({"error": format!("no tool {other}")}), true),
        };
        Ok(ToolReply { content, is_error, latency: std::time::Duration::from_millis(3) })
    }
}

struct Call {
    server: Option<RunningServer>,
    client: Client,
    model: Arc<ScriptedModel>,
    tools: Arc<TestTools>,
    id: String,
    _store: common::TestStore,
}

/// A model that names tools the node does not offer, which the scripted model refuses to do:
/// a scripted call with an `invented_name` argument reaches the node as a call of that name.
struct Inventing(Arc<ScriptedModel>);

#[async_trait]
impl ChatModel for Inventing {
    fn model_name(&self) -> &str {
        self.0.model_name()
    }

    async fn chat(&self, request: &ChatRequest) -> Result<ChatResponse, LlmError> {
        let mut response = self.0.chat(request).await?;
        for call in &mut response.tool_calls {
            let arguments: Value = serde_json::from_str(&call.arguments).unwrap_or_default();
            if let Some(name) = arguments["invented_name"].as_str() {
                call.name = name.to_owned();
            }
        }
        Ok(response)
    }
}

async fn server(
    configure: impl FnOnce(&mut Config),
) -> Result<(RunningServer, Arc<ScriptedModel>, Arc<TestTools>, common::TestStore), String> {
    server_with(configure, |model| model).await
}

/// [`server`] with the scripted model as `model` wraps it.
async fn server_with(
    configure: impl FnOnce(&mut Config),
    model: impl FnOnce(Arc<ScriptedModel>) -> Arc<dyn ChatModel>,
) -> Result<(RunningServer, Arc<ScriptedModel>, Arc<TestTools>, common::TestStore), String> {
    let store = common::test_store().await;
    let mut config = Config::default();
    config.database.url = store.url.clone();
    config.shutdown_grace_secs = 5;
    configure(&mut config);
    let scripted = Arc::new(ScriptedModel::new("scripted-test"));
    let tools = Arc::new(TestTools::default());
    let parts = Parts::default().with(UseTools(tools.clone()));
    let overrides = Overrides { model: Some(model(scripted.clone())), parts };
    let app = App::build(config, overrides).await.map_err(|e| {
        let mut chain = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(cause) = source {
            chain.push_str(": ");
            chain.push_str(&cause.to_string());
            source = cause.source();
        }
        chain
    })?;
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    Ok((app.serve_on(listener).await.unwrap(), scripted, tools, store))
}

impl Call {
    async fn start_with(configure: impl FnOnce(&mut Config)) -> Self {
        Self::start_with_model(configure, |model| model).await
    }

    async fn start_with_model(
        configure: impl FnOnce(&mut Config),
        model: impl FnOnce(Arc<ScriptedModel>) -> Arc<dyn ChatModel>,
    ) -> Self {
        let (server, model, tools, store) = server_with(configure, model).await.expect("server builds");
        let client = Client::connect(format!("http://{}", server.addr)).await.unwrap();
        let started = client.start_conversation("service_call", StartOptions::default()).await.unwrap();
        assert_eq!(started.welcome.unwrap().text, "Thank you for calling. How can we help you today?");
        let id = started.conversation.unwrap().conversation_id;
        Call { server: Some(server), client, model, tools, id, _store: store }
    }

    async fn start() -> Self {
        Self::start_with(|_| {}).await
    }

    fn reply(&self, text: &str) -> &Self {
        self.model.push_reply(ScriptedReply::text(text).for_purpose(REPLY));
        self
    }

    fn navigate(&self, next: &str) -> &Self {
        self.model
            .push_reply(ScriptedReply::json(&json!({"reason": "scripted", "next_node": next})).for_purpose(NAVIGATE));
        self
    }

    fn extract(&self, updates: Value) -> &Self {
        self.model.push_reply(ScriptedReply::json(&json!({"context_updates": updates})).for_purpose(EXTRACT));
        self
    }

    fn tool(&self, name: &str, arguments: Value) -> &Self {
        self.model.push_reply(ScriptedReply::tool_call(name, arguments).for_purpose(TOOLS));
        self
    }

    fn tools_done(&self, updates: Value) -> &Self {
        self.model.push_reply(ScriptedReply::json(&json!({"context_updates": updates})).for_purpose(TOOLS));
        self
    }

    /// One customer message; the agent's reply (empty when no reply node answered) and the state.
    async fn say(&self, text: &str) -> (String, pb::ServiceCallState, Vec<pb::RunEvent>) {
        let (events, result) = self.client.send_message_and_wait(&self.id, text, SendOptions::default()).await.unwrap();
        assert_eq!(self.model.remaining(), 0, "every scripted reply was used after {text:?}");
        let reply = result.reply.map(|m| m.text).unwrap_or_default();
        (reply, state(result.conversation.unwrap()), events)
    }

    async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
    }
}

fn state(conversation: pb::Conversation) -> pb::ServiceCallState {
    match conversation.state {
        Some(State::ServiceCall(state)) => state,
        other => panic!("not a service call: {other:?}"),
    }
}

fn context(state: &pb::ServiceCallState) -> Value {
    serde_json::from_str(&state.context_json).unwrap()
}

fn nodes_run(events: &[pb::RunEvent]) -> Vec<String> {
    events
        .iter()
        .filter(|e| matches!(e.kind, Some(pb::run_event::Kind::NodeStarted(_))))
        .map(|e| e.node.clone())
        .filter(|n| n != "receive" && n != "navigator")
        .collect()
}

/// The updates `node` streamed as it finished, in order.
fn updates_of<'e>(events: &'e [pb::RunEvent], node: &str) -> Vec<&'e str> {
    events
        .iter()
        .filter(|e| e.node == node)
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::NodeFinished(f)) => Some(f.update_json.as_str()),
            _ => None,
        })
        .collect()
}

/// Drives the shipped flow from the greeting to the hangup.
async fn whole_call(c: &Call) {
    c.reply("Hello! I understand you need help with drywall repair.").navigate("Extract_Customer_Issue");
    let (reply, s, events) = c.say("Hello, I need help with drywall repair").await;
    assert_eq!(reply, "Hello! I understand you need help with drywall repair.");
    assert_eq!(nodes_run(&events), ["GREET_CUSTOMER"]);
    assert_eq!(s.current_node, "Extract_Customer_Issue");

    c.extract(json!({"customers_main_ask": "Drywall repair", "related_entities_for_customers_ask": null}))
        .navigate("Identify_Issue")
        .reply("I see, a hole in your living room wall needs repair.")
        .navigate("Empathize");
    let (_, s, events) = c.say("There is a hole in my living room wall").await;
    assert_eq!(nodes_run(&events), ["Extract_Customer_Issue", "Identify_Issue"]);
    assert_eq!(context(&s)["customers_main_ask"], "Drywall repair");

    c.reply("I am sorry to hear that.").navigate("Console_Build_Rapport");
    c.say("It happened yesterday").await;
    c.reply("Don't worry, you are in good hands.").navigate("use_mcp_to_get_info");
    c.say("Thanks").await;

    c.tool("setting_list", json!({"category": "dl__service_category"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Drywall Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your name and phone number?")
        .navigate("Extract_Customer_Contact_Info");
    let (_, s, events) = c.say("ok").await;
    assert_eq!(nodes_run(&events), ["use_mcp_to_get_info", "Try_To_Gather_Customers_Data"]);
    assert_eq!(context(&s)["matching_service_catalog_to_solve_customers_issue"], "Drywall Repair");

    c.extract(json!({"customer_name": "John Doe", "customer_phone_number": "555-1234", "customer_email": null}))
        .navigate("Check_IF_existing_customer")
        .tool("customer_get", json!({"phone": "555-1234"}))
        // Once customer_create's mapped result fills customer_id, the node needs no answer round.
        .tool("customer_create", json!({"name": "John Doe", "phone": "555-1234"}))
        // Check_IF_existing_customer and Plan have no branching conditions: no navigator call.
        .tool(
            "task_create",
            json!({"customer_id": "CUST-1", "service_category": "Drywall Repair", "description": "Patch a hole"}),
        )
        .reply("I will schedule a technician to patch your drywall. Does that work for you?")
        .navigate("Execute_Plan_Using_MCP");
    let (_, s, events) = c.say("I'm John Doe, 555-1234").await;
    assert_eq!(
        nodes_run(&events),
        [
            "Extract_Customer_Contact_Info",
            "Check_IF_existing_customer",
            "Plan",
            "Communicate_To_Customer_Before_Action"
        ]
    );
    let ctx = context(&s);
    assert_eq!((ctx["customer_id"].as_str(), ctx["task_id"].as_str()), (Some("CUST-1"), Some("TASK-1")));
    assert_eq!(ctx["task_name"], "Drywall Repair Service", "mapped from the tool result by mcp_result_mapping");
    assert!(s.missing_mandatory_fields.is_empty());
    let tool_events: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::ToolReturned(t)) => Some((t.name.clone(), t.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        tool_events,
        [("customer_get".to_owned(), true), ("customer_create".to_owned(), false), ("task_create".to_owned(), false)]
    );

    c.tool("person_calendar_book", json!({"task_id": "TASK-1", "date": "2025-11-10", "time_slot": "10:00-12:00"}))
        .reply("A technician will come tomorrow at 10 AM.");
    let (_, s, _) = c.say("Yes please").await;
    let ctx = context(&s);
    assert_eq!(ctx["appointment_details"]["id"], "B-1");
    assert_eq!(ctx["assigned_employee_name"], "Bob Smith", "the booked technician, by mcp_result_mapping");
    c.reply("Is there anything else I can help with?").navigate("Goodbye_And_Hangup");
    c.say("Great").await;
    c.reply("Thank you for calling. Have a great day!");
    c.say("No, that's all").await;
    c.tool("call_hangup", json!({"call_session_id": "session"}))
        .tools_done(json!({"hangup_status": "success"}))
        .navigate("END");
    let (reply, s, _) = c.say("Bye").await;
    assert_eq!(reply, "", "the hangup says nothing more");
    assert!(s.call_ended);
    assert_eq!(context(&s)["call_ended"], true);
}

#[tokio::test]
async fn the_shipped_flow_runs_from_greeting_to_hangup() {
    let c = Call::start_with(|config| config.model.call_log = CallLogMode::Redacted).await;
    whole_call(&c).await;
    let conversation = c.client.get_conversation(&c.id).await.unwrap().conversation.unwrap();
    let s = state(conversation);
    // Every node of the flow, in order; the greeting's condition (the customer stated their need
    // at once) skipped ASK_CUSTOMER_ABOUT_THEIR_NEED.
    assert_eq!(
        s.node_traversal_path,
        [
            "GREET_CUSTOMER",
            "Extract_Customer_Issue",
            "Identify_Issue",
            "Empathize",
            "Console_Build_Rapport",
            "use_mcp_to_get_info",
            "Try_To_Gather_Customers_Data",
            "Extract_Customer_Contact_Info",
            "Check_IF_existing_customer",
            "Plan",
            "Communicate_To_Customer_Before_Action",
            "Execute_Plan_Using_MCP",
            "Tell_Customers_Execution",
            "Ask_If_Anything_Else",
            "Goodbye_And_Hangup",
            "Execute_Call_Hangup"
        ]
    );
    let names: Vec<String> = c.tools.calls.lock().unwrap().iter().map(|(n, _)| n.clone()).collect();
    assert_eq!(
        names,
        ["setting_list", "customer_get", "customer_create", "task_create", "person_calendar_book", "call_hangup"]
    );
    // Counted with the real tokenizer; far under the design's 21,000-30,000 per call.
    assert!(s.model_calls > 20 && s.prompt_tokens > 1_000 && s.prompt_tokens < 15_000, "{s:?}");
    // The structured call log, per conversation: every model call with the node that made it.
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", c.server.as_ref().unwrap().addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut workflows = pb::workflow_service_client::WorkflowServiceClient::new(channel);
    // The SQL log is written off the run's path; give it a moment.
    let mut logged = pb::ListLlmCallsResponse::default();
    for _ in 0..50 {
        let request = pb::ListLlmCallsRequest { thread_id: c.id.clone(), page_size: 500, page_token: String::new() };
        logged = workflows.list_llm_calls(request).await.unwrap().into_inner();
        if logged.total_calls == u64::from(s.model_calls) {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(logged.total_calls, u64::from(s.model_calls), "one log entry per model call");
    let nodes: std::collections::BTreeSet<&str> = logged.calls.iter().map(|call| call.node.as_str()).collect();
    for node in ["GREET_CUSTOMER", "navigator", "Extract_Customer_Issue", "Plan", "Execute_Call_Hangup"] {
        assert!(nodes.contains(node), "{node} in {nodes:?}");
    }
    assert!(logged.calls.iter().all(|call| !call.prompt_json.contains("drywall")), "prompts are redacted");
    // After the hangup the call takes no more messages.
    let err = c.client.send_message_and_wait(&c.id, "Hello?", SendOptions::default()).await.unwrap_err();
    match err {
        ClientError::Status(status) => {
            assert_eq!(status.code, Code::FailedPrecondition);
            assert_eq!(status.reason.as_deref(), Some("CONVERSATION_ENDED"));
        }
        other => panic!("{other:?}"),
    }
    c.stop().await;
}

#[tokio::test]
async fn a_customer_changing_their_issue_goes_back_to_extraction() {
    let c = Call::start().await;
    c.reply("Hello! How can I help?").navigate("Extract_Customer_Issue");
    c.say("I need help with drywall repair").await;
    c.extract(json!({"customers_main_ask": "Drywall repair"}))
        .navigate("Identify_Issue")
        .reply("A drywall repair, then.")
        .navigate("Empathize");
    c.say("Yes, a hole in the wall").await;
    // The customer changes their issue: the navigator's branching condition sends the call back.
    c.reply("I understand.").navigate("Extract_Customer_Issue");
    let (_, s, _) = c.say("Actually, forget the wall: my roof is leaking").await;
    assert_eq!(s.current_node, "Extract_Customer_Issue");
    c.extract(json!({"customers_main_ask": "Roof leak"}))
        .navigate("Identify_Issue")
        .reply("A leaking roof, then.")
        .navigate("Empathize");
    let (_, s, _) = c.say("Water comes through the ceiling").await;
    let ctx = context(&s);
    assert_eq!(ctx["customers_main_ask"], "Roof leak");
    let path = &s.node_traversal_path;
    assert_eq!(path.iter().filter(|n| *n == "Extract_Customer_Issue").count(), 2, "{path:?}");
    // The navigator saw the customer's change of mind.
    let saw_it = c
        .model
        .requests()
        .into_iter()
        .filter(|r| r.purpose == NAVIGATE)
        .any(|r| r.messages.last().unwrap().content.contains("my roof is leaking"));
    assert!(saw_it);
    c.stop().await;
}

/// The first four turns of the shipped flow, up to `use_mcp_to_get_info`, the catalog lookup.
async fn to_the_catalog_lookup(c: &Call) {
    c.reply("Hello!").navigate("Extract_Customer_Issue");
    c.say("Drywall repair please").await;
    c.extract(json!({"customers_main_ask": "Drywall repair"}))
        .navigate("Identify_Issue")
        .reply("Drywall repair.")
        .navigate("Empathize");
    c.say("yes").await;
    c.reply("Sorry to hear.").navigate("Console_Build_Rapport");
    c.say("ok").await;
    c.reply("You're in good hands.").navigate("use_mcp_to_get_info");
    c.say("thanks").await;
}

#[tokio::test]
async fn a_failing_mcp_tool_is_reported_and_the_flow_retries_the_node() {
    let c = Call::start().await;
    c.tools.failing.lock().unwrap().push("setting_list".into());
    to_the_catalog_lookup(&c).await;
    // The tool fails: the model sees the error, the node records the failure, and the
    // navigator's condition "if MCP fetch fails" runs the node again.
    c.tool("setting_list", json!({"category": "dl__service_category"}))
        // After the failed call the model still claims a match; nothing backs it.
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Invented Repair"}))
        .navigate("use_mcp_to_get_info")
        .tool("setting_list", json!({"category": "dl__service_category"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Drywall Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your phone number?")
        .navigate("Extract_Customer_Contact_Info");
    let (_, s, events) = c.say("ok").await;
    let failed = events.iter().find_map(|e| match &e.kind {
        Some(pb::run_event::Kind::ToolReturned(t)) if t.is_error => Some(t.result_json.clone()),
        _ => None,
    });
    assert!(failed.expect("the failure is streamed").contains("connection reset"));
    let ctx = context(&s);
    assert_eq!(ctx["matching_service_catalog_to_solve_customers_issue"], "Drywall Repair");
    assert_eq!(nodes_run(&events), ["use_mcp_to_get_info", "use_mcp_to_get_info", "Try_To_Gather_Customers_Data"]);
    let updates = updates_of(&events, "use_mcp_to_get_info");
    assert!(!updates[0].contains("Invented"), "a failed tool node keeps no field of the model's: {}", updates[0]);
    // The navigator was told of the failure, and the flags say how the node's last run went.
    let told: Vec<bool> = c
        .model
        .requests()
        .into_iter()
        .filter(|r| r.purpose == NAVIGATE)
        .map(|r| r.messages.iter().any(|m| m.content.contains("use_mcp_to_get_info failed.")))
        .collect();
    assert_eq!(told.iter().filter(|t| **t).count(), 1, "only the navigation after the failure: {told:?}");
    assert_eq!(
        (&ctx["flags"]["use_mcp_to_get_info_flag"], &ctx["flags"]["use_mcp_to_get_info_failed"]),
        (&json!(1), &json!(0))
    );
    c.stop().await;
}

/// A tool node whose last call failed keeps none of the fields the model proposed, even after
/// an earlier call of the same run got through: that call does not back what the model says of
/// the one that failed.
#[tokio::test]
async fn a_tool_node_whose_last_call_failed_keeps_no_field_the_model_proposed() {
    let c = Call::start().await;
    to_the_catalog_lookup(&c).await;
    c.tool("setting_list", json!({"category": "dl__service_category"}))
        .tool("setting_list", json!({"category": "dl__repair_kinds"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Invented Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your phone number?")
        .navigate("Extract_Customer_Contact_Info");
    let (_, s, events) = c.say("ok").await;
    let returned: Vec<bool> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::ToolReturned(t)) => Some(t.is_error),
            _ => None,
        })
        .collect();
    assert_eq!(returned, [false, true], "the first call got through, the last failed");
    let updates = updates_of(&events, "use_mcp_to_get_info");
    let update = updates.first().expect("the tool node finished");
    assert!(!update.contains("Invented"), "a failed tool node keeps no field of the model's: {update}");
    let ctx = context(&s);
    assert_eq!(ctx["matching_service_catalog_to_solve_customers_issue"], "", "as the template left it");
    assert_eq!(
        (&ctx["flags"]["use_mcp_to_get_info_flag"], &ctx["flags"]["use_mcp_to_get_info_failed"]),
        (&json!(0), &json!(1))
    );
    c.stop().await;
}

/// A tool the model made up is not run, and is streamed and counted as `unknown`: the model's
/// names never become metric labels (one series for every made-up name). The model still hears
/// which name it got wrong.
#[tokio::test]
async fn a_tool_the_model_made_up_is_refused_and_counted_as_unknown() {
    let c = Call::start_with_model(
        |config| config.metrics.listen = Some("127.0.0.1:0".parse().unwrap()),
        |scripted| Arc::new(Inventing(scripted)),
    )
    .await;
    to_the_catalog_lookup(&c).await;
    let invented = |name: &str| ScriptedToolCall::new("setting_list", json!({"invented_name": name}));
    c.model.push_reply(
        ScriptedReply::tool_calls([invented("pmo_search_everything"), invented("catalog_lookup_v2")])
            .for_purpose(TOOLS),
    );
    c.tool("setting_list", json!({"category": "dl__service_category"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Drywall Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your phone number?")
        .navigate("Extract_Customer_Contact_Info");
    let (_, s, events) = c.say("ok").await;
    let streamed: Vec<(String, bool)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::ToolReturned(t)) => Some((t.name.clone(), t.is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        streamed,
        [("unknown".to_owned(), true), ("unknown".to_owned(), true), ("setting_list".to_owned(), false)]
    );
    let called: Vec<String> = events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::ToolCalled(t)) => Some(t.name.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(called, ["unknown", "unknown", "setting_list"]);
    let ran: Vec<String> = c.tools.calls.lock().unwrap().iter().map(|(name, _)| name.clone()).collect();
    assert_eq!(ran, ["setting_list"], "a tool the node does not offer is never run");
    let told = c.model.requests().into_iter().filter(|r| r.purpose == TOOLS).any(|r| {
        r.messages
            .iter()
            .any(|m| m.content.contains("no tool named pmo_search_everything; the tools are: setting_list"))
    });
    assert!(told, "the model is told which of its names is not a tool");
    assert_eq!(context(&s)["matching_service_catalog_to_solve_customers_issue"], "Drywall Repair");

    let addr = c.server.as_ref().unwrap().metrics_addr.expect("metrics are served");
    let (_, text) = common::http_get(addr, "/metrics").await;
    let tool_calls = |tool: &str, outcome: &str| {
        let labels = format!("{{workflow=\"service_call\",tool=\"{tool}\",outcome=\"{outcome}\"}}");
        common::series(&text, &format!("frontdesk_tool_calls_total{labels}"))
    };
    assert_eq!((tool_calls("unknown", "error"), tool_calls("setting_list", "ok")), (2.0, 1.0));
    for name in ["pmo_search_everything", "catalog_lookup_v2"] {
        assert!(!text.contains(name), "{name} is a label:\n{text}");
    }
    c.stop().await;
}

/// A tool node whose model fails after a tool that acts (`customer_create`, which takes no
/// idempotency key) has run is not run again by its retry policy: that would create the
/// customer twice. The turn fails instead (and rolls back), with the customer created once.
#[tokio::test]
async fn a_tool_node_is_not_retried_once_a_tool_that_acts_has_run() {
    let c = Call::start_with(|config| config.model.max_attempts = 1).await;
    to_the_catalog_lookup(&c).await;
    c.tool("setting_list", json!({"category": "dl__service_category"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Drywall Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your name and phone number?")
        .navigate("Extract_Customer_Contact_Info");
    c.say("ok").await;

    // customer_create's connection breaks after the request went out (it may have created the
    // customer), then the model is down; a retry would call customer_create again.
    c.tools.failing.lock().unwrap().push("customer_create".into());
    c.extract(json!({"customer_name": "John Doe", "customer_phone_number": "555-1234", "customer_email": null}))
        .navigate("Check_IF_existing_customer")
        .tool("customer_create", json!({"name": "John Doe", "phone": "555-1234"}));
    c.model
        .push_reply(ScriptedReply::failure(frontdesk_llm::ScriptedFailure::Server { status: 503 }).for_purpose(TOOLS));
    c.tool("customer_create", json!({"name": "John Doe", "phone": "555-1234"}));
    let failed = c.client.send_message_and_wait(&c.id, "I'm John Doe, 555-1234", SendOptions::default()).await;
    let error = failed.expect_err("the turn fails");
    assert!(format!("{error:?}").contains("Check_IF_existing_customer"), "{error:?}");
    let created = c.tools.calls.lock().unwrap().iter().filter(|(name, _)| name == "customer_create").count();
    assert_eq!(created, 1, "customer_create is called once");
    assert_eq!(c.model.remaining(), 1, "the node was not run again");
    c.stop().await;
}

#[tokio::test]
async fn a_node_is_retried_when_its_tools_only_read() {
    let c = Call::start_with(|config| config.model.max_attempts = 1).await;
    to_the_catalog_lookup(&c).await;
    // A lookup, then the model fails: the node is run again and completes.
    c.tool("setting_list", json!({"category": "dl__service_category"}));
    c.model
        .push_reply(ScriptedReply::failure(frontdesk_llm::ScriptedFailure::Server { status: 503 }).for_purpose(TOOLS));
    c.tool("setting_list", json!({"category": "dl__service_category"}))
        .tools_done(json!({"matching_service_catalog_to_solve_customers_issue": "Drywall Repair"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your name and phone number?")
        .navigate("Extract_Customer_Contact_Info");
    let (_, s, events) = c.say("ok").await;
    assert_eq!(context(&s)["matching_service_catalog_to_solve_customers_issue"], "Drywall Repair");
    assert!(events.iter().any(|e| matches!(e.kind, Some(pb::run_event::Kind::NodeRetrying(_)))));
    c.stop().await;
}

#[tokio::test]
async fn an_invalid_flow_is_refused_at_start_up_naming_node_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let shipped =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/service_call/agent_config.json"))
            .unwrap();
    let broken =
        shipped.replace("\"default_next_node\": \"Identify_Issue\"", "\"default_next_node\": \"Identfy_Issue\"");
    assert_ne!(broken, shipped);
    let path = dir.path().join("agent_config.json");
    std::fs::write(&path, broken).unwrap();
    let error = match server(|config| {
        let mut settings = config.workflows.settings::<service_call::Workflow>().unwrap();
        settings.config = Some(path.clone());
        config.workflows.set::<service_call::Workflow>(&settings).unwrap();
    })
    .await
    {
        Ok(_) => panic!("an invalid flow must stop the server"),
        Err(error) => error,
    };
    assert!(error.contains("workflows.service_call.config"), "{error}");
    assert!(
        error.contains("Extract_Customer_Issue")
            && error.contains("default_next_node")
            && error.contains("Identfy_Issue"),
        "{error}"
    );
}

#[tokio::test]
async fn a_node_added_to_the_flow_runs_without_code_changes() {
    let dir = tempfile::tempdir().unwrap();
    let mut flow: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../config/service_call/agent_config.json"))
            .unwrap(),
    )
    .unwrap();
    let nodes = flow["nodes"].as_array_mut().unwrap();
    for node in nodes.iter_mut() {
        if node["node_name"] == "GREET_CUSTOMER" {
            node["default_next_node"] = json!("Verify_Caller");
            node["branching_conditions"] = json!([]);
        }
    }
    nodes.insert(
        1,
        json!({
            "node_name": "Verify_Caller",
            "node_action": "reply",
            "agent_profile_type": "worker_reply_agent",
            "role": "a security-minded receptionist",
            "node_goal": "Confirm the caller is the account holder",
            "prompt_templates": "Ask politely whether the caller is the account holder.",
            "default_next_node": "ASK_CUSTOMER_ABOUT_THEIR_NEED",
            "branching_conditions": [],
            "expected_context_fields": []
        }),
    );
    let path = dir.path().join("agent_config.json");
    std::fs::write(&path, flow.to_string()).unwrap();
    let c = Call::start_with(|config| {
        let mut settings = config.workflows.settings::<service_call::Workflow>().unwrap();
        settings.config = Some(path.clone());
        config.workflows.set::<service_call::Workflow>(&settings).unwrap();
    })
    .await;
    // The greeting now has no conditions, so no navigator call: its default is the new node.
    c.reply("Hello!");
    let (_, s, _) = c.say("Hi").await;
    assert_eq!(s.current_node, "Verify_Caller");
    c.reply("Are you the account holder?");
    let (reply, s, events) = c.say("I need a plumber").await;
    assert_eq!(reply, "Are you the account holder?");
    assert_eq!(nodes_run(&events), ["Verify_Caller"]);
    assert_eq!(s.current_node, "ASK_CUSTOMER_ABOUT_THEIR_NEED");
    let graph = c.client.describe_workflow("service_call").await.unwrap();
    assert!(graph.nodes.iter().any(|n| n.name == "Verify_Caller"));
    c.stop().await;
}
