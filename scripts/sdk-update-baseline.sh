#!/usr/bin/env bash
# Rewrites proto/baseline/frontdesk-v1.binpb, the image of the released contract that
# `buf breaking` compares proto/ against (scripts/sdk-tests.sh).
#
#   scripts/sdk-update-baseline.sh [GIT_REF]     (default: HEAD)
#
# The image is built from proto/ as committed at GIT_REF, not from the work tree, so
# uncommitted edits never become the baseline. Run it when a version of the contract is
# released (with that release's tag or commit) and commit the new baseline with the release:
# from then on, breaking what was released fails the SDK checks. Until the first release the
# baseline is the contract as first committed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
REF="${1:-HEAD}"
"$ROOT/scripts/sdk-ensure-tools.sh" typescript
cd "$ROOT"
commit="$(git rev-parse --verify "$REF^{commit}")"
mkdir -p proto/baseline
client/typescript/node_modules/.bin/buf build ".git#ref=$commit,subdir=proto" \
  --exclude-source-info -o proto/baseline/frontdesk-v1.binpb
echo "wrote proto/baseline/frontdesk-v1.binpb from $REF ($commit)"
