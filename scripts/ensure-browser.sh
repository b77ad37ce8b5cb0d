#!/usr/bin/env bash
# Install Debian's Chromium for the browser tests (tests/frontend/test_frontend_browser.py) when it is
# missing; `playwright install` downloads from a CDN, which this kind of machine cannot reach.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    exit 0
fi
if ! command -v apt-get >/dev/null; then
    echo "Chromium is missing at /usr/bin/chromium and apt-get is not available; install it." >&2
    exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    sudo="sudo"
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
[ -x /usr/bin/chromium ] || { echo "Chromium did not install at /usr/bin/chromium" >&2; exit 1; }
