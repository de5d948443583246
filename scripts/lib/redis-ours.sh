# Sourced by scripts/ensure-redis.sh and scripts/stop-redis.sh: whether the Redis answering on a
# loopback port is the one ensure-redis.sh started. Expects REDIS_PORT and REDIS_DIR.

redis_ping() { [ "$(timeout 5 redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null || true)" = "PONG" ]; }

# The pid file of the server on PORT. The default port keeps the historical name (redis.pid), so
# a server an older version started is found too.
redis_pidfile_for() {
    if [ "$1" = "$REDIS_PORT" ]; then echo "$REDIS_DIR/redis.pid"; else echo "$REDIS_DIR/redis-$1.pid"; fi
}

# The pid the server on PORT reports for itself (INFO server's process_id); empty when none answers.
redis_served_pid() {
    { timeout 5 redis-cli -h 127.0.0.1 -p "$1" INFO server 2>/dev/null || true; } \
        | tr -d '\r' | sed -n 's/^process_id://p'
}

# Whether the server on PORT is ours: PING alone would adopt, or stop, any Redis on the port (a
# developer's, another project's). Ours reports the pid that its pid file in REDIS_DIR holds; the
# server writes that file itself, so both pids are in its own pid namespace and the check holds
# for a run in another namespace that shares /tmp and the network.
redis_ours() {
    local want got
    want="$(cat "$(redis_pidfile_for "$1")" 2>/dev/null || true)"
    [ -n "$want" ] || return 1
    got="$(redis_served_pid "$1")"
    [ "$got" = "$want" ]
}

# A line naming the Redis on PORT that is not ours, for the log.
redis_foreign_note() {
    echo "the Redis on 127.0.0.1:$1 is not one scripts/ensure-redis.sh started (its process_id $(redis_served_pid "$1"), $(redis_pidfile_for "$1") holds '$(cat "$(redis_pidfile_for "$1")" 2>/dev/null || true)')"
}
