//! The investigation desk in several tenants (`acme`, `globex`, `default`, and `acm_`, whose
//! `_` a `LIKE` prefix would take for any character) over the real SQL records: SQLite, and
//! PostgreSQL too when `FRONTDESK_TEST_POSTGRES_URL` is set. One mutation is investigated by
//! each tenant on its own; another tenant's investigation, trail and actions are not found;
//! listings and watches show the caller's own, under the caller's ids; a recovered run keeps
//! its records in its tenant.

use std::{
    sync::{atomic::Ordering::SeqCst, Arc},
    time::{Duration, SystemTime},
};

use frontdesk_llm::{ChatRequest, LlmClient, LlmError, ScriptedModel};
use frontdesk_runtime::{
    Checkpoint, Checkpointer, RetryPolicy, RunInput, RunMarker, RunRequest, RunStatus, Runner, RunnerConfig, State,
};
use frontdesk_store::{Database, SqlCheckpointer};
use frontdesk_workflows::{
    investigation::{
        self, ActionStatus, AuditEntry, AuditKey, AuditRecord, InvestigationDeps, InvestigationDesk,
        InvestigationHandle, InvestigationState, InvestigationStore, InvestigationUpdate, InvestigationView,
        MutationRef, RespondRequest, ResponderRole, StartRequest, Status,
    },
    Tenant, WorkflowError,
};
use futures::StreamExt;
use serde_json::json;

use super::{store::SqlInvestigationStore, SAMPLE_DATA};

fn acme() -> Tenant {
    Tenant::new("acme").unwrap()
}

fn globex() -> Tenant {
    Tenant::new("globex").unwrap()
}

/// Its keys are `acm_/...`: a `LIKE 'acm_/%'` would match `acme/...` too.
fn acm_() -> Tenant {
    Tenant::new("acm_").unwrap()
}

/// The model: every agent's reply by purpose; the changer's claim names u006's vacation when
/// the reply does (mutation 1002's valid claim), nobody otherwise.
fn answer(request: &ChatRequest) -> Result<String, LlmError> {
    let prompt = request.messages.last().map_or("", |m| m.content.as_str());
    let reply = match request.purpose.as_str() {
        "investigation_agent.brief" => json!({"summary": "A change to review."}),
        "rights_check_agent.explain" => json!({"message": "The grants found decide it."}),
        "request_for_information_agent.clarification_notice" | "request_for_information_agent.manager_notice" => {
            json!({"subject": "About your change", "body": "Please tell us why you made it."})
        }
        "request_for_information_agent.extract_claim" => {
            let reply = prompt.split_once("The user's reply:").map_or("", |(_, reply)| reply);
            if reply.contains("u006") {
                json!({"covered_user_id": "u006", "absence": "vacation", "summary": "stood in for u006"})
            } else {
                json!({"covered_user_id": null, "absence": "none", "summary": "no reason"})
            }
        }
        "advisory_agent.report" => json!({"summary": "Summary.", "details": "Details."}),
        other => {
            return Err(LlmError::Config { field: "test.purpose", problem: format!("unexpected purpose {other}") })
        }
    };
    Ok(reply.to_string())
}

/// A fresh SQLite database, and a fresh PostgreSQL one when a server is configured, each with
/// the sample HR data.
async fn databases() -> crate::workflows::testing::Databases {
    let databases = crate::workflows::testing::databases("investigation").await;
    for db in &databases {
        db.import_hr_csv(SAMPLE_DATA).await.unwrap();
    }
    databases
}

struct Desk {
    desk: InvestigationDesk,
    db: Database,
}

async fn finish(handle: Result<InvestigationHandle, WorkflowError>) -> Result<InvestigationView, WorkflowError> {
    let InvestigationHandle { mut progress, outcome } = handle?;
    while progress.next().await.is_some() {}
    outcome.await
}

fn changer_reply(text: &str) -> RespondRequest {
    RespondRequest {
        investigation_id: "INV-1002".into(),
        action_id: "INV-1002-changer".into(),
        role: ResponderRole::Changer,
        responder_id: "u003".into(),
        text: text.into(),
        decision: None,
        idempotency_key: None,
    }
}

fn is_not_found(result: Result<impl std::fmt::Debug, WorkflowError>, kind: &str, wanted: &str) -> bool {
    matches!(result, Err(WorkflowError::NotFound { what, ref id }) if what == kind && id == wanted)
}

