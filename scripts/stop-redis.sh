#!/usr/bin/env bash
# Stops the throwaway Redis servers started by scripts/ensure-redis.sh: the one on
# $FRONTDESK_REDIS_PORT and any it started on a fallback port (redis-<port>.pid in
# $FRONTDESK_REDIS_DIR). A Redis on one of those ports that ensure-redis.sh did not start (its
# INFO server process_id is not the pid in the pid file) is left running. Idempotent.
set -euo pipefail

REDIS_PORT="${FRONTDESK_REDIS_PORT:-56379}"
REDIS_DIR="${FRONTDESK_REDIS_DIR:-/tmp/frontdesk-redis}"

log() { echo "stop-redis: $*" >&2; }

# shellcheck source=lib/redis-ours.sh
. "$(dirname "$0")/lib/redis-ours.sh"

ports="$REDIS_PORT"
for pidfile in "$REDIS_DIR"/redis-*.pid; do
    [ -f "$pidfile" ] || continue
    port="${pidfile##*/redis-}"
    ports="$ports ${port%.pid}"
done

stopped=0
if command -v redis-cli >/dev/null 2>&1; then
    for port in $ports; do
        pidfile="$(redis_pidfile_for "$port")"
        if redis_ours "$port"; then
            log "stopping the server on 127.0.0.1:$port"
            redis-cli -h 127.0.0.1 -p "$port" shutdown nosave >/dev/null 2>&1 || true
            for _ in $(seq 1 50); do
                redis_ping "$port" || break
                sleep 0.1
            done
            stopped=$((stopped + 1))
        elif redis_ping "$port"; then
            # Its pid file stays: should INFO have failed for a moment, ensure-redis.sh still
            # recognises its own server next time; a stale one matches no other server's pid.
            log "$(redis_foreign_note "$port"); leaving it alone"
            continue
        fi
        # Nothing of ours answers on the port any more (or never did): its pid file is stale.
        if redis_ours "$port"; then
            log "the server on 127.0.0.1:$port still answers after 5 s; its pid file is kept"
        else
            rm -f "$pidfile"
        fi
    done
fi
[ "$stopped" -gt 0 ] || log "none of its servers was running"
