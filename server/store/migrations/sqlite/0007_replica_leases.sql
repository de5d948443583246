-- Replica leases, for fast takeover of runs whose replica died. Keep in step with
-- migrations/postgres (0008_replica_leases.sql).
--
-- A checkpoint names the replica whose run wrote it (`run_owner`, the runtime's
-- RunMarker::owner): NULL for checkpoints written before, and by a runner without a replica id.
ALTER TABLE checkpoints ADD COLUMN run_owner TEXT;

-- One row per replica, renewed every few seconds while the replica lives: its lease covers
-- every run whose running checkpoint names it as owner. A lease whose `expires_at_ms` has
-- passed (by the clock of the process that reads it) has expired; a clean shutdown deletes it.
CREATE TABLE replica_leases (
    replica       TEXT    NOT NULL PRIMARY KEY,
    expires_at_ms INTEGER NOT NULL
) WITHOUT ROWID;

-- Threads whose newest checkpoint is running (unfinished_threads, which a takeover scan calls
-- every couple of seconds), without reading every thread: only running threads are in it.
CREATE INDEX threads_running ON threads (thread_id) WHERE status = 'running';
