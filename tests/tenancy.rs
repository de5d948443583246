//! API keys and tenants over gRPC: a real server with `auth.mode = "keys"`, keys made by the
//! real `frontdesk-server keys create` on the server's database, and every RPC of every service
//! called by two tenants. Another tenant's record is `NOT_FOUND`, exactly as a missing one;
//! listings show only the caller's tenant; ids callers choose never clash across tenants.
//! The model is scripted (a test double; each test queues its replies).

mod common;

use std::{process::Command, time::Duration};

use common::{route, Options, TestServer};
use frontdesk_api::v1::{
    self as pb, conversation_service_client::ConversationServiceClient,
    investigation_service_client::InvestigationServiceClient, research_service_client::ResearchServiceClient,
    triage_service_client::TriageServiceClient, workflow_service_client::WorkflowServiceClient,
};
use frontdesk_server::config::{AuthMode, CallLogMode};
use serde_json::json;
use tonic::{
    metadata::{Ascii, MetadataValue},
    service::{interceptor::InterceptedService, Interceptor},
    transport::Channel,
    Code, Request, Status,
};
use tonic_types::StatusExt;

/// Adds `authorization: Bearer <key>` to every call.
#[derive(Clone)]
struct Bearer(Option<MetadataValue<Ascii>>);

impl Interceptor for Bearer {
    fn call(&mut self, mut request: Request<()>) -> Result<Request<()>, Status> {
        if let Some(value) = &self.0 {
            request.metadata_mut().insert("authorization", value.clone());
        }
        Ok(request)
    }
}

type Svc = InterceptedService<Channel, Bearer>;

/// One caller's clients of every service, all with its key.
struct Caller {
    conversations: ConversationServiceClient<Svc>,
    workflows: WorkflowServiceClient<Svc>,
    triage: TriageServiceClient<Svc>,
    investigations: InvestigationServiceClient<Svc>,
    research: ResearchServiceClient<Svc>,
}

impl Caller {
    async fn new(s: &TestServer, key: Option<&str>) -> Caller {
        let channel = Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
        let bearer = Bearer(key.map(|k| format!("Bearer {k}").parse().unwrap()));
        let svc = || InterceptedService::new(channel.clone(), bearer.clone());
        Caller {
            conversations: ConversationServiceClient::new(svc()),
            workflows: WorkflowServiceClient::new(svc()),
            triage: TriageServiceClient::new(svc()),
            investigations: InvestigationServiceClient::new(svc()),
            research: ResearchServiceClient::new(svc()),
        }
    }
}

/// A key made by the real CLI on the server's database: the one line it prints on stdout.
fn create_key(s: &TestServer, tenant: &str, scopes: &str) -> String {
    let output = Command::new(env!("CARGO_BIN_EXE_frontdesk-server"))
        .args(["--database-url", &s.database_url, "keys", "create", "--tenant", tenant, "--scopes", scopes])
        .output()
        .expect("frontdesk-server runs");
    assert!(output.status.success(), "keys create failed: {}", String::from_utf8_lossy(&output.stderr));
    String::from_utf8(output.stdout).unwrap().trim().to_owned()
}

async fn server() -> TestServer {
    TestServer::start_with(Options {
        call_log: CallLogMode::Redacted,
        configure: |config| config.auth.mode = AuthMode::Keys,
        ..Options::default()
    })
    .await
}

/// Two tenants' callers with every scope.
async fn two_tenants(s: &TestServer) -> (Caller, Caller) {
    let acme = create_key(s, "acme", "*:admin");
    let globex = create_key(s, "globex", "*:admin");
    (Caller::new(s, Some(&acme)).await, Caller::new(s, Some(&globex)).await)
}

fn reason(status: &Status) -> String {
    status.get_error_details().error_info().map(|i| i.reason.clone()).unwrap_or_default()
}

