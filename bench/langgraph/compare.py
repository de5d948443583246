"""Frontdesk against LangGraph, same machine, same sitting: the tables of scripts/compare.sh.

Reads the `--json` results the four runs wrote (frontdesk-bench w1 / w2, w1_langgraph.py,
w2_langgraph.py) and prints one table per workload: row, Frontdesk, LangGraph, ratio, target,
met or not. Standard library only.

    python3 bench/langgraph/compare.py --dir DIR
"""
from __future__ import annotations

import argparse
import json
import os
import sys

STORES = [("memory", "in-memory"), ("sqlite", "SQLite (file, WAL)"), ("postgres", "PostgreSQL")]
W1_TURN_TARGET = 30.0
W1_THROUGHPUT_TARGET = 50.0
W1_DISK_TARGET_BYTES = 8000
W2_TICKET_TARGET = 20.0


def load(path: str):
    if not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def load_frontdesk(directory: str, workload: str):
    """The Frontdesk run of `workload`, with the figures of its latency run (one CPU, a process
    of its own) in place of any the main run measured."""
    fd = load(os.path.join(directory, f"frontdesk-{workload}.json"))
    pinned = load(os.path.join(directory, f"frontdesk-{workload}-latency.json"))
    if fd is None or pinned is None:
        return fd if fd is not None else pinned
    fd["latency_cpus_allowed"] = pinned.get("cpus_allowed")
    fd["release"] = fd.get("release") is not False and pinned.get("release") is not False
    for key in ("latency", "disk"):
        if pinned.get(key):
            fd[key] = pinned[key]
    return fd


def cpus_note(fd: dict, what: str) -> str:
    latency = fd.get("latency_cpus_allowed", fd.get("cpus_allowed", "?"))
    return (
        f"- CPUs each side may use: LangGraph 0 (`taskset -c 0`) throughout; Frontdesk {latency} for "
        f"the {what} rows, {fd.get('cpus_allowed', '?')} for the throughput rows."
    )


def ms(value_ms: float) -> str:
    return f"{value_ms:.3f} ms" if value_ms < 1 else f"{value_ms:.2f} ms"


def ratio_cell(r: float) -> str:
    return f"{r:.1f}x"


