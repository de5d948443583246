#!/usr/bin/env bash
# Stops the throwaway Redis servers started by scripts/ensure-redis.sh: the one on
# $FRONTDESK_REDIS_PORT and any it started on a fallback port (redis-<port>.pid in
# $FRONTDESK_REDIS_DIR). Idempotent.
set -euo pipefail

REDIS_PORT="${FRONTDESK_REDIS_PORT:-56379}"
REDIS_DIR="${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}"

log() { echo "stop-redis: $*" >&2; }

ping() { [ "$(timeout 5 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null || true)" = "PONG" ]; }

ports="$REDIS_PORT"
for pidfile in "$REDIS_DIR"/redis-*.pid; do
    [ -f "$pidfile" ] || continue
    port="${pidfile##*/redis-}"
    ports="$ports ${port%.pid}"
done

stopped=0
if command -v redis-cli >/dev/null 2>&1; then
    for port in $ports; do
        ping "$port" || continue
        log "stopping the server on 127.0.0.1:$port"
        redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
        for _ in $(seq 1 50); do
            ping "$port" || break
            sleep 0.1
        done
        stopped=$((stopped + 1))
    done
fi
[ "$stopped" -gt 0 ] || log "not running"
rm -f "$REDIS_DIR"/redis.pid "$REDIS_DIR"/redis-*.pid
