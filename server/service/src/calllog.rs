//! The LLM call log in the database: [`SqlCallLog`] files every model call a workflow run made
//! under its thread, off the run's path, and [`LlmCallLedger`] reads a thread's calls back for
//! `WorkflowService/ListLlmCalls`.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc,
    },
    time::Duration,
};

use frontdesk_llm::{CallLog, CallLogEntry, CallRecord, ChatRequest, ChatResponse, LlmError, CALL_LOG_TARGET};
use frontdesk_runtime::CheckpointError;
use frontdesk_store::{Database, LlmCallRow, LlmCallTotals, StoreError, MAX_LLM_CALLS_PER_INSERT};
use frontdesk_workflows::{page_token, tenant, Tenant, WorkflowError};
use tokio::sync::{mpsc, watch};
use tracing::{debug, info, warn};

use crate::registry::Registry;

/// A [`CallLog`] writing one `llm_calls` row per call made by a workflow run (a call without a
/// [`frontdesk_llm::CallContext`] has no thread to be filed under and is skipped).
///
/// `record` is called on the run's path and never waits: the row goes into a bounded queue
/// that one writer task drains into the database, every row waiting at that moment in one
/// statement (up to [`MAX_LLM_CALLS_PER_INSERT`]). When the queue is full (the database is far
/// slower than the model calls) the row is dropped and counted, with a warning at the 1st,
/// 2nd, 4th, 8th... drop, rather than slowing a run down. A write that fails is logged once
/// until writes work again.
pub struct SqlCallLog {
    queue: mpsc::Sender<LlmCallRow>,
    capacity: usize,
    full_prompts: bool,
    /// Rows queued so far.
    queued: AtomicU64,
    /// Rows the writer has finished with (written or failed), so far.
    done: watch::Receiver<u64>,
    dropped: AtomicU64,
}

impl std::fmt::Debug for SqlCallLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SqlCallLog")
            .field("capacity", &self.capacity)
            .field("full_prompts", &self.full_prompts)
            .field("queued", &self.queued)
            .field("dropped", &self.dropped)
            .finish_non_exhaustive()
    }
}

impl SqlCallLog {
    /// Rows that may wait for the writer before further calls are dropped from the log.
    pub const CAPACITY: usize = 1024;

    /// Starts the writer task on the current runtime. It ends when the log is dropped.
    pub fn start(database: Database, full_prompts: bool) -> Arc<Self> {
        Self::with_capacity(database, full_prompts, Self::CAPACITY)
    }

    pub fn with_capacity(database: Database, full_prompts: bool, capacity: usize) -> Arc<Self> {
        let capacity = capacity.max(1);
        let (queue, mut rows) = mpsc::channel::<LlmCallRow>(capacity);
        let (done_tx, done) = watch::channel(0u64);
        tokio::spawn(async move {
            let mut done = 0u64;
            let mut failing = false;
            let mut batch = Vec::with_capacity(MAX_LLM_CALLS_PER_INSERT);
            // Whatever queued while the last batch was written goes in the next one, so under
            // load the log takes the database's write connection once per batch, not per call.
            while rows.recv_many(&mut batch, MAX_LLM_CALLS_PER_INSERT).await > 0 {
                match database.record_llm_calls(&batch).await {
                    Ok(()) if failing => {
                        failing = false;
                        info!(target: CALL_LOG_TARGET, "llm calls are recorded in the database again");
                    }
                    Ok(()) => {}
                    Err(error) if !failing => {
                        failing = true;
                        warn!(
                            target: CALL_LOG_TARGET,
                            error = %error,
                            "cannot record llm calls in the database; they are dropped until it works again"
                        );
                    }
                    Err(_) => {}
                }
                done += batch.len() as u64;
                batch.clear();
                done_tx.send_replace(done);
            }
            debug!(target: CALL_LOG_TARGET, "llm call log writer stopped");
        });
        Arc::new(Self { queue, capacity, full_prompts, queued: AtomicU64::new(0), done, dropped: AtomicU64::new(0) })
    }

    /// Calls dropped because the queue was full.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Ordering::Relaxed)
    }

    /// Waits, at most `timeout`, until every row queued before this call has been written (or
    /// has failed to be). Returns whether they were.
    pub async fn flushed(&self, timeout: Duration) -> bool {
        let target = self.queued.load(Ordering::SeqCst);
        let mut done = self.done.clone();
        let written = matches!(tokio::time::timeout(timeout, done.wait_for(|done| *done >= target)).await, Ok(Ok(_)));
        written
    }
}

