//! Completed triage tickets and their messages: where a ticket goes once its triage completes
//! (`auto_respond` → `resolved`, `escalate_human` → `open`) and its active checkpoint is
//! deleted; and triage requests by idempotency key. Plain data access; the workflow layer
//! decides what to save and when.

use std::time::SystemTime;

use sqlx::Connection;

use crate::{
    db::rollback_quietly, from_ms, leased, on_pool, on_reader, on_writer, to_ms, Database, DbPool, StoreError,
};

/// [`CompletedTicket::status`] of a ticket the triage answered.
pub const TICKET_RESOLVED: &str = "resolved";
/// [`CompletedTicket::status`] of a ticket handed to a human.
pub const TICKET_OPEN: &str = "open";

/// A ticket whose triage completed (times are kept at millisecond precision).
#[derive(Debug, Clone, PartialEq)]
pub struct CompletedTicket {
    /// The ticket's key: its id, as `{tenant}/{ticket_id}` outside the default tenant (the
    /// workflow layer builds the keys), so tenants' ticket ids never clash.
    pub ticket_id: String,
    /// The customer's key, built the same way.
    pub customer_id: String,
    /// The thread that triaged it, normally `{customer_id}:{ticket_id}` (the customer's key and
    /// the ticket's id).
    pub thread_id: String,
    /// [`TICKET_RESOLVED`] or [`TICKET_OPEN`].
    pub status: String,
    pub recommended_action: String,
    pub urgency: String,
    pub ticket_type: String,
    pub subject: String,
    pub summary: String,
    pub suggested_response: String,
    /// Knowledge-base article ids.
    pub relevant_articles: Vec<String>,
    pub language: String,
    /// The full typed triage result, as JSON.
    pub result: serde_json::Value,
    /// The run that produced `result`; empty for tickets archived before it was kept.
    pub run_id: String,
    /// The knowledge-base hits the result was based on (ids, titles, scores), as a JSON array.
    pub kb_results: serde_json::Value,
    pub created_at: SystemTime,
    pub completed_at: SystemTime,
}

/// A triage request recorded under its idempotency key.
#[derive(Debug, Clone, PartialEq)]
pub struct TriageRequestRecord {
    /// The request's output (JSON).
    pub output: String,
    /// The request's fingerprint; `None` when it was recorded without one.
    pub fingerprint: Option<String>,
}

/// What claiming a triage request's idempotency key found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TriageClaim {
    /// The caller holds the claim now.
    Claimed,
    /// Another request holds it, with this fingerprint.
    Held { fingerprint: String },
}

/// One message of a ticket's conversation.
#[derive(Debug, Clone, PartialEq)]
pub struct TicketMessage {
    /// Position in the conversation; unique per ticket.
    pub seq: u32,
    pub role: String,
    pub text: String,
    /// The English translation of a customer message; empty when it was English (or archived
    /// before translations were kept).
    pub english_text: String,
    pub language: String,
    pub created_at: SystemTime,
}

macro_rules! ticket_columns {
    () => {
        "ticket_id, customer_id, thread_id, status, recommended_action, urgency, ticket_type, subject, summary, \
         suggested_response, relevant_articles, language, result, created_at_ms, completed_at_ms, run_id, kb_results"
    };
}

/// A re-saved ticket keeps its `created_at`; everything else is replaced.
macro_rules! upsert_ticket {
    () => {
        concat!(
            "INSERT INTO tickets (",
            ticket_columns!(),
            ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
             ON CONFLICT (ticket_id) DO UPDATE SET customer_id = excluded.customer_id, \
             thread_id = excluded.thread_id, status = excluded.status, \
             recommended_action = excluded.recommended_action, urgency = excluded.urgency, \
             ticket_type = excluded.ticket_type, subject = excluded.subject, summary = excluded.summary, \
             suggested_response = excluded.suggested_response, relevant_articles = excluded.relevant_articles, \
             language = excluded.language, result = excluded.result, completed_at_ms = excluded.completed_at_ms, \
             run_id = excluded.run_id, kb_results = excluded.kb_results"
        )
    };
}
const UPSERT_TICKET: &str = upsert_ticket!();
const UPSERT_MESSAGE: &str = "INSERT INTO ticket_messages \
     (ticket_id, seq, role, text, language, created_at_ms, english_text) \
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT (ticket_id, seq) DO UPDATE SET role = excluded.role, \
     text = excluded.text, language = excluded.language, created_at_ms = excluded.created_at_ms, \
     english_text = excluded.english_text";
