//! The triage workflow's ticket archive over the SQL store.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use frontdesk_store::{
    CompletedTicket, Database, TicketCursor, TicketMessage as StoredMessage, TriageClaim, TriageRequestRecord,
};
use frontdesk_workflows::triage::{
    ArchiveCursor, ArchiveError, ArchivedStatus, ArchivedTicket, Author, KbResult, KeyClaim, RecordedRequest,
    TicketArchive,
    TicketMessage, TriageResult,
};

pub struct SqlTicketArchive {
    db: Database,
}

impl SqlTicketArchive {
    pub fn new(db: Database) -> Self {
        Self { db }
    }
}

fn store_error(error: frontdesk_store::StoreError) -> ArchiveError {
    ArchiveError(Box::new(error))
}

/// Escalated tickets are archived as "open": a person still has to act on them
/// (docs/workflows/triage.md, "After the run: persistence").
fn status_column(status: ArchivedStatus) -> &'static str {
    match status {
        ArchivedStatus::Resolved => "resolved",
        ArchivedStatus::Escalated => "open",
    }
}

fn status_of(column: &str) -> Option<ArchivedStatus> {
    match column {
        "resolved" => Some(ArchivedStatus::Resolved),
        "open" => Some(ArchivedStatus::Escalated),
        _ => None,
    }
}

fn ms(at: u64) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(at)
}