impl CallLog for SqlCallLog {
    fn record(
        &self,
        request: &ChatRequest,
        response: Option<&ChatResponse>,
        record: &CallRecord,
        error: Option<&LlmError>,
    ) {
        let entry = CallLogEntry::new(request, response, record, error, self.full_prompts);
        if entry.thread_id.is_empty() {
            return;
        }
        let row = LlmCallRow {
            id: uuid::Uuid::now_v7().to_string(),
            thread_id: entry.thread_id,
            run_id: entry.run_id,
            node: entry.node,
            purpose: entry.purpose,
            model: entry.model,
            prompt_tokens: entry.prompt_tokens,
            completion_tokens: entry.completion_tokens,
            cost_usd: entry.cost_usd,
            latency_ms: entry.latency_ms,
            attempts: entry.attempts,
            error: entry.error,
            prompt_json: entry.prompt.to_string(),
            response_json: entry.response.to_string(),
            at: record.at,
        };
        match self.queue.try_send(row) {
            Ok(()) => {
                self.queued.fetch_add(1, Ordering::SeqCst);
            }
            Err(mpsc::error::TrySendError::Full(row)) => {
                let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
                if dropped.is_power_of_two() {
                    warn!(
                        target: CALL_LOG_TARGET,
                        dropped,
                        capacity = self.capacity,
                        thread_id = %row.thread_id,
                        purpose = %row.purpose,
                        "llm call log queue full: call not recorded in the database"
                    );
                }
            }
            Err(mpsc::error::TrySendError::Closed(_)) => {
                debug!(target: CALL_LOG_TARGET, "llm call log writer gone: call not recorded in the database");
            }
        }
    }
}

/// Longest thread id accepted (conversation ids allow 128 characters; ticket threads join two ids).
const THREAD_ID_MAX: usize = 512;
/// How long a listing waits for calls already made to reach the database.
const FLUSH_WAIT: Duration = Duration::from_secs(2);

/// A thread's calls (newest first) and the totals over all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct ThreadCalls {
    pub calls: Vec<LlmCallRow>,
    pub totals: LlmCallTotals,
    /// Where the next page starts; `None` on the last page.
    pub next_page_token: Option<String>,
}

/// How many bytes of prompts, replies and errors one page carries at most (about: each call
/// also counts a fixed allowance for its other fields). With `model.call_log = "full"` a call
/// carries its whole prompt, and a page of them would pass gRPC's default 4 MiB message limit
/// that clients decode with; a page that reaches this ends early, with a token for the rest.
pub const PAGE_BYTES: usize = 3 * 1024 * 1024;
/// What a call's fields other than prompt, reply and error take, about, in a response.
const CALL_OVERHEAD_BYTES: usize = 256;

/// Where the next page of a thread's calls starts: the last listed call's time and id.
#[derive(serde::Serialize, serde::Deserialize)]
struct CallCursor {
    /// Milliseconds since the Unix epoch, as the log stores them.
    at_ms: u64,
    id: String,
}

fn call_bytes(call: &LlmCallRow) -> usize {
    CALL_OVERHEAD_BYTES + call.prompt_json.len() + call.response_json.len() + call.error.as_deref().map_or(0, str::len)
}

/// Reads the call log per thread.
pub struct LlmCallLedger {
    database: Database,
    /// The writer, when the log is on: a listing first waits for the calls already made.
    log: Option<Arc<SqlCallLog>>,
}

fn store_error(error: StoreError) -> WorkflowError {
    WorkflowError::Store(CheckpointError::Unavailable(Box::new(error)))
}

impl LlmCallLedger {
    pub fn new(database: Database, log: Option<Arc<SqlCallLog>>) -> Self {
        Self { database, log }
    }

    pub fn log(&self) -> Option<&Arc<SqlCallLog>> {
        self.log.as_ref()
    }

