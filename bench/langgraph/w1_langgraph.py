"""W1 (intake conversation) in LangGraph, to measure the LangGraph side of W1 on this machine.

Re-measures the W1 rows of "LangGraph 1.2.22: the figures to beat" (bench/WORKLOADS.md,
section 7) on the machine at hand. The graph and node rules follow bench/WORKLOADS.md (section
4) to the letter; the conversations come from workload.py beside this file (the Python port of
the Rust bench's generator), checked against the same sha256 as the Rust bench, so both sides
replay identical conversations.

Run through scripts/langgraph.sh w1 (it builds the venv and pins the process to one CPU).
"""
from __future__ import annotations

import argparse
import asyncio
import os
import sqlite3
import sys
import time
from collections import Counter
from contextlib import closing
from typing import Annotated, Literal, TypedDict

from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import Command

# workload.py and common.py live beside this file (bench/langgraph/).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload  # noqa: E402
import common  # noqa: E402

# The conversations bench/WORKLOADS.md publishes the sha256 and outcome counts of.
SPEC_CONVERSATIONS = 2000

# The published figures (bench/WORKLOADS.md, section 7), printed beside ours.
REFERENCE = {
    "memory": ("4.1 (9.0)", "267", "82 KB serialized"),
    "sqlite": ("7.3 (26.0)", "56", "161 KB"),
    "postgres": ("13.0 (42.8)", "69", "105 KB"),
}
SAVER_LABEL = {
    "memory": "InMemorySaver",
    "sqlite": "SQLite saver (file, WAL)",
    "postgres": "PostgreSQL saver",
}

# bench/WORKLOADS.md (sections 3.4, 4.4 and 6).
EXPECTED_SHA256 = "7eff83635a1bcc347f970b88e8d9dca27f8132d854dc8116457c3c8737dc1213"
EXPECTED_TEAMS = {"team-dba": 690, "team-net": 692, "team-app": 618}
EXPECTED_ROLLBACK_UNKNOWN = 491
EXPECTED_MODES = [
    "CHAT", "ELICITATION", "ELICITATION", "ELICITATION", "REVIEW", "REVIEW", "CHAT", "CHAT",
]
TEAM_ORDER = ["team-dba", "team-net", "team-app"]


# ---------------------------------------------------------------------------
# The graph (bench/WORKLOADS.md, 4.2 "State and graph" and 4.3 "Node rules")
# ---------------------------------------------------------------------------

FIELDS = [
    "title", "description", "justification", "affected_system", "environment", "urgency",
    "requested_by", "desired_date", "rollback_plan",
]
TEAM_NAMES = {
    "team-dba": "Database Platform",
    "team-net": "Network Engineering",
    "team-app": "Application Platform",
}
CHAT_REVIEW_REPLY = (
    "I can only help with change requests, sorry. Your request is still waiting for review: "
    "reply 'yes' to submit it or 'change <field>' to edit a field."
)
CHAT_REPLY = (
    "Hello! I am the change intake assistant. Tell me if you want to raise a change request."
)