/// Every id in an entry that a caller sees, as the caller knows it.
fn assert_callers_ids(entries: &[AuditEntry], investigation_id: &str) {
    for entry in entries {
        assert_eq!(entry.investigation_id, investigation_id, "{entry:?}");
        assert!(!entry.correlation_id.contains('/'), "{entry:?}");
        if let AuditRecord::Notification(action) = &entry.record {
            assert_eq!(action.investigation_id, investigation_id);
            assert!(!action.action_id.contains('/'), "{action:?}");
        }
    }
}

impl Desk {
    fn new(db: Database) -> Self {
        let model = Arc::new(ScriptedModel::from_fn("scripted", answer));
        let store: Arc<dyn InvestigationStore> = Arc::new(SqlInvestigationStore::new(db.clone()));
        let deps = InvestigationDeps::new(LlmClient::new(model), store.clone());
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(SqlCheckpointer::new(db.clone()));
        let runner = Runner::new(investigation::build(deps).unwrap(), checkpointer, RunnerConfig::default());
        Self { desk: InvestigationDesk::new(runner, store), db }
    }

    async fn start(&self, tenant: &Tenant, mutation_id: &str) -> Result<InvestigationView, WorkflowError> {
        let request = StartRequest { mutation: MutationRef::Id(mutation_id.into()), idempotency_key: None };
        finish(self.desk.start(tenant, request).await).await
    }

    async fn respond(&self, tenant: &Tenant, request: RespondRequest) -> Result<InvestigationView, WorkflowError> {
        finish(self.desk.respond(tenant, request).await).await
    }

    async fn trail(&self, tenant: &Tenant, id: &str) -> Result<Vec<AuditEntry>, WorkflowError> {
        self.desk.audit_trail(tenant, AuditKey::Investigation(id.into())).await
    }

    async fn action_ids(&self, tenant: &Tenant, recipient: &str, status: ActionStatus) -> Vec<(String, String)> {
        let (actions, _) = self.desk.pending_actions(tenant, Some(recipient), status, None, 100).await.unwrap();
        actions.into_iter().map(|a| (a.action_id, a.investigation_id)).collect()
    }

    async fn listed(&self, tenant: &Tenant, status: Option<Status>) -> Vec<String> {
        let (views, _) = self.desk.list(tenant, status, None, 100).await.unwrap();
        views.into_iter().map(|v| v.investigation_id).collect()
    }

    async fn change_investigation(&self, mutation_id: &str) -> String {
        self.db.hr_mutation(mutation_id).await.unwrap().unwrap().change_investigation
    }
}

fn one(id: &str) -> Vec<(String, String)> {
    vec![(format!("{id}-changer"), id.to_owned())]
}

