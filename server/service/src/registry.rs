//! The workflows this process hosts, looked up by name or by the conversation they own.

use std::{collections::HashMap, sync::Arc};

use frontdesk_api::v1 as pb;
use frontdesk_runtime::{Checkpointer, RunRegistry, RunSubscription, ThreadHead, ThreadQuery, UnfinishedRun};
use frontdesk_workflows::{conversation::validate_id, page_token, ConversationView, Tenant, WorkflowError};

use crate::workflows::{Conversations, HostedWorkflow, WorkflowKind};

/// The page-token listing name of conversations.
const CONVERSATION_LISTING: &str = "conversations";

pub struct Registry {
    /// In `WORKFLOWS` order.
    workflows: Vec<Arc<dyn HostedWorkflow>>,
    checkpointer: Arc<dyn Checkpointer>,
    runs: Arc<RunRegistry>,
}

impl Registry {
    pub fn new(
        workflows: Vec<Arc<dyn HostedWorkflow>>,
        checkpointer: Arc<dyn Checkpointer>,
        runs: Arc<RunRegistry>,
    ) -> Self {
        Self { workflows, checkpointer, runs }
    }

    /// Every hosted workflow.
    pub fn workflows(&self) -> impl Iterator<Item = &Arc<dyn HostedWorkflow>> {
        self.workflows.iter()
    }

    pub fn workflow(&self, name: &str) -> Result<&Arc<dyn HostedWorkflow>, WorkflowError> {
        self.workflows
            .iter()
            .find(|w| w.name() == name)
            .ok_or_else(|| WorkflowError::NotFound { what: "workflow", id: name.to_owned() })
    }

    /// The hosted workflow of type `T` (such as `workflows::triage::HostedTriage`).
    pub fn find<T: HostedWorkflow>(&self) -> Option<&T> {
        self.workflows.iter().find_map(|w| w.as_any().downcast_ref::<T>())
    }

    pub fn runs(&self) -> &Arc<RunRegistry> {
        &self.runs
    }

    /// Cancels a running run. Run ids are UUIDs (the runner mints them), so anything else is a
    /// malformed id rather than an unknown one; a run that is not running, never did or has
    /// already ended, is `NotFound`: there is nothing left to cancel, and a caller told "not
    /// cancelled" could not tell a typo from a finished run.
    /// Another tenant's run is as unknown as one that never existed.
    pub fn cancel_run(&self, tenant: &Tenant, run_id: &str) -> Result<(), WorkflowError> {
        validate_run_id(run_id)?;
        if self.runs.cancel_where(run_id, |thread| tenant.owns(thread)) {
            Ok(())
        } else {
            Err(WorkflowError::NotFound { what: "run", id: run_id.to_owned() })
        }
    }

    /// Follows a run this replica is running or ended recently: its events after `after`, then
    /// live ones until its last.
    pub fn subscribe_run(&self, tenant: &Tenant, run_id: &str, after: u64) -> Result<RunSubscription, WorkflowError> {
        validate_run_id(run_id)?;
        self.runs
            .subscribe(run_id, after)
            .filter(|subscription| tenant.owns(subscription.thread_id()))
            .ok_or_else(|| WorkflowError::NotFound { what: "run", id: run_id.to_owned() })
    }

    fn conversational(&self) -> impl Iterator<Item = &Conversations> {
        self.workflows.iter().filter_map(|w| match w.kind() {
            WorkflowKind::Conversational(conversations) => Some(conversations),
            WorkflowKind::Task => None,
        })
    }

    /// A conversational workflow by name; a task workflow is `NotConversational`.
    pub fn conversation_workflow(&self, name: &str) -> Result<&Conversations, WorkflowError> {
        match self.workflow(name)?.kind() {
            WorkflowKind::Conversational(conversations) => Ok(conversations),
            WorkflowKind::Task => Err(WorkflowError::NotConversational { workflow: name.to_owned() }),
        }
    }

    /// The workflow that owns one of `tenant`'s conversations.
    pub async fn owner_of(&self, tenant: &Tenant, conversation_id: &str) -> Result<&Conversations, WorkflowError> {
        validate_id(conversation_id)?;
        let thread = self.checkpointer.thread(&tenant.key(conversation_id)).await?;
        let thread = thread.ok_or_else(|| conversation_not_found(conversation_id))?;
        self.owner(conversation_id, &thread.workflow)
    }

