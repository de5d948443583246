//! The investigation workflow (docs/workflows/investigation.md) end to end through real servers
//! and the gRPC client, with a scripted model (a test double; each test queues its replies) and
//! the shipped sample HR data: every path of the sequence (authorised; valid claim and manager
//! approval; manager denial; invalid claim; agent failures to manual intervention), replies on a
//! second replica and after a restart, racing replies, and the audit trail's reconstruction.

mod common;

use std::{sync::Arc, time::Duration};

use frontdesk_api::v1::{
    self as pb, investigation_progress::Payload, investigation_service_client::InvestigationServiceClient,
    InvestigationStatus as S,
};
use frontdesk_llm::{ScriptedFailure, ScriptedModel, ScriptedReply};
use frontdesk_server::{
    app::{App, Overrides, RunningServer},
    config::Config,
    workflows::{investigation, Parts},
};
use futures::StreamExt;
use serde_json::json;
use tonic::{transport::Channel, Code};

/// Servers sharing one database, as replicas do; each has its own scripted model.
struct Cluster {
    store: common::TestStore,
}

struct Replica {
    server: Option<RunningServer>,
    client: InvestigationServiceClient<Channel>,
    model: Arc<ScriptedModel>,
}

impl Cluster {
    async fn new() -> Self {
        Self { store: common::test_store().await }
    }

    async fn replica(&self) -> Replica {
        let mut config = Config::default();
        config.database.url = self.store.url.clone();
        config.shutdown_grace_secs = 5;
        // The agents' retries are what these tests exercise; the model client's own retries
        // would multiply the scripted failures each attempt consumes.
        config.model.max_attempts = 1;
        let mut settings = config.workflows.settings::<investigation::Workflow>().unwrap();
        settings.retry_backoff_ms = 10;
        config.workflows.set::<investigation::Workflow>(&settings).unwrap();
        let model = Arc::new(ScriptedModel::new("scripted-test"));
        let overrides = Overrides { model: Some(model.clone()), parts: Parts::default() };
        let app = App::build(config, overrides).await.expect("server builds");
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let server = app.serve_on(listener).await.expect("server starts");
        let channel = Channel::from_shared(format!("http://{}", server.addr)).unwrap().connect().await.unwrap();
        Replica { server: Some(server), client: InvestigationServiceClient::new(channel), model }
    }
}

/// What a streaming call sent.
#[derive(Default, Debug)]
struct Streamed {
    events: Vec<pb::RunEvent>,
    messages: Vec<pb::AgentMessage>,
    changes: Vec<pb::StatusChange>,
    investigation: Option<pb::Investigation>,
}

impl Streamed {
    fn investigation(&self) -> &pb::Investigation {
        self.investigation.as_ref().expect("the stream ends with the investigation")
    }

    fn actions(&self) -> Vec<(i32, i32)> {
        self.messages.iter().map(|m| (m.action, m.status)).collect()
    }

    fn tools(&self) -> Vec<String> {
        self.events
            .iter()
            .filter_map(|e| match &e.kind {
                Some(pb::run_event::Kind::ToolCalled(t)) => Some(t.name.clone()),
                _ => None,
            })
            .collect()
    }
}

async fn collect(
    mut stream: impl futures::Stream<Item = Result<pb::InvestigationProgress, tonic::Status>> + Unpin,
) -> Result<Streamed, tonic::Status> {
    let mut out = Streamed::default();
    while let Some(item) = stream.next().await {
        match item?.payload.expect("a payload") {
            Payload::Event(e) => out.events.push(e),
            Payload::Message(m) => out.messages.push(m),
            Payload::StatusChange(c) => out.changes.push(c),
            Payload::Investigation(i) => out.investigation = Some(i),
        }
    }
    Ok(out)
}

impl Replica {
    fn script(&self, replies: &[(&str, serde_json::Value)]) {
        for (purpose, reply) in replies {
            self.model.push_reply(ScriptedReply::json(reply).for_purpose(*purpose));
        }
    }

    async fn start(&self, mutation_id: &str) -> Result<Streamed, tonic::Status> {
        self.start_with(mutation_id, "").await
    }

    async fn start_with(&self, mutation_id: &str, key: &str) -> Result<Streamed, tonic::Status> {
        let request = pb::StartInvestigationRequest {
            mutation: Some(pb::start_investigation_request::Mutation::MutationId(mutation_id.into())),
            idempotency_key: key.into(),
        };
        let stream = self.client.clone().start_investigation(request).await?.into_inner();
        collect(stream.map(|r| r.map(|r| r.progress.unwrap()))).await
    }

