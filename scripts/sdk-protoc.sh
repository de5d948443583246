#!/usr/bin/env bash
# protoc for buf's `protoc_builtin` plugins (python, pyi, grpc_python): the protoc that
# grpcio-tools (PyPI) ships, so Python code generation needs nothing but PyPI.
# The interpreter is $FRONTDESK_SDK_PYTHON, else client/python/.venv (scripts/sdk-tests.sh
# creates it with the pinned grpcio-tools from client/python's `codegen` extra).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
py="${FRONTDESK_SDK_PYTHON:-$root/client/python/.venv/bin/python}"
exec "$py" -m grpc_tools.protoc "$@"
