"""How the app starts a vLLM OpenAI-compatible server for one model (run by webui.engine.process).

Usually with the interpreter of a virtualenv of its own (.venv-vllm): vLLM pins its own torch and
transformers, which must not decide ours.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True)
class ServerConfig:
    python: str  # the interpreter that has vLLM installed
    model_dir: Path
    served_name: str
    max_model_len: int
    log_file: Path
    cache_root: Path  # VLLM_CACHE_ROOT: compile caches stay beside the app's other caches
    dtype: str = "auto"
    enforce_eager: bool = True
    kv_cache_gb: int | None = None  # CPU: VLLM_CPU_KVCACHE_SPACE
    gpu_memory_utilization: float | None = None
    max_num_seqs: int | None = None
    cpu_cores: str | None = None  # CPU: VLLM_CPU_OMP_THREADS_BIND, e.g. "0" or "0-3"
    extra_args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)

    label = "vLLM"

    @property
    def supervisor_python(self) -> str:
        return self.python

    def server_command(self, port: int) -> list[str]:
        args = [
            self.python,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            str(self.model_dir),
            "--served-model-name",
            self.served_name,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--max-model-len",
            str(self.max_model_len),
            "--dtype",
            self.dtype,
            "--generation-config",
            "vllm",
            "--disable-uvicorn-access-log",
        ]
        if self.enforce_eager:
            args.append("--enforce-eager")
        if self.gpu_memory_utilization is not None:
            args += ["--gpu-memory-utilization", str(self.gpu_memory_utilization)]
        if self.max_num_seqs is not None:
            args += ["--max-num-seqs", str(self.max_num_seqs)]
        return [*args, *self.extra_args]

    def environment(self) -> dict[str, str]:
        env = {
            **os.environ,
            "VLLM_CACHE_ROOT": str(self.cache_root),
            "HF_HUB_OFFLINE": "1",
            "TORCHINDUCTOR_CACHE_DIR": str(self.cache_root / "inductor"),
            "VLLM_NO_USAGE_STATS": "1",
            "DO_NOT_TRACK": "1",
            "PYTHONUNBUFFERED": "1",
            "VLLM_LOGGING_PREFIX": f"[vllm {self.served_name}] ",
        }
        if self.kv_cache_gb is not None:
            env["VLLM_CPU_KVCACHE_SPACE"] = str(int(self.kv_cache_gb))  # vLLM reads a whole number of GiB
        if not self.enforce_eager:
            env["VLLM_USE_AOT_COMPILE"] = "0"  # its saved graphs fail to load (0.32, CPU); Inductor's cache works
        if self.cpu_cores:
            env["VLLM_CPU_OMP_THREADS_BIND"] = self.cpu_cores
        env.pop("PYTHONPATH", None)  # the app's path must not leak into vLLM's own environment
        env.update(self.env)
        return env