    /// A page of a thread's calls, the most recent first: at most `limit`, fewer when their
    /// prompts and replies reach [`PAGE_BYTES`] (never none while calls remain), after the page
    /// `page_token` ends; and the thread's totals. Calls made before this is asked are waited
    /// for (briefly), so a caller that has just seen a turn finish sees its calls. A thread
    /// without calls is `NotFound` unless one of `registry`'s workflows knows it.
    pub async fn calls(
        &self,
        registry: &Registry,
        tenant: &Tenant,
        id: &str,
        limit: usize,
        page_token: Option<&str>,
    ) -> Result<ThreadCalls, WorkflowError> {
        if id.is_empty() || id.len() > THREAD_ID_MAX || id.contains(tenant::SEPARATOR) {
            return Err(WorkflowError::InvalidArgument {
                field: "thread_id",
                reason: format!("must be 1 to {THREAD_ID_MAX} bytes without '/'"),
            });
        }
        WorkflowError::reject_nul("thread_id", id)?;
        let key = tenant.key(id);
        let thread_id = key.as_str();
        if let Some(log) = &self.log {
            if !log.flushed(FLUSH_WAIT).await {
                debug!(thread_id, "llm call log still writing; listing what is recorded");
            }
        }
        let after: Option<CallCursor> = page_token::decode("llm_calls", thread_id, page_token)?;
        // One call more than the page, to know whether another page follows.
        let fetch = limit.max(1).saturating_add(1);
        let mut calls = match &after {
            None => self.database.llm_calls(thread_id, fetch).await,
            Some(cursor) => {
                let at = std::time::UNIX_EPOCH + Duration::from_millis(cursor.at_ms);
                let before = (at, cursor.id.as_str());
                self.database.llm_calls_before(thread_id, before, fetch).await
            }
        }
        .map_err(store_error)?;
        if calls.is_empty() && after.is_none() {
            if !known(registry, thread_id).await? {
                return Err(WorkflowError::NotFound { what: "thread", id: id.to_owned() });
            }
            return Ok(ThreadCalls { calls, totals: LlmCallTotals::default(), next_page_token: None });
        }
        let mut bytes = 0;
        let fits = calls
            .iter()
            .take(limit.max(1))
            .take_while(|call| {
                let first = bytes == 0;
                bytes += call_bytes(call);
                first || bytes <= PAGE_BYTES
            })
            .count();
        let more = calls.len() > fits;
        calls.truncate(fits);
        let next_page_token = match calls.last() {
            Some(last) if more => {
                let at_ms = last.at.duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
                let cursor = CallCursor { at_ms, id: last.id.clone() };
                Some(page_token::encode("llm_calls", thread_id, &cursor))
            }
            _ => None,
        };
        let totals = self.database.llm_call_totals(thread_id).await.map_err(store_error)?;
        Ok(ThreadCalls { calls, totals, next_page_token })
    }

    /// Erases the calls of one of `tenant`'s threads (`DeleteConversation`), those still queued
    /// included: when the log has not written them within `FLUSH_WAIT` (2 s), this fails as
    /// unavailable instead of deleting what is written and leaving the rest to be written after.
    pub async fn forget(&self, tenant: &Tenant, id: &str) -> Result<u64, WorkflowError> {
        if let Some(log) = &self.log {
            if !log.flushed(FLUSH_WAIT).await {
                let behind = "the model-call log is still writing earlier calls; retry the deletion";
                return Err(WorkflowError::Store(CheckpointError::Unavailable(behind.into())));
            }
        }
        self.database.delete_llm_calls(&tenant.key(id)).await.map_err(store_error)
    }

    /// [`LlmCallLedger::forget`] for an id under which `DeleteConversation` found no
    /// conversation: the calls a deletion left behind when their erasure failed after the
    /// conversation was gone. Calls are filed by thread id alone, and every workflow's threads
    /// share those ids, so while `registry` still knows a thread under the id (an investigation,
    /// a research run, a live or archived ticket) the calls are that thread's, which erasing a
    /// conversation never touches, and they stay. Returns how many calls were erased.
    pub async fn forget_left_behind(
        &self,
        registry: &Registry,
        tenant: &Tenant,
        id: &str,
    ) -> Result<u64, WorkflowError> {
        if known(registry, &tenant.key(id)).await? {
            return Ok(0);
        }
        self.forget(tenant, id).await
    }
}

/// Whether the thread exists in a store the runners write to (a conversation, an investigation,
/// a research run, a live ticket, in the database or in Redis), or a workflow keeps it elsewhere
/// now that it is gone (an archived ticket).
async fn known(registry: &Registry, thread_id: &str) -> Result<bool, WorkflowError> {
    for store in registry.runs().stores() {
        if store.thread(thread_id).await?.is_some() {
            return Ok(true);
        }
    }
    for workflow in registry.workflows() {
        if workflow.keeps_thread(thread_id).await? {
            return Ok(true);
        }
    }
    Ok(false)
}

#[cfg(test)]
mod tests {
    use std::time::SystemTime;

    use frontdesk_llm::{CallContext, ChatMessage, TokenUsage};
    use frontdesk_store::StoreOptions;

    use super::*;

    fn request(thread_id: Option<&str>) -> ChatRequest {
        ChatRequest {
            context: thread_id.map(|t| CallContext { thread_id: t.into(), run_id: "run-1".into(), node: "n".into() }),
            ..ChatRequest::new("p.q", vec![ChatMessage::system("be brief"), ChatMessage::user("secret 4111")])
        }
    }

