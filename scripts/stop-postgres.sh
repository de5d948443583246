#!/usr/bin/env bash
# Stops the throwaway PostgreSQL servers started by scripts/ensure-postgres.sh: the cluster in
# $FRONTDESK_PG_DIR/data and any it made on a fallback port ($FRONTDESK_PG_DIR/data-<port>).
# Pass --purge to also delete their data directories. Idempotent: does nothing when none runs.
set -euo pipefail

PG_DIR="${FRONTDESK_PG_DIR:-/tmp/frontdesk-pg}"
DATA="$PG_DIR/data"
PG_USER=postgres

log() { echo "stop-postgres: $*" >&2; }

PURGE=0
for arg in "$@"; do
    case "$arg" in
        --purge) PURGE=1 ;;
        *) log "unknown argument $arg (usage: stop-postgres.sh [--purge])"; exit 2 ;;
    esac
done

PG_CTL=""
for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$d/pg_ctl" ]; then PG_CTL="$d/pg_ctl"; break; fi
done
[ -n "$PG_CTL" ] || PG_CTL="$(command -v pg_ctl || true)"

stopped=0
for data in "$DATA" "$PG_DIR"/data-*; do
    if [ -f "$data/PG_VERSION" ] && [ -n "$PG_CTL" ] && runuser -u "$PG_USER" -- "$PG_CTL" -D "$data" status >/dev/null 2>&1; then
        log "stopping the server in $data"
        runuser -u "$PG_USER" -- "$PG_CTL" -D "$data" -m fast -w -t 60 stop >&2
        stopped=$((stopped + 1))
    fi
done
[ "$stopped" -gt 0 ] || log "not running"

if [ "$PURGE" -eq 1 ] && [ -d "$PG_DIR" ]; then
    log "removing $PG_DIR"
    rm -rf "$PG_DIR"
fi
