-- The investigation workflow's data, SQLite dialect. Keep in step with migrations/postgres
-- (0006_investigations.sql): same tables, columns, keys and indexes.
--
-- hr_* tables hold HR data imported from CSV files (Database::import_hr_data; the sample is
-- config/investigation/). They have no foreign keys on purpose: an export may name a manager,
-- a role or a changer it does not list, and a change made by someone unknown is a finding for
-- the investigation, not a reason to refuse the import. Dates are TEXT 'YYYY-MM-DD'
-- (inclusive), as in the files, so they compare as text.

CREATE TABLE hr_users (
    user_id    TEXT NOT NULL PRIMARY KEY,
    name       TEXT NOT NULL,
    email      TEXT NOT NULL,
    department TEXT NOT NULL,
    manager_id TEXT,
    role_id    TEXT
) WITHOUT ROWID;

CREATE TABLE hr_roles (
    role_id     TEXT NOT NULL PRIMARY KEY,
    name        TEXT NOT NULL,
    description TEXT NOT NULL
) WITHOUT ROWID;

-- What holding a role allows.
CREATE TABLE hr_role_authorisations (
    role_id      TEXT NOT NULL,
    system       TEXT NOT NULL,
    access_level TEXT NOT NULL,
    PRIMARY KEY (role_id, system, access_level)
) WITHOUT ROWID;

-- Grants made to one user directly, beside those of their role.
CREATE TABLE hr_authorisations (
    user_id      TEXT NOT NULL,
    system       TEXT NOT NULL,
    access_level TEXT NOT NULL,
    granted_on   TEXT NOT NULL,
    expires_on   TEXT,  -- NULL: no expiry
    PRIMARY KEY (user_id, system, access_level)
) WITHOUT ROWID;

CREATE TABLE hr_sick_leave (
    user_id    TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date   TEXT NOT NULL,
    PRIMARY KEY (user_id, start_date)
) WITHOUT ROWID;

CREATE TABLE hr_vacation (
    user_id    TEXT NOT NULL,
    start_date TEXT NOT NULL,
    end_date   TEXT NOT NULL,
    PRIMARY KEY (user_id, start_date)
) WITHOUT ROWID;

-- Changes made in access-controlled systems, each to be investigated. `change_investigation`
-- is the workflow's status of the change; a re-import never overwrites it.
CREATE TABLE hr_mutations (
    mutation_id          TEXT NOT NULL PRIMARY KEY,
    changer_id           TEXT NOT NULL,
    target_user_id       TEXT NOT NULL,
    system               TEXT NOT NULL,
    access_level         TEXT NOT NULL,
    change_type          TEXT NOT NULL,
    description          TEXT NOT NULL,
    changed_at           TEXT NOT NULL,  -- RFC 3339 UTC, e.g. 2025-11-10T09:00:00Z
    change_investigation TEXT NOT NULL DEFAULT 'Pending'
);

-- One investigation of a mutation. Times are milliseconds since the Unix epoch.
CREATE TABLE investigations (
    investigation_id TEXT    NOT NULL PRIMARY KEY,
    mutation_id      TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    report_json      TEXT,   -- JSON of the final report, once there is one
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL
);
-- Listing by status, newest first (investigation_id breaks ties for keyset paging).
CREATE INDEX investigations_status ON investigations (status, created_at_ms, investigation_id);

-- The audit trail of an investigation, keyed by position: a node re-run after a crash
-- rewrites its entries instead of appending duplicates. A rowid table: entries can be large.
-- No foreign key to investigations: entries may be written before the investigation's row.
CREATE TABLE investigation_audit (
    investigation_id TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    correlation_id   TEXT    NOT NULL,
    at_ms            INTEGER NOT NULL,
    actor            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    status_from      TEXT,
    status_to        TEXT,
    entry_json       TEXT    NOT NULL,
    PRIMARY KEY (investigation_id, seq)
);
-- Everything one correlation id touched, in time order.
CREATE INDEX investigation_audit_correlation ON investigation_audit (correlation_id, at_ms);

-- Questions the workflow put to people (the changer, a manager, ...) and their replies.
CREATE TABLE pending_actions (
    action_id        TEXT    NOT NULL PRIMARY KEY,
    investigation_id TEXT    NOT NULL,
    mutation_id      TEXT    NOT NULL,
    recipient_id     TEXT    NOT NULL,
    recipient_role   TEXT    NOT NULL,
    subject          TEXT    NOT NULL,
    body             TEXT    NOT NULL,
    status           TEXT    NOT NULL,
    reply_json       TEXT,
    created_at_ms    INTEGER NOT NULL,
    answered_at_ms   INTEGER
);
-- A recipient's open (or answered) actions.
CREATE INDEX pending_actions_recipient ON pending_actions (recipient_id, status);