class IntakeState(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    mode: str
    collected_fields: dict
    fields_marked_unknown: list
    identified_team: str | None
    identified_team_name: str | None
    submission_url: str | None
    submission_error: str | None


def human_turns(state: IntakeState) -> int:
    return sum(1 for m in state["messages"] if m.type == "human")


def last_text(state: IntakeState) -> str:
    return state["messages"][-1].content


def supervisor(
    state: IntakeState,
) -> Command[Literal["chat_agent", "elicitation_agent", "review_agent"]]:
    # Built as a real supervisor would prompt its model; the rules do not read it.
    _prompt = "\n".join(f"{m.type}: {m.content}" for m in state["messages"][-5:])
    words = workload.tokens(last_text(state))
    mode = state.get("mode", "CHAT")
    if mode == "REVIEW":
        review = "yes" in words or (words and words[0] == "change")
        goto = "review_agent" if review else "chat_agent"
    elif mode == "ELICITATION":
        goto = "elicitation_agent"
    elif "submit" in words or "request" in words:
        goto, mode = "elicitation_agent", "ELICITATION"
    else:
        goto, mode = "chat_agent", "CHAT"
    return Command(goto=goto, update={"mode": mode})


def chat_agent(state: IntakeState) -> dict:
    text = CHAT_REVIEW_REPLY if state.get("mode", "CHAT") == "REVIEW" else CHAT_REPLY
    return {"messages": [AIMessage(text, id=f"a{human_turns(state)}")]}


def elicitation_agent(state: IntakeState) -> Command[Literal["team_matching", "__end__"]]:
    collected = dict(state.get("collected_fields") or {})
    unknown = list(state.get("fields_marked_unknown") or [])
    for part in last_text(state).split(";"):
        if ":" not in part:
            continue
        key, value = part.split(":", 1)
        key, value = key.strip().lower(), value.strip()
        if key not in FIELDS:
            continue
        if value.lower() == "unknown":
            collected.pop(key, None)
            if key not in unknown:
                unknown.append(key)
        else:
            collected[key] = value
            if key in unknown:
                unknown.remove(key)
    missing = [f for f in FIELDS if f not in collected and f not in unknown]
    update = {
        "collected_fields": collected, "fields_marked_unknown": unknown, "mode": "ELICITATION",
    }
    if missing:
        text = "Thanks. To file the change request I still need: " + ", ".join(missing) + "."
        update["messages"] = [AIMessage(text, id=f"a{human_turns(state)}")]
        return Command(goto=END, update=update)
    return Command(goto="team_matching", update=update)


def team_matching(state: IntakeState) -> dict:
    collected = state.get("collected_fields") or {}
    team = workload.system_team(collected.get("affected_system", ""))
    team_name = TEAM_NAMES[team]
    lines = ["Please review your change request:"]
    lines += [f"- {f}: {collected.get(f) or 'UNKNOWN'}" for f in FIELDS]
    lines.append(f"Assigned team: {team_name} ({team}).")
    lines.append("Reply 'yes' to submit or 'change <field>' to edit.")
    return {
        "identified_team": team,
        "identified_team_name": team_name,
        "mode": "REVIEW",
        "messages": [AIMessage("\n".join(lines), id=f"r{human_turns(state)}")],
    }


def review_agent(state: IntakeState, config: RunnableConfig) -> dict:
    text = last_text(state)
    reply_id = f"a{human_turns(state)}"
    if "yes" in workload.tokens(text):
        team = state["identified_team"]
        url = f"https://changes.example.invalid/{team}/{config['configurable']['thread_id']}"
        return {
            "submission_url": url,
            "submission_error": None,
            "collected_fields": {},
            "fields_marked_unknown": [],
            "identified_team": None,
            "identified_team_name": None,
            "mode": "CHAT",
            "messages": [
                AIMessage(
                    f"Your change request was submitted to {state['identified_team_name']}: {url}",
                    id=reply_id,
                )
            ],
        }
    words = text.split()
    field = words[1].lower() if len(words) > 1 else None
    if field in FIELDS:
        collected = dict(state.get("collected_fields") or {})
        collected.pop(field, None)
        unknown = [f for f in state.get("fields_marked_unknown") or [] if f != field]
        return {
            "collected_fields": collected,
            "fields_marked_unknown": unknown,
            "mode": "ELICITATION",
            "messages": [AIMessage(f"OK, please provide a new value for {field}.", id=reply_id)],
        }
    text = "Which field would you like to change? " + ", ".join(FIELDS)
    return {"messages": [AIMessage(text, id=reply_id)]}


def build_graph(checkpointer):
    g = StateGraph(IntakeState)
    g.add_node("supervisor", supervisor)
    g.add_node("chat_agent", chat_agent)
    g.add_node("elicitation_agent", elicitation_agent)
    g.add_node("team_matching", team_matching)
    g.add_node("review_agent", review_agent)
    g.add_edge(START, "supervisor")
    for node in ("chat_agent", "team_matching", "review_agent"):
        g.add_edge(node, END)
    return g.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------------------
# One conversation: 8 invokes on its thread, then the checks of bench/WORKLOADS.md 4.4
# ---------------------------------------------------------------------------


def turn_input(turn: int, text: str) -> dict:
    return {"messages": [HumanMessage(text, id=f"h{turn}")]}


def thread_config(thread_id: str) -> dict:
    return {"configurable": {"thread_id": thread_id}}


def snapshot(state: dict) -> tuple:
    """What the checks read of the state after a turn (taken outside the timed span)."""
    return (
        state.get("mode"),
        state.get("identified_team"),
        list(state.get("fields_marked_unknown") or []),
        state.get("submission_url"),
    )


def run_conversation(graph, conv: dict, thread_id: str, durability: str, samples=None) -> tuple:
    config = thread_config(thread_id)
    seen = []
    for turn, text in enumerate(conv["turns"], 1):
        started = time.perf_counter_ns()
        state = graph.invoke(turn_input(turn, text), config, durability=durability)
        if samples is not None:
            samples.append((time.perf_counter_ns() - started) / 1e6)
        seen.append(snapshot(state))
    return seen, state


async def arun_conversation(graph, conv: dict, thread_id: str, durability: str) -> tuple:
    config = thread_config(thread_id)
    seen = []
    for turn, text in enumerate(conv["turns"], 1):
        state = await graph.ainvoke(turn_input(turn, text), config, durability=durability)
        seen.append(snapshot(state))
    return seen, state


class Tally:
    """W1's outcome counts over replayed conversations, and the first problem seen."""

    def __init__(self):
        self.conversations = 0
        self.teams = Counter()
        self.rollback_unknown = 0
        self.problem = None

    def add(self, conv: dict, thread_id: str, seen: list, final: dict):
        self.conversations += 1
        expect = conv["expect"]
        team, unknown = seen[4][1], seen[4][2]
        if team is not None:
            self.teams[team] += 1
        self.rollback_unknown += unknown == ["rollback_plan"]
        url = f"https://changes.example.invalid/{expect['team']}/{thread_id}"
        problems = []
        modes = [s[0] for s in seen]
        if modes != EXPECTED_MODES:
            problems.append(f"modes {modes}")
        if team != expect["team"]:
            problems.append(f"team after turn 5 {team!r}, expected {expect['team']!r}")
        if unknown != expect["fields_marked_unknown_before_submit"]:
            problems.append(f"unknown after turn 5 {unknown}")
        if seen[6][3] != url:
            problems.append(f"submission url after turn 7 {seen[6][3]!r}, expected {url!r}")
        messages = final["messages"]
        if len(messages) != 16 or [m.type for m in messages] != ["human", "ai"] * 8:
            problems.append(f"{len(messages)} messages at the end, expected 8 human + 8 ai")
        if final.get("collected_fields") or final.get("fields_marked_unknown"):
            problems.append("collected fields or unknown list not empty at the end")
        if final.get("submission_url") != url or final.get("mode") != "CHAT":
            problems.append("final mode or submission url wrong")
        if problems and self.problem is None:
            self.problem = f"{thread_id}: " + "; ".join(problems)

    def merge(self, other: "Tally"):
        self.conversations += other.conversations
        self.teams.update(other.teams)
        self.rollback_unknown += other.rollback_unknown
        self.problem = self.problem or other.problem

    def summary(self) -> str:
        teams = " / ".join(f"{t} {self.teams[t]}" for t in TEAM_ORDER)
        return f"{teams}, rollback_plan unknown in {self.rollback_unknown}"

    def check(self, what: str, convs: list):
        """Every conversation as section 4.4 says, and the counts its generator implies."""
        if self.problem is not None:
            raise common.CheckFailed(f"{what}: {self.problem}")
        want_teams = Counter(c["expect"]["team"] for c in convs)
        want_unknown = sum(bool(c["expect"]["fields_marked_unknown_before_submit"]) for c in convs)
        if (
            self.conversations != len(convs)
            or self.teams != want_teams
            or self.rollback_unknown != want_unknown
        ):
            raise common.CheckFailed(
                f"{what}: {self.conversations} conversations, {self.summary()}"
            )


# ---------------------------------------------------------------------------
# Storage per conversation
# ---------------------------------------------------------------------------


def memory_storage(saver: InMemorySaver) -> dict:
    """Serialized bytes InMemorySaver holds: checkpoints, metadata, channel blobs and writes."""
    total, threads = 0, len(saver.storage)
    for namespaces in saver.storage.values():
        for checkpoints in namespaces.values():
            for checkpoint, metadata, _parent in checkpoints.values():
                total += len(checkpoint[1]) + len(metadata[1])
    for writes in saver.writes.values():
        for _task, _channel, value, _path in writes.values():
            total += len(value[1])
    for _type, blob in saver.blobs.values():
        total += len(blob)
    return {"threads": threads, "bytes": total, "what": "serialized (checkpoints, blobs, writes)"}


def sqlite_storage(path: str) -> dict:
    size = lambda name: os.path.getsize(name) if os.path.exists(name) else 0  # noqa: E731
    with closing(sqlite3.connect(path)) as conn:
        threads = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        written = size(path) + size(path + "-wal")
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        compacted = size(path) + size(path + "-wal")
    return {
        "threads": threads,
        "bytes": written,
        "bytes_compacted": compacted,
        "what": "db + wal after a WAL checkpoint, as written",
    }


def postgres_storage(url: str) -> dict:
    import psycopg

    size_sql = (
        "SELECT (pg_total_relation_size('checkpoints') + pg_total_relation_size('checkpoint_blobs')"
        " + pg_total_relation_size('checkpoint_writes'))::bigint"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        threads = conn.execute("SELECT count(DISTINCT thread_id) FROM checkpoints").fetchone()[0]
        written = conn.execute(size_sql).fetchone()[0]
        conn.execute("VACUUM FULL checkpoints, checkpoint_blobs, checkpoint_writes")
        compacted = conn.execute(size_sql).fetchone()[0]
    return {
        "threads": threads,
        "bytes": written,
        "bytes_compacted": compacted,
        "what": "checkpoints + checkpoint_blobs + checkpoint_writes incl. indexes and TOAST,"
        " as written",
    }


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------


class CountingSaver(InMemorySaver):
    """InMemorySaver that counts what a turn writes (reference pass only)."""

    def __init__(self):
        super().__init__()
        self.puts = 0
        self.write_batches = 0

    def put(self, *args, **kwargs):
        self.puts += 1
        return super().put(*args, **kwargs)

    def put_writes(self, *args, **kwargs):
        self.write_batches += 1
        return super().put_writes(*args, **kwargs)


def reference_pass(convs: list, durability: str) -> dict:
    """Untimed: the conversations through InMemorySaver; W1's outcomes must come out exactly."""
    saver = CountingSaver()
    graph = build_graph(saver)
    tally = Tally()
    started = time.perf_counter()
    for c in convs:
        seen, final = run_conversation(graph, c, c["thread_id"], durability)
        tally.add(c, c["thread_id"], seen, final)
    secs = time.perf_counter() - started
    tally.check("reference pass", convs)
    turns = 8 * len(convs)
    return {
        "tally": tally,
        "secs": secs,
        "puts_per_turn": saver.puts / turns,
        "write_batches_per_turn": saver.write_batches / turns,
    }


def warm_id(i: int) -> str:
    return f"warm-{i:06d}"


def latency_phase(kind, convs, durability, synchronous, postgres_url) -> dict:
    stores = common.PhaseStores(
        "w1", f"lat_{kind}", postgres_url, need_postgres=kind == "postgres"
    )
    try:
        opener = common.SyncSaver(kind, stores, synchronous)
        with opener as saver:
            graph = build_graph(saver)
            warm = Tally()
            for i in range(common.WARMUP):
                c = convs[i % len(convs)]
                warm.add(c, warm_id(i), *run_conversation(graph, c, warm_id(i), durability))
            if warm.problem is not None:
                raise common.CheckFailed(f"latency {kind} warm-up: {warm.problem}")
            samples, tally = [], Tally()
            for c in convs:
                seen, final = run_conversation(graph, c, c["thread_id"], durability, samples)
                tally.add(c, c["thread_id"], seen, final)
            tally.check(f"latency {kind}", convs)
            storage = memory_storage(saver) if kind == "memory" else None
        if kind == "sqlite":
            common.check_wal("SQLite saver", stores.saver_path)
            storage = sqlite_storage(stores.saver_path)
        elif kind == "postgres":
            storage = postgres_storage(stores.pg_url)
    finally:
        stores.close()
    if storage["threads"] != common.WARMUP + len(convs):
        raise common.CheckFailed(f"latency {kind}: saver holds {storage['threads']} threads")
    per_turn = []
    for t in range(8):
        per_turn.append(common.percentile(sorted(samples[t::8]), 50))
    samples.sort()
    return {
        "turns": len(samples),
        "p50_ms": common.percentile(samples, 50),
        "p95_ms": common.percentile(samples, 95),
        "p99_ms": common.percentile(samples, 99),
        "mean_ms": sum(samples) / len(samples),
        "max_ms": samples[-1],
        "per_turn_p50_ms": per_turn,
        "storage": storage,
        "storage_per_conversation_bytes": storage["bytes"] / storage["threads"],
        "saver_durability": opener.durability_note,
    }


async def drive(graph, convs, thread_ids, durability, in_flight) -> Tally:
    """in_flight tasks share one queue of conversations, so that many are always open."""
    todo = iter(zip(convs, thread_ids))
    tally = Tally()

    async def worker():
        for c, thread_id in todo:
            seen, final = await arun_conversation(graph, c, thread_id, durability)
            tally.add(c, thread_id, seen, final)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return tally


async def throughput_phase(kind, convs, durability, synchronous, postgres_url) -> dict:
    stores = common.PhaseStores(
        "w1", f"tput_{kind}", postgres_url, need_postgres=kind == "postgres"
    )
    try:
        opener = common.AsyncSaver(kind, stores, synchronous)
        async with opener as saver:
            graph = build_graph(saver)
            warm_convs = [convs[i % len(convs)] for i in range(common.WARMUP)]
            warm_ids = [warm_id(i) for i in range(common.WARMUP)]
            warm = await drive(graph, warm_convs, warm_ids, durability, common.IN_FLIGHT)
            if warm.problem is not None:
                raise common.CheckFailed(f"throughput {kind} warm-up: {warm.problem}")
            started = time.perf_counter()
            ids = [c["thread_id"] for c in convs]
            tally = await drive(graph, convs, ids, durability, common.IN_FLIGHT)
            secs = time.perf_counter() - started
            tally.check(f"throughput {kind}", convs)
        if kind == "sqlite":
            common.check_wal("SQLite saver", stores.saver_path)
    finally:
        stores.close()
    return {
        "turns_per_s": 8 * len(convs) / secs,
        "secs": secs,
        "saver_durability": opener.durability_note,
    }


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def kb(n: float) -> str:
    return f"{n / 1000:.1f} KB"


def print_report(machine, savers, latency, throughput, durability, reference, started):
    common.print_report_start("W1", machine)
    print(
        "- Latency: one thread, sync `graph.invoke` per turn (8 per conversation, one thread"
        f" each), after {common.WARMUP} warm-up conversations; p50/p95/p99 nearest rank over"
        " every timed turn."
    )
    print(
        f"- Throughput: asyncio, one event loop, {common.IN_FLIGHT} tasks each running whole"
        " conversations (8 awaited `graph.ainvoke`); savers InMemorySaver, AsyncSqliteSaver (one"
        " aiosqlite connection), AsyncPostgresSaver over an AsyncConnectionPool of"
        f" {common.PG_POOL_SIZE}."
    )
    notes = sorted(
        {
            f"{SAVER_LABEL[k]} {r['saver_durability']}"
            for d in (latency, throughput)
            for k, r in d.items()
            if r["saver_durability"]
        }
    )
    default = " (LangGraph's default: a checkpoint committed after every superstep)"
    print(
        f"- Durability: `{durability}`"
        + (default if durability == "async" else "")
        + ("; " + ", ".join(notes) if notes else "")
        + "."
    )
    if reference:
        print(
            f"- Per turn LangGraph wrote {reference['puts_per_turn']:.2f} checkpoints and"
            f" {reference['write_batches_per_turn']:.2f} batches of pending writes (reference pass)."
        )
    print()

    def cells(kind, lat, tput):
        storage = "-"
        if lat:
            storage = kb(lat["storage_per_conversation_bytes"])
            if kind == "memory":
                storage += " serialized"
        return [
            SAVER_LABEL[kind],
            f"{lat['p50_ms']:.2f}" if lat else "-",
            f"{lat['p95_ms']:.2f}" if lat else "-",
            f"{lat['p99_ms']:.2f}" if lat else "-",
            f"{lat['mean_ms']:.2f}" if lat else "-",
            f"{tput['turns_per_s']:.0f}" if tput else "-",
            storage,
            *REFERENCE[kind],
        ]

    columns = [
        "W1 saver", "p50 ms", "p95 ms", "p99 ms", "mean ms", "turns/s (100 in flight)",
        "storage per conversation", "bench/WORKLOADS.md p50 (p99) ms",
        "bench/WORKLOADS.md turns/s", "bench/WORKLOADS.md storage",
    ]
    common.print_table(columns, savers, latency, throughput, cells)
    print()
    print(
        "Storage is what the saver holds per conversation (warm-up ones included): SQLite the database"
        " file after a WAL checkpoint, PostgreSQL the checkpoint tables with indexes and TOAST, both as"
        " written (before VACUUM); InMemorySaver the serialized bytes it keeps."
    )
    common.print_report_end(started)


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument(
        "--conversations", type=int, default=SPEC_CONVERSATIONS, help="timed conversations"
    )
    ap.add_argument(
        "--reference",
        type=int,
        default=SPEC_CONVERSATIONS,
        help="conversations of the untimed reference pass (2,000 checks bench/WORKLOADS.md's"
        " counts)",
    )
    common.add_common_args(ap, savers="memory,sqlite,postgres")
    ap.add_argument(
        "--durability",
        default="async",
        choices=["async", "sync", "exit"],
        help="LangGraph's durability mode for every invoke (default: LangGraph's own, async)",
    )
    ap.add_argument(
        "--sqlite-synchronous",
        default=None,
        choices=["OFF", "NORMAL", "FULL", "EXTRA"],
        help="PRAGMA synchronous on the SQLite saver's connection (default: left as the saver"
        " opens it)",
    )
    common.add_json_arg(ap)
    args = ap.parse_args()

    savers, phases = common.savers_and_phases(ap, args, REFERENCE)
    if args.conversations < 1 or args.reference < 0:
        ap.error("--conversations must be at least 1")

    started = time.perf_counter()
    # Taken before the run, so the load average is not our own.
    machine = common.machine_line()
    n_gen = max(SPEC_CONVERSATIONS, args.conversations, args.reference)
    all_convs = workload.w1_conversations(n_gen)
    convs = all_convs[: args.conversations]

    reference = None
    workload.prng_self_test()
    got = common.canonical_sha256(all_convs[:SPEC_CONVERSATIONS])
    if got != EXPECTED_SHA256:
        raise common.CheckFailed(
            f"w1_conversations.jsonl sha256 {got} != bench/WORKLOADS.md {EXPECTED_SHA256}"
        )
    print("workload: sha256 of 2,000 conversations (w1_conversations.jsonl) = WORKLOADS.md")

    if args.reference > 0:
        ref_convs = all_convs[: args.reference]
        print(
            f"reference pass: {len(ref_convs)} conversations, InMemorySaver, untimed ...",
            flush=True,
        )
        reference = reference_pass(ref_convs, args.durability)
        tally = reference["tally"]
        print(
            f"  {reference['secs']:.1f} s; {tally.summary()}; every conversation shows the modes of"
            f" section 4.4; per turn {reference['puts_per_turn']:.2f} checkpoints,"
            f" {reference['write_batches_per_turn']:.2f} batches of writes"
        )
        if args.reference == SPEC_CONVERSATIONS:
            if (
                dict(tally.teams) != EXPECTED_TEAMS
                or tally.rollback_unknown != EXPECTED_ROLLBACK_UNKNOWN
            ):
                raise common.CheckFailed(
                    f"2,000 conversations gave {tally.summary()}, not bench/WORKLOADS.md's"
                )
            print("  counts over 2,000 conversations match bench/WORKLOADS.md")
        else:
            print("  note: not the 2,000 of bench/WORKLOADS.md, so its counts were not checked")

    saver_args = (convs, args.durability, args.sqlite_synchronous, args.postgres_url)
    latency, throughput = common.run_phases(
        savers,
        phases,
        lambda kind: latency_phase(kind, *saver_args),
        lambda kind: throughput_phase(kind, *saver_args),
        lambda r: (
            f"{r['turns']} turns, p50 {r['p50_ms']:.3f} ms, p95 {r['p95_ms']:.3f} ms,"
            f" p99 {r['p99_ms']:.3f} ms, mean {r['mean_ms']:.3f} ms, max {r['max_ms']:.3f} ms;"
            f" p50 by turn 1-8 (ms) {' / '.join(f'{v:.2f}' for v in r['per_turn_p50_ms'])};"
            f" storage {kb(r['storage_per_conversation_bytes'])} per conversation"
            f" ({r['storage']['what']}); {r['saver_durability'] or 'no durability setting'}"
        ),
        lambda r: f"{8 * len(convs)} turns in {r['secs']:.2f} s, {r['turns_per_s']:.0f} turns/s",
    )
    print("every timed replay reproduced W1's outcomes for each conversation")

    print_report(machine, savers, latency, throughput, args.durability, reference, started)
    common.write_json(
        args.json,
        {
            "workload": "w1",
            "engine": "langgraph",
            "machine": machine,
            "conversations": len(convs),
            "in_flight": common.IN_FLIGHT,
            "durability": args.durability,
            "reference": None
            if reference is None
            else {
                "conversations": reference["tally"].conversations,
                "teams": dict(reference["tally"].teams),
                "rollback_unknown": reference["tally"].rollback_unknown,
                "puts_per_turn": reference["puts_per_turn"],
                "write_batches_per_turn": reference["write_batches_per_turn"],
            },
            "latency": latency,
            "throughput": throughput,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(common.exit_code(main))
