#!/usr/bin/env bash
# Ensures a throwaway PostgreSQL server for Frontdesk's tests is running and prints its URL.
#
# Installs Debian's PostgreSQL server packages when no usable server binaries exist, creates a
# cluster under ${FRONTDESK_PG_DIR:-/tmp/frontdesk-pg} owned by the `postgres` user (initdb
# refuses to run as root), starts it on 127.0.0.1:${FRONTDESK_PG_PORT:-55432} with trust auth
# (local test use only), creates the database ${FRONTDESK_PG_DB:-frontdesk_test} and prints
#   postgres://postgres@127.0.0.1:55432/frontdesk_test
# as the last line on stdout. Everything else goes to stderr. Idempotent: when the server is
# already running it only makes sure the database exists and prints the URL.
#
# Usage (as root on Debian 12):
#   export FRONTDESK_TEST_POSTGRES_URL="$(scripts/ensure-postgres.sh | tail -n1)"
# Stop it with scripts/stop-postgres.sh.
set -euo pipefail

PG_DIR="${FRONTDESK_PG_DIR:-/tmp/frontdesk-pg}"
PG_PORT="${FRONTDESK_PG_PORT:-55432}"
PG_DB="${FRONTDESK_PG_DB:-frontdesk_test}"
PG_USER=postgres
DATA="$PG_DIR/data"
LOG="$PG_DIR/server.log"
URL="postgres://${PG_USER}@127.0.0.1:${PG_PORT}/${PG_DB}"

log() { echo "ensure-postgres: $*" >&2; }
die() { log "error: $*"; exit 1; }

[ "$(id -u)" -eq 0 ] || die "run as root (it installs packages and switches to the postgres user)"

# A directory holding initdb, pg_ctl and postgres that actually run. Debian keeps server
# binaries under /usr/lib/postgresql/<major>/bin; the newest major wins. Binaries on PATH (for
# example /usr/local/bin symlinks) are only used when they really execute.
find_bindir() {
    local d
    for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
        if [ -x "$d/initdb" ] && [ -x "$d/pg_ctl" ] && [ -x "$d/postgres" ] \
            && "$d/postgres" --version >/dev/null 2>&1 && "$d/pg_ctl" --version >/dev/null 2>&1; then
            echo "$d"
            return 0
        fi
    done
    local ctl
    if ctl="$(command -v pg_ctl 2>/dev/null)"; then
        d="$(dirname "$(readlink -f "$ctl")")"
        if [ -x "$d/initdb" ] && [ -x "$d/postgres" ] && "$d/postgres" --version >/dev/null 2>&1 \
            && "$d/pg_ctl" --version >/dev/null 2>&1; then
            echo "$d"
            return 0
        fi
    fi
    return 1
}

if ! BIN="$(find_bindir)"; then
    log "no usable PostgreSQL server binaries; installing Debian's postgresql package"
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends postgresql >&2
    BIN="$(find_bindir)" || die "postgresql installed but no server binaries found under /usr/lib/postgresql"
fi
log "using server binaries in $BIN ($("$BIN/postgres" --version))"

if ! id -u "$PG_USER" >/dev/null 2>&1; then
    log "creating system user $PG_USER"
    useradd --system --user-group --home-dir /var/lib/postgresql --shell /bin/bash "$PG_USER"
fi

as_pg() { runuser -u "$PG_USER" -- "$@"; }

PSQL="$BIN/psql"
[ -x "$PSQL" ] || PSQL="$(command -v psql)" || die "psql not found"
READY="$BIN/pg_isready"

is_ours_running() { [ -f "$DATA/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1; }

if is_ours_running; then
    log "already running (data directory $DATA)"
else
    install -d -o "$PG_USER" -g "$(id -gn "$PG_USER")" -m 0700 "$PG_DIR"
    if [ ! -f "$DATA/PG_VERSION" ]; then
        log "initialising a cluster in $DATA"
        rm -rf "$DATA"
        as_pg "$BIN/initdb" -D "$DATA" -U "$PG_USER" --auth=trust -E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1 \
            || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
    fi
    if "$READY" -q -h 127.0.0.1 -p "$PG_PORT" >/dev/null 2>&1; then
        die "port $PG_PORT is already served by another PostgreSQL; set FRONTDESK_PG_PORT"
    fi
    log "starting on 127.0.0.1:$PG_PORT (log $LOG)"
    # After an unclean stop (a machine restart) the server fsyncs its whole data directory
    # before it accepts connections, which takes minutes on a large one: wait that long.
    as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 300 \
        -o "-c listen_addresses=127.0.0.1 -p $PG_PORT -c unix_socket_directories='$PG_DIR' -c max_connections=200" \
        start >&2 || { tail -n 30 "$LOG" >&2 || true; die "pg_ctl start failed"; }
fi

for _ in $(seq 1 60); do
    if "$READY" -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" >/dev/null 2>&1; then break; fi
    sleep 0.5
done
"$READY" -q -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" || die "server on port $PG_PORT is not accepting connections"

if [ "$("$PSQL" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != "1" ]; then
    log "creating database $PG_DB"
    "$PSQL" -h 127.0.0.1 -p "$PG_PORT" -U "$PG_USER" -d postgres -qc "CREATE DATABASE \"$PG_DB\"" >&2
fi

echo "$URL"
