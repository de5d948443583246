//! The structured LLM call log: one row per model call a workflow made, filed under the thread
//! that made it (a conversation, ticket thread, investigation or research id) and read back per
//! thread. Plain data access: the server's SQL call log decides what a row holds (prompts in
//! full or redacted) and writes rows off the run's path.

use std::time::SystemTime;

use crate::{from_ms, on_pool, on_writer, to_ms, Database, StoreError};

/// One model call, as logged.
#[derive(Debug, Clone, PartialEq)]
pub struct LlmCallRow {
    /// Minted by the writer (a UUIDv7, so ids sort by time); recording an id twice keeps the first.
    pub id: String,
    pub thread_id: String,
    pub run_id: String,
    /// The node (agent) that made the call.
    pub node: String,
    /// What the call was for, such as `supervisor.route`.
    pub purpose: String,
    pub model: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
    /// Wall time including retries.
    pub latency_ms: u64,
    pub attempts: u32,
    /// Why the call failed; `None` for a call that succeeded.
    pub error: Option<String>,
    /// The prompt messages as JSON, in full or redacted to role and character count.
    pub prompt_json: String,
    /// The reply as JSON, redacted like the prompt; `null` for a failed call.
    pub response_json: String,
    /// When the call finished (kept at millisecond precision).
    pub at: SystemTime,
}

/// Sums over every call a thread made.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LlmCallTotals {
    pub calls: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cost_usd: f64,
}

macro_rules! columns {
    () => {
        "id, thread_id, run_id, node, purpose, model, prompt_tokens, completion_tokens, cost_usd, latency_ms, \
         attempts, error, prompt_json, response_json, at_ms"
    };
}

/// The columns a row binds, in [`columns!`] order.
const COLUMNS: usize = 15;
/// The most rows one INSERT holds: 960 parameters, far below either database's limit.
pub const MAX_LLM_CALLS_PER_INSERT: usize = 64;

/// `INSERT ... VALUES ($1, ..., $15), ($16, ...), ...` for `rows` rows.
fn insert(rows: usize) -> String {
    let mut sql = String::from(concat!("INSERT INTO llm_calls (", columns!(), ") VALUES "));
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..COLUMNS {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", row * COLUMNS + column + 1));
        }
        sql.push(')');
    }
    sql.push_str(" ON CONFLICT (id) DO NOTHING");
    sql
}
/// Newest first (ties by id, descending).
const LIST: &str =
    concat!("SELECT ", columns!(), " FROM llm_calls WHERE thread_id = $1 ORDER BY at_ms DESC, id DESC LIMIT $2");
/// [`LIST`] older than a page's last call: `$2`/`$3` its (at_ms, id).
const LIST_BEFORE: &str = concat!(
    "SELECT ",
    columns!(),
    " FROM llm_calls WHERE thread_id = $1 AND (at_ms < $2 OR (at_ms = $2 AND id < $3)) \
     ORDER BY at_ms DESC, id DESC LIMIT $4"
);
const DELETE: &str = "DELETE FROM llm_calls WHERE thread_id = $1";
/// PostgreSQL sums BIGINT as NUMERIC: cast back, in both dialects alike.
const TOTALS: &str = "SELECT count(*), CAST(COALESCE(SUM(prompt_tokens), 0) AS BIGINT), \
     CAST(COALESCE(SUM(completion_tokens), 0) AS BIGINT), CAST(COALESCE(SUM(cost_usd), 0) AS DOUBLE PRECISION) \
     FROM llm_calls WHERE thread_id = $1";

#[derive(sqlx::FromRow)]
struct Row {
    id: String,
    thread_id: String,
    run_id: String,
    node: String,
    purpose: String,
    model: String,
    prompt_tokens: i64,
    completion_tokens: i64,
    cost_usd: f64,
    latency_ms: i64,
    attempts: i64,
    error: Option<String>,
    prompt_json: String,
    response_json: String,
    at_ms: i64,
}

fn corrupt(what: &'static str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
    StoreError::Corrupt { what, source: source.into() }
}

impl Row {
    fn into_call(self) -> Result<LlmCallRow, StoreError> {
        Ok(LlmCallRow {
            prompt_tokens: u64::try_from(self.prompt_tokens).map_err(|e| corrupt("llm_calls.prompt_tokens", e))?,
            completion_tokens: u64::try_from(self.completion_tokens)
                .map_err(|e| corrupt("llm_calls.completion_tokens", e))?,
            latency_ms: u64::try_from(self.latency_ms).map_err(|e| corrupt("llm_calls.latency_ms", e))?,
            attempts: u32::try_from(self.attempts).map_err(|e| corrupt("llm_calls.attempts", e))?,
            id: self.id,
            thread_id: self.thread_id,
            run_id: self.run_id,
            node: self.node,
            purpose: self.purpose,
            model: self.model,
            cost_usd: self.cost_usd,
            error: self.error,
            prompt_json: self.prompt_json,
            response_json: self.response_json,
            at: from_ms(self.at_ms),
        })
    }
}

