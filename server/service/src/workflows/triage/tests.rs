//! The triage desk in three tenants (`acme`, `globex`, `default`) over the real stores: SQLite,
//! and PostgreSQL too when `FRONTDESK_TEST_POSTGRES_URL` is set. One customer id, one
//! idempotency key and one imported ticket id are each tenant's own; the background repairs
//! keep every ticket in its tenant.

use std::{
    sync::Arc,
    time::{Duration, SystemTime},
};

use frontdesk_llm::{ChatRequest, LlmClient, LlmError, ScriptedModel};
use frontdesk_runtime::{Checkpoint, Checkpointer, Log, RunMarker, RunStatus, Runner, RunnerConfig, State};
use frontdesk_store::{Database, SqlCheckpointer};
use frontdesk_workflows::{
    triage::{
        self, customers::CustomerDirectory, kb::KnowledgeBase, Author, Resolution, TicketInfo, TicketMessage,
        TicketStatus, TriageDeps, TriageDesk, TriageHandle, TriageOutcome, TriageProgress, TriageRequest, TriageState,
        TriageUpdate,
    },
    Tenant, WorkflowError,
};
use serde_json::json;

use super::archive::SqlTicketArchive;

/// One customer of the shared directory, used by every tenant.
const CUSTOMER: &str = "CUST-001";

/// A message with this marker is answered (`auto_respond`, archived); any other stays active
/// (`route_specialist`).
const RESOLVE: &str = "[resolve]";

fn acme() -> Tenant {
    Tenant::new("acme").unwrap()
}

fn globex() -> Tenant {
    Tenant::new("globex").unwrap()
}

/// The model: English, technical, and the specialist's action by the marker; the matcher picks
/// the first active ticket it is shown.
fn answer(request: &ChatRequest) -> Result<String, LlmError> {
    let prompt = request.messages.last().map_or("", |m| m.content.as_str());
    let reply = match request.purpose.as_str() {
        "translator.translate" => json!({"original_language": "en", "is_english": true}),
        "supervisor.classify" => json!({
            "reasoning": "scripted", "urgency": "medium", "ticket_type": "technical", "requires_escalation": false
        }),
        "specialist.technical" => json!({
            "reasoning": "scripted",
            "recommended_action": if prompt.contains(RESOLVE) { "auto_respond" } else { "route_specialist" },
            "suggested_response": "Done.",
            "relevant_articles": [],
            "extracted_info": {"product_area": "sso", "issue_type": "login_error", "sentiment": "calm"}
        }),
        "ticket_matcher.match" => {
            let first = prompt
                .lines()
                .find_map(|line| line.strip_prefix("- ticket_id "))
                .and_then(|line| line.split_once(':'))
                .map(|(id, _)| id);
            json!({"reasoning": "same issue", "matched_ticket_id": first, "confidence": "high"})
        }
        other => {
            return Err(LlmError::Config { field: "test.purpose", problem: format!("unexpected purpose {other}") })
        }
    };
    Ok(reply.to_string())
}

/// A fresh SQLite database, and a fresh PostgreSQL one when a server is configured.
async fn databases() -> crate::workflows::testing::Databases {
    crate::workflows::testing::databases("triage").await
}

struct Desk {
    desk: TriageDesk,
    model: Arc<ScriptedModel>,
    db: Database,
}

struct Triaged {
    resolution: Resolution,
    outcome: TriageOutcome,
}

fn request(message: &str, key: Option<&str>) -> TriageRequest {
    TriageRequest {
        customer_id: CUSTOMER.into(),
        message: message.into(),
        subject: Some("Help".into()),
        language: None,
        idempotency_key: key.map(Into::into),
    }
}

async fn finish(handle: Result<TriageHandle, WorkflowError>) -> Result<Triaged, WorkflowError> {
    let TriageHandle { mut progress, outcome } = handle?;
    let mut resolution = None;
    while let Some(item) = progress.next().await {
        if let TriageProgress::Resolved(r) = item {
            resolution = Some(r);
        }
    }
    Ok(Triaged { resolution: resolution.expect("a resolution"), outcome: outcome.await? })
}