    /// Starts the investigation of `mutation_id` and cancels its run once the model has been
    /// asked for `purpose` (a reply scripted slow keeps the run there); the start ends CANCELLED.
    async fn start_cancelled_at(&self, mutation_id: &str, key: &str, purpose: &str) {
        let request = pb::StartInvestigationRequest {
            mutation: Some(pb::start_investigation_request::Mutation::MutationId(mutation_id.into())),
            idempotency_key: key.into(),
        };
        let mut stream = self.client.clone().start_investigation(request).await.unwrap().into_inner();
        let first = stream.next().await.unwrap().unwrap();
        let Some(Payload::Event(event)) = first.progress.unwrap().payload else { panic!("an event first") };
        while !self.model.requests().iter().any(|q| q.purpose == purpose) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let addr = self.server.as_ref().unwrap().addr;
        let channel = Channel::from_shared(format!("http://{addr}")).unwrap().connect().await.unwrap();
        let mut workflows = pb::workflow_service_client::WorkflowServiceClient::new(channel);
        let cancel = pb::CancelRunRequest { run_id: event.run_id.clone() };
        assert!(workflows.cancel_run(cancel).await.unwrap().into_inner().cancelled);
        let mut last = None;
        while let Some(item) = stream.next().await {
            last = Some(item);
        }
        let Some(Err(status)) = last else { panic!("the start ends with an error: {last:?}") };
        assert_eq!(status.code(), Code::Cancelled, "{status:?}");
    }

    async fn respond(&self, request: pb::RespondRequest) -> Result<Streamed, tonic::Status> {
        let stream = self.client.clone().respond(request).await?.into_inner();
        collect(stream.map(|r| r.map(|r| r.progress.unwrap()))).await
    }

    async fn get(&self, id: &str) -> Result<pb::Investigation, tonic::Status> {
        let request = pb::GetInvestigationRequest { investigation_id: id.into() };
        Ok(self.client.clone().get_investigation(request).await?.into_inner().investigation.unwrap())
    }

    async fn trail(&self, id: &str) -> Vec<pb::AuditEntry> {
        let key = Some(pb::get_audit_trail_request::Key::InvestigationId(id.into()));
        self.client.clone().get_audit_trail(pb::GetAuditTrailRequest { key }).await.unwrap().into_inner().entries
    }

    async fn pending(&self, recipient: &str) -> Vec<pb::PendingAction> {
        let request = pb::ListPendingActionsRequest { recipient_id: recipient.into(), ..Default::default() };
        let response = self.client.clone().list_pending_actions(request).await.unwrap().into_inner();
        assert!(response.next_page_token.is_empty(), "one page");
        response.actions
    }

    async fn stop(mut self) {
        if let Some(server) = self.server.take() {
            server.shutdown().await.unwrap();
        }
    }
}

fn changer_reply(id: &str, changer: &str, text: &str) -> pb::RespondRequest {
    pb::RespondRequest {
        investigation_id: id.into(),
        action_id: format!("{id}-changer"),
        role: pb::ResponderRole::Changer as i32,
        responder_id: changer.into(),
        text: text.into(),
        decision: 0,
        idempotency_key: String::new(),
    }
}

fn manager_reply(id: &str, manager: &str, decision: pb::ManagerDecision) -> pb::RespondRequest {
    pb::RespondRequest {
        investigation_id: id.into(),
        action_id: format!("{id}-manager"),
        role: pb::ResponderRole::Manager as i32,
        responder_id: manager.into(),
        text: "checked with the team".into(),
        decision: decision as i32,
        idempotency_key: String::new(),
    }
}

const BRIEF: &str = "investigation_agent.brief";
const EXPLAIN: &str = "rights_check_agent.explain";
const CLARIFY: &str = "request_for_information_agent.clarification_notice";
const CLAIM: &str = "request_for_information_agent.extract_claim";
const MANAGER: &str = "request_for_information_agent.manager_notice";
const REPORT: &str = "advisory_agent.report";

fn brief() -> (&'static str, serde_json::Value) {
    (BRIEF, json!({"summary": "A change to review."}))
}

fn explain() -> (&'static str, serde_json::Value) {
    (EXPLAIN, json!({"message": "The grants found decide it."}))
}

fn notice(purpose: &'static str) -> (&'static str, serde_json::Value) {
    (purpose, json!({"subject": "About your change", "body": "Please tell us why you made it."}))
}

fn report() -> (&'static str, serde_json::Value) {
    (REPORT, json!({"summary": "Summary of the investigation.", "details": "Details of the investigation."}))
}

fn claim(user: Option<&str>, absence: &str) -> (&'static str, serde_json::Value) {
    (CLAIM, json!({"covered_user_id": user, "absence": absence, "summary": "the user's claim"}))
}

fn statuses(investigation: &pb::Investigation) -> Vec<S> {
    investigation.status_history.iter().map(|c| S::try_from(c.to).unwrap()).collect()
}

fn recommendation(investigation: &pb::Investigation) -> pb::Recommendation {
    pb::Recommendation::try_from(investigation.report.as_ref().expect("a report").recommendation).unwrap()
}

fn code_and_reason(status: &tonic::Status) -> (Code, String) {
    use tonic_types::StatusExt;
    let reason = status.get_error_details().error_info().map(|i| i.reason.clone()).unwrap_or_default();
    (status.code(), reason)
}

use pb::{AgentAction as A, AgentMessageStatus as M};

