//! The triage desk around the graphs. Before the ticket's run it checks the customer (no model
//! call for an unknown one), replays idempotent retries and, when the customer has active
//! tickets, runs the ticket-matching graph (`matcher`) to pick the ticket the message joins; as
//! the ticket's run completes, a resolved or escalated ticket is archived and its thread erased
//! (`ArchiveHandoff`); after it, the outcome is recorded under the request's idempotency key.
//!
//! Archive-then-erase spans two stores with no shared transaction, so it is made safe by order
//! and repair: the ticket is archived first (an idempotent save), then its thread erased.
//! Whenever a customer's active tickets are read, and at start-up before recovery, a ticket that
//! is already archived has its thread deleted, and one whose last run completed with a
//! completing action (its archive save failed) is archived first. A crash at any point therefore
//! never loses a ticket, and no reader ever sees one both archived and active. For the same
//! reason the erase need not be durable before the call returns
//! (`Checkpointer::delete_thread_unsynced`): a thread a crash brings back is an archived
//! ticket's, and is deleted again on the next read.
//!
//! Tenancy (`crate::tenant`): a ticket's thread is `<customer key>:<ticket id>`, the customer
//! key being `tenant.key(customer_id)`; its archive row is keyed by `tenant.key(ticket_id)` and
//! `tenant.key(customer_id)`, and idempotency records by the customer key. The state keeps the
//! caller's ids (the nodes look the customer up in the shared directory, the matcher shows
//! ticket ids to the model), so what a caller sees needs no translation; paths that only have
//! a thread (the archive handoff, repairs) take the tenant's scope from its id
//! (`thread_scope`).

use std::{
    future::Future,
    pin::Pin,
    sync::Arc,
    time::{Duration, SystemTime},
};

use async_trait::async_trait;
use frontdesk_llm::LlmClient;
use frontdesk_runtime::{
    Checkpoint, CompletedRun, Completion, Event, EventKind, GraphError, Handoff, HandoffError, Log, RunError,
    RunEvents, RunHandle, RunInput, RunRequest, RunStatus, Runner, ThreadMode, ThreadQuery, UnfinishedRun, Usage,
};
use futures::Stream;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use tokio::sync::mpsc;
use tracing::{info, warn};

