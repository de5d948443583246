#!/usr/bin/env bash
# Regenerates the client SDKs' protobuf/gRPC code from proto/ with proto/buf.gen.yaml, using
# only local plugins (scripts/sdk-ensure-tools.sh installs them). Commit the result.
#
#   scripts/sdk-generate.sh            # writes into client/*/...
#   scripts/sdk-generate.sh -o DIR     # writes under DIR instead (the drift check)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
"$ROOT/scripts/sdk-ensure-tools.sh"
cd "$ROOT"
exec client/typescript/node_modules/.bin/buf generate --template proto/buf.gen.yaml "$@"
