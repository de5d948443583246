#!/usr/bin/env bash
# Ensures a throwaway Redis server for Frontdesk's tests is running and prints its URL.
#
# Installs Debian's redis-server package when redis-server is missing, starts a daemonized
# server on 127.0.0.1:${FRONTDESK_REDIS_PORT:-56379} without persistence (pid and log files in
# ${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}), waits until it answers PING and prints
#   redis://127.0.0.1:56379
# as the last line on stdout. Everything else goes to stderr. Idempotent: when the server it
# started already runs on the port it only prints the URL. A server counts as the one it started
# when INFO server's process_id is the pid in its pid file; any other Redis on the port is left
# alone, like a process that does not answer PING (below).
#
# When the default port is held by anything but that server (another Redis, a server still
# shutting down after 10 s, or something else), the next free port above it is used and the
# printed URL names it. A port set with FRONTDESK_REDIS_PORT is never swapped for another: a held
# one is an error.
#
# Usage (as root on Debian 12):
#   export FRONTDESK_TEST_REDIS_URL="$(scripts/ensure-redis.sh | tail -n1)"
# Stop it with scripts/stop-redis.sh.
set -euo pipefail

REDIS_PORT="${FRONTDESK_REDIS_PORT:-56379}"
REDIS_DIR="${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}"

log() { echo "ensure-redis: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages)"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    log "redis-server not found; installing Debian's redis-server package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends redis-server redis-tools >&2
fi

# shellcheck source=lib/loopback-port.sh
. "$(dirname "$0")/lib/loopback-port.sh"
# shellcheck source=lib/redis-ours.sh
. "$(dirname "$0")/lib/redis-ours.sh"
# The default port keeps the historical file names, so stop-redis.sh finds an older server too.
suffix_for() { if [ "$1" = "$REDIS_PORT" ]; then echo ""; else echo "-$1"; fi; }
# Our server on PORT; a foreign Redis there is said so, since "held by a process" alone would
# not tell the user that the Redis they see answering was refused.
ours() {
    redis_ours "$1" && return 0
    if redis_ping "$1"; then log "$(redis_foreign_note "$1"); leaving it alone"; fi
    return 1
}

port="$(choose_port "$REDIS_PORT" FRONTDESK_REDIS_PORT ours "a process that is not this script's Redis server")" \
    || exit 1
if redis_ours "$port"; then
    log "already running on 127.0.0.1:$port"
else
    suffix="$(suffix_for "$port")"
    mkdir -p "$REDIS_DIR"
    log "starting on 127.0.0.1:$port (log $REDIS_DIR/redis$suffix.log)"
    redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
        --save '' --appendonly no --dir "$REDIS_DIR" \
        --pidfile "$REDIS_DIR/redis$suffix.pid" --logfile "$REDIS_DIR/redis$suffix.log" >&2
    for _ in $(seq 1 50); do
        if redis_ours "$port"; then break; fi
        sleep 0.2
    done
    if ! redis_ours "$port"; then
        tail -n 20 "$REDIS_DIR/redis$suffix.log" >&2 || true
        if redis_ping "$port"; then die "$(redis_foreign_note "$port")"; fi
        die "redis-server did not answer PING on port $port"
    fi
fi

echo "redis://127.0.0.1:${port}"