impl Desk {
    fn new(db: Database) -> Self {
        let model = Arc::new(ScriptedModel::from_fn("scripted", answer));
        let llm = LlmClient::new(model.clone());
        let customers = Arc::new(CustomerDirectory::shipped());
        let deps =
            TriageDeps { llm: llm.clone(), customers: customers.clone(), kb: Arc::new(KnowledgeBase::shipped()) };
        let store: Arc<dyn Checkpointer> = Arc::new(SqlCheckpointer::new(db.clone()));
        let runner = Runner::new(triage::build(deps).unwrap(), store, RunnerConfig::default());
        let archive = Arc::new(SqlTicketArchive::new(db.clone()));
        let desk = TriageDesk::new(runner, llm, customers, archive, 8_000).unwrap();
        Self { desk, model, db }
    }

    async fn triage(&self, tenant: &Tenant, message: &str, key: Option<&str>) -> Result<Triaged, WorkflowError> {
        finish(self.desk.triage(tenant, request(message, key)).await).await
    }

    async fn import(&self, tenant: &Tenant, message: &str, ticket_id: &str) -> Result<Triaged, WorkflowError> {
        finish(self.desk.triage_as_new_ticket(tenant, request(message, None), ticket_id).await).await
    }

    /// What the matcher was shown, call by call.
    fn matcher_prompts(&self) -> Vec<String> {
        let requests = self.model.requests().into_iter().filter(|r| r.purpose == "ticket_matcher.match");
        requests.map(|r| r.messages.last().unwrap().content.clone()).collect()
    }

    async fn thread_exists(&self, thread: &str) -> bool {
        self.desk.runner().state(thread).await.unwrap().is_some()
    }
}

fn is_not_found(result: Result<impl std::fmt::Debug, WorkflowError>, ticket_id: &str) -> bool {
    matches!(result, Err(WorkflowError::NotFound { what: "ticket", ref id }) if id == ticket_id)
}

#[tokio::test]
async fn one_customer_id_has_separate_tickets_in_each_tenant() {
    for db in databases().await {
        let d = Desk::new(db);
        let tenants = [acme(), globex(), Tenant::default()];
        let mut ids = Vec::new();
        for tenant in &tenants {
            let out = d.triage(tenant, "sso login fails", None).await.unwrap();
            assert!(!out.resolution.matched_existing, "{tenant}: nothing of another tenant's to match");
            assert_eq!(out.outcome.status, TicketStatus::Active);
            assert_eq!(out.outcome.output.customer_id, CUSTOMER);
            assert_eq!(out.outcome.output.ticket_id, out.resolution.ticket_id);
            ids.push(out.resolution.ticket_id);
        }
        assert!(d.matcher_prompts().is_empty(), "no tenant's customer had an active ticket of its own");
        assert!(d.thread_exists(&format!("acme/{CUSTOMER}:{}", ids[0])).await);
        assert!(d.thread_exists(&format!("globex/{CUSTOMER}:{}", ids[1])).await);
        assert!(d.thread_exists(&format!("{CUSTOMER}:{}", ids[2])).await, "the default tenant's keys are the ids");

        for (tenant, id) in tenants.iter().zip(&ids) {
            let active = d.desk.list_active(tenant, CUSTOMER).await.unwrap();
            let shown: Vec<_> = active.iter().map(|t| (t.ticket_id.as_str(), t.customer_id.as_str())).collect();
            assert_eq!(shown, [(id.as_str(), CUSTOMER)], "{tenant}");
            for other in ids.iter().filter(|other| *other != id) {
                assert!(is_not_found(d.desk.get_ticket(tenant, CUSTOMER, other).await, other), "{tenant}");
            }
            let view = d.desk.get_ticket(tenant, CUSTOMER, id).await.unwrap();
            assert_eq!((view.summary.ticket_id.as_str(), view.summary.customer_id.as_str()), (id.as_str(), CUSTOMER));
        }

        // A follow-up is matched against its own tenant's ticket only.
        let follow = d.triage(&acme(), "still failing", None).await.unwrap();
        assert!(follow.resolution.matched_existing);
        assert_eq!(follow.resolution.ticket_id, ids[0]);
        assert_eq!(follow.resolution.candidates, [ids[0].clone()]);
        let prompts = d.matcher_prompts();
        assert_eq!(prompts.len(), 1);
        assert!(prompts[0].contains(&ids[0]) && !prompts[0].contains(&ids[1]) && !prompts[0].contains(&ids[2]));
        let view = d.desk.get_ticket(&acme(), CUSTOMER, &ids[0]).await.unwrap();
        assert_eq!(view.messages.len(), 2);
        assert_eq!(d.desk.get_ticket(&globex(), CUSTOMER, &ids[1]).await.unwrap().messages.len(), 1);
    }
}

