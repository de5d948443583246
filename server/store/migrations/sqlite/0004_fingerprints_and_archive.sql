-- Idempotency keys keep a fingerprint of the request that used them (a digest the workflow
-- computes from the fields that define the request), so that a retry with the key but another
-- request is refused instead of replayed. NULL for keys recorded before, and for callers that
-- give none: such a key replays as before. Keep in step with migrations/postgres (0005).
ALTER TABLE checkpoints ADD COLUMN fingerprint TEXT;
ALTER TABLE idempotency_keys ADD COLUMN fingerprint TEXT;
ALTER TABLE triage_requests ADD COLUMN fingerprint TEXT;

-- An archived ticket keeps everything the live ticket showed: the run that produced its result,
-- the knowledge-base hits it was based on (JSON array of {article_id, title, score}), and the
-- English translation of each customer message (empty when the message was English). Rows
-- archived before get the defaults: no run id, no hits, no translation.
ALTER TABLE tickets ADD COLUMN run_id TEXT NOT NULL DEFAULT '';
ALTER TABLE tickets ADD COLUMN kb_results TEXT NOT NULL DEFAULT '[]';
ALTER TABLE ticket_messages ADD COLUMN english_text TEXT NOT NULL DEFAULT '';
