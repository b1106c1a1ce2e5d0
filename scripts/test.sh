#!/usr/bin/env bash
# From a fresh clone: installs dependencies, builds everything and runs the whole test suite.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh" -DBUILD_TESTING=ON
cd "${FOLDSERVE_BUILD_DIR:-$root/build}"
ctest --output-on-failure -j "$(nproc)" --timeout 600
