"""The dequantised-weights cache writes a folder any loader can read: transformers (which reloads it
to the same logits) and vLLM (which needs the architecture named and tied weights stored under the
embedding's name)."""

from __future__ import annotations

import json
from pathlib import Path

import torch

from webui.models.loading import _write_cache


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
    _write_cache(model, tokenizer, tmp_path / "cache")
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
