#!/usr/bin/env bash
# From a fresh clone: installs dependencies, builds, and serves the built-in fortune-demo model on port 8888.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup-debian.sh"
"$root/scripts/build.sh"
exec "${FOLDSERVE_BUILD_DIR:-$root/build}/foldserve" serve "$@"
