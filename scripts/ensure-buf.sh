#!/usr/bin/env bash
# Installs buf (the npm registry's @bufbuild/buf, pinned by client/typescript/package-lock.json)
# and prints the path of its binary. Idempotent: reinstalls only when the lock file changed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
ts="$root/client/typescript"
stamp="$ts/node_modules/.frontdesk-lock.sha256"
want="$(sha256sum "$ts/package-lock.json" | cut -d' ' -f1)"
if [ ! -x "$ts/node_modules/.bin/buf" ] || [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  (cd "$ts" && npm ci --no-audit --no-fund --ignore-scripts >&2)
  echo "$want" > "$stamp"
fi
echo "$ts/node_modules/.bin/buf"
