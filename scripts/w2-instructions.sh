#!/usr/bin/env bash
# Instructions executed per W2 ticket, counted by valgrind's callgrind: a figure that does not
# swing with the load of a shared machine the way wall-clock latency does, for comparing two
# builds of the engine (bench/HISTORY.md, "2026-11-23 20:00").
#
# Runs `frontdesk-bench w2` twice under callgrind, with 1,350 and 700 tickets replayed (reference
# pass + latency phase + warm-up), and prints the difference divided by the 650 extra tickets, so
# start-up and the workload's generation cancel out. Counts every thread of the process (the
# SQLite worker threads too) but nothing the kernel executes.
#
# Usage: scripts/w2-instructions.sh [BENCH_BINARY] [STORE]
#   BENCH_BINARY  defaults to target/release/frontdesk-bench (build it with
#                 `cargo build --release -p frontdesk-bench`)
#   STORE         memory (default) or sqlite
# Needs valgrind (Debian package valgrind). Takes about a minute. Repeat runs of one binary agree
# within about 1 % (thread interleaving and hash seeds vary).
set -euo pipefail

BIN="${1:-target/release/frontdesk-bench}"
STORE="${2:-memory}"
command -v valgrind >/dev/null || { echo "w2-instructions: valgrind is not installed" >&2; exit 1; }
[ -x "$BIN" ] || { echo "w2-instructions: no bench binary at $BIN" >&2; exit 1; }

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

count() {
    valgrind --tool=callgrind --callgrind-out-file=/dev/null "$BIN" w2 --tickets "$1" --timed "$2" \
        --stores "$STORE" --phases latency --out "$out/w2.md" 2>&1 >"$out/stdout" |
        awk '/Collected :/ { print $4 }'
}

big="$(count 1000 300)"
small="$(count 500 150)"
[ -n "$big" ] && [ -n "$small" ] || { echo "w2-instructions: a callgrind run failed" >&2; exit 1; }
echo "$STORE: $(((big - small) / 650)) instructions per ticket ($big and $small in all)"