#[tokio::test]
async fn one_mutation_is_investigated_by_each_tenant_on_its_own() {
    for db in databases().await {
        let d = Desk::new(db);
        for tenant in [acme(), globex(), Tenant::default()] {
            let view = d.start(&tenant, "1002").await.unwrap();
            assert_eq!(view.investigation_id, "INV-1002", "{tenant}");
            assert_eq!(view.status, Status::AwaitingUserResponse, "{tenant}");
            let awaiting: Vec<_> =
                view.actions.iter().map(|a| (a.action_id.as_str(), a.recipient_id.as_str())).collect();
            assert_eq!(awaiting, [("INV-1002-changer", "u003")], "{tenant}");
            let again = d.start(&tenant, "1002").await;
            assert!(
                matches!(&again, Err(WorkflowError::AlreadyExists { what: "investigation", id }) if id == "INV-1002"),
                "{tenant}: {again:?}"
            );
        }
        // Stored under each tenant's keys; the default tenant's are the ids.
        for (key, action) in [
            ("acme/INV-1002", "acme/INV-1002-changer"),
            ("globex/INV-1002", "globex/INV-1002-changer"),
            ("INV-1002", "INV-1002-changer"),
        ] {
            assert!(d.desk.runner().state(key).await.unwrap().is_some(), "{key}");
            assert!(d.db.investigation(key).await.unwrap().is_some(), "{key}");
            assert!(!d.db.audit_trail(key, None).await.unwrap().is_empty(), "{key}");
            assert_eq!(d.db.pending_action(action).await.unwrap().unwrap().investigation_id, key);
        }
        // The shared mutation's status follows the default tenant's investigation alone.
        assert_eq!(d.change_investigation("1002").await, "AwaitingUserResponse");

        let view = d.respond(&acme(), changer_reply("I stood in for u006, who was on vacation.")).await.unwrap();
        assert_eq!(view.status, Status::AwaitingManagerResponse);
        assert_eq!(
            view.actions.iter().map(|a| a.action_id.as_str()).collect::<Vec<_>>(),
            ["INV-1002-changer", "INV-1002-manager"]
        );
        for tenant in [globex(), Tenant::default()] {
            assert_eq!(d.desk.get(&tenant, "INV-1002").await.unwrap().status, Status::AwaitingUserResponse);
        }
        assert_eq!(d.change_investigation("1002").await, "AwaitingUserResponse", "acme's status stays in acme");

        // Pending actions: each tenant's, with its ids.
        assert_eq!(
            d.action_ids(&acme(), "u001", ActionStatus::Awaiting).await,
            [("INV-1002-manager".to_owned(), "INV-1002".to_owned())]
        );
        assert_eq!(d.action_ids(&acme(), "u003", ActionStatus::Answered).await, one("INV-1002"));
        assert!(d.action_ids(&acme(), "u003", ActionStatus::Awaiting).await.is_empty());
        for tenant in [globex(), Tenant::default()] {
            assert_eq!(d.action_ids(&tenant, "u003", ActionStatus::Awaiting).await, one("INV-1002"), "{tenant}");
            assert!(d.action_ids(&tenant, "u001", ActionStatus::Awaiting).await.is_empty(), "{tenant}");
            assert!(d.action_ids(&tenant, "u003", ActionStatus::Answered).await.is_empty(), "{tenant}");
        }
        assert!(d.action_ids(&acm_(), "u003", ActionStatus::Awaiting).await.is_empty());

        // Audit trails: each tenant's own, numbered from 1, with the caller's ids.
        let acme_trail = d.trail(&acme(), "INV-1002").await.unwrap();
        let globex_trail = d.trail(&globex(), "INV-1002").await.unwrap();
        assert!(acme_trail.len() > globex_trail.len());
        assert_eq!(
            acme_trail.iter().map(|e| e.seq).collect::<Vec<_>>(),
            (1..=acme_trail.len() as u32).collect::<Vec<_>>()
        );
        let shape =
            |trail: &[AuditEntry]| trail.iter().map(|e| (e.seq, e.actor.clone(), e.record.kind())).collect::<Vec<_>>();
        let default_trail = d.trail(&Tenant::default(), "INV-1002").await.unwrap();
        assert_eq!(shape(&globex_trail), shape(&default_trail), "the same steps, each tenant's own");
        assert_callers_ids(&acme_trail, "INV-1002");
        assert_callers_ids(&globex_trail, "INV-1002");
        assert!(acme_trail
            .iter()
            .any(|e| matches!(&e.record, AuditRecord::Reply { action_id, .. } if action_id == "INV-1002-changer")));
        assert!(!globex_trail.iter().any(|e| matches!(&e.record, AuditRecord::Reply { .. })));

        // By correlation id: the same id in every tenant, each tenant's entries only.
        let correlation = acme_trail
            .iter()
            .find(|e| matches!(&e.record, AuditRecord::Reply { .. }))
            .map(|e| e.correlation_id.clone())
            .unwrap();
        for (tenant, trail) in [(acme(), &acme_trail), (globex(), &globex_trail)] {
            let exchange = d.desk.audit_trail(&tenant, AuditKey::Correlation(correlation.clone())).await.unwrap();
            let expected: Vec<&AuditEntry> = trail.iter().filter(|e| e.correlation_id == correlation).collect();
            assert_eq!(exchange.iter().collect::<Vec<_>>(), expected, "{tenant}");
        }
        let none = d.desk.audit_trail(&acm_(), AuditKey::Correlation(correlation.clone())).await;
        assert!(is_not_found(none, "correlation", &correlation));

        // The SQL itself returns each tenant's rows only (the desk would drop others anyway).
        let store = d.desk.store();
        for (tenant, key) in [(acme(), "acme/INV-1002"), (globex(), "globex/INV-1002"), (Tenant::default(), "INV-1002")]
        {
            let rows = store.audit_by_correlation(&tenant, &correlation).await.unwrap();
            assert!(!rows.is_empty() && rows.iter().all(|e| e.investigation_id == key), "{tenant}: {rows:?}");
            let (actions, _) = store.actions(&tenant, None, None, None, 100).await.unwrap();
            assert!(!actions.is_empty() && actions.iter().all(|a| a.investigation_id == key), "{tenant}: {actions:?}");
            let (records, _) = store.list_investigations(&tenant, None, None, 10).await.unwrap();
            assert_eq!(records.iter().map(|r| r.investigation_id.as_str()).collect::<Vec<_>>(), [key], "{tenant}");
        }
        assert!(store.actions(&acm_(), None, None, None, 100).await.unwrap().0.is_empty());
        assert!(store.audit_by_correlation(&acm_(), &correlation).await.unwrap().is_empty());
    }
}