#[tokio::test]
async fn archived_tickets_are_listed_and_found_in_their_tenant_only() {
    for db in databases().await {
        let d = Desk::new(db);
        let mut acme_ids = Vec::new();
        for message in ["refund please", "another refund"] {
            let out = d.triage(&acme(), &format!("{message} {RESOLVE}"), None).await.unwrap();
            assert_eq!(out.outcome.status, TicketStatus::Resolved);
            acme_ids.push(out.resolution.ticket_id);
        }
        let globex_id =
            d.triage(&globex(), &format!("refund please {RESOLVE}"), None).await.unwrap().resolution.ticket_id;

        // Archived under keys in the tenant, by the run's own archive handoff.
        let (row, _) = d.db.get_ticket(&format!("acme/{}", acme_ids[0])).await.unwrap().expect("archived");
        assert_eq!(row.customer_id, format!("acme/{CUSTOMER}"));
        assert_eq!(row.thread_id, format!("acme/{CUSTOMER}:{}", acme_ids[0]));
        assert!(d.db.get_ticket(&acme_ids[0]).await.unwrap().is_none(), "not under the bare id");

        let (page, token) = d.desk.list_archived(&acme(), CUSTOMER, None, None, 1).await.unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(page[0].customer_id, CUSTOMER);
        let token = token.expect("a second page");
        let refused = d.desk.list_archived(&globex(), CUSTOMER, None, Some(&token), 10).await;
        assert!(matches!(refused, Err(WorkflowError::InvalidArgument { field: "page_token", .. })), "{refused:?}");
        let (rest, next) = d.desk.list_archived(&acme(), CUSTOMER, None, Some(&token), 10).await.unwrap();
        assert_eq!(next, None);
        let mut listed: Vec<String> = page.iter().chain(&rest).map(|t| t.ticket_id.clone()).collect();
        listed.sort();
        let mut expected = acme_ids.clone();
        expected.sort();
        assert_eq!(listed, expected);

        let (globex_page, _) = d.desk.list_archived(&globex(), CUSTOMER, None, None, 10).await.unwrap();
        assert_eq!(globex_page.iter().map(|t| t.ticket_id.as_str()).collect::<Vec<_>>(), [globex_id.as_str()]);
        let (default_page, _) = d.desk.list_archived(&Tenant::default(), CUSTOMER, None, None, 10).await.unwrap();
        assert!(default_page.is_empty());

        let view = d.desk.get_ticket(&acme(), CUSTOMER, &acme_ids[0]).await.unwrap();
        assert_eq!(view.summary.status, TicketStatus::Resolved);
        assert_eq!(
            (view.summary.ticket_id.as_str(), view.summary.customer_id.as_str()),
            (acme_ids[0].as_str(), CUSTOMER)
        );
        for tenant in [globex(), Tenant::default()] {
            assert!(is_not_found(d.desk.get_ticket(&tenant, CUSTOMER, &acme_ids[0]).await, &acme_ids[0]));
        }
        assert!(is_not_found(d.desk.get_ticket(&acme(), CUSTOMER, &globex_id).await, &globex_id));
    }
}