/// SQLite: the ticket and all its messages in one batch (one trip to the write connection),
/// `$18` the messages as a JSON array. `WHERE true` keeps `ON CONFLICT` from being parsed as
/// part of the `SELECT`'s join.
const SQLITE_SAVE: &str = concat!(
    "BEGIN IMMEDIATE; ",
    upsert_ticket!(),
    "; INSERT INTO ticket_messages (ticket_id, seq, role, text, language, created_at_ms, english_text) \
     SELECT $1, json_extract(value, '$.seq'), json_extract(value, '$.role'), json_extract(value, '$.text'), \
       json_extract(value, '$.language'), json_extract(value, '$.created_at_ms'), \
       json_extract(value, '$.english_text') FROM json_each($18) WHERE true \
     ON CONFLICT (ticket_id, seq) DO UPDATE SET role = excluded.role, text = excluded.text, \
       language = excluded.language, created_at_ms = excluded.created_at_ms, \
       english_text = excluded.english_text; \
     COMMIT"
);
const GET_TICKET: &str = concat!("SELECT ", ticket_columns!(), " FROM tickets WHERE ticket_id = $1");
const GET_MESSAGES: &str = "SELECT seq, role, text, english_text, language, created_at_ms FROM ticket_messages \
     WHERE ticket_id = $1 ORDER BY seq";
const RECORD_REQUEST: &str = "INSERT INTO triage_requests (customer_id, key, output, created_at_ms, fingerprint) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (customer_id, key) DO NOTHING";
const FIND_REQUEST: &str = "SELECT output, fingerprint FROM triage_requests WHERE customer_id = $1 AND key = $2";
// The claim is taken when the key has none, or one whose holder stopped renewing it; otherwise
// no row comes back. One statement, so two requests racing for a key cannot both take it.
const CLAIM_REQUEST: &str = "INSERT INTO triage_claims (customer_id, key, fingerprint, holder, renewed_at_ms) \
     VALUES ($1, $2, $3, $4, $5) ON CONFLICT (customer_id, key) DO UPDATE SET fingerprint = excluded.fingerprint, \
     holder = excluded.holder, renewed_at_ms = excluded.renewed_at_ms WHERE triage_claims.renewed_at_ms < $6 \
     RETURNING holder";
const CLAIM_HELD_BY: &str = "SELECT fingerprint FROM triage_claims WHERE customer_id = $1 AND key = $2";
const RENEW_CLAIM: &str =
    "UPDATE triage_claims SET renewed_at_ms = $4 WHERE customer_id = $1 AND key = $2 AND holder = $3";
const RELEASE_CLAIM: &str = "DELETE FROM triage_claims WHERE customer_id = $1 AND key = $2 AND holder = $3";
const COUNT_TICKET: &str = "SELECT count(*) FROM tickets WHERE ticket_id = $1";
/// Newest first; `$3`/`$4` the (completed_at_ms, ticket_id) of the last ticket of the previous page.
const LIST: &str = concat!(
    "SELECT ",
    ticket_columns!(),
    " FROM tickets WHERE customer_id = $1 AND ($2 IS NULL OR status = $2) \
     AND ($3 IS NULL OR completed_at_ms < $3 OR (completed_at_ms = $3 AND ticket_id < $4)) \
     ORDER BY completed_at_ms DESC, ticket_id DESC LIMIT $5"
);

#[derive(sqlx::FromRow)]
struct TicketRow {
    ticket_id: String,
    customer_id: String,
    thread_id: String,
    status: String,
    recommended_action: String,
    urgency: String,
    ticket_type: String,
    subject: String,
    summary: String,
    suggested_response: String,
    relevant_articles: String,
    language: String,
    result: String,
    created_at_ms: i64,
    completed_at_ms: i64,
    run_id: String,
    kb_results: String,
}

