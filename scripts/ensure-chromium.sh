#!/usr/bin/env bash
# Make a headless-capable Chromium available for the browser tests of the approver page
# (integration/web_test.go, driven with chromedp): Debian's chromium package, installed with
# apt-get when missing (run as root). Prints the browser's path.
set -euo pipefail
for b in chromium chromium-browser google-chrome; do
  if p="$(command -v "$b")"; then
    echo "$p"
    exit 0
  fi
done
if [ "$(id -u)" != 0 ]; then
  echo "ensure-chromium: chromium is not installed; run as root, or: sudo apt-get install -y chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq chromium >&2
command -v chromium
