#!/usr/bin/env bash
# llama.cpp's `llama-server`, built from the llama.cpp source that the llama-cpp-python sdist on PyPI
# carries (PyPI ships no llama-server binary; that sdist pins a tested llama.cpp commit), for this
# CPU. The build (a few minutes on 2 cores) is kept in a cache shared by every clone on the machine
# and linked to .llama.cpp/bin/llama-server, where the app looks first (webui/engine/llamacpp.py).
# Where it cannot be built (no C++ compiler or cmake, another OS), it says so and the app's `auto`
# backend serves GGUF models with vLLM or transformers instead.
# A plain file (not a link) already at .llama.cpp/bin/llama-server is a prebuilt binary, kept as is:
# the Docker image's build stage puts one there (scripts/docker-build-native.sh).
# Environment:
#   LLAMACPP=0          skip
#   LLAMACPP_CACHE      where builds are kept (default ~/.cache/pairwise-arena/llama.cpp)
#   LLAMACPP_LINK       where the link to the build goes (default .llama.cpp/bin/llama-server)
#   LLAMACPP_PORTABLE=1 build for any x86-64 CPU with AVX2 (or any arm64), with no shared library
#                       but the C library's, instead of for this CPU: for an image run elsewhere
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=0.3.36
SHA256=832db0699007f1be95a7e41ef12e88926b02ba836461e36a36372db2760c1a2e
URL=https://files.pythonhosted.org/packages/ec/e9/e7de2b0463ea3ffbf0ede6cb21b58c1258a8f6521aae45ca773a59fe7cf3/llama_cpp_python-$VERSION.tar.gz
LINK=${LLAMACPP_LINK:-.llama.cpp/bin/llama-server}

say() { echo "install-llamacpp: $*"; }
skip() { say "$* ; GGUF models are served by vLLM or transformers instead"; rm -f "$LINK"; exit 0; }

if [ -f "$LINK" ] && [ ! -L "$LINK" ] && [ -x "$LINK" ]; then
  say "using the prebuilt $LINK"
  exit 0
fi
if [ "${LLAMACPP:-1}" = "0" ]; then skip "skipped (LLAMACPP=0)"; fi
case "$(uname -s)" in Linux | Darwin) ;; *) skip "no build recipe for $(uname -s)" ;; esac
for tool in cmake c++ tar curl; do
  command -v "$tool" >/dev/null 2>&1 || skip "$tool not found"
done

# A native build uses this CPU's instructions (GGML_NATIVE), so the cache is keyed by them too.
if [ "${LLAMACPP_PORTABLE:-0}" = "1" ]; then
  cpu=portable
elif [ -r /proc/cpuinfo ]; then
  cpu=$(grep -m1 -E '^(flags|Features)' /proc/cpuinfo | cksum | cut -d' ' -f1)
else
  cpu=$(sysctl -n machdep.cpu.brand_string 2>/dev/null | cksum | cut -d' ' -f1)
fi
cache=${LLAMACPP_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/pairwise-arena/llama.cpp}/$VERSION-$(uname -m)-$cpu
binary=$cache/llama-server

if [ ! -x "$binary" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  say "building llama-server from llama-cpp-python $VERSION's llama.cpp (a few minutes; log: $work/build.log)"
  curl -fsSL --retry 2 -o "$work/source.tar.gz" "$URL"
  if command -v sha256sum >/dev/null 2>&1; then
    echo "$SHA256  $work/source.tar.gz" | sha256sum -c --quiet -
  else
    echo "$SHA256  $work/source.tar.gz" | shasum -a 256 -c --quiet -
  fi
  tar xzf "$work/source.tar.gz" -C "$work" "llama_cpp_python-$VERSION/vendor/llama.cpp"
  source_dir=$work/llama_cpp_python-$VERSION/vendor/llama.cpp
  jobs=$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2)
  flags=()
  native=ON
  if [ "$cpu" = "portable" ]; then
    # Without GGML_NATIVE ggml targets AVX2/FMA/F16C on x86-64; no OpenMP and a static C++ runtime
    # leave the C library as the one shared dependency, which any image on the same base has.
    native=OFF
    flags=(-DGGML_OPENMP=OFF -DCMAKE_EXE_LINKER_FLAGS="-static-libstdc++ -static-libgcc")
  elif [ "$(uname -m)" = "x86_64" ]; then
    # No AMX: some virtual machines list it in /proc/cpuinfo and even grant it, then fault on its
    # first tile instruction (seen on the 2-core development VM: "Illegal instruction" at load).
    flags=(-DCMAKE_C_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
      -DCMAKE_CXX_FLAGS="-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
  fi
  # Nothing downloaded at build or run time (no web UI from the Hub, no HTTPS model downloads); one
  # static binary, so that the build folder can go.
  if ! {
    cmake -S "$source_dir" -B "$work/build" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
      -DGGML_NATIVE="$native" -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_UI=OFF \
      -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_COMMIT="pypi-$VERSION" \
      ${flags[@]+"${flags[@]}"} &&
      cmake --build "$work/build" --target llama-server -j "$jobs"
  } >"$work/build.log" 2>&1; then
    tail -n 30 "$work/build.log" >&2
    say "the build failed (above: the end of its log)"
    exit 1
  fi
  mkdir -p "$cache"
  cp "$work/build/bin/llama-server" "$binary.partial"
  mv -f "$binary.partial" "$binary" # whole or absent, even if two installs race
fi
mkdir -p "$(dirname "$LINK")"
ln -sfn "$binary" "$LINK"
say "$("$LINK" --version 2>&1 | grep -m1 -i version || echo built) at $LINK"
