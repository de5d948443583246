#!/usr/bin/env python3
"""What a W1 turn cannot go below on this machine, whatever the engine.

A turn commits at least twice (the accepting checkpoint and the final one; see
docs/architecture.md, "A run"). This measures the two costs every such commit pays, with
nothing of Frontdesk in the loop:

* the disk's flush: a durable commit (PostgreSQL with synchronous_commit=on, SQLite with
  synchronous=FULL) waits for at least one fdatasync of its WAL write. Measured here as
  write(8 KiB) + fdatasync on a file in --dir, the way PostgreSQL's own pg_test_fsync does.
* a bare SQLite put: the statements of Frontdesk's SQLite checkpoint put (compare-and-set on
  the thread row, insert the checkpoint, prune the previous one, in one BEGIN IMMEDIATE ..
  COMMIT) on this repository's migrations, from Python's sqlite3 (no async driver, no thread
  hand-off), WAL journal, synchronous=NORMAL as Frontdesk runs it and FULL as LangGraph's saver
  runs it.

It prints each figure and the per-turn floor it implies (two commits). Standard library only.

    python3 bench/floors.py [--dir DIR] [--puts 8000] [--syncs 2000]
"""

import argparse
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

MIGRATIONS = Path(__file__).resolve().parent.parent / "server" / "store" / "migrations" / "sqlite"

FIRST = (
    "INSERT INTO threads (thread_id, workflow, version, created_at_ms, updated_at_ms, status) "
    "VALUES (?1, 'intake', ?2, ?3, ?3, 'running') ON CONFLICT (thread_id) DO NOTHING RETURNING version"
)
NEXT = (
    "UPDATE threads SET workflow = 'intake', version = ?2, updated_at_ms = ?3, status = 'running' "
    "WHERE thread_id = ?1 AND version = ?2 - 1 RETURNING version"
)
CHECKPOINT = (
    "INSERT INTO checkpoints (thread_id, version, workflow, state, next_node, pending, run_id, "
    "idempotency_key, fingerprint, run_status, step, output, created_at_ms, run_owner) "
    "SELECT ?1, ?2, 'intake', ?4, NULL, NULL, 'run', NULL, NULL, 'running', 0, NULL, ?3, NULL "
    "WHERE changes() = 1"
)
PRUNE = (
    "DELETE FROM checkpoints WHERE thread_id = ?1 AND version <= ?2 - 1 "
    "AND EXISTS (SELECT 1 FROM threads WHERE thread_id = ?1 AND version = ?2)"
)
# W1's measured serialized state per write (frontdesk-bench w1, counting pass): about 2.4 KB.
STATE = bytes(range(256)) * 10


def fsync_micros(directory: str, n: int) -> float:
    path = os.path.join(directory, "floors.fsync")
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    block = b"\0" * 8192
    try:
        samples = []
        for _ in range(n):
            os.lseek(fd, 0, os.SEEK_SET)
            started = time.perf_counter()
            os.write(fd, block)
            os.fdatasync(fd)
            samples.append((time.perf_counter() - started) * 1e6)
        return statistics.median(samples)
    finally:
        os.close(fd)
        os.unlink(path)


def put_micros(directory: str, synchronous: str, puts: int) -> float:
    path = os.path.join(directory, f"floors-{synchronous.lower()}.db")
    for suffix in ("", "-wal", "-shm"):
        if os.path.exists(path + suffix):
            os.unlink(path + suffix)
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute(f"PRAGMA synchronous={synchronous}")
        db.execute("PRAGMA foreign_keys=ON")
        for migration in sorted(MIGRATIONS.glob("*.sql")):
            db.executescript(migration.read_text())
        samples = []
        conversations = max(1, puts // 8)
        for c in range(conversations):
            thread = f"floors-{c:06d}"
            for version in range(1, 9):
                started = time.perf_counter()
                db.execute("BEGIN IMMEDIATE")
                won = db.execute(FIRST if version == 1 else NEXT, (thread, version, version)).fetchall()
                db.execute(CHECKPOINT, (thread, version, version, STATE))
                db.execute(PRUNE, (thread, version))
                db.execute("COMMIT")
                samples.append((time.perf_counter() - started) * 1e6)
                if not won:
                    raise SystemExit(f"compare-and-set lost on {thread} v{version}: the statements are wrong")
        return statistics.median(samples)
    finally:
        db.close()
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(path + suffix):
                os.unlink(path + suffix)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", default=None, help="where the files go (default: a temporary directory)")
    parser.add_argument("--puts", type=int, default=8000)
    parser.add_argument("--syncs", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=args.dir) as directory:
        flush = fsync_micros(directory, args.syncs)
        normal = put_micros(directory, "NORMAL", args.puts)
        full = put_micros(directory, "FULL", args.puts)
    print(f"write 8 KiB + fdatasync, p50:                  {flush:7.1f} us  -> 2 commits: {2 * flush:7.1f} us a turn")
    print(f"bare SQLite put, synchronous=NORMAL, p50:      {normal:7.1f} us  -> 2 commits: {2 * normal:7.1f} us a turn")
    print(f"bare SQLite put, synchronous=FULL, p50:        {full:7.1f} us  -> 2 commits: {2 * full:7.1f} us a turn")
    print(f"sqlite {sqlite3.sqlite_version}, python sqlite3; files in {args.dir or 'a temporary directory'}")


if __name__ == "__main__":
    main()
