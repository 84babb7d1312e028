#!/usr/bin/env bash
# Install the MCP servers others wrote that the MCP bridge's tests run against, at the versions
# pinned in scripts/mcp/package.json and package-lock.json, into bin/npm/ (ignored by git):
#   @modelcontextprotocol/server-filesystem 2026.8.31, @modelcontextprotocol/server-everything
#   2026.8.31, @modelcontextprotocol/conformance 0.1.16, the MCP TypeScript SDK
#   @modelcontextprotocol/sdk 1.32.2 (its client drives `airlock mcp serve` in the integration
#   tests), and node 22.23.3 (the npm package
#   `node` ships the Node binary: the conformance suite needs Node 22+, Debian's is 20).
# npm comes from Debian's packages when missing (run as root). Idempotent: a second run with
# the same lock file does nothing. Prints the folder (tests read it as AIRLOCK_MCP_NPM).
set -euo pipefail
cd "$(dirname "$0")/.."
dest="bin/npm"
if ! command -v npm >/dev/null; then
  if [ "$(id -u)" != 0 ]; then
    echo "ensure-mcp-servers: npm is not installed; run as root, or: sudo apt-get install -y nodejs npm" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >&2
  apt-get install -y -qq nodejs npm >&2
fi
mkdir -p "$dest"
if ! cmp -s scripts/mcp/package-lock.json "$dest/package-lock.json" || [ ! -x "$dest/node_modules/.bin/node" ] ||
   [ ! -x "$dest/node_modules/.bin/mcp-server-filesystem" ] || [ ! -x "$dest/node_modules/.bin/mcp-server-everything" ] ||
   [ ! -f "$dest/node_modules/@modelcontextprotocol/sdk/package.json" ]; then
  cp scripts/mcp/package.json scripts/mcp/package-lock.json "$dest/"
  (cd "$dest" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
"$dest/node_modules/.bin/node" --version >/dev/null
echo "$(pwd)/$dest"
