#!/usr/bin/env bash
# Configures and builds foldserve into build/ (or $FOLDSERVE_BUILD_DIR): everything, or the targets named with
# --target NAME; other arguments go to cmake.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
build="${FOLDSERVE_BUILD_DIR:-$root/build}"
targets=()
configure=()
while [ $# -gt 0 ]; do
  case "$1" in
    --target) targets+=(--target "$2"); shift 2 ;;
    *) configure+=("$1"); shift ;;
  esac
done
cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release "${configure[@]}" >/dev/null
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