    fn record(request: &ChatRequest) -> CallRecord {
        CallRecord {
            purpose: request.purpose.clone(),
            model: "m".into(),
            usage: TokenUsage { prompt_tokens: 7, completion_tokens: 3 },
            cost_usd: 0.25,
            latency: Duration::from_millis(12),
            attempts: 2,
            context: request.context.clone(),
            at: SystemTime::now(),
        }
    }

    fn reply() -> ChatResponse {
        ChatResponse { content: "fine".into(), tool_calls: Vec::new(), usage: TokenUsage::default(), model: "m".into() }
    }

    /// A registry of no workflows over `stores` (the first its checkpointer).
    fn registry(stores: &[Arc<dyn frontdesk_runtime::Checkpointer>]) -> Registry {
        let runs = Arc::new(frontdesk_runtime::RunRegistry::default());
        for store in stores {
            runs.add_store(store);
        }
        Registry::new(Vec::new(), stores[0].clone(), runs)
    }

    async fn database() -> Database {
        Database::connect("sqlite::memory:", StoreOptions { max_connections: 1, checkpoint_retention: 1 })
            .await
            .unwrap()
    }

    #[tokio::test]
    async fn calls_of_a_run_are_recorded_redacted_and_others_skipped() {
        let db = database().await;
        let log = SqlCallLog::start(db.clone(), false);
        for thread in [Some("conv-1"), None] {
            let request = request(thread);
            log.record(&request, Some(&reply()), &record(&request), None);
        }
        let failed = request(Some("conv-1"));
        log.record(&failed, None, &record(&failed), Some(&LlmError::Timeout));
        assert!(log.flushed(Duration::from_secs(5)).await);
        let calls = db.llm_calls("conv-1", 10).await.unwrap();
        assert_eq!(calls.len(), 2, "the call without a thread is skipped: {calls:?}");
        let ok = &calls[1];
        assert_eq!((ok.run_id.as_str(), ok.node.as_str(), ok.purpose.as_str()), ("run-1", "n", "p.q"));
        assert_eq!((ok.prompt_tokens, ok.completion_tokens, ok.latency_ms, ok.attempts), (7, 3, 12, 2));
        assert_eq!(ok.prompt_json, r#"[{"role":"system","chars":8},{"role":"user","chars":11}]"#);
        assert_eq!(ok.response_json, r#"{"chars":4,"tool_calls":[]}"#);
        assert_eq!(ok.error, None);
        assert_eq!(calls[0].error.as_deref(), Some("llm request timed out"));
        assert_eq!(calls[0].response_json, "null");
        assert_eq!(log.dropped(), 0);
    }

    /// With full prompts a page of calls would pass gRPC's 4 MiB message limit: a page ends
    /// once its calls reach `PAGE_BYTES`, with a token for the rest; a call bigger than that is
    /// still listed, alone.
    #[tokio::test]
    async fn a_page_ends_early_at_its_byte_budget_and_reads_on_with_its_token() {
        let db = database().await;
        let big = |n: u64, kib: usize| LlmCallRow {
            id: format!("call-{n}"),
            thread_id: "conv-9".into(),
            run_id: "run-1".into(),
            node: "n".into(),
            purpose: "p.q".into(),
            model: "m".into(),
            prompt_tokens: 1,
            completion_tokens: 1,
            cost_usd: 0.0,
            latency_ms: 1,
            attempts: 1,
            error: None,
            prompt_json: format!(r#"[{{"role":"user","content":"{}"}}]"#, "x".repeat(kib * 1024)),
            response_json: "{}".into(),
            at: std::time::UNIX_EPOCH + Duration::from_secs(1_800_000_000 + n),
        };
        // Newest first: 4 MiB, then four of 1.2 MiB.
        for (n, kib) in [(5, 4096), (4, 1200), (3, 1200), (2, 1200), (1, 1200)] {
            db.record_llm_call(&big(n, kib)).await.unwrap();
        }
        let registry = registry(&[Arc::new(db.checkpointer())]);
        let ledger = LlmCallLedger::new(db.clone(), None);
        let tenant = Tenant::default();
        let mut pages = Vec::new();
        let mut token: Option<String> = None;
        loop {
            let page = ledger.calls(&registry, &tenant, "conv-9", 50, token.as_deref()).await.unwrap();
            assert_eq!(page.totals.calls, 5);
            pages.push(page.calls.iter().map(|c| c.id.clone()).collect::<Vec<_>>());
            match page.next_page_token {
                Some(next) => token = Some(next),
                None => break,
            }
        }
        assert_eq!(pages, [vec!["call-5"], vec!["call-4", "call-3"], vec!["call-2", "call-1"]]);
        let bad = ledger.calls(&registry, &tenant, "conv-8", 50, token.as_deref()).await.unwrap_err();
        assert!(matches!(bad, WorkflowError::InvalidArgument { field: "page_token", .. }), "{bad:?}");
    }

    /// Erasure never leaves a call behind to be written after it: with the writer stuck, it
    /// fails as unavailable (the caller retries) instead of deleting only what is written.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn forgetting_a_thread_waits_for_its_queued_calls_or_fails() {
        let db = database().await;
        let log = SqlCallLog::start(db.clone(), false);
        let ledger = LlmCallLedger::new(db.clone(), Some(log.clone()));
        let tenant = Tenant::default();
        // The writer needs the in-memory database's only connection, held here.
        let held = db.sqlite_pool().unwrap().acquire().await.unwrap();
        let request = request(Some("conv-3"));
        log.record(&request, Some(&reply()), &record(&request), None);
        let error = ledger.forget(&tenant, "conv-3").await.unwrap_err();
        assert!(matches!(error, WorkflowError::Store(CheckpointError::Unavailable(_))), "{error:?}");
        drop(held);
        assert_eq!(ledger.forget(&tenant, "conv-3").await.unwrap(), 1, "the queued call is written, then erased");
        assert!(db.llm_calls("conv-3", 10).await.unwrap().is_empty());
    }

    /// What a failed erasure left behind is erased by its retry, but only under an id no thread
    /// holds now: the calls of another workflow's thread under that id stay.
    #[tokio::test]
    async fn calls_left_behind_are_forgotten_only_under_an_id_no_thread_holds() {
        use frontdesk_runtime::{conformance::sample, Checkpointer, RunStatus};
        let db = database().await;
        let store: Arc<dyn Checkpointer> = Arc::new(db.checkpointer());
        store.put(&sample("INV-1", 1, RunStatus::Completed)).await.unwrap();
        let registry = registry(&[store]);
        let log = SqlCallLog::start(db.clone(), false);
        let ledger = LlmCallLedger::new(db.clone(), Some(log.clone()));
        for thread in ["INV-1", "conv-gone"] {
            let request = request(Some(thread));
            log.record(&request, Some(&reply()), &record(&request), None);
        }
        assert!(log.flushed(Duration::from_secs(5)).await);
        let tenant = Tenant::default();
        assert_eq!(ledger.forget_left_behind(&registry, &tenant, "INV-1").await.unwrap(), 0);
        assert_eq!(db.llm_calls("INV-1", 10).await.unwrap().len(), 1, "the investigation's call stays");
        assert_eq!(ledger.forget_left_behind(&registry, &tenant, "conv-gone").await.unwrap(), 1);
        assert!(db.llm_calls("conv-gone", 10).await.unwrap().is_empty());
    }

    /// A live ticket may be in Redis rather than the database: it is known there, with no calls.
    #[tokio::test]
    async fn a_thread_in_any_store_of_the_runners_is_known() {
        use frontdesk_runtime::{conformance::sample, Checkpointer, MemoryCheckpointer, RunStatus};
        let db = database().await;
        let active: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        active.put(&sample("C001:T1", 1, RunStatus::Running)).await.unwrap();
        let registry = registry(&[Arc::new(db.checkpointer()), active]);
        let ledger = LlmCallLedger::new(db.clone(), None);
        let tenant = Tenant::default();
        assert!(ledger.calls(&registry, &tenant, "C001:T1", 10, None).await.unwrap().calls.is_empty());
        let unknown = ledger.calls(&registry, &tenant, "C001:T2", 10, None).await.unwrap_err();
        assert!(matches!(unknown, WorkflowError::NotFound { .. }), "{unknown:?}");
    }

    #[tokio::test]
    async fn a_full_queue_drops_calls_instead_of_waiting() {
        let db = database().await;
        // On this single-threaded runtime the writer only runs once the test awaits, so the
        // queue of one is full after the first call.
        let log = SqlCallLog::with_capacity(db.clone(), true, 1);
        let request = request(Some("conv-2"));
        for _ in 0..3 {
            log.record(&request, Some(&reply()), &record(&request), None);
        }
        assert_eq!(log.dropped(), 2);
        assert!(log.flushed(Duration::from_secs(5)).await);
        let calls = db.llm_calls("conv-2", 10).await.unwrap();
        assert_eq!(calls.len(), 1);
        assert!(calls[0].prompt_json.contains("secret 4111"), "full prompts: {}", calls[0].prompt_json);
    }
}