#[tokio::test]
async fn another_tenants_investigation_is_not_found() {
    for db in databases().await {
        let d = Desk::new(db);
        d.start(&acme(), "1002").await.unwrap();
        let correlation = d.trail(&acme(), "INV-1002").await.unwrap()[0].correlation_id.clone();
        for tenant in [globex(), Tenant::default(), acm_()] {
            assert!(is_not_found(d.desk.get(&tenant, "INV-1002").await, "investigation", "INV-1002"), "{tenant}");
            assert!(is_not_found(d.trail(&tenant, "INV-1002").await, "investigation", "INV-1002"), "{tenant}");
            let by_correlation = d.desk.audit_trail(&tenant, AuditKey::Correlation(correlation.clone())).await;
            assert!(is_not_found(by_correlation, "correlation", &correlation), "{tenant}");
            assert!(d.action_ids(&tenant, "u003", ActionStatus::Awaiting).await.is_empty(), "{tenant}");
            assert!(d.desk.list(&tenant, None, None, 10).await.unwrap().0.is_empty(), "{tenant}");
            let watch = d.desk.watch(&tenant, "INV-1002", 0).await.map(drop);
            assert!(is_not_found(watch, "investigation", "INV-1002"), "{tenant}");
            let reply = d.respond(&tenant, changer_reply("I stood in for u006, who was on vacation.")).await;
            assert!(is_not_found(reply, "investigation", "INV-1002"), "{tenant}");
        }
        // An id naming a tenant reaches nobody's investigation.
        for id in ["acme/INV-1002", "/acme/INV-1002"] {
            assert!(is_not_found(d.desk.get(&globex(), id).await, "investigation", id));
            assert!(is_not_found(d.desk.get(&Tenant::default(), id).await, "investigation", id));
        }
        let slash = d.start(&globex(), "acme/1002").await;
        assert!(matches!(slash, Err(WorkflowError::InvalidArgument { field: "mutation_id", .. })), "{slash:?}");
        // acme's investigation was left alone.
        let view = d.desk.get(&acme(), "INV-1002").await.unwrap();
        assert_eq!(view.status, Status::AwaitingUserResponse);
        assert_eq!(d.action_ids(&acme(), "u003", ActionStatus::Awaiting).await, one("INV-1002"));
    }
}