#[tokio::test]
async fn an_authorised_change_is_approved_and_reported() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief()]);
    // The rights-check agent is offered lookup_data by function calling and uses it once.
    let lookup = json!({"table": "role_authorisations", "key": "r_hr_clerk"});
    r.model.push_reply(ScriptedReply::tool_call("lookup_data", lookup).for_purpose(EXPLAIN));
    r.script(&[explain(), report()]);
    let run = r.start("1001").await.unwrap();
    let inv = run.investigation();
    assert_eq!(inv.investigation_id, "INV-1001");
    assert_eq!(inv.status(), S::AdvisoryReportGenerated);
    assert!(inv.finished);
    assert_eq!(statuses(inv), [S::InvestigationStarted, S::Approved, S::AdvisoryReportGenerated]);
    assert_eq!(recommendation(inv), pb::Recommendation::Accept);
    assert_eq!(inv.report.as_ref().unwrap().report_id, "RPT-1001");
    assert!(inv.rights_check.as_ref().unwrap().authorized);
    assert_eq!(inv.mutation.as_ref().unwrap().change_investigation(), S::AdvisoryReportGenerated);
    assert_eq!(
        run.actions(),
        [
            (A::CheckRights as i32, M::Pending as i32),
            (A::CheckRightsResult as i32, M::Success as i32),
            (A::GenerateAdvisoryReport as i32, M::Pending as i32),
            (A::AdvisoryReportResult as i32, M::Success as i32),
        ]
    );
    assert_eq!(run.changes.len(), 3, "every status change is streamed");
    assert_eq!(run.tools(), ["lookup_data", "lookup_data", "check_authorization", "lookup_data", "generate_report"]);
    let explains: Vec<_> = r.model.requests().into_iter().filter(|q| q.purpose == EXPLAIN).collect();
    assert_eq!(explains.len(), 2);
    assert_eq!(explains[0].tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(), ["lookup_data"]);
    let result = explains[1].messages.last().unwrap();
    assert!(result.content.contains("HRPortal") && result.content.contains("Write"), "the tool's rows: {result:?}");
    let trail = r.trail("INV-1001").await;
    assert!(trail.iter().any(|e| matches!(&e.entry, Some(pb::audit_entry::Entry::Tool(t))
        if t.name == "lookup_data" && t.arguments_json.contains("r_hr_clerk"))));
    assert_eq!(r.model.remaining(), 0);
    r.stop().await;
}

#[tokio::test]
async fn a_valid_claim_goes_to_the_manager_who_approves() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    let run = r.start("1002").await.unwrap();
    let inv = run.investigation();
    assert_eq!(inv.status(), S::AwaitingUserResponse);
    assert!(!inv.finished);
    assert!(!inv.rights_check.as_ref().unwrap().authorized);
    let [action] = &inv.awaiting[..] else { panic!("one action awaits: {:?}", inv.awaiting) };
    assert_eq!((action.action_id.as_str(), action.recipient_id.as_str()), ("INV-1002-changer", "u003"));
    assert_eq!(action.recipient_role(), pb::ResponderRole::Changer);
    assert!(run.events.iter().any(|e| matches!(&e.kind, Some(pb::run_event::Kind::RunInterrupted(i))
        if i.pending_interrupt_ids == ["INV-1002-changer"])));
    assert_eq!(r.pending("u003").await.len(), 1);
    assert!(r.pending("u001").await.is_empty());

    r.script(&[claim(Some("u006"), "vacation"), notice(MANAGER)]);
    let run = r
        .respond(changer_reply("INV-1002", "u003", "I stood in for Frank (u006), who was on vacation."))
        .await
        .unwrap();
    let inv = run.investigation();
    assert_eq!(inv.status(), S::AwaitingManagerResponse);
    assert!(inv.claim.as_ref().unwrap().valid, "{:?}", inv.claim);
    assert_eq!(inv.awaiting[0].recipient_id, "u001", "the changer's manager is asked");
    assert!(r.pending("u003").await.is_empty(), "the changer's action is answered");

    r.script(&[report()]);
    let run = r.respond(manager_reply("INV-1002", "u001", pb::ManagerDecision::Approve)).await.unwrap();
    let inv = run.investigation();
    assert_eq!(
        statuses(inv),
        [
            S::InvestigationStarted,
            S::ClarificationRequested,
            S::AwaitingUserResponse,
            S::ManagerVerificationRequested,
            S::AwaitingManagerResponse,
            S::Approved,
            S::AdvisoryReportGenerated
        ]
    );
    assert_eq!(recommendation(inv), pb::Recommendation::Accept);
    assert_eq!(inv.manager.as_ref().unwrap().decision(), pb::ManagerDecision::Approve);

    // The audit trail alone reconstructs the investigation: its status history, and every
    // message is of the matrix, each result sharing its request's correlation id.
    let trail = r.trail("INV-1002").await;
    let rebuilt: Vec<(i32, i32)> = trail
        .iter()
        .filter_map(|e| match &e.entry {
            Some(pb::audit_entry::Entry::StatusChange(c)) => Some((c.from, c.to)),
            _ => None,
        })
        .collect();
    let history: Vec<(i32, i32)> = inv.status_history.iter().map(|c| (c.from, c.to)).collect();
    assert_eq!(rebuilt, history);
    assert_eq!(trail.iter().map(|e| e.seq).collect::<Vec<_>>(), (1..=trail.len() as u32).collect::<Vec<_>>());
    let messages: Vec<&pb::AgentMessage> = trail
        .iter()
        .filter_map(|e| match &e.entry {
            Some(pb::audit_entry::Entry::Message(m)) => Some(m),
            _ => None,
        })
        .collect();
    let matrix = [
        (A::CheckRights, pb::Agent::Investigation, pb::Agent::RightsCheck),
        (A::RequestClarification, pb::Agent::Investigation, pb::Agent::RequestForInformation),
        (A::RequestManagerValidation, pb::Agent::Investigation, pb::Agent::RequestForInformation),
        (A::GenerateAdvisoryReport, pb::Agent::Investigation, pb::Agent::Advisory),
        (A::CheckRightsResult, pb::Agent::RightsCheck, pb::Agent::Investigation),
        (A::ClarificationResponse, pb::Agent::RequestForInformation, pb::Agent::Investigation),
        (A::ManagerValidationResponse, pb::Agent::RequestForInformation, pb::Agent::Investigation),
        (A::AdvisoryReportResult, pb::Agent::Advisory, pb::Agent::Investigation),
    ];
    for m in &messages {
        let row = matrix.iter().find(|(a, _, _)| *a as i32 == m.action).expect("an action of the matrix");
        assert_eq!((m.sender, m.receiver), (row.1 as i32, row.2 as i32), "{m:?}");
    }
    assert_eq!(messages.len(), 8, "four requests, four results");
    for pair in messages.chunks(2) {
        assert_eq!(pair[0].correlation_id, pair[1].correlation_id);
        assert_eq!(pair[0].status(), M::Pending);
        assert_eq!(pair[1].status(), M::Success);
    }
    let key = Some(pb::get_audit_trail_request::Key::CorrelationId(messages[2].correlation_id.clone()));
    let exchange =
        r.client.clone().get_audit_trail(pb::GetAuditTrailRequest { key }).await.unwrap().into_inner().entries;
    assert!(exchange
        .iter()
        .any(|e| matches!(&e.entry, Some(pb::audit_entry::Entry::Reply(reply)) if reply.responder_id == "u003")));
    assert!(exchange.iter().any(|e| matches!(&e.entry, Some(pb::audit_entry::Entry::Notification(_)))));
    r.stop().await;
}