    /// [`Registry::owner_of`] for a turn: the conversation's newest checkpoint comes with the
    /// answer, for the turn to start from (`TurnOptions::routed`), so that a turn reads the
    /// conversation once.
    pub async fn route_turn(
        &self,
        tenant: &Tenant,
        conversation_id: &str,
    ) -> Result<(&Conversations, ThreadHead), WorkflowError> {
        validate_id(conversation_id)?;
        let head = self.checkpointer.head(&tenant.key(conversation_id)).await?;
        let head = head.ok_or_else(|| conversation_not_found(conversation_id))?;
        Ok((self.owner(conversation_id, &head.checkpoint.workflow)?, head))
    }

    fn owner(&self, conversation_id: &str, workflow: &str) -> Result<&Conversations, WorkflowError> {
        self.conversational().find(|c| c.name() == workflow).ok_or_else(|| conversation_not_found(conversation_id))
    }

    /// Conversations of every conversational workflow (or one), ordered by id, a page at a
    /// time: `page_token` is the token this returned for the page before (opaque, bound to the
    /// workflow filter; see `frontdesk_workflows::page_token`), and one it did not return is
    /// `InvalidArgument` on `page_token`.
    pub async fn list_conversations(
        &self,
        tenant: &Tenant,
        workflow: Option<&str>,
        page_token: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView<pb::conversation::State>>, Option<String>), WorkflowError> {
        // Bound to the tenant too: a token is no use to another tenant.
        let query = format!("{tenant}\n{}", workflow.unwrap_or(""));
        let query = query.as_str();
        let after: Option<String> = page_token::decode(CONVERSATION_LISTING, query, page_token.as_deref())?;
        let (views, next) = self.list_conversations_after(tenant, workflow, after, limit).await?;
        Ok((views, next.map(|after| page_token::encode(CONVERSATION_LISTING, query, &after))))
    }

    /// [`Registry::list_conversations`] by the last conversation id of the page before.
    async fn list_conversations_after(
        &self,
        tenant: &Tenant,
        workflow: Option<&str>,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView<pb::conversation::State>>, Option<String>), WorkflowError> {
        if let Some(name) = workflow {
            return self.conversation_workflow(name)?.list(tenant, after, limit).await;
        }
        let mut views = Vec::with_capacity(limit);
        let mut after = after;
        let prefix = Some(tenant.key_prefix()).filter(|p| !p.is_empty());
        loop {
            let page = self
                .checkpointer
                .list_threads(&ThreadQuery {
                    after: after.clone(),
                    limit,
                    prefix: prefix.clone(),
                    ..Default::default()
                })
                .await?;
            for thread in &page.threads {
                after = Some(thread.thread_id.clone());
                if !tenant.owns(&thread.thread_id) {
                    continue;
                }
                let Some(owner) = self.conversational().find(|c| c.name() == thread.workflow) else { continue };
                match owner.summarize(tenant, thread).await {
                    Ok(view) => views.push(view),
                    Err(WorkflowError::NotFound { .. }) => continue,
                    Err(other) => return Err(other),
                }
                if views.len() == limit {
                    let more = page.next_after.is_some()
                        || thread.thread_id != page.threads.last().map_or("", |t| &t.thread_id);
                    return Ok((views, if more { after } else { None }));
                }
            }
            if page.next_after.is_none() {
                return Ok((views, None));
            }
        }
    }

    /// Finishes the runs a crash interrupted, for every workflow at once (each in its own way:
    /// see `HostedWorkflow::recover`).
    pub async fn recover(&self) -> Result<usize, WorkflowError> {
        let counts = futures::future::join_all(self.workflows.iter().map(|w| w.recover())).await;
        counts.into_iter().try_fold(0, |total, count| Ok(total + count?))
    }

