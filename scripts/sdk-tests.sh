#!/usr/bin/env bash
# Client SDK checks: code generation, the contract, and the Python, TypeScript and Go SDKs
# against one live frontdesk-server.
#
#   scripts/sdk-tests.sh
#
# 1. installs the tools (scripts/sdk-ensure-tools.sh: a venv, npm ci, go install; all from
#    package registries, all inside the work tree) and builds frontdesk-server (cargo);
# 2. starts ONE server on a free loopback port with a temporary SQLite database, the scripted
#    demo model (tests/fixtures/demo-script.json) and the LLM call log on (model.call_log =
#    "redacted", for the live ListLlmCalls tests), and waits for grpc.health.v1;
# 3. runs the suites: codegen drift (regenerate into a temp dir, compare with the checked-in
#    code), buf lint, buf breaking (against proto/baseline/frontdesk-v1.binpb), the packed
#    TypeScript package under a strict consumer tsconfig, each SDK's tests (live ones, and unit
#    tests of retries and re-attaching against in-process fake servers) and example program, and
#    grpcurl against server reflection;
# 4. starts a SECOND server that requires API keys (auth.mode = "keys"), creates a key with
#    `frontdesk-server keys create`, and runs grpcurl (-H "authorization: Bearer ..."), each SDK's
#    chat example and the `frontdesk` CLI with it, and checks that calls without it are refused
#    (UNAUTHENTICATED); skipped, with a note, when the server binary has no `keys` command;
# 5. starts a THIRD server serving mutual TLS with the test certificates of client/testdata/tls,
#    and runs grpcurl, each SDK's live TLS test and the CLI against it (and checks that clients
#    without a certificate, or in plaintext, are refused);
# 6. stops the servers (also on failure or interrupt) and prints `sdk: N passed, M failed`,
#    counting suites. Exits non-zero when a suite failed or the setup did.
#
# Environment: SDK_TESTS_KEEP_TMP=1 keeps the temp dir (server log, database, generated code);
# SDK_TESTS_SERVER_BIN=PATH uses that frontdesk-server binary instead of building one (the keyed
# suites run the `frontdesk` CLI found beside it, when there is one).
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"
export NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false npm_config_fund=false

TMP="$(mktemp -d "${TMPDIR:-/tmp}/sdk-tests.XXXXXX")"
SERVER_PID=""
KEYED_PID=""
TLS_PID=""
SKIPPED=()
PASSED=0
FAILED=0
FAILED_NAMES=()

BUF="$ROOT/client/typescript/node_modules/.bin/buf"
GRPCURL="$ROOT/client/go/.bin/grpcurl"
PY="$ROOT/client/python/.venv/bin/python"

# stop_server PID: SIGTERM, then SIGKILL after 5 s.
stop_server() {
  local pid="$1"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null; then
    kill "$pid" 2>/dev/null
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  fi
}

