-- Triage requests in progress, by the caller's idempotency key, per customer. A request claims
-- its key before matching the message to a ticket, so that a retry arriving meanwhile (on any
-- replica) waits for it instead of triaging the message a second time; the claim goes when the
-- request's outcome is recorded in triage_requests, or when it fails. The holder renews it
-- while it runs; one not renewed for a while belongs to a process that died and is taken over.
-- Keep in step with migrations/sqlite (0009_triage_claims.sql).
CREATE TABLE triage_claims (
    customer_id   TEXT COLLATE "C" NOT NULL,
    key           TEXT   NOT NULL,
    fingerprint   TEXT   NOT NULL,
    holder        TEXT   NOT NULL,
    renewed_at_ms BIGINT NOT NULL,
    PRIMARY KEY (customer_id, key)
);
