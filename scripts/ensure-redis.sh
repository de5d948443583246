#!/usr/bin/env bash
# Ensures a throwaway Redis server for Frontdesk's tests is running and prints its URL.
#
# Installs Debian's redis-server package when redis-server is missing, starts a daemonized
# server on 127.0.0.1:${FRONTDESK_REDIS_PORT:-56379} without persistence (pid and log files in
# ${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}), waits until it answers PING and prints
#   redis://127.0.0.1:56379
# as the last line on stdout. Everything else goes to stderr. Idempotent: when the server is
# already running it only prints the URL.
#
# Usage (as root on Debian 12):
#   export FRONTDESK_TEST_REDIS_URL="$(scripts/ensure-redis.sh | tail -n1)"
# Stop it with scripts/stop-redis.sh.
set -euo pipefail

REDIS_PORT="${FRONTDESK_REDIS_PORT:-56379}"
REDIS_DIR="${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}"
URL="redis://127.0.0.1:${REDIS_PORT}"

log() { echo "ensure-redis: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages)"

if ! command -v redis-server >/dev/null 2>&1 || ! command -v redis-cli >/dev/null 2>&1; then
    log "redis-server not found; installing Debian's redis-server package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends redis-server redis-tools >&2
fi

ping() { [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" = "PONG" ]; }

if ping; then
    log "already running on 127.0.0.1:$REDIS_PORT"
else
    mkdir -p "$REDIS_DIR"
    log "starting on 127.0.0.1:$REDIS_PORT (log $REDIS_DIR/redis.log)"
    redis-server --port "$REDIS_PORT" --bind 127.0.0.1 --daemonize yes \
        --save '' --appendonly no --dir "$REDIS_DIR" \
        --pidfile "$REDIS_DIR/redis.pid" --logfile "$REDIS_DIR/redis.log" >&2
    for _ in $(seq 1 50); do
        if ping; then break; fi
        sleep 0.2
    done
    ping || { tail -n 20 "$REDIS_DIR/redis.log" >&2 || true; die "redis-server did not answer PING on port $REDIS_PORT"; }
fi

echo "$URL"
