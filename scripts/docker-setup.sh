#!/usr/bin/env bash
# The Dockerfile's steps after scripts/install.sh, kept in a script so that CI runs exactly them
# (there is no Docker engine on the CI machines): tests/unit/config/test_deploy_files.py runs it.
#   APP_USER   user the server runs as; created if missing (needs root). Empty: the current user.
#   APP_UID    its uid when created (default 1000, as Hugging Face Docker Spaces expect)
#   DATA_DIR   logs and caches, the image's VOLUME (default /data)
#   PYTHON     interpreter (default python)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
DATA_DIR=${DATA_DIR:-/data}
APP_USER=${APP_USER:-}

as_app_user() {
  if [ -n "$APP_USER" ] && [ "$(id -un)" != "$APP_USER" ]; then
    # runuser keeps root's HOME; the user's own is where its caches live
    runuser -u "$APP_USER" -- env HOME="$(getent passwd "$APP_USER" | cut -d: -f6)" "$@"
  else
    "$@"
  fi
}

if [ -n "$APP_USER" ] && ! id -u "$APP_USER" >/dev/null 2>&1; then
  useradd --create-home --uid "${APP_UID:-1000}" --shell /usr/sbin/nologin "$APP_USER"
fi
mkdir -p "$DATA_DIR/logs" "$DATA_DIR/cache"
if [ -n "$APP_USER" ]; then
  chown -R "$APP_USER:$APP_USER" "$DATA_DIR"
fi
# A llama-server that cannot run here (a library the image lacks, a CPU it was not built for) would
# leave the GGUF demo to transformers without a word at build time.
if [ -e .llama.cpp/bin/llama-server ] && ! .llama.cpp/bin/llama-server --version >/dev/null 2>&1; then
  echo "docker setup: .llama.cpp/bin/llama-server does not run here:" >&2
  .llama.cpp/bin/llama-server --version >&2 || true
  exit 1
fi
# Fail the build now rather than at the first visitor; as the app user, so that packaged models
# are assembled into the cache that user reads at run time.
as_app_user env HF_HUB_OFFLINE=1 "$PY" scripts/check_install.py
echo "docker setup ok: data in $DATA_DIR, running as ${APP_USER:-$(id -un)}"
