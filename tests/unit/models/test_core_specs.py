"""The models file: every mistake names the file, the entry and the key."""

from __future__ import annotations

from pathlib import Path

import pytest

from webui.config import Settings, settings_from_cli
from webui.errors import ConfigError, ParamError
from webui.models.specs import load_specs, parse_specs
from webui.types import SamplingParams


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "models.yaml"
    path.write_text(text)
    return path


def test_full_entry_is_parsed(tmp_path: Path) -> None:
    (tmp_path / "chat.jinja").write_text("{{ messages[0]['content'] }}")
    path = _write(
        tmp_path,
        """
models:
  - name: a
    source: ./weights
    dtype: bf16
    device: {max_memory: {0: 10GiB, cuda:1: 512MiB}}
    template: jinja:./chat.jinja
    system_prompt: Be brief.
    context_length: 4096
    stop: ["###"]
    weight: 2
    max_concurrency: 3
    sampling: {temperature: 0.2, top_p: 0.5, top_k: 40, max_new_tokens: 64, repetition_penalty: 1.1, seed: 7}
""",
    )
    (spec,) = load_specs(path)
    assert spec.source == str(tmp_path / "weights")
    assert spec.dtype == "bf16"
    assert dict(spec.device.max_memory or {}) == {"0": "10GiB", "1": "512MiB"}
    assert spec.template == f"jinja:{tmp_path / 'chat.jinja'}"
    assert spec.sampling == SamplingParams(
        temperature=0.2, top_p=0.5, top_k=40, max_new_tokens=64, repetition_penalty=1.1, seed=7, stop=("###",)
    )
    assert (spec.weight, spec.max_concurrency, spec.context_length) == (2.0, 3, 4096)


def test_variants_share_a_weights_key() -> None:
    a, b, c = parse_specs(
        {
            "models": [
                {"name": "a", "source": "/m", "system_prompt": "x"},
                {"name": "b", "source": "/m", "template": "fschat:zero_shot"},
                {"name": "c", "source": "/m", "dtype": "fp16"},
            ]
        }
    )
    assert a.weights_key == b.weights_key != c.weights_key


@pytest.mark.parametrize(
    ("entry", "key"),
    [
        ({"name": "a", "source": "/m", "colour": "red"}, "colour"),
        ({"name": "a", "source": "/m", "dtype": "int3"}, "dtype"),
        ({"name": "a", "source": "/m", "device": "tpu"}, "device"),
        ({"name": "a", "source": "/m", "device": {"max_memory": {0: "lots"}}}, "device.max_memory"),
        ({"name": "a", "source": "/m", "template": "guess"}, "template"),
        ({"name": "a", "source": "/m", "template": "jinja:/nope.jinja"}, "template"),
        ({"name": "a", "source": "/m", "weight": -1}, "weight"),
        ({"name": "a", "source": "/m", "context_length": "long"}, "context_length"),
        ({"name": "a", "source": "/m", "sampling": {"temperature": 3}}, "sampling.temperature"),
        ({"name": "a", "source": "/m", "sampling": {"temprature": 1}}, "sampling.temprature"),
        ({"name": "a", "source": "/m", "stop": [""]}, "stop"),
        ({"name": "a"}, "source"),
        ({"name": "a", "backend": "magic", "source": "/m"}, "backend"),
        ({"name": "a", "backend": "openai", "base_url": "http://x"}, "remote_model"),
        # a remote server applies its own template: saying one here would be silently ignored
        (
            {
                "name": "a",
                "backend": "openai",
                "base_url": "http://x",
                "remote_model": "m",
                "template": "fschat:zero_shot",
            },
            "template",
        ),
        ({"name": "a", "backend": "openai", "base_url": "http://x", "remote_model": "m", "dtype": "fp16"}, "dtype"),
        ({"name": "a", "source": "/m", "sampling": {"temperature": "0.5"}}, "sampling.temperature"),
        ({"name": "a", "source": "/m", "weight": True}, "weight"),
    ],
)
def test_bad_entries_name_file_entry_and_key(entry: dict, key: str) -> None:
    with pytest.raises(ConfigError) as info:
        parse_specs({"models": [entry]}, origin="my.yaml")
    message = str(info.value)
    assert message.startswith("my.yaml: models[0] (a)")
    assert f"key '{key}'" in message