/// `NOT_FOUND`, reason `NOT_FOUND`: what another tenant's record looks like.
#[track_caller]
fn assert_not_found<T: std::fmt::Debug>(result: Result<T, Status>) {
    let status = result.expect_err("another tenant's record must not be found");
    assert_eq!(status.code(), Code::NotFound, "{status:?}");
    assert_eq!(reason(&status), "NOT_FOUND", "{status:?}");
}

async fn drain<T>(mut stream: tonic::Streaming<T>) -> Result<Vec<T>, Status> {
    let mut items = Vec::new();
    while let Some(item) = stream.message().await? {
        items.push(item);
    }
    Ok(items)
}

fn start(id: &str) -> pb::StartConversationRequest {
    pb::StartConversationRequest {
        workflow: "intake".into(),
        conversation_id: id.into(),
        idempotency_key: String::new(),
    }
}

fn send(id: &str, text: &str) -> pb::SendMessageRequest {
    pb::SendMessageRequest {
        conversation_id: id.into(),
        text: text.into(),
        idempotency_key: String::new(),
        busy_policy: 0,
    }
}

#[tokio::test]
async fn calls_without_a_valid_key_or_scope_are_refused_with_error_info() {
    let s = server().await;
    let reader = create_key(&s, "acme", "conversation:read");
    let mut anonymous = Caller::new(&s, None).await;
    let status = anonymous.workflows.list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert_eq!(reason(&status), "UNAUTHENTICATED");
    assert!(!status.message().contains("fdk_"), "{status:?}");

    // Well-formed but unknown: the right id with another secret.
    let id = reader.split('_').nth(1).unwrap();
    let forged = format!("fdk_{id}_{}", "A".repeat(43));
    let mut forger = Caller::new(&s, Some(&forged)).await;
    let status = forger.workflows.list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err();
    assert_eq!(status.code(), Code::Unauthenticated);
    assert!(!status.message().contains(&forged));
    let mut garbage = Caller::new(&s, Some("not-a-key")).await;
    assert_eq!(
        garbage.workflows.list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err().code(),
        Code::Unauthenticated
    );

    let mut read_only = Caller::new(&s, Some(&reader)).await;
    let listed = read_only.conversations.list_conversations(pb::ListConversationsRequest::default()).await;
    assert!(listed.is_ok(), "{listed:?}");
    let status = read_only.conversations.start_conversation(start("")).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);
    assert_eq!(reason(&status), "SCOPE_MISSING");
    let info = status.get_error_details().error_info().cloned().unwrap();
    assert_eq!(info.metadata.get("scope").map(String::as_str), Some("conversation:write"));
    let status = read_only.workflows.list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err();
    assert_eq!(status.code(), Code::PermissionDenied);

    // Health stays open (auth.open_services), so load balancers need no key.
    let channel = Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    let mut health = tonic_health::pb::health_client::HealthClient::new(channel);
    let served = health.check(tonic_health::pb::HealthCheckRequest { service: String::new() }).await;
    assert!(served.is_ok(), "{served:?}");
    s.stop().await;
}

