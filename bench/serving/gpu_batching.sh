#!/bin/bash
# Issue 34's GPU run (docs/performance.md, "transformers on continuous batching on a GPU"): continuous
# batching against one generate() per reply, in process, on the SmolLM2-1.7B shape with random weights.
# The lent machine has torch but not this app's transformers or pydantic: they travel as wheels in .whl
# (transformers 5.24.0, pydantic 2.14.4, pydantic_core 2.50.5, annotated_types 0.8.0, typing_inspection
# 0.4.5), and SmolLM2's tokenizer folder in .gpu/tok; run from the repository root:
#   device run: bash bench/serving/gpu_batching.sh   (carry .whl and .gpu; about 2.5 minutes)
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TOKENIZERS_PARALLELISM=false
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 3
export PYTHONPATH=/tmp/site:$PWD
python3 - <<'PY' 2>&1 | tee $OUT/env.txt
import importlib.util as u, torch, transformers, pydantic
print("torch", torch.__version__, "transformers", transformers.__version__, transformers.__file__)
print("gpu", torch.cuda.get_device_name(), "flash_attn", u.find_spec("flash_attn") is not None, "kernels", u.find_spec("kernels") is not None)
import webui.engine.batching
print("engine imports ok")
PY
nvidia-smi --query-gpu=name,driver_version,memory.used,memory.total --format=csv | tee -a $OUT/env.txt
python3 -m bench.serving.random_models /tmp/g --device cuda --models smollm2-1.7b --tokenizer .gpu/tok 2>&1 | tail -2
NAME=$(python3 -c "import yaml;print(yaml.safe_load(open('/tmp/g/models.yaml'))['models'][0]['name'])")
echo "model: $NAME"
timeout 330 python3 -m bench.serving.batch_speed /tmp/g/models.yaml "$NAME" --levels 1,4,16 --tokens 64 --out $OUT/batch-speed-h200.json 2>&1 | grep -v "Loading weights" | tee $OUT/batch-speed.log | tail -40
timeout 100 python3 -m bench.serving.batching_parity /tmp/g/models.yaml --tokens 48 --out $OUT/parity-h200.json 2>&1 | grep -v "Loading weights" | tail -8
echo done
