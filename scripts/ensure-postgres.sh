#!/usr/bin/env bash
# Ensures a throwaway PostgreSQL server for Frontdesk's tests is running and prints its URL.
#
# Installs Debian's PostgreSQL server packages when no usable server binaries exist, creates a
# cluster under ${FRONTDESK_PG_DIR:-/tmp/frontdesk-pg} owned by the `postgres` user (initdb
# refuses to run as root), starts it on 127.0.0.1:${FRONTDESK_PG_PORT:-55432} with trust auth
# (local test use only), creates the database ${FRONTDESK_PG_DB:-frontdesk_test} and prints
#   postgres://postgres@127.0.0.1:55432/frontdesk_test
# as the last line on stdout. Everything else goes to stderr. Idempotent: when the cluster's
# server is already running it only makes sure the database exists and prints the URL.
#
# A server counts as this cluster's when it answers on the port and reports the cluster's data
# directory, not only when `pg_ctl status` sees its pid: a run in another pid namespace sharing
# /tmp and the network (a CI job beside a developer's shell) cannot see the pid, and must reuse
# the server rather than start a second one on the same data directory.
#
# When the default port is held by something else (another PostgreSQL, or a server that is
# still shutting down after 10 s), the next free port above it gets a cluster of its own in
# $FRONTDESK_PG_DIR/data-<port>; the printed URL names that port. A port set with
# FRONTDESK_PG_PORT is never swapped for another: a held one is an error.
#
# Usage (as root on Debian 12):
#   export FRONTDESK_TEST_POSTGRES_URL="$(scripts/ensure-postgres.sh | tail -n1)"
# Stop it with scripts/stop-postgres.sh.
set -euo pipefail

PG_DIR="${FRONTDESK_PG_DIR:-/tmp/frontdesk-pg}"
PG_PORT="${FRONTDESK_PG_PORT:-55432}"
PG_DB="${FRONTDESK_PG_DB:-frontdesk_test}"
PG_USER=postgres

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

# shellcheck source=lib/loopback-port.sh
. "$(dirname "$0")/lib/loopback-port.sh"

PSQL="$BIN/psql"
[ -x "$PSQL" ] || PSQL="$(command -v psql)" || die "psql not found"
READY="$BIN/pg_isready"
# A port held by something that is not PostgreSQL must not hang a probe.
export PGCONNECT_TIMEOUT=5

# The cluster of a port: the default port keeps the historical data/ so that an existing cluster
# is reused; a fallback port gets its own, since data/ may belong to a server we cannot manage.
data_dir_for() {
    if [ "$1" = "$PG_PORT" ]; then echo "$PG_DIR/data"; else echo "$PG_DIR/data-$1"; fi
}
accepting() { "$READY" -q -h 127.0.0.1 -p "$1" -U "$PG_USER" >/dev/null 2>&1; }
serves_cluster() {
    local port="$1" data="$2" reported
    accepting "$port" || return 1
    reported="$("$PSQL" -w -h 127.0.0.1 -p "$port" -U "$PG_USER" -d postgres -tAc "SHOW data_directory" 2>/dev/null)" \
        || return 1
    [ "$(readlink -f "$reported")" = "$(readlink -f "$data")" ]
}
pg_ctl_sees_running() { [ -f "$1/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$1" status >/dev/null 2>&1; }

start_cluster() {
    local port="$1" data="$2" log_file
    log_file="$PG_DIR/server-$port.log"
    [ "$port" = "$PG_PORT" ] && log_file="$PG_DIR/server.log"
    install -d -o "$PG_USER" -g "$(id -gn "$PG_USER")" -m 0700 "$PG_DIR"
    if [ ! -f "$data/PG_VERSION" ]; then
        log "initialising a cluster in $data"
        rm -rf "$data"
        as_pg "$BIN/initdb" -D "$data" -U "$PG_USER" --auth=trust -E UTF8 --locale=C >"$PG_DIR/initdb.log" 2>&1 \
            || { cat "$PG_DIR/initdb.log" >&2; die "initdb failed"; }
    fi
    log "starting on 127.0.0.1:$port (data $data, log $log_file)"
    # After an unclean stop (a machine restart) the server fsyncs its whole data directory
    # before it accepts connections, which takes minutes on a large one: wait that long.
    as_pg "$BIN/pg_ctl" -D "$data" -l "$log_file" -w -t 300 \
        -o "-c listen_addresses=127.0.0.1 -p $port -c unix_socket_directories='$PG_DIR' -c max_connections=200" \
        start >&2 || { tail -n 30 "$log_file" >&2 || true; die "pg_ctl start failed"; }
}

# The state the postmaster writes on the eighth line of its pid file: starting, ready, stopping.
postmaster_state() { sed -n 8p "$1/postmaster.pid" 2>/dev/null | tr -d ' '; }

# This cluster's server on PORT: one already accepting, or one pg_ctl sees starting (crash
# recovery takes as long as a start may). One that is stopping is not: a smart shutdown lasts
# as long as its last client, so the port is left to choose_port's wait and fallback.
ours() {
    local port="$1" data
    data="$(data_dir_for "$port")"
    serves_cluster "$port" "$data" && return 0
    pg_ctl_sees_running "$data" || return 1
    if [ "$(postmaster_state "$data")" = "stopping" ]; then
        log "the server of $data is shutting down"
        return 1
    fi
    log "the server of $data is running but not accepting on port $port; waiting up to 300 s"
    for _ in $(seq 1 600); do
        if serves_cluster "$port" "$data"; then return 0; fi
        pg_ctl_sees_running "$data" || return 1
        sleep 0.5
    done
    die "the server of $data does not accept connections on port $port; stop it with scripts/stop-postgres.sh"
}

port="$(choose_port "$PG_PORT" FRONTDESK_PG_PORT ours "a process that is not this cluster's server")" \
    || exit 1
data="$(data_dir_for "$port")"
if serves_cluster "$port" "$data"; then
    log "already running on 127.0.0.1:$port (data directory $data)"
else
    start_cluster "$port" "$data"
fi

for _ in $(seq 1 60); do
    if accepting "$port"; then break; fi
    sleep 0.5
done
accepting "$port" || die "server on port $port is not accepting connections"

if [ "$("$PSQL" -h 127.0.0.1 -p "$port" -U "$PG_USER" -d postgres -tAc \
    "SELECT 1 FROM pg_database WHERE datname = '$PG_DB'")" != "1" ]; then
    log "creating database $PG_DB"
    "$PSQL" -h 127.0.0.1 -p "$port" -U "$PG_USER" -d postgres -qc "CREATE DATABASE \"$PG_DB\"" >&2
fi

echo "postgres://${PG_USER}@127.0.0.1:${port}/${PG_DB}"
