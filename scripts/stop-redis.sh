#!/usr/bin/env bash
# Stops the throwaway Redis server started by scripts/ensure-redis.sh. Idempotent.
set -euo pipefail

REDIS_PORT="${FRONTDESK_REDIS_PORT:-56379}"
REDIS_DIR="${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}"

log() { echo "stop-redis: $*" >&2; }

if command -v redis-cli >/dev/null 2>&1 \
    && [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" = "PONG" ]; then
    log "stopping the server on 127.0.0.1:$REDIS_PORT"
    redis-cli -h 127.0.0.1 -p "$REDIS_PORT" shutdown nosave >/dev/null 2>&1 || true
    for _ in $(seq 1 50); do
        [ "$(redis-cli -h 127.0.0.1 -p "$REDIS_PORT" ping 2>/dev/null || true)" = "PONG" ] || break
        sleep 0.1
    done
else
    log "not running"
fi
rm -f "$REDIS_DIR/redis.pid"
