"""What the LangGraph sides of W1 and W2 (w1_langgraph.py, w2_langgraph.py) share.

The savers and the stores behind them, the machine description, the nearest-rank percentile,
the CPU time the rest of the machine uses during a phase, the phase loop and the command line
options both benchmarks take. Standard library and the packages of requirements.txt only.
"""
from __future__ import annotations

import argparse
import asyncio
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import sqlite3
import sys
import tempfile
import time
from contextlib import closing

from langgraph.checkpoint.memory import InMemorySaver

WARMUP = 50
IN_FLIGHT = 100
# LangGraph's own Postgres how-to uses a pool of this size; with one Python thread doing the
# work, more connections would only add idle sessions.
PG_POOL_SIZE = 20
SQLITE_SYNCHRONOUS = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
PHASES = ("latency", "throughput")


class CheckFailed(Exception):
    pass


# ---------------------------------------------------------------------------
# Savers: a fresh store per phase (own SQLite file, own PostgreSQL database)
# ---------------------------------------------------------------------------


class PhaseStores:
    """Temp dir for the SQLite files of one phase, plus its own PostgreSQL database."""

    def __init__(self, workload: str, name: str, postgres_url: str | None, need_postgres: bool):
        self.dir = tempfile.TemporaryDirectory(prefix=f"lg-{workload}-{name}-")
        self.saver_path = os.path.join(self.dir.name, "checkpoints.sqlite")
        self.admin_url = postgres_url
        self.pg_db = None
        self.pg_url = None
        if need_postgres:
            import psycopg
            from psycopg.conninfo import make_conninfo

            self.pg_db = f"lg_{workload}_{os.getpid()}_{name}"
            with psycopg.connect(postgres_url, autocommit=True) as conn:
                conn.execute(f'CREATE DATABASE "{self.pg_db}"')
            self.pg_url = make_conninfo(postgres_url, dbname=self.pg_db)

    def path(self, file_name: str) -> str:
        return os.path.join(self.dir.name, file_name)

    def close(self):
        if self.pg_db is not None:
            import psycopg

            with psycopg.connect(self.admin_url, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{self.pg_db}" WITH (FORCE)')
        self.dir.cleanup()


class SyncSaver:
    """Opens the sync saver of one kind (latency phase, reference pass).

    `synchronous` sets PRAGMA synchronous on the SQLite saver's connection (None leaves it as
    the saver opens it); after entering, `durability_note` says what the connection reports.
    """

    def __init__(self, kind: str, stores: PhaseStores, synchronous: str | None = None):
        self.kind, self.stores, self.synchronous, self.closer = kind, stores, synchronous, None
        self.durability_note = ""

    def __enter__(self):
        if self.kind == "none":
            return None
        if self.kind == "memory":
            return InMemorySaver()
        if self.kind == "sqlite":
            from langgraph.checkpoint.sqlite import SqliteSaver

            # Same connection settings as SqliteSaver.from_conn_string; setup() turns on WAL.
            self.closer = sqlite3.connect(self.stores.saver_path, check_same_thread=False)
            saver = SqliteSaver(self.closer)
            saver.setup()
            if self.synchronous:
                self.closer.execute(f"PRAGMA synchronous={self.synchronous}")
            level = self.closer.execute("PRAGMA synchronous").fetchone()[0]
            self.durability_note = f"synchronous={SQLITE_SYNCHRONOUS.get(level, level)}"
            return saver
        if self.kind == "postgres":
            from langgraph.checkpoint.postgres import PostgresSaver

            self.closer = PostgresSaver.from_conn_string(self.stores.pg_url)
            saver = self.closer.__enter__()
            saver.setup()
            level = saver.conn.execute("SHOW synchronous_commit").fetchone()["synchronous_commit"]
            self.durability_note = f"synchronous_commit={level}"
            return saver
        raise ValueError(self.kind)

    def __exit__(self, *exc):
        if self.kind == "sqlite":
            self.closer.close()
        elif self.kind == "postgres":
            self.closer.__exit__(*exc)


class AsyncSaver:
    """Opens the async saver of one kind (throughput phase); options as for SyncSaver."""

    def __init__(self, kind: str, stores: PhaseStores, synchronous: str | None = None):
        self.kind, self.stores, self.synchronous, self.closer = kind, stores, synchronous, None
        self.durability_note = ""

    async def __aenter__(self):
        if self.kind == "none":
            return None
        if self.kind == "memory":
            return InMemorySaver()
        if self.kind == "sqlite":
            import aiosqlite
            from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

            self.closer = await aiosqlite.connect(self.stores.saver_path)
            saver = AsyncSqliteSaver(self.closer)
            await saver.setup()
            if self.synchronous:
                await self.closer.execute(f"PRAGMA synchronous={self.synchronous}")
            async with self.closer.execute("PRAGMA synchronous") as cur:
                level = (await cur.fetchone())[0]
            self.durability_note = f"synchronous={SQLITE_SYNCHRONOUS.get(level, level)}"
            return saver
        if self.kind == "postgres":
            from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
            from psycopg.rows import dict_row
            from psycopg_pool import AsyncConnectionPool

            # The connection settings AsyncPostgresSaver.from_conn_string uses, pooled.
            self.closer = AsyncConnectionPool(
                self.stores.pg_url,
                min_size=PG_POOL_SIZE,
                max_size=PG_POOL_SIZE,
                kwargs={"autocommit": True, "prepare_threshold": 0, "row_factory": dict_row},
                open=False,
            )
            await self.closer.open(wait=True)
            saver = AsyncPostgresSaver(self.closer)
            await saver.setup()
            async with self.closer.connection() as conn:
                row = await (await conn.execute("SHOW synchronous_commit")).fetchone()
            self.durability_note = f"synchronous_commit={row['synchronous_commit']}"
            return saver
        raise ValueError(self.kind)

    async def __aexit__(self, *exc):
        if self.closer is not None:
            await self.closer.close()


def check_wal(what: str, path: str):
    with closing(sqlite3.connect(path)) as conn:
        mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
    if mode != "wal":
        raise CheckFailed(f"{what} journal mode is {mode}, expected wal")


def canonical_sha256(rows) -> str:
    h = hashlib.sha256()
    for r in rows:
        h.update(
            (json.dumps(r, sort_keys=True, ensure_ascii=False, separators=(",", ":")) + "\n").encode()
        )
    return h.hexdigest()


# ---------------------------------------------------------------------------
# Measuring
# ---------------------------------------------------------------------------


class OtherLoad:
    """CPU time the rest of the machine used while a phase ran (PostgreSQL's server included).

    Another process running during a phase skews its figures; this says how much did.
    """

    def __init__(self):
        self.start = self._sample()

    @staticmethod
    def _sample():
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
        # user nice system idle iowait irq softirq steal: everything but idle and iowait is busy.
        busy = sum(fields[:8]) - fields[3] - fields[4]
        own = os.times()
        return time.monotonic(), busy / os.sysconf("SC_CLK_TCK"), own.user + own.system

    def stop(self) -> float:
        """Average number of CPUs the rest of the machine kept busy since the start."""
        wall, busy, own = (b - a for a, b in zip(self.start, self._sample()))
        self.text = f"rest of machine {busy - own:.1f} CPU-s in {wall:.1f} s"
        # Clock-tick rounding can make an idle machine come out a hair below zero.
        return max(0.0, (busy - own) / wall)


def percentile(sorted_ms: list, p: float) -> float:
    # Nearest rank, as the Rust bench (bench/src/stats.rs) computes it.
    rank = max(1, math.ceil(p / 100 * len(sorted_ms)))
    return sorted_ms[min(rank, len(sorted_ms)) - 1]


def run_phases(savers, phases, latency_phase, throughput_phase, latency_line, throughput_line):
    """Each saver's latency phase (a call) and throughput phase (a coroutine), in that order.

    Every result gets the CPUs the rest of the machine kept busy meanwhile (`other_cpus`), and
    one progress line: "<phase> <saver>: " + the phase's line + the load.
    """
    latency, throughput = {}, {}
    for kind in savers:
        if "latency" in phases:
            load = OtherLoad()
            r = latency_phase(kind)
            r["other_cpus"] = load.stop()
            latency[kind] = r
            print(f"latency {kind}: {latency_line(r)} ({load.text})", flush=True)
        if "throughput" in phases:
            load = OtherLoad()
            r = asyncio.run(throughput_phase(kind))
            r["other_cpus"] = load.stop()
            throughput[kind] = r
            print(f"throughput {kind}: {throughput_line(r)} ({load.text})", flush=True)
    return latency, throughput


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def version(pkg: str) -> str:
    try:
        return importlib.metadata.version(pkg)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def machine_line() -> str:
    affinity = sorted(os.sched_getaffinity(0))
    return (
        f"nproc {os.cpu_count()}, CPU {cpu_model()}, process pinned to CPU(s) "
        f"{','.join(map(str, affinity))}; load average {os.getloadavg()[0]:.2f} at start; "
        f"Python {platform.python_version()}, langgraph {version('langgraph')}, "
        f"langgraph-checkpoint {version('langgraph-checkpoint')}, "
        f"langgraph-checkpoint-sqlite {version('langgraph-checkpoint-sqlite')}, "
        f"langgraph-checkpoint-postgres {version('langgraph-checkpoint-postgres')}, "
        f"psycopg {version('psycopg')}, SQLite {sqlite3.sqlite_version}"
    )


def print_report_start(workload: str, machine: str):
    print()
    print(f"## {workload} in LangGraph on this machine")
    print()
    print(f"- Machine: {machine}")


def print_table(columns: list, savers, latency: dict, throughput: dict, cells):
    """The results table: a row per saver, `cells(kind, lat, tput)` and then the CPUs the rest of
    the machine kept busy in each phase; every column but the first is right-aligned."""
    columns = columns + ["rest of machine, CPUs (lat / tput)"]
    print("| " + " | ".join(columns) + " |")
    print("|---|" + "---:|" * (len(columns) - 1))
    for kind in savers:
        lat, tput = latency.get(kind), throughput.get(kind)
        row = cells(kind, lat, tput)
        row.append(" / ".join(f"{r['other_cpus']:.2f}" if r else "-" for r in (lat, tput)))
        print("| " + " | ".join(row) + " |")


def print_report_end(started: float):
    print(
        "The last column is the average number of CPUs that other processes (PostgreSQL's server"
        " included) kept busy during each phase: well above the server's share means another"
        " process disturbed that row."
    )
    print(f"Whole run: {time.perf_counter() - started:.0f} s.")


# ---------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------


def add_common_args(ap: argparse.ArgumentParser, savers: str):
    ap.add_argument("--postgres-url", default=None)
    ap.add_argument("--savers", default=savers)
    ap.add_argument("--phases", default=",".join(PHASES))


def add_json_arg(ap: argparse.ArgumentParser):
    ap.add_argument("--json", default=None, metavar="FILE", help="also write the results as JSON")


def savers_and_phases(ap: argparse.ArgumentParser, args, known_savers) -> tuple[list, list]:
    """--savers and --phases as lists; without --postgres-url the PostgreSQL rows are dropped."""
    savers = [s for s in args.savers.split(",") if s]
    phases = [p for p in args.phases.split(",") if p]
    for s in savers:
        if s not in known_savers:
            ap.error(f"unknown saver {s!r}")
    for p in phases:
        if p not in PHASES:
            ap.error(f"unknown phase {p!r}")
    if "postgres" in savers and not args.postgres_url:
        print("note: no --postgres-url, skipping the PostgreSQL rows", file=sys.stderr)
        savers.remove("postgres")
    return savers, phases


def exit_code(main) -> int:
    """Runs main(); a failed check ends the run with its message and exit code 1."""
    try:
        return main()
    except CheckFailed as e:
        print(f"CHECK FAILED: {e}", file=sys.stderr)
        return 1


def write_json(path: str | None, out: dict):
    if path:
        with open(path, "w") as f:
            json.dump(out, f, indent=1)
