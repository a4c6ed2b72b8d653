#!/usr/bin/env bash
# nginx (Debian's package) for the tests of several servers behind one proxy: tests/proxy.py renders
# deploy/nginx.conf.template and runs nginx with it, as a plain process in a temporary folder (the
# package's own service is not used). `make test` runs this in the background; a present nginx
# makes it a no-op. docs/deploy.md ("Several servers") shows the same file in a deployment.
set -euo pipefail
say() { echo "install-nginx: $*"; }

if command -v nginx >/dev/null || [ -x /usr/sbin/nginx ]; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
# install-browser.sh and install-postgres.sh may be running apt-get at the same moment: take turns.
exec 9>/tmp/pairwise-arena-apt.lock
flock 9
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq nginx >/dev/null
[ -x /usr/sbin/nginx ] || { say "/usr/sbin/nginx missing after the install"; exit 1; }
say "installed: $(/usr/sbin/nginx -v 2>&1)"
