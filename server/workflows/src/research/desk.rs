//! What callers do with research: ask a question (streamed), read one, list them.

use std::{future::Future, pin::Pin, sync::Arc};

use frontdesk_runtime::{Event, EventKind, RunError, RunInput, RunRequest, Runner, ThreadMode, ThreadQuery};
use futures::{Stream, StreamExt};
use sha2::{Digest, Sha256};

use super::{types::*, ResearchState, ResearchUpdate, DEFAULT_RETRY_LIMIT, MAX_RETRY_LIMIT, NAME};
use crate::{page_token, Tenant, WorkflowError};

/// Longest question accepted.
pub const MAX_QUESTION_CHARS: usize = 2_000;

#[derive(Debug, Clone, PartialEq)]
pub struct AskRequest {
    pub question: String,
    pub retry_limit: Option<u32>,
    pub corpus: Option<String>,
    pub idempotency_key: Option<String>,
}

/// A research as callers see it.
#[derive(Debug, Clone, PartialEq)]
pub struct ResearchView {
    pub research_id: String,
    pub state: ResearchState,
    pub updated_at_ms: i64,
}

/// What an ask streams before its outcome, in order: each run event, and right after a node's
/// (or a task's) event what it produced.
#[derive(Debug, Clone, PartialEq)]
pub enum ResearchProgress {
    Event(Event),
    Message(Message),
    Plan(Plan),
    Result { step_id: u32, step: String, result: StepResult, attempt: u32 },
    Verdict { critic: Step, verdict: Verdict, step_id: Option<u32>, retry_count: u32 },
    Expert(ExpertAnswer),
}

type OutcomeFuture = Pin<Box<dyn Future<Output = Result<ResearchView, WorkflowError>> + Send>>;

pub struct ResearchHandle {
    pub research_id: String,
    pub progress: Pin<Box<dyn Stream<Item = ResearchProgress> + Send>>,
    pub outcome: OutcomeFuture,
}

#[derive(Clone)]
pub struct ResearchDesk {
    runner: Arc<Runner<ResearchState>>,
    corpora: Vec<String>,
}

fn invalid(field: &'static str, reason: impl Into<String>) -> WorkflowError {
    WorkflowError::InvalidArgument { field, reason: reason.into() }
}

/// What one node's (or task's) update produced, for the stream. `retries` is the running count
/// of rejections, which the orchestrator adds up on its next step: a rejection streams with the
/// count it brings the question to.
fn produced(update: ResearchUpdate, orchestrator: bool, retries: &mut u32) -> Vec<ResearchProgress> {
    let mut out = Vec::new();
    if let Some(count) = update.retry_count {
        *retries = count;
    }
    out.extend(update.messages.unwrap_or_default().into_iter().map(ResearchProgress::Message));
    // The orchestrator hands rejected steps back to their researchers; it produces no work.
    if orchestrator {
        return out;
    }
    if let Some(Some(plan)) = update.plan {
        out.push(ResearchProgress::Plan(plan));
    }
    let mut verdict = |critic: Step, verdict: Verdict, step_id: Option<u32>, out: &mut Vec<ResearchProgress>| {
        if verdict.decision == Decision::Reject {
            *retries += 1;
        }
        out.push(ResearchProgress::Verdict { critic, verdict, step_id, retry_count: *retries });
    };
    if let Some(Some(v)) = update.plan_verdict {
        verdict(Step::CriticPlanner, v, None, &mut out);
    }
    if let Some(research) = update.research.filter(|r| !r.reset) {
        for (index, record) in research.entries {
            match (record.result, record.verdict) {
                (Some(result), None) => out.push(ResearchProgress::Result {
                    step_id: index,
                    step: record.description,
                    result,
                    attempt: record.attempts,
                }),
                (Some(_), Some(v)) => {
                    verdict(Step::CriticResearcher, v, Some(index), &mut out);
                }
                _ => {}
            }
        }
    }
    if let Some(Some(expert)) = update.expert {
        out.push(ResearchProgress::Expert(expert));
    }
    if let Some(Some(v)) = update.expert_verdict {
        verdict(Step::CriticExpert, v, None, &mut out);
    }
    out
}

impl ResearchDesk {
    pub fn new(runner: Runner<ResearchState>, corpora: Vec<String>) -> Self {
        Self { runner: Arc::new(runner), corpora }
    }

    pub fn runner(&self) -> &Runner<ResearchState> {
        &self.runner
    }