fn to_ms(at: SystemTime) -> u64 {
    at.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn decode(ticket: CompletedTicket, messages: Vec<StoredMessage>) -> Result<ArchivedTicket, ArchiveError> {
    let CompletedTicket {
        ticket_id,
        customer_id,
        thread_id,
        status,
        recommended_action: _,
        urgency: _,
        ticket_type: _,
        subject,
        summary: _,
        suggested_response: _,
        relevant_articles: _,
        language,
        result,
        run_id,
        kb_results,
        created_at,
        completed_at,
    } = ticket;
    let status = status_of(&status).ok_or_else(|| ArchiveError(format!("unknown ticket status {status:?}").into()))?;
    let result: TriageResult = serde_json::from_value(result).map_err(|e| ArchiveError(Box::new(e)))?;
    let kb_results: Vec<KbResult> = serde_json::from_value(kb_results).map_err(|e| ArchiveError(Box::new(e)))?;
    let mut english = Vec::new();
    let messages = messages
        .into_iter()
        .map(|StoredMessage { seq: _, role, text, english_text, language: _, created_at }| {
            let author = if role == "customer" { Author::Customer } else { Author::Assistant };
            if author == Author::Customer {
                // Stored empty when the message was English (see `save`).
                english.push(if english_text.is_empty() { text.clone() } else { english_text });
            }
            TicketMessage { author, text, at_ms: to_ms(created_at) }
        })
        .collect();
    Ok(ArchivedTicket {
        ticket_id,
        customer_id,
        thread_id,
        status,
        subject,
        language,
        result,
        run_id,
        kb_results,
        messages,
        english,
        created_at,
        completed_at,
    })
}

#[async_trait]
impl TicketArchive for SqlTicketArchive {
    async fn save(&self, ticket: &ArchivedTicket) -> Result<(), ArchiveError> {
        let ArchivedTicket {
            ticket_id,
            customer_id,
            thread_id,
            status,
            subject,
            language,
            result,
            run_id,
            kb_results,
            messages,
            english,
            created_at,
            completed_at,
        } = ticket;
        let summary =
            messages.iter().find(|m| m.author == Author::Customer).map(|m| m.text.clone()).unwrap_or_default();
        let record = CompletedTicket {
            ticket_id: ticket_id.clone(),
            customer_id: customer_id.clone(),
            thread_id: thread_id.clone(),
            status: status_column(*status).to_owned(),
            recommended_action: result.recommended_action.as_str().to_owned(),
            urgency: serde_json::to_value(result.urgency)
                .ok()
                .and_then(|v| v.as_str().map(str::to_owned))
                .unwrap_or_default(),
            ticket_type: result.ticket_type.as_str().to_owned(),
            subject: subject.clone(),
            summary,
            suggested_response: result.suggested_response.clone(),
            relevant_articles: result.relevant_articles.clone(),
            language: language.clone(),
            result: serde_json::to_value(result).map_err(|e| ArchiveError(Box::new(e)))?,
            run_id: run_id.clone(),
            kb_results: serde_json::to_value(kb_results).map_err(|e| ArchiveError(Box::new(e)))?,
            created_at: *created_at,
            completed_at: *completed_at,
        };
        // The n-th customer message's English text is `english[n]`; it is stored only where it
        // differs from the message (a translation), so an English ticket stores no copies.
        let mut customer_index = 0;
        let stored: Vec<StoredMessage> = messages
            .iter()
            .enumerate()
            .map(|(seq, m)| {
                let english_text = match m.author {
                    Author::Customer => {
                        customer_index += 1;
                        english.get(customer_index - 1).filter(|e| **e != m.text).cloned().unwrap_or_default()
                    }
                    Author::Assistant => String::new(),
                };
                StoredMessage {
                    seq: seq as u32,
                    role: match m.author {
                        Author::Customer => "customer".into(),
                        Author::Assistant => "assistant".into(),
                    },
                    text: m.text.clone(),
                    english_text,
                    language: language.clone(),
                    created_at: ms(m.at_ms),
                }
            })
            .collect();
        self.db.save_completed_ticket(&record, &stored).await.map_err(store_error)
    }

    async fn get(&self, ticket_id: &str) -> Result<Option<ArchivedTicket>, ArchiveError> {
        match self.db.get_ticket(ticket_id).await.map_err(store_error)? {
            Some((ticket, messages)) => decode(ticket, messages).map(Some),
            None => Ok(None),
        }
    }

    async fn exists(&self, ticket_id: &str) -> Result<bool, ArchiveError> {
        self.db.ticket_exists(ticket_id).await.map_err(store_error)
    }

    async fn list(
        &self,
        customer_id: &str,
        status: Option<ArchivedStatus>,
        after: Option<ArchiveCursor>,
        limit: usize,
    ) -> Result<(Vec<ArchivedTicket>, Option<ArchiveCursor>), ArchiveError> {
        let after =
            after.map(|ArchiveCursor { completed_at_ms, ticket_id }| TicketCursor { completed_at_ms, ticket_id });
        let (tickets, next) = self
            .db
            .list_tickets(customer_id, status.map(status_column), after.as_ref(), limit)
            .await
            .map_err(store_error)?;
        let tickets = tickets.into_iter().map(|t| decode(t, Vec::new())).collect::<Result<Vec<_>, _>>()?;
        let next = next.map(|TicketCursor { completed_at_ms, ticket_id }| ArchiveCursor { completed_at_ms, ticket_id });
        Ok((tickets, next))
    }

    async fn record_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: &str,
        output_json: &str,
    ) -> Result<(), ArchiveError> {
        self.db.record_triage_request(customer_id, key, Some(fingerprint), output_json).await.map_err(store_error)
    }

    async fn find_request(&self, customer_id: &str, key: &str) -> Result<Option<RecordedRequest>, ArchiveError> {
        let found = self.db.find_triage_request(customer_id, key).await.map_err(store_error)?;
        Ok(found
            .map(|TriageRequestRecord { output, fingerprint }| RecordedRequest { output_json: output, fingerprint }))
    }

    async fn claim_request(
        &self,
        customer_id: &str,
        key: &str,
        fingerprint: &str,
        holder: &str,
        now_ms: i64,
        stale_before_ms: i64,
    ) -> Result<KeyClaim, ArchiveError> {
        let claim = self
            .db
            .claim_triage_request(customer_id, key, fingerprint, holder, now_ms, stale_before_ms)
            .await
            .map_err(store_error)?;
        Ok(match claim {
            TriageClaim::Claimed => KeyClaim::Claimed,
            TriageClaim::Held { fingerprint } => KeyClaim::Held { fingerprint },
        })
    }

    async fn renew_claim(&self, customer_id: &str, key: &str, holder: &str, now_ms: i64) -> Result<bool, ArchiveError> {
        self.db.renew_triage_claim(customer_id, key, holder, now_ms).await.map_err(store_error)
    }

    async fn release_claim(&self, customer_id: &str, key: &str, holder: &str) -> Result<(), ArchiveError> {
        self.db.release_triage_claim(customer_id, key, holder).await.map_err(store_error)
    }
}
