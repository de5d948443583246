# Sourced by scripts/ensure-postgres.sh and scripts/ensure-redis.sh: which loopback port a
# throwaway test server runs on. Expects the sourcing script's `log`.

# Whether anything listens on PORT, whatever it speaks. The socket table, not a connection: a
# listener that never accepts fills its backlog, and then a connect fails as if nothing were there.
port_in_use() {
    if command -v ss >/dev/null 2>&1; then
        [ -n "$(ss -Hltn "sport = :$1" 2>/dev/null)" ]
    else
        (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
    fi
}

# choose_port FIRST VARIABLE OURS DESCRIPTION
# Prints the first port from FIRST upward where our server already runs (the command OURS
# succeeds given the port) or that nothing holds. FIRST, when held by something else, gets 10 s
# to be released first (a server being stopped keeps its port until its last client goes),
# unless our server already runs on a port above it, which is then printed at once. When
# the environment variable named VARIABLE is set, the caller chose FIRST and only it is tried.
# DESCRIPTION says what a held port holds, for the log. Fails when no port in FIRST..FIRST+50
# will do.
choose_port() {
    local first="$1" variable="$2" ours="$3" holder="$4" port="$1"
    while :; do
        if "$ours" "$port"; then
            echo "$port"
            return 0
        fi
        if [ "$port" = "$first" ] && port_in_use "$port"; then
            # A fallback server an earlier call started is used at once, without the wait.
            if [ -z "${!variable:-}" ]; then
                local above
                for above in $(seq $((first + 1)) $((first + 50))); do
                    if port_in_use "$above" && "$ours" "$above"; then
                        log "port $first is held by $holder; ours already runs on port $above"
                        echo "$above"
                        return 0
                    fi
                done
            fi
            log "port $port is held by $holder; waiting up to 10 s for it to be released"
            # Only the port is probed here: a protocol probe of a listener that never answers
            # waits out its whole timeout.
            for _ in $(seq 1 20); do
                if ! port_in_use "$port"; then break; fi
                sleep 0.5
            done
        fi
        if ! port_in_use "$port"; then
            echo "$port"
            return 0
        fi
        if [ -n "${!variable:-}" ]; then
            log "error: port $port ($variable) is held by $holder; free it or choose another port"
            return 1
        fi
        if [ "$port" -ge $((first + 50)) ]; then
            log "error: ports $first to $port are all held by other processes; set $variable"
            return 1
        fi
        log "port $port is held by $holder; trying port $((port + 1))"
        port=$((port + 1))
    done
}
