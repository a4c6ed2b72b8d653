"""Loader threads that reach transformers at the same moment all get it.

transformers fills its namespace lazily and not thread-safely: with the registry's parallel loader
threads, a cold start lost SmolLM2 to "cannot import name 'GGUF_CONFIG_ARCHS' from
'transformers.integrations.gguf'" (and, reproduced alone, "cannot import name 'AutoConfig' from
'transformers'"). Each case runs in a fresh interpreter, where transformers is not imported yet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

# Eight threads released together, as loader threads are: each does what a loader does first (the
# engine module's imports, or the names from_pretrained(gguf_file=...) imports before it reads the
# file: reading the file is slow and adds nothing to the race). Without the lock this failed in
# every run tried.
SCRIPT = """
import json, threading
from webui.models.loading import import_transformers

start, errors = threading.Barrier(8), []

def engine_module():
    import webui.engine.transformers  # noqa: F401

def gguf_config():
    import_transformers()
    from transformers import AutoConfig, AutoTokenizer  # noqa: F401
    from transformers.integrations.gguf import GGUF_CONFIG_ARCHS  # noqa: F401
    from transformers.modeling_gguf_pytorch_utils import load_gguf_checkpoint  # noqa: F401

def run(work):
    start.wait()
    try:
        work()
    except Exception as exc:
        errors.append(repr(exc))

threads = [threading.Thread(target=run, args=(engine_module if i % 2 else gguf_config,)) for i in range(8)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print(json.dumps(errors))
"""


def test_loader_threads_importing_transformers_at_once_all_get_it() -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(ROOT)}
    for _ in range(2):  # a race: twice, though without the lock one run has always been enough
        done = subprocess.run(
            [sys.executable, "-c", SCRIPT], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300
        )
        assert done.returncode == 0, done.stderr[-2000:]
        errors = json.loads(done.stdout.strip().splitlines()[-1])
        assert errors == [], errors
