//! What callers do with investigations: start one, answer a pending action, read, list, watch,
//! read the audit trail and the pending actions. Runs go through the runner; reads of records
//! go to the store.
//!
//! Every entry point takes the caller's tenant: the investigation's thread and its records are
//! under `tenant.key(investigation_id)`, so another tenant's investigation is as missing as one
//! nobody started, and records read from the store are shown with the caller's ids.

use std::{future::Future, pin::Pin, sync::Arc, time::Duration};

use frontdesk_runtime::{BusyPolicy, Event, EventKind, RunError, RunInput, RunRequest, Runner, ThreadMode};
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};
use tokio::sync::mpsc;
use tokio_stream_free::receiver_stream;

use super::{
    data::{ActionCursor, InvestigationStore, ListCursor, StoreFailure},
    types::*,
    InvestigationState, InvestigationUpdate,
};
use crate::{page_token, tenant::SEPARATOR, Tenant, WorkflowError};

/// The investigation's view: its state.
pub type InvestigationView = InvestigationState;

/// How often a watch re-reads the trail when nothing in this process told it of a change
/// (another replica may be the one writing).
const WATCH_POLL: Duration = Duration::from_millis(500);

/// Longest reply a person may send.
pub const MAX_REPLY_CHARS: usize = 4_000;

#[derive(Debug, Clone, PartialEq)]
pub enum MutationRef {
    /// A mutation of the HR data.
    Id(String),
    /// A mutation given inline, recorded with the HR data.
    Inline(HrMutation),
}

#[derive(Debug, Clone, PartialEq)]
pub struct StartRequest {
    pub mutation: MutationRef,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RespondRequest {
    pub investigation_id: String,
    pub action_id: String,
    pub role: ResponderRole,
    pub responder_id: String,
    pub text: String,
    pub decision: Option<Decision>,
    pub idempotency_key: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum AuditKey {
    Investigation(String),
    Correlation(String),
}

/// What a start or a reply streams before its outcome: each run event, and right after a
/// node's event the agent messages and status changes that node wrote.
#[derive(Debug, Clone, PartialEq)]
pub enum InvestigationProgress {
    Event(Event),
    Message(AgentMessage),
    Status(StatusChange),
}

type OutcomeFuture = Pin<Box<dyn Future<Output = Result<InvestigationView, WorkflowError>> + Send>>;

pub struct InvestigationHandle {
    pub progress: Pin<Box<dyn Stream<Item = InvestigationProgress> + Send>>,
    /// The investigation as the run left it.
    pub outcome: OutcomeFuture,
}

#[derive(Clone)]
pub struct InvestigationDesk {
    runner: Arc<Runner<InvestigationState>>,
    store: Arc<dyn InvestigationStore>,
    /// Wakes watchers of this process when a run of it ends.
    changed: Arc<tokio::sync::Notify>,
}

fn store_error(error: StoreFailure) -> WorkflowError {
    WorkflowError::Store(frontdesk_runtime::CheckpointError::Unavailable(Box::new(error)))
}

fn invalid(field: &'static str, reason: impl Into<String>) -> WorkflowError {
    WorkflowError::InvalidArgument { field, reason: reason.into() }
}

/// The investigation of a mutation: one per mutation in each tenant.
pub fn investigation_id(mutation_id: &str) -> String {
    format!("INV-{mutation_id}")
}

/// An audit entry read from the store, as `tenant` is shown it; `None` for another tenant's.
fn own_entry(tenant: &Tenant, mut entry: AuditEntry) -> Option<AuditEntry> {
    entry.investigation_id = tenant.id(&entry.investigation_id)?.to_owned();
    Some(entry)
}

/// A pending action read from the store, as `tenant` is shown it; `None` for another tenant's.
fn own_action(tenant: &Tenant, mut action: PendingAction) -> Option<PendingAction> {
    action.investigation_id = tenant.id(&action.investigation_id)?.to_owned();
    action.action_id = tenant.id(&action.action_id)?.to_owned();
    Some(action)
}

fn fingerprint(parts: &[&str]) -> String {
    let mut hasher = Sha256::new();
    for part in parts {
        hasher.update(part.len().to_le_bytes());
        hasher.update(part.as_bytes());
    }
    format!("{:x}", hasher.finalize())
}

/// Checks a mutation given inline.
fn validate(mutation: &HrMutation) -> Result<(), WorkflowError> {
    let id_like = |field: &'static str, value: &str| {
        if value.is_empty() {
            Err(invalid(field, "is required"))
        } else if value.len() > 64 || !value.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) {
            Err(invalid(field, "must be 1-64 letters, digits, '-', '_' or '.'"))
        } else {
            Ok(())
        }
    };
    id_like("inline_mutation.mutation_id", &mutation.mutation_id)?;
    id_like("inline_mutation.changer_id", &mutation.changer_id)?;
    id_like("inline_mutation.target_user_id", &mutation.target_user_id)?;
    id_like("inline_mutation.system", &mutation.system)?;
    if mutation.change_type.is_empty() || mutation.change_type.len() > 64 {
        return Err(invalid("inline_mutation.change_type", "must be 1-64 characters"));
    }
    if mutation.description.chars().count() > 1000 {
        return Err(invalid("inline_mutation.description", "must be at most 1000 characters"));
    }
    Ok(())
}

