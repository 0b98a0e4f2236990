#!/usr/bin/env bash
# Install Debian's chromium package for the browser tests (tests/browser), if it is not there yet.
#
# The tests drive /usr/bin/chromium through playwright's Python API (executable_path); they never download
# a browser build. Needs root (CI runs as root; `make test` runs it as root when chromium is missing);
# idempotent: does nothing when /usr/bin/chromium exists.
set -euo pipefail

CHROMIUM="${WORKBENCH_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
    echo "chromium: already installed at $CHROMIUM"
    exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
    echo "chromium: $CHROMIUM is missing; run this script as root (it uses apt-get)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends chromium fonts-dejavu-core fonts-liberation
if [ ! -x "$CHROMIUM" ]; then
    echo "chromium: apt-get installed the package, but $CHROMIUM is still missing (WORKBENCH_CHROMIUM names" \
         "another path? the package puts it at /usr/bin/chromium)" >&2
    exit 1
fi
echo "chromium: installed $("$CHROMIUM" --version 2>/dev/null || echo "$CHROMIUM")"
