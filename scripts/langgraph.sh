#!/usr/bin/env bash
# Runs the LangGraph implementation of W1 or W2 (bench/langgraph/w1_langgraph.py,
# w2_langgraph.py), to measure the LangGraph side of the workload on the machine at hand.
#
# Usage (the arguments after the workload go to the script unchanged; see
# bench/langgraph/README.md, or `scripts/langgraph.sh w1 --help`):
#   scripts/langgraph.sh w1 --conversations 2000 \
#       --postgres-url "$(scripts/ensure-postgres.sh | tail -n1)"
#   scripts/langgraph.sh w2 --tickets 10000 --timed 2000 \
#       --postgres-url "$(scripts/ensure-postgres.sh | tail -n1)"
# Without --postgres-url the PostgreSQL rows are skipped.
set -euo pipefail

case "${1:-}" in
    w1|w2) WORKLOAD="$1"; shift ;;
    *) echo "usage: scripts/langgraph.sh w1|w2 [options of bench/langgraph/<workload>_langgraph.py]" >&2; exit 2 ;;
esac

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/target/langgraph-venv"
REQS="$ROOT/bench/langgraph/requirements.txt"
# A copy of the requirements the venv was last installed from: pip runs again only when they
# change, so a repeat run starts at once.
STAMP="$VENV/installed-requirements.txt"

# target/ is git-ignored, so the venv never ends up in a commit. W1 and W2 share it.
if [ ! -x "$VENV/bin/python" ]; then
    echo "langgraph-$WORKLOAD: creating $VENV" >&2
    python3 -m venv "$VENV"
fi
if ! cmp -s "$REQS" "$STAMP"; then
    echo "langgraph-$WORKLOAD: installing $REQS" >&2
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$REQS"
    cp "$REQS" "$STAMP"
fi

# One CPU, as the LangGraph figures of bench/WORKLOADS.md were measured (a single thread pinned
# to one CPU). Both phases run pinned: the latency phase is one thread anyway, and the throughput
# phase is one asyncio event loop, so pinning keeps the two comparable with the published rows.
# PostgreSQL's server processes are not ours and may use the other CPU, as they could there.
exec taskset -c 0 "$VENV/bin/python" "$ROOT/bench/langgraph/${WORKLOAD}_langgraph.py" "$@"
