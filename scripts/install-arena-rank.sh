#!/usr/bin/env bash
# lmarena's ranking library arena-rank in a virtualenv of its own (.venv-arena-rank beside the app), for
# tests/integration/test_arena_rank_compat.py only: it checks our Bradley-Terry ratings and intervals
# against the library behind LMArena's leaderboard. arena-rank 0.1.1 pins numpy==2.3.3 and jax==0.8.1,
# which must not reach the app's environment, so it gets one of its own; the test runs
# tests/arena_rank_runner.py with this venv's python. `make test` runs this script; the app never needs it.
# About 80-100 s and 900 MB on a fresh machine (jaxlib, scipy, pyarrow through `datasets`, which the
# library declares but does not import; installed anyway so that pip resolves exactly what it declares).
# Environment:
#   ARENA_RANK=0       skip (the compatibility test then skips, saying so)
#   ARENA_RANK_VENV    where (default .venv-arena-rank)
#   PYTHON_BASE        the interpreter that creates the venv (default python3; arena-rank needs 3.11+)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${ARENA_RANK_VENV:-.venv-arena-rank}
BASE=${PYTHON_BASE:-python3}
SPEC=${ARENA_RANK_SPEC:-arena-rank==0.1.1}

say() { echo "install-arena-rank: $*"; }

if [ "${ARENA_RANK:-1}" = "0" ]; then say "skipped (ARENA_RANK=0)"; exit 0; fi
if ! "$BASE" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  say "arena-rank needs Python 3.11 or newer ($("$BASE" --version)); its check is skipped"; exit 0
fi
marker="$VENV/.installed"
if [ -f "$marker" ] && [ "$marker" -nt "$0" ]; then exit 0; fi
test -x "$VENV/bin/python" || "$BASE" -m venv "$VENV"
"$VENV/bin/python" -m pip install --quiet "$SPEC"
"$VENV/bin/python" -c 'import importlib.metadata as m, sys; import arena_rank.models.bradley_terry
print("install-arena-rank: arena-rank", m.version("arena-rank"), "jax", m.version("jax"), "in", sys.prefix)'
touch "$marker"
