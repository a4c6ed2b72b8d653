"""The dequantised-weights cache writes a folder any loader can read: transformers (which reloads it
to the same logits) and vLLM (which needs the architecture named and tied weights stored under the
embedding's name)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from webui.models.loading import _write_cache
from webui.models.sources import ResolvedSource


def _tied_tiny(folder: Path):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from tests.tiny import build_tiny_model

    source = build_tiny_model(folder / "src")
    config = LlamaConfig.from_pretrained(source, tie_word_embeddings=True)
    torch.manual_seed(1)
    model = LlamaForCausalLM(config).eval()
    model.lm_head.weight = model.model.embed_tokens.weight  # tied, as the GGUF models' are
    assert model.lm_head.weight.data_ptr() == model.model.embed_tokens.weight.data_ptr()
    return model, AutoTokenizer.from_pretrained(source)


def test_the_cache_folder_names_its_architecture_and_keeps_the_embedding(tmp_path: Path) -> None:
    from safetensors import safe_open
    from transformers import AutoModelForCausalLM

    model, tokenizer = _tied_tiny(tmp_path)
    _write_cache(model, tokenizer, tmp_path / "cache", ResolvedSource(tmp_path / "src", None))
    folder = tmp_path / "cache"
    assert (folder / ".complete").is_file()
    assert json.loads((folder / "config.json").read_text())["architectures"] == ["LlamaForCausalLM"]
    with safe_open(str(folder / "model.safetensors"), "pt") as weights:
        keys = set(weights.keys())
    assert "model.embed_tokens.weight" in keys and "lm_head.weight" not in keys
    reloaded = AutoModelForCausalLM.from_pretrained(folder).eval()
    ids = tokenizer("hello world the cat", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.allclose(model(ids).logits, reloaded(ids).logits)


def _entry(root: Path, name: str, record: dict | None) -> Path:
    folder = root / name
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(b"weights")
    (folder / ".complete").write_text(json.dumps(record) if record is not None else "", encoding="utf-8")
    return folder


def test_only_folders_whose_source_is_gone_or_changed_are_removed(tmp_path: Path) -> None:
    from webui.models.cache_records import prune_stale

    files = tmp_path / "files"
    files.mkdir()
    for name in ("kept.gguf", "changed.gguf", "gone.gguf"):
        (files / name).write_bytes(b"GGUF" + name.encode())
    root = tmp_path / "dequantised"
    kept = _entry(root, "kept", ResolvedSource(files, "kept.gguf").identity())
    changed = _entry(root, "changed", ResolvedSource(files, "changed.gguf").identity())
    gone = _entry(root, "gone", ResolvedSource(files, "gone.gguf").identity())
    unrecorded = _entry(root, "written-before-records", None)
    staging = _entry(root, ".tmp-half", {"source": str(files / "nowhere.gguf"), "size": 1, "mtime_ns": 1})
    (files / "changed.gguf").write_bytes(b"GGUF, another quantisation")
    (files / "gone.gguf").unlink()
    this_one = _entry(root, "this-one", {"source": str(files / "gone.gguf"), "size": 1, "mtime_ns": 1})

    removed = prune_stale(root, keep=this_one)

    assert sorted(p.name for p in removed) == ["changed", "gone"]
    assert not changed.exists() and not gone.exists()
    assert all(p.is_dir() for p in (kept, unrecorded, staging, this_one))


def test_writing_a_cache_records_its_source_and_clears_a_reinstall_s_leftover(tmp_path: Path) -> None:

    model, tokenizer = _tied_tiny(tmp_path)
    old_install, new_install = tmp_path / "venv-old", tmp_path / "venv-new"
    for install in (old_install, new_install):
        install.mkdir()
        (install / "m.gguf").write_bytes(b"GGUF the same weights")
    root = tmp_path / "cache" / "dequantised"
    _write_cache(model, tokenizer, root / "m-old", ResolvedSource(old_install, "m.gguf"))
    assert json.loads((root / "m-old" / ".complete").read_text())["source"] == str((old_install / "m.gguf").resolve())
    (old_install / "m.gguf").unlink()  # the old virtualenv removed

    _write_cache(model, tokenizer, root / "m-new", ResolvedSource(new_install, "m.gguf"))

    assert sorted(p.name for p in root.iterdir()) == ["m-new"]
