#!/usr/bin/env bash
# Install the official AG-UI client (@ag-ui/client 1.0.0 and @ag-ui/core 1.0.0) and the
# TypeScript compiler examples/agui-ts is built with (typescript 5.9.3, @types/node), pinned in
# scripts/agui/package.json and package-lock.json) into bin/agui/ (ignored by git): the
# integration tests drive Airlock's /v1/agui with its HttpAgent from Node, and
# examples/agui-ts runs on it. npm comes from Debian's packages when missing (run as root).
# Idempotent. Prints the folder (tests read it as AIRLOCK_AGUI_NPM).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="bin/agui"
if ! command -v npm >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-agui-client: npm is not installed; run as root, or: sudo apt-get install -y nodejs npm" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq nodejs npm >&2
fi
mkdir -p "$dest"
if ! cmp -s scripts/agui/package-lock.json "$dest/package-lock.json" || [ ! -f "$dest/node_modules/@ag-ui/client/package.json" ] || [ ! -x "$dest/node_modules/.bin/tsc" ]; then
  cp scripts/agui/package.json scripts/agui/package-lock.json "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
echo "$(pwd)/$dest"
