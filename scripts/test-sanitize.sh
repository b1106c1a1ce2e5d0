#!/usr/bin/env bash
# Builds the whole suite with AddressSanitizer + UndefinedBehaviorSanitizer into build-asan and runs it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
export FOLDSERVE_BUILD_DIR="$root/build-asan"
"$root/scripts/build.sh" -DFOLDSERVE_SANITIZE=ON -DFOLDSERVE_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo
cd "$FOLDSERVE_BUILD_DIR"
ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j "$(nproc)" --timeout 1200