cleanup() {
  stop_server "$SERVER_PID"
  stop_server "$KEYED_PID"
  stop_server "$TLS_PID"
  if [[ "${SDK_TESTS_KEEP_TMP:-0}" == "1" ]]; then
    echo "sdk: kept $TMP"
  else
    rm -rf "$TMP"
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

say() { printf '\n=== %s\n' "$*"; }
die() {
  echo "sdk: setup failed: $*" >&2
  echo "sdk: $PASSED passed, $((FAILED + 1)) failed"
  exit 1
}

# suite NAME COMMAND...: runs one suite, counting it as passed or failed.
suite() {
  local name="$1"; shift
  say "$name"
  local start=$SECONDS
  if "$@"; then
    PASSED=$((PASSED + 1))
    echo "--- PASS $name ($((SECONDS - start))s)"
  else
    FAILED=$((FAILED + 1))
    FAILED_NAMES+=("$name")
    echo "--- FAIL $name ($((SECONDS - start))s)"
  fi
}

# ---------------------------------------------------------------------------------------------
# Setup: tools and server binary
say "setup: tools (scripts/sdk-ensure-tools.sh)"
"$ROOT/scripts/sdk-ensure-tools.sh" || die "installing the SDK tools failed"

if [[ -n "${SDK_TESTS_SERVER_BIN:-}" ]]; then
  SERVER_BIN="$SDK_TESTS_SERVER_BIN"
  say "setup: using prebuilt server $SERVER_BIN (SDK_TESTS_SERVER_BIN)"
else
  # --workspace: the same feature set as `cargo test --workspace`, so its artifacts are reused.
  say "setup: cargo build --workspace --bins"
  cargo build --workspace --bins --locked || die "cargo build of frontdesk-server failed"
  SERVER_BIN="${CARGO_TARGET_DIR:-$ROOT/target}/debug/frontdesk-server"
fi
[[ -x "$SERVER_BIN" ]] || die "no server binary at $SERVER_BIN"

# ---------------------------------------------------------------------------------------------
# Static suites: they need no server
check_drift() {
  local out="$TMP/gen"
  "$BUF" generate --template proto/buf.gen.yaml -o "$out" || return 1
  local rc=0 unexpected
  unexpected="$(cd "$out" && find . -type f | grep -v -E '^\./(client/python/src/frontdesk/v1|client/typescript/src/gen|client/go/frontdeskv1)/' || true)"
  if [[ -n "$unexpected" ]]; then
    echo "generation wrote outside the known generated dirs:"; echo "$unexpected"; rc=1
  fi
  # Python's generated dir also holds a hand-written __init__.py.
  diff -r -x __init__.py -x __pycache__ client/python/src/frontdesk/v1 "$out/client/python/src/frontdesk/v1" || rc=1
  diff -r client/typescript/src/gen "$out/client/typescript/src/gen" || rc=1
  diff -r client/go/frontdeskv1 "$out/client/go/frontdeskv1" || rc=1
  if [[ $rc -ne 0 ]]; then
    echo "checked-in generated code differs from proto/: run scripts/sdk-generate.sh and commit"
  else
    echo "generated code is up to date ($(cd "$out" && find . -type f | wc -l) files)"
  fi
  return $rc
}
suite "codegen-drift" check_drift
suite "buf-lint" "$BUF" lint proto
suite "buf-breaking" "$BUF" breaking proto --against proto/baseline/frontdesk-v1.binpb
# npm pack of @frontdesk/client, installed in a scratch project, compiled under a strict user
# tsconfig (skipLibCheck false, lib ES2022) and run.
suite "typescript-package" bash client/typescript/scripts/check-package.sh

# ---------------------------------------------------------------------------------------------
# The server
free_port() {
  "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

TLS_DIR="$ROOT/client/testdata/tls"

# healthy ADDR [tls]: grpc.health.v1 answers SERVING (over mutual TLS with the certificates of
# $TLS_DIR when "tls" is given). Called by its path, without reflection, which a server that
# requires keys refuses without one (Health itself is open).
healthy() {
  "$PY" - "$1" "${2:-}" "$TLS_DIR" <<'PYEOF' 2>/dev/null
import pathlib, sys, grpc
addr, tls, tls_dir = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
if tls:
    credentials = grpc.ssl_channel_credentials(
        (tls_dir / "ca.pem").read_bytes(), (tls_dir / "client.key").read_bytes(),
        (tls_dir / "client.pem").read_bytes())
    channel = grpc.secure_channel(addr, credentials)
else:
    channel = grpc.insecure_channel(addr)
check = channel.unary_unary(
    "/grpc.health.v1.Health/Check", request_serializer=lambda _: b"", response_deserializer=bytes)
sys.exit(0 if check(None, timeout=2) == b"\x08\x01" else 1)  # HealthCheckResponse{SERVING}
PYEOF
}

# start_server NAME ADDR DB [ENV=VALUE...]: starts frontdesk-server with the scripted demo model
# in the background (log in $TMP/NAME.log; its pid in STARTED_PID) and waits until it is
# healthy (over TLS when the environment sets FRONTDESK__TLS__CERT_FILE). Returns non-zero when
# it does not become healthy.
start_server() {
  local name="$1" addr="$2" db="$3"; shift 3
  local tls="" var
  for var in "$@"; do [[ "$var" == FRONTDESK__TLS__CERT_FILE=* ]] && tls=tls; done
  env "$@" "$SERVER_BIN" --listen "$addr" --database-url "sqlite://$db" \
    --model-provider scripted --model-script "$ROOT/tests/fixtures/demo-script.json" \
    --log-format text >"$TMP/$name.log" 2>&1 &
  STARTED_PID=$!
  for _ in $(seq 150); do
    if ! kill -0 "$STARTED_PID" 2>/dev/null; then break; fi
    if healthy "$addr" "$tls"; then return 0; fi
    sleep 0.2
  done
  tail -n 40 "$TMP/$name.log" >&2
  return 1
}

ADDR="127.0.0.1:$(free_port)"
say "setup: starting frontdesk-server on $ADDR"
STARTED_PID=""
# The call log on (redacted: no prompt text kept), for the live tests of ListLlmCalls.
start_server server "$ADDR" "$TMP/sdk-test.db" FRONTDESK__MODEL__CALL_LOG=redacted; started=$?
SERVER_PID="$STARTED_PID"
[[ $started -eq 0 ]] || die "frontdesk-server did not become healthy on $ADDR"
echo "server healthy (pid $SERVER_PID)"
export FRONTDESK_ADDR="$ADDR" FRONTDESK_REQUIRE_SERVER=1

# example_ok LOGFILE: the example printed node events and the scripted reply.
example_ok() {
  local log="$1"
  cat "$log"
  grep -q "supervisor" "$log" && grep -q "chat_agent" "$log" \
    && grep -q "Hello from the scripted demo model" "$log" \
    || { echo "example output lacks node events or the reply"; return 1; }
}

# triage_example_ok LOGFILE: the triage example printed the ticket, the nodes, the customer
# lookup and the auto-response (the scripted model answers the triage purposes).
triage_example_ok() {
  local log="$1"
  cat "$log"
  grep -q "ticket TKT-" "$log" && grep -q "billing_specialist" "$log" \
    && grep -q "customer_lookup" "$log" && grep -q "AUTO_RESPOND -> .*RESOLVED" "$log" \
    || { echo "triage example output lacks the ticket, node events or the result"; return 1; }
}

# investigation_example_ok LOGFILE: the investigation example printed the changer's and the
# manager's pending actions, each status the investigation waited in, the report and the trail
# (the scripted model answers the investigation purposes; the claim it extracts holds).
investigation_example_ok() {
  local log="$1"
  cat "$log"
  grep -q "investigation INV-.* -> AWAITING_USER_RESPONSE" "$log" \
    && grep -q "pending action INV-.*-changer for u003 (CHANGER)" "$log" \
    && grep -q "investigation INV-.* -> AWAITING_MANAGER_RESPONSE" "$log" \
    && grep -q "pending action INV-.*-manager for u001 (MANAGER)" "$log" \
    && grep -q "investigation INV-.* -> ADVISORY_REPORT_GENERATED" "$log" \
    && grep -q "report RPT-.*: ACCEPT" "$log" && grep -q "audit trail ([1-9][0-9]* entries)" "$log" \
    || { echo "investigation example output lacks the pending actions, the statuses, the report or the trail"; return 1; }
}

# research_example_ok LOGFILE: the research example printed the plan, both research results with
# their citations, every critic's decision as it came, then the outcome, the final answer and the
# reasoning trace (the scripted model answers the research purposes; every critic approves).
research_example_ok() {
  local log="$1"
  cat "$log"
  grep -q "plan (attempt 1):" "$log" \
    && grep -q "research 0: Find who invented CRISPR gene editing" "$log" \
    && grep -q "result \[step 0\] Find who invented CRISPR gene editing" "$log" \
    && grep -q "result \[step 1\] Find when the transistor was invented" "$log" \
    && grep -q "^  \[crispr#0\] " "$log" \
    && grep -q "critic_planner: APPROVE (retry 0) Looks complete." "$log" \
    && grep -q "critic_researcher: APPROVE" "$log" && grep -q "critic_expert: APPROVE" "$log" \
    && grep -q "research RES-.* -> ANSWERED" "$log" \
    && grep -q "final answer: Scripted demo" "$log" && grep -q "reasoning trace: Scripted demo" "$log" \
    || { echo "research example output lacks the plan, the results, the critic decisions or the answer"; return 1; }
}

# service_call_example_ok LOGFILE: the service-call example started a call and printed its state:
# the current node, the missing mandatory fields, the context, the token counts. It runs with
# `--turns 0`: the scripted demo model cannot run a turn of the shipped flow, since after every
# node with branching conditions (the greeting included) the navigator must name one of that
# node's children, which no standing answer can do for every node (the first turn fails with
# INTERNAL, "node navigator failed"). A real model drives the whole call.
service_call_example_ok() {
  local log="$1"
  cat "$log"
  grep -q "^conversation conv-" "$log" && grep -q "^agent (welcome): " "$log" \
    && grep -q "^current node: GREET_CUSTOMER$" "$log" \
    && grep -q "^missing mandatory fields: customers_main_ask, customer_phone_number$" "$log" \
    && grep -q '^  "agent_session_id": "[0-9a-f-]\{36\}",$' "$log" \
    && grep -q "^model calls: 0, tokens: 0 prompt + 0 completion$" "$log" \
    && grep -q "^call ended: no$" "$log" && grep -q "^stopped after 0 turn(s)" "$log" \
    || { echo "service_call example output lacks the call, its state, context or token counts"; return 1; }
}

# ---------------------------------------------------------------------------------------------
# Python
suite "python-tests" "$PY" -m pytest -q -p no:cacheprovider client/python/tests
python_example() {
  "$PY" client/python/examples/chat.py "$ADDR" >"$TMP/py-example.log" 2>&1 || { cat "$TMP/py-example.log"; return 1; }
  example_ok "$TMP/py-example.log"
}
suite "python-example" python_example
python_triage_example() {
  "$PY" client/python/examples/triage.py "$ADDR" >"$TMP/py-triage.log" 2>&1 || { cat "$TMP/py-triage.log"; return 1; }
  triage_example_ok "$TMP/py-triage.log"
}
suite "python-triage-example" python_triage_example
python_investigation_example() {
  "$PY" client/python/examples/investigation.py "$ADDR" >"$TMP/py-investigation.log" 2>&1 || { cat "$TMP/py-investigation.log"; return 1; }
  investigation_example_ok "$TMP/py-investigation.log"
}
suite "python-investigation-example" python_investigation_example
python_research_example() {
  "$PY" client/python/examples/research.py "$ADDR" >"$TMP/py-research.log" 2>&1 || { cat "$TMP/py-research.log"; return 1; }
  research_example_ok "$TMP/py-research.log"
}
suite "python-research-example" python_research_example
python_service_call_example() {
  "$PY" client/python/examples/service_call.py "$ADDR" --turns 0 >"$TMP/py-service-call.log" 2>&1 || { cat "$TMP/py-service-call.log"; return 1; }
  service_call_example_ok "$TMP/py-service-call.log"
}
suite "python-service-call-example" python_service_call_example

# ---------------------------------------------------------------------------------------------
# TypeScript
suite "typescript-tests" bash -c 'cd client/typescript && npm test --silent'
typescript_example() {
  (cd client/typescript && node build/examples/chat.js "$ADDR") >"$TMP/ts-example.log" 2>&1 || { cat "$TMP/ts-example.log"; return 1; }
  example_ok "$TMP/ts-example.log"
}
suite "typescript-example" typescript_example
typescript_triage_example() {
  (cd client/typescript && node build/examples/triage.js "$ADDR") >"$TMP/ts-triage.log" 2>&1 || { cat "$TMP/ts-triage.log"; return 1; }
  triage_example_ok "$TMP/ts-triage.log"
}
suite "typescript-triage-example" typescript_triage_example
typescript_investigation_example() {
  (cd client/typescript && node build/examples/investigation.js "$ADDR") >"$TMP/ts-investigation.log" 2>&1 || { cat "$TMP/ts-investigation.log"; return 1; }
  investigation_example_ok "$TMP/ts-investigation.log"
}
suite "typescript-investigation-example" typescript_investigation_example
typescript_research_example() {
  (cd client/typescript && node build/examples/research.js "$ADDR") >"$TMP/ts-research.log" 2>&1 || { cat "$TMP/ts-research.log"; return 1; }
  research_example_ok "$TMP/ts-research.log"
}
suite "typescript-research-example" typescript_research_example
typescript_service_call_example() {
  (cd client/typescript && node build/examples/service_call.js "$ADDR" --turns 0) >"$TMP/ts-service-call.log" 2>&1 || { cat "$TMP/ts-service-call.log"; return 1; }
  service_call_example_ok "$TMP/ts-service-call.log"
}
suite "typescript-service-call-example" typescript_service_call_example

# ---------------------------------------------------------------------------------------------
# Go
suite "go-tests" bash -c 'cd client/go && go vet ./... && go test -count=1 ./...'
go_example() {
  (cd client/go && go run ./examples/chat -addr "$ADDR") >"$TMP/go-example.log" 2>&1 || { cat "$TMP/go-example.log"; return 1; }
  example_ok "$TMP/go-example.log"
}
suite "go-example" go_example
go_triage_example() {
  (cd client/go && go run ./examples/triage -addr "$ADDR") >"$TMP/go-triage.log" 2>&1 || { cat "$TMP/go-triage.log"; return 1; }
  triage_example_ok "$TMP/go-triage.log"
}
suite "go-triage-example" go_triage_example
go_investigation_example() {
  (cd client/go && go run ./examples/investigation -addr "$ADDR") >"$TMP/go-investigation.log" 2>&1 || { cat "$TMP/go-investigation.log"; return 1; }
  investigation_example_ok "$TMP/go-investigation.log"
}
suite "go-investigation-example" go_investigation_example
go_research_example() {
  (cd client/go && go run ./examples/research -addr "$ADDR") >"$TMP/go-research.log" 2>&1 || { cat "$TMP/go-research.log"; return 1; }
  research_example_ok "$TMP/go-research.log"
}
suite "go-research-example" go_research_example
go_service_call_example() {
  (cd client/go && go run ./examples/service_call -addr "$ADDR" -turns 0) >"$TMP/go-service-call.log" 2>&1 || { cat "$TMP/go-service-call.log"; return 1; }
  service_call_example_ok "$TMP/go-service-call.log"
}
suite "go-service-call-example" go_service_call_example

# ---------------------------------------------------------------------------------------------
# grpcurl, by server reflection alone: run from an empty dir with no proto files around
grpcurl_checks() {
  local dir="$TMP/grpcurl" rc=0
  mkdir -p "$dir"
  (
    cd "$dir" || exit 1
    set -e
    "$GRPCURL" -plaintext "$ADDR" list | tee list.txt
    for svc in frontdesk.v1.ConversationService frontdesk.v1.WorkflowService frontdesk.v1.InvestigationService \
               frontdesk.v1.ResearchService grpc.health.v1.Health; do
      grep -qx "$svc" list.txt || { echo "list lacks $svc"; exit 1; }
    done
    for svc in frontdesk.v1.ConversationService frontdesk.v1.WorkflowService grpc.health.v1.Health; do
      "$GRPCURL" -plaintext "$ADDR" describe "$svc" > "describe-$svc.txt"
      grep -q "service ${svc##*.} {" "describe-$svc.txt" || { cat "describe-$svc.txt"; echo "describe $svc failed"; exit 1; }
      echo "describe $svc: $(grep -c 'rpc ' "describe-$svc.txt") rpcs"
    done
    # grep reads it all (no -q): quitting at the match could SIGPIPE grpcurl and, under pipefail, fail.
    "$GRPCURL" -plaintext "$ADDR" describe frontdesk.v1.SendMessageResponse | grep "oneof payload" >/dev/null
    "$GRPCURL" -plaintext -d '{"workflow": "intake"}' "$ADDR" \
      frontdesk.v1.ConversationService/StartConversation > start.json
    id="$("$PY" -c 'import json,sys; print(json.load(open(sys.argv[1]))["conversation"]["conversationId"])' start.json)"
    echo "StartConversation -> $id"
    "$GRPCURL" -plaintext -d "{\"conversationId\": \"$id\", \"text\": \"Hello from grpcurl\"}" "$ADDR" \
      frontdesk.v1.ConversationService/SendMessage > send.json
    for want in '"nodeStarted"' '"runFinished"' '"result"' '"node": "supervisor"' '"node": "chat_agent"'; do
      grep -q "$want" send.json || { cat send.json; echo "SendMessage output lacks $want"; exit 1; }
    done
    echo "SendMessage streamed $(grep -c '"eventId"' send.json) events and a result"
  ) || rc=1
  return $rc
}
suite "grpcurl-reflection" grpcurl_checks

# ---------------------------------------------------------------------------------------------
# API keys: a second server with auth.mode = "keys" (on loopback, where "auto" would need none)
CLI_BIN="$(dirname "$SERVER_BIN")/frontdesk"
KEYED_ADDR=""
FRONTDESK_TEST_KEY=""

# refused LOGFILE: the call without a key was refused as UNAUTHENTICATED.
refused() {
  grep -q -i "unauthenticated" "$1" || { cat "$1"; echo "a call without a key was not refused as UNAUTHENTICATED"; return 1; }
}

keys_grpcurl() {
  local dir="$TMP/grpcurl-keys" auth="authorization: Bearer $FRONTDESK_TEST_KEY"
  mkdir -p "$dir"
  # (set -e would not apply here: the function runs as the condition of `if` in suite.)
  if "$GRPCURL" -plaintext -d '{"workflow": "intake"}' "$KEYED_ADDR" \
      frontdesk.v1.ConversationService/StartConversation >"$dir/anonymous.txt" 2>&1; then
    cat "$dir/anonymous.txt"; echo "StartConversation without a key succeeded"; return 1
  fi
  refused "$dir/anonymous.txt" || return 1
  # -H goes with the reflection requests too (reflection is not an open service by default).
  "$GRPCURL" -plaintext -H "$auth" "$KEYED_ADDR" list >"$dir/list.txt" 2>&1 || { cat "$dir/list.txt"; return 1; }
  cat "$dir/list.txt"
  grep -qx frontdesk.v1.ConversationService "$dir/list.txt" || { echo "list lacks ConversationService"; return 1; }
  "$GRPCURL" -plaintext -H "$auth" -d '{"workflow": "intake"}' "$KEYED_ADDR" \
    frontdesk.v1.ConversationService/StartConversation >"$dir/start.json" 2>&1 || { cat "$dir/start.json"; return 1; }
  grep -q '"conversationId"' "$dir/start.json" || { cat "$dir/start.json"; return 1; }
  echo "StartConversation with the key -> $(grep -o '"conversationId": "[^"]*"' "$dir/start.json" | head -n1)"
}

keys_python_example() {
  ! "$PY" client/python/examples/chat.py "$KEYED_ADDR" >"$TMP/py-anonymous.log" 2>&1 || { cat "$TMP/py-anonymous.log"; return 1; }
  refused "$TMP/py-anonymous.log" || return 1
  FRONTDESK_KEY="$FRONTDESK_TEST_KEY" "$PY" client/python/examples/chat.py "$KEYED_ADDR" >"$TMP/py-keys.log" 2>&1 \
    || { cat "$TMP/py-keys.log"; return 1; }
  example_ok "$TMP/py-keys.log"
}

keys_typescript_example() {
  ! (cd client/typescript && node build/examples/chat.js "$KEYED_ADDR") >"$TMP/ts-anonymous.log" 2>&1 \
    || { cat "$TMP/ts-anonymous.log"; return 1; }
  refused "$TMP/ts-anonymous.log" || return 1
  (cd client/typescript && FRONTDESK_KEY="$FRONTDESK_TEST_KEY" node build/examples/chat.js "$KEYED_ADDR") \
    >"$TMP/ts-keys.log" 2>&1 || { cat "$TMP/ts-keys.log"; return 1; }
  example_ok "$TMP/ts-keys.log"
}

keys_go_example() {
  ! (cd client/go && go run ./examples/chat -addr "$KEYED_ADDR") >"$TMP/go-anonymous.log" 2>&1 \
    || { cat "$TMP/go-anonymous.log"; return 1; }
  refused "$TMP/go-anonymous.log" || return 1
  (cd client/go && FRONTDESK_KEY="$FRONTDESK_TEST_KEY" go run ./examples/chat -addr "$KEYED_ADDR") \
    >"$TMP/go-keys.log" 2>&1 || { cat "$TMP/go-keys.log"; return 1; }
  example_ok "$TMP/go-keys.log"
}

keys_rust_cli() {
  ! "$CLI_BIN" --server "http://$KEYED_ADDR" workflows >"$TMP/cli-anonymous.log" 2>&1 \
    || { cat "$TMP/cli-anonymous.log"; return 1; }
  refused "$TMP/cli-anonymous.log" || return 1
  FRONTDESK_KEY="$FRONTDESK_TEST_KEY" "$CLI_BIN" --server "http://$KEYED_ADDR" workflows >"$TMP/cli-keys.log" 2>&1 \
    || { cat "$TMP/cli-keys.log"; return 1; }
  cat "$TMP/cli-keys.log"
  grep -q "intake" "$TMP/cli-keys.log" || { echo "the CLI listed no workflows"; return 1; }
}

if ! "$SERVER_BIN" keys --help >/dev/null 2>&1; then
  SKIPPED+=("keys-* (this frontdesk-server has no \`keys\` command to create an API key with)")
  say "keys: SKIPPED: $SERVER_BIN has no \`keys\` command (\`frontdesk-server keys create\`)"
else
  KEYED_ADDR="127.0.0.1:$(free_port)"
  say "setup: starting frontdesk-server with auth.mode = keys on $KEYED_ADDR"
  STARTED_PID=""
  start_server keyed-server "$KEYED_ADDR" "$TMP/sdk-keys.db" FRONTDESK__AUTH__MODE=keys; started=$?
  KEYED_PID="$STARTED_PID"
  # The key is printed on stdout alone; it is never echoed here.
  if [[ $started -eq 0 ]] && FRONTDESK_TEST_KEY="$("$SERVER_BIN" --database-url "sqlite://$TMP/sdk-keys.db" \
        keys create --tenant sdk-tests --scopes '*:admin' 2>"$TMP/keys-create.log" | tail -n1)" \
      && [[ "$FRONTDESK_TEST_KEY" == fdk_* ]]; then
    echo "keyed server healthy (pid $KEYED_PID), key created for tenant sdk-tests"
    suite "keys-grpcurl" keys_grpcurl
    suite "keys-python-example" keys_python_example
    suite "keys-typescript-example" keys_typescript_example
    suite "keys-go-example" keys_go_example
    if [[ -x "$CLI_BIN" ]]; then
      suite "keys-rust-cli" keys_rust_cli
    else
      SKIPPED+=("keys-rust-cli (no frontdesk CLI binary beside $SERVER_BIN)")
    fi
  else
    cat "$TMP/keys-create.log" >&2
    FAILED=$((FAILED + 1)); FAILED_NAMES+=("keys-setup")
    echo "--- FAIL keys-setup (the keyed server did not start, or \`keys create\` printed no key)"
  fi
fi

# ---------------------------------------------------------------------------------------------
# TLS: a THIRD server serving mutual TLS with the test certificates of client/testdata/tls (for
# localhost and 127.0.0.1); every client presents client.pem. Dialled as localhost:PORT.
TLS_PORT="$(free_port)"
TLS_ADDR="localhost:$TLS_PORT"

tls_grpcurl() {
  local dir="$TMP/grpcurl-tls" tls=(-cacert "$TLS_DIR/ca.pem" -cert "$TLS_DIR/client.pem" -key "$TLS_DIR/client.key")
  mkdir -p "$dir"
  "$GRPCURL" "${tls[@]}" "$TLS_ADDR" list >"$dir/list.txt" 2>&1 || { cat "$dir/list.txt"; return 1; }
  grep -qx frontdesk.v1.ConversationService "$dir/list.txt" || { cat "$dir/list.txt"; return 1; }
  "$GRPCURL" "${tls[@]}" -d '{"workflow": "intake"}' "$TLS_ADDR" \
    frontdesk.v1.ConversationService/StartConversation >"$dir/start.json" 2>&1 || { cat "$dir/start.json"; return 1; }
  grep -q '"conversationId"' "$dir/start.json" || { cat "$dir/start.json"; return 1; }
  echo "list and StartConversation over mutual TLS"
  if "$GRPCURL" -cacert "$TLS_DIR/ca.pem" "$TLS_ADDR" list >"$dir/no-cert.txt" 2>&1; then
    cat "$dir/no-cert.txt"; echo "a client without a certificate was served"; return 1
  fi
  if "$GRPCURL" -plaintext "$TLS_ADDR" list >"$dir/plaintext.txt" 2>&1; then
    cat "$dir/plaintext.txt"; echo "a plaintext client was served"; return 1
  fi
  echo "refused without a client certificate, and in plaintext"
}

tls_rust_cli() {
  "$CLI_BIN" --server "https://$TLS_ADDR" --tls-ca "$TLS_DIR/ca.pem" --tls-cert "$TLS_DIR/client.pem" \
    --tls-key "$TLS_DIR/client.key" workflows >"$TMP/cli-tls.log" 2>&1 || { cat "$TMP/cli-tls.log"; return 1; }
  cat "$TMP/cli-tls.log"
  grep -q "intake" "$TMP/cli-tls.log" || { echo "the CLI listed no workflows"; return 1; }
}

say "setup: starting frontdesk-server with mutual TLS on $TLS_ADDR"
STARTED_PID=""
start_server tls-server "127.0.0.1:$TLS_PORT" "$TMP/sdk-tls.db" \
  FRONTDESK__TLS__CERT_FILE="$TLS_DIR/server.pem" FRONTDESK__TLS__KEY_FILE="$TLS_DIR/server.key" \
  FRONTDESK__TLS__CLIENT_CA_FILE="$TLS_DIR/ca.pem"; started=$?
TLS_PID="$STARTED_PID"
if [[ $started -eq 0 ]]; then
  echo "TLS server healthy (pid $TLS_PID)"
  suite "tls-grpcurl" tls_grpcurl
  suite "tls-python" env FRONTDESK_TLS_ADDR="$TLS_ADDR" \
    "$PY" -m pytest -q -p no:cacheprovider client/python/tests/test_auth.py -k live_server_over_mutual_tls
  suite "tls-typescript" bash -c "cd client/typescript && FRONTDESK_TLS_ADDR='$TLS_ADDR' \
    node --test --test-name-pattern='live server over mutual TLS' build/test/auth.test.js"
  suite "tls-go" bash -c "cd client/go && FRONTDESK_TLS_ADDR='$TLS_ADDR' go test -count=1 -run '^TestLiveMutualTLS\$' ."
  if [[ -x "$CLI_BIN" ]]; then
    suite "tls-rust-cli" tls_rust_cli
  else
    SKIPPED+=("tls-rust-cli (no frontdesk CLI binary beside $SERVER_BIN)")
  fi
else
  FAILED=$((FAILED + 1)); FAILED_NAMES+=("tls-setup")
  echo "--- FAIL tls-setup (the TLS server did not become healthy; $TMP/tls-server.log)"
fi

# ---------------------------------------------------------------------------------------------
if ! kill -0 "$SERVER_PID" 2>/dev/null; then
  echo "sdk: the server died during the run; last log lines:" >&2
  tail -n 40 "$TMP/server.log" >&2
  FAILED=$((FAILED + 1)); FAILED_NAMES+=("server-alive")
fi
if [[ -n "$KEYED_PID" ]] && ! kill -0 "$KEYED_PID" 2>/dev/null; then
  echo "sdk: the keyed server died during the run; last log lines:" >&2
  tail -n 40 "$TMP/keyed-server.log" >&2
  FAILED=$((FAILED + 1)); FAILED_NAMES+=("keyed-server-alive")
fi
if [[ -n "$TLS_PID" ]] && ! kill -0 "$TLS_PID" 2>/dev/null; then
  echo "sdk: the TLS server died during the run; last log lines:" >&2
  tail -n 40 "$TMP/tls-server.log" >&2
  FAILED=$((FAILED + 1)); FAILED_NAMES+=("tls-server-alive")
fi
for skipped in "${SKIPPED[@]}"; do
  echo "sdk: skipped: $skipped"
done
if [[ $FAILED -gt 0 ]]; then
  echo
  echo "failed suites: ${FAILED_NAMES[*]}"
  echo "server log (tail):"; tail -n 20 "$TMP/server.log"
fi
echo
echo "sdk: $PASSED passed, $FAILED failed"
[[ $FAILED -eq 0 ]]