#[tokio::test]
async fn the_manager_denies() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1002").await.unwrap();
    r.script(&[claim(Some("u006"), "vacation"), notice(MANAGER)]);
    r.respond(changer_reply("INV-1002", "u003", "Covering for u006 on vacation")).await.unwrap();
    r.script(&[report()]);
    let run = r.respond(manager_reply("INV-1002", "u001", pb::ManagerDecision::Deny)).await.unwrap();
    let inv = run.investigation();
    assert_eq!(statuses(inv)[5..], [S::RejectedManagerDenied, S::AdvisoryReportGenerated]);
    assert_eq!(recommendation(inv), pb::Recommendation::RejectInvestigate);
    r.stop().await;
}

/// The changer's reply is kept even when checking the claim fails for good: the investigation
/// escalates with the reply in its state and trail, and nothing awaits the changer any more.
#[tokio::test]
async fn a_claim_check_that_fails_for_good_escalates_with_the_reply_kept() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1003").await.unwrap();
    // Unreadable twice (the reply and its repair): invalid model output, which is not retried.
    r.script(&[(CLAIM, json!({"nonsense": true})), (CLAIM, json!({"nonsense": true})), report()]);
    let run = r.respond(changer_reply("INV-1003", "u004", "Bob was sick, so I did it for him.")).await.unwrap();
    let inv = run.investigation();
    assert_eq!(
        statuses(inv)[2..],
        [S::AwaitingUserResponse, S::ManualInterventionRequired, S::AdvisoryReportGenerated],
        "{:?}",
        statuses(inv)
    );
    assert_eq!(recommendation(inv), pb::Recommendation::ManualIntervention);
    assert!(inv.awaiting.is_empty(), "the changer has answered: {:?}", inv.awaiting);
    // The graph's failure route took it, handed the reply the failed agent was resumed with.
    assert!(run.events.iter().any(|e| matches!(&e.kind,
        Some(pb::run_event::Kind::NodeFailed(f)) if f.fallback_node == "escalate" && e.node == "request_for_information_agent")));
    let error = run.messages.iter().find(|m| m.status() == M::Error).expect("the request's error answer");
    assert_eq!(error.action(), A::ClarificationResponse);
    let trail = r.trail("INV-1003").await;
    assert!(trail
        .iter()
        .any(|e| matches!(&e.entry, Some(pb::audit_entry::Entry::Reply(reply)) if reply.responder_id == "u004")));
    assert_eq!(r.model.remaining(), 0);

    // Both unreadable replies were billed: the failed call is streamed with what it spent, and
    // the run's usage counts it.
    let calls: Vec<&pb::LlmCallFinished> = run
        .events
        .iter()
        .filter_map(|e| match &e.kind {
            Some(pb::run_event::Kind::LlmCallFinished(call)) => Some(call),
            _ => None,
        })
        .collect();
    let failed: Vec<_> = calls.iter().filter(|c| !c.error.is_empty()).collect();
    assert_eq!(failed.len(), 1, "{calls:?}");
    assert_eq!(failed[0].purpose, CLAIM);
    assert!(failed[0].error.contains("failed validation after 2 attempts"), "{}", failed[0].error);
    assert_eq!(failed[0].attempts, 2, "the reply and its repair");
    let spent = failed[0].usage.unwrap();
    assert!(spent.prompt_tokens > 0 && spent.completion_tokens > 0, "{spent:?}");
    let finished = run.events.iter().find_map(|e| match &e.kind {
        Some(pb::run_event::Kind::RunFinished(f)) => f.usage,
        _ => None,
    });
    let total = |pick: fn(&pb::Usage) -> u64| calls.iter().map(|c| pick(&c.usage.unwrap())).sum::<u64>();
    let finished = finished.expect("the run finished");
    assert_eq!(
        (finished.prompt_tokens, finished.completion_tokens),
        (total(|u| u.prompt_tokens), total(|u| u.completion_tokens)),
        "the run's usage is every call's, the failed one's included"
    );
    r.stop().await;
}