/// Counts above `i64::MAX` cannot be stored; they are clamped (no real call comes close).
fn stored(n: u64) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

impl Database {
    /// Records one model call. Recording the same id again is a no-op.
    pub async fn record_llm_call(&self, call: &LlmCallRow) -> Result<(), StoreError> {
        self.record_llm_calls(std::slice::from_ref(call)).await
    }

    /// Records model calls, [`MAX_LLM_CALLS_PER_INSERT`] to a statement: each statement is one
    /// transaction of its own, so a log writing many calls takes the write connection (on
    /// SQLite, the one every checkpoint commit of this process waits for) once per statement
    /// rather than once per call. Recording an id again is a no-op, as for one call. When a
    /// statement fails, the rows of the statements before it are recorded and the rest are not.
    pub async fn record_llm_calls(&self, calls: &[LlmCallRow]) -> Result<(), StoreError> {
        for chunk in calls.chunks(MAX_LLM_CALLS_PER_INSERT) {
            let sql = insert(chunk.len());
            on_writer!(self, exec => {
                // Built from the row count alone: no value of a call is in the text.
                let mut query = sqlx::query(sqlx::AssertSqlSafe(sql.as_str()));
                for call in chunk {
                    query = query
                        .bind(&call.id)
                        .bind(&call.thread_id)
                        .bind(&call.run_id)
                        .bind(&call.node)
                        .bind(&call.purpose)
                        .bind(&call.model)
                        .bind(stored(call.prompt_tokens))
                        .bind(stored(call.completion_tokens))
                        .bind(call.cost_usd)
                        .bind(stored(call.latency_ms))
                        .bind(i64::from(call.attempts))
                        .bind(call.error.as_deref())
                        .bind(&call.prompt_json)
                        .bind(&call.response_json)
                        .bind(to_ms(call.at));
                }
                query.execute(exec).await.map(drop)
            })
            .map_err(StoreError::query("record llm calls"))?;
        }
        Ok(())
    }

    /// A thread's most recent calls, newest first (ties by id, descending), at most `limit`
    /// (at least 1).
    pub async fn llm_calls(&self, thread_id: &str, limit: usize) -> Result<Vec<LlmCallRow>, StoreError> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let rows: Vec<Row> = on_pool!(self, conn => {
            sqlx::query_as(LIST).bind(thread_id).bind(limit).fetch_all(conn).await
        })
        .map_err(StoreError::query("list llm calls"))?;
        rows.into_iter().map(Row::into_call).collect()
    }

    /// [`Self::llm_calls`] older than `before`, a call of an earlier page: its (time, id).
    pub async fn llm_calls_before(
        &self,
        thread_id: &str,
        before: (SystemTime, &str),
        limit: usize,
    ) -> Result<Vec<LlmCallRow>, StoreError> {
        let limit = i64::try_from(limit.max(1)).unwrap_or(i64::MAX);
        let (at, id) = before;
        let rows: Vec<Row> = on_pool!(self, conn => {
            sqlx::query_as(LIST_BEFORE).bind(thread_id).bind(to_ms(at)).bind(id).bind(limit).fetch_all(conn).await
        })
        .map_err(StoreError::query("list llm calls"))?;
        rows.into_iter().map(Row::into_call).collect()
    }

    /// Deletes every call a thread made (erasure); returns how many there were.
    pub async fn delete_llm_calls(&self, thread_id: &str) -> Result<u64, StoreError> {
        on_writer!(self, exec => {
            sqlx::query(DELETE).bind(thread_id).execute(exec).await.map(|done| done.rows_affected())
        })
        .map_err(StoreError::query("delete llm calls"))
    }

    /// Sums over every call a thread made (zeros for a thread without calls).
    pub async fn llm_call_totals(&self, thread_id: &str) -> Result<LlmCallTotals, StoreError> {
        let (calls, prompt, completion, cost): (i64, i64, i64, f64) = on_pool!(self, conn => {
            sqlx::query_as(TOTALS).bind(thread_id).fetch_one(conn).await
        })
        .map_err(StoreError::query("sum llm calls"))?;
        Ok(LlmCallTotals {
            calls: u64::try_from(calls).map_err(|e| corrupt("llm_calls count", e))?,
            prompt_tokens: u64::try_from(prompt).map_err(|e| corrupt("llm_calls.prompt_tokens sum", e))?,
            completion_tokens: u64::try_from(completion).map_err(|e| corrupt("llm_calls.completion_tokens sum", e))?,
            cost_usd: cost,
        })
    }
}