/// The agent messages and status changes a node's update wrote, for the progress stream.
fn written(event: &Event) -> Vec<InvestigationProgress> {
    let EventKind::NodeFinished { update_json, .. } = &event.kind else { return Vec::new() };
    let Ok(update) = serde_json::from_str::<InvestigationUpdate>(update_json) else { return Vec::new() };
    update
        .audit
        .unwrap_or_default()
        .into_iter()
        .filter_map(|entry| match entry.record {
            AuditRecord::Message(message) => Some(InvestigationProgress::Message(message)),
            AuditRecord::StatusChange(change) => Some(InvestigationProgress::Status(change)),
            _ => None,
        })
        .collect()
}

impl InvestigationDesk {
    pub fn new(runner: Runner<InvestigationState>, store: Arc<dyn InvestigationStore>) -> Self {
        Self { runner: Arc::new(runner), store, changed: Arc::new(tokio::sync::Notify::new()) }
    }

    pub fn runner(&self) -> &Runner<InvestigationState> {
        &self.runner
    }

    pub fn store(&self) -> &Arc<dyn InvestigationStore> {
        &self.store
    }

    /// Starts the investigation of a mutation in `tenant`. Mutations are shared by every tenant
    /// (an inline one is recorded with the HR data); the investigation is the tenant's own.
    pub async fn start(&self, tenant: &Tenant, request: StartRequest) -> Result<InvestigationHandle, WorkflowError> {
        crate::idempotency::validate_key(request.idempotency_key.as_deref())?;
        let mutation = match request.mutation {
            MutationRef::Id(id) => {
                if id.is_empty() {
                    return Err(invalid("mutation_id", "is required"));
                }
                // The investigation id is derived from it and must not name a tenant.
                if id.contains(SEPARATOR) {
                    return Err(invalid("mutation_id", "must not contain '/'"));
                }
                let stored = self.store.mutation(&id).await.map_err(store_error)?;
                stored.ok_or(WorkflowError::NotFound { what: "mutation", id })?.mutation
            }
            MutationRef::Inline(mutation) => {
                validate(&mutation)?;
                if !self.store.insert_mutation(&mutation).await.map_err(store_error)? {
                    let stored = self.store.mutation(&mutation.mutation_id).await.map_err(store_error)?;
                    if stored.map(|s| s.mutation).as_ref() != Some(&mutation) {
                        return Err(WorkflowError::AlreadyExists { what: "mutation", id: mutation.mutation_id });
                    }
                }
                mutation
            }
        };
        let id = investigation_id(&mutation.mutation_id);
        let input = InvestigationUpdate {
            investigation_id: Some(id.clone()),
            mutation: Some(Some(mutation.clone())),
            status: Some(Status::Pending),
            created_at_ms: Some(now_ms()),
            ..Default::default()
        };
        let mut run = RunRequest::new(tenant.key(&id), RunInput::Update(input));
        run.mode = ThreadMode::New;
        run.fingerprint = Some(fingerprint(&["start", &mutation.mutation_id]));
        run.idempotency_key = request.idempotency_key;
        self.run(tenant, id, run).await
    }

