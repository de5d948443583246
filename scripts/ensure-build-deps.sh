#!/usr/bin/env bash
# Ensures the build-time dependencies of the embedded model (llama.cpp, built by the
# llama-cpp-sys-2 crate) are installed: cmake and libclang-dev (for bindgen) from Debian's
# packages. Idempotent: does nothing when both are present.
#
# Usage (as root on Debian 12): scripts/ensure-build-deps.sh
set -euo pipefail

log() { echo "ensure-build-deps: $*" >&2; }
die() { log "error: $*"; exit 1; }

missing=()
command -v cmake >/dev/null 2>&1 || missing+=(cmake)
# bindgen needs libclang (libclang.so or libclang-NN.so.N, not libclang-cpp, which other packages
# install alone); Debian's libclang-dev pulls in the versioned library.
if ! compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null &&
    ! compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null &&
    ! compgen -G '/usr/lib/x86_64-linux-gnu/libclang-[0-9]*.so*' >/dev/null &&
    ! dpkg -s libclang-dev >/dev/null 2>&1; then
    missing+=(libclang-dev)
fi
command -v c++ >/dev/null 2>&1 || missing+=(g++)

[ "${#missing[@]}" -eq 0 ] && exit 0

[ "$(id -u)" -eq 0 ] || die "missing ${missing[*]}; run as root (it installs packages) or install them yourself"
log "installing ${missing[*]} from Debian's packages"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
