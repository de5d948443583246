-- The PMO (project-management office) schema: a service catalog and other lists of values
-- (`settings`), projects, technicians, customers, tasks, technician bookings and call records.
-- Public ids are a prefix and the row's sequence number (CUS-00001, TSK-00001, ...).

CREATE TABLE settings (
    category    TEXT    NOT NULL,
    code        TEXT    NOT NULL,
    name        TEXT    NOT NULL,
    description TEXT    NOT NULL DEFAULT '',
    sort_order  INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (category, code)
);

CREATE TABLE projects (
    seq         INTEGER PRIMARY KEY AUTOINCREMENT,
    name        TEXT NOT NULL,
    status      TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    manager     TEXT,
    start_date  TEXT,
    due_date    TEXT,
    created_at  TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- A technician's specialty is a code of the `dl__service_category` settings.
CREATE TABLE technicians (
    name      TEXT PRIMARY KEY,
    specialty TEXT NOT NULL
);

CREATE TABLE customers (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    name       TEXT NOT NULL,
    phone      TEXT NOT NULL,
    -- The phone number's digits: one customer per number, however it is written.
    phone_key  TEXT NOT NULL UNIQUE,
    email      TEXT,
    address    TEXT,
    created_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);

-- A task is a customer's service request (customer_seq set) or internal project work.
CREATE TABLE tasks (
    seq              INTEGER PRIMARY KEY AUTOINCREMENT,
    customer_seq     INTEGER REFERENCES customers (seq),
    project_seq      INTEGER REFERENCES projects (seq),
    service_category TEXT    NOT NULL,
    description      TEXT    NOT NULL,
    priority         TEXT    NOT NULL CHECK (priority IN ('low', 'medium', 'high', 'urgent')),
    address          TEXT,
    status           TEXT    NOT NULL DEFAULT 'open',
    created_at       TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
CREATE INDEX tasks_customer ON tasks (customer_seq);

CREATE TABLE bookings (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    task_seq   INTEGER NOT NULL REFERENCES tasks (seq),
    date       TEXT    NOT NULL,
    time_slot  TEXT    NOT NULL,
    technician TEXT    NOT NULL REFERENCES technicians (name),
    created_at TEXT    NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now')),
    -- A technician is in one place at a time.
    UNIQUE (technician, date, time_slot)
);

-- Ended phone calls; hanging up twice keeps the first record.
CREATE TABLE calls (
    call_session_id TEXT PRIMARY KEY,
    reason          TEXT,
    ended_at        TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))
);