#[tokio::test]
async fn an_invalid_claim_is_rejected() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1003").await.unwrap();
    // u002's sick leave ended weeks before the change.
    r.script(&[claim(Some("u002"), "sick_leave"), report()]);
    let run = r.respond(changer_reply("INV-1003", "u004", "Bob was sick, so I did it for him.")).await.unwrap();
    let inv = run.investigation();
    let claim = inv.claim.as_ref().unwrap();
    assert!(!claim.valid);
    assert!(claim.explanation.contains("no sick_leave of u002 covers 2025-11-12"), "{}", claim.explanation);
    assert_eq!(
        statuses(inv),
        [
            S::InvestigationStarted,
            S::ClarificationRequested,
            S::AwaitingUserResponse,
            S::RejectedInvalidClaim,
            S::AdvisoryReportGenerated
        ]
    );
    assert_eq!(recommendation(inv), pb::Recommendation::RejectInvestigate);
    assert!(run.tools().contains(&"lookup_data".to_owned()), "the claim is checked against the sick-leave records");
    r.stop().await;
}

/// The orchestrator's brief, then the rights check unavailable through all its three attempts.
fn rights_check_keeps_failing(r: &Replica) {
    r.script(&[brief()]);
    for _ in 0..3 {
        r.model.push_reply(ScriptedReply::failure(ScriptedFailure::Server { status: 503 }).for_purpose(EXPLAIN));
    }
}

#[tokio::test]
async fn an_agent_that_keeps_failing_escalates_to_manual_intervention() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    rights_check_keeps_failing(&r);
    r.script(&[report()]);
    let run = r.start("1001").await.unwrap();
    let inv = run.investigation();
    assert_eq!(statuses(inv), [S::InvestigationStarted, S::ManualInterventionRequired, S::AdvisoryReportGenerated]);
    assert_eq!(recommendation(inv), pb::Recommendation::ManualIntervention);
    let retries = run.events.iter().filter(|e| matches!(e.kind, Some(pb::run_event::Kind::NodeRetrying(_)))).count();
    assert_eq!(retries, 2, "three attempts in all");
    assert!(run
        .events
        .iter()
        .any(|e| matches!(&e.kind, Some(pb::run_event::Kind::NodeFailed(f)) if f.fallback_node == "escalate")));
    // The unanswered request got its answer: an error message.
    let error = run.messages.iter().find(|m| m.status() == M::Error).expect("an error message");
    assert_eq!(error.action(), A::CheckRightsResult);
    assert_eq!(error.error.as_ref().unwrap().attempts, 3);
    r.stop().await;
}

/// Escalated, the report is written even when the model fails too; lookups the advisory agent
/// made before the model failed stay in the trail, beside the failure.
#[tokio::test]
async fn a_fallback_report_keeps_the_lookups_made_before_the_model_failed() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    rights_check_keeps_failing(&r);
    let lookup = json!({"table": "role_authorisations", "key": "r_hr_clerk"});
    r.model.push_reply(ScriptedReply::tool_call("lookup_data", lookup).for_purpose(REPORT));
    r.model.push_reply(ScriptedReply::failure(ScriptedFailure::Server { status: 503 }).for_purpose(REPORT));
    let run = r.start("1001").await.unwrap();
    let inv = run.investigation();
    assert_eq!(statuses(inv), [S::InvestigationStarted, S::ManualInterventionRequired, S::AdvisoryReportGenerated]);
    assert!(inv.report.as_ref().unwrap().summary.contains("written without the model"));
    let trail = r.trail("INV-1001").await;
    let advisory: Vec<&str> = trail
        .iter()
        .filter(|e| e.actor == "AdvisoryAgent")
        .filter_map(|e| match &e.entry {
            Some(pb::audit_entry::Entry::Tool(t)) => Some(t.name.as_str()),
            Some(pb::audit_entry::Entry::Error(_)) => Some("error"),
            _ => None,
        })
        .collect();
    assert_eq!(advisory, ["lookup_data", "error", "generate_report"], "the lookup, the failure, the report");
    assert_eq!(r.model.remaining(), 0);
    r.stop().await;
}

