//! The `frontdesk investigate` commands and the client's investigation methods against a real
//! server (in process, on 127.0.0.1:0, SQLite, the shipped sample HR data) whose model is
//! scripted per call purpose: mutation 1002 through the changer's clarification and the
//! manager's approval to the report, with the errors of wrong and repeated replies.

mod common;

use common::Server;
use frontdesk_client::{v1, AuditTrailKey, Reply};
use futures::StreamExt;
use serde_json::json;
use tonic::Code;

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

fn claim(user: &str, absence: &str) -> (&'static str, serde_json::Value) {
    (CLAIM, json!({"covered_user_id": user, "absence": absence, "summary": "the user's claim"}))
}

fn report() -> (&'static str, serde_json::Value) {
    (REPORT, json!({"summary": "Summary of the investigation.", "details": "Details of the investigation."}))
}

#[tokio::test(flavor = "multi_thread")]
async fn investigate_1002_through_the_changer_and_the_manager_to_the_report() {
    let s = Server::start().await;

    s.script(&[brief(), explain(), notice(CLARIFY)]);
    let (ok, out, err) = s.cli(&["investigate", "start", "1002", "--key", "start-1002"]).await;
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("investigation_agent ▸ started"), "node events stream: {out}");
    assert!(out.contains("\ninvestigation -> rights_check: check_rights (pending)\n"), "{out}");
    assert!(out.contains("\nrights_check -> investigation: check_rights_result (success)\n"), "{out}");
    assert!(out.contains("-> investigation_started\n"), "{out}");
    assert!(out.contains("\nstatus: clarification_requested -> awaiting_user_response\n"), "{out}");
    assert!(out.contains("investigation: INV-1002\n"), "{out}");
    assert!(out.contains("status:        awaiting_user_response\n"), "{out}");
    assert!(out.contains("  INV-1002-changer  changer u003: About your change\n"), "{out}");
    assert!(out.contains("rights check:  not authorised"), "{out}");
    assert!(out.ends_with("report:        -\n"), "{out}");

    let (ok, out, err) = s.cli(&["investigate", "pending", "--recipient", "u003"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("ACTION "), "{out}");
    assert!(out.contains("INV-1002-changer    INV-1002        u003       changer  awaiting"), "{out}");
    let (ok, out, _) = s.cli(&["investigate", "pending", "--recipient", "u001"]).await;
    assert!(ok && out == "no pending actions\n", "{out}");

    // The manager cannot answer the changer's action.
    let (ok, _, err) = s
        .cli(&[
            "investigate",
            "respond",
            "INV-1002",
            "INV-1002-changer",
            "--as",
            "manager",
            "--responder",
            "u001",
            "--approve",
        ])
        .await;
    assert!(!ok);
    assert!(err.starts_with("error: PERMISSION_DENIED: "), "{err}");
    assert!(err.contains("  reason: WRONG_RESPONDER\n"), "{err}");

    s.script(&[claim("u006", "vacation"), notice(MANAGER)]);
    let text = "I stood in for Frank (u006), who was on vacation.";
    let changer = [
        "investigate",
        "respond",
        "INV-1002",
        "INV-1002-changer",
        "--as",
        "changer",
        "--responder",
        "u003",
        "--text",
        text,
    ];
    let (ok, out, err) = s.cli(&changer).await;
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("\nrequest_for_information -> investigation: clarification_response (success)\n"), "{out}");
    assert!(out.contains("status:        awaiting_manager_response\n"), "{out}");
    assert!(out.contains("  INV-1002-manager  manager u001: About your change\n"), "{out}");
    assert!(out.contains("--as manager --responder u001 --approve|--deny"), "{out}");
    assert!(out.contains("claim:         valid · stood in for u006 · vacation\n"), "{out}");

    s.script(&[report()]);
    let manager = [
        "investigate",
        "respond",
        "INV-1002",
        "INV-1002-manager",
        "--as",
        "manager",
        "--responder",
        "u001",
        "--approve",
        "--text",
        "checked with the team",
    ];
    let (ok, out, err) = s.cli(&manager).await;
    assert!(ok, "{err}\n{out}");
    assert!(out.contains("\nstatus: awaiting_manager_response -> approved\n"), "{out}");
    assert!(out.contains("\nstatus: approved -> advisory_report_generated\n"), "{out}");
    assert!(out.contains("status:        advisory_report_generated (finished)\n"), "{out}");
    assert!(out.contains("manager:       u001 approve: checked with the team\n"), "{out}");
    assert!(
        out.contains("report:        RPT-1002 · recommendation accept\n  Summary of the investigation.\n"),
        "{out}"
    );

    // Answered once only.
    let (ok, _, err) = s.cli(&manager).await;
    assert!(!ok);
    assert!(err.starts_with("error: FAILED_PRECONDITION: "), "{err}");
    assert!(err.contains("  reason: INTERRUPT_ANSWERED\n"), "{err}");

    let (ok, out, err) = s.cli(&["investigate", "show", "INV-1002"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("status history:\n"), "{out}");
    assert!(out.contains("  awaiting_manager_response -> approved  (investigation)\n"), "{out}");
    assert!(out.contains("report details:\n  Details of the investigation.\n"), "{out}");
    assert!(out.contains("  changer's reply:\n    I stood in for Frank"), "{out}");

    let (ok, out, err) = s.cli(&["investigate", "list", "--status", "advisory_report_generated"]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("ID "), "{out}");
    assert!(out.contains("INV-1002        1002      advisory_report_generated"), "{out}");
    assert!(out.contains("accept"), "{out}");
    let (ok, out, _) = s.cli(&["investigate", "list", "--status", "awaiting_user_response"]).await;
    assert!(ok && out == "no investigations\n", "{out}");

    let (ok, csv, err) = s.cli(&["investigate", "audit", "INV-1002", "--csv"]).await;
    assert!(ok, "{err}");
    let mut lines = csv.lines();
    assert_eq!(lines.next(), Some("seq,time,correlation_id,actor,kind,summary"));
    let rows: Vec<&str> = lines.collect();
    let trail = s.client().await.get_audit_trail(AuditTrailKey::Investigation("INV-1002".into())).await.unwrap();
    assert_eq!(rows.len(), trail.len(), "{csv}");
    for (row, entry) in rows.iter().zip(&trail) {
        assert!(row.starts_with(&format!("{},", entry.seq)), "{row}");
    }
    assert!(
        csv.contains(",InvestigationAgent,message,investigation -> rights_check: check_rights (pending)\n"),
        "{csv}"
    );
    assert!(
        csv.contains(",changer:u003,reply,\"INV-1002-changer from u003 (changer): I stood in for Frank (u006), who"),
        "{csv}"
    );

    // One exchange by its correlation id: the changer's clarification request, notice and reply.
    let correlation = trail
        .iter()
        .find(|e| matches!(&e.entry, Some(v1::audit_entry::Entry::Reply(r)) if r.responder_id == "u003"))
        .map(|e| e.correlation_id.clone())
        .expect("the changer's reply is in the trail");
    let (ok, out, err) = s.cli(&["investigate", "audit", "--correlation", &correlation]).await;
    assert!(ok, "{err}");
    assert!(out.starts_with("SEQ  TIME"), "{out}");
    assert!(out.contains("notification"), "{out}");
    assert!(out.contains("INV-1002-changer from u003 (changer)"), "{out}");
    assert!(out.lines().skip(1).all(|l| l.contains(&correlation)), "{out}");

    // The investigation is finished: a watch prints the rest of the trail and ends.
    let after = trail.len() as u32 - 3;
    let (ok, out, err) = s.cli(&["investigate", "watch", "INV-1002", "--after", &after.to_string()]).await;
    assert!(ok, "{err}");
    assert_eq!(out.lines().count(), 1 + 3 + 1, "{out}");
    assert!(out.contains("approved -> advisory_report_generated"), "{out}");
    assert!(out.ends_with(&format!("watch ended after seq {}\n", trail.len())), "{out}");

    let (ok, out, err) = s.cli(&["investigate", "pending", "--recipient", "u003", "--answered"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("INV-1002-changer") && out.contains("answered"), "{out}");
    assert!(out.contains("    answered 20"), "the reply is shown: {out}");

    // A retried start with its key replays the outcome; without it, a second start is refused.
    let (ok, out, err) = s.cli(&["investigate", "start", "1002", "--key", "start-1002"]).await;
    assert!(ok, "{err}");
    assert!(out.contains("investigation: INV-1002\n"), "{out}");
    let (ok, _, err) = s.cli(&["investigate", "start", "1002"]).await;
    assert!(!ok);
    assert!(err.starts_with("error: ALREADY_EXISTS: "), "{err}");
    let (ok, _, err) = s.cli(&["investigate", "start", "9999"]).await;
    assert!(!ok);
    assert!(err.starts_with("error: NOT_FOUND: "), "{err}");
    let (ok, _, err) = s.cli(&["investigate", "show", "INV-9999"]).await;
    assert!(!ok && err.starts_with("error: NOT_FOUND: "), "{err}");
    assert_eq!(s.model.remaining(), 0);
    s.server.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn the_client_investigates_and_inspects() {
    let s = Server::start().await;
    let client = s.client().await;

    // 1001 is authorised: one run to the report.
    s.script(&[brief(), explain(), report()]);
    let run = client.start_investigation_and_wait("1001", None).await.unwrap();
    let inv = &run.investigation;
    assert_eq!(inv.investigation_id, "INV-1001");
    assert!(inv.finished);
    assert_eq!(inv.status(), v1::InvestigationStatus::AdvisoryReportGenerated);
    assert_eq!(run.messages.len(), 4, "{:?}", run.messages);
    assert_eq!(run.status_changes.last().map(|c| c.to()), Some(v1::InvestigationStatus::AdvisoryReportGenerated));
    assert!(run.events.iter().any(|e| matches!(e.kind, Some(v1::run_event::Kind::RunFinished(_)))));

    // 1002 waits for the changer.
    s.script(&[brief(), explain(), notice(CLARIFY)]);
    let mut stream = client.start_investigation("1002", Some("k-1002".into())).await.unwrap();
    let mut last = None;
    while let Some(item) = stream.next().await {
        last = Some(item.unwrap());
    }
    let waiting = last.and_then(|l| l.as_investigation().cloned()).expect("the stream ends with the investigation");
    assert_eq!(waiting.awaiting[0].action_id, "INV-1002-changer");

    let err =
        client.respond_and_wait("INV-1002", "INV-1002-changer", Reply::changer("u001", "not me")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::PermissionDenied));
    assert!(err.api().unwrap().is_reason(v1::ErrorReason::WrongResponder), "{err}");
    let err = client.respond_and_wait("INV-1002", "INV-1002-nope", Reply::changer("u003", "x")).await.unwrap_err();
    assert_eq!(err.code(), Some(Code::NotFound), "{err}");

    assert_eq!(
        client.get_investigation("INV-1002").await.unwrap().status(),
        v1::InvestigationStatus::AwaitingUserResponse
    );
    let all = client.list_investigations(None, 0, None).await.unwrap();
    assert_eq!(all.investigations.len(), 2);
    let finished =
        client.list_investigations(Some(v1::InvestigationStatus::AdvisoryReportGenerated), 0, None).await.unwrap();
    assert_eq!(finished.investigations.iter().map(|i| i.investigation_id.as_str()).collect::<Vec<_>>(), ["INV-1001"]);
    let page = client.list_investigations(None, 1, None).await.unwrap();
    assert_eq!(page.investigations.len(), 1);
    assert!(!page.next_page_token.is_empty());
    let next = client.list_investigations(None, 1, Some(page.next_page_token)).await.unwrap();
    assert_ne!(next.investigations[0].investigation_id, page.investigations[0].investigation_id);

    let pending = client.list_pending_actions(Some("u003"), None, 0, None).await.unwrap();
    assert_eq!(pending.actions.iter().map(|a| a.action_id.as_str()).collect::<Vec<_>>(), ["INV-1002-changer"]);
    assert!(pending.next_page_token.is_empty());
    assert!(client
        .list_pending_actions(Some("u003"), Some(v1::PendingActionStatus::Answered), 0, None)
        .await
        .unwrap()
        .actions
        .is_empty());

    // The changer answers; then the manager denies, and a watch started before sees it through.
    s.script(&[claim("u006", "vacation"), notice(MANAGER)]);
    let run = client
        .respond_and_wait("INV-1002", "INV-1002-changer", Reply::changer("u003", "I stood in for u006 on vacation."))
        .await
        .unwrap();
    assert_eq!(run.investigation.status(), v1::InvestigationStatus::AwaitingManagerResponse);
    let seen = client.get_audit_trail(AuditTrailKey::Investigation("INV-1002".into())).await.unwrap().len() as u32;
    let mut watch = client.watch_investigation("INV-1002", seen).await.unwrap();
    s.script(&[report()]);
    let reply =
        Reply::manager("u001", v1::ManagerDecision::Deny).with_text("not agreed").with_idempotency_key("deny-1");
    let run = client.respond_and_wait("INV-1002", "INV-1002-manager", reply).await.unwrap();
    assert_eq!(run.investigation.report.as_ref().unwrap().recommendation(), v1::Recommendation::RejectInvestigate);
    let mut watched = Vec::new();
    while let Some(entry) = watch.next().await {
        watched.push(entry.unwrap());
    }
    assert_eq!(watched.first().map(|e| e.seq), Some(seen + 1));
    assert!(watched.iter().any(|e| frontdesk_client::describe_audit_entry(e).contains("(manager): deny: not agreed")));
    let trail = client.get_audit_trail(AuditTrailKey::Investigation("INV-1002".into())).await.unwrap();
    assert_eq!(watched.last().map(|e| e.seq), trail.last().map(|e| e.seq));
    let exchange = client.get_audit_trail(AuditTrailKey::Correlation(watched[0].correlation_id.clone())).await.unwrap();
    assert!(!exchange.is_empty() && exchange.iter().all(|e| e.correlation_id == watched[0].correlation_id));
    assert_eq!(s.model.remaining(), 0);
    s.server.shutdown().await.unwrap();
}
