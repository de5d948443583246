-- Frontdesk store schema, SQLite dialect. Keep in step with migrations/postgres.
-- Times are milliseconds since the Unix epoch.

-- One row per thread: the compare-and-set target. `version` and `status` mirror the newest
-- checkpoint so a write never has to read the checkpoints table.
CREATE TABLE threads (
    thread_id     TEXT    NOT NULL PRIMARY KEY,
    workflow      TEXT    NOT NULL,
    version       INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    updated_at_ms INTEGER NOT NULL,
    status        TEXT    NOT NULL
) WITHOUT ROWID;

-- Retained checkpoints of each thread (the newest N, see StoreOptions::checkpoint_retention).
-- A rowid table: state blobs can be large.
CREATE TABLE checkpoints (
    thread_id       TEXT    NOT NULL REFERENCES threads (thread_id),
    version         INTEGER NOT NULL,
    workflow        TEXT    NOT NULL,
    state           BLOB    NOT NULL,
    next_node       TEXT,
    interrupt       TEXT,   -- JSON of PendingInterrupt
    run_id          TEXT    NOT NULL,
    idempotency_key TEXT,
    run_status      TEXT    NOT NULL,
    step            INTEGER NOT NULL,
    output          TEXT,   -- JSON
    created_at_ms   INTEGER NOT NULL,
    PRIMARY KEY (thread_id, version)
);

-- Completed or interrupted runs by idempotency key, scoped to their thread.
CREATE TABLE idempotency_keys (
    thread_id TEXT    NOT NULL REFERENCES threads (thread_id),
    key       TEXT    NOT NULL,
    run_id    TEXT    NOT NULL,
    version   INTEGER NOT NULL,
    status    TEXT    NOT NULL,
    output    TEXT,
    PRIMARY KEY (thread_id, key)
) WITHOUT ROWID;

-- Intake forms handed to teams (the workflow layer's outbox). Not erased with their thread.
CREATE TABLE intake_submissions (
    id            TEXT    NOT NULL PRIMARY KEY,
    thread_id     TEXT    NOT NULL,
    team_id       TEXT    NOT NULL,
    team_name     TEXT    NOT NULL,
    fields        TEXT    NOT NULL,  -- JSON object
    url           TEXT,
    created_at_ms INTEGER NOT NULL
);
CREATE INDEX intake_submissions_thread ON intake_submissions (thread_id, created_at_ms);