    /// Answers a pending action. The reply is checked against the action (its role and
    /// recipient) before the run resumes the interrupt, which accepts it only once.
    pub async fn respond(
        &self,
        tenant: &Tenant,
        request: RespondRequest,
    ) -> Result<InvestigationHandle, WorkflowError> {
        let RespondRequest { investigation_id, action_id, role, responder_id, text, decision, idempotency_key } =
            request;
        if investigation_id.is_empty() {
            return Err(invalid("investigation_id", "is required"));
        }
        if action_id.is_empty() {
            return Err(invalid("action_id", "is required"));
        }
        if responder_id.is_empty() {
            return Err(invalid("responder_id", "is required"));
        }
        if text.chars().count() > MAX_REPLY_CHARS {
            // A message's length is the caller's to fix, as on every other workflow's text.
            return Err(invalid("text", format!("must be at most {MAX_REPLY_CHARS} characters")));
        }
        WorkflowError::reject_nul("text", &text)?;
        crate::idempotency::validate_key(idempotency_key.as_deref())?;
        match role {
            ResponderRole::Changer if text.trim().is_empty() => {
                return Err(invalid("text", "the changer's clarification is required"))
            }
            ResponderRole::Changer if decision.is_some() => {
                return Err(invalid("decision", "only the manager decides"))
            }
            ResponderRole::Manager if decision.is_none() => {
                return Err(invalid("decision", "the manager must approve or deny"))
            }
            _ => {}
        }
        let key = tenant.key(&investigation_id);
        let (_, checkpoint) = self
            .runner
            .state(&key)
            .await
            .map_err(|e| WorkflowError::run_on("investigation", investigation_id.clone(), e))?
            .ok_or_else(|| WorkflowError::NotFound { what: "investigation", id: investigation_id.clone() })?;
        // An action not pending is left to the runner, which tells an answered one from an
        // unknown one; a pending one must be answered by its recipient.
        if let Some(pending) = checkpoint.pending.interrupt(&action_id) {
            let action: PendingAction = serde_json::from_str(&pending.payload)
                .map_err(|source| WorkflowError::Corrupt { id: investigation_id.clone(), source })?;
            if action.recipient_role != role || action.recipient_id != responder_id {
                return Err(WorkflowError::WrongResponder {
                    action_id,
                    expected: format!("{} {}", action.recipient_role.as_str(), action.recipient_id),
                });
            }
        }
        let decision_name = match decision {
            Some(Decision::Approve) => "approve",
            Some(Decision::Deny) => "deny",
            None => "",
        };
        let print = fingerprint(&["respond", &action_id, role.as_str(), &responder_id, &text, decision_name]);
        let reply = Reply { role, responder_id, text, decision };
        let value =
            serde_json::to_value(&reply).map_err(|source| WorkflowError::Corrupt { id: action_id.clone(), source })?;
        let mut run = RunRequest::new(key, RunInput::Resume { interrupt_id: action_id, value });
        // Two replies racing for one action: the second waits for the first and then finds it
        // answered, rather than failing as busy.
        run.busy = BusyPolicy::Queue;
        run.fingerprint = Some(print);
        run.idempotency_key = idempotency_key;
        self.run(tenant, investigation_id, run).await
    }

