#!/usr/bin/env bash
# Installs everything the client SDKs need to build, generate and test, from package
# registries only, into the work tree (nothing global). Idempotent: what is already there at
# the wanted version is kept.
#
#   client/python/.venv     pip install -e client/python[test,codegen]  (PyPI)
#   client/typescript/node_modules   npm ci  (npm; buf, protoc-gen-es, tsc come from here)
#   client/go/.bin          protoc-gen-go, protoc-gen-go-grpc, grpcurl  (Go module proxy)
#
# Usage: scripts/sdk-ensure-tools.sh [python|typescript|go ...]   (default: all three)
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export GOFLAGS="${GOFLAGS:--buildvcs=false}"

# Pinned generator versions: the checked-in Go code names them in its headers, so changing
# one means regenerating (scripts/sdk-generate.sh) and committing the result.
PROTOC_GEN_GO_GRPC_VERSION="v1.6.2"
# protoc-gen-go follows the google.golang.org/protobuf version in client/go/go.mod.
# grpcurl is pinned too, so that two runs test against the same client: "latest" reinstalled
# nothing once installed, but a fresh machine took whatever was newest that day.
GRPCURL_VERSION="${GRPCURL_VERSION:-v1.9.4}"

log() { printf '[sdk-ensure] %s\n' "$*" >&2; }
hash_of() { cat "$@" | sha256sum | cut -d' ' -f1; }

ensure_python() {
  local dir="$ROOT/client/python" venv="$ROOT/client/python/.venv"
  local want
  want="$(hash_of "$dir/pyproject.toml")"
  if [[ -x "$venv/bin/python" && -f "$venv/.sdk-stamp" && "$(cat "$venv/.sdk-stamp")" == "$want" ]]; then
    return 0
  fi
  log "python: creating $venv and installing client/python[test,codegen]"
  [[ -x "$venv/bin/python" ]] || python3 -m venv "$venv"
  "$venv/bin/python" -m pip install --quiet --disable-pip-version-check -e "$dir[test,codegen]"
  echo "$want" > "$venv/.sdk-stamp"
}

ensure_typescript() {
  local dir="$ROOT/client/typescript"
  local want
  want="$(hash_of "$dir/package.json" "$dir/package-lock.json")"
  if [[ -f "$dir/node_modules/.sdk-stamp" && "$(cat "$dir/node_modules/.sdk-stamp")" == "$want" \
        && -x "$dir/node_modules/.bin/buf" ]]; then
    return 0
  fi
  log "typescript: npm ci"
  (cd "$dir" && npm ci --no-audit --no-fund --loglevel=error)
  echo "$want" > "$dir/node_modules/.sdk-stamp"
}

# go_tool NAME PACKAGE VERSION: installs PACKAGE@VERSION into client/go/.bin unless the
# binary there was built from that version ("latest" accepts any installed version).
go_tool() {
  local name="$1" pkg="$2" version="$3" bin="$ROOT/client/go/.bin/$1"
  if [[ -x "$bin" ]]; then
    if [[ "$version" == "latest" ]]; then return 0; fi
    # awk reads the whole listing: a `grep -q` here could quit early, and under pipefail the
    # writer's SIGPIPE would read as "another version" and trigger a reinstall (which fails offline).
    if go version -m "$bin" 2>/dev/null | awk -v want="$version" '$1=="mod" && $3==want {found=1} END {exit !found}'; then
      return 0
    fi
  fi
  log "go: installing $pkg@$version"
  GOBIN="$ROOT/client/go/.bin" go install "$pkg@$version"
}

ensure_go() {
  mkdir -p "$ROOT/client/go/.bin"
  local pbver
  pbver="$(cd "$ROOT/client/go" && go list -m -f '{{.Version}}' google.golang.org/protobuf)"
  go_tool protoc-gen-go google.golang.org/protobuf/cmd/protoc-gen-go "$pbver"
  go_tool protoc-gen-go-grpc google.golang.org/grpc/cmd/protoc-gen-go-grpc "$PROTOC_GEN_GO_GRPC_VERSION"
  go_tool grpcurl github.com/fullstorydev/grpcurl/cmd/grpcurl "$GRPCURL_VERSION"
  (cd "$ROOT/client/go" && go mod download)
}

targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(python typescript go)
for t in "${targets[@]}"; do
  case "$t" in
    python) ensure_python ;;
    typescript) ensure_typescript ;;
    go) ensure_go ;;
    *) echo "unknown target $t (python, typescript, go)" >&2; exit 2 ;;
  esac
done