use super::{
    archive::{ArchiveCursor, ArchivedStatus, ArchivedTicket, KeyClaim, TicketArchive},
    customers::CustomerDirectory,
    matcher::{self, Candidate, MatchState, MatchUpdate},
    Author, TicketInfo, TicketMessage, TriageOutput, TriageResult, TriageState, TriageUpdate, NAME,
};
use crate::{message::now_ms, page_token, tenant::SEPARATOR, Tenant, WorkflowError};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum MatchConfidence {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TriageRequest {
    pub customer_id: String,
    pub message: String,
    pub subject: Option<String>,
    pub language: Option<String>,
    pub idempotency_key: Option<String>,
}

impl TriageRequest {
    /// What the request is, for its idempotency key: a retry with the key must repeat the
    /// customer, the message, the subject and the language hint.
    fn fingerprint(&self) -> String {
        crate::idempotency::fingerprint(&[
            ("customer_id", &self.customer_id),
            ("message", self.message.trim()),
            ("subject", self.subject.as_deref().unwrap_or_default()),
            ("language", self.language.as_deref().unwrap_or_default()),
        ])
    }
}

/// Which ticket a message belongs to.
#[derive(Debug, Clone, PartialEq)]
pub struct Resolution {
    pub ticket_id: String,
    pub matched_existing: bool,
    /// `None` when there was nothing to match against.
    pub confidence: Option<MatchConfidence>,
    pub reasoning: String,
    pub candidates: Vec<String>,
    pub usage: Option<Usage>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TicketStatus {
    Active,
    Resolved,
    Escalated,
}

impl From<ArchivedStatus> for TicketStatus {
    fn from(status: ArchivedStatus) -> Self {
        match status {
            ArchivedStatus::Resolved => TicketStatus::Resolved,
            ArchivedStatus::Escalated => TicketStatus::Escalated,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TriageOutcome {
    pub run_id: String,
    pub output: TriageOutput,
    pub status: TicketStatus,
    #[serde(skip)]
    pub replayed: bool,
}

type OutcomeFuture = Pin<Box<dyn Future<Output = Result<TriageOutcome, WorkflowError>> + Send>>;

/// What a triage call streams before its result, in this order: the matching run's events
/// (when the customer had active tickets to match against), which ticket the message joins,
/// then the ticket run's events.
#[derive(Debug, Clone, PartialEq)]
pub enum TriageProgress {
    Event(Event),
    Resolved(Resolution),
}

/// A triage in progress: its progress, then its outcome.
pub struct TriageHandle {
    pub progress: Progress,
    pub outcome: OutcomeFuture,
}

/// The progress of a triage. Paths that need no matching read the ticket run's own event
/// channel directly; the matching path is piped through the task that chains the two runs.
pub struct Progress {
    queued: std::collections::VecDeque<TriageProgress>,
    source: ProgressSource,
}

enum ProgressSource {
    Run(RunEvents),
    Piped(mpsc::Receiver<TriageProgress>),
    Done,
}

impl Progress {
    fn new(queued: Vec<TriageProgress>, source: ProgressSource) -> Self {
        Self { queued: queued.into(), source }
    }

    pub async fn next(&mut self) -> Option<TriageProgress> {
        if let Some(item) = self.queued.pop_front() {
            return Some(item);
        }
        match &mut self.source {
            ProgressSource::Run(events) => events.recv().await.map(TriageProgress::Event),
            ProgressSource::Piped(items) => items.recv().await,
            ProgressSource::Done => None,
        }
    }

    pub fn into_stream(self) -> impl Stream<Item = TriageProgress> + Send + 'static {
        futures::stream::unfold(self, |mut progress| async move { progress.next().await.map(|item| (item, progress)) })
    }
}

/// The ticket's run, started.
struct TicketRun {
    events: RunEvents,
    outcome: OutcomeFuture,
}

/// How long a request's claim on its idempotency key outlives its holder's last renewal: a
/// claim older than this belongs to a process that died, and a retry takes it over.
const CLAIM_TTL: Duration = Duration::from_secs(30);
/// How often the holder renews its claim: a few renewals fit in [`CLAIM_TTL`], so one slow
/// write does not lose it.
const CLAIM_RENEWAL: Duration = Duration::from_secs(10);
/// What a retry that finds its key claimed is told to wait before trying again.
const CLAIM_RETRY_AFTER: Duration = Duration::from_secs(1);

/// A triage request's claim on its idempotency key, held from before the message is matched to
/// a ticket until the request's outcome is recorded (or it fails), and renewed meanwhile. It
/// keeps a retry that arrives while the first call is still matching or running from triaging
/// the message a second time under another ticket id: ticket ids are drawn afresh by each call,
/// so the runner's own per-thread key record cannot see the two calls as one.
struct ClaimedKey {
    archive: Arc<dyn TicketArchive>,
    customer_key: String,
    key: String,
    holder: String,
    renewal: tokio::task::JoinHandle<()>,
    released: bool,
}

impl ClaimedKey {
    fn new(archive: Arc<dyn TicketArchive>, customer_key: String, key: String, holder: String) -> Self {
        let renewal = tokio::spawn({
            let (archive, customer_key, key, holder) =
                (archive.clone(), customer_key.clone(), key.clone(), holder.clone());
            async move {
                loop {
                    tokio::time::sleep(CLAIM_RENEWAL).await;
                    match archive.renew_claim(&customer_key, &key, &holder, unix_ms(SystemTime::now())).await {
                        Ok(true) => {}
                        Ok(false) => {
                            warn!(customer = %customer_key, "a triage request lost its idempotency key's claim to a retry");
                            return;
                        }
                        // The next renewal may get through; the claim lasts several of them.
                        Err(error) => {
                            warn!(customer = %customer_key, %error, "could not renew a triage request's claim")
                        }
                    }
                }
            }
        });
        Self { archive, customer_key, key, holder, renewal, released: false }
    }

    async fn release(mut self) {
        self.released = true;
        self.renewal.abort();
        self.releasing().await;
    }

    /// Releases the claim in the store; a failure only logs, as a retry takes the claim over
    /// once it goes unrenewed.
    fn releasing(&self) -> impl std::future::Future<Output = ()> + Send + 'static {
        let (archive, customer_key, key, holder) =
            (self.archive.clone(), self.customer_key.clone(), self.key.clone(), self.holder.clone());
        async move {
            if let Err(error) = archive.release_claim(&customer_key, &key, &holder).await {
                warn!(customer = %customer_key, %error, "could not release a triage request's claim");
            }
        }
    }
}

impl Drop for ClaimedKey {
    /// A request that failed, or whose task ended, releases its claim so a retry can go on now.
    fn drop(&mut self) {
        if self.released {
            return;
        }
        self.renewal.abort();
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(self.releasing());
        }
    }
}

/// What admitting a triage request decided.
enum Admitted {
    /// A retry of a request whose outcome is recorded: replayed.
    Replay(TriageHandle),
    /// A request to triage, holding its key's claim when it has a key.
    Go(Option<ClaimedKey>),
}

fn unix_ms(at: SystemTime) -> i64 {
    at.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}

#[derive(Debug, Clone, PartialEq)]
pub struct TicketSummary {
    pub ticket_id: String,
    pub customer_id: String,
    pub status: TicketStatus,
    pub subject: String,
    pub result: Option<TriageResult>,
    pub created_at_ms: u64,
    pub updated_at_ms: u64,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TicketView {
    pub summary: TicketSummary,
    pub messages: Vec<TicketMessage>,
    /// English text of each customer message, in order (empty when not translated).
    pub english: Vec<String>,
    pub language: String,
    /// The run that produced the summary's result (the ticket's last run).
    pub run_id: String,
    /// The knowledge-base articles of the last specialist, with titles and scores.
    pub kb_results: Vec<super::KbResult>,
}

#[derive(Clone)]
pub struct TriageDesk {
    runner: Runner<TriageState>,
    /// Runs the ticket-matching graph; shares the ticket runner's registry, so a cancel or a
    /// shutdown reaches matching runs too.
    matcher: Runner<MatchState>,
    customers: Arc<CustomerDirectory>,
    archive: Arc<dyn TicketArchive>,
    max_text_chars: usize,
}

const MAX_SUBJECT_CHARS: usize = 300;

/// The page-token listing name of archived tickets.
const ARCHIVE_LISTING: &str = "tickets";

fn invalid(field: &'static str, reason: impl Into<String>) -> WorkflowError {
    WorkflowError::InvalidArgument { field, reason: reason.into() }
}

fn archive_error(error: super::ArchiveError) -> WorkflowError {
    WorkflowError::Store(frontdesk_runtime::CheckpointError::Unavailable(Box::new(error)))
}

/// A customer id as every triage call checks it: 1 to 64 characters of A-Z a-z 0-9 . _ -.
pub fn validate_customer_id(id: &str) -> Result<(), WorkflowError> {
    let ok = !id.is_empty()
        && id.len() <= 64
        && id.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'));
    if ok {
        Ok(())
    } else {
        Err(invalid("customer_id", "must be 1 to 64 characters of A-Z a-z 0-9 . _ -"))
    }
}

/// A ticket id as every triage call checks it: 1 to 64 bytes without ':' (the separator of a
/// ticket's thread id), '/' (the tenant's, see `tenant`) or control characters.
pub fn validate_ticket_id(ticket_id: &str) -> Result<(), WorkflowError> {
    if ticket_id.is_empty()
        || ticket_id.len() > 64
        || ticket_id.contains([':', '/'])
        || ticket_id.chars().any(char::is_control)
    {
        return Err(invalid("ticket_id", "must be 1 to 64 characters without ':', '/' or control characters"));
    }
    Ok(())
}

/// A triage request as [`TriageDesk::triage`] checks it before anything else: the customer id,
/// the message (trimmed, 1 to `max_text_chars` characters, no NUL), the subject (at most 300
/// characters, no NUL), the language hint and the idempotency key.
pub fn validate_request(request: &TriageRequest, max_text_chars: usize) -> Result<(), WorkflowError> {
    validate_customer_id(&request.customer_id)?;
    let message = request.message.trim();
    if message.is_empty() {
        return Err(invalid("message", "must not be empty"));
    }
    let chars = message.chars().count();
    if chars > max_text_chars {
        return Err(invalid("message", format!("is {chars} characters; the limit is {max_text_chars}")));
    }
    WorkflowError::reject_nul("message", message)?;
    if let Some(subject) = &request.subject {
        if subject.chars().count() > MAX_SUBJECT_CHARS {
            return Err(invalid("subject", format!("must be at most {MAX_SUBJECT_CHARS} characters")));
        }
        WorkflowError::reject_nul("subject", subject)?;
    }
    if let Some(language) = &request.language {
        if language.len() != 2 || !language.bytes().all(|b| b.is_ascii_lowercase()) {
            return Err(invalid("language", "must be an ISO 639-1 code such as en or es"));
        }
    }
    crate::idempotency::validate_key(request.idempotency_key.as_deref())
}

/// A ticket's thread id: `<customer key>:<ticket id>`.
fn thread_id(customer_key: &str, ticket_id: &str) -> String {
    format!("{customer_key}:{ticket_id}")
}

/// The tenant part of the keys of a ticket's thread `<tenant>/<customer>:<ticket>`
/// (`<tenant>/`), empty for the default tenant's `<customer>:<ticket>`. Customer ids and tenant
/// names have neither `/` nor `:`, so a `/` before the first `:` can only end a tenant; one
/// after it belongs to a ticket id from before ticket ids were refused a `/`.
fn thread_scope(thread: &str) -> &str {
    let customer_end = thread.find(':').unwrap_or(thread.len());
    match thread[..customer_end].find(SEPARATOR) {
        Some(end) => &thread[..=end],
        None => "",
    }
}

/// The archive key of the ticket of thread `<customer key>:<ticket id>`: the ticket id in the
/// thread's tenant (`tenant.key(ticket_id)`), `None` for a thread id of another shape.
pub fn archived_ticket_key(thread: &str) -> Option<String> {
    let (_, ticket_id) = thread.split_once(':').filter(|(_, ticket_id)| !ticket_id.is_empty())?;
    Some(format!("{}{ticket_id}", thread_scope(thread)))
}

/// The storage key of `id` (a ticket's or customer's) in the tenant of `thread`: what
/// `tenant.key(id)` gives for the tenant that started the thread.
fn key_in_thread(thread: &str, id: &str) -> String {
    format!("{}{id}", thread_scope(thread))
}

fn new_ticket_id() -> String {
    let hex = uuid::Uuid::new_v4().simple().to_string().to_ascii_uppercase();
    format!("TKT-{}", &hex[..8])
}

fn decode_output(id: &str, value: serde_json::Value) -> Result<TriageOutput, WorkflowError> {
    serde_json::from_value(value).map_err(|source| WorkflowError::Corrupt { id: id.to_owned(), source })
}

impl TriageDesk {
    pub fn new(
        runner: Runner<TriageState>,
        llm: LlmClient,
        customers: Arc<CustomerDirectory>,
        archive: Arc<dyn TicketArchive>,
        max_text_chars: usize,
    ) -> Result<Self, GraphError> {
        // Completed runs archive their ticket before their final checkpoint, which is then never
        // written: the thread is erased instead (`ArchiveHandoff`).
        let runner = runner.with_handoff(Arc::new(ArchiveHandoff { archive: archive.clone() }));
        let matcher = Runner::new(matcher::build(llm)?, runner.checkpointer().clone(), runner.config().clone())
            .with_registry(runner.registry().clone());
        Ok(Self { runner, matcher, customers, archive, max_text_chars })
    }

    pub fn runner(&self) -> &Runner<TriageState> {
        &self.runner
    }

    fn validate(&self, request: &TriageRequest) -> Result<(), WorkflowError> {
        validate_request(request, self.max_text_chars)
    }

    /// Triages one customer message. A customer without active tickets gets a new ticket
    /// straight away; otherwise the matching graph decides first, and its run's events stream
    /// before the resolution.
    pub async fn triage(&self, tenant: &Tenant, request: TriageRequest) -> Result<TriageHandle, WorkflowError> {
        let claim = match self.admit(tenant, &request).await? {
            Admitted::Replay(replay) => return Ok(replay),
            Admitted::Go(claim) => claim,
        };
        let customer_key = tenant.key(&request.customer_id);
        let ActiveTickets { tickets: active, recorded_keys } = self.active_tickets(&customer_key).await?;
        // This very request completed its ticket before (its caller gone, and the ticket's
        // archiving left to a repair), and the repair just archived it and recorded its outcome
        // under the key: replayed, instead of triaging the message again as a new ticket.
        if let Some(key) = request.idempotency_key.as_deref().filter(|key| recorded_keys.iter().any(|k| k == key)) {
            if let Some(replay) = self.replay(&request.customer_id, &customer_key, key, &request).await? {
                if let Some(claim) = claim {
                    claim.release().await;
                }
                return Ok(replay);
            }
        }
        // A run of this very request whose end its caller never saw (the server stopped or
        // crashed mid-run) is the latest on its ticket: still running, here or being resumed, or
        // finished by the resume with the ticket kept active and nobody left to record the
        // outcome under the key. The retry goes to that ticket, where the runner attaches to the
        // run or replays it, instead of matching the message as a new one and opening a second
        // ticket. (A failed run rolled its ticket back, so the retry runs there again.)
        let earlier = request
            .idempotency_key
            .as_deref()
            .and_then(|key| active.iter().find(|(_, cp)| cp.run.idempotency_key.as_deref() == Some(key)));
        if let Some((state, _)) = earlier {
            let resolution = Resolution {
                ticket_id: state.ticket.ticket_id.clone(),
                matched_existing: true,
                confidence: None,
                reasoning: "the ticket an earlier call with the same idempotency key went to".into(),
                candidates: Vec::new(),
                usage: None,
            };
            return self.start(customer_key, request, resolution, claim).await;
        }
        if active.is_empty() {
            let resolution = Resolution {
                ticket_id: new_ticket_id(),
                matched_existing: false,
                confidence: None,
                reasoning: "the customer has no active ticket".into(),
                candidates: Vec::new(),
                usage: None,
            };
            return self.start(customer_key, request, resolution, claim).await;
        }
        let candidates: Vec<Candidate> = active
            .iter()
            .map(|(state, _)| Candidate { ticket_id: state.ticket.ticket_id.clone(), summary: summarize(state) })
            .collect();
        let customer_id = request.customer_id.clone();
        let input = MatchUpdate {
            customer_id: Some(customer_id.clone()),
            message: Some(request.message.trim().to_owned()),
            candidates: Some(candidates),
            decision: Some(None),
        };
        // Ephemeral: the thread id only keeps concurrent matchings apart (and names the tenant,
        // like every thread whose model calls are logged).
        let thread = format!("{customer_key}:match-{}", uuid::Uuid::now_v7().simple());
        let matching = self
            .matcher
            .start(RunRequest::new(thread, RunInput::Update(input)))
            .await
            .map_err(|error| WorkflowError::run_on("customer", customer_id.clone(), error))?;
        let (tx, rx) = mpsc::channel(self.runner.config().event_buffer.max(1));
        let (outcome_tx, outcome_rx) = tokio::sync::oneshot::channel();
        let desk = self.clone();
        tokio::spawn(async move {
            let _ = outcome_tx.send(desk.match_then_run(customer_key, request, matching, tx, claim).await);
        });
        let outcome = Box::pin(async move {
            outcome_rx.await.unwrap_or_else(|_| Err(WorkflowError::run_on("customer", customer_id, RunError::Lost)))
        });
        Ok(TriageHandle { progress: Progress::new(Vec::new(), ProgressSource::Piped(rx)), outcome })
    }

    /// Forwards the matching run's events, resolves the ticket from its decision, then starts
    /// and forwards the ticket's run. A caller that went away stops the forwarding, not the runs.
    async fn match_then_run(
        &self,
        customer_key: String,
        request: TriageRequest,
        matching: RunHandle<MatchState>,
        tx: mpsc::Sender<TriageProgress>,
        claim: Option<ClaimedKey>,
    ) -> Result<TriageOutcome, WorkflowError> {
        let customer_id = request.customer_id.clone();
        let (mut events, outcome, _cancel) = matching.into_parts();
        let mut usage = None;
        while let Some(event) = events.recv().await {
            if let EventKind::RunFinished { usage: total, .. } = &event.kind {
                usage = Some(*total);
            }
            let _ = tx.send(TriageProgress::Event(event)).await;
        }
        let outcome = outcome
            .await
            .unwrap_or(Err(RunError::Lost))
            .map_err(|error| WorkflowError::run_on("customer", customer_id.clone(), error))?;
        let state = outcome.state.unwrap_or_default();
        // The matcher's only node always decides; a run that completed without a decision
        // would be a bug in the graph, reported rather than guessed around.
        let decision =
            state.decision.ok_or_else(|| WorkflowError::run_on("customer", customer_id.clone(), RunError::Lost))?;
        let resolution = Resolution {
            matched_existing: decision.matched_ticket_id.is_some(),
            ticket_id: decision.matched_ticket_id.unwrap_or_else(new_ticket_id),
            confidence: Some(decision.confidence),
            reasoning: decision.reasoning,
            candidates: state.candidates.into_iter().map(|c| c.ticket_id).collect(),
            usage,
        };
        let _ = tx.send(TriageProgress::Resolved(resolution.clone())).await;
        let TicketRun { mut events, outcome } = self.run(customer_key, request, resolution, claim).await?;
        while let Some(event) = events.recv().await {
            let _ = tx.send(TriageProgress::Event(event)).await;
        }
        outcome.await
    }

    /// Starts the ticket's run for a resolution known up front.
    async fn start(
        &self,
        customer_key: String,
        request: TriageRequest,
        resolution: Resolution,
        claim: Option<ClaimedKey>,
    ) -> Result<TriageHandle, WorkflowError> {
        let TicketRun { events, outcome } = self.run(customer_key, request, resolution.clone(), claim).await?;
        let progress = Progress::new(vec![TriageProgress::Resolved(resolution)], ProgressSource::Run(events));
        Ok(TriageHandle { progress, outcome })
    }

    /// Triages one customer message as a new ticket with the caller's `ticket_id`, skipping
    /// ticket matching: for tickets imported from an upstream system that already has ids, and
    /// for replays (benchmarks, backfills). The run, the archiving of resolved and escalated
    /// tickets and idempotent retries are those of [`TriageDesk::triage`].
    ///
    /// A `ticket_id` that is archived or has an active thread is `AlreadyExists`. The thread is
    /// created by the run's accepting commit, which fails when it exists, so of two concurrent
    /// imports of one id exactly one runs. The archive is checked first and separately: an
    /// import racing a completing import of the same id can pass that check after the first
    /// ticket is archived and its thread deleted, and then re-archives the ticket under its id.
    /// Ticket ids are the tenant's own: another tenant's ticket with the same id is no clash.
    pub async fn triage_as_new_ticket(
        &self,
        tenant: &Tenant,
        request: TriageRequest,
        ticket_id: &str,
    ) -> Result<TriageHandle, WorkflowError> {
        validate_ticket_id(ticket_id)?;
        let claim = match self.admit(tenant, &request).await? {
            Admitted::Replay(replay) => return Ok(replay),
            Admitted::Go(claim) => claim,
        };
        if self.archive.exists(&tenant.key(ticket_id)).await.map_err(archive_error)? {
            return Err(WorkflowError::AlreadyExists { what: "ticket", id: ticket_id.to_owned() });
        }
        let resolution = Resolution {
            ticket_id: ticket_id.to_owned(),
            matched_existing: false,
            confidence: None,
            reasoning: "a new ticket with the caller's id; not matched".into(),
            candidates: Vec::new(),
            usage: None,
        };
        self.start(tenant.key(&request.customer_id), request, resolution, claim).await
    }

    /// Validates the request and checks the customer; replays the recorded outcome when the
    /// request repeats an earlier one with the same idempotency key, and otherwise claims the
    /// key for this request (see [`ClaimedKey`]). A key that another call of the same request
    /// holds is `ThreadBusy` with a time to retry after; of another request, a mismatch.
    /// Idempotency keys are the tenant's own (records are kept under the customer key).
    async fn admit(&self, tenant: &Tenant, request: &TriageRequest) -> Result<Admitted, WorkflowError> {
        self.validate(request)?;
        let customer_id = request.customer_id.clone();
        // The directory is shared by every tenant: it knows the caller's customer id.
        if self.customers.lookup(&customer_id).is_none() {
            return Err(WorkflowError::NotFound { what: "customer", id: customer_id });
        }
        let Some(key) = &request.idempotency_key else { return Ok(Admitted::Go(None)) };
        let customer_key = tenant.key(&customer_id);
        if let Some(replay) = self.replay(&customer_id, &customer_key, key, request).await? {
            return Ok(Admitted::Replay(replay));
        }
        let fingerprint = request.fingerprint();
        let holder = uuid::Uuid::now_v7().simple().to_string();
        let now = SystemTime::now();
        let stale_before = now.checked_sub(CLAIM_TTL).unwrap_or(SystemTime::UNIX_EPOCH);
        let claim = self
            .archive
            .claim_request(&customer_key, key, &fingerprint, &holder, unix_ms(now), unix_ms(stale_before))
            .await
            .map_err(archive_error)?;
        match claim {
            KeyClaim::Claimed => {}
            KeyClaim::Held { fingerprint: held } if held != fingerprint => {
                return Err(WorkflowError::IdempotencyMismatch { what: "customer", id: customer_id, key: key.clone() })
            }
            KeyClaim::Held { .. } => {
                let busy = RunError::ThreadBusy { thread_id: customer_key, retry_after: Some(CLAIM_RETRY_AFTER) };
                return Err(WorkflowError::run_on("customer", customer_id, busy));
            }
        }
        let claim = ClaimedKey::new(self.archive.clone(), customer_key.clone(), key.clone(), holder);
        // The call that held the key before may have recorded its outcome and released the key
        // between the look above and the claim.
        if let Some(replay) = self.replay(&customer_id, &customer_key, key, request).await? {
            claim.release().await;
            return Ok(Admitted::Replay(replay));
        }
        Ok(Admitted::Go(Some(claim)))
    }

    /// The recorded outcome of the request with idempotency `key`, replayed, if there is one.
    async fn replay(
        &self,
        customer_id: &str,
        customer_key: &str,
        key: &str,
        request: &TriageRequest,
    ) -> Result<Option<TriageHandle>, WorkflowError> {
        let Some(recorded) = self.archive.find_request(customer_key, key).await.map_err(archive_error)? else {
            return Ok(None);
        };
        // A record from before fingerprints were kept cannot be compared: replayed.
        if recorded.fingerprint.is_some_and(|f| f != request.fingerprint()) {
            return Err(WorkflowError::IdempotencyMismatch {
                what: "customer",
                id: customer_id.to_owned(),
                key: key.to_owned(),
            });
        }
        let mut outcome: TriageOutcome = serde_json::from_str(&recorded.output_json)
            .map_err(|source| WorkflowError::Corrupt { id: key.to_owned(), source })?;
        outcome.replayed = true;
        let resolution = Resolution {
            ticket_id: outcome.output.ticket_id.clone(),
            matched_existing: false,
            confidence: None,
            reasoning: "replay of an earlier request with the same idempotency key".into(),
            candidates: Vec::new(),
            usage: None,
        };
        Ok(Some(TriageHandle {
            progress: Progress::new(vec![TriageProgress::Resolved(resolution)], ProgressSource::Done),
            outcome: Box::pin(async move { Ok(outcome) }),
        }))
    }

    /// Runs the graph on the resolved ticket; archives the ticket after the run when it completes.
    /// `customer_key` is the customer's storage key in the caller's tenant; the state keeps the
    /// caller's ids.
    async fn run(
        &self,
        customer_key: String,
        request: TriageRequest,
        resolution: Resolution,
        claim: Option<ClaimedKey>,
    ) -> Result<TicketRun, WorkflowError> {
        let customer_id = request.customer_id.clone();
        let message =
            TicketMessage { author: Author::Customer, text: request.message.trim().to_owned(), at_ms: now_ms() };
        let update = if resolution.matched_existing {
            TriageUpdate {
                messages: Some(Log::append(vec![message])),
                language_hint: Some(request.language.clone()),
                ..Default::default()
            }
        } else {
            TriageUpdate {
                ticket: Some(TicketInfo {
                    ticket_id: resolution.ticket_id.clone(),
                    customer_id: customer_id.clone(),
                    subject: request.subject.clone().unwrap_or_default(),
                    created_at_ms: now_ms(),
                }),
                messages: Some(Log::append(vec![message])),
                language_hint: Some(request.language.clone()),
                ..Default::default()
            }
        };
        let thread = thread_id(&customer_key, &resolution.ticket_id);
        let mut run = RunRequest::new(thread.clone(), RunInput::Update(update));
        run.idempotency_key = request.idempotency_key.clone();
        // The ticket's run keeps the fingerprint with the key too, so a different request
        // that reaches the same thread with the key (a retry racing the first call's record)
        // is refused by the runner rather than replayed.
        let fingerprint = request.fingerprint();
        run.fingerprint = Some(fingerprint.clone());
        // A new ticket's thread must not exist: a clashing id is refused, never merged.
        run.mode = if resolution.matched_existing { ThreadMode::Existing } else { ThreadMode::New };
        // Errors name the ticket, not the thread: its id is what the caller holds.
        let ticket_id = resolution.ticket_id.clone();
        let handle =
            self.runner.start(run).await.map_err(|error| WorkflowError::run_on("ticket", ticket_id.clone(), error))?;
        let (events, outcome, _cancel) = handle.into_parts();

        let finisher = self.finisher();
        let key = request.idempotency_key;
        let keyed = key.is_some();
        let finish = Box::pin(async move {
            let outcome = outcome
                .await
                .unwrap_or(Err(RunError::Lost))
                .map_err(|error| WorkflowError::run_on("ticket", ticket_id, error))?;
            // The typed state when the run has it; the JSON output only for a replayed run.
            let output = match &outcome.state {
                Some(state) => TriageOutput::of(state),
                None => decode_output(&thread, outcome.output)?,
            };
            let status = match output.result.as_ref().map(|r| r.recommended_action) {
                Some(action) if action.completes_ticket() => finisher.status_of(action),
                _ => TicketStatus::Active,
            };
            let result = TriageOutcome { run_id: outcome.run_id, output, status, replayed: outcome.replayed };
            // An erased thread's handoff recorded it already (`ArchiveHandoff`).
            if let Some(key) = key.as_ref().filter(|_| !outcome.erased) {
                let json = serde_json::to_string(&result)
                    .map_err(|source| WorkflowError::Corrupt { id: key.clone(), source })?;
                finisher
                    .archive
                    .record_request(&customer_key, key, &fingerprint, &json)
                    .await
                    .map_err(archive_error)?;
            }
            // Recorded: a retry replays it from here on. A claim not released here (the record
            // failed) is released as it drops.
            if let Some(claim) = claim {
                claim.release().await;
            }
            // Erased: the run's handoff archived the ticket. Otherwise (a replay, or a handoff
            // that failed and kept the final checkpoint) it is archived here.
            if status != TicketStatus::Active && !outcome.erased {
                match &outcome.state {
                    // The state the run just committed: no need to read it back.
                    Some(state) => {
                        // The outcome is recorded under the key above.
                        let run = CompletedRun {
                            thread_id: &thread,
                            run_id: &result.run_id,
                            idempotency_key: None,
                            fingerprint: None,
                        };
                        finisher.archive_and_delete(run, state, SystemTime::now()).await?
                    }
                    None => finisher.complete(&thread).await?,
                }
            }
            Ok(result)
        });
        // A keyed request's outcome goes on in a task of its own, so that it is recorded under
        // the key and the claim released even when the caller goes away before the run ends.
        // Without a key nothing would be lost by stopping with the caller (a ticket whose
        // archiving did not happen is archived by the next repair), so no task is spent on it.
        let outcome: OutcomeFuture = if keyed {
            let ticket = resolution.ticket_id;
            let finish = tokio::spawn(finish);
            Box::pin(async move {
                finish.await.unwrap_or_else(|_| Err(WorkflowError::run_on("ticket", ticket, RunError::Lost)))
            })
        } else {
            finish
        };
        Ok(TicketRun { events, outcome })
    }

    /// Whether `thread` (a storage key) was the thread of a ticket that is archived now.
    pub async fn archived_thread(&self, thread: &str) -> Result<bool, WorkflowError> {
        let Some(ticket_key) = archived_ticket_key(thread) else { return Ok(false) };
        let ticket = self.archive.get(&ticket_key).await.map_err(archive_error)?;
        Ok(ticket.is_some_and(|ticket| ticket.thread_id == thread))
    }

    /// The active tickets of the customer with storage key `customer_key`, after repairing any
    /// that a crash left half-archived.
    async fn active_tickets(&self, customer_key: &str) -> Result<ActiveTickets, WorkflowError> {
        let mut active = ActiveTickets::default();
        // The default tenant's `<customer>:` never prefixes another tenant's `<tenant>/...`.
        for thread_id in self.thread_ids(Some(format!("{customer_key}:"))).await? {
            match self.finisher().repair(&thread_id).await? {
                Repaired::Active(state, cp) => active.tickets.push((state, cp)),
                Repaired::Finished { recorded_key } => active.recorded_keys.extend(recorded_key),
            }
        }
        Ok(active)
    }

    /// Repairs every triage thread, of every tenant (start-up, after crash recovery). Returns
    /// how many tickets it archived or cleaned up.
    pub async fn sweep(&self) -> Result<usize, WorkflowError> {
        let mut repaired = 0;
        for thread_id in self.thread_ids(None).await? {
            if let Repaired::Finished { .. } = self.finisher().repair(&thread_id).await? {
                repaired += 1;
            }
        }
        Ok(repaired)
    }

    /// Finishes the triage runs among `abandoned`, which a takeover scan picked out
    /// (`RunRegistry::abandoned`): each thread is repaired first, the sweep's work where a crash
    /// can have left it (an archived ticket's thread is deleted, not triaged again), then the
    /// runs still there are resumed. Returns how many it resumed.
    pub async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
        // Other workflows' runs may be listed too, and repair reads a thread as a ticket: the
        // list names each run's workflow, so theirs cost no read.
        let abandoned: Vec<UnfinishedRun> = abandoned.into_iter().filter(|run| run.workflow == NAME).collect();
        for run in &abandoned {
            self.finisher().repair(&run.thread_id).await?;
        }
        Ok(self.runner.resume_abandoned(abandoned).await)
    }

    /// Every triage thread id, optionally under a prefix, read page by page.
    async fn thread_ids(&self, prefix: Option<String>) -> Result<Vec<String>, WorkflowError> {
        let mut ids = Vec::new();
        let mut after = None;
        loop {
            let query = ThreadQuery { workflow: Some(NAME.to_owned()), prefix: prefix.clone(), after, limit: 100 };
            let page = self.runner.checkpointer().list_threads(&query).await?;
            ids.extend(page.threads.into_iter().map(|t| t.thread_id));
            match page.next_after {
                Some(next) => after = Some(next),
                None => return Ok(ids),
            }
        }
    }

    fn finisher(&self) -> Finisher {
        Finisher { runner: self.runner.clone(), archive: self.archive.clone() }
    }

    /// The customer directory is the authority on who is a customer: every call about a
    /// customer the directory does not know is `NotFound` (kind `customer`), before any read or
    /// model call, so reads agree with `triage` instead of answering an empty page.
    fn known_customer(&self, customer_id: &str) -> Result<(), WorkflowError> {
        validate_customer_id(customer_id)?;
        if self.customers.lookup(customer_id).is_none() {
            return Err(WorkflowError::NotFound { what: "customer", id: customer_id.to_owned() });
        }
        Ok(())
    }

    /// The customer's active tickets in the caller's tenant.
    pub async fn list_active(&self, tenant: &Tenant, customer_id: &str) -> Result<Vec<TicketSummary>, WorkflowError> {
        self.known_customer(customer_id)?;
        let active = self.active_tickets(&tenant.key(customer_id)).await?;
        Ok(active.tickets.iter().map(|(state, cp)| active_summary(state, cp)).collect())
    }

    /// A page of the customer's archived tickets in the caller's tenant and the token of the
    /// next page (`None` on the last). Tokens are opaque and bound to the tenant, the customer
    /// and the status filter ([`crate::page_token`]); one that is not is `InvalidArgument` on
    /// `page_token`.
    pub async fn list_archived(
        &self,
        tenant: &Tenant,
        customer_id: &str,
        status: Option<ArchivedStatus>,
        page_token: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<TicketSummary>, Option<String>), WorkflowError> {
        self.known_customer(customer_id)?;
        let customer_key = tenant.key(customer_id);
        // The customer key in the query binds a token to the tenant; the cursor holds the
        // archive's own ticket keys, all of this tenant's.
        let query = format!("{customer_key}/{}", status.map_or("", ArchivedStatus::as_str));
        let after: Option<ArchiveCursor> = page_token::decode(ARCHIVE_LISTING, &query, page_token)?;
        let (tickets, next) = self.archive.list(&customer_key, status, after, limit).await.map_err(archive_error)?;
        let next = next.map(|cursor| page_token::encode(ARCHIVE_LISTING, &query, &cursor));
        Ok((tickets.iter().map(|ticket| archived_summary(tenant, ticket)).collect(), next))
    }

    /// One of the customer's tickets in the caller's tenant. Another customer's ticket, or
    /// another tenant's, is NOT_FOUND, exactly like a ticket that does not exist; an unknown
    /// customer is NOT_FOUND as a customer.
    pub async fn get_ticket(
        &self,
        tenant: &Tenant,
        customer_id: &str,
        ticket_id: &str,
    ) -> Result<TicketView, WorkflowError> {
        validate_customer_id(customer_id)?;
        validate_ticket_id(ticket_id)?;
        self.known_customer(customer_id)?;
        let not_found = || WorkflowError::NotFound { what: "ticket", id: ticket_id.to_owned() };
        let customer_key = tenant.key(customer_id);
        if let Repaired::Active(state, cp) = self.finisher().repair(&thread_id(&customer_key, ticket_id)).await? {
            return Ok(TicketView {
                summary: active_summary(&state, &cp),
                english: state.translation.as_ref().map(|t| t.translated_messages.clone()).unwrap_or_default(),
                language: state.translation.as_ref().map_or_else(|| "en".into(), |t| t.original_language.clone()),
                run_id: cp.run.run_id.clone(),
                kb_results: state.kb_results,
                messages: state.messages.items,
            });
        }
        let archived = self.archive.get(&tenant.key(ticket_id)).await.map_err(archive_error)?.ok_or_else(not_found)?;
        if archived.customer_id != customer_key {
            return Err(not_found());
        }
        // Everything the live ticket showed is archived with it, so the view is the same.
        Ok(TicketView {
            summary: archived_summary(tenant, &archived),
            english: archived.english,
            language: archived.language,
            run_id: archived.run_id,
            kb_results: archived.kb_results,
            messages: archived.messages,
        })
    }
}

/// A summary of an active ticket for the matcher (the ticket-summarize tool of
/// docs/workflows/triage.md).
fn summarize(state: &TriageState) -> String {
    let english = state.english_messages();
    let result = state
        .triage_result
        .as_ref()
        .map(|r| format!(" Classified {} / {}: {}", r.ticket_type.as_str(), r.recommended_action.as_str(), r.reasoning))
        .unwrap_or_default();
    format!("subject \"{}\"; messages: {}.{result}", state.ticket.subject, english.join(" | "))
}

fn active_summary(state: &TriageState, cp: &Checkpoint) -> TicketSummary {
    TicketSummary {
        ticket_id: state.ticket.ticket_id.clone(),
        customer_id: state.ticket.customer_id.clone(),
        status: TicketStatus::Active,
        subject: state.ticket.subject.clone(),
        result: state.triage_result.clone(),
        created_at_ms: state.ticket.created_at_ms,
        updated_at_ms: cp.created_at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
    }
}

/// An archived ticket of `tenant`'s as the tenant sees it: with its own ids, not the keys.
fn archived_summary(tenant: &Tenant, ticket: &ArchivedTicket) -> TicketSummary {
    let ms = |t: std::time::SystemTime| t.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    // Only the tenant's own tickets reach here; a key it does not own is shown as stored.
    let id = |key: &str| tenant.id(key).unwrap_or(key).to_owned();
    TicketSummary {
        ticket_id: id(&ticket.ticket_id),
        customer_id: id(&ticket.customer_id),
        status: ticket.status.into(),
        subject: ticket.subject.clone(),
        result: Some(ticket.result.clone()),
        created_at_ms: ms(ticket.created_at),
        updated_at_ms: ms(ticket.completed_at),
    }
}

/// What the archive keeps of a completed run's ticket (the run `run_id`); `None` unless its
/// action completes it.
fn archived_ticket(
    thread: &str,
    run_id: &str,
    state: &TriageState,
    completed_at: SystemTime,
) -> Option<ArchivedTicket> {
    let result = state.triage_result.clone()?;
    let status = match result.recommended_action {
        super::RecommendedAction::AutoRespond => ArchivedStatus::Resolved,
        super::RecommendedAction::EscalateHuman => ArchivedStatus::Escalated,
        super::RecommendedAction::RouteSpecialist => return None,
    };
    let mut messages = state.messages.items.clone();
    if !result.suggested_response.is_empty() {
        messages.push(TicketMessage {
            author: Author::Assistant,
            text: result.suggested_response.clone(),
            at_ms: completed_at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64),
        });
    }
    // Keyed in the thread's tenant, like the thread itself.
    Some(ArchivedTicket {
        ticket_id: key_in_thread(thread, &state.ticket.ticket_id),
        customer_id: key_in_thread(thread, &state.ticket.customer_id),
        thread_id: thread.to_owned(),
        status,
        subject: state.ticket.subject.clone(),
        language: state.translation.as_ref().map_or_else(|| "en".into(), |t| t.original_language.clone()),
        result,
        run_id: run_id.to_owned(),
        kb_results: state.kb_results.clone(),
        messages,
        english: state.english_messages(),
        created_at: std::time::UNIX_EPOCH + Duration::from_millis(state.ticket.created_at_ms),
        completed_at,
    })
}

/// Archives a run's resolved or escalated ticket as the run completes, so the runner erases the
/// thread instead of writing a final checkpoint that would be deleted right after. A crash
/// before the (unsynced) erase is durable brings back the run's accepting checkpoint of an
/// archived ticket; `repair` deletes it, and the start-up sweep runs before recovery would
/// resume that run (`Registry::recover`).
struct ArchiveHandoff {
    archive: Arc<dyn TicketArchive>,
}

#[async_trait]
impl Handoff<TriageState> for ArchiveHandoff {
    async fn complete(&self, run: CompletedRun<'_>, state: &TriageState) -> Result<Completion, HandoffError> {
        match archive_completed(&*self.archive, run, state, SystemTime::now()).await? {
            Some(status) => {
                info!(thread_id = run.thread_id, status = status.as_str(), "ticket archived");
                Ok(Completion::Erase)
            }
            None => Ok(Completion::Keep),
        }
    }
}

/// Archives the ticket of `run`'s completed `state` and returns its status; `None` (nothing
/// saved) when the state completes no ticket. A run started with an idempotency key has its
/// outcome recorded under the key here as well as by the caller's task: a run resumed after a
/// crash or a shutdown, or whose archiving a repair finishes, has no caller left to record it,
/// and its retry would otherwise find neither a record nor the (erased) thread and triage the
/// message again as a new ticket.
async fn archive_completed(
    archive: &dyn TicketArchive,
    run: CompletedRun<'_>,
    state: &TriageState,
    completed_at: SystemTime,
) -> Result<Option<ArchivedStatus>, WorkflowError> {
    let Some(ticket) = archived_ticket(run.thread_id, run.run_id, state, completed_at) else { return Ok(None) };
    archive.save(&ticket).await.map_err(archive_error)?;
    if let (Some(key), Some(fingerprint)) = (run.idempotency_key, run.fingerprint) {
        let output = TriageOutput::of(state);
        let status = TicketStatus::from(ticket.status);
        let outcome = TriageOutcome { run_id: run.run_id.to_owned(), output, status, replayed: false };
        let json =
            serde_json::to_string(&outcome).map_err(|source| WorkflowError::Corrupt { id: key.to_owned(), source })?;
        archive.record_request(&ticket.customer_id, key, fingerprint, &json).await.map_err(archive_error)?;
    }
    Ok(Some(ticket.status))
}

/// What a triage thread is once `Finisher::repair` has looked at it.
// Unboxed on purpose: a return value taken apart at once, and most threads read are active.
#[allow(clippy::large_enum_variant)]
enum Repaired {
    /// An active ticket.
    Active(TriageState, Checkpoint),
    /// Nothing active: the ticket was archived (now or before), or the thread is not a
    /// ticket's. `recorded_key` is the idempotency key of the run whose ticket the repair
    /// archived, under which it recorded the run's outcome.
    Finished { recorded_key: Option<String> },
}

/// A customer's active tickets, and the idempotency keys whose outcomes the repairs that
/// found them recorded.
#[derive(Default)]
struct ActiveTickets {
    tickets: Vec<(TriageState, Checkpoint)>,
    recorded_keys: Vec<String>,
}

/// Archive-then-delete, and its repair.
struct Finisher {
    runner: Runner<TriageState>,
    archive: Arc<dyn TicketArchive>,
}

impl Finisher {
    fn status_of(&self, action: super::RecommendedAction) -> TicketStatus {
        match action {
            super::RecommendedAction::AutoRespond => TicketStatus::Resolved,
            super::RecommendedAction::EscalateHuman => TicketStatus::Escalated,
            super::RecommendedAction::RouteSpecialist => TicketStatus::Active,
        }
    }

    /// Archives a thread's ticket, then deletes its checkpoints. For the caller of the run, which
    /// records the outcome under its key itself.
    async fn complete(&self, thread: &str) -> Result<(), WorkflowError> {
        let Some((state, cp)) = self.runner.state(thread).await.map_err(WorkflowError::Run)? else { return Ok(()) };
        let run = CompletedRun { thread_id: thread, run_id: &cp.run.run_id, idempotency_key: None, fingerprint: None };
        self.archive_and_delete(run, &state, cp.created_at).await
    }

    /// Archives the ticket of `run`'s completed `state` (recording its outcome under the key
    /// `run` names, if any), then deletes the thread's checkpoints.
    async fn archive_and_delete(
        &self,
        run: CompletedRun<'_>,
        state: &TriageState,
        completed_at: SystemTime,
    ) -> Result<(), WorkflowError> {
        let thread = run.thread_id;
        let Some(status) = archive_completed(&*self.archive, run, state, completed_at).await? else { return Ok(()) };
        // Unsynced: a delete lost in a crash leaves an archived ticket's thread, which every
        // read of active tickets and the start-up sweep delete again (`repair`).
        match self.runner.delete_thread_unsynced(thread).await {
            Ok(_) => {
                info!(thread_id = thread, status = status.as_str(), "ticket archived");
                Ok(())
            }
            // A follow-up holds the thread; the next repair pass deletes it.
            Err(RunError::ThreadBusy { .. }) => {
                warn!(thread_id = thread, "archived ticket still busy; its checkpoint is deleted on the next repair");
                Ok(())
            }
            Err(other) => Err(WorkflowError::Run(other)),
        }
    }

    /// Returns the thread's state if the ticket is really active; finishes it otherwise.
    async fn repair(&self, thread: &str) -> Result<Repaired, WorkflowError> {
        let gone = Repaired::Finished { recorded_key: None };
        let Some((state, cp)) = self.runner.state(thread).await.map_err(WorkflowError::Run)? else { return Ok(gone) };
        if cp.workflow != NAME {
            return Ok(gone);
        }
        // Not a ticket to list or to match a message against: an archived ticket's thread that a
        // crash brought back, or a thread without a ticket, which a new ticket's failed first run
        // left before such runs deleted the threads they created.
        let leftover = state.ticket.ticket_id.is_empty()
            || self.archive.exists(&key_in_thread(thread, &state.ticket.ticket_id)).await.map_err(archive_error)?;
        if leftover {
            match self.runner.delete_thread_unsynced(thread).await {
                Ok(_) | Err(RunError::ThreadBusy { .. }) => return Ok(gone),
                Err(other) => return Err(WorkflowError::Run(other)),
            }
        }
        let completing = state.triage_result.as_ref().is_some_and(|r| r.recommended_action.completes_ticket());
        if completing && cp.run.status == RunStatus::Completed {
            // Its handoff failed, and so did (or never came) its caller's own archiving.
            let run = CompletedRun {
                thread_id: thread,
                run_id: &cp.run.run_id,
                idempotency_key: cp.run.idempotency_key.as_deref(),
                fingerprint: cp.run.fingerprint.as_deref(),
            };
            self.archive_and_delete(run, &state, cp.created_at).await?;
            let recorded_key = cp.run.idempotency_key.filter(|_| cp.run.fingerprint.is_some());
            return Ok(Repaired::Finished { recorded_key });
        }
        Ok(Repaired::Active(state, cp))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thread_ids_name_their_tenant_and_archive_keys() {
        let acme = Tenant::new("acme").unwrap();
        for tenant in [Tenant::default(), acme] {
            let thread = thread_id(&tenant.key("CUST-1"), "TKT-1");
            assert_eq!(key_in_thread(&thread, "TKT-1"), tenant.key("TKT-1"));
            assert_eq!(key_in_thread(&thread, "CUST-1"), tenant.key("CUST-1"));
            assert_eq!(archived_ticket_key(&thread), Some(tenant.key("TKT-1")));
        }
        assert_eq!(thread_scope("acme/CUST-1:TKT-1"), "acme/");
        // A default-tenant ticket id from before ids were refused a '/' names no tenant.
        assert_eq!(thread_scope("CUST-1:a/b"), "");
        assert_eq!(archived_ticket_key("CUST-1:a/b").as_deref(), Some("a/b"));
        assert_eq!(archived_ticket_key("conversation-1"), None);
        assert_eq!(archived_ticket_key("CUST-1:"), None);
    }
}