    /// Finishes the runs of replicas whose lease has expired, for every workflow at once (see
    /// `HostedWorkflow::take_over`); `replica` is this process's id. In each store the runners
    /// write to (the database, and Redis when triage keeps its threads there), one list of the
    /// running threads and one read of each other replica's lease pick out the abandoned runs,
    /// and each workflow with one among them is handed its own: nothing is listed twice. While
    /// serving, those lists hold every run in flight, on this replica and the others, every few
    /// seconds.
    pub async fn take_over(&self, replica: &str) -> Result<usize, WorkflowError> {
        let mut by_workflow: HashMap<String, Vec<UnfinishedRun>> = HashMap::new();
        for store in self.runs.stores() {
            let listed = store.unfinished_runs().await?;
            for run in self.runs.abandoned(&*store, Some(replica), listed).await {
                by_workflow.entry(run.workflow.clone()).or_default().push(run);
            }
        }
        let counts = futures::future::join_all(
            self.workflows
                .iter()
                .filter_map(|w| by_workflow.remove(w.name()).map(|runs| (w, runs)))
                .map(|(w, runs)| w.take_over(runs)),
        )
        .await;
        // A run of a workflow this server does not host is left to a replica that does.
        counts.into_iter().try_fold(0, |total, count| Ok(total + count?))
    }
}

/// A run id as events carry it: a UUID.
fn validate_run_id(run_id: &str) -> Result<(), WorkflowError> {
    if run_id.is_empty() {
        return Err(WorkflowError::InvalidArgument { field: "run_id", reason: "must not be empty".into() });
    }
    if uuid::Uuid::try_parse(run_id).is_err() {
        return Err(WorkflowError::InvalidArgument {
            field: "run_id",
            reason: "must be a run id as events carry it (a UUID)".into(),
        });
    }
    Ok(())
}

fn conversation_not_found(conversation_id: &str) -> WorkflowError {
    WorkflowError::NotFound { what: "conversation", id: conversation_id.to_owned() }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use async_trait::async_trait;
    use frontdesk_runtime::{conformance::sample, GraphDescription, MemoryCheckpointer, RunStatus};

    use super::*;

    /// A hosted workflow that records the runs a takeover scan hands it.
    struct Handed {
        name: &'static str,
        threads: Mutex<Vec<String>>,
    }

    #[async_trait]
    impl HostedWorkflow for Handed {
        fn name(&self) -> &str {
            self.name
        }
        fn description(&self) -> &str {
            ""
        }
        fn kind(&self) -> WorkflowKind<'_> {
            WorkflowKind::Task
        }
        fn graph(&self) -> GraphDescription {
            GraphDescription {
                name: self.name.into(),
                nodes: Vec::new(),
                edges: Vec::new(),
                mermaid: String::new(),
                failure_node: None,
            }
        }
        async fn recover(&self) -> Result<usize, WorkflowError> {
            Ok(0)
        }
        async fn take_over(&self, abandoned: Vec<UnfinishedRun>) -> Result<usize, WorkflowError> {
            let mut threads = self.threads.lock().unwrap();
            threads.extend(abandoned.into_iter().map(|run| run.thread_id));
            Ok(threads.len())
        }
        fn as_any(&self) -> &dyn std::any::Any {
            self
        }
    }

    async fn abandoned_run(store: &dyn Checkpointer, thread: &str, workflow: &str) {
        let mut checkpoint = sample(thread, 1, RunStatus::Running);
        checkpoint.workflow = workflow.into();
        checkpoint.run.owner = Some("replica-dead".into());
        store.put(&checkpoint).await.unwrap();
    }

    /// Triage may keep its threads in Redis, away from the database the other workflows share:
    /// a dead replica's runs are found in every store the runners write to.
    #[tokio::test]
    async fn a_takeover_scan_finds_abandoned_runs_in_every_store_the_runners_write_to() {
        let shared: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        let active: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::default());
        abandoned_run(&*shared, "conv-1", "intake").await;
        abandoned_run(&*active, "C001:T1", "triage").await;
        let runs = Arc::new(RunRegistry::default());
        runs.add_store(&shared);
        runs.add_store(&active);
        let intake = Arc::new(Handed { name: "intake", threads: Mutex::default() });
        let triage = Arc::new(Handed { name: "triage", threads: Mutex::default() });
        let registry = Registry::new(vec![intake.clone(), triage.clone()], shared, runs);
        assert_eq!(registry.take_over("replica-alive").await.unwrap(), 2);
        assert_eq!(*intake.threads.lock().unwrap(), ["conv-1"]);
        assert_eq!(*triage.threads.lock().unwrap(), ["C001:T1"]);
    }
}