#[tokio::test]
async fn replies_are_checked_against_the_action_and_accepted_once() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1002").await.unwrap();

    let wrong_role = pb::RespondRequest {
        role: pb::ResponderRole::Manager as i32,
        decision: 1,
        ..changer_reply("INV-1002", "u003", "x")
    };
    assert_eq!(
        code_and_reason(&r.respond(wrong_role).await.unwrap_err()),
        (Code::PermissionDenied, "WRONG_RESPONDER".into())
    );
    let wrong_person = changer_reply("INV-1002", "u001", "it was me");
    assert_eq!(
        code_and_reason(&r.respond(wrong_person).await.unwrap_err()),
        (Code::PermissionDenied, "WRONG_RESPONDER".into())
    );
    let unknown_action =
        pb::RespondRequest { action_id: "INV-1002-nobody".into(), ..changer_reply("INV-1002", "u003", "x") };
    assert_eq!(
        code_and_reason(&r.respond(unknown_action).await.unwrap_err()),
        (Code::NotFound, "INTERRUPT_NOT_FOUND".into())
    );
    let unknown = changer_reply("INV-9999", "u003", "x");
    assert_eq!(r.respond(unknown).await.unwrap_err().code(), Code::NotFound);
    let empty = changer_reply("INV-1002", "u003", " ");
    assert_eq!(r.respond(empty).await.unwrap_err().code(), Code::InvalidArgument);
    let nul = changer_reply("INV-1002", "u003", "on leave\0");
    assert_eq!(r.respond(nul).await.unwrap_err().code(), Code::InvalidArgument);
    // Counted in characters, and a message's length, as on the other workflows.
    let long = changer_reply("INV-1002", "u003", &"é".repeat(4_001));
    assert_eq!(r.respond(long).await.unwrap_err().code(), Code::InvalidArgument);
    let long_key = pb::RespondRequest { idempotency_key: "k".repeat(129), ..changer_reply("INV-1002", "u003", "x") };
    assert_eq!(r.respond(long_key).await.unwrap_err().code(), Code::InvalidArgument);
    assert_eq!(r.get("INV-9999").await.unwrap_err().code(), Code::NotFound);
    assert_eq!(code_and_reason(&r.start("9999").await.unwrap_err()), (Code::NotFound, "NOT_FOUND".into()));
    assert_eq!(r.start("1002").await.unwrap_err().code(), Code::AlreadyExists);

    // Two replies race for the action: exactly one is accepted, the other finds it answered.
    r.script(&[claim(None, "none"), report()]);
    let reply = changer_reply("INV-1002", "u003", "I just did it.");
    let (a, b) = tokio::join!(r.respond(reply.clone()), r.respond(reply));
    let (won, lost) = match (a, b) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one reply must win: {other:?}"),
    };
    assert_eq!(won.investigation().status(), S::AdvisoryReportGenerated);
    assert_eq!(code_and_reason(&lost), (Code::FailedPrecondition, "INTERRUPT_ANSWERED".into()));
    let again = changer_reply("INV-1002", "u003", "once more");
    assert_eq!(
        code_and_reason(&r.respond(again).await.unwrap_err()),
        (Code::FailedPrecondition, "INTERRUPT_ANSWERED".into())
    );
    assert_eq!(r.model.remaining(), 0);
    r.stop().await;
}

#[tokio::test]
async fn a_second_replica_answers_and_a_restart_loses_nothing() {
    let cluster = Cluster::new().await;
    let a = cluster.replica().await;
    a.script(&[brief(), explain(), notice(CLARIFY)]);
    a.start("1002").await.unwrap();
    // Replica b starts while a is up: a's runs are covered by its lease, so b leaves them alone.
    let b = cluster.replica().await;
    // Replica b, which never saw the investigation, takes the changer's reply.
    b.script(&[claim(Some("u006"), "vacation"), notice(MANAGER)]);
    let run = b.respond(changer_reply("INV-1002", "u003", "Covering for u006 on vacation")).await.unwrap();
    assert_eq!(run.investigation().status(), S::AwaitingManagerResponse);
    a.stop().await;
    b.stop().await;

    // After a restart the investigation waits exactly where it stopped.
    let c = cluster.replica().await;
    let inv = c.get("INV-1002").await.unwrap();
    assert_eq!(inv.status(), S::AwaitingManagerResponse);
    assert_eq!(c.pending("u001").await.len(), 1);
    // A watcher sees the rest as it is written, from where it left off, and its stream ends
    // with the report.
    let seen = c.trail("INV-1002").await.len() as u32;
    let request = pb::WatchInvestigationRequest { investigation_id: "INV-1002".into(), after_seq: seen };
    let mut watch = c.client.clone().watch_investigation(request).await.unwrap().into_inner();
    c.script(&[report()]);
    let run = c.respond(manager_reply("INV-1002", "u001", pb::ManagerDecision::Approve)).await.unwrap();
    assert_eq!(run.investigation().status(), S::AdvisoryReportGenerated);
    let mut watched = Vec::new();
    while let Some(entry) = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.expect("the watch ends") {
        watched.push(entry.unwrap().entry.unwrap());
    }
    assert_eq!(watched.first().unwrap().seq, seen + 1);
    assert!(
        matches!(&watched.last().unwrap().entry, Some(pb::audit_entry::Entry::StatusChange(c)) if c.to() == S::AdvisoryReportGenerated)
    );
    c.stop().await;
}