#[tokio::test]
async fn conversations_runs_and_model_calls_belong_to_their_tenant() {
    let s = server().await;
    let (mut acme, mut globex) = two_tenants(&s).await;

    let started = acme.conversations.start_conversation(start("shared-id")).await.unwrap().into_inner();
    assert_eq!(started.conversation.unwrap().conversation_id, "shared-id");
    s.script(&[("supervisor.route", route("chat_agent")), ("chat.chat", json!("Hello from acme."))]);
    let turn =
        drain(acme.conversations.send_message(send("shared-id", "hi")).await.unwrap().into_inner()).await.unwrap();
    let run_id = turn
        .iter()
        .find_map(|r| match &r.payload {
            Some(pb::send_message_response::Payload::Event(e)) => Some(e.run_id.clone()),
            _ => None,
        })
        .unwrap();
    // Events show the caller's ids, never a storage key.
    for response in &turn {
        if let Some(pb::send_message_response::Payload::Event(e)) = &response.payload {
            if let Some(pb::run_event::Kind::RunStarted(started)) = &e.kind {
                assert_eq!(started.thread_id, "shared-id");
            }
        }
    }

    // Every ConversationService call of globex on acme's conversation: as if it did not exist.
    assert_not_found(
        globex.conversations.get_conversation(pb::GetConversationRequest { conversation_id: "shared-id".into() }).await,
    );
    assert_not_found(globex.conversations.send_message(send("shared-id", "hijack")).await);
    assert_not_found(
        globex
            .conversations
            .reset_conversation(pb::ResetConversationRequest {
                conversation_id: "shared-id".into(),
                idempotency_key: String::new(),
            })
            .await,
    );
    assert_not_found(
        globex
            .conversations
            .delete_conversation(pb::DeleteConversationRequest { conversation_id: "shared-id".into() })
            .await,
    );
    let listed = globex.conversations.list_conversations(pb::ListConversationsRequest::default()).await.unwrap();
    assert!(listed.into_inner().conversations.is_empty());
    let listed = globex
        .conversations
        .list_conversations(pb::ListConversationsRequest { workflow: "intake".into(), ..Default::default() })
        .await
        .unwrap();
    assert!(listed.into_inner().conversations.is_empty());
    // A smuggled tenant in the id reaches nothing either.
    let status = globex
        .conversations
        .get_conversation(pb::GetConversationRequest { conversation_id: "acme/shared-id".into() })
        .await
        .unwrap_err();
    assert!(matches!(status.code(), Code::NotFound | Code::InvalidArgument), "{status:?}");

    // WorkflowService: acme's run and model calls are not globex's.
    assert_not_found(globex.workflows.cancel_run(pb::CancelRunRequest { run_id: run_id.clone() }).await);
    assert_not_found(
        globex.workflows.subscribe_run(pb::SubscribeRunRequest { run_id: run_id.clone(), after_event_id: 0 }).await,
    );
    assert_not_found(
        globex
            .workflows
            .list_llm_calls(pb::ListLlmCallsRequest { thread_id: "shared-id".into(), ..Default::default() })
            .await,
    );
    // ListWorkflows and DescribeWorkflow hold no tenant's data: both tenants see them.
    assert!(globex.workflows.list_workflows(pb::ListWorkflowsRequest {}).await.is_ok());
    assert!(globex.workflows.describe_workflow(pb::DescribeWorkflowRequest { name: "intake".into() }).await.is_ok());

    // The same id is globex's own to use.
    let theirs = globex.conversations.start_conversation(start("shared-id")).await.unwrap().into_inner();
    assert_eq!(theirs.conversation.unwrap().turn_count, 0);
    let listed = globex.conversations.list_conversations(pb::ListConversationsRequest::default()).await.unwrap();
    let ids: Vec<_> = listed.into_inner().conversations.into_iter().map(|c| c.conversation_id).collect();
    assert_eq!(ids, ["shared-id"]);

    // acme still has its own, with its turn, its run and its model calls.
    let mine = acme
        .conversations
        .get_conversation(pb::GetConversationRequest { conversation_id: "shared-id".into() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(mine.conversation.unwrap().turn_count, 1);
    let events = drain(
        acme.workflows
            .subscribe_run(pb::SubscribeRunRequest { run_id: run_id.clone(), after_event_id: 0 })
            .await
            .unwrap()
            .into_inner(),
    )
    .await
    .unwrap();
    assert!(!events.is_empty());
    let calls = acme
        .workflows
        .list_llm_calls(pb::ListLlmCallsRequest { thread_id: "shared-id".into(), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(calls.total_calls, 2);
    let listed = acme.conversations.list_conversations(pb::ListConversationsRequest::default()).await.unwrap();
    assert_eq!(listed.into_inner().conversations.len(), 1);

    // Erasing globex's leaves acme's.
    globex
        .conversations
        .delete_conversation(pb::DeleteConversationRequest { conversation_id: "shared-id".into() })
        .await
        .unwrap();
    assert!(acme
        .conversations
        .get_conversation(pb::GetConversationRequest { conversation_id: "shared-id".into() })
        .await
        .is_ok());
    s.stop().await;
}

fn research_script(s: &TestServer) {
    s.script(&[
        ("planner.plan", json!({"research_steps": [], "expert_steps": ["Add"]})),
        ("critic_planner.review", json!({"decision": "approve", "feedback": "Good."})),
        ("expert.answer", json!({"answer": "4.", "reasoning": "Arithmetic."})),
        ("critic_expert.review", json!({"decision": "approve", "feedback": "Good."})),
        ("finalizer.finalize", json!({"final_answer": "4.", "final_reasoning_trace": "Added."})),
    ]);
}

fn ask(key: &str) -> pb::AskRequest {
    pb::AskRequest {
        question: "What is 2 + 2?".into(),
        retry_limit: 0,
        corpus: String::new(),
        idempotency_key: key.into(),
    }
}

fn research_id(responses: &[pb::AskResponse]) -> String {
    responses
        .iter()
        .find_map(|r| match &r.payload {
            Some(pb::ask_response::Payload::Research(research)) => Some(research.research_id.clone()),
            _ => None,
        })
        .expect("the research's result")
}

#[tokio::test]
async fn research_belongs_to_its_tenant() {
    let s = server().await;
    let (mut acme, mut globex) = two_tenants(&s).await;
    research_script(&s);
    let asked = drain(acme.research.ask(ask("same-key")).await.unwrap().into_inner()).await.unwrap();
    let id = research_id(&asked);
    assert!(!id.contains('/'), "{id}");

    assert_not_found(globex.research.get_research(pb::GetResearchRequest { research_id: id.clone() }).await);
    let listed = globex.research.list_research(pb::ListResearchRequest::default()).await.unwrap().into_inner();
    assert!(listed.research.is_empty());

    // The same idempotency key is globex's own: a new research, not a replay of acme's.
    research_script(&s);
    let theirs = drain(globex.research.ask(ask("same-key")).await.unwrap().into_inner()).await.unwrap();
    assert_eq!(research_id(&theirs), id, "ids derive from the key within each tenant");
    let planner_calls = s.model.requests().iter().filter(|r| r.purpose == "planner.plan").count();
    assert_eq!(planner_calls, 2, "globex's research ran instead of replaying acme's");

    let listed = acme.research.list_research(pb::ListResearchRequest::default()).await.unwrap().into_inner();
    assert_eq!(listed.research.len(), 1);
    assert!(acme.research.get_research(pb::GetResearchRequest { research_id: id }).await.is_ok());
    tokio::time::sleep(Duration::from_millis(1)).await;
    s.stop().await;
}

fn triage_request(message: &str, key: &str) -> pb::TriageTicketRequest {
    pb::TriageTicketRequest {
        customer_id: "CUST-001".into(),
        message: message.into(),
        subject: "Help".into(),
        language: String::new(),
        idempotency_key: key.into(),
    }
}

fn triage_script(s: &TestServer) {
    s.script(&[
        ("translator.translate", json!({"original_language": "en", "is_english": true})),
        (
            "supervisor.classify",
            json!({"reasoning": "scripted", "urgency": "high", "ticket_type": "billing", "requires_escalation": false}),
        ),
        (
            "specialist.billing",
            json!({
                "reasoning": "scripted",
                "recommended_action": "auto_respond",
                "suggested_response": "We will refund the duplicate charge.",
                "relevant_articles": ["kb_001"],
                "extracted_info": {"product_area": "billing", "issue_type": "double_charge", "sentiment": "frustrated"}
            }),
        ),
    ]);
}

fn ticket_id(responses: &[pb::TriageTicketResponse]) -> String {
    responses
        .iter()
        .find_map(|r| match &r.payload {
            Some(pb::triage_ticket_response::Payload::Result(result)) => Some(result.ticket_id.clone()),
            _ => None,
        })
        .expect("the triage's result")
}

#[tokio::test]
async fn tickets_belong_to_their_tenant_even_for_the_same_customer_id() {
    let s = server().await;
    let (mut acme, mut globex) = two_tenants(&s).await;
    triage_script(&s);
    let mine = drain(acme.triage.triage_ticket(triage_request("Charged twice", "k1")).await.unwrap().into_inner())
        .await
        .unwrap();
    let ticket = ticket_id(&mine);

    let get = |ticket: &str| pb::GetTicketRequest { customer_id: "CUST-001".into(), ticket_id: ticket.into() };
    let list = || pb::ListTicketsRequest { customer_id: "CUST-001".into(), ..Default::default() };
    let active = || pb::ListActiveTicketsRequest { customer_id: "CUST-001".into() };
    assert_not_found(globex.triage.get_ticket(get(&ticket)).await);
    assert!(globex.triage.list_tickets(list()).await.unwrap().into_inner().tickets.is_empty());
    assert!(globex.triage.list_active_tickets(active()).await.unwrap().into_inner().tickets.is_empty());
    assert_not_found(
        globex
            .workflows
            .list_llm_calls(pb::ListLlmCallsRequest { thread_id: format!("CUST-001:{ticket}"), ..Default::default() })
            .await,
    );

    // The same key with another message is globex's own request: it runs, and no mismatch with
    // acme's is reported; its ticket is a new one, not matched against acme's.
    triage_script(&s);
    let theirs =
        drain(globex.triage.triage_ticket(triage_request("Where is my parcel?", "k1")).await.unwrap().into_inner())
            .await
            .unwrap();
    let resolution = theirs
        .iter()
        .find_map(|r| match &r.payload {
            Some(pb::triage_ticket_response::Payload::Resolution(resolution)) => Some(resolution.clone()),
            _ => None,
        })
        .unwrap();
    assert!(!resolution.matched_existing);
    assert_ne!(ticket_id(&theirs), ticket);
    assert!(!s.model.requests().iter().any(|r| r.purpose == "ticket_matcher.match"), "nothing of acme's to match");

    let listed = acme.triage.list_tickets(list()).await.unwrap().into_inner().tickets;
    assert_eq!(listed.iter().map(|t| t.ticket_id.as_str()).collect::<Vec<_>>(), [ticket.as_str()]);
    assert!(acme.triage.get_ticket(get(&ticket)).await.is_ok());
    let calls = acme
        .workflows
        .list_llm_calls(pb::ListLlmCallsRequest { thread_id: format!("CUST-001:{ticket}"), ..Default::default() })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(calls.total_calls, 3);
    s.stop().await;
}

fn investigation_script(s: &TestServer) {
    s.script(&[
        ("investigation_agent.brief", json!({"summary": "A change to review."})),
        ("rights_check_agent.explain", json!({"message": "No grant covers it."})),
        (
            "request_for_information_agent.clarification_notice",
            json!({"subject": "About your change", "body": "Please tell us why you made it."}),
        ),
    ]);
}

fn start_investigation(mutation: &str) -> pb::StartInvestigationRequest {
    pb::StartInvestigationRequest {
        mutation: Some(pb::start_investigation_request::Mutation::MutationId(mutation.into())),
        idempotency_key: String::new(),
    }
}

fn investigation_of(responses: &[pb::StartInvestigationResponse]) -> pb::Investigation {
    responses
        .iter()
        .find_map(|r| match r.progress.as_ref().and_then(|p| p.payload.as_ref()) {
            Some(pb::investigation_progress::Payload::Investigation(i)) => Some(i.clone()),
            _ => None,
        })
        .expect("the stream ends with the investigation")
}

#[tokio::test]
async fn investigations_audit_trails_and_pending_actions_belong_to_their_tenant() {
    let s = server().await;
    let (mut acme, mut globex) = two_tenants(&s).await;
    investigation_script(&s);
    let mine = drain(acme.investigations.start_investigation(start_investigation("1002")).await.unwrap().into_inner())
        .await
        .unwrap();
    let inv = investigation_of(&mine);
    assert_eq!(inv.investigation_id, "INV-1002");
    assert_eq!(inv.awaiting.len(), 1, "{inv:?}");
    let action_id = inv.awaiting[0].action_id.clone();

    let id = || "INV-1002".to_owned();
    assert_not_found(
        globex.investigations.get_investigation(pb::GetInvestigationRequest { investigation_id: id() }).await,
    );
    let watched = globex
        .investigations
        .watch_investigation(pb::WatchInvestigationRequest { investigation_id: id(), after_seq: 0 })
        .await;
    match watched {
        Err(status) => assert_eq!(status.code(), Code::NotFound, "{status:?}"),
        Ok(stream) => assert_not_found(drain(stream.into_inner()).await),
    }
    let trail = globex
        .investigations
        .get_audit_trail(pb::GetAuditTrailRequest {
            key: Some(pb::get_audit_trail_request::Key::InvestigationId(id())),
        })
        .await;
    match trail {
        Err(status) => assert_eq!(status.code(), Code::NotFound, "{status:?}"),
        Ok(trail) => assert!(trail.into_inner().entries.is_empty(), "another tenant's audit trail"),
    }
    let pending = globex.investigations.list_pending_actions(pb::ListPendingActionsRequest::default()).await.unwrap();
    assert!(pending.into_inner().actions.is_empty());
    let listed = globex.investigations.list_investigations(pb::ListInvestigationsRequest::default()).await.unwrap();
    assert!(listed.into_inner().investigations.is_empty());
    let reply = pb::RespondRequest {
        investigation_id: id(),
        action_id: action_id.clone(),
        role: pb::ResponderRole::Changer as i32,
        responder_id: inv.awaiting[0].recipient_id.clone(),
        text: "I was told to.".into(),
        decision: 0,
        idempotency_key: String::new(),
    };
    assert_not_found(globex.investigations.respond(reply).await.map(|_| ()));

    // globex investigates the same mutation on its own.
    investigation_script(&s);
    let theirs =
        drain(globex.investigations.start_investigation(start_investigation("1002")).await.unwrap().into_inner())
            .await
            .unwrap();
    assert_eq!(investigation_of(&theirs).investigation_id, "INV-1002");
    for caller in [&mut acme, &mut globex] {
        let listed = caller.investigations.list_investigations(pb::ListInvestigationsRequest::default()).await.unwrap();
        assert_eq!(listed.into_inner().investigations.len(), 1);
        let pending =
            caller.investigations.list_pending_actions(pb::ListPendingActionsRequest::default()).await.unwrap();
        let pending = pending.into_inner().actions;
        assert_eq!(pending.len(), 1);
        assert_eq!(pending[0].investigation_id, "INV-1002");
        let trail = caller
            .investigations
            .get_audit_trail(pb::GetAuditTrailRequest {
                key: Some(pb::get_audit_trail_request::Key::InvestigationId(id())),
            })
            .await
            .unwrap()
            .into_inner()
            .entries;
        assert!(!trail.is_empty());
        assert!(trail.iter().all(|e| e.investigation_id == "INV-1002"), "{trail:?}");
    }
    s.stop().await;
}

/// Lists reflection's services through `channel` with `key`.
async fn reflect(channel: Channel, key: Option<&str>) -> Result<Vec<String>, Status> {
    use tonic_reflection::pb::v1::{
        server_reflection_client::ServerReflectionClient, server_reflection_request::MessageRequest,
        server_reflection_response::MessageResponse, ServerReflectionRequest,
    };
    let bearer = Bearer(key.map(|k| format!("Bearer {k}").parse().unwrap()));
    let mut reflection = ServerReflectionClient::new(InterceptedService::new(channel, bearer));
    let request = ServerReflectionRequest {
        host: String::new(),
        message_request: Some(MessageRequest::ListServices(String::new())),
    };
    let mut responses = reflection.server_reflection_info(futures::stream::iter([request])).await?.into_inner();
    let response = responses.message().await?.expect("a reflection response");
    let Some(MessageResponse::ListServicesResponse(list)) = response.message_response else { panic!("{response:?}") };
    Ok(list.service.into_iter().map(|s| s.name).collect())
}

#[tokio::test]
async fn reflection_needs_a_key_unless_opened() {
    let s = server().await;
    let key = create_key(&s, "acme", "workflow:read");
    let channel = Channel::from_shared(format!("http://{}", s.server().addr)).unwrap().connect().await.unwrap();
    let refused = reflect(channel.clone(), None).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    // Any valid key may reflect: the contract is no tenant's data (grpcurl -H works).
    let names = reflect(channel, Some(&key)).await.unwrap();
    assert!(names.iter().any(|n| n == "frontdesk.v1.TriageService"), "{names:?}");
    s.stop().await;

    let open = TestServer::start_with(Options {
        configure: |config| {
            config.auth.mode = AuthMode::Keys;
            config.auth.open_services.push("grpc.reflection.v1.ServerReflection".into());
        },
        ..Options::default()
    })
    .await;
    let channel = Channel::from_shared(format!("http://{}", open.server().addr)).unwrap().connect().await.unwrap();
    assert!(reflect(channel.clone(), None).await.is_ok());
    // An open service does not judge keys: a wrong one is served as no key is.
    assert!(reflect(channel.clone(), Some("not-a-key")).await.is_ok());
    let mut anonymous = WorkflowServiceClient::new(channel);
    let refused = anonymous.list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated, "opening reflection opens nothing else");
    open.stop().await;
}

/// An in-process server listening on every interface (as in a container), with `auth.mode`.
async fn on_every_interface(mode: AuthMode) -> (frontdesk_server::app::RunningServer, common::TestStore) {
    use frontdesk_server::{
        app::{App, Overrides},
        config::Config,
    };
    let store = common::test_store().await;
    let mut config = Config::default();
    config.database.url = store.url.clone();
    config.shutdown_grace_secs = 5;
    config.auth.mode = mode;
    let model = std::sync::Arc::new(frontdesk_llm::ScriptedModel::new("scripted-test"));
    let app = App::build(config, Overrides { model: Some(model), ..Overrides::default() }).await.unwrap();
    let listener = tokio::net::TcpListener::bind("0.0.0.0:0").await.unwrap();
    (app.serve_on(listener).await.unwrap(), store)
}

#[tokio::test]
async fn keys_are_required_by_default_off_loopback_and_none_runs_open() {
    let (server, _dir) = on_every_interface(AuthMode::Auto).await;
    let channel =
        Channel::from_shared(format!("http://127.0.0.1:{}", server.addr.port())).unwrap().connect().await.unwrap();
    let refused = WorkflowServiceClient::new(channel).list_workflows(pb::ListWorkflowsRequest {}).await.unwrap_err();
    assert_eq!(refused.code(), Code::Unauthenticated);
    server.shutdown().await.unwrap();

    let (server, _dir) = on_every_interface(AuthMode::None).await;
    let channel =
        Channel::from_shared(format!("http://127.0.0.1:{}", server.addr.port())).unwrap().connect().await.unwrap();
    let listed = WorkflowServiceClient::new(channel).list_workflows(pb::ListWorkflowsRequest {}).await;
    assert!(listed.is_ok(), "auth.mode = \"none\" serves without keys: {listed:?}");
    server.shutdown().await.unwrap();
}
