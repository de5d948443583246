#!/usr/bin/env bash
# Frontdesk against LangGraph 1.2.22 on this machine, in one sitting: runs W1 and W2 on both
# engines with the same sizes, one run after the other, and prints one table per workload (row,
# Frontdesk, LangGraph, ratio, target, met or not). Everything it runs lives in this repository:
# bench/WORKLOADS.md (the workloads), bench/langgraph/ (the LangGraph side), bench/src/ (the
# Frontdesk side).
#
# Usage:
#   scripts/compare.sh [--conversations 2000] [--tickets 10000] [--timed 2000]
#       [--workloads w1,w2] [--postgres-url URL | --no-postgres] [--out DIR] [--no-build]
#
# --conversations: W1 conversations timed on each side (8 turns each; LangGraph's untimed
# reference pass always replays the 2,000 of bench/WORKLOADS.md first). --tickets / --timed:
# W2's tickets and the timed ones among them. Without --postgres-url, PostgreSQL comes from
# scripts/ensure-postgres.sh; --no-postgres skips its rows. --out: where the logs, the JSON
# results and compare.md go (default target/compare/<UTC time>). --no-build: measure the
# frontdesk-bench binary already in target/release as it is, without `cargo build` first.
#
# Per-turn and per-ticket rows run on one CPU on both sides (`taskset -c 0`), as the workloads'
# reference figures were measured: LangGraph's whole run (scripts/langgraph.sh) and Frontdesk's
# latency phases, each in a process of its own. On this VM a thread woken on the other CPU
# starts about 30 us later than one woken on the same CPU, and a Frontdesk SQLite turn hands
# work to the SQLite driver's thread and back three times. Frontdesk's throughput phases use
# every CPU (the gRPC server and its client). Nothing else should run on the machine meanwhile:
# each run reports how busy the rest of the machine was.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

CONVERSATIONS=2000
TICKETS=10000
TIMED=2000
WORKLOADS=w1,w2
PG_URL=""
USE_PG=1
OUT=""
BUILD=1
while [ $# -gt 0 ]; do
    case "$1" in
        --conversations) CONVERSATIONS="$2"; shift 2 ;;
        --tickets) TICKETS="$2"; shift 2 ;;
        --timed) TIMED="$2"; shift 2 ;;
        --workloads) WORKLOADS="$2"; shift 2 ;;
        --postgres-url) PG_URL="$2"; shift 2 ;;
        --no-postgres) USE_PG=0; shift ;;
        --out) OUT="$2"; shift 2 ;;
        --no-build) BUILD=0; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "compare: unknown option $1" >&2; exit 2 ;;
    esac
done
OUT="${OUT:-$ROOT/target/compare/$(date -u +%Y%m%dT%H%M%SZ)}"
mkdir -p "$OUT"
# Results of an earlier run in the same directory must not end up in this table.
rm -f "$OUT"/settle.log "$OUT"/frontdesk-w1.json "$OUT"/frontdesk-w2.json "$OUT"/langgraph-w1.json "$OUT"/langgraph-w2.json \
    "$OUT"/frontdesk-w1-latency.json "$OUT"/frontdesk-w2-latency.json

log() { echo "compare: $*" >&2; }
want() { case ",$WORKLOADS," in *",$1,"*) return 0 ;; *) return 1 ;; esac; }

PG_ARGS=()
if [ "$USE_PG" = 1 ]; then
    if [ -z "$PG_URL" ]; then
        PG_URL="$(scripts/ensure-postgres.sh | tail -n1)"
    fi
    PG_ARGS=(--postgres-url "$PG_URL")
fi

# Built before anything is timed, so no compiler runs beside a measurement; the runs then call
# the binary `cargo run --release -p frontdesk-bench` would.
BENCH="${CARGO_TARGET_DIR:-$ROOT/target}/release/frontdesk-bench"
if [ "$BUILD" = 1 ]; then
    log "building frontdesk-bench (release)"
    # The bench links the server's crates, llama.cpp among them (cmake, libclang).
    scripts/ensure-build-deps.sh
    cargo build --release -p frontdesk-bench >&2