#[tokio::test]
async fn a_watch_ends_with_shutting_down_when_its_server_stops() {
    let cluster = Cluster::new().await;
    let a = cluster.replica().await;
    a.script(&[brief(), explain(), notice(CLARIFY)]);
    a.start("1002").await.unwrap();
    let written = a.trail("INV-1002").await.len();
    let request = pb::WatchInvestigationRequest { investigation_id: "INV-1002".into(), after_seq: 0 };
    let mut watch = a.client.clone().watch_investigation(request).await.unwrap().into_inner();
    for _ in 0..written {
        watch.next().await.expect("the trail so far").unwrap();
    }
    // The investigation waits for the changer: the watch would go on until the connection died.
    let stopping = tokio::spawn(a.stop());
    let end = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.expect("the watch ends");
    let status = end.expect("with a status").expect_err("an error: the investigation is not over");
    assert_eq!(code_and_reason(&status), (Code::Unavailable, "SHUTTING_DOWN".to_owned()), "{status:?}");
    stopping.await.unwrap();
}

#[tokio::test]
async fn listing_paging_idempotency_and_inline_mutations() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), report()]);
    let first = r.start_with("1001", "key-1").await.unwrap();
    // A retry with the key replays the outcome without running again (no replies are queued).
    let again = r.start_with("1001", "key-1").await.unwrap();
    assert_eq!(again.investigation().status(), first.investigation().status());
    assert!(again.messages.is_empty());

    let inline = common::inline_mutation("2001");
    r.script(&[brief(), explain(), report()]);
    let request = pb::StartInvestigationRequest {
        mutation: Some(pb::start_investigation_request::Mutation::InlineMutation(inline.clone())),
        idempotency_key: String::new(),
    };
    let stream = r.client.clone().start_investigation(request).await.unwrap().into_inner();
    let run = collect(stream.map(|r| r.map(|r| r.progress.unwrap()))).await.unwrap();
    let mutation = run.investigation().mutation.clone().unwrap();
    assert_eq!(mutation.changed_at, inline.changed_at);
    assert_eq!(recommendation(run.investigation()), pb::Recommendation::Accept);
    let clash = pb::HrMutation { description: "something else".into(), ..inline };
    let request = pb::StartInvestigationRequest {
        mutation: Some(pb::start_investigation_request::Mutation::InlineMutation(clash)),
        idempotency_key: String::new(),
    };
    assert_eq!(r.client.clone().start_investigation(request).await.unwrap_err().code(), Code::AlreadyExists);

    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1003").await.unwrap();
    let list = |status: S, page_size: i32, page_token: String| {
        let mut client = r.client.clone();
        async move {
            let request = pb::ListInvestigationsRequest { status: status as i32, page_size, page_token };
            client.list_investigations(request).await.unwrap().into_inner()
        }
    };
    let page = list(S::Unspecified, 2, String::new()).await;
    assert_eq!(page.investigations.len(), 2);
    let rest = list(S::Unspecified, 2, page.next_page_token.clone()).await;
    assert_eq!(rest.investigations.len(), 1);
    assert!(rest.next_page_token.is_empty());
    let waiting = list(S::AwaitingUserResponse, 0, String::new()).await;
    assert_eq!(waiting.investigations.iter().map(|i| i.investigation_id.as_str()).collect::<Vec<_>>(), ["INV-1003"]);
    let request = pb::ListInvestigationsRequest { status: 0, page_size: 0, page_token: "garbage".into() };
    assert_eq!(r.client.clone().list_investigations(request).await.unwrap_err().code(), Code::InvalidArgument);

    // Pending actions page the same way, oldest first.
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1002").await.unwrap();
    let actions = |status: pb::PendingActionStatus, page_size: i32, page_token: String| {
        let mut client = r.client.clone();
        async move {
            let request = pb::ListPendingActionsRequest {
                recipient_id: String::new(),
                status: status as i32,
                page_size,
                page_token,
            };
            client.list_pending_actions(request).await
        }
    };
    let whole = actions(pb::PendingActionStatus::Awaiting, 100, String::new()).await.unwrap().into_inner();
    assert!(whole.actions.len() >= 2 && whole.next_page_token.is_empty(), "{whole:?}");
    let (mut paged, mut token) = (Vec::new(), String::new());
    loop {
        let page = actions(pb::PendingActionStatus::Awaiting, 1, token).await.unwrap().into_inner();
        assert_eq!(page.actions.len(), 1);
        paged.extend(page.actions);
        if page.next_page_token.is_empty() {
            break;
        }
        token = page.next_page_token;
    }
    assert_eq!(paged, whole.actions);
    let first = actions(pb::PendingActionStatus::Awaiting, 1, String::new()).await.unwrap().into_inner();
    for (status, size, token) in [
        (pb::PendingActionStatus::Awaiting, 0, "garbage".to_owned()),
        (pb::PendingActionStatus::Answered, 0, first.next_page_token.clone()),
        (pb::PendingActionStatus::Awaiting, 101, String::new()),
        (pb::PendingActionStatus::Awaiting, -1, String::new()),
    ] {
        let refused = actions(status, size, token).await.unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{status:?} {size}: {refused:?}");
    }
    r.stop().await;
}