def met(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


class Table:
    def __init__(self, title: str):
        self.title = title
        self.rows = []

    def add(self, row, frontdesk, langgraph, ratio, target, verdict):
        self.rows.append([row, frontdesk, langgraph, ratio, target, verdict])

    def render(self) -> str:
        out = [f"### {self.title}", "", "| Row | Frontdesk | LangGraph 1.2.22 | Ratio | Target | |"]
        out.append("|---|---:|---:|---:|---|---|")
        out += ["| " + " | ".join(r) + " |" for r in self.rows]
        return "\n".join(out)


def latency_rows(t: Table, fd: dict, lg: dict, row: str, lg_keys: tuple, target: float):
    """One p50 (p99) row per store both sides measured; `lg_keys` names LangGraph's p50 and p99
    (W1 and W2 write them under different names)."""
    lg_p50, lg_p99 = lg_keys
    for key, name in STORES:
        f, g = fd["latency"].get(key), lg["latency"].get(key)
        if not f or not g:
            continue
        f_ms, g_ms = f["p50_us"] / 1000, g[lg_p50]
        r = g_ms / f_ms
        t.add(
            row.format(name=name),
            f"{ms(f_ms)} ({ms(f['p99_us'] / 1000)})",
            f"{ms(g_ms)} ({ms(g[lg_p99])})",
            ratio_cell(r),
            f">= {target:.0f}x",
            met(r >= target),
        )


def lg_durability(lg: dict, store: str) -> set:
    """The durability settings LangGraph's connections to one store reported, in any phase."""
    return {
        r["saver_durability"]
        for d in (lg["latency"], lg["throughput"])
        for k, r in d.items()
        if k == store and r.get("saver_durability")
    }


def w1_table(fd: dict, lg: dict) -> tuple[Table, list[str]]:
    t = Table(f"W1: intake conversation ({fd['conversations']} conversations x 8 turns)")
    notes = []
    latency_rows(
        t, fd, lg, "per turn p50 (p99), {name}, one thread", ("p50_ms", "p99_ms"), W1_TURN_TARGET
    )
    for key, name in STORES[1:]:
        f, g = fd["grpc"].get(key), lg["throughput"].get(key)
        if not f or not g:
            continue
        r = f["turns_per_s"] / g["turns_per_s"]
        t.add(
            f"throughput, {fd['in_flight']} conversations in flight, {name} "
            "(Frontdesk over gRPC, LangGraph asyncio in process)",
            f"{f['turns_per_s']:.0f} turns/s",
            f"{g['turns_per_s']:.0f} turns/s",
            ratio_cell(r),
            f">= {W1_THROUGHPUT_TARGET:.0f}x",
            met(r >= W1_THROUGHPUT_TARGET),
        )
    for key, name in STORES[1:]:
        f, g = fd["disk"].get(key), lg["latency"].get(key)
        if not f or not g:
            continue
        f_b, g_b = f["per_conversation_bytes"], g["storage_per_conversation_bytes"]
        t.add(
            f"on disk per 8-turn conversation, {name}, as written",
            f"{f_b / 1000:.1f} KB",
            f"{g_b / 1000:.1f} KB",
            ratio_cell(g_b / f_b),
            f"Frontdesk <= {W1_DISK_TARGET_BYTES / 1000:.0f} KB",
            met(f_b <= W1_DISK_TARGET_BYTES),
        )
    # Durability as each side's connections reported it.
    lg_sqlite = lg_durability(lg, "sqlite")
    lg_pg = lg_durability(lg, "postgres")
    fd_sqlite = (fd["disk"].get("sqlite") or {}).get("durability")
    fd_pg = (fd["disk"].get("postgres") or {}).get("durability")
    notes.append(
        f"- W1 durability: LangGraph `{lg['durability']}` (a checkpoint committed after every superstep), "
        f"SQLite {', '.join(sorted(lg_sqlite)) or '-'}, PostgreSQL {', '.join(sorted(lg_pg)) or '-'}; "
        f"Frontdesk SQLite {fd_sqlite or '-'}, PostgreSQL {fd_pg or '-'}."
    )
    if lg_sqlite and fd_sqlite and {fd_sqlite} != lg_sqlite:
        notes.append(
            "- The SQLite rows do not use the same synchronous setting on both sides "
            "(`scripts/langgraph.sh w1 --sqlite-synchronous NORMAL` runs LangGraph with Frontdesk's)."
        )
    ref = lg.get("reference")
    if ref:
        notes.append(
            f"- LangGraph wrote {ref['puts_per_turn']:.2f} checkpoints and"
            f" {ref['write_batches_per_turn']:.2f} batches of pending writes per turn; its reference"
            f" pass over {ref['conversations']} conversations gave "
            + " / ".join(f"{k} {ref['teams'].get(k, 0)}" for k in ("team-dba", "team-net", "team-app"))
            + f", rollback_plan unknown in {ref['rollback_unknown']}."
        )
    notes += common_notes(lg, fd["conversations"], "conversations")
    notes.append(cpus_note(fd, "per-turn"))
    return t, notes


def common_notes(lg: dict, items: int, what: str) -> list[str]:
    notes = []
    if items < lg["in_flight"]:
        notes.append(
            f"- Only {items} {what}, fewer than {lg['in_flight']}: the throughput rows had at most"
            f" {items} in flight."
        )
    busy = []
    for key, name in STORES:
        cells = [
            d[key]["other_cpus"]
            for d in (lg["latency"], lg["throughput"])
            if key in d and "other_cpus" in d[key]
        ]
        if cells:
            busy.append(f"{name} " + " / ".join(f"{c:.2f}" for c in cells))
    if busy:
        notes.append(
            "- CPUs the rest of the machine kept busy during LangGraph's latency / throughput phases "
            "(PostgreSQL's server included; well above about 0.3 means another process disturbed the row): "
            + "; ".join(busy)
            + "."
        )
    return notes


def w2_table(fd: dict, lg: dict) -> tuple[Table, list[str]]:
    t = Table(f"W2: ticket triage ({fd['timed']} timed tickets of {fd['tickets']})")
    latency_rows(
        t,
        fd,
        lg,
        "per ticket p50 (p99) incl. archive + delete, {name}, one thread",
        ("p50", "p99"),
        W2_TICKET_TARGET,
    )
    for key, name in STORES:
        f, g = fd["throughput"].get(key), lg["throughput"].get(key)
        if not f or not g:
            continue
        r = f["tickets_per_s"] / g["tickets_per_s"]
        t.add(
            f"throughput, {fd['in_flight']} tickets in flight, {name}, in process",
            f"{f['tickets_per_s']:.0f} tickets/s",
            f"{g['tickets_per_s']:.0f} tickets/s",
            ratio_cell(r),
            "(for information)",
            "",
        )
    notes = [
        f"- W2 durability: LangGraph `{lg['durability']}` (a checkpoint after every step); "
        f"Frontdesk `{fd['durability']}` (the triage workflow's setting)."
    ]
    notes += common_notes(lg, fd["timed"], "tickets")
    notes.append(cpus_note(fd, "per-ticket"))
    return t, notes


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--dir", required=True, help="directory holding {frontdesk,langgraph}-{w1,w2}.json")
    args = ap.parse_args()

    sections = []
    for workload, build in (("w1", w1_table), ("w2", w2_table)):
        fd = load_frontdesk(args.dir, workload)
        lg = load(os.path.join(args.dir, f"langgraph-{workload}.json"))
        if fd is None and lg is None:
            continue
        if fd is None or lg is None:
            missing = "Frontdesk" if fd is None else "LangGraph"
            print(f"compare: {workload}: no {missing} results in {args.dir}", file=sys.stderr)
            return 1
        for side in (fd, lg):
            if side.get("release") is False:
                print(f"compare: {workload}: the Frontdesk side is a debug build", file=sys.stderr)
                return 1
        table, notes = build(fd, lg)
        sections.append(table.render() + "\n\n" + "\n".join(notes))
    if not sections:
        print(f"compare: no results in {args.dir}", file=sys.stderr)
        return 1
    lg_machine = next(
        (m for m in (load(os.path.join(args.dir, f"langgraph-{w}.json")) for w in ("w1", "w2")) if m),
        {},
    ).get("machine")
    print("\n\n".join(sections))
    if lg_machine:
        print(f"\nLangGraph side: {lg_machine}.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