#[tokio::test]
async fn listings_and_their_pages_are_each_tenants_own() {
    for db in databases().await {
        let d = Desk::new(db);
        for mutation in ["1001", "1002", "1003"] {
            d.start(&acme(), mutation).await.unwrap();
            // Creation times order the listing; keep them apart.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        d.start(&globex(), "1002").await.unwrap();
        d.start(&Tenant::default(), "1001").await.unwrap();
        d.start(&acm_(), "1004").await.unwrap();

        assert_eq!(d.listed(&acme(), None).await, ["INV-1003", "INV-1002", "INV-1001"]);
        assert_eq!(d.listed(&acme(), Some(Status::AwaitingUserResponse)).await, ["INV-1003", "INV-1002"]);
        assert_eq!(d.listed(&acme(), Some(Status::AdvisoryReportGenerated)).await, ["INV-1001"]);
        assert_eq!(d.listed(&globex(), None).await, ["INV-1002"]);
        assert!(d.listed(&globex(), Some(Status::AdvisoryReportGenerated)).await.is_empty());
        assert_eq!(d.listed(&Tenant::default(), None).await, ["INV-1001"]);
        assert_eq!(d.listed(&acm_(), None).await, ["INV-1004"]);

        // Paging through acme's: two, then one; its token is refused to other tenants.
        let (page, token) = d.desk.list(&acme(), None, None, 2).await.unwrap();
        assert_eq!(page.iter().map(|v| v.investigation_id.as_str()).collect::<Vec<_>>(), ["INV-1003", "INV-1002"]);
        let token = token.expect("a second page");
        let (rest, next) = d.desk.list(&acme(), None, Some(&token), 2).await.unwrap();
        assert_eq!(rest.iter().map(|v| v.investigation_id.as_str()).collect::<Vec<_>>(), ["INV-1001"]);
        assert_eq!(next, None);
        for tenant in [globex(), Tenant::default(), acm_()] {
            let refused = d.desk.list(&tenant, None, Some(&token), 2).await;
            assert!(matches!(refused, Err(WorkflowError::InvalidArgument { field: "page_token", .. })), "{tenant}");
        }
        // The default tenant's pages, among other tenants' keys.
        let (page, token) = d.desk.list(&Tenant::default(), None, None, 1).await.unwrap();
        assert_eq!(page.len(), 1);
        assert_eq!(token, None);
    }
}

#[tokio::test]
async fn a_watch_sees_its_own_tenants_trail_only() {
    for db in databases().await {
        let d = Desk::new(db);
        d.start(&acme(), "1002").await.unwrap();
        d.start(&globex(), "1002").await.unwrap();
        let globex_seen = d.trail(&globex(), "INV-1002").await.unwrap().len() as u32;
        let mut acme_watch = d.desk.watch(&acme(), "INV-1002", 0).await.unwrap();
        let mut globex_watch = d.desk.watch(&globex(), "INV-1002", globex_seen).await.unwrap();

        // acme's invalid claim ends its investigation; its watch ends with the report.
        let view = d.respond(&acme(), changer_reply("I just did it.")).await.unwrap();
        assert_eq!(view.status, Status::AdvisoryReportGenerated);
        let mut watched = Vec::new();
        while let Some(entry) = tokio::time::timeout(Duration::from_secs(10), acme_watch.next()).await.unwrap() {
            watched.push(entry.unwrap());
        }
        assert_eq!(watched, d.trail(&acme(), "INV-1002").await.unwrap());
        assert_callers_ids(&watched, "INV-1002");

        // globex's watch saw none of it: its investigation still waits.
        let quiet = tokio::time::timeout(Duration::from_millis(1_200), globex_watch.next()).await;
        assert!(quiet.is_err(), "nothing new in globex: {quiet:?}");
        assert_eq!(d.desk.get(&globex(), "INV-1002").await.unwrap().status, Status::AwaitingUserResponse);
    }
}

/// A run a crash left in a tenant other than `default`: recovery finishes it and its records
/// land in that tenant.
#[tokio::test]
async fn a_recovered_run_writes_its_records_in_its_tenant() {
    for db in databases().await {
        let d = Desk::new(db);
        let mutation = d.desk.store().mutation("1001").await.unwrap().unwrap().mutation;
        let mut state = InvestigationState::default();
        state.apply(InvestigationUpdate {
            investigation_id: Some("INV-1001".into()),
            mutation: Some(Some(mutation)),
            status: Some(Status::Pending),
            created_at_ms: Some(investigation::now_ms()),
            ..Default::default()
        });
        let thread = "globex/INV-1001";
        let checkpoint = Checkpoint {
            thread_id: thread.into(),
            workflow: investigation::NAME.into(),
            version: 1,
            state: serde_json::to_vec(&state).unwrap(),
            next: Some("investigation_agent".into()),
            pending: Default::default(),
            run: RunMarker {
                run_id: "crashed".into(),
                idempotency_key: None,
                fingerprint: None,
                status: RunStatus::Running,
                step: 0,
                output: None,
                owner: None,
            },
            created_at: SystemTime::now() - Duration::from_secs(1),
        };
        d.desk.runner().checkpointer().put(&checkpoint).await.unwrap();
        assert_eq!(d.desk.runner().recover().await.unwrap(), 1);

        let view = d.desk.get(&globex(), "INV-1001").await.unwrap();
        assert_eq!(view.status, Status::AdvisoryReportGenerated);
        assert_eq!(d.listed(&globex(), None).await, ["INV-1001"]);
        let trail = d.trail(&globex(), "INV-1001").await.unwrap();
        assert_eq!(trail.len(), view.audit.len());
        assert_callers_ids(&trail, "INV-1001");
        assert!(d.db.investigation(thread).await.unwrap().is_some());
        for tenant in [acme(), Tenant::default()] {
            assert!(is_not_found(d.desk.get(&tenant, "INV-1001").await, "investigation", "INV-1001"), "{tenant}");
            assert!(d.listed(&tenant, None).await.is_empty(), "{tenant}");
        }
        assert_eq!(d.change_investigation("1001").await, "Pending", "another tenant's status stays out of HR data");
    }
}

/// The real store with two hooks for tests: one status read held up on request (the next
/// `investigation` call after [`HookedStore::hold`] reports that it started, then waits to be
/// let go before it reads), and audit writes refused on request ([`HookedStore::refuse_audit_writes`]).
/// Everything else goes straight to the real store.
struct HookedStore {
    inner: Arc<dyn InvestigationStore>,
    hold: std::sync::Mutex<Option<(tokio::sync::oneshot::Sender<()>, tokio::sync::oneshot::Receiver<()>)>>,
    refused_audit_writes: std::sync::atomic::AtomicU32,
}

impl HookedStore {
    fn new(inner: Arc<dyn InvestigationStore>) -> Self {
        Self { inner, hold: Default::default(), refused_audit_writes: Default::default() }
    }

    /// Holds the next status read: resolves `started` when it begins, reads when `go` fires.
    fn hold(&self) -> (tokio::sync::oneshot::Receiver<()>, tokio::sync::oneshot::Sender<()>) {
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let (go_tx, go_rx) = tokio::sync::oneshot::channel();
        *self.hold.lock().unwrap() = Some((started_tx, go_rx));
        (started_rx, go_tx)
    }

    /// The next `count` audit writes fail, as a database that is down would fail them.
    fn refuse_audit_writes(&self, count: u32) {
        self.refused_audit_writes.store(count, SeqCst);
    }
}

#[async_trait::async_trait]
impl InvestigationStore for HookedStore {
    async fn investigation(
        &self,
        investigation_id: &str,
    ) -> Result<Option<investigation::InvestigationRecord>, investigation::StoreFailure> {
        let held = self.hold.lock().unwrap().take();
        if let Some((started, go)) = held {
            let _ = started.send(());
            let _ = go.await;
        }
        self.inner.investigation(investigation_id).await
    }

    async fn user(&self, id: &str) -> Result<Option<investigation::data::User>, investigation::StoreFailure> {
        self.inner.user(id).await
    }
    async fn users(&self) -> Result<Vec<investigation::data::User>, investigation::StoreFailure> {
        self.inner.users().await
    }
    async fn role(&self, id: &str) -> Result<Option<investigation::data::Role>, investigation::StoreFailure> {
        self.inner.role(id).await
    }
    async fn role_grants(&self, id: &str) -> Result<Vec<investigation::data::RoleGrant>, investigation::StoreFailure> {
        self.inner.role_grants(id).await
    }
    async fn direct_grants(
        &self,
        id: &str,
    ) -> Result<Vec<investigation::data::DirectGrant>, investigation::StoreFailure> {
        self.inner.direct_grants(id).await
    }
    async fn absences(
        &self,
        kind: investigation::AbsenceKind,
        id: &str,
    ) -> Result<Vec<investigation::data::Absence>, investigation::StoreFailure> {
        self.inner.absences(kind, id).await
    }
    async fn mutation(&self, id: &str) -> Result<Option<investigation::StoredMutation>, investigation::StoreFailure> {
        self.inner.mutation(id).await
    }
    async fn insert_mutation(&self, mutation: &investigation::HrMutation) -> Result<bool, investigation::StoreFailure> {
        self.inner.insert_mutation(mutation).await
    }
    async fn set_change_investigation(&self, id: &str, status: Status) -> Result<(), investigation::StoreFailure> {
        self.inner.set_change_investigation(id, status).await
    }
    async fn save_investigation(
        &self,
        record: &investigation::InvestigationRecord,
    ) -> Result<(), investigation::StoreFailure> {
        self.inner.save_investigation(record).await
    }
    async fn list_investigations(
        &self,
        tenant: &Tenant,
        status: Option<Status>,
        after: Option<investigation::ListCursor>,
        limit: usize,
    ) -> Result<(Vec<investigation::InvestigationRecord>, Option<investigation::ListCursor>), investigation::StoreFailure>
    {
        self.inner.list_investigations(tenant, status, after, limit).await
    }
    async fn write_audit(&self, entries: &[AuditEntry]) -> Result<(), investigation::StoreFailure> {
        let refused = &self.refused_audit_writes;
        if refused.fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1)).is_ok() {
            return Err(investigation::StoreFailure("the database is down (test hook)".into()));
        }
        self.inner.write_audit(entries).await
    }
    async fn audit_trail(&self, id: &str, after_seq: u32) -> Result<Vec<AuditEntry>, investigation::StoreFailure> {
        self.inner.audit_trail(id, after_seq).await
    }
    async fn audit_by_correlation(
        &self,
        tenant: &Tenant,
        correlation_id: &str,
    ) -> Result<Vec<AuditEntry>, investigation::StoreFailure> {
        self.inner.audit_by_correlation(tenant, correlation_id).await
    }
    async fn save_action(&self, action: &investigation::PendingAction) -> Result<(), investigation::StoreFailure> {
        self.inner.save_action(action).await
    }
    async fn actions(
        &self,
        tenant: &Tenant,
        recipient_id: Option<&str>,
        status: Option<ActionStatus>,
        after: Option<investigation::ActionCursor>,
        limit: usize,
    ) -> Result<(Vec<investigation::PendingAction>, Option<investigation::ActionCursor>), investigation::StoreFailure>
    {
        self.inner.actions(tenant, recipient_id, status, after, limit).await
    }
}

