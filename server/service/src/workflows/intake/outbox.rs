//! The default intake submitter: confirmed requests go to the local `intake_submissions`
//! table, from where an integration (or a person) picks them up.

use async_trait::async_trait;
use frontdesk_store::{Database, NewSubmission};
use frontdesk_workflows::intake::{Receipt, Submission, SubmitError, Submitter};

pub struct OutboxSubmitter {
    db: Database,
    base_url: String,
}

impl OutboxSubmitter {
    pub fn new(db: Database, base_url: impl Into<String>) -> Self {
        Self { db, base_url: base_url.into().trim_end_matches('/').to_owned() }
    }
}

#[async_trait]
impl Submitter for OutboxSubmitter {
    async fn submit(&self, submission: &Submission) -> Result<Receipt, SubmitError> {
        let Submission { id, thread_id, team_id, team_name, fields, unknown, labels: _ } = submission;
        let url = format!("{}/{team_id}/{id}", self.base_url);
        let record = NewSubmission {
            id: id.clone(),
            thread_id: thread_id.clone(),
            team_id: team_id.clone(),
            team_name: team_name.clone(),
            fields: serde_json::json!({ "fields": fields, "unknown": unknown }),
            url: Some(url.clone()),
            created_at: std::time::SystemTime::now(),
        };
        // The same submission id again (a resumed run) is a no-op in the store.
        self.db.insert_submission(&record).await.map_err(|e| SubmitError::Unavailable(Box::new(e)))?;
        Ok(Receipt { id: id.clone(), url })
    }
}
