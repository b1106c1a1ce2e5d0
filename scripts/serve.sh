#!/usr/bin/env bash
# From a fresh clone: installs dependencies, builds the server (only what serving needs) and serves the built-in
# fortune-demo model on 127.0.0.1:8888; arguments go to `foldserve serve`.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh" --serve
echo "foldserve: building the server (the first build takes several minutes)" >&2
"$root/scripts/build.sh" -DBUILD_TESTING=OFF --target foldserve
exec "${FOLDSERVE_BUILD_DIR:-$root/build}/src/foldserve" serve "$@"