fi
[ -x "$BENCH" ] || { log "no $BENCH: build it with cargo build --release -p frontdesk-bench"; exit 1; }

# Before each run the disk's dirty pages are written out and PostgreSQL checkpoints, so that no
# run pays for flushing the writes of the run before it (one engine's writes landing in the
# other's timing). A CHECKPOINT that fails (a --postgres-url role without the privilege) is said
# here and in compare.md, not skipped quietly.
SETTLED="sync before each run"
[ "$USE_PG" = 1 ] && SETTLED="$SETTLED, and a PostgreSQL CHECKPOINT"
settle() {
    sync
    if [ "$USE_PG" = 1 ] && ! psql -X -q -v ON_ERROR_STOP=1 "$PG_URL" -c CHECKPOINT > /dev/null 2>> "$OUT/settle.log"; then
        log "warning: CHECKPOINT on PostgreSQL failed before $1 (see $OUT/settle.log)"
        SETTLED="sync before each run; the PostgreSQL CHECKPOINT failed before at least one run (settle.log)"
    fi
}

# Each run's full output goes to its log; the table only reads the JSON files.
run() {
    local name="$1"
    shift
    settle "$name"
    log "$name: $*"
    local started=$SECONDS
    if ! "$@" > "$OUT/$name.log" 2>&1; then
        log "$name failed; the last lines of $OUT/$name.log:"
        tail -n 20 "$OUT/$name.log" >&2
        exit 1
    fi
    log "$name: done in $((SECONDS - started)) s"
}

if want w1; then
    run langgraph-w1 scripts/langgraph.sh w1 --conversations "$CONVERSATIONS" \
        "${PG_ARGS[@]}" --json "$OUT/langgraph-w1.json"
    run frontdesk-w1-latency taskset -c 0 "$BENCH" w1 \
        --conversations "$CONVERSATIONS" --phases latency "${PG_ARGS[@]}" \
        --json "$OUT/frontdesk-w1-latency.json"
    run frontdesk-w1 "$BENCH" w1 \
        --conversations "$CONVERSATIONS" --phases grpc "${PG_ARGS[@]}" \
        --json "$OUT/frontdesk-w1.json"
fi
if want w2; then
    run langgraph-w2 scripts/langgraph.sh w2 --tickets "$TICKETS" --timed "$TIMED" \
        "${PG_ARGS[@]}" --savers memory,sqlite,postgres --json "$OUT/langgraph-w2.json"
    run frontdesk-w2-latency taskset -c 0 "$BENCH" w2 --phases latency \
        --tickets "$TICKETS" --timed "$TIMED" "${PG_ARGS[@]}" --json "$OUT/frontdesk-w2-latency.json"
    run frontdesk-w2 "$BENCH" w2 --phases throughput \
        --tickets "$TICKETS" --timed "$TIMED" "${PG_ARGS[@]}" --json "$OUT/frontdesk-w2.json"
fi

python3 bench/langgraph/compare.py --dir "$OUT" > "$OUT/compare.md"
{
    echo
    echo "Commands (same sitting, $(date -u +%Y-%m-%dT%H:%MZ), nproc $(nproc)):"
    echo "scripts/compare.sh --conversations $CONVERSATIONS --tickets $TICKETS --timed $TIMED --workloads $WORKLOADS$([ "$USE_PG" = 1 ] || echo ' --no-postgres')$([ "$BUILD" = 1 ] || echo ' --no-build')"
    # With --no-build the binary may come from an earlier tree than the one named here.
    echo "frontdesk-bench: $BENCH, built $(date -u -r "$BENCH" +%Y-%m-%dT%H:%MZ)$([ "$BUILD" = 1 ] || echo ', not rebuilt for this run'); the tree at commit $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' with uncommitted changes')"
    echo "Between runs: $SETTLED."
    echo "Logs and JSON: $OUT"
} >> "$OUT/compare.md"
cat "$OUT/compare.md"