#[derive(sqlx::FromRow)]
struct MessageRow {
    seq: i64,
    role: String,
    text: String,
    english_text: String,
    language: String,
    created_at_ms: i64,
}

fn corrupt(what: &'static str, source: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> StoreError {
    StoreError::Corrupt { what, source: source.into() }
}

impl TicketRow {
    fn into_ticket(self) -> Result<CompletedTicket, StoreError> {
        Ok(CompletedTicket {
            relevant_articles: serde_json::from_str(&self.relevant_articles)
                .map_err(|e| corrupt("tickets.relevant_articles", e))?,
            result: serde_json::from_str(&self.result).map_err(|e| corrupt("tickets.result", e))?,
            kb_results: serde_json::from_str(&self.kb_results).map_err(|e| corrupt("tickets.kb_results", e))?,
            run_id: self.run_id,
            ticket_id: self.ticket_id,
            customer_id: self.customer_id,
            thread_id: self.thread_id,
            status: self.status,
            recommended_action: self.recommended_action,
            urgency: self.urgency,
            ticket_type: self.ticket_type,
            subject: self.subject,
            summary: self.summary,
            suggested_response: self.suggested_response,
            language: self.language,
            created_at: from_ms(self.created_at_ms),
            completed_at: from_ms(self.completed_at_ms),
        })
    }
}

impl MessageRow {
    fn into_message(self) -> Result<TicketMessage, StoreError> {
        Ok(TicketMessage {
            seq: u32::try_from(self.seq).map_err(|e| corrupt("ticket_messages.seq", e))?,
            role: self.role,
            text: self.text,
            english_text: self.english_text,
            language: self.language,
            created_at: from_ms(self.created_at_ms),
        })
    }
}

/// Where a page of [`Database::list_tickets`] ends: the last ticket's completion time and id.
/// Typed, so callers never hand the store a string to parse: encoding it for clients (opaque,
/// validated page tokens) is the workflow layer's business.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TicketCursor {
    pub completed_at_ms: i64,
    pub ticket_id: String,
}

fn cursor_of(ticket: &CompletedTicket) -> TicketCursor {
    TicketCursor { completed_at_ms: to_ms(ticket.completed_at), ticket_id: ticket.ticket_id.clone() }
}

