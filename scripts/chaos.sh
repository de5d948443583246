#!/usr/bin/env bash
# Proofs that ship (issue 21): replays workload W1 over gRPC against the real frontdesk-server
# binary while killing it, and checks every acknowledged turn exactly once.
#
#   chaos-kill      one replica on SQLite, SIGKILLed at random and restarted (same port, same
#                   replica id) --kills times, C callers retrying with idempotency keys;
#   chaos-replicas  two replicas on one PostgreSQL database, two clients on the same
#                   conversations, one replica SIGKILLed for good mid-run.
#
# Both print kills, turns, lost, duplicated and the longest wait for a caller, and exit non-zero
# on any lost or duplicated turn or W1 outcome mismatch (keeping the run's server logs).
#
# Usage: scripts/chaos.sh [--short] [--debug]
#   --short  small versions for the test command (20 kills; about 30 s once built).
#   --debug  use the dev profile (what scripts/test.sh already builds) instead of release; the
#            checks are the same, the waits longer.
# Environment: FRONTDESK_TEST_POSTGRES_URL (else scripts/ensure-postgres.sh starts one),
#   CHAOS_KILL_ARGS / CHAOS_REPLICAS_ARGS (extra options for either command).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

short=0
profile=release
for arg in "$@"; do
  case "$arg" in
    --short) short=1 ;;
    --debug) profile=debug ;;
    *) echo "usage: scripts/chaos.sh [--short] [--debug]" >&2; exit 2 ;;
  esac
done

step() { printf '\n==> %s\n' "$*"; }

step "build ($profile): frontdesk-server and frontdesk-bench"
# The server links llama.cpp for its embedded model: cmake and libclang to build it.
scripts/ensure-build-deps.sh
if [ "$profile" = release ]; then
  cargo build --release --locked -p frontdesk-server -p frontdesk-bench
else
  cargo build --locked -p frontdesk-server -p frontdesk-bench
fi
target="${CARGO_TARGET_DIR:-target}/$profile"

step "postgresql"
if [ -z "${FRONTDESK_TEST_POSTGRES_URL:-}" ]; then
  FRONTDESK_TEST_POSTGRES_URL="$(scripts/ensure-postgres.sh | tail -n1)"
fi
export FRONTDESK_TEST_POSTGRES_URL

if [ "$short" = 1 ]; then
  kill_args=(--turns 600 --kills 20 --conversations 4 --uptime-ms 100..800)
  replicas_args=(--turns 320 --conversations 6)
else
  kill_args=(--turns 2000 --kills 100 --conversations 8)
  replicas_args=(--turns 3200 --conversations 16)
fi
# shellcheck disable=SC2206
kill_args+=(${CHAOS_KILL_ARGS:-})
# shellcheck disable=SC2206
replicas_args+=(${CHAOS_REPLICAS_ARGS:-})

run() {
  local name="$1"
  shift
  step "$name $*"
  local began=$SECONDS
  local status=0
  "$target/frontdesk-bench" "$name" "$@" || status=$?
  echo "$name: elapsed $((SECONDS - began)) s, exit status $status"
  return "$status"
}

status=0
run chaos-kill "${kill_args[@]}" || status=1
run chaos-replicas --postgres-url "$FRONTDESK_TEST_POSTGRES_URL" "${replicas_args[@]}" || status=1
if [ "$status" != 0 ]; then
  echo "chaos: FAILED" >&2
  exit 1
fi
echo
echo "chaos: both passed"
