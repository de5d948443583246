//! The service-call workflow's shipped 17-node flow end to end against the REAL PMO MCP server
//! (this crate's binary, over stdio, with its own SQLite database), through a real Frontdesk
//! server and the Rust client, with a scripted model (a test double whose tool calls name the
//! ids this fresh PMO database hands out).

use std::sync::Arc;

use frontdesk_api::v1::{self as pb, conversation::State};
use frontdesk_client::{Client, ClientError, SendOptions, StartOptions};
use frontdesk_llm::{ScriptedModel, ScriptedReply};
use frontdesk_mcp::McpServerConfig;
use frontdesk_server::{
    app::{App, Overrides},
    config::Config,
    workflows::{service_call, Parts},
};
use serde_json::{json, Value};

const REPLY: &str = "worker_reply_agent.reply";
const EXTRACT: &str = "worker_mcp_agent.extract";
const TOOLS: &str = "worker_mcp_agent.tools";
const NAVIGATE: &str = "node_navigator_agent.decide";

struct Script(Arc<ScriptedModel>);

impl Script {
    fn reply(&self, text: &str) -> &Self {
        self.0.push_reply(ScriptedReply::text(text).for_purpose(REPLY));
        self
    }
    fn navigate(&self, next: &str) -> &Self {
        self.0.push_reply(ScriptedReply::json(&json!({"reason": "scripted", "next_node": next})).for_purpose(NAVIGATE));
        self
    }
    fn extract(&self, updates: Value) -> &Self {
        self.0.push_reply(ScriptedReply::json(&json!({"context_updates": updates})).for_purpose(EXTRACT));
        self
    }
    fn tool(&self, name: &str, arguments: Value) -> &Self {
        self.0.push_reply(ScriptedReply::tool_call(name, arguments).for_purpose(TOOLS));
        self
    }
    fn done(&self, updates: Value) -> &Self {
        self.0.push_reply(ScriptedReply::json(&json!({"context_updates": updates})).for_purpose(TOOLS));
        self
    }
}

fn state(conversation: pb::Conversation) -> pb::ServiceCallState {
    match conversation.state {
        Some(State::ServiceCall(state)) => state,
        other => panic!("not a service call: {other:?}"),
    }
}

#[tokio::test]
async fn the_whole_flow_runs_against_the_pmo_mcp_server() {
    let dir = tempfile::tempdir().unwrap();
    let mut config = Config::default();
    config.database.url = format!("sqlite://{}/frontdesk.db", dir.path().display());
    config.shutdown_grace_secs = 5;
    let pmo_db = format!("sqlite://{}/pmo.db", dir.path().display());
    let mut settings = config.workflows.settings::<service_call::Workflow>().unwrap();
    settings.mcp_servers =
        vec![McpServerConfig::stdio("pmo", env!("CARGO_BIN_EXE_frontdesk-pmo-mcp"), ["--database", pmo_db.as_str()])];
    config.workflows.set::<service_call::Workflow>(&settings).unwrap();
    let model = Arc::new(ScriptedModel::new("scripted-test"));
    let app = App::build(config, Overrides { model: Some(model.clone()), parts: Parts::default() }).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let server = app.serve_on(listener).await.unwrap();
    let client = Client::connect(format!("http://{}", server.addr)).await.unwrap();
    let id = client
        .start_conversation("service_call", StartOptions::default())
        .await
        .unwrap()
        .conversation
        .unwrap()
        .conversation_id;
    let s = Script(model.clone());
    let mut tools = Vec::new();
    let say = |text: &'static str| {
        let client = client.clone();
        let id = id.clone();
        async move { client.send_message_and_wait(&id, text, SendOptions::default()).await.unwrap() }
    };
    let mut record = |events: &[pb::RunEvent]| {
        for e in events {
            if let Some(pb::run_event::Kind::ToolReturned(t)) = &e.kind {
                assert!(t.latency.is_some());
                tools.push((t.name.clone(), t.is_error, t.result_json.clone()));
            }
        }
    };

    s.reply("Hello! Drywall repair, I can help.").navigate("Extract_Customer_Issue");
    record(&say("Hello, I need help with a hole in my drywall").await.0);
    s.extract(json!({"customers_main_ask": "Drywall repair"}))
        .navigate("Identify_Issue")
        .reply("A hole in the drywall, then.")
        .navigate("Empathize");
    record(&say("Yes, in the living room").await.0);
    s.reply("I am sorry to hear that.").navigate("Console_Build_Rapport");
    record(&say("It happened yesterday").await.0);
    s.reply("You are in good hands.").navigate("use_mcp_to_get_info");
    record(&say("Thanks").await.0);
    s.tool("setting_list", json!({"category": "dl__service_category"}))
        .done(json!({"matching_service_catalog_to_solve_customers_issue": "general_maintenance"}))
        .navigate("Try_To_Gather_Customers_Data")
        .reply("May I have your name and phone number?")
        .navigate("Extract_Customer_Contact_Info");
    record(&say("ok").await.0);
    s.extract(json!({"customer_name": "John Doe", "customer_phone_number": "555-1234"}))
        .navigate("Check_IF_existing_customer")
        .tool("customer_get", json!({"phone": "555-1234"}))
        // customer_create's mapped result fills customer_id: no answer round.
        .tool("customer_create", json!({"name": "John Doe", "phone": "555-1234"}))
        .tool("task_create", json!({"customer_id": "CUS-00001", "service_category": "general_maintenance", "description": "Patch a hole in the living-room drywall"}))
        .done(json!({"task_name": "Drywall patch"}))
        .reply("I will book a technician to patch it. Does that work for you?")
        .navigate("Execute_Plan_Using_MCP");
    record(&say("John Doe, 555-1234").await.0);
    // The booking, mapped, is the node's field: no answer round.
    s.tool("person_calendar_book", json!({"task_id": "TSK-00006", "date": "2099-12-01", "time_slot": "10:00-12:00"}))
        .reply("Booked for 1 December, 10:00-12:00.");
    record(&say("Yes please").await.0);
    s.reply("Anything else?").navigate("Goodbye_And_Hangup");
    record(&say("Great").await.0);
    s.reply("Thank you for calling!");
    record(&say("No, that's all").await.0);
    s.tool("call_hangup", json!({"call_session_id": "session-1"}))
        .done(json!({"hangup_status": "success"}))
        .navigate("END");
    let (events, result) = say("Bye").await;
    record(&events);
    assert_eq!(model.remaining(), 0);

    let names: Vec<(&str, bool)> = tools.iter().map(|(n, e, _)| (n.as_str(), *e)).collect();
    assert_eq!(
        names,
        [
            ("setting_list", false),
            ("customer_get", true),
            ("customer_create", false),
            ("task_create", false),
            ("person_calendar_book", false),
            ("call_hangup", false)
        ],
        "{tools:?}"
    );
    let call = state(result.conversation.unwrap());
    assert!(call.call_ended);
    let context: Value = serde_json::from_str(&call.context_json).unwrap();
    assert_eq!(context["customer_id"], "CUS-00001", "mapped from customer_create's result");
    assert_eq!(context["task_id"], "TSK-00006", "mapped from task_create's result");
    assert_eq!(context["call_ended"], true);
    assert!(context["appointment_details"].to_string().contains("10:00-12:00"), "{context}");
    assert_eq!(call.node_traversal_path.len(), 16);
    let err = client.send_message_and_wait(&id, "Hello?", SendOptions::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::Status(ref s) if s.reason.as_deref() == Some("CONVERSATION_ENDED")), "{err:?}");
    server.shutdown().await.unwrap();
}