impl Database {
    /// Saves a completed ticket and its messages in one transaction. Saving the same ticket
    /// again is safe: the ticket row is replaced (keeping its first `created_at`) and messages
    /// are upserted by `seq`, so they are never duplicated; messages stored earlier under other
    /// `seq`s are kept.
    pub async fn save_completed_ticket(
        &self,
        ticket: &CompletedTicket,
        messages: &[TicketMessage],
    ) -> Result<(), StoreError> {
        let articles = serde_json::to_string(&ticket.relevant_articles)
            .map_err(|source| StoreError::Encode { what: "ticket relevant_articles", source })?;
        let result = serde_json::to_string(&ticket.result)
            .map_err(|source| StoreError::Encode { what: "ticket result", source })?;
        let kb_results = serde_json::to_string(&ticket.kb_results)
            .map_err(|source| StoreError::Encode { what: "ticket kb_results", source })?;
        // `$1`..`$17` of the ticket upsert, for either dialect.
        macro_rules! ticket_query {
            ($sql:expr) => {
                sqlx::query($sql)
                    .bind(&ticket.ticket_id)
                    .bind(&ticket.customer_id)
                    .bind(&ticket.thread_id)
                    .bind(&ticket.status)
                    .bind(&ticket.recommended_action)
                    .bind(&ticket.urgency)
                    .bind(&ticket.ticket_type)
                    .bind(&ticket.subject)
                    .bind(&ticket.summary)
                    .bind(&ticket.suggested_response)
                    .bind(&articles)
                    .bind(&ticket.language)
                    .bind(&result)
                    .bind(to_ms(ticket.created_at))
                    .bind(to_ms(ticket.completed_at))
                    .bind(&ticket.run_id)
                    .bind(&kb_results)
            };
        }
        let failed = StoreError::query("save completed ticket");
        match self.pool() {
            DbPool::Sqlite(_) => {
                #[derive(serde::Serialize)]
                struct Row<'a> {
                    seq: u32,
                    role: &'a str,
                    text: &'a str,
                    english_text: &'a str,
                    language: &'a str,
                    created_at_ms: i64,
                }
                let rows: Vec<Row> = messages
                    .iter()
                    .map(|m| Row {
                        seq: m.seq,
                        role: &m.role,
                        text: &m.text,
                        english_text: &m.english_text,
                        language: &m.language,
                        created_at_ms: to_ms(m.created_at),
                    })
                    .collect();
                let messages = serde_json::to_string(&rows)
                    .map_err(|source| StoreError::Encode { what: "ticket messages", source })?;
                let mut conn = self.sqlite_writer().await.map_err(failed)?;
                conn.transaction_started();
                let saved = ticket_query!(SQLITE_SAVE).bind(messages).execute(&mut *conn).await;
                if saved.is_err() {
                    rollback_quietly(&mut conn).await;
                }
                conn.transaction_ended();
                saved.map(drop).map_err(StoreError::query("save completed ticket"))
            }
            DbPool::Postgres(_) => leased!(self.postgres_lease(), conn => async {
                let mut tx = conn.begin().await?;
                ticket_query!(UPSERT_TICKET).execute(&mut *tx).await?;
                for m in messages {
                    sqlx::query(UPSERT_MESSAGE)
                        .bind(&ticket.ticket_id)
                        .bind(i64::from(m.seq))
                        .bind(&m.role)
                        .bind(&m.text)
                        .bind(&m.language)
                        .bind(to_ms(m.created_at))
                        .bind(&m.english_text)
                        .execute(&mut *tx)
                        .await?;
                }
                tx.commit().await
            }
            .await)
            .map_err(failed),
        }
    }

    /// A saved ticket with its messages in `seq` order.
    pub async fn get_ticket(
        &self,
        ticket_id: &str,
    ) -> Result<Option<(CompletedTicket, Vec<TicketMessage>)>, StoreError> {
        let (row, messages): (Option<TicketRow>, Vec<MessageRow>) = on_pool!(self, conn => {
            async {
                // One read transaction, so the messages match the ticket row.
                let mut tx = conn.begin().await?;
                let row = sqlx::query_as(GET_TICKET).bind(ticket_id).fetch_optional(&mut *tx).await?;
                let messages = match row {
                    Some(_) => sqlx::query_as(GET_MESSAGES).bind(ticket_id).fetch_all(&mut *tx).await?,
                    None => Vec::new(),
                };
                tx.commit().await?;
                Ok::<_, sqlx::Error>((row, messages))
            }
            .await
        })
        .map_err(StoreError::query("get ticket"))?;
        let Some(row) = row else { return Ok(None) };
        let messages = messages.into_iter().map(MessageRow::into_message).collect::<Result<_, _>>()?;
        Ok(Some((row.into_ticket()?, messages)))
    }

    /// A customer's tickets, most recently completed first (ties by ticket id, descending),
    /// optionally only those with `status`. Pass the returned cursor as `after` for the next
    /// page; it is `None` on the last page. `limit` is at least 1.
    pub async fn list_tickets(
        &self,
        customer_id: &str,
        status: Option<&str>,
        after: Option<&TicketCursor>,
        limit: usize,
    ) -> Result<(Vec<CompletedTicket>, Option<TicketCursor>), StoreError> {
        let limit = limit.max(1);
        let cursor = after.map(|c| (c.completed_at_ms, c.ticket_id.as_str()));
        let fetch = i64::try_from(limit).unwrap_or(i64::MAX - 1) + 1;
        let rows: Vec<TicketRow> = on_pool!(self, conn => {
            sqlx::query_as(LIST)
                .bind(customer_id)
                .bind(status)
                .bind(cursor.map(|(ms, _)| ms))
                .bind(cursor.map(|(_, id)| id))
                .bind(fetch)
                .fetch_all(conn)
                .await
        })
        .map_err(StoreError::query("list tickets"))?;
        let more = rows.len() > limit;
        let tickets = rows.into_iter().take(limit).map(TicketRow::into_ticket).collect::<Result<Vec<_>, _>>()?;
        let next = if more { tickets.last().map(cursor_of) } else { None };
        Ok((tickets, next))
    }

    /// Whether a ticket with this id has been saved.
    pub async fn ticket_exists(&self, ticket_id: &str) -> Result<bool, StoreError> {
        let count: i64 = on_reader!(self, conn => {
            sqlx::query_scalar(COUNT_TICKET).bind(ticket_id).fetch_one(conn).await
        })
        .map_err(StoreError::query("check ticket exists"))?;
        Ok(count > 0)
    }

    /// Records the output (JSON) of a triage request under the caller's idempotency `key`,
    /// scoped to the customer, with the request's `fingerprint`. The first record of a key
    /// wins; recording it again is a no-op.
    pub async fn record_triage_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: Option<&str>,
        output_json: &str,
    ) -> Result<(), StoreError> {
        let now = to_ms(SystemTime::now());
        on_writer!(self, exec => {
            sqlx::query(RECORD_REQUEST)
                .bind(customer_id)
                .bind(key)
                .bind(output_json)
                .bind(now)
                .bind(fingerprint)
                .execute(exec)
                .await
                .map(drop)
        })
        .map_err(StoreError::query("record triage request"))
    }

    /// Claims a customer's triage request `key` for `holder` while the request runs: taken when
    /// the key has no claim or only one last renewed before `stale_before_ms` (its holder died).
    /// Otherwise says which request holds it.
    pub async fn claim_triage_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: &str,
        holder: &str,
        now_ms: i64,
        stale_before_ms: i64,
    ) -> Result<TriageClaim, StoreError> {
        let taken: Option<String> = on_writer!(self, exec => {
            sqlx::query_scalar(CLAIM_REQUEST)
                .bind(customer_id)
                .bind(key)
                .bind(fingerprint)
                .bind(holder)
                .bind(now_ms)
                .bind(stale_before_ms)
                .fetch_optional(exec)
                .await
        })
        .map_err(StoreError::query("claim triage request"))?;
        if taken.is_some() {
            return Ok(TriageClaim::Claimed);
        }
        let held: Option<String> = on_writer!(self, exec => {
            sqlx::query_scalar(CLAIM_HELD_BY).bind(customer_id).bind(key).fetch_optional(exec).await
        })
        .map_err(StoreError::query("read triage claim"))?;
        match held {
            Some(fingerprint) => Ok(TriageClaim::Held { fingerprint }),
            // Released between the two statements: the holder finished, so try once more.
            None => {
                Box::pin(self.claim_triage_request(customer_id, key, fingerprint, holder, now_ms, stale_before_ms))
                    .await
            }
        }
    }

    /// Renews `holder`'s claim on a customer's triage request `key`; false when it no longer
    /// holds it (it was taken over after going unrenewed).
    pub async fn renew_triage_claim(
        &self,
        customer_id: &str,
        key: &str,
        holder: &str,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let renewed = on_writer!(self, exec => {
            sqlx::query(RENEW_CLAIM)
                .bind(customer_id)
                .bind(key)
                .bind(holder)
                .bind(now_ms)
                .execute(exec)
                .await
                .map(|done| done.rows_affected() > 0)
        })
        .map_err(StoreError::query("renew triage claim"))?;
        Ok(renewed)
    }

    /// Releases `holder`'s claim on a customer's triage request `key`, if it still holds it.
    pub async fn release_triage_claim(&self, customer_id: &str, key: &str, holder: &str) -> Result<(), StoreError> {
        on_writer!(self, exec => {
            sqlx::query(RELEASE_CLAIM).bind(customer_id).bind(key).bind(holder).execute(exec).await.map(drop)
        })
        .map_err(StoreError::query("release triage claim"))
    }

    /// The record of a customer's triage request `key`, if any.
    pub async fn find_triage_request(
        &self,
        customer_id: &str,
        key: &str,
    ) -> Result<Option<TriageRequestRecord>, StoreError> {
        let row: Option<(String, Option<String>)> = on_reader!(self, conn => {
            sqlx::query_as(FIND_REQUEST).bind(customer_id).bind(key).fetch_optional(conn).await
        })
        .map_err(StoreError::query("find triage request"))?;
        Ok(row.map(|(output, fingerprint)| TriageRequestRecord { output, fingerprint }))
    }
}