    /// Starts one of `tenant`'s research runs (an idempotency key names it within the tenant).
    pub async fn ask(&self, tenant: &Tenant, request: AskRequest) -> Result<ResearchHandle, WorkflowError> {
        let AskRequest { question, retry_limit, corpus, idempotency_key } = request;
        let question = question.trim().to_owned();
        if question.is_empty() {
            return Err(invalid("question", "is required"));
        }
        if question.chars().count() > MAX_QUESTION_CHARS {
            return Err(invalid("question", format!("must be at most {MAX_QUESTION_CHARS} characters")));
        }
        WorkflowError::reject_nul("question", &question)?;
        crate::idempotency::validate_key(idempotency_key.as_deref())?;
        let retry_limit = match retry_limit {
            None | Some(0) => DEFAULT_RETRY_LIMIT,
            Some(n) if n <= MAX_RETRY_LIMIT => n,
            Some(_) => {
                return Err(invalid(
                    "retry_limit",
                    format!("must be 0 (the default, {DEFAULT_RETRY_LIMIT}) to {MAX_RETRY_LIMIT}"),
                ))
            }
        };
        let corpus = corpus.filter(|c| !c.is_empty()).unwrap_or_else(|| super::SAMPLE_CORPUS.to_owned());
        if !self.corpora.contains(&corpus) {
            return Err(invalid(
                "corpus",
                format!("no corpus named {corpus:?}; configured: {}", self.corpora.join(", ")),
            ));
        }
        // A key names the research, so that a retry finds the first call's thread.
        let research_id = match &idempotency_key {
            Some(key) => format!("RES-{}", uuid::Uuid::new_v5(&uuid::Uuid::NAMESPACE_OID, key.as_bytes()).simple()),
            None => format!("RES-{}", uuid::Uuid::now_v7().simple()),
        };
        let mut hasher = Sha256::new();
        for part in [question.as_str(), &retry_limit.to_string(), corpus.as_str()] {
            hasher.update(part.len().to_le_bytes());
            hasher.update(part.as_bytes());
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        let key = tenant.key(&research_id);
        let mut run = RunRequest::new(key, RunInput::Update(super::initial(&question, &corpus, retry_limit, now)));
        run.mode = ThreadMode::New;
        run.idempotency_key = idempotency_key;
        run.fingerprint = Some(format!("{:x}", hasher.finalize()));
        let handle = self
            .runner
            .start(run)
            .await
            .map_err(|error| WorkflowError::run_on("research", research_id.clone(), error))?;
        let (events, outcome, _cancel) = handle.into_parts();
        let mut retries = 0;
        let progress = events.flat_map(move |event: Event| {
            let update = match &event.kind {
                EventKind::NodeFinished { update_json, .. } | EventKind::TaskFinished { update_json, .. } => {
                    serde_json::from_str::<ResearchUpdate>(update_json).ok()
                }
                _ => None,
            };
            let orchestrator = event.node.as_deref() == Some(super::nodes::ORCHESTRATOR);
            let mut items = vec![ResearchProgress::Event(event)];
            if let Some(update) = update {
                items.extend(produced(update, orchestrator, &mut retries));
            }
            futures::stream::iter(items)
        });
        let desk = self.clone();
        let id = research_id.clone();
        let tenant = tenant.clone();
        let outcome = Box::pin(async move {
            outcome
                .await
                .unwrap_or(Err(RunError::Lost))
                .map_err(|error| WorkflowError::run_on("research", id.clone(), error))?;
            desk.get(&tenant, &id).await
        });
        Ok(ResearchHandle { research_id, progress: Box::pin(progress), outcome })
    }

    pub async fn get(&self, tenant: &Tenant, research_id: &str) -> Result<ResearchView, WorkflowError> {
        if research_id.is_empty() {
            return Err(invalid("research_id", "is required"));
        }
        let found = self
            .runner
            .state(&tenant.key(research_id))
            .await
            .map_err(|e| WorkflowError::run_on("research", research_id, e))?;
        let (state, checkpoint) = found
            .filter(|(state, _)| !state.question.is_empty())
            .ok_or_else(|| WorkflowError::NotFound { what: "research", id: research_id.to_owned() })?;
        let updated_at_ms = checkpoint
            .created_at
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
        Ok(ResearchView { research_id: research_id.to_owned(), state, updated_at_ms })
    }

    /// `tenant`'s research, ordered by id, paged with opaque tokens (bound to the tenant).
    pub async fn list(
        &self,
        tenant: &Tenant,
        page_token: Option<&str>,
        limit: usize,
    ) -> Result<(Vec<ResearchView>, Option<String>), WorkflowError> {
        let after: Option<String> = page_token::decode("research", tenant.name(), page_token)?;
        let prefix = Some(tenant.key("RES-"));
        let query = ThreadQuery { workflow: Some(NAME.to_owned()), prefix, after, limit };
        let page = self.runner.checkpointer().list_threads(&query).await?;
        let mut views = Vec::with_capacity(page.threads.len());
        for thread in &page.threads {
            // The default tenant's prefix `RES-` is no other tenant's (theirs start `<tenant>/`).
            let Some(id) = tenant.id(&thread.thread_id) else { continue };
            views.push(self.get(tenant, id).await?);
        }
        Ok((views, page.next_after.map(|after| page_token::encode("research", tenant.name(), &after))))
    }
}
