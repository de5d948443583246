#!/usr/bin/env bash
# Runs every cargo-fuzz target in fuzz/ for a bounded time and fails on any crash.
#
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]      (default 20)
#        FUZZ_TARGETS="page_token agent_config" scripts/fuzz.sh 60   (a subset)
#        FUZZ_DEV=1 scripts/fuzz.sh 15   (unoptimised targets: about half the build time, fewer
#                                         executions per second; what scripts/test.sh runs)
#
# Idempotent: installs cargo-fuzz (`cargo install cargo-fuzz --locked`) and a nightly toolchain
# (`rustup toolchain install nightly --profile minimal`) only when they are missing, and fails
# with a message when either cannot be had; nothing is skipped silently. Each target's corpus
# lives in fuzz/corpus/<target> (not committed), seeded from fuzz/seeds/<target> and, for the
# configuration targets, from the shipped configuration files. A crash leaves its input in
# fuzz/artifacts/<target>/; reproduce it with
#   cargo +nightly fuzz run <target> fuzz/artifacts/<target>/<file>
# Prints each target's time and executions; exits non-zero if any target crashed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

SECONDS_PER_TARGET="${1:-20}"
case "$SECONDS_PER_TARGET" in
    '' | *[!0-9]* | 0) echo "fuzz.sh: SECONDS_PER_TARGET must be a positive integer, not '$SECONDS_PER_TARGET'" >&2; exit 2 ;;
esac
ALL_TARGETS="request_validation page_token agent_config intake_config server_config"
TARGETS="${FUZZ_TARGETS:-$ALL_TARGETS}"

log() { echo "fuzz.sh: $*" >&2; }
die() { log "error: $*"; exit 1; }

command -v rustup >/dev/null 2>&1 || die "rustup is needed to provide a nightly toolchain (cargo-fuzz needs nightly for -Zsanitizer)"
# The list is read whole before it is searched: `rustup toolchain list | grep -q` under pipefail
# fails whenever grep quits at the first match before rustup has written the rest (SIGPIPE), and
# the install attempted then fails offline.
toolchains="$(rustup toolchain list)" || die "rustup toolchain list failed"
if ! grep -q '^nightly' <<<"$toolchains"; then
    log "no nightly toolchain; installing one (rustup toolchain install nightly --profile minimal)"
    rustup toolchain install nightly --profile minimal >&2 \
        || die "could not install a nightly toolchain; cargo-fuzz cannot build without one"
fi
if ! cargo +nightly fuzz --version >/dev/null 2>&1; then
    log "cargo-fuzz is missing; installing it (cargo install cargo-fuzz --locked)"
    cargo install cargo-fuzz --locked >&2 || die "could not install cargo-fuzz"
    cargo +nightly fuzz --version >/dev/null 2>&1 || die "cargo-fuzz installed but 'cargo +nightly fuzz' does not run"
fi
log "$(cargo +nightly fuzz --version), $(rustc +nightly --version)"

# The server-config target writes each input to a file under the temporary directory; keep those
# in one directory of this run. Its environment must not add settings of its own either.
scratch="$(mktemp -d "${TMPDIR:-/tmp}/frontdesk-fuzz.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
while IFS= read -r var; do unset "$var"; done < <(compgen -e | grep '^FRONTDESK__' || true)
# The server-config target links the server, and with it SQLite's amalgamation (libsqlite3-sys),
# whose function-local static tables of the same name (`aiOff`) ASan's start-up check reports as
# an ODR violation before any input runs. They are distinct statics, not a bug of ours.
export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_odr_violation=0"

build_start=$SECONDS
log "building the targets"
build_profile=release
build_args=()
if [ "${FUZZ_DEV:-0}" = 1 ]; then build_profile=debug; build_args=(--dev); fi
(cd fuzz && nice -n 10 cargo +nightly fuzz build "${build_args[@]}") >&2 || die "building the fuzz targets failed"
build_secs=$((SECONDS - build_start))
# The targets run as built: `cargo fuzz run` would rebuild first whenever a source changed since,
# and the rebuild would count against the target's time.
host="$(rustc +nightly -vV | sed -n 's/^host: //p')"
bindir="$root/fuzz/target/$host/$build_profile"

seed() {
    local target="$1" corpus="fuzz/corpus/$1"
    mkdir -p "$corpus"
    if [ -d "fuzz/seeds/$target" ]; then cp -n "fuzz/seeds/$target"/* "$corpus"/ 2>/dev/null || true; fi
    case "$target" in
        agent_config) cp -n config/service_call/agent_config.json "$corpus/shipped.json" 2>/dev/null || true ;;
        intake_config) cp -n config/intake.toml "$corpus/shipped.toml" 2>/dev/null || true ;;
    esac
}

failed=()
summary=()
total_start=$SECONDS
for target in $TARGETS; do
    seed "$target"
    out="$scratch/$target.log"
    start=$SECONDS
    log "running $target for ${SECONDS_PER_TARGET}s"
    # -timeout: an input that takes 10 s is a hang, reported like a crash.
    status=0
    [ -x "$bindir/$target" ] || die "no fuzz target $target in $bindir (targets: $ALL_TARGETS)"
    mkdir -p "fuzz/artifacts/$target"
    TMPDIR="$scratch" nice -n 10 "$bindir/$target" "fuzz/corpus/$target" \
        -artifact_prefix="fuzz/artifacts/$target/" -max_total_time="$SECONDS_PER_TARGET" -timeout=10 \
        -print_final_stats=1 >"$out" 2>&1 || status=$?
    secs=$((SECONDS - start))
    execs="$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$out" | grep -o '[0-9]*$' | tail -n1 || true)"
    [ -n "$execs" ] || execs="$(grep -o 'Done [0-9]* runs' "$out" | grep -o '[0-9]*' | tail -n1 || true)"
    execs="${execs:-?}"
    corpus_size="$(find "fuzz/corpus/$target" -type f | wc -l)"
    if [ "$status" -eq 0 ]; then
        line="$(printf '%-20s ok     %4ss  %12s execs  corpus %s' "$target" "$secs" "$execs" "$corpus_size")"
    else
        line="$(printf '%-20s FAILED %4ss  %12s execs  (exit %s)' "$target" "$secs" "$execs" "$status")"
        failed+=("$target")
        echo "----- $target (last 60 lines) -----" >&2
        tail -n 60 "$out" >&2
        echo "-----" >&2
    fi
    log "$line"
    summary+=("$line")
done

echo
echo "build: ${build_secs}s; fuzzing: $((SECONDS - total_start))s for ${#summary[@]} targets at ${SECONDS_PER_TARGET}s each"
for line in "${summary[@]}"; do echo "  $line"; done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz.sh: crashes in: ${failed[*]} (inputs under fuzz/artifacts/)" >&2
    exit 1
fi
echo "no crashes"
