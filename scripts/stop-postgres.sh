#!/usr/bin/env bash
# Stops the throwaway PostgreSQL server started by scripts/ensure-postgres.sh.
# Pass --purge to also delete its data directory. Idempotent: does nothing when it is not running.
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

if [ -f "$DATA/PG_VERSION" ] && [ -n "$PG_CTL" ] && runuser -u "$PG_USER" -- "$PG_CTL" -D "$DATA" status >/dev/null 2>&1; then
    log "stopping the server in $DATA"
    runuser -u "$PG_USER" -- "$PG_CTL" -D "$DATA" -m fast -w -t 60 stop >&2
else
    log "not running"
fi

if [ "$PURGE" -eq 1 ] && [ -d "$PG_DIR" ]; then
    log "removing $PG_DIR"
    rm -rf "$PG_DIR"
fi
