-- Frontdesk store schema, PostgreSQL dialect. Keep in step with migrations/sqlite.
-- Times are milliseconds since the Unix epoch. Thread ids use the "C" collation so they sort
-- by bytes (as in SQLite and in memory) and prefix ranges can use the primary key.

-- One row per thread: the compare-and-set target. `version` and `status` mirror the newest
-- checkpoint. Updated on every write, so leave room for HOT updates.
CREATE TABLE threads (
    thread_id     TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    workflow      TEXT   NOT NULL,
    version       BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    updated_at_ms BIGINT NOT NULL,
    status        TEXT   NOT NULL
) WITH (fillfactor = 80);

-- Retained checkpoints of each thread (the newest N, see StoreOptions::checkpoint_retention).
CREATE TABLE checkpoints (
    thread_id       TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id),
    version         BIGINT NOT NULL,
    workflow        TEXT   NOT NULL,
    state           BYTEA  NOT NULL,
    next_node       TEXT,
    interrupt       TEXT,  -- JSON of PendingInterrupt
    run_id          TEXT   NOT NULL,
    idempotency_key TEXT,
    run_status      TEXT   NOT NULL,
    step            BIGINT NOT NULL,
    output          TEXT,  -- JSON
    created_at_ms   BIGINT NOT NULL,
    PRIMARY KEY (thread_id, version)
);

-- Completed or interrupted runs by idempotency key, scoped to their thread.
CREATE TABLE idempotency_keys (
    thread_id TEXT COLLATE "C" NOT NULL REFERENCES threads (thread_id),
    key       TEXT   NOT NULL,
    run_id    TEXT   NOT NULL,
    version   BIGINT NOT NULL,
    status    TEXT   NOT NULL,
    output    TEXT,
    PRIMARY KEY (thread_id, key)
);

-- Intake forms handed to teams (the workflow layer's outbox). Not erased with their thread.
CREATE TABLE intake_submissions (
    id            TEXT   NOT NULL PRIMARY KEY,
    thread_id     TEXT COLLATE "C" NOT NULL,
    team_id       TEXT   NOT NULL,
    team_name     TEXT   NOT NULL,
    fields        TEXT   NOT NULL,  -- JSON object
    url           TEXT,
    created_at_ms BIGINT NOT NULL
);
CREATE INDEX intake_submissions_thread ON intake_submissions (thread_id, created_at_ms);