#[tokio::test]
async fn idempotency_keys_are_each_tenants_own() {
    for db in databases().await {
        let d = Desk::new(db);
        let first = d.triage(&acme(), "sso login fails", Some("req-1")).await.unwrap();
        assert!(!first.outcome.replayed);
        let same = d.triage(&globex(), "sso login fails", Some("req-1")).await.unwrap();
        assert!(!same.outcome.replayed, "another tenant's request with the key is not replayed");
        assert_ne!(same.resolution.ticket_id, first.resolution.ticket_id);
        let different = d.triage(&Tenant::default(), "invoices are wrong", Some("req-1")).await.unwrap();
        assert!(!different.outcome.replayed, "nor compared with another tenant's request");

        let retry = d.triage(&acme(), "sso login fails", Some("req-1")).await.unwrap();
        assert!(retry.outcome.replayed);
        assert_eq!(retry.outcome.output.ticket_id, first.resolution.ticket_id);
        assert_eq!(retry.outcome.output.customer_id, CUSTOMER);
        let mismatch = d.triage(&globex(), "invoices are wrong", Some("req-1")).await.err();
        assert!(
            matches!(&mismatch, Some(WorkflowError::IdempotencyMismatch { what: "customer", id, key })
                if id == CUSTOMER && key == "req-1"),
            "{mismatch:?}"
        );
        for tenant in [acme(), globex(), Tenant::default()] {
            assert_eq!(d.desk.list_active(&tenant, CUSTOMER).await.unwrap().len(), 1, "{tenant}");
        }
    }
}

#[tokio::test]
async fn an_imported_ticket_id_is_each_tenants_own() {
    for db in databases().await {
        let d = Desk::new(db);
        for tenant in [acme(), globex(), Tenant::default()] {
            let archived = d.import(&tenant, &format!("{tenant}'s refund {RESOLVE}"), "UP-1").await.unwrap();
            assert_eq!(archived.outcome.status, TicketStatus::Resolved, "{tenant}");
            assert_eq!(archived.outcome.output.ticket_id, "UP-1");
            let active = d.import(&tenant, &format!("{tenant}'s login"), "UP-2").await.unwrap();
            assert_eq!(active.outcome.status, TicketStatus::Active, "{tenant}");
        }
        for tenant in [acme(), globex(), Tenant::default()] {
            for id in ["UP-1", "UP-2"] {
                let again = d.import(&tenant, "again", id).await.err();
                assert!(
                    matches!(&again, Some(WorkflowError::AlreadyExists { what: "ticket", id: got }) if got == id),
                    "{tenant} {id}: {again:?}"
                );
                let view = d.desk.get_ticket(&tenant, CUSTOMER, id).await.unwrap();
                assert_eq!(view.summary.ticket_id, id);
                assert!(view.messages[0].text.starts_with(&format!("{tenant}'s ")), "{tenant} {id}");
            }
        }
        assert!(d.db.get_ticket("UP-1").await.unwrap().is_some());
        assert!(d.db.get_ticket("acme/UP-1").await.unwrap().is_some());
        assert!(d.db.get_ticket("globex/UP-1").await.unwrap().is_some());
    }
}

/// A ticket's state as its thread keeps it: the caller's ids, whatever the tenant.
fn ticket_state(ticket_id: &str, text: &str, resolved: bool) -> TriageState {
    let mut state = TriageState::default();
    let result = resolved.then(|| {
        serde_json::from_value(json!({
            "urgency": "medium", "ticket_type": "technical",
            "extracted_info": {"product_area": "", "issue_type": "", "sentiment": "", "language": "en"},
            "recommended_action": "auto_respond", "suggested_response": "Done.", "suggested_response_english": "Done.",
            "relevant_articles": [], "reasoning": "", "agent": "technical_specialist"
        }))
        .unwrap()
    });
    state.apply(TriageUpdate {
        ticket: Some(TicketInfo {
            ticket_id: ticket_id.into(),
            customer_id: CUSTOMER.into(),
            subject: "Help".into(),
            created_at_ms: 1,
        }),
        messages: Some(Log::append(vec![TicketMessage { author: Author::Customer, text: text.into(), at_ms: 1 }])),
        triage_result: Some(result),
        ..Default::default()
    });
    state
}

