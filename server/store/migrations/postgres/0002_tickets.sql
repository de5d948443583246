-- Completed triage tickets, their chat history and triage requests by idempotency key,
-- PostgreSQL dialect. Keep in step with migrations/sqlite. Active tickets live in the
-- checkpointer; a ticket lands here once its triage completes (auto_respond: status
-- 'resolved'; escalate_human: status 'open').
-- Times are milliseconds since the Unix epoch. Ids use the "C" collation so they sort by
-- bytes, as in SQLite.

CREATE TABLE tickets (
    ticket_id          TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    customer_id        TEXT COLLATE "C" NOT NULL,
    thread_id          TEXT COLLATE "C" NOT NULL,
    status             TEXT   NOT NULL,  -- resolved | open
    recommended_action TEXT   NOT NULL,
    urgency            TEXT   NOT NULL,
    ticket_type        TEXT   NOT NULL,
    subject            TEXT   NOT NULL,
    summary            TEXT   NOT NULL,
    suggested_response TEXT   NOT NULL,
    relevant_articles  TEXT   NOT NULL,  -- JSON array of article ids
    language           TEXT   NOT NULL,
    result             TEXT   NOT NULL,  -- JSON: the full typed triage result
    created_at_ms      BIGINT NOT NULL,
    completed_at_ms    BIGINT NOT NULL
);
-- A customer's tickets, newest first (ticket_id breaks ties for keyset paging).
CREATE INDEX tickets_customer ON tickets (customer_id, completed_at_ms, ticket_id);

-- The messages of a ticket in order. Saved with their ticket in one transaction.
CREATE TABLE ticket_messages (
    ticket_id     TEXT COLLATE "C" NOT NULL REFERENCES tickets (ticket_id) ON DELETE CASCADE,
    seq           BIGINT NOT NULL,
    role          TEXT   NOT NULL,
    text          TEXT   NOT NULL,
    language      TEXT   NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (ticket_id, seq)
);

-- Triage requests by the caller's idempotency key, per customer: a retried request returns
-- the recorded output instead of triaging again. The first record of a key wins.
CREATE TABLE triage_requests (
    customer_id   TEXT COLLATE "C" NOT NULL,
    key           TEXT   NOT NULL,
    output        TEXT   NOT NULL,  -- JSON
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (customer_id, key)
);
