//! Intake submissions: the forms the workflow layer hands to teams. Plain data access; the
//! workflow crate defines what submitting means.

use std::time::SystemTime;

use crate::{from_ms, on_pool, on_writer, to_ms, Database, StoreError};

/// A submission to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewSubmission {
    /// Unique id; recording the same id again is a no-op, so retries are safe.
    pub id: String,
    pub thread_id: String,
    pub team_id: String,
    pub team_name: String,
    /// The submitted fields (a JSON value, normally an object).
    pub fields: serde_json::Value,
    /// Where the submission can be seen, when there is such a place.
    pub url: Option<String>,
    pub created_at: SystemTime,
}

/// A recorded submission (times at millisecond precision).
pub type Submission = NewSubmission;

#[derive(sqlx::FromRow)]
struct SubmissionRow {
    id: String,
    thread_id: String,
    team_id: String,
    team_name: String,
    fields: String,
    url: Option<String>,
    created_at_ms: i64,
}

const INSERT: &str = "INSERT INTO intake_submissions (id, thread_id, team_id, team_name, fields, url, created_at_ms) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (id) DO NOTHING";
const LIST: &str = "SELECT id, thread_id, team_id, team_name, fields, url, created_at_ms FROM intake_submissions \
     WHERE thread_id = $1 ORDER BY created_at_ms, id";

impl Database {
    /// Records `submission` unless one with its id exists already.
    pub async fn insert_submission(&self, submission: &NewSubmission) -> Result<(), StoreError> {
        let fields = serde_json::to_string(&submission.fields)
            .map_err(|source| StoreError::Encode { what: "intake submission fields", source })?;
        let created_at_ms = to_ms(submission.created_at);
        on_writer!(self, exec => {
            sqlx::query(INSERT)
                .bind(&submission.id)
                .bind(&submission.thread_id)
                .bind(&submission.team_id)
                .bind(&submission.team_name)
                .bind(&fields)
                .bind(submission.url.as_deref())
                .bind(created_at_ms)
                .execute(exec)
                .await
                .map(drop)
        })
        .map_err(StoreError::query("insert intake submission"))
    }

    /// The submissions of a thread, oldest first.
    pub async fn list_submissions(&self, thread_id: &str) -> Result<Vec<Submission>, StoreError> {
        let rows: Vec<SubmissionRow> = on_pool!(self, conn => {
            sqlx::query_as(LIST).bind(thread_id).fetch_all(conn).await
        })
        .map_err(StoreError::query("list intake submissions"))?;
        rows.into_iter()
            .map(|r| {
                Ok(Submission {
                    fields: serde_json::from_str(&r.fields)
                        .map_err(|e| StoreError::Corrupt { what: "intake_submissions.fields", source: Box::new(e) })?,
                    id: r.id,
                    thread_id: r.thread_id,
                    team_id: r.team_id,
                    team_name: r.team_name,
                    url: r.url,
                    created_at: from_ms(r.created_at_ms),
                })
            })
            .collect()
    }
}