/// The investigation finishes while a watch is between its reads: the watch reads the status
/// (held here until the run has finished, so it reads it final) and then the trail, and ends
/// only after the entries the run wrote. Reading the trail first, a watch saw nothing new, read
/// the status as final and ended without them.
#[tokio::test]
async fn a_watch_ends_only_after_the_entries_of_a_run_that_finished_between_its_reads() {
    for db in databases().await {
        let inner: Arc<dyn InvestigationStore> = Arc::new(SqlInvestigationStore::new(db.clone()));
        let held = Arc::new(HookedStore::new(inner.clone()));
        let model = Arc::new(ScriptedModel::from_fn("scripted", answer));
        let deps = InvestigationDeps::new(LlmClient::new(model), inner);
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(SqlCheckpointer::new(db.clone()));
        let runner = Runner::new(investigation::build(deps).unwrap(), checkpointer, RunnerConfig::default());
        let d = Desk { desk: InvestigationDesk::new(runner, held.clone()), db };

        d.start(&acme(), "1002").await.unwrap();
        let seen = d.trail(&acme(), "INV-1002").await.unwrap();
        let mut watch = d.desk.watch(&acme(), "INV-1002", seen.last().unwrap().seq).await.unwrap();
        let (started, go) = held.hold();
        // The watch task's first status read is now held; finish the investigation meanwhile.
        let first = tokio::spawn(async move { watch.next().await.map(|e| (e, watch)) });
        tokio::time::timeout(Duration::from_secs(10), started).await.unwrap().unwrap();
        let view = d.respond(&acme(), changer_reply("I just did it.")).await.unwrap();
        assert_eq!(view.status, Status::AdvisoryReportGenerated);
        go.send(()).unwrap();

        let (entry, mut watch) = tokio::time::timeout(Duration::from_secs(10), first)
            .await
            .unwrap()
            .unwrap()
            .expect("the watch shows the run's entries before it ends");
        let mut watched = vec![entry.unwrap()];
        while let Some(entry) = tokio::time::timeout(Duration::from_secs(10), watch.next()).await.unwrap() {
            watched.push(entry.unwrap());
        }
        let trail = d.trail(&acme(), "INV-1002").await.unwrap();
        assert_eq!(watched, trail[seen.len()..], "every entry after the ones seen, and then the end");
    }
}

