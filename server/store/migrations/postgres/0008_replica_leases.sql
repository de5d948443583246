-- Replica leases, for fast takeover of runs whose replica died. Keep in step with
-- migrations/sqlite (0007_replica_leases.sql).
--
-- A checkpoint names the replica whose run wrote it (`run_owner`, the runtime's
-- RunMarker::owner): NULL for checkpoints written before, and by a runner without a replica id.
ALTER TABLE checkpoints ADD COLUMN run_owner TEXT;

-- One row per replica, renewed every few seconds while the replica lives: its lease covers
-- every run whose running checkpoint names it as owner. Renewals and readers both use the
-- database's clock (now()), so replicas with skewed clocks agree on when a lease expires. A
-- clean shutdown deletes the row.
CREATE TABLE replica_leases (
    replica    TEXT COLLATE "C" NOT NULL PRIMARY KEY,
    expires_at TIMESTAMPTZ NOT NULL
);

-- Threads whose newest checkpoint is running (unfinished_threads, which a takeover scan calls
-- every couple of seconds), without reading every thread: only running threads are in it.
-- Writes that keep a thread running (or not running) stay HOT updates; only a run's start and
-- end move the thread in or out of the index.
CREATE INDEX threads_running ON threads (thread_id) WHERE status = 'running';
