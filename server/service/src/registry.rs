//! The workflows this process hosts, looked up by name or by the conversation they own.

use std::{collections::BTreeMap, sync::Arc};

use frontdesk_runtime::{Checkpointer, GraphDescription, RunRegistry, ThreadQuery};
use frontdesk_workflows::{
    conversation::validate_id, triage::TriageDesk, ConversationView, ConversationWorkflow, WorkflowError,
};

pub struct Registry {
    conversational: BTreeMap<String, Arc<dyn ConversationWorkflow>>,
    triage: Option<Arc<TriageDesk>>,
    checkpointer: Arc<dyn Checkpointer>,
    runs: Arc<RunRegistry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WorkflowKind {
    Conversational,
    Task,
}

/// A hosted workflow, as `WorkflowService` shows it.
pub struct WorkflowInfo {
    pub name: String,
    pub description: String,
    pub kind: WorkflowKind,
    pub graph: GraphDescription,
}

const TRIAGE_DESCRIPTION: &str = "Support-ticket triage: ticket matching, translation, classification with customer \
lookup, billing / technical / general specialists with a knowledge base or escalation, persistence";

impl Registry {
    pub fn new(checkpointer: Arc<dyn Checkpointer>, runs: Arc<RunRegistry>) -> Self {
        Self { conversational: BTreeMap::new(), triage: None, checkpointer, runs }
    }

    pub fn set_triage(&mut self, desk: Arc<TriageDesk>) {
        self.triage = Some(desk);
    }

    pub fn triage(&self) -> Option<&Arc<TriageDesk>> {
        self.triage.as_ref()
    }

    /// Every hosted workflow, conversational first.
    pub fn workflows(&self) -> Vec<WorkflowInfo> {
        let mut all: Vec<WorkflowInfo> = self
            .conversational
            .values()
            .map(|w| WorkflowInfo {
                name: w.name().to_owned(),
                description: w.description().to_owned(),
                kind: WorkflowKind::Conversational,
                graph: w.graph(),
            })
            .collect();
        if let Some(desk) = &self.triage {
            all.push(WorkflowInfo {
                name: frontdesk_workflows::triage::NAME.to_owned(),
                description: TRIAGE_DESCRIPTION.to_owned(),
                kind: WorkflowKind::Task,
                graph: desk.runner().graph().describe(),
            });
        }
        all
    }

    pub fn workflow(&self, name: &str) -> Result<WorkflowInfo, WorkflowError> {
        self.workflows()
            .into_iter()
            .find(|w| w.name == name)
            .ok_or_else(|| WorkflowError::NotFound { what: "workflow", id: name.to_owned() })
    }

    pub fn add_conversational(&mut self, workflow: Arc<dyn ConversationWorkflow>) {
        self.conversational.insert(workflow.name().to_owned(), workflow);
    }

    pub fn runs(&self) -> &Arc<RunRegistry> {
        &self.runs
    }

    pub fn conversational(&self) -> impl Iterator<Item = &Arc<dyn ConversationWorkflow>> {
        self.conversational.values()
    }

    pub fn conversation_workflow(&self, name: &str) -> Result<&Arc<dyn ConversationWorkflow>, WorkflowError> {
        self.conversational.get(name).ok_or_else(|| WorkflowError::NotFound { what: "workflow", id: name.to_owned() })
    }

    /// The workflow that owns a conversation.
    pub async fn owner_of(&self, conversation_id: &str) -> Result<&Arc<dyn ConversationWorkflow>, WorkflowError> {
        validate_id(conversation_id)?;
        let not_found = || WorkflowError::NotFound { what: "conversation", id: conversation_id.to_owned() };
        let thread = self.checkpointer.thread(conversation_id).await?.ok_or_else(not_found)?;
        self.conversational.get(&thread.workflow).ok_or_else(not_found)
    }

    /// Conversations of every conversational workflow (or one), ordered by id.
    pub async fn list_conversations(
        &self,
        workflow: Option<&str>,
        after: Option<String>,
        limit: usize,
    ) -> Result<(Vec<ConversationView>, Option<String>), WorkflowError> {
        if let Some(name) = workflow {
            return self.conversation_workflow(name)?.list(after, limit).await;
        }
        let mut views = Vec::with_capacity(limit);
        let mut after = after;
        loop {
            let page = self
                .checkpointer
                .list_threads(&ThreadQuery { after: after.clone(), limit, ..Default::default() })
                .await?;
            for thread in &page.threads {
                after = Some(thread.thread_id.clone());
                let Some(owner) = self.conversational.get(&thread.workflow) else { continue };
                match owner.summarize(thread).await {
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

    /// Finishes the runs a crash interrupted, for every workflow.
    pub async fn recover(&self) -> Result<usize, WorkflowError> {
        let mut total = 0;
        for workflow in self.conversational.values() {
            total += workflow.recover().await?;
        }
        if let Some(desk) = &self.triage {
            // Sweep first: a crash can bring back the accepting checkpoint of a run whose ticket
            // is already archived (its erase was not yet durable), and resuming that run would
            // triage the ticket again. Recovered runs archive their tickets themselves.
            desk.sweep().await?;
            total += desk.runner().recover().await?;
        }
        Ok(total)
    }
}
