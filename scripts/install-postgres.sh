#!/usr/bin/env bash
# PostgreSQL's server binaries (Debian's `postgresql`) for the tests of the shared vote store:
# tests/postgres.py starts a throwaway server with them in a temporary folder. The app itself needs
# only `psycopg`, and a server only when it is given --database postgresql://... (docs/deploy.md).
# `make test` runs this in the background; present binaries make it a no-op.
set -euo pipefail
say() { echo "install-postgres: $*"; }

if compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null; then exit 0; fi
if [ "$(id -u)" -ne 0 ]; then SUDO=sudo; else SUDO=; fi
# install-browser.sh may be running apt-get at the same moment: take turns.
exec 9>/tmp/pairwise-arena-apt.lock
flock 9
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq postgresql >/dev/null
compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || { say "initdb missing after the install"; exit 1; }
say "installed: $(ls -d /usr/lib/postgresql/*/bin)"
