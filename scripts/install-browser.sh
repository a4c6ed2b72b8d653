#!/usr/bin/env bash
# Debian's Chromium for the browser tests (Playwright drives it; we never download a browser).
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
exec 9>/tmp/pairwise-arena-apt.lock  # install-postgres.sh may be running apt-get too
flock 9
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq chromium >/dev/null
echo "installed: $(/usr/bin/chromium --version)"
