#!/usr/bin/env bash
# Installs buf (the npm registry's @bufbuild/buf, pinned by client/typescript/package-lock.json)
# and prints the path of its binary. Idempotent: reinstalls only when the lock file changed.
#
# The install is scripts/sdk-ensure-tools.sh's, not one of its own: `npm ci` empties
# node_modules first, so two installers each keeping a stamp there deleted each other's stamp
# and every test run did two full `npm ci`. One installer, one stamp.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
# Its output goes to stderr: the caller takes this script's whole stdout as buf's path.
bash "$root/scripts/sdk-ensure-tools.sh" typescript >&2
buf="$root/client/typescript/node_modules/.bin/buf"
[ -x "$buf" ] || { echo "ensure-buf: npm ci left no $buf" >&2; exit 1; }
echo "$buf"
