#!/usr/bin/env bash
# Runs the LangGraph implementation of W1 (bench/langgraph/w1_langgraph.py), to measure the
# LangGraph side of W1 on the machine at hand.
#
# Usage (arguments go to the script unchanged; see bench/langgraph/README.md):
#   scripts/langgraph-w1.sh --conversations 2000 \
#       --postgres-url "$(scripts/ensure-postgres.sh | tail -n1)"
# Without --postgres-url the PostgreSQL rows are skipped.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/target/langgraph-venv"
REQS="$ROOT/bench/langgraph/requirements.txt"
# A copy of the requirements the venv was last installed from: pip runs again only when they
# change, so a repeat run starts at once.
STAMP="$VENV/installed-requirements.txt"

# target/ is git-ignored, so the venv never ends up in a commit. The W2 script shares the venv.
if [ ! -x "$VENV/bin/python" ]; then
    echo "langgraph-w1: creating $VENV" >&2
    python3 -m venv "$VENV"
fi
if ! cmp -s "$REQS" "$STAMP"; then
    echo "langgraph-w1: installing $REQS" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQS"
    cp "$REQS" "$STAMP"
fi

# One CPU, as the LangGraph figures of bench/WORKLOADS.md were measured (a single thread pinned
# to one CPU): the latency phase is one thread anyway, and the throughput phase is one asyncio
# event loop. PostgreSQL's server processes are not ours and may use the other CPU.
exec taskset -c 0 "$VENV/bin/python" "$ROOT/bench/langgraph/w1_langgraph.py" "$@"