/// The manager replies, and the agent cannot write its records through all its attempts (the
/// database is down), then the database is back: the escalation records the reply the failed
/// agent was given, since the manager cannot send it again. The action is answered, the reply
/// is in the trail and the index, and nothing awaits anyone.
#[tokio::test]
async fn a_managers_reply_the_agent_could_not_record_is_recorded_by_the_escalation() {
    for db in databases().await {
        let store = Arc::new(HookedStore::new(Arc::new(SqlInvestigationStore::new(db.clone()))));
        let model = Arc::new(ScriptedModel::from_fn("scripted", answer));
        let mut deps = InvestigationDeps::new(LlmClient::new(model), store.clone());
        deps.retry = RetryPolicy::attempts(3).with_backoff(Duration::from_millis(1), Duration::from_millis(5));
        let checkpointer: Arc<dyn Checkpointer> = Arc::new(SqlCheckpointer::new(db.clone()));
        let runner = Runner::new(investigation::build(deps).unwrap(), checkpointer, RunnerConfig::default());
        let d = Desk { desk: InvestigationDesk::new(runner, store.clone()), db };

        d.start(&acme(), "1002").await.unwrap();
        let view = d.respond(&acme(), changer_reply("I stood in for u006, who was on vacation.")).await.unwrap();
        assert_eq!(view.status, Status::AwaitingManagerResponse);

        store.refuse_audit_writes(3);
        let manager = RespondRequest {
            action_id: "INV-1002-manager".into(),
            role: ResponderRole::Manager,
            responder_id: "u001".into(),
            text: "Fine by me.".into(),
            decision: Some(investigation::Decision::Approve),
            ..changer_reply("")
        };
        let view = d.respond(&acme(), manager).await.unwrap();
        assert_eq!(store.refused_audit_writes.load(SeqCst), 0, "every attempt of the agent was refused");
        let statuses: Vec<Status> = view.status_history().iter().map(|c| c.to).collect();
        assert_eq!(
            statuses[statuses.len() - 3..],
            [Status::AwaitingManagerResponse, Status::ManualInterventionRequired, Status::AdvisoryReportGenerated],
            "{statuses:?}"
        );
        assert!(view.manager.is_none(), "the agent's verdict was not recorded; the reply is");
        let manager_action = view.actions.iter().find(|a| a.action_id == "INV-1002-manager").unwrap();
        assert_eq!(manager_action.status, ActionStatus::Answered);
        assert_eq!(manager_action.reply.as_ref().map(|r| r.text.as_str()), Some("Fine by me."));
        assert!(d.action_ids(&acme(), "u001", ActionStatus::Awaiting).await.is_empty());
        assert_eq!(d.action_ids(&acme(), "u001", ActionStatus::Answered).await, [(
            "INV-1002-manager".to_owned(),
            "INV-1002".to_owned()
        )]);
        let trail = d.trail(&acme(), "INV-1002").await.unwrap();
        let replies: Vec<(&str, &str)> = trail
            .iter()
            .filter_map(|e| match &e.record {
                AuditRecord::Reply { action_id, reply } => Some((action_id.as_str(), reply.responder_id.as_str())),
                _ => None,
            })
            .collect();
        assert_eq!(replies, [("INV-1002-changer", "u003"), ("INV-1002-manager", "u001")]);
        assert!(trail.iter().any(|e| matches!(&e.record, AuditRecord::Error(f) if f.attempts == 3)), "{trail:?}");
        assert_eq!(view.unrecorded_reply, None, "recorded, so no longer kept aside");
    }
}