    /// Runs `request` on the thread of `tenant`'s investigation `id`.
    async fn run(
        &self,
        tenant: &Tenant,
        id: String,
        request: RunRequest<InvestigationUpdate>,
    ) -> Result<InvestigationHandle, WorkflowError> {
        let handle = self
            .runner
            .start(request)
            .await
            .map_err(|error| WorkflowError::run_on("investigation", id.clone(), error))?;
        let (events, outcome, _cancel) = handle.into_parts();
        let progress = events.flat_map(|event| {
            let mut items = vec![];
            let extra = written(&event);
            items.push(InvestigationProgress::Event(event));
            items.extend(extra);
            futures::stream::iter(items)
        });
        let desk = self.clone();
        let tenant = tenant.clone();
        let outcome = Box::pin(async move {
            let result = outcome.await.unwrap_or(Err(RunError::Lost));
            desk.changed.notify_waiters();
            result.map_err(|error| WorkflowError::run_on("investigation", id.clone(), error))?;
            desk.get(&tenant, &id).await
        });
        Ok(InvestigationHandle { progress: Box::pin(progress), outcome })
    }

    pub async fn get(&self, tenant: &Tenant, investigation_id: &str) -> Result<InvestigationView, WorkflowError> {
        let found = self
            .runner
            .state(&tenant.key(investigation_id))
            .await
            .map_err(|e| WorkflowError::run_on("investigation", investigation_id, e))?;
        found
            .map(|(state, _)| state)
            .filter(|state| !state.investigation_id.is_empty())
            .ok_or_else(|| WorkflowError::NotFound { what: "investigation", id: investigation_id.to_owned() })
    }

    /// `tenant`'s investigations, most recently started first, paged with opaque tokens. A
    /// token is bound to the tenant and the status filter, and its cursor holds a storage key
    /// of the tenant's, so no token pages into another tenant's investigations.
    pub async fn list(
        &self,
        tenant: &Tenant,
        status: Option<Status>,
        page_token: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<InvestigationView>, Option<String>), WorkflowError> {
        // The default tenant's query is the status alone, as before tenants.
        let query = format!("{}{}", tenant.key_prefix(), status.map_or("", Status::as_str));
        let after: Option<ListCursor> = page_token::decode("investigations", &query, page_token)?;
        if after.as_ref().is_some_and(|cursor| !tenant.owns(&cursor.investigation_id)) {
            return Err(invalid("page_token", "belongs to another listing or query"));
        }
        let (records, next) =
            self.store.list_investigations(tenant, status, after, limit).await.map_err(store_error)?;
        let mut views = Vec::with_capacity(records.len());
        for record in records {
            // The store lists the tenant's keys only; this keeps it so whatever the store does.
            if let Some(id) = tenant.id(&record.investigation_id) {
                views.push(self.get(tenant, id).await?);
            }
        }
        Ok((views, next.map(|cursor| page_token::encode("investigations", &query, &cursor))))
    }

    pub async fn audit_trail(&self, tenant: &Tenant, key: AuditKey) -> Result<Vec<AuditEntry>, WorkflowError> {
        match key {
            AuditKey::Investigation(id) => {
                if id.is_empty() {
                    return Err(invalid("investigation_id", "is required"));
                }
                let key = tenant.key(&id);
                if self.store.investigation(&key).await.map_err(store_error)?.is_none() {
                    return Err(WorkflowError::NotFound { what: "investigation", id });
                }
                let entries = self.store.audit_trail(&key, 0).await.map_err(store_error)?;
                Ok(entries.into_iter().filter_map(|entry| own_entry(tenant, entry)).collect())
            }
            AuditKey::Correlation(id) => {
                if id.is_empty() {
                    return Err(invalid("correlation_id", "is required"));
                }
                let entries = self.store.audit_by_correlation(tenant, &id).await.map_err(store_error)?;
                let entries: Vec<AuditEntry> =
                    entries.into_iter().filter_map(|entry| own_entry(tenant, entry)).collect();
                if entries.is_empty() {
                    return Err(WorkflowError::NotFound { what: "correlation", id });
                }
                Ok(entries)
            }
        }
    }

