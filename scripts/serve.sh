#!/usr/bin/env bash
# Builds frontdesk-server and the frontdesk CLI (release) and starts the server on its embedded
# defaults: SQLite in ./data/frontdesk.db, listening on 127.0.0.1:50051. Extra arguments go to
# the server (see `target/release/frontdesk-server --help`).
#
# A model endpoint is required until the embedded offline model lands: set FRONTDESK__MODEL__MODEL
# (and FRONTDESK__MODEL__BASE_URL for a local OpenAI-compatible server such as Ollama, or
# OPENAI_API_KEY for OpenAI), or pass --model / --model-base-url.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"
cargo build --release --locked -p frontdesk-server -p frontdesk-client
mkdir -p data
exec target/release/frontdesk-server "$@"
