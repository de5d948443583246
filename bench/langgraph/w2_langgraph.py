"""W2 (ticket triage) in LangGraph, to re-measure the LangGraph figures of bench/WORKLOADS.md.

Re-measures the W2 rows of "LangGraph 1.2.22: the figures to beat" (bench/WORKLOADS.md,
section 7) on the machine at hand. The graph, node rules and post-run persistence follow
bench/WORKLOADS.md (section 5) to the letter; the tickets come from workload.py beside this file
(the Python port of the Rust bench's generator), checked against the same sha256 as the Rust
bench, so both sides replay identical tickets.

Run through scripts/langgraph.sh w2 (it builds the venv and pins the process to one CPU).
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
from typing import TypedDict

from langgraph.graph import END, START, StateGraph

# The workload generator and common.py live beside this file (bench/langgraph/).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload  # noqa: E402
import common  # noqa: E402

# The published figures (bench/WORKLOADS.md, section 7), printed beside ours.
REFERENCE = {
    "none": ("2.8", "291"),
    "memory": ("6.0 (11.7)", "181"),
    "sqlite": ("9.8 (18.7)", "40"),
    "postgres": ("17.6 (60.0)", "52"),
}
SAVER_LABEL = {
    "none": "no checkpointer",
    "memory": "InMemorySaver",
    "sqlite": "SQLite saver (file, WAL)",
    "postgres": "PostgreSQL saver",
}

# bench/WORKLOADS.md (section 3.4): sha256 of the canonical JSON Lines for the full sets.
EXPECTED_SHA256 = {
    "customers": "7f48193ad20adff5da3b59d12bdb3d7bfb4032f4d77db6348704c96fd3c3fa78",
    "articles": "1c2e6d1193f5b4fd9e288fda3deca260edb6fb0eeeb411633ed3a3021c5f4f8d",
    "tickets": "b63a4d3ce65d490f9bfc6a8c279dbb8d852ae1989d47ba6014bb25ceaad69a89",
}
# bench/WORKLOADS.md (section 6): outcome counts.
EXPECTED_ROUTES = {"billing": 2476, "technical": 2419, "general": 2546, "escalate": 2559}
EXPECTED_ACTIONS = {"auto_respond": 4922, "route_specialist": 2519, "escalate_human": 2559}
EXPECTED_ACTIONS_FIRST_2000 = {"auto_respond": 1017, "route_specialist": 487, "escalate_human": 496}
ACTION_ORDER = ["auto_respond", "route_specialist", "escalate_human"]
ROUTE_ORDER = ["billing", "technical", "general", "escalate"]


# ---------------------------------------------------------------------------
# The graph (bench/WORKLOADS.md, 5.2 "State and graph" and 5.3 "Node rules")
# ---------------------------------------------------------------------------

BILLING_WORDS = {
    "invoice", "refund", "charged", "payment", "billing", "receipt", "subscription",
    "overcharge", "credit",
}
TECHNICAL_WORDS = {
    "api", "timeout", "error", "crash", "crashes", "login", "webhook", "password", "sso",
    "export", "limit",
}
URGENCY_NAMES = ["low", "medium", "high", "critical"]
KB_STOP_WORDS = {
    "have", "with", "this", "that", "what", "where", "would", "please", "after", "from", "your",
    "need", "help", "problem", "question",
}


class TriageState(TypedDict, total=False):
    # input
    ticket_id: str
    customer_id: str
    subject: str
    body: str
    # translator
    is_english: bool
    language: str
    english_body: str
    # supervisor
    customer: dict
    ticket_type: str
    urgency: str
    route: str
    # specialist / escalate
    kb_results: list
    triage_result: dict


def build_graph(customers: dict, articles: list, tokens, checkpointer):
    """Compiles the W2 graph; customers and articles are the in-memory fixtures."""

    # Lower-cased once: kb_search only ever matches against this text.
    searchable = [
        (a["article_id"], a["title"], (a["title"] + " " + a["body"]).lower()) for a in articles
    ]

    def customer_lookup(customer_id: str) -> dict:
        # A copy, so state never aliases the directory.
        return dict(customers[customer_id])

    def kb_search(text: str) -> list:
        terms = []
        for tok in tokens(text):
            if len(tok) >= 4 and tok not in KB_STOP_WORDS and tok not in terms:
                terms.append(tok)
        scored = [
            (sum(1 for term in terms if term in haystack), article_id, title)
            for article_id, title, haystack in searchable
        ]
        scored.sort(key=lambda s: (-s[0], s[1]))
        return [{"article_id": a, "title": t, "score": s} for s, a, t in scored[:3]]

    def translator(state: TriageState) -> dict:
        body = state["body"]
        if body.startswith("[") and body[3:5] == "] ":
            return {"is_english": False, "language": body[1:3], "english_body": body[5:]}
        return {"is_english": True, "language": "en", "english_body": body}

    def supervisor(state: TriageState) -> dict:
        customer = customer_lookup(state["customer_id"])
        text = (state["subject"] + " " + state["english_body"]).lower()
        words = set(tokens(text))
        b = len(words & BILLING_WORDS)
        t = len(words & TECHNICAL_WORDS)
        if b == 0 and t == 0:
            ticket_type = "general"
        elif b >= t:
            ticket_type = "billing"
        else:
            ticket_type = "technical"
        if "down" in words or "outage" in words or "data loss" in text:
            level = 3
        elif words & {"urgent", "asap", "blocked"}:
            level = 2
        elif "charged twice" in text:
            level = 1
        else:
            level = 0
        if customer["tier"] == "enterprise":
            level = min(level + 1, 3)
        urgency = URGENCY_NAMES[level]
        if urgency == "critical" or customer["account_status"] == "suspended":
            route = "escalate"
        else:
            route = ticket_type
        return {"customer": customer, "ticket_type": ticket_type, "urgency": urgency, "route": route}

    def make_specialist(category: str):
        def specialist(state: TriageState) -> dict:
            results = kb_search(state["subject"] + " " + state["english_body"])
            top = results[0]
            customer = state["customer"]
            if (
                top["score"] >= 2
                and state["urgency"] in ("low", "medium")
                and customer["account_status"] == "active"
            ):
                action = "auto_respond"
                recommended = (
                    f"Send KB article {top['article_id']} '{top['title']}' to {customer['name']}"
                )
            else:
                action = "route_specialist"
                recommended = (
                    f"Assign to {category} specialist queue (urgency {state['urgency']}); "
                    f"suggested reading {top['article_id']}"
                )
            return {
                "kb_results": results,
                "triage_result": {
                    "action": action,
                    "queue": category,
                    "recommended_action": recommended,
                    "kb_article": top["article_id"],
                    "kb_score": top["score"],
                },
            }

        return specialist

    def escalate(state: TriageState) -> dict:
        customer = state["customer"]
        return {
            "triage_result": {
                "action": "escalate_human",
                "queue": "escalations",
                "recommended_action": (
                    f"Page on-call {state['ticket_type']} lead: {state['urgency']} ticket from "
                    f"{customer['tier']} customer {customer['name']}"
                ),
                "kb_article": None,
                "kb_score": 0,
            }
        }

    g = StateGraph(TriageState)
    g.add_node("translator", translator)
    g.add_node("supervisor", supervisor)
    for category in ("billing", "technical", "general"):
        g.add_node(f"{category}_specialist", make_specialist(category))
    g.add_node("escalate", escalate)
    g.add_edge(START, "translator")
    g.add_edge("translator", "supervisor")
    g.add_conditional_edges(
        "supervisor",
        lambda state: state["route"],
        {
            "billing": "billing_specialist",
            "technical": "technical_specialist",
            "general": "general_specialist",
            "escalate": "escalate",
        },
    )
    for node in ("billing_specialist", "technical_specialist", "general_specialist", "escalate"):
        g.add_edge(node, END)
    return g.compile(checkpointer=checkpointer)


# ---------------------------------------------------------------------------
# One ticket: invoke, then archive + delete_thread (bench/WORKLOADS.md, 5.4)
# ---------------------------------------------------------------------------

ARCHIVE_SCHEMA = """
CREATE TABLE IF NOT EXISTS completed_tickets (
    ticket_id TEXT PRIMARY KEY,
    thread_id TEXT NOT NULL,
    customer_id TEXT NOT NULL,
    action TEXT NOT NULL,
    route TEXT NOT NULL,
    urgency TEXT NOT NULL,
    ticket_type TEXT NOT NULL,
    recommended_action TEXT NOT NULL,
    kb_article TEXT
)
"""
ARCHIVE_INSERT = "INSERT INTO completed_tickets VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
ARCHIVED_ACTIONS = ("auto_respond", "escalate_human")
# In the phase's temp dir, beside the SQLite saver's file.
ARCHIVE_FILE = "archive.sqlite"


def graph_input(ticket: dict) -> dict:
    return {k: ticket[k] for k in ("ticket_id", "customer_id", "subject", "body")}


def graph_config(ticket: dict) -> dict:
    return {"configurable": {"thread_id": f"{ticket['customer_id']}:{ticket['ticket_id']}"}}


def archive_row(ticket: dict, thread_id: str, state: dict) -> tuple:
    result = state["triage_result"]
    return (
        ticket["ticket_id"], thread_id, ticket["customer_id"], result["action"], state["route"],
        state["urgency"], state["ticket_type"], result["recommended_action"], result["kb_article"],
    )


def open_archive(path: str) -> sqlite3.Connection:
    # Autocommit: each INSERT is its own transaction, i.e. exactly one commit per ticket, even
    # when (in the async phase) many tickets share the connection.
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(ARCHIVE_SCHEMA)
    return conn


def run_ticket(graph, saver, archive: sqlite3.Connection, ticket: dict) -> tuple:
    config = graph_config(ticket)
    state = graph.invoke(graph_input(ticket), config)
    action = state["triage_result"]["action"]
    if action in ARCHIVED_ACTIONS:
        thread_id = config["configurable"]["thread_id"]
        archive.execute(ARCHIVE_INSERT, archive_row(ticket, thread_id, state))
        if saver is not None:
            saver.delete_thread(thread_id)
    return state["route"], action


async def arun_ticket(graph, saver, archive, ticket: dict) -> tuple:
    config = graph_config(ticket)
    state = await graph.ainvoke(graph_input(ticket), config)
    action = state["triage_result"]["action"]
    if action in ARCHIVED_ACTIONS:
        thread_id = config["configurable"]["thread_id"]
        await archive.execute(ARCHIVE_INSERT, archive_row(ticket, thread_id, state))
        if saver is not None:
            await saver.adelete_thread(thread_id)
    return state["route"], action


# ---------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------


def check_counts(what: str, got: Counter, expected: dict):
    if dict(got) != expected:
        raise common.CheckFailed(f"{what}: got {dict(got)}, expected {expected}")


def check_phase(what, tickets, outcomes, expected, archived_ids, kept_threads):
    """Every ticket has the reference outcome; archive and saver hold exactly what they should."""
    for ticket, outcome in zip(tickets, outcomes):
        # Warm-up tickets past --tickets have no reference outcome.
        want = expected.get(ticket["ticket_id"])
        if want is not None and outcome != want:
            raise common.CheckFailed(
                f"{what}: {ticket['ticket_id']} gave {outcome}, reference {want}"
            )
    want_archived = {t["ticket_id"] for t, o in zip(tickets, outcomes) if o[1] in ARCHIVED_ACTIONS}
    if archived_ids != want_archived:
        raise common.CheckFailed(
            f"{what}: archive holds {len(archived_ids)} tickets, expected {len(want_archived)}"
        )
    if kept_threads is not None:
        want_kept = {
            graph_config(t)["configurable"]["thread_id"]
            for t, o in zip(tickets, outcomes)
            if o[1] not in ARCHIVED_ACTIONS
        }
        if kept_threads != want_kept:
            raise common.CheckFailed(
                f"{what}: saver keeps {len(kept_threads)} threads, expected {len(want_kept)}"
            )


def archived_ticket_ids(path: str) -> set:
    common.check_wal("archive", path)
    with closing(sqlite3.connect(path)) as conn:
        return {row[0] for row in conn.execute("SELECT ticket_id FROM completed_tickets")}


def saver_threads(saver) -> set | None:
    if saver is None:
        return None
    return {c.config["configurable"]["thread_id"] for c in saver.list(None)}


async def asaver_threads(saver) -> set | None:
    if saver is None:
        return None
    return {c.config["configurable"]["thread_id"] async for c in saver.alist(None)}


# ---------------------------------------------------------------------------
# Phases
# ---------------------------------------------------------------------------


def reference_pass(fx, tickets) -> tuple:
    """Untimed: all tickets through InMemorySaver; the outcomes every timed replay must match."""
    customers, articles, tokens = fx
    stores = common.PhaseStores("w2", "reference", None, need_postgres=False)
    try:
        with common.SyncSaver("memory", stores) as saver:
            graph = build_graph(customers, articles, tokens, saver)
            archive = open_archive(stores.path(ARCHIVE_FILE))
            started = time.perf_counter()
            outcomes = [run_ticket(graph, saver, archive, t) for t in tickets]
            secs = time.perf_counter() - started
            archive.close()
            check_phase(
                "reference pass", tickets, outcomes, {},
                archived_ticket_ids(stores.path(ARCHIVE_FILE)), saver_threads(saver),
            )
    finally:
        stores.close()
    return outcomes, secs


def latency_phase(kind, fx, timed, warmup, expected, postgres_url) -> dict:
    customers, articles, tokens = fx
    stores = common.PhaseStores(
        "w2", f"lat_{kind}", postgres_url, need_postgres=kind == "postgres"
    )
    try:
        with common.SyncSaver(kind, stores) as saver:
            graph = build_graph(customers, articles, tokens, saver)
            archive = open_archive(stores.path(ARCHIVE_FILE))
            warm_outcomes = [run_ticket(graph, saver, archive, t) for t in warmup]
            samples, outcomes = [], []
            for t in timed:
                started = time.perf_counter_ns()
                outcomes.append(run_ticket(graph, saver, archive, t))
                samples.append((time.perf_counter_ns() - started) / 1e6)
            archive.close()
            if kind == "sqlite":
                common.check_wal("SQLite saver", stores.saver_path)
            check_phase(
                f"latency {kind}", list(warmup) + list(timed), warm_outcomes + outcomes,
                expected, archived_ticket_ids(stores.path(ARCHIVE_FILE)), saver_threads(saver),
            )
    finally:
        stores.close()
    samples.sort()
    return {
        "p50": common.percentile(samples, 50),
        "p99": common.percentile(samples, 99),
        "mean": sum(samples) / len(samples),
        "max": samples[-1],
    }


async def drive(graph, saver, archive, tickets, in_flight) -> list:
    """in_flight worker tasks share one queue of tickets, so that many tickets are always open."""
    outcomes = [None] * len(tickets)
    todo = iter(enumerate(tickets))

    async def worker():
        for i, t in todo:
            outcomes[i] = await arun_ticket(graph, saver, archive, t)

    await asyncio.gather(*(worker() for _ in range(in_flight)))
    return outcomes


async def throughput_phase(kind, fx, timed, warmup, expected, postgres_url) -> dict:
    import aiosqlite

    customers, articles, tokens = fx
    stores = common.PhaseStores(
        "w2", f"tput_{kind}", postgres_url, need_postgres=kind == "postgres"
    )
    try:
        async with common.AsyncSaver(kind, stores) as saver:
            graph = build_graph(customers, articles, tokens, saver)
            archive = await aiosqlite.connect(stores.path(ARCHIVE_FILE), isolation_level=None)
            await archive.execute("PRAGMA journal_mode=WAL")
            await archive.execute(ARCHIVE_SCHEMA)
            warm_outcomes = await drive(graph, saver, archive, warmup, common.IN_FLIGHT)
            started = time.perf_counter()
            outcomes = await drive(graph, saver, archive, timed, common.IN_FLIGHT)
            secs = time.perf_counter() - started
            await archive.close()
            if kind == "sqlite":
                common.check_wal("SQLite saver", stores.saver_path)
            check_phase(
                f"throughput {kind}", list(warmup) + list(timed), warm_outcomes + outcomes,
                expected, archived_ticket_ids(stores.path(ARCHIVE_FILE)),
                await asaver_threads(saver),
            )
    finally:
        stores.close()
    return {"tickets_per_s": len(timed) / secs, "secs": secs}


# ---------------------------------------------------------------------------
# Report
# ---------------------------------------------------------------------------


def fmt(x: float) -> str:
    return f"{x:.2f}"


def print_report(machine, savers, latency, throughput, started):
    common.print_report_start("W2", machine)
    print(
        "- Latency: one thread, sync `graph.invoke` + archive insert (own commit) + "
        "`delete_thread`, first timed tickets after 50 warm-up tickets."
    )
    print(
        f"- Throughput: asyncio, one event loop, {common.IN_FLIGHT} tasks each awaiting "
        "`graph.ainvoke` + archive insert (aiosqlite) + `adelete_thread`; savers InMemorySaver, "
        f"AsyncSqliteSaver (one aiosqlite connection), AsyncPostgresSaver over an "
        f"AsyncConnectionPool of {common.PG_POOL_SIZE}."
    )
    print("- Durability: LangGraph's default (`async`); archive: SQLite file, WAL, one commit per ticket.")
    print()

    def cells(kind, lat, tput):
        return [
            SAVER_LABEL[kind],
            fmt(lat["p50"]) if lat else "-",
            fmt(lat["p99"]) if lat else "-",
            fmt(lat["mean"]) if lat else "-",
            f"{tput['tickets_per_s']:.0f}" if tput else "-",
            *REFERENCE[kind],
        ]

    columns = [
        "W2 saver", "p50 ms", "p99 ms", "mean ms", "tickets/s (100 in flight)",
        "bench/WORKLOADS.md p50 (p99) ms", "bench/WORKLOADS.md tickets/s",
    ]
    common.print_table(columns, savers, latency, throughput, cells)
    print()
    common.print_report_end(started)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--tickets", type=int, default=10000)
    ap.add_argument("--timed", type=int, default=2000)
    common.add_common_args(ap, savers="none,memory,sqlite,postgres")
    common.add_json_arg(ap)
    args = ap.parse_args()

    savers, phases = common.savers_and_phases(ap, args, REFERENCE)
    if not 0 < args.timed <= args.tickets:
        ap.error("--timed must be between 1 and --tickets")

    started = time.perf_counter()
    # Taken before the run, so the load average is not our own.
    machine = common.machine_line()
    # The warm-up tickets come after the timed ones, so generate past --tickets if need be.
    n_gen = max(args.tickets, args.timed + common.WARMUP)
    customers, articles, all_tickets = workload.w2_tickets(n_gen)
    tickets = all_tickets[: args.tickets]
    fx = (customers, articles, workload.tokens)
    timed = all_tickets[: args.timed]
    warmup = all_tickets[args.timed : args.timed + common.WARMUP]

    if args.tickets == 10000:
        got = {
            "customers": common.canonical_sha256(customers.values()),
            "articles": common.canonical_sha256(articles),
            "tickets": common.canonical_sha256(tickets),
        }
        if got != EXPECTED_SHA256:
            raise common.CheckFailed(
                f"workload sha256 {got} != bench/WORKLOADS.md {EXPECTED_SHA256}"
            )
        print("workload: sha256 of customers, articles and 10,000 tickets = bench/WORKLOADS.md")

    print(f"reference pass: {len(tickets)} tickets, InMemorySaver, untimed ...", flush=True)
    outcomes, secs = reference_pass(fx, tickets)
    routes = Counter(r for r, _ in outcomes)
    actions = Counter(a for _, a in outcomes)
    first = Counter(a for _, a in outcomes[:2000])
    print(
        f"  {secs:.1f} s; routes "
        + " / ".join(f"{k} {routes[k]}" for k in ROUTE_ORDER)
        + "; actions "
        + " / ".join(f"{k} {actions[k]}" for k in ACTION_ORDER)
        + "; first 2,000: "
        + " / ".join(str(first[k]) for k in ACTION_ORDER)
    )
    if args.tickets == 10000:
        check_counts("routes over 10,000 tickets", routes, EXPECTED_ROUTES)
        check_counts("actions over 10,000 tickets", actions, EXPECTED_ACTIONS)
        print("  counts over 10,000 tickets match bench/WORKLOADS.md")
    if args.tickets >= 2000:
        check_counts("actions over the first 2,000 tickets", first, EXPECTED_ACTIONS_FIRST_2000)
        print("  counts over the first 2,000 tickets match bench/WORKLOADS.md")
    expected = {t["ticket_id"]: o for t, o in zip(tickets, outcomes)}

    latency, throughput = common.run_phases(
        savers,
        phases,
        lambda kind: latency_phase(kind, fx, timed, warmup, expected, args.postgres_url),
        lambda kind: throughput_phase(kind, fx, timed, warmup, expected, args.postgres_url),
        lambda r: (
            f"{len(timed)} tickets, p50 {r['p50']:.3f} ms, p99 {r['p99']:.3f} ms, "
            f"mean {r['mean']:.3f} ms, max {r['max']:.3f} ms"
        ),
        lambda r: f"{len(timed)} tickets in {r['secs']:.2f} s, {r['tickets_per_s']:.0f} tickets/s",
    )
    print("every timed replay reproduced the reference outcome of each ticket")

    print_report(machine, savers, latency, throughput, started)
    common.write_json(
        args.json,
        {
            "workload": "w2",
            "engine": "langgraph",
            "machine": machine,
            "tickets": args.tickets,
            "timed": args.timed,
            "in_flight": common.IN_FLIGHT,
            "durability": "async",
            "latency": latency,
            "throughput": throughput,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(common.exit_code(main))