def test_duplicate_names_and_bad_shapes() -> None:
    with pytest.raises(ConfigError, match="duplicate name"):
        parse_specs({"models": [{"name": "a", "source": "/m"}, {"name": "a", "source": "/n"}]})
    with pytest.raises(ConfigError, match="'models'"):
        parse_specs({"modles": []})
    with pytest.raises(ConfigError, match="empty"):
        parse_specs({"models": []})
    with pytest.raises(ConfigError, match="name"):
        parse_specs({"models": [{"source": "/m"}]})


def test_broken_yaml_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="not valid YAML") as info:
        load_specs(_write(tmp_path, "models: [\n  - name: a\n"))
    assert str(tmp_path / "models.yaml") in str(info.value)
    with pytest.raises(ConfigError, match="cannot read"):
        load_specs(tmp_path / "missing.yaml")


@pytest.mark.parametrize(
    ("changes", "param"),
    [
        ({"temperature": -0.1}, "temperature"),
        ({"temperature": 2.5}, "temperature"),
        ({"top_p": 0}, "top_p"),
        ({"top_p": 1.2}, "top_p"),
        ({"top_k": -1}, "top_k"),
        ({"max_new_tokens": 0}, "max_new_tokens"),
        ({"max_new_tokens": 5000}, "max_new_tokens"),
        ({"repetition_penalty": 0}, "repetition_penalty"),
        ({"repetition_penalty": 2.5}, "repetition_penalty"),
        ({"seed": -3}, "seed"),
        ({"temperature": float("nan")}, "temperature"),
        ({"top_k": 1.5}, "top_k"),
    ],
)
def test_sampling_ranges_name_the_parameter(changes: dict, param: str) -> None:
    with pytest.raises(ParamError) as info:
        SamplingParams().replace(**changes).validate(context_length=4096)
    assert info.value.param == param
    assert str(info.value).startswith(param)


def test_sampling_edges_are_accepted() -> None:
    SamplingParams(temperature=0, top_p=1.0, top_k=0, max_new_tokens=4096, repetition_penalty=2.0, seed=0).validate(
        4096
    )
    SamplingParams(temperature=2.0, top_p=0.01, max_new_tokens=1).validate(4096)
    with pytest.raises(ParamError, match="unknown"):
        SamplingParams().replace(temp=1)


def test_settings_from_env_and_cli(tmp_path: Path) -> None:
    env = {"ARENA_PORT": "8001", "ARENA_SHARE": "yes", "ARENA_LOG_DIR": str(tmp_path)}
    settings = settings_from_cli(["--port", "9000"], environ=env)
    assert (settings.port, settings.share, settings.log_dir) == (9000, True, tmp_path)
    with pytest.raises(ConfigError, match="ARENA_PORT"):
        Settings.from_env({"ARENA_PORT": "eighty"})
    with pytest.raises(ConfigError, match="port"):
        Settings(port=0)


def test_the_published_schema_is_current_and_checks_a_file() -> None:
    """assets/models.schema.json is what editors validate against: it must match the code."""
    import json

    import jsonschema
    import yaml

    from webui.models.entries import models_schema

    root = Path(__file__).resolve().parents[3]
    published = json.loads((root / "assets" / "models.schema.json").read_text())
    assert published == models_schema(), "regenerate: python -m webui.models.entries > assets/models.schema.json"
    for name in ("models.yaml", "models-remote.example.yaml"):
        jsonschema.validate(yaml.safe_load((root / "assets" / name).read_text()), published)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"models": [{"name": "a", "source": "/m", "colour": "red"}]}, published)
