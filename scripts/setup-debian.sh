#!/usr/bin/env bash
# Installs foldserve's build and test dependencies on Debian 12 (run as root or with sudo); with --serve, only what
# building and running the server needs.
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
serve_only=false
[ "${1:-}" = "--serve" ] && serve_only=true
packages=(
  build-essential cmake ninja-build pkg-config ca-certificates curl
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libcurl4-openssl-dev
)
if ! $serve_only; then
  packages+=(
    git libgtest-dev libgmock-dev googletest libbenchmark-dev libcpp-httplib-dev libssl-dev
    python3 python3-jinja2 clang libclang-rt-14-dev chromium
  )
fi
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ! $serve_only; then
  command -v node >/dev/null 2>&1 || missing+=(nodejs)
  command -v npm >/dev/null 2>&1 || missing+=(npm)
fi
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The end-to-end tests drive the server with the official openai npm package, and the chat page with
# playwright-core in the chromium above.
$serve_only && exit 0
root="$(cd "$(dirname "$0")/.." && pwd)"
e2e="$root/tests/server/e2e"
# npm ci again whenever the lock file is newer than what was installed.
if [ ! -f "$e2e/node_modules/.package-lock.json" ] || [ "$e2e/package-lock.json" -nt "$e2e/node_modules/.package-lock.json" ]; then
  npm ci --prefix "$e2e" --no-audit --no-fund --loglevel=error
fi
