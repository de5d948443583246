//! The workflows this process hosts, looked up by name or by the conversation they own.

use std::{collections::BTreeMap, sync::Arc};

use frontdesk_runtime::{Checkpointer, RunRegistry, ThreadQuery};
use frontdesk_workflows::{conversation::validate_id, ConversationView, ConversationWorkflow, WorkflowError};

pub struct Registry {
    conversational: BTreeMap<String, Arc<dyn ConversationWorkflow>>,
    checkpointer: Arc<dyn Checkpointer>,
    runs: Arc<RunRegistry>,
}

impl Registry {
    pub fn new(checkpointer: Arc<dyn Checkpointer>, runs: Arc<RunRegistry>) -> Self {
        Self { conversational: BTreeMap::new(), checkpointer, runs }
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
        Ok(total)
    }
}
