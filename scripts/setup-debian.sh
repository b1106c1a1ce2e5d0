#!/usr/bin/env bash
# Installs foldserve's build and test dependencies on Debian 12 (run as root or with sudo).
set -euo pipefail
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
packages=(
  build-essential cmake ninja-build pkg-config git ca-certificates curl
  nlohmann-json3-dev libpcre2-dev libutf8proc-dev
  libgtest-dev libgmock-dev googletest libbenchmark-dev
  libcpp-httplib-dev libssl-dev
  libturbojpeg0-dev libjpeg62-turbo-dev libpng-dev libwebp-dev libcurl4-openssl-dev
  python3 python3-jinja2
  clang libclang-rt-14-dev
  chromium
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ "${#missing[@]}" -gt 0 ]; then
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The end-to-end tests drive the server with the official openai npm package, and the chat page with
# playwright-core in the chromium above.
root="$(cd "$(dirname "$0")/.." && pwd)"
if [ ! -d "$root/tests/server/e2e/node_modules/openai" ] || [ ! -d "$root/tests/server/e2e/node_modules/playwright-core" ]; then
  npm ci --prefix "$root/tests/server/e2e" --no-audit --no-fund --loglevel=error
fi