/// `frontdesk-server import-hr-data` and `export`, the real binary on the test's database.
#[tokio::test]
async fn the_import_and_export_commands() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief(), explain(), notice(CLARIFY)]);
    r.start("1002").await.unwrap();
    r.stop().await;
    let run = |args: &[&str]| {
        let output = std::process::Command::new(env!("CARGO_BIN_EXE_frontdesk-server"))
            .args(["--database-url", &cluster.store.url])
            .args(args)
            .env_remove("FRONTDESK_CONFIG")
            .output()
            .unwrap();
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stdout).into_owned(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, audit, _) = run(&["export", "audit"]);
    assert_eq!(code, Some(0));
    let mut lines = audit.lines();
    assert!(lines.next().unwrap().starts_with("investigation_id,seq,"), "{audit}");
    assert!(lines.clone().count() >= 8 && lines.all(|l| l.starts_with("INV-1002,")), "{audit}");
    let (code, pending, _) = run(&["export", "pending-actions"]);
    assert_eq!(code, Some(0));
    assert!(pending.lines().any(|l| l.starts_with("INV-1002-changer,INV-1002,1002,u003,changer,")), "{pending}");

    let dir = tempfile::tempdir().unwrap();
    let shipped = concat!(env!("CARGO_MANIFEST_DIR"), "/../../", "config/investigation");
    for entry in std::fs::read_dir(shipped).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "csv") {
            std::fs::copy(&path, dir.path().join(path.file_name().unwrap())).unwrap();
        }
    }
    let (code, _, err) = run(&["import-hr-data", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    assert!(err.contains("mutations: 6"), "{err}");
    std::fs::write(dir.path().join("vacation.csv"), "user_id,start_date\nu006,2025-11-03\n").unwrap();
    let (code, _, err) = run(&["import-hr-data", dir.path().to_str().unwrap()]);
    assert_eq!(code, Some(1));
    assert!(err.contains("vacation.csv") && err.contains("end_date"), "{err}");
}

/// A start that is cancelled (or fails) before anything is decided leaves no investigation:
/// `GetInvestigation` is NOT_FOUND, none is listed, and the mutation can be investigated again
/// (until the run that created the thread deleted it on failure, it was ALREADY_EXISTS for good).
#[tokio::test]
async fn a_cancelled_start_leaves_no_investigation_and_can_be_started_again() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.model.push_reply(ScriptedReply::json(&brief().1).for_purpose(BRIEF).after(Duration::from_secs(30)));
    // Cancelled only once the brief's call has taken its (slow) reply, so the replies scripted
    // below are the second start's.
    r.start_cancelled_at("1001", "", BRIEF).await;

    assert_eq!(r.get("INV-1001").await.unwrap_err().code(), Code::NotFound);
    let listed = r.client.clone().list_investigations(pb::ListInvestigationsRequest::default()).await.unwrap();
    assert!(listed.into_inner().investigations.is_empty());
    let lookup = json!({"table": "role_authorisations", "key": "r_hr_clerk"});
    r.script(&[brief()]);
    r.model.push_reply(ScriptedReply::tool_call("lookup_data", lookup).for_purpose(EXPLAIN));
    r.script(&[explain(), report()]);
    let run = r.start("1001").await.expect("started again");
    assert_eq!(run.investigation().status(), S::AdvisoryReportGenerated);
    r.stop().await;
}

/// A start cancelled once an agent has recorded its work (the trail, the index row, the
/// mutation's status) keeps the investigation as far as it got, so what the database lists is
/// what the thread holds: it is listed and read like any other, and the retry of the start with
/// its idempotency key goes on from there.
#[tokio::test]
async fn a_start_cancelled_after_an_agent_recorded_its_work_keeps_the_investigation_so_far() {
    let cluster = Cluster::new().await;
    let r = cluster.replica().await;
    r.script(&[brief()]);
    let lookup = json!({"table": "role_authorisations", "key": "r_hr_clerk"});
    r.model.push_reply(
        ScriptedReply::tool_call("lookup_data", lookup.clone()).for_purpose(EXPLAIN).after(Duration::from_secs(30)),
    );
    r.start_cancelled_at("1001", "start-1001", EXPLAIN).await;

    let kept = r.get("INV-1001").await.expect("the investigation is kept");
    assert_eq!(kept.status(), S::InvestigationStarted);
    let listed = r.client.clone().list_investigations(pb::ListInvestigationsRequest::default()).await.unwrap();
    let ids: Vec<String> = listed.into_inner().investigations.into_iter().map(|i| i.investigation_id).collect();
    assert_eq!(ids, ["INV-1001"]);
    let trail: Vec<u32> = r.trail("INV-1001").await.iter().map(|e| e.seq).collect();
    assert!(!trail.is_empty(), "the orchestrator's entries");
    assert_eq!(r.start("1001").await.unwrap_err().code(), Code::AlreadyExists, "a new start without the key");

    r.model.push_reply(ScriptedReply::tool_call("lookup_data", lookup).for_purpose(EXPLAIN));
    r.script(&[explain(), report()]);
    let run = r.start_with("1001", "start-1001").await.expect("the start's retry goes on");
    assert_eq!(run.investigation().status(), S::AdvisoryReportGenerated);
    let retried: Vec<u32> = r.trail("INV-1001").await.iter().map(|e| e.seq).collect();
    assert_eq!(retried[..trail.len()], trail[..], "the trail goes on from where it stopped");
    r.stop().await;
}
