"""No torch and no transformers in the app's process when no model runs on transformers: a model on
vLLM is prompted through `tokenizers` and jinja2 (webui.engine.folder_tokenizer), a remote one
through its server. The app runs as `python -m webui` does, with a model on vLLM (the stand-in
server, behind a stand-in vLLM package that answers the app's probe as vLLM does) and a remote
model; both serve a chat, and at its exit the app says what it imported. (llama.cpp's models:
tests/integration/test_llamacpp.py, with the real demo models.)"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import httpx

from tests.servers import answers_ok, free_port, wait_for, wait_models_ready
from webui.config import PACKAGE_DIR

ROOT = PACKAGE_DIR.parent
FAKE = ROOT / "tests" / "fakes" / "fake_vllm_server.py"
# `python -m webui`, which writes at its exit which modules of torch and transformers it imported
WATCHED_APP = """
import atexit, json, os, runpy, sys

def _report():
    with open(os.environ["ARENA_TEST_IMPORTED"], "w") as out:
        json.dump(sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "transformers")), out)

atexit.register(_report)
runpy.run_module("webui", run_name="__main__", alter_sys=True)
"""
# What the app's probe imports of vLLM (webui.engine.vllm._PROBE), as a package of a few lines
STAND_IN_VLLM = {
    "__init__.py": "__version__ = '0.0-stand-in'\n",
    "model_executor/__init__.py": "",
    "model_executor/models/__init__.py": (
        "class ModelRegistry:\n    @staticmethod\n    def get_supported_archs():\n        return ['LlamaForCausalLM']\n"
    ),
    "platforms/__init__.py": "import types\ncurrent_platform = types.SimpleNamespace(device_type='cpu')\n",
    "entrypoints/__init__.py": "",
    "entrypoints/openai/__init__.py": "",
}


def _stand_in_vllm_python(tmp_path: Path) -> Path:
    """An interpreter (a script) that finds the stand-in `vllm` package, as .venv-vllm/bin/python
    finds the real one."""
    package = tmp_path / "site" / "vllm"
    for name, text in STAND_IN_VLLM.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text)
    shutil.copy(FAKE, package / "entrypoints" / "openai" / "api_server.py")
    python = tmp_path / "vllm-python"
    python.write_text(f'#!/bin/sh\nPYTHONPATH={tmp_path / "site"} exec {sys.executable} "$@"\n')
    python.chmod(0o755)
    return python


def _chat(port: int, model: str, text: str) -> str:
    body = {"model": model, "max_tokens": 8, "messages": [{"role": "user", "content": text}]}
    reply = httpx.post(f"http://127.0.0.1:{port}/v1/chat/completions", json=body, timeout=60)
    assert reply.status_code == 200, reply.text
    return str(reply.json()["choices"][0]["message"]["content"])


def test_models_on_vllm_and_remote_servers_leave_torch_and_transformers_out_of_the_app(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    remote_port = free_port()
    remote = subprocess.Popen(
        [sys.executable, str(FAKE), "--port", str(remote_port), "--served-model-name", "far-model"],
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    port, log, imported = free_port(), tmp_path / "app.log", tmp_path / "imported.json"
    models = tmp_path / "models.yaml"
    models.write_text(
        "models:\n"
        f"  - {{name: on-vllm, backend: vllm, source: {tiny_model_dir}, template: chat_template}}\n"
        f"  - {{name: remote, backend: openai, base_url: 'http://127.0.0.1:{remote_port}/v1', remote_model: far-model}}\n"
    )
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "ARENA_VLLM_PYTHON": str(_stand_in_vllm_python(tmp_path))}
    env.update(PYTHONPATH=str(ROOT), ARENA_TEST_IMPORTED=str(imported), ARENA_LLAMA_SERVER="none")
    command = [sys.executable, "-c", WATCHED_APP, "--port", str(port), "--models", str(models)]
    command += ["--log-dir", str(tmp_path / "logs"), "--cache-dir", str(tmp_path / "cache")]
    with log.open("wb") as out:
        app = subprocess.Popen(command, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_for(lambda: answers_ok(f"http://127.0.0.1:{remote_port}/health"), 30, "no remote")
        wait_models_ready("the app", app, port, log)
        engines = {n: m["engine"] for n, m in httpx.get(f"http://127.0.0.1:{port}/healthz").json()["models"].items()}
        assert engines["on-vllm"].startswith("vLLM 0.0-stand-in"), engines
        # the stand-in engine replies with the token ids it received: our template's, tokenized here
        assert _chat(port, "on-vllm", "hello cat").split() == [
            "5",
            "8",
            "12",
            "7",
            "6",
        ]  # <|user|> hello cat <|end|> <|assistant|>
        assert _chat(port, "remote", "red green blue") == "red green blue "
        app.send_signal(signal.SIGTERM)
        assert app.wait(30) == 0, log.read_text()[-3000:]
        assert json.loads(imported.read_text()) == [], "the app imported torch or transformers"
    finally:
        if app.poll() is None:
            app.kill()
        os.killpg(remote.pid, signal.SIGKILL)  # the stand-in and its worker
        remote.wait(10)
