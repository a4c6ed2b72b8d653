#!/usr/bin/env bash
# The Docker image's build stage: the compiled parts, which the slim final image cannot build (it has
# no compiler), built here and copied into the image by the Dockerfile:
#   OUT/.llama.cpp/bin/llama-server   llama.cpp's server for any x86-64 CPU with AVX2 (or any arm64),
#                                     needing no shared library but the C library's
#   OUT/webui/**/*.so                 the C modules of setup.py, for this Python
# Without them the image would serve the GGUF demo with transformers (torch, dequantised weights)
# and index votes with the Python fallbacks. Nothing in the checkout changes; tests/unit/
# test_deploy_files.py runs it (without llama.cpp's few minutes of build).
#   docker-build-native.sh OUT
#   LLAMACPP=0  skip llama.cpp's server
#   PYTHON      interpreter (default python)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: scripts/docker-build-native.sh OUT_DIR}
PY=${PYTHON:-python}
say() { echo "docker-build-native: $*"; }

# The build stage starts from the same slim image as the final one: install the compilers there.
missing=()
for tool in cmake c++ curl; do command -v "$tool" >/dev/null 2>&1 || missing+=("$tool"); done
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    say "installing cmake, g++ and curl"
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends cmake g++ curl ca-certificates >/dev/null
    rm -rf /var/lib/apt/lists/*
  else
    say "missing ${missing[*]} (install them, or run this as root on Debian)"
    exit 1
  fi
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir -p "$OUT"

"$PY" -c "import setuptools" 2>/dev/null || "$PY" -m pip install --quiet setuptools
"$PY" setup.py --quiet build_ext --build-lib "$OUT" --build-temp "$work/c-modules"
# The modules are optional for setup.py (an install without a compiler goes on); here a compiler is
# present, so a module that did not build is a failure to show.
expected=$("$PY" -c "import re, pathlib; print(len(re.findall(r'Extension\(', pathlib.Path('setup.py').read_text())))")
built=$(find "$OUT/webui" -name '*.so' | wc -l)
if [ "$built" -ne "$expected" ]; then
  say "$built of $expected C modules built (setup.py's output above says why)"
  exit 1
fi
say "$built C modules in $OUT/webui"

if [ "${LLAMACPP:-1}" != "0" ]; then
  LLAMACPP_PORTABLE=1 LLAMACPP_LINK="$work/llama-server" bash scripts/install-llamacpp.sh
  mkdir -p "$OUT/.llama.cpp/bin"
  cp -L "$work/llama-server" "$OUT/.llama.cpp/bin/llama-server"
  say "llama-server in $OUT/.llama.cpp/bin"
fi