    /// `tenant`'s pending actions, oldest first.
    pub async fn pending_actions(
        &self,
        tenant: &Tenant,
        recipient_id: Option<&str>,
        status: ActionStatus,
        page_token: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<PendingAction>, Option<String>), WorkflowError> {
        // The tenant, recipient and status: a token is good for the listing it came from only.
        let query = format!("{}\n{}\n{}", tenant.key_prefix(), recipient_id.unwrap_or_default(), status.as_str());
        let after: Option<ActionCursor> = page_token::decode("pending_actions", &query, page_token)?;
        if after.as_ref().is_some_and(|cursor| !tenant.owns(&cursor.action_id)) {
            return Err(invalid("page_token", "belongs to another listing or query"));
        }
        let (actions, next) =
            self.store.actions(tenant, recipient_id, Some(status), after, limit).await.map_err(store_error)?;
        let actions = actions.into_iter().filter_map(|action| own_action(tenant, action)).collect();
        Ok((actions, next.map(|cursor| page_token::encode("pending_actions", &query, &cursor))))
    }

    /// The trail after `after_seq`, then each entry as it is written, until the report is
    /// generated. Entries come from the store, so a watch sees what any replica writes.
    pub async fn watch(
        &self,
        tenant: &Tenant,
        investigation_id: &str,
        after_seq: u32,
    ) -> Result<Pin<Box<dyn Stream<Item = Result<AuditEntry, WorkflowError>> + Send>>, WorkflowError> {
        let key = tenant.key(investigation_id);
        if self.store.investigation(&key).await.map_err(store_error)?.is_none() {
            return Err(WorkflowError::NotFound { what: "investigation", id: investigation_id.to_owned() });
        }
        let (tx, rx) = mpsc::channel(32);
        let desk = self.clone();
        let tenant = tenant.clone();
        let stopped = self.runner.registry().stopped();
        tokio::spawn(async move {
            let mut stopped = std::pin::pin!(stopped);
            let mut after = after_seq;
            let mut stopping = false;
            loop {
                let changed = desk.changed.notified();
                // Read before the trail: a node writes its audit entries before the status they
                // lead to, so a status read as final here means the read below holds every entry
                // there will be. Read after it, the status could turn final between the two
                // reads and the watch would end without the entries written in between.
                let finished_before =
                    matches!(desk.store.investigation(&key).await, Ok(Some(r)) if r.status.is_final());
                let entries = match desk.store.audit_trail(&key, after).await {
                    Ok(entries) => entries,
                    Err(error) => {
                        let _ = tx.send(Err(store_error(error))).await;
                        return;
                    }
                };
                let read_any = !entries.is_empty();
                let mut finished = false;
                for entry in entries {
                    after = entry.seq;
                    finished |= matches!(&entry.record, AuditRecord::StatusChange(c) if c.to.is_final());
                    let Some(entry) = own_entry(&tenant, entry) else { continue };
                    if tx.send(Ok(entry)).await.is_err() {
                        return;
                    }
                }
                if finished {
                    return;
                }
                // Watching from past the end of a finished investigation: nothing more will come.
                if !read_any && finished_before {
                    return;
                }
                // The server is stopping: the watch ends with what its runs wrote (read above),
                // and the caller watches again from there, elsewhere or after the restart,
                // rather than losing the stream with the connection.
                if stopping {
                    let _ = tx.send(Err(WorkflowError::ShuttingDown)).await;
                    return;
                }
                tokio::select! {
                    _ = changed => {}
                    _ = tokio::time::sleep(WATCH_POLL) => {}
                    _ = &mut stopped => stopping = true,
                    _ = tx.closed() => return,
                }
            }
        });
        Ok(Box::pin(receiver_stream(rx)))
    }
}

mod tokio_stream_free {
    use futures::Stream;
    use tokio::sync::mpsc;

    /// A receiver as a stream.
    pub fn receiver_stream<T: Send + 'static>(rx: mpsc::Receiver<T>) -> impl Stream<Item = T> + Send + 'static {
        futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
    }
}