/// A reply the agent cannot read (one a different version of the service accepted) fails the
/// agent, and the escalation cannot record it either; it escalates all the same, so the
/// investigation ends in manual intervention with the failure in its trail instead of failing
/// for good, and the action is answered, as its interrupt is.
#[tokio::test]
async fn a_reply_that_does_not_decode_still_escalates() {
    for db in databases().await {
        let d = Desk::new(db);
        d.start(&Tenant::default(), "1002").await.unwrap();
        let resume = RunInput::Resume { interrupt_id: "INV-1002-changer".into(), value: json!({"unexpected": 1}) };
        let mut handle = d.desk.runner().start(RunRequest::new("INV-1002", resume)).await.unwrap();
        while handle.events.recv().await.is_some() {}
        let outcome = handle.wait().await.unwrap();
        assert_eq!(outcome.status, RunStatus::Completed);
        let view = d.desk.get(&Tenant::default(), "INV-1002").await.unwrap();
        let statuses: Vec<Status> = view.status_history().iter().map(|c| c.to).collect();
        assert_eq!(
            statuses[statuses.len() - 3..],
            [Status::AwaitingUserResponse, Status::ManualInterventionRequired, Status::AdvisoryReportGenerated],
            "{statuses:?}"
        );
        let trail = d.trail(&Tenant::default(), "INV-1002").await.unwrap();
        assert!(
            trail.iter().any(|e| matches!(&e.record, AuditRecord::Error(f) if f.message.contains("does not decode"))),
            "{trail:?}"
        );
        assert!(!trail.iter().any(|e| matches!(&e.record, AuditRecord::Reply { .. })), "no reply to record");
        assert_eq!(d.action_ids(&Tenant::default(), "u003", ActionStatus::Answered).await, one("INV-1002"));
        assert_eq!(view.unrecorded_reply, None);
    }
}