fn checkpoint(thread: &str, state: &TriageState, status: RunStatus) -> Checkpoint {
    Checkpoint {
        thread_id: thread.into(),
        workflow: triage::NAME.into(),
        version: 1,
        state: serde_json::to_vec(state).unwrap(),
        next: (status == RunStatus::Running).then(|| "translator".into()),
        pending: Default::default(),
        run: RunMarker {
            run_id: "crashed".into(),
            idempotency_key: None,
            fingerprint: None,
            status,
            step: 0,
            output: None,
            owner: None,
        },
        created_at: SystemTime::now() - Duration::from_secs(1),
    }
}

/// What a crash leaves, in a tenant other than `default`: the repairs read tenants from the
/// thread ids and finish each ticket in its own tenant.
#[tokio::test]
async fn repairs_finish_each_ticket_in_its_tenant() {
    for db in databases().await {
        let d = Desk::new(db);
        let store = d.desk.runner().checkpointer().clone();

        // An archived ticket's accepting checkpoint, back after a crash: deleted, not re-run.
        let archived = d.triage(&acme(), &format!("refund please {RESOLVE}"), None).await.unwrap();
        let id = archived.resolution.ticket_id;
        let thread = format!("acme/{CUSTOMER}:{id}");
        assert!(!d.thread_exists(&thread).await, "archived, so erased");
        store.put(&checkpoint(&thread, &ticket_state(&id, "refund please", false), RunStatus::Running)).await.unwrap();
        // Another workflow's run in progress on the same store: not a ticket, left alone.
        let mut other = checkpoint("acme/conversation-1", &ticket_state("X", "not a ticket", false), RunStatus::Running);
        other.workflow = "intake".into();
        store.put(&other).await.unwrap();
        let calls = d.model.requests().len();
        // A takeover scan hands it both runs: it repairs its own and resumes none.
        let listed = store.unfinished_runs().await.unwrap();
        assert_eq!(listed.len(), 2);
        assert_eq!(d.desk.take_over(listed).await.unwrap(), 0);
        assert!(!d.thread_exists(&thread).await, "the leftover is deleted");
        assert_eq!(d.model.requests().len(), calls);
        let untouched = store.latest("acme/conversation-1").await.unwrap().expect("still there");
        assert_eq!(
            (untouched.version, untouched.run.status, untouched.state),
            (other.version, other.run.status, other.state),
            "another workflow's run is untouched"
        );

        // A completed run whose archive save failed: the sweep archives it in its tenant.
        let left = format!("globex/{CUSTOMER}:LEFT-1");
        store
            .put(&checkpoint(&left, &ticket_state("LEFT-1", "globex's leftover", true), RunStatus::Completed))
            .await
            .unwrap();
        assert_eq!(d.desk.sweep().await.unwrap(), 1);
        assert!(!d.thread_exists(&left).await);
        let (row, _) = d.db.get_ticket("globex/LEFT-1").await.unwrap().expect("archived in globex");
        assert_eq!(
            (row.customer_id.as_str(), row.thread_id.as_str()),
            (format!("globex/{CUSTOMER}").as_str(), left.as_str())
        );
        let view = d.desk.get_ticket(&globex(), CUSTOMER, "LEFT-1").await.unwrap();
        assert_eq!(view.summary.status, TicketStatus::Resolved);
        assert_eq!((view.summary.ticket_id.as_str(), view.summary.customer_id.as_str()), ("LEFT-1", CUSTOMER));
        for tenant in [acme(), Tenant::default()] {
            assert!(is_not_found(d.desk.get_ticket(&tenant, CUSTOMER, "LEFT-1").await, "LEFT-1"), "{tenant}");
        }
    }
}
