#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (ASan + UBSan) and runs each for SECONDS (default 60). Not part of CI.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
seconds="${1:-60}"
build="$root/build-fuzz"
CC=clang CXX=clang++ cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DFOLDSERVE_FUZZ=ON \
  -DFOLDSERVE_CUDA=OFF -DBUILD_TESTING=OFF >/dev/null
targets=$(cd "$root/fuzz" && ls *.cpp | sed 's/\.cpp$//; s/^/fuzz_/')
cmake --build "$build" -j "$(nproc)" --target $targets
# Every target runs even after one fails; crashing and slow inputs go to $build/artifacts/TARGET-*.
failed=()
mkdir -p "$build/artifacts"
for t in $targets; do
  mkdir -p "$build/corpus/$t"
  echo "== $t for ${seconds}s"
  if ! FOLDSERVE_SHARED="${FOLDSERVE_SHARED:-$root/../shared}" "$build/fuzz/$t" -max_total_time="$seconds" \
    -rss_limit_mb=4096 -artifact_prefix="$build/artifacts/$t-" "$build/corpus/$t" > "$build/$t.log" 2>&1; then
    failed+=("$t")
  fi
  tail -n 3 "$build/$t.log"
done
if ((${#failed[@]})); then
  echo "failed: ${failed[*]} (logs in $build/TARGET.log, inputs in $build/artifacts)" >&2
  exit 1
fi
