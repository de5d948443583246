#!/usr/bin/env bash
# Packs @frontdesk/client (npm pack: the `prepare` script builds dist/) and installs the tarball
# in a scratch consumer project, then compiles a small consumer under a strict user tsconfig
# (strict, skipLibCheck false, lib ES2022, moduleResolution node16 and bundler) and runs it. Proves that the
# published package builds and type-checks with no extra steps.
#
#   client/typescript/scripts/check-package.sh      (or: npm run check:package)
#
# Needs the package's own node_modules (npm install/ci) for tsc; the consumer's dependencies
# come from the npm cache when present (--prefer-offline), else from the registry.
set -euo pipefail

PKG="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TSC="$PKG/node_modules/.bin/tsc"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/frontdesk-ts-pack.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
export NO_UPDATE_NOTIFIER=1 npm_config_update_notifier=false npm_config_fund=false npm_config_audit=false

echo "[check-package] npm pack"
(cd "$PKG" && npm pack --silent --pack-destination "$WORK" >"$WORK/pack.txt")
TARBALL="$WORK/$(tail -n 1 "$WORK/pack.txt")"
[[ -f "$TARBALL" ]] || { echo "npm pack wrote no tarball"; cat "$WORK/pack.txt"; exit 1; }
tar -tzf "$TARBALL" >"$WORK/contents.txt"
for want in package/dist/index.js package/dist/index.d.ts package/dist/retry.d.ts \
            package/dist/gen/frontdesk/v1/workflow_pb.d.ts package/README.md; do
  grep -qx "$want" "$WORK/contents.txt" || { echo "tarball lacks $want"; exit 1; }
done
echo "[check-package] $(basename "$TARBALL"): $(wc -l <"$WORK/contents.txt") files"

APP="$WORK/consumer"
mkdir -p "$APP/src"
cat >"$APP/package.json" <<'JSON'
{ "name": "frontdesk-consumer", "version": "0.0.0", "private": true, "type": "module" }
JSON
cat >"$APP/tsconfig.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022"],
    "module": "Node16",
    "moduleResolution": "Node16",
    "types": ["node"],
    "strict": true,
    "skipLibCheck": false,
    "noUncheckedIndexedAccess": true,
    "exactOptionalPropertyTypes": true,
    "noImplicitOverride": true,
    "noEmitOnError": true,
    "outDir": "dist",
    "rootDir": "src"
  },
  "include": ["src"]
}
JSON
# The same code under moduleResolution bundler, with no `types` (TypeScript 6+ defaults to none).
cat >"$APP/tsconfig.bundler.json" <<'JSON'
{
  "compilerOptions": {
    "target": "ES2022",
    "lib": ["ES2022"],
    "module": "ESNext",
    "moduleResolution": "Bundler",
    "strict": true,
    "skipLibCheck": false,
    "noUncheckedIndexedAccess": true,
    "exactOptionalPropertyTypes": true,
    "noEmit": true
  },
  "include": ["src"]
}
JSON
cat >"$APP/src/main.ts" <<'TS'
import {
  Code,
  DEFAULT_RETRY_POLICY,
  FrontdeskClient,
  FrontdeskError,
  RETRYABLE_CODES,
  eventKind,
  type RetryPolicy,
  type RunEvent,
  type StreamItem,
  type TurnResult,
} from "@frontdesk/client";
import { SubscribeRunRequestSchema } from "@frontdesk/client/gen/frontdesk/v1/workflow_pb";

const policy: RetryPolicy = { maxAttempts: 3, initialBackoffMs: 100, reattach: true };
const client = new FrontdeskClient({ baseUrl: "http://127.0.0.1:1", timeoutMs: 1_000, retry: policy });
const off = new FrontdeskClient({ retry: false });

export async function turn(conversationId: string): Promise<TurnResult> {
  const stream = client.sendMessage(conversationId, "hello", { idempotencyKey: "k-1" });
  for await (const item of stream) {
    const typed: StreamItem = item;
    if (typed.type === "event") {
      const ev: RunEvent = typed.event;
      const id: bigint = ev.eventId;
      console.log(id, eventKind(ev), stream.attempts, stream.reattaches, stream.skippedEvents);
    }
  }
  return stream.result();
}

export async function follow(runId: string): Promise<number> {
  let n = 0;
  for await (const ev of client.subscribeRun(runId, { afterEventId: 3n })) n += ev.node.length;
  return n;
}

export function describe(e: unknown): string {
  if (e instanceof FrontdeskError) {
    const delay: number | undefined = e.retryDelayMs;
    return `${e.codeName} ${e.reason ?? "-"} ${delay ?? "-"} ${e.retryable}`;
  }
  return String(e);
}

const code: Code = RETRYABLE_CODES[0] ?? Code.Unknown;
console.log(`ok ${DEFAULT_RETRY_POLICY.maxAttempts} ${code} ${SubscribeRunRequestSchema.typeName}`);
client.close();
off.close();
TS

echo "[check-package] npm install <tarball> in a scratch project"
(cd "$APP" && npm install --prefer-offline --no-audit --no-fund --loglevel=error "$TARBALL")

echo "[check-package] tsc (strict, skipLibCheck: false, ES2022, node16)"
(cd "$APP" && "$TSC" -p tsconfig.json)
echo "[check-package] tsc (strict, skipLibCheck: false, ES2022, bundler, no types)"
(cd "$APP" && "$TSC" -p tsconfig.bundler.json)
echo "[check-package] node dist/main.js"
out="$(cd "$APP" && node dist/main.js)"
echo "$out"
[[ "$out" == "ok 5 14 frontdesk.v1.SubscribeRunRequest" ]] || { echo "unexpected consumer output"; exit 1; }
echo "[check-package] OK"
