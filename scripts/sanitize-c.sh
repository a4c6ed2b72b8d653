#!/usr/bin/env bash
# The C modules (setup.py) under AddressSanitizer: built into a copy of the tree, then the tests
# that compare them with their Python versions and scripts/sanitize_c_fuzz.py (adversarial lines,
# log bytes cut at every offset, in buffers that end where their memory ends) run against them.
# Any read or write outside an allocation, or a use after free, stops it with ASan's report.
# Python's allocator is set to malloc so that ASan sees every object. About 3 minutes on 2 cores.
# Not part of `make test` (it needs gcc's libasan); run it after changing a .c file:
#   bash scripts/sanitize-c.sh
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-.venv/bin/python}
PYTHON=$(cd "$(dirname "$PYTHON")" && pwd)/$(basename "$PYTHON")  # absolute, the venv kept (no realpath)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cp -r webui tests scripts setup.py pyproject.toml "$work"/
find "$work" -name '*.so' -delete
cd "$work"
CFLAGS="-fsanitize=address -fno-omit-frame-pointer -g -O1" LDFLAGS="-fsanitize=address" \
  "$PYTHON" setup.py -q build_ext --inplace
export PYTHONMALLOC=malloc ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 HF_HUB_OFFLINE=1
export LD_PRELOAD
LD_PRELOAD=$(gcc -print-file-name=libasan.so)
"$PYTHON" scripts/sanitize_c_fuzz.py
"$PYTHON" -m pytest -q -p no:cacheprovider tests/unit/leaderboard/votes/test_leaderboard_fast_paths.py \
  tests/unit/leaderboard/votes/test_index_faults.py -k "compiled or cut_anywhere or nested"
echo "sanitize-c: no error found"
